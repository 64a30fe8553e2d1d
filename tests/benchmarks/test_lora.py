"""The peft LoRA baseline: same MLPs, iso-parameter rank checked against real peft models."""

from __future__ import annotations

import copy

import pytest
import torch
from torch import nn

from adapters import DiagonalSSM, HRMConfig, find_adapters, inject
from adapters.exceptions import AdapterConfigError
from adapters.injection import get_nb_trainable_parameters
from benchmarks.hrm.lora import (
    count_hrm_parameters,
    count_lora_parameters,
    iso_parameter_lora_rank,
    lora_target_linears,
    make_lora_model,
)

transformers = pytest.importorskip("transformers", reason="extra 'hf' not installed")
peft = pytest.importorskip("peft", reason="extra 'hf' not installed")

H = 32


def tiny(kind: str) -> nn.Module:
    torch.manual_seed(0)
    if kind == "gpt2":
        cfg = transformers.GPT2Config(n_layer=2, n_embd=H, n_head=2, vocab_size=64,
                                      bos_token_id=0, eos_token_id=0)
        return transformers.GPT2LMHeadModel(cfg).eval()
    cfg = transformers.LlamaConfig(hidden_size=H, intermediate_size=64, num_hidden_layers=2,
                                   num_attention_heads=2, num_key_value_heads=1, vocab_size=64,
                                   bos_token_id=0, eos_token_id=0)
    return transformers.LlamaForCausalLM(cfg).eval()


@pytest.mark.parametrize("kind", ["gpt2", "llama"])
def test_targets_are_the_linears_of_the_same_mlps(kind):
    model = tiny(kind)
    cfg = HRMConfig(d_state=8, layers_to_skip=(0,))
    names = list(lora_target_linears(model, cfg))
    prefix = "transformer.h.1.mlp." if kind == "gpt2" else "model.layers.1.mlp."
    assert names and all(n.startswith(prefix) for n in names)
    adapted = inject(copy.deepcopy(model), cfg)
    assert [n.replace(".mlp.mlp.", ".mlp.") for n in lora_target_linears(adapted)] == names


@pytest.mark.parametrize(("kind", "d_state"), [("gpt2", 8), ("gpt2", 32), ("llama", 16)])
def test_iso_parameter_rank_is_the_brute_force_best_peft_model(kind, d_state):
    cfg = HRMConfig(d_state=d_state)
    model = tiny(kind)
    hrm = count_hrm_parameters(model, cfg)
    assert hrm == get_nb_trainable_parameters(inject(tiny(kind), cfg))[0]
    counts = {}
    for r in range(1, 9):  # real peft models, counted by peft
        lora = make_lora_model(tiny(kind), r, config=cfg)
        counts[r] = get_nb_trainable_parameters(lora)[0]
        assert counts[r] == count_lora_parameters(lora_target_linears(model, cfg), r)
    best = min(counts, key=lambda r: (abs(counts[r] - hrm), r))
    rank = iso_parameter_lora_rank(model, cfg)
    print(f"{kind} N={d_state}: HRM {hrm} params -> LoRA rank {rank} ({counts[rank]} params)")
    assert rank == best


def test_iso_rank_uses_the_real_sizes_of_reduced_adapters():
    model = inject(tiny("llama"), HRMConfig(d_state=32))
    full = iso_parameter_lora_rank(model)
    for a in find_adapters(model).values():  # reduced to 2 real modes per layer
        a.adapter.ssm = DiagonalSSM.from_discrete(torch.tensor([0.5, 0.9]), torch.randn(2, H),
                                                  torch.randn(H, 2))
    assert count_hrm_parameters(model) == 2 * (2 * 2 * H + 2 * 2 + 1)
    assert iso_parameter_lora_rank(model) < full


def test_lora_model_starts_at_the_base_and_trains_only_lora():
    model = tiny("llama")
    ids = torch.randint(0, 64, (2, 7))
    with torch.no_grad():
        base = model(ids).logits
    lora = make_lora_model(model, 2)
    with torch.no_grad():
        assert torch.equal(lora(input_ids=ids).logits, base)  # peft's B = 0
    trainable = [n for n, p in lora.named_parameters() if p.requires_grad]
    assert trainable and all("lora_" in n and ".mlp." in n for n in trainable)
    with pytest.raises(AdapterConfigError, match="HRM adapters"):
        make_lora_model(inject(tiny("llama"), HRMConfig(d_state=4)), 2)
    with pytest.raises(AdapterConfigError, match="`rank`"):
        make_lora_model(tiny("llama"), 0)
