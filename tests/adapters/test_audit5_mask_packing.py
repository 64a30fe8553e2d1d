"""Packing by a custom 4-D attention mask: each sequence's adapters start from the zero state.

Several examples in one row, kept apart by a block-diagonal ``attention_mask`` of shape
(B, 1, L, L) (a common packing recipe with SDPA/eager attention): the base model follows the
mask, so each example's logits equal those of the example alone (0.0). Before, the adapters
ran one scan over the whole row: the second example was 0.46 away from itself alone (llama),
in training and in eval mode, and ``calibrate`` failed on such batches. The restarts are now
read off the mask (:func:`adapters._packing.mask_starts`), as they are off restarting
``position_ids`` for padding-free batches.
"""

from __future__ import annotations

import pytest
import torch

from adapters import HRMConfig, calibrate, find_adapters, inject
from adapters._packing import mask_starts
from tests.adapters._tiny import tiny_causal_lm

pytest.importorskip("transformers", reason="the 'hf' extra is not installed")

G = torch.Generator().manual_seed(0)
SEQS = [torch.randint(3, 64, (n,), generator=G) for n in (5, 4, 3)]


def _packed():
    """One row of the three sequences: ids (1, L), block-diagonal mask (1, 1, L, L), positions."""
    seg = torch.cat([torch.full((len(s),), i) for i, s in enumerate(SEQS)])
    causal = torch.ones(len(seg), len(seg), dtype=torch.bool).tril()
    mask = (seg[:, None] == seg[None, :]) & causal
    pos = torch.cat([torch.arange(len(s)) for s in SEQS])
    return torch.cat(SEQS)[None], mask[None, None], pos[None]


def _adapted(kind, mode="complex"):
    torch.manual_seed(0)
    model = inject(tiny_causal_lm(kind), HRMConfig(d_state=4, gate_init=0.5, mode=mode))
    with torch.no_grad():
        for i, adapted in enumerate(find_adapters(model).values()):
            g = torch.Generator().manual_seed(i)
            for q in adapted.adapter.ssm.parameters():
                if q.dim() == 2:  # the input and output maps
                    q.add_(torch.randn(q.shape, generator=g))
    return model


@pytest.mark.parametrize("training", [True, False], ids=["train", "eval"])
@pytest.mark.parametrize("kind", ["llama", "qwen2"])
def test_logits_of_a_mask_packed_row_equal_each_sequence_alone(kind, training):
    model = _adapted(kind).train(training)
    ids, mask, pos = _packed()
    with torch.no_grad():
        alone = torch.cat([model(s[None], use_cache=False).logits for s in SEQS], 1)
        packed = model(ids, attention_mask=mask, position_ids=pos).logits
    assert (packed - alone).abs().max() < 1e-5


def test_training_on_a_mask_packed_row_gives_the_gradients_of_the_sequences_alone():
    model = _adapted("llama").train()
    ids, mask, pos = _packed()
    params = [p for a in find_adapters(model).values() for p in a.adapter.parameters()]
    w = torch.randn(1, ids.shape[1], 64, generator=torch.Generator().manual_seed(1))

    def grads(logits):
        model.zero_grad()
        (logits * w).sum().backward()
        return torch.cat([p.grad.flatten() for p in params])

    packed = grads(model(ids, attention_mask=mask, position_ids=pos).logits)
    alone = grads(torch.cat([model(s[None]).logits for s in SEQS], 1))
    assert torch.allclose(packed, alone, rtol=1e-4, atol=1e-6)


def test_calibrating_a_mask_packed_row_equals_calibrating_its_sequences():
    model = _adapted("llama")
    ids, mask, pos = _packed()
    packed = calibrate(model, [{"input_ids": ids, "attention_mask": mask,
                                "position_ids": pos}], progress=False)
    alone = calibrate(model, [s[None] for s in SEQS], progress=False)
    for name in alone:
        assert packed[name].count == alone[name].count == sum(len(s) for s in SEQS)
        P, Q = packed[name].state_covariance(), alone[name].state_covariance()
        assert abs(P - Q).max() <= 1e-6 * abs(Q).max()


def test_masks_that_pack_nothing_give_no_restart():
    causal = torch.ones(5, 5, dtype=torch.bool).tril()
    left = causal.clone()
    left[:, :2] = False  # two left pads (keys masked; a pad query sees not even itself)
    window = causal & ~torch.ones(5, 5, dtype=torch.bool).tril(-3)  # sliding window of 3
    additive = torch.zeros(5, 5).masked_fill(~causal, float("-inf"))
    for m in (causal, left, window, additive):
        assert mask_starts(m[None, None], 5, 1) is None
    _, block, _ = _packed()
    assert mask_starts(block, 12, 2).tolist() == [[0] * 5 + [5] * 4 + [9] * 3] * 2
    assert mask_starts(block.float().log(), 12, 1).tolist() == [[0] * 5 + [5] * 4 + [9] * 3]
