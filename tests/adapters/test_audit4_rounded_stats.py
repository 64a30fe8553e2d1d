"""Statistics calibrated on float64 adapters fit the same adapters after ``model.float()``.

Before: ``calibrate`` of a float64 model, then ``model.float()`` (the adapters' values rounded
to float32, nothing else changed), then ``reduce(gramian="data", stats=...)`` ->
``AdapterConfigError the adapter 'model.layers.0.mlp' changed since calibration``. The
statistics now also record the float32-rounded fingerprint of a float64 adapter; a real change
after the cast is still refused, and the record survives save/load and merge.
"""

from __future__ import annotations

import copy

import numpy as np
import pytest
import torch

from adapters import CalibrationStats, HRMConfig, calibrate, find_adapters, inject, reduce
from adapters.exceptions import AdapterConfigError
from tests.adapters._tiny import tiny_causal_lm

pytest.importorskip("transformers", reason="the 'hf' extra is not installed")


def _calibrated_double():
    torch.manual_seed(1)
    model = inject(tiny_causal_lm("llama").double(),
                   HRMConfig(d_state=4, gate_init=0.3, dtype="float64"))
    ssm = find_adapters(model)["model.layers.0.mlp"].adapter.ssm
    assert not torch.equal(ssm.B.float().double(), ssm.B)  # values float32 cannot hold
    ids = torch.randint(0, 64, (2, 12), generator=torch.Generator().manual_seed(2))
    return model, calibrate(model, [ids], progress=False)


def test_float64_statistics_fit_after_model_float_and_not_after_a_change(tmp_path):
    model, stats = _calibrated_double()
    want = reduce(copy.deepcopy(model), gramian="data", stats=stats, order=2)
    model.float()
    loaded = CalibrationStats.load(stats.save(tmp_path / "s.npz"))
    got = reduce(copy.deepcopy(model), gramian="data", stats=loaded, order=2)
    for g, w in zip(got.layers, want.layers, strict=True):
        assert np.allclose(g.hsv, w.hsv, rtol=1e-5, atol=0)  # float32 rounding of A, B, C
    for name in stats:
        assert stats.merge(stats)[name].rounded_fingerprint == stats[name].rounded_fingerprint
    with torch.no_grad():
        find_adapters(model)["model.layers.0.mlp"].adapter.ssm.B.mul_(1.001)
    with pytest.raises(AdapterConfigError, match="changed since calibration"):
        reduce(model, gramian="data", stats=stats, order=2)


def test_float32_statistics_record_no_rounded_fingerprint():
    torch.manual_seed(1)
    model = inject(tiny_causal_lm("llama"), HRMConfig(d_state=4))
    stats = calibrate(model, [torch.zeros(1, 4, dtype=torch.long)], progress=False)
    assert all(stats[n].rounded_fingerprint is None for n in stats)
    assert "rounded_fingerprint" not in stats.state_dict()["meta"]["layers"]["model.layers.0.mlp"]
