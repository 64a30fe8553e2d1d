"""Attention masks of any dtype on the fast decode path: the newest token's mask is read through
a numpy view on CPU (no torch dispatch), with a torch fallback where numpy has no dtype
(bfloat16)."""

from __future__ import annotations

import pytest
import torch

from adapters import find_adapters
from adapters import generation as gen_mod
from adapters.generation import get_adapter_states

pytest.importorskip("transformers", reason="the 'hf' extra (transformers) is not installed")
from transformers import DynamicCache  # noqa: E402

from tests.adapters.test_decode import _ids, _model  # noqa: E402

DTYPES = [torch.long, torch.bool, torch.float32, torch.bfloat16]


def _run(model, seq, mask_of, *, pad_last):
    """Prefill 5 tokens, then 3 one-token calls with a mask made by ``mask_of``; per call, the
    plan (None = general path), the logits and the adapter states."""
    plans = []
    original = gen_mod.AdapterRuntime._plan

    def plan(self, ctx):
        p = original(self, ctx)
        plans.append(p)
        return p

    logits, states = [], []
    with torch.no_grad(), pytest.MonkeyPatch.context() as mp:
        mp.setattr(gen_mod.AdapterRuntime, "_plan", plan)
        cache = DynamicCache(config=model.config)
        model(seq[:, :5], cache=cache)
        for t in range(5, 8):
            mask = torch.ones(seq.shape[0], t + 1)
            if pad_last:
                mask[:, -1] = 0
            logits.append(model(seq[:, t:t + 1], cache=cache, attention_mask=mask_of(mask)).logits)
            states.append(dict(next(iter(get_adapter_states(cache).values()))))
    return plans, torch.cat(logits, 1), states


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_unpadded_mask_of_any_dtype_takes_the_fast_path_with_the_same_logits(dtype):
    model = _model("real")
    seq = _ids(2, 8)
    ref_plans, ref, _ = _run(model, seq, lambda m: m.long(), pad_last=False)
    plans, got, _ = _run(model, seq, lambda m: m.to(dtype), pad_last=False)
    assert all(p is not None for p in ref_plans + plans)
    assert torch.equal(got, ref)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_padded_newest_token_of_any_dtype_takes_the_general_path_and_feeds_no_state(dtype):
    model = _model("real")
    seq = _ids(2, 8)
    plans, _, states = _run(model, seq, lambda m: m.to(dtype), pad_last=True)
    assert plans == [None, None, None]
    for name, adapted in find_adapters(model).items():
        a = adapted.adapter.ssm.discrete()[0]
        for before, after in zip(states, states[1:], strict=False):
            assert (after[name] - a * before[name]).abs().max().item() < 1e-6

