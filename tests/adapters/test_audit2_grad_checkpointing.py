"""transformers' gradient checkpointing of an adapted model gives the gradients of the plain run.

The backward pass recomputes each checkpointed block after the model call has returned; before
``adapters/_checkpointing.py`` that recomputation ran outside the adapters' context, so a padded
batch (left or right) raised torch's ``CheckpointError: A different number of tensors was saved
during the original forward and recomputation`` (non-reentrant, transformers' default), gave
other adapter gradients silently with ``use_reentrant=True`` (relative difference 0.56-0.98
with a left-padded row), and OPT (flattened stream) raised ``AdapterShapeError ... got a
flattened stream`` even without padding.
"""

from __future__ import annotations

import pytest
import torch

from adapters import HRMConfig, disable_adapter, find_adapters, inject, remove
from tests.adapters._tiny import tiny_causal_lm

pytest.importorskip("transformers", reason="the 'hf' extra (transformers) is not installed")
IDS = torch.randint(1, 64, (3, 9), generator=torch.Generator().manual_seed(3))
MASK = torch.ones_like(IDS)
MASK[0, :3] = 0  # a left-padded row
MASK[1, -2:] = 0  # a right-padded row
LABELS = IDS.masked_fill(MASK == 0, -100)


def _run(kind, checkpointing, *, mask=MASK):
    model = inject(tiny_causal_lm(kind), HRMConfig(d_state=4, gate_init=0.5)).train()
    if checkpointing is not None:
        model.gradient_checkpointing_enable(
            gradient_checkpointing_kwargs={"use_reentrant": checkpointing == "reentrant"})
    loss = model(input_ids=IDS, attention_mask=mask, labels=LABELS).loss
    loss.backward()
    grads = {f"{name}.{k}": p.grad for name, a in find_adapters(model).items()
             for k, p in a.adapter.named_parameters()}
    assert all(g is not None for g in grads.values())
    return model, loss.detach(), grads


@pytest.mark.parametrize("checkpointing", ["non-reentrant", "reentrant"])
@pytest.mark.parametrize("kind", ["gpt2", "llama", "qwen2", "mistral", "opt"])
def test_checkpointed_training_of_a_padded_batch_has_the_plain_gradients(kind, checkpointing):
    mask = None if kind == "opt" else MASK  # OPT: even the unpadded batch failed
    _, loss, want = _run(kind, None, mask=mask)
    model, got_loss, got = _run(kind, checkpointing, mask=mask)
    assert torch.equal(got_loss, loss)
    for k in want:
        torch.testing.assert_close(got[k], want[k], rtol=1e-6, atol=1e-9, msg=k)
    block = next(m for m in model.modules() if getattr(m, "gradient_checkpointing", False))
    assert type(block._gradient_checkpointing_func).__name__ == "CheckpointInContext"
    remove(model)  # the block's own checkpointing function again
    assert type(block._gradient_checkpointing_func).__name__ != "CheckpointInContext"


def test_a_forward_inside_disable_adapter_is_recomputed_without_the_branches():
    """(Before, the reentrant recomputation added the branches back and the adapters got
    gradients of a loss they took no part in.)"""
    model = inject(tiny_causal_lm("llama"), HRMConfig(d_state=4, gate_init=0.5)).train()
    model.gradient_checkpointing_enable(  # (makes the embeddings' output require grad)
        gradient_checkpointing_kwargs={"use_reentrant": True})
    with disable_adapter(model):
        loss = model(input_ids=IDS, attention_mask=MASK, labels=LABELS).loss
    loss.backward()  # outside the block: the recomputation runs without the branches too
    assert all(p.grad is None for a in find_adapters(model).values()
               for p in a.adapter.parameters())
