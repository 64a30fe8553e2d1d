"""A checkpoint of a model cast after ``inject`` loads back into that model.

``model.double()`` makes float32 adapters float64 (the dtype policy of
:class:`adapters.HRMAdapter`), and ``save_adapter`` records float64; before, ``load_adapter``
compared the checkpoint with the config recorded at ``inject`` (float32) and refused the
model's own checkpoint: ``CheckpointError the model's adapters were built with other ['dtype']
than the checkpoint: dtype='float32' vs 'float64'``.
"""

from __future__ import annotations

import pytest
import torch

from adapters import HRMConfig, find_adapters, inject, load_adapter, reduce, save_adapter
from adapters.exceptions import CheckpointError
from adapters.io import adapter_state_dict
from tests.adapters._tiny import tiny_causal_lm

pytest.importorskip("transformers", reason="the 'hf' extra (transformers) is not installed")


@pytest.mark.parametrize("reduced", [False, True])
def test_a_model_cast_to_float64_after_inject_reloads_its_own_checkpoint(reduced, tmp_path):
    model = inject(tiny_causal_lm("llama"), HRMConfig(d_state=6, gate_init=0.5))
    if reduced:
        reduce(model, order=3)
    model.double()
    assert {p.dtype for a in find_adapters(model).values() for p in a.adapter.parameters()} == {
        torch.float64}
    save_adapter(model, tmp_path)
    want = {k: v.clone() for k, v in adapter_state_dict(model).items()}
    with torch.no_grad():
        for a in find_adapters(model).values():
            a.adapter.ssm.B.add_(1.0)
    load_adapter(model, tmp_path)
    got = adapter_state_dict(model)
    assert got.keys() == want.keys() and all(torch.equal(got[k], want[k]) for k in want)

    model.float()  # a float32 model does not take the float64 values silently
    with pytest.raises(CheckpointError, match=r"dtype='float32' vs 'float64'"):
        load_adapter(model, tmp_path)
