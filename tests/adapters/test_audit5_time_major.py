"""A time-major stream, (L, B, H) as in XLNet, is refused at the first call instead of mixing
the batch.

Before: ``inject(xlnet, HRMConfig(target_modules=["ff"]))`` worked and the adapter scanned
dimension 1 of XLNet's (L, B, H) stream, i.e. across the batch: row 1 of a batch of 3 came
out 0.20 away from the same row run alone (row 0, first in the scan, 0.0), and no position
carried state to the next. Inside a model call the batch size is known, so a 3-D stream whose
dimension 1, not 0, is the batch is refused with AdapterShapeError.
"""

from __future__ import annotations

import pytest
import torch

from adapters import HRMConfig, find_adapters, inject
from adapters.exceptions import AdapterShapeError

transformers = pytest.importorskip("transformers", reason="the 'hf' extra is not installed")


def _xlnet():
    torch.manual_seed(0)
    return transformers.XLNetModel(transformers.XLNetConfig(
        d_model=32, n_layer=2, n_head=2, d_inner=64, vocab_size=64, dropout=0.0)).eval()


@pytest.mark.parametrize("batch", [1, 3])
def test_a_time_major_stream_is_refused_at_the_first_call(batch):
    model = inject(_xlnet(), HRMConfig(d_state=4, target_modules=["ff"], gate_init=0.5))
    assert list(find_adapters(model)) == ["layer.0.ff", "layer.1.ff"]
    ids = torch.randint(3, 60, (batch, 8))
    with torch.no_grad(), pytest.raises(AdapterShapeError, match=r"time-major \(L, B, H\)"):
        model(input_ids=ids)
    assert model._hrm_runtime.calls.stack == []  # the failed call left no context behind


def test_a_batch_first_stream_of_a_call_is_unaffected():
    # (B, L, H) with L = B passes (it cannot be told apart), as does the usual L != B
    model = inject(transformers.GPT2Model(transformers.GPT2Config(
        n_layer=1, n_embd=32, n_head=2, vocab_size=64)).eval(), HRMConfig(d_state=4))
    with torch.no_grad():
        for shape in ((3, 3), (3, 8), (1, 8)):
            ids = torch.randint(3, 60, shape)
            assert model(input_ids=ids).last_hidden_state.shape == (*shape, 32)
