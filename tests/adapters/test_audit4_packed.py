"""Padding-free (packed) batches: each packed sequence's adapters start from the zero state.

``transformers.DataCollatorWithFlattening`` (TRL's ``padding_free``) puts a batch's examples
into one row and restarts ``position_ids`` for each; the base model keeps them apart. Before,
the adapters ran one scan over the whole row, so each example's outputs depended on the
examples before it: packed vs separate logits `2.5e-01` (llama), `4.8e-01` (qwen2), `3.5e-01`
(gpt2) where the base model's agree to `2e-08`.
"""

from __future__ import annotations

import pytest
import torch

from adapters import HRMConfig, find_adapters, inject
from tests.adapters._tiny import tiny_causal_lm

transformers = pytest.importorskip("transformers", reason="the 'hf' extra is not installed")

G = torch.Generator().manual_seed(0)
SEQS = [torch.randint(3, 64, (n,), generator=G) for n in (5, 1, 7)]


def _adapted(kind, mode):
    torch.manual_seed(0)
    return inject(tiny_causal_lm(kind), HRMConfig(d_state=4, gate_init=0.5, mode=mode))


@pytest.mark.parametrize("mode", ["real", "complex"])
@pytest.mark.parametrize("kind", ["gpt2", "llama", "qwen2", "mistral"])
def test_packed_logits_equal_each_sequence_alone(kind, mode):
    model = _adapted(kind, mode)
    batch = transformers.DataCollatorWithFlattening(return_position_ids=True)(
        [{"input_ids": s.tolist()} for s in SEQS])
    with torch.no_grad():
        alone = torch.cat([model(s[None], use_cache=False).logits for s in SEQS], 1)
        packed = model(batch["input_ids"], position_ids=batch["position_ids"],
                       use_cache=False).logits
    assert (packed - alone).abs().max() < 1e-5


def test_packed_training_gives_the_gradients_of_the_sequences_alone():
    # (use_cache=False: with a cache, the sdpa base model itself does not keep them apart)
    model = _adapted("llama", "complex").train()
    seqs = [s for s in SEQS if len(s) > 1]  # a one-token sequence has no label
    batch = transformers.DataCollatorWithFlattening(return_position_ids=True)(
        [{"input_ids": s.tolist()} for s in seqs])
    params = [p for a in find_adapters(model).values() for p in a.adapter.parameters()]

    def grads(loss):
        model.zero_grad()
        loss.backward()
        return torch.cat([p.grad.flatten() for p in params])

    packed = grads(model(**batch, use_cache=False).loss * (batch["labels"] != -100).sum())
    alone = grads(sum(model(s[None], labels=s[None], use_cache=False).loss * (len(s) - 1)
                      for s in seqs))
    assert torch.allclose(packed, alone, rtol=1e-4, atol=1e-6)


def test_calibrating_a_packed_batch_equals_calibrating_its_sequences():
    from adapters import calibrate

    model = _adapted("llama", "complex")
    batch = transformers.DataCollatorWithFlattening(return_position_ids=True)(
        [{"input_ids": s.tolist()} for s in SEQS])
    packed = calibrate(model, [{"input_ids": batch["input_ids"],
                                "position_ids": batch["position_ids"]}], progress=False)
    alone = calibrate(model, [s[None] for s in SEQS], progress=False)
    for name in alone:
        assert packed[name].count == alone[name].count == sum(len(s) for s in SEQS)
        P, Q = packed[name].state_covariance(), alone[name].state_covariance()
        assert abs(P - Q).max() <= 1e-6 * abs(Q).max()


def test_a_packed_batch_compiles_in_one_graph():
    # before: torch.compile(fullgraph=True) stopped at the host check of packed_starts
    # ("Could not guard on data-dependent expression"); the base model's own check is skipped
    # while tracing, and so is ours (restarting with no new sequence changes nothing)
    model = _adapted("llama", "real")
    batch = transformers.DataCollatorWithFlattening(return_position_ids=True)(
        [{"input_ids": s.tolist()} for s in SEQS])
    compiled = torch.compile(model, backend="eager", fullgraph=True)
    with torch.no_grad():
        alone = torch.cat([model(s[None], use_cache=False).logits for s in SEQS], 1)
        got = compiled(batch["input_ids"], position_ids=batch["position_ids"], use_cache=False)
    assert (got.logits - alone).abs().max() < 1e-5
