"""calibrate / reduce on streams that are not ordinary data: NaN or inf, and all zero.

Before: a stream with NaN/inf (inputs, or activations that overflow: a GPT-2 fed embeddings
x 1e30) ended calibrate with lti's ``NonFiniteError `state['sum']` must be finite`` (no adapter,
no batch named); a stream that is all zero at an adapter (a Llama fed embeddings x 1e30:
RMSNorm's mean square overflows and the stream is 0; or zero embeddings) gave a zero
data-driven Gramian, and ``reduce(gramian="data")`` failed with ``AdapterShapeError ... the
reduced system cannot be installed: need N >= 1 modes ... got N = 0``. Both are now a
``CalibrationError`` that says what happened and where.
"""

from __future__ import annotations

import copy
import warnings

import pytest
import torch

from adapters import HRMConfig, calibrate, find_adapters, inject, reduce
from adapters.exceptions import AdapterConfigError, CalibrationError
from tests.adapters._tiny import tiny_causal_lm

pytest.importorskip("transformers", reason="the 'hf' extra is not installed")


def _adapted(kind):
    torch.manual_seed(1)
    return inject(tiny_causal_lm(kind), HRMConfig(d_state=4, gate_init=0.3))


def _embeds(seed=0, batch=2, length=5):
    return torch.randn(batch, length, 32, generator=torch.Generator().manual_seed(seed))


def test_a_nan_stream_is_named_with_its_adapter_batch_and_row():
    model = _adapted("llama")
    bad = _embeds(1)
    bad[1, 2, 0] = float("nan")
    with pytest.raises(CalibrationError, match=r"model\.layers\.0\.mlp.*NaN or inf.*batch 1, "
                                               r"rows \[1\]"):
        calibrate(model, [{"inputs_embeds": _embeds(0)}, {"inputs_embeds": bad}], progress=False)
    assert not any(w.adapter._forward_pre_hooks for w in find_adapters(model).values())
    assert not model.training  # modes restored


def test_activations_that_overflow_to_inf_are_refused_clearly():
    model = _adapted("gpt2")
    with pytest.raises(CalibrationError, match="NaN or inf"):
        calibrate(model, [{"inputs_embeds": _embeds() * 1e30}], progress=False)


@pytest.mark.parametrize("scale", [0.0, 1e30])  # 1e30: Llama's RMSNorm gives a zero stream
@pytest.mark.parametrize("gramian", ["data", "input"])
def test_statistics_that_never_excite_an_adapter_are_refused_by_reduce(gramian, scale):
    model = _adapted("llama")
    stats = calibrate(model, [{"inputs_embeds": _embeds() * scale}], gramian="both",
                      progress=False)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # lti: no HSV above the noise floor
        with pytest.raises(CalibrationError, match=r"'model\.layers\.0\.mlp'.*never excite"):
            reduce(model, gramian=gramian, stats=stats, order=2)
    assert find_adapters(model)["model.layers.0.mlp"].adapter.ssm.order == 4  # unchanged
    report = reduce(model, order=2)  # the exact Gramians still reduce it
    assert all(x.order_after == 2 for x in report.layers)


def test_a_tol_warning_names_the_tol_the_user_passed_and_the_gate():
    # lti warns with the tol it was given (reduce's tol / |gate|): 1e-12 / 0.3 read
    # "tol = 3.33e-12", a value the caller never passed
    model = _adapted("llama")
    with pytest.warns(UserWarning, match=r"tol = 3\.33e-12.*`tol` = 1e-12 / \|gate\| 0\.3"):
        reduce(model, tol=1e-12)


def test_statistics_still_fit_after_a_lossless_cast_and_not_after_a_change():
    # before: calibrate, then model.double() (same values), then reduce(gramian="data") ->
    # "the adapter ... changed since calibration"
    model = _adapted("llama")
    stats = calibrate(model, [{"inputs_embeds": _embeds()}], progress=False)
    want = reduce(copy.deepcopy(model), gramian="data", stats=stats, order=2)
    model.double()
    got = reduce(copy.deepcopy(model), gramian="data", stats=stats, order=2)
    assert [x.hsv for x in got.layers] == [x.hsv for x in want.layers]
    with torch.no_grad():
        find_adapters(model)["model.layers.0.mlp"].adapter.ssm.B.add_(1e-12)  # not float32
    with pytest.raises(AdapterConfigError, match="changed since calibration"):
        reduce(model, gramian="data", stats=stats, order=2)
