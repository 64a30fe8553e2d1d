"""JetMoE (and any block whose routing needs host values) takes adapters.

Before: ``inject`` refused JetMoE's ``mlp`` with "returns 4 features (by its first and last
linear layers; it could not be run on a (1, 2, 32) meta tensor to check)". The block returns
the stream width; its last registered linear layer is the router (H -> experts), and its
experts split the tokens with ``expert_size.tolist()``, which a meta tensor cannot answer. When
the meta run fails and the block's weights are resident, the width check now runs the block
once on a zero input (no gradient, random generators restored).
"""

from __future__ import annotations

import pytest
import torch
from torch import nn

from adapters import (
    HRMConfig,
    disable_adapter,
    find_adapters,
    inject,
    load_adapter,
    save_adapter,
)
from adapters.exceptions import AdapterShapeError
from adapters.targets import resolve_targets
from tests.adapters._tiny import perturbed

transformers = pytest.importorskip("transformers", reason="the 'hf' extra is not installed")

IDS = torch.tensor([[5, 9, 14, 3, 22, 41, 7], [1, 2, 60, 33, 8, 19, 11]])
MASK = torch.tensor([[0, 0, 1, 1, 1, 1, 1], [1, 1, 1, 1, 1, 1, 1]])  # row 0 left-padded


def _jetmoe(device=None):
    torch.manual_seed(0)
    cfg = transformers.JetMoeConfig(hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                                    kv_channels=16, intermediate_size=64, num_local_experts=4,
                                    num_experts_per_tok=2, vocab_size=64)
    with torch.device(device or "cpu"):
        return transformers.JetMoeForCausalLM(cfg).eval()


def test_jetmoe_is_adapted_exact_at_init_and_cached_generation_is_exact():
    model = _jetmoe()
    with torch.no_grad():
        base = model(IDS, attention_mask=MASK).logits
    inject(model, HRMConfig(d_state=4))
    assert list(find_adapters(model)) == ["model.layers.0.mlp", "model.layers.1.mlp"]
    with torch.no_grad():
        assert torch.equal(model(IDS, attention_mask=MASK).logits, base)
    perturbed(model)
    gen = {"attention_mask": MASK, "max_new_tokens": 6, "min_new_tokens": 6, "pad_token_id": 0,
           "do_sample": False}
    with torch.no_grad():
        out = model.generate(IDS, return_dict_in_generate=True, output_logits=True, **gen)
        assert torch.equal(out.sequences, model.generate(IDS, use_cache=False, **gen))
        mask = torch.cat([MASK, torch.ones(2, 6, dtype=MASK.dtype)], 1)
        full = model(out.sequences, attention_mask=mask).logits
        with disable_adapter(model):
            assert torch.equal(model(IDS, attention_mask=MASK).logits, base)
    gap = max((step - full[:, IDS.shape[1] - 1 + i]).abs().max().item()
              for i, step in enumerate(out.logits))
    assert gap < 1e-6  # measured 4.5e-08; the base model's own gap is 6.0e-08


def test_jetmoe_adapters_save_load_and_train(tmp_path):
    model = perturbed(inject(_jetmoe(), HRMConfig(d_state=4)))
    save_adapter(model, tmp_path)
    again = load_adapter(_jetmoe(), tmp_path)
    with torch.no_grad():
        assert torch.equal(again(IDS).logits, model(IDS).logits)
    model.train()
    model(IDS, labels=IDS).loss.backward()
    grads = [p.grad for p in model.parameters() if p.requires_grad]
    assert grads and all(g is not None and bool(g.abs().sum() > 0) for g in grads)


class _HostRouted(nn.Module):
    """A block that reads a host value from its input (cannot run on meta), with dropout."""

    def __init__(self, width: int = 8) -> None:
        super().__init__()
        self.up, self.down = nn.Linear(width, 2 * width), nn.Linear(2 * width, width)
        self.router = nn.Linear(width, 3)  # registered last: its width is not the output's
        self.drop = nn.Dropout(0.5)

    def forward(self, x):
        k = int(self.router(x).argmax(-1).flatten()[0].item())  # a host value
        return self.down(self.drop(torch.relu(self.up(x)))) * (1 + 0 * k)


def test_the_dry_run_keeps_the_random_generator_and_computes_no_gradient():
    model = nn.ModuleDict({"mlp": _HostRouted()}).train()  # dropout draws in training mode
    state = torch.random.get_rng_state()
    targets = resolve_targets(model, HRMConfig(d_state=4, target_modules=["mlp"], d_model=8))
    assert [(t.name, t.width) for t in targets] == [("mlp", 8)]
    # (the router, registered last, reads 3 features: only a run of the block tells its width)
    assert torch.equal(torch.random.get_rng_state(), state)
    assert all(p.grad is None for p in model.parameters())


def test_a_host_routed_block_on_the_meta_device_is_still_refused_clearly():
    with torch.device("meta"):
        model = nn.ModuleDict({"mlp": _HostRouted()})
    with pytest.raises(AdapterShapeError, match="could not be run on a"):
        inject(model, HRMConfig(d_state=4, target_modules=["mlp"], d_model=8))
