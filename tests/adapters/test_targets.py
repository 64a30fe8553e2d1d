"""Item 2 of issue 16: targets are validated at inject time, before the model is touched;
feed-forward pairs (OPT's fc1/fc2, BERT's intermediate/output.dense) and attention modules are
supported, everything else is refused with the modules that would work."""

from __future__ import annotations

import pytest
import torch

from adapters import HRMConfig, find_adapters, inject
from adapters.exceptions import AdapterConfigError, AdapterShapeError, TargetModulesNotFoundError
from tests.adapters._tiny import tiny_causal_lm

transformers = pytest.importorskip("transformers", reason="extra 'hf' not installed")

IDS = torch.randint(1, 64, (2, 7), generator=torch.Generator().manual_seed(1))
GEN = {"max_new_tokens": 5, "do_sample": False, "pad_token_id": 0, "output_logits": True,
       "return_dict_in_generate": True}


def _untouched(model, keys, flags):
    assert list(model.state_dict()) == keys
    assert [p.requires_grad for p in model.parameters()] == flags
    assert not hasattr(model, "hrm_adapters") and not hasattr(model, "_hrm_runtime")
    assert all(not m._forward_hooks for m in model.modules())


@pytest.mark.parametrize(("kind", "targets", "reads", "match"), [
    ("llama", ["gate_proj"], "mlp_input", r"gate_proj' returns 64 features"),
    ("llama", ["up_proj"], "mlp_input", r"up_proj' returns 64 features"),
    ("llama", ["down_proj"], "mlp_input", r"down_proj' reads 64 features"),
    ("qwen2", ["gate_proj", "up_proj", "down_proj"], "mlp_input", "returns 64 features"),
    ("mistral", ["up_proj"], "mlp_output", r"up_proj' returns 64 features"),
    ("gpt2", ["c_fc"], "mlp_input", r"c_fc' returns 128 features"),
    ("llama", ["layers"], "mlp_input", "is a ModuleList"),
])
def test_lora_style_names_are_refused_before_the_model_is_touched(kind, targets, reads, match):
    model = tiny_causal_lm(kind)
    keys, flags = list(model.state_dict()), [p.requires_grad for p in model.parameters()]
    with pytest.raises(AdapterShapeError, match=match) as info:
        inject(model, HRMConfig(d_state=4, target_modules=targets, reads=reads))
    msg = str(info.value)
    assert "Modules that take one" in msg and ".mlp" in msg  # the valid candidates are listed
    _untouched(model, keys, flags)


@pytest.mark.parametrize(("kind", "targets", "reads", "names"), [
    ("llama", ["self_attn"], "mlp_input", ["model.layers.0.self_attn", "model.layers.1.self_attn"]),
    ("gpt2", ["attn"], "mlp_output", ["transformer.h.0.attn", "transformer.h.1.attn"]),
    ("qwen2", ["down_proj"], "mlp_output", ["model.layers.0.mlp.down_proj",
                                             "model.layers.1.mlp.down_proj"]),
    ("opt", None, "mlp_input", ["model.decoder.layers.0.fc2", "model.decoder.layers.1.fc2"]),
    ("opt", ["fc1", "fc2"], "mlp_input", ["model.decoder.layers.0.fc2",
                                          "model.decoder.layers.1.fc2"]),
])
def test_attention_and_pair_targets_are_exact_at_init_and_decode_right(kind, targets, reads, names):
    model = tiny_causal_lm(kind)
    with torch.no_grad():
        base = model(IDS).logits
    inject(model, HRMConfig(d_state=4, target_modules=targets, reads=reads))
    assert list(find_adapters(model)) == names
    with torch.no_grad():
        assert torch.equal(model(IDS).logits, base)
        for a in find_adapters(model).values():
            a.adapter.gate.fill_(0.5)
        assert (model(IDS).logits - base).abs().max() > 1e-4
    cached, uncached = model.generate(IDS, **GEN), model.generate(IDS, use_cache=False, **GEN)
    d = max((a - b).abs().max().item() for a, b in zip(cached.logits, uncached.logits,
                                                        strict=True))
    assert torch.equal(cached.sequences, uncached.sequences) and d < 1e-5


def test_bert_feed_forward_pair_and_padding():
    torch.manual_seed(0)
    model = transformers.BertModel(transformers.BertConfig(
        hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=64,
        vocab_size=64, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)).eval()
    mask = torch.ones_like(IDS)
    mask[1, :3] = 0
    with torch.no_grad():
        base = model(IDS, attention_mask=mask).last_hidden_state
    inject(model, HRMConfig(d_state=4))
    assert list(find_adapters(model)) == ["encoder.layer.0.output.dense",
                                          "encoder.layer.1.output.dense"]
    with torch.no_grad():
        assert torch.equal(model(IDS, attention_mask=mask).last_hidden_state, base)
        for a in find_adapters(model).values():
            a.adapter.gate.fill_(0.5)
        out = model(IDS, attention_mask=mask).last_hidden_state
    assert (out - base).abs().max() > 1e-4 and torch.isfinite(out).all()


def test_encoder_decoder_models_are_refused_clearly():
    model = transformers.T5ForConditionalGeneration(transformers.T5Config(
        d_model=32, d_ff=64, num_layers=1, num_heads=2, d_kv=16, vocab_size=64,
        decoder_start_token_id=0))
    for targets in (None, ["DenseReluDense"]):
        with pytest.raises(AdapterConfigError, match="encoder-decoder"):
            inject(model, HRMConfig(d_state=4, target_modules=targets))


def test_nothing_matching_lists_the_modules_that_would_work():
    model = tiny_causal_lm("llama")
    with pytest.raises(TargetModulesNotFoundError) as info:
        inject(model, HRMConfig(d_state=4, target_modules=["feed_forward"]))
    msg = str(info.value)
    assert "model.layers.0.mlp" in msg and "model.layers.1.self_attn" in msg
    assert "gate_proj" not in msg and "layernorm" not in msg


def _tiny_mixtral():
    torch.manual_seed(0)
    cfg = transformers.MixtralConfig(
        vocab_size=64, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
        num_attention_heads=2, num_key_value_heads=1, num_local_experts=2, num_experts_per_tok=1,
        bos_token_id=0, eos_token_id=0)
    return transformers.MixtralForCausalLM(cfg).eval()


def test_a_mixture_of_experts_block_is_adapted(tmp_path):
    """Mixtral's ``mlp`` has no linear layer (3-D expert parameters) and its meta kernels take
    only bfloat16: the width check's dry run falls back to bfloat16 instead of refusing it."""
    from adapters import load_adapter, save_adapter
    from adapters.io import adapter_state_dict

    model = _tiny_mixtral()
    with torch.no_grad():
        base = model(IDS).logits
    inject(model, HRMConfig(d_state=4))
    assert list(find_adapters(model)) == ["model.layers.0.mlp", "model.layers.1.mlp"]
    with torch.no_grad():
        assert torch.equal(model(IDS).logits, base)
        for a in find_adapters(model).values():
            a.adapter.gate.fill_(0.5)
        full = model(IDS).logits
    assert (full - base).abs().max() > 1e-2
    cached = model.generate(IDS[:1], **GEN)
    uncached = model.generate(IDS[:1], use_cache=False, **GEN)
    assert torch.equal(cached.sequences, uncached.sequences)
    assert max((a - b).abs().max().item() for a, b in zip(cached.logits, uncached.logits,
                                                          strict=True)) < 1e-5
    save_adapter(model, tmp_path)
    fresh = load_adapter(_tiny_mixtral(), tmp_path)
    with torch.no_grad():
        assert torch.equal(fresh(IDS).logits, full)
    assert adapter_state_dict(fresh).keys() == adapter_state_dict(model).keys()


def test_a_plain_name_given_as_a_string_says_it_is_a_regular_expression():
    with pytest.raises(TargetModulesNotFoundError, match=r"regular expression .* the list "
                       r"\['mlp'\] matches it as a name suffix\); candidates: .*layers.0.mlp"):
        inject(tiny_causal_lm("llama"), HRMConfig(d_state=4, target_modules="mlp"))
    with pytest.raises(TargetModulesNotFoundError) as info:  # no hint when a list would not help
        inject(tiny_causal_lm("llama"), HRMConfig(d_state=4, target_modules="mlpx"))
    assert "regular expression" not in str(info.value)
