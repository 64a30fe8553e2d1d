"""inject / remove on tiny random GPT-2 and Llama models and on plain nn.Modules."""

from __future__ import annotations

import re

import pytest
import torch
from torch import nn

from adapters import HRMConfig, find_adapters, inject, print_trainable_parameters, remove, unload
from adapters.exceptions import AdapterConfigError, AdapterError, TargetModulesNotFoundError
from adapters.injection import (
    AdaptedMLP,
    find_target_modules,
    get_adapter_config,
    get_nb_trainable_parameters,
    matches_target,
)

transformers = pytest.importorskip("transformers", reason="extra 'hf' not installed")

H, N, LAYERS = 32, 8, 2


def tiny(kind: str) -> nn.Module:
    torch.manual_seed(0)
    if kind == "gpt2":
        cfg = transformers.GPT2Config(n_layer=LAYERS, n_embd=H, n_head=2, vocab_size=64,
                                      bos_token_id=0, eos_token_id=0)
        return transformers.GPT2LMHeadModel(cfg).eval()
    cfg = transformers.LlamaConfig(hidden_size=H, intermediate_size=64, num_hidden_layers=LAYERS,
                                   num_attention_heads=2, num_key_value_heads=1, vocab_size=64,
                                   bos_token_id=0, eos_token_id=0)
    return transformers.LlamaForCausalLM(cfg).eval()


MLP_NAMES = {"gpt2": ["transformer.h.0.mlp", "transformer.h.1.mlp"],
             "llama": ["model.layers.0.mlp", "model.layers.1.mlp"]}
IDS = torch.randint(0, 64, (2, 9), generator=torch.Generator().manual_seed(1))


class Block(nn.Module):
    def __init__(self, width: int) -> None:
        super().__init__()
        self.norm = nn.LayerNorm(width)
        self.ffn = nn.Sequential(nn.Linear(width, 2 * width), nn.GELU(),
                                 nn.Linear(2 * width, width))

    def forward(self, x):
        return x + self.ffn(self.norm(x))


class Plain(nn.Module):
    def __init__(self, width: int = 12, depth: int = 3) -> None:
        super().__init__()
        self.blocks = nn.ModuleList(Block(width) for _ in range(depth))

    def forward(self, x):
        for block in self.blocks:
            x = block(x)
        return x


@pytest.mark.parametrize("kind", ["gpt2", "llama"])
@pytest.mark.parametrize("extra", [{}, {"reads": "mlp_output", "mode": "complex"}])
def test_adapted_equals_base_at_init_exactly(kind, extra):
    model = tiny(kind)
    with torch.no_grad():
        base = model(IDS).logits
    inject(model, HRMConfig(d_state=N, **extra))
    assert list(find_adapters(model)) == MLP_NAMES[kind]
    with torch.no_grad():
        adapted = model(IDS).logits
    diff = (adapted - base).abs().max().item()
    print(f"{kind} {extra}: max |adapted - base| at init = {diff}")
    assert diff == 0.0


@pytest.mark.parametrize("kind", ["gpt2", "llama"])
def test_only_adapters_trainable_and_peft_format(kind, capsys):
    model = tiny(kind)
    total_base = sum(p.numel() for p in model.parameters())
    inject(model, HRMConfig(d_state=N))
    per_layer = 2 * N * H + 2 * N + 1  # B, C, log_A, log_dt, gate
    names = {n for n, p in model.named_parameters() if p.requires_grad}
    assert all(".adapter." in n for n in names) and len(names) == 5 * LAYERS
    trainable, total = get_nb_trainable_parameters(model)
    assert (trainable, total) == (LAYERS * per_layer, total_base + LAYERS * per_layer)
    print_trainable_parameters(model)
    line = capsys.readouterr().out.strip()
    want = (f"trainable params: {trainable:,d} || all params: {total:,d} || "
            f"trainable%: {100 * trainable / total:.4f}")
    assert line == want
    assert re.fullmatch(r"trainable params: [\d,]+ \|\| all params: [\d,]+ \|\| trainable%: "
                        r"\d+\.\d{4}", line)


@pytest.mark.parametrize("kind", ["gpt2", "llama"])
def test_training_changes_only_adapter_parameters(kind):
    model = tiny(kind)
    before = {k: v.clone() for k, v in model.state_dict().items()}
    inject(model, HRMConfig(d_state=N))
    model.train()
    adapter_before = {n: p.detach().clone() for n, p in model.named_parameters() if p.requires_grad}
    opt = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=1e-2)
    for _ in range(3):
        loss = model(IDS, labels=IDS, use_cache=False).loss
        loss.backward()
        opt.step()
        opt.zero_grad()
    changed = {n for n, p in model.named_parameters()
               if p.requires_grad and not torch.equal(p, adapter_before[n])}
    assert changed == set(adapter_before)  # every adapter tensor moved (gate first, then B, C)
    remove(model)
    after = model.state_dict()
    assert after.keys() == before.keys()
    assert all(torch.equal(after[k], before[k]) for k in before)


@pytest.mark.parametrize("remover", [remove, unload])
def test_remove_restores_the_original_model_exactly(remover):
    model = tiny("gpt2")
    model.transformer.wte.weight.requires_grad_(False)  # a user's own flag must come back
    mlps = [model.transformer.h[i].mlp for i in range(LAYERS)]
    flags = {n: p.requires_grad for n, p in model.named_parameters()}
    n_hooks = (len(model._forward_pre_hooks), len(model._forward_hooks))
    with torch.no_grad():
        base = model(IDS).logits
    inject(model, HRMConfig(d_state=N, gate_init=0.5))
    with torch.no_grad():
        assert (model(IDS).logits - base).abs().max() > 1e-3  # the adapter is active
    assert remover(model) is model
    assert [model.transformer.h[i].mlp for i in range(LAYERS)] == mlps  # same objects
    assert {n: p.requires_grad for n, p in model.named_parameters()} == flags
    assert (len(model._forward_pre_hooks), len(model._forward_hooks)) == n_hooks
    assert not any(isinstance(m, AdaptedMLP) for m in model.modules())
    with torch.no_grad():
        assert torch.equal(model(IDS).logits, base)
    with pytest.raises(AdapterError, match="no HRM adapters"):
        remove(model)
    inject(model, HRMConfig(d_state=N))  # can be adapted again
    assert len(find_adapters(model)) == LAYERS


def test_matching_rule_regex_and_suffix():
    model = tiny("llama")
    assert matches_target("model.layers.0.mlp", ["mlp"])
    assert not matches_target("model.layers.0.gate_mlp", ["mlp"])
    assert matches_target("model.layers.0.mlp", ["layers.0.mlp"])
    assert not matches_target("model.layers.0.mlp", r"layers\.0\.mlp")  # fullmatch, not search
    assert find_target_modules(model) == MLP_NAMES["llama"]
    assert find_target_modules(model, r"model\.layers\.1\.mlp") == ["model.layers.1.mlp"]
    assert find_target_modules(model, ["layers.0.mlp"]) == ["model.layers.0.mlp"]
    assert find_target_modules(model, ["mlp"]) == MLP_NAMES["llama"]
    inject(model, HRMConfig(d_state=N, target_modules=r".*\.1\.mlp"))
    assert list(find_adapters(model)) == ["model.layers.1.mlp"]
    assert get_adapter_config(model).target_modules == r".*\.1\.mlp"


@pytest.mark.parametrize(("skip", "kept"), [((0,), [1]), ((-1,), [0]), ((0, 1), None)])
def test_layers_to_skip(skip, kept):
    model = tiny("gpt2")
    cfg = HRMConfig(d_state=N, layers_to_skip=skip)
    if kept is None:
        with pytest.raises(AdapterConfigError, match="removes every matched module"):
            inject(model, cfg)
        return
    inject(model, cfg)
    assert list(find_adapters(model)) == [f"transformer.h.{i}.mlp" for i in kept]


def test_nothing_matches_lists_candidates_and_model_is_untouched():
    model = Plain()
    flags = [p.requires_grad for p in model.parameters()]
    with pytest.raises(TargetModulesNotFoundError) as info:
        inject(model, HRMConfig(d_state=4, target_modules=["mlp"]))  # it has `ffn`, no `mlp`
    msg = str(info.value)
    assert "blocks.0.ffn" in msg and "blocks.2.ffn" in msg and "Plain" in msg
    for cfg, err in [
        (HRMConfig(d_state=4, target_modules=["ffn"], layers_to_skip=(7,)), "entry 7"),
        (HRMConfig(d_state=4, target_modules=r"blocks\.0(\.ffn)?"), "nested"),
    ]:
        with pytest.raises(AdapterConfigError, match=err):
            inject(model, cfg)
    assert [p.requires_grad for p in model.parameters()] == flags
    assert not any(isinstance(m, AdaptedMLP) for m in model.modules())
    assert not hasattr(model, "_hrm_runtime")


def test_plain_module_with_target_modules():
    model = Plain()
    x = torch.randn(2, 7, 12)
    with torch.no_grad():
        base = model(x)
    inject(model, HRMConfig(d_state=4, target_modules=["ffn"], layers_to_skip=(1,)))
    assert list(find_adapters(model)) == ["blocks.0.ffn", "blocks.2.ffn"]
    assert find_adapters(model)["blocks.0.ffn"].adapter.d_model == 12  # inferred from Linear
    with torch.no_grad():
        assert torch.equal(model(x), base)
        for a in find_adapters(model).values():
            a.adapter.gate.fill_(0.3)
        y = model(x)
        # causal: the output at t depends only on inputs up to t
        x2 = x.clone()
        x2[:, 5:] += 1.0
        assert torch.equal(model(x2)[:, :5], y[:, :5])
    with pytest.raises(AdapterConfigError, match="already has HRM adapters"):
        inject(model, HRMConfig(d_state=4, target_modules=["ffn"]))


def test_bf16_base_keeps_float32_adapter_and_exact_noop():
    model = tiny("llama").to(torch.bfloat16)
    with torch.no_grad():
        base = model(IDS).logits
    inject(model, HRMConfig(d_state=N))
    adapter = next(iter(find_adapters(model).values())).adapter
    assert adapter.ssm.B.dtype == torch.float32
    with torch.no_grad():
        out = model(IDS).logits
    assert out.dtype == torch.bfloat16 and torch.equal(out, base)


def test_bad_arguments():
    with pytest.raises(AdapterConfigError, match="HRMConfig"):
        inject(tiny("gpt2"), {"d_state": 4})
    with pytest.raises(AdapterConfigError, match="nn.Module"):
        inject("model", HRMConfig())
    with pytest.raises(AdapterConfigError, match="target_modules"):
        find_target_modules(tiny("gpt2"), [1, 2])


def test_deepcopy_gives_an_independent_adapted_model():
    import copy

    model = inject(tiny("gpt2"), HRMConfig(d_state=N, gate_init=0.5))
    twin = copy.deepcopy(model)
    assert find_adapters(twin)["transformer.h.0.mlp"]._runtime is twin._hrm_runtime
    assert twin._hrm_runtime is not model._hrm_runtime
    kw = {"max_new_tokens": 5, "do_sample": False, "pad_token_id": 0}
    assert torch.equal(model.generate(IDS, **kw), twin.generate(IDS, **kw))
    remove(twin)  # restores the copy's flags, leaves the original adapted
    assert all(p.requires_grad for p in twin.parameters())
    assert len(find_adapters(model)) == LAYERS
    assert not model.transformer.wte.weight.requires_grad


def test_gradient_checkpointing_gives_the_same_adapter_gradients():
    grads = []
    for checkpointing in (False, True):
        model = inject(tiny("llama"), HRMConfig(d_state=N, gate_init=0.5))
        if checkpointing:
            enable = getattr(model, "activation_checkpointing_enable", None)  # transformers 5.x
            (enable or model.gradient_checkpointing_enable)()
        model.train()
        model(IDS, labels=IDS, use_cache=False).loss.backward()
        grads.append({n: p.grad.clone() for n, p in model.named_parameters() if p.requires_grad})
    assert grads[0].keys() == grads[1].keys()
    assert all(torch.allclose(grads[0][k], grads[1][k], rtol=1e-5, atol=1e-7) for k in grads[0])


@pytest.mark.parametrize("arch", ["Mistral", "Qwen2"])
def test_other_decoder_families_auto_detect_and_decode(arch):
    config_cls = getattr(transformers, f"{arch}Config")
    model_cls = getattr(transformers, f"{arch}ForCausalLM")
    torch.manual_seed(0)
    model = model_cls(config_cls(hidden_size=H, intermediate_size=64, num_hidden_layers=LAYERS,
                                 num_attention_heads=2, num_key_value_heads=1, vocab_size=64,
                                 bos_token_id=0, eos_token_id=0)).eval()
    with torch.no_grad():
        base = model(IDS).logits
    inject(model, HRMConfig(d_state=N))
    assert list(find_adapters(model)) == ["model.layers.0.mlp", "model.layers.1.mlp"]
    with torch.no_grad():
        assert torch.equal(model(IDS).logits, base)
        for a in find_adapters(model).values():
            a.adapter.gate.fill_(0.5)
    kw = {"max_new_tokens": 6, "do_sample": False, "pad_token_id": 0,
          "output_logits": True, "return_dict_in_generate": True}
    cached, uncached = model.generate(IDS, **kw), model.generate(IDS, use_cache=False, **kw)
    assert torch.equal(cached.sequences, uncached.sequences)
    assert max((a - b).abs().max().item() for a, b in zip(cached.logits, uncached.logits,
                                                          strict=True)) < 1e-5


@pytest.mark.parametrize("kind", ["gpt2", "llama", "qwen2", "mistral"])
def test_disable_adapter_gives_the_base_model_bit_for_bit(kind):
    from adapters import disable_adapter
    from tests.adapters._tiny import tiny_causal_lm

    model = tiny_causal_lm(kind)
    kw = {"max_new_tokens": 5, "do_sample": False, "pad_token_id": 0}
    with torch.no_grad():
        base = model(IDS).logits
    base_gen = model.generate(IDS, **kw)
    inject(model, HRMConfig(d_state=N, gate_init=0.5))
    with torch.no_grad():
        adapted = model(IDS).logits
    assert (adapted - base).abs().max() > 1e-3
    with disable_adapter(model) as same:
        assert same is model
        with torch.no_grad():
            assert torch.equal(model(IDS).logits, base)
        assert torch.equal(model.generate(IDS, **kw), base_gen)  # cached decoding too
        with disable_adapter(model), torch.no_grad():  # nested
            assert torch.equal(model(IDS).logits, base)
        with torch.no_grad():
            assert torch.equal(model(IDS).logits, base)
    with torch.no_grad():
        assert torch.equal(model(IDS).logits, adapted)
    with pytest.raises(RuntimeError, match="boom"), disable_adapter(model):
        raise RuntimeError("boom")
    with torch.no_grad():
        assert torch.equal(model(IDS).logits, adapted)  # re-enabled after the exception
    remove(model)
    with pytest.raises(AdapterError, match="no HRM adapters"):
        disable_adapter(model).__enter__()
