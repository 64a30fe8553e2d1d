"""``inject`` of a model inside its ``torch.compile`` / PEFT wrapper adapts the model inside.

Before, ``inject(torch.compile(model))`` named the adapters ``_orig_mod.model.layers.0.mlp`` and
``inject(peft.get_peft_model(model, lora))`` ``base_model.model.model.layers.0.mlp``: their
checkpoints did not load into the plain model (``CheckpointError adapter layers differ``), nor
the plain model's into them.
"""

from __future__ import annotations

import pytest
import torch

from adapters import (
    HRMConfig,
    disable_adapter,
    find_adapters,
    inject,
    load_adapter,
    remove,
    save_adapter,
)
from adapters.injection import get_adapter_config
from adapters.io import adapter_state_dict
from tests.adapters._tiny import tiny_causal_lm

pytest.importorskip("transformers", reason="the 'hf' extra (transformers) is not installed")
CFG = HRMConfig(d_state=4, gate_init=0.5)
IDS = torch.randint(1, 64, (2, 9), generator=torch.Generator().manual_seed(3))
NAMES = ["model.layers.0.mlp", "model.layers.1.mlp"]


def _logits(model, **kw):
    with torch.no_grad():
        return model(input_ids=IDS, **kw).logits


def _same_adapters(a, b):
    want, got = adapter_state_dict(a), adapter_state_dict(b)
    return got.keys() == want.keys() and all(torch.equal(got[k], want[k]) for k in want)


def _lora(model):
    peft = pytest.importorskip("peft", reason="peft (the 'hf' extra) is not installed")
    return peft.get_peft_model(model, peft.LoraConfig(r=4, target_modules=["q_proj", "v_proj"],
                                                      init_lora_weights=False))


WRAPPERS = {
    "compile": lambda m: torch.compile(m, backend="eager"),
    "peft": _lora,
}


@pytest.mark.parametrize("how", WRAPPERS)
def test_a_wrapped_model_is_adapted_under_the_bare_model_s_names(how, tmp_path):
    bare = tiny_causal_lm("llama")
    wrapped = WRAPPERS[how](bare)
    assert inject(wrapped, CFG) is wrapped
    assert list(find_adapters(wrapped)) == NAMES == list(find_adapters(bare))
    assert get_adapter_config(wrapped) is get_adapter_config(bare)
    with torch.no_grad():
        for a in find_adapters(bare).values():
            a.adapter.ssm.B.add_(0.1)

    save_adapter(wrapped, tmp_path / "w")  # read by a plain model
    plain = load_adapter(tiny_causal_lm("llama"), tmp_path / "w")
    assert _same_adapters(bare, plain)
    other = inject(tiny_causal_lm("llama"), CFG)  # and a plain model's checkpoint by it
    with torch.no_grad():
        for a in find_adapters(other).values():
            a.adapter.ssm.C.add_(0.2)
    save_adapter(other, tmp_path / "p")
    load_adapter(wrapped, tmp_path / "p")
    assert _same_adapters(other, bare)

    if how == "compile":  # the compiled call (traced once) runs the adapters
        assert torch.equal(_logits(wrapped), _logits(other))
    call = bare if how == "compile" else wrapped  # (no retracing for each state below)
    with disable_adapter(wrapped):
        base = _logits(call)
    assert not torch.equal(base, _logits(call))
    remove(wrapped)
    assert find_adapters(wrapped) == {} and not any(
        "hrm_adapters" in k for k in wrapped.state_dict())
    assert torch.equal(_logits(call), base)


@pytest.mark.parametrize("lora_first", [True, False])
def test_a_model_with_lora_and_adapters_generates_as_a_full_rerun(lora_first):
    """LoRA, then ``inject`` (which freezes LoRA too, as it freezes every base parameter), or
    the other way round: cached generation through the PeftModel equals the uncached one
    (before, with LoRA first, the adapters' state was not carried: other tokens)."""
    if lora_first:
        lora = inject(_lora(tiny_causal_lm("llama")), CFG)
    else:
        lora = _lora(inject(tiny_causal_lm("llama"), CFG))
    kw = dict(max_new_tokens=6, do_sample=False, return_dict_in_generate=True, output_logits=True,
              pad_token_id=0)
    cached = lora.generate(input_ids=IDS, **kw)
    uncached = lora.generate(input_ids=IDS, use_cache=False, **kw)
    assert torch.equal(cached.sequences, uncached.sequences)
    d = max((a - b).abs().max().item() for a, b in zip(cached.logits, uncached.logits, strict=True))
    assert d < 1e-5
    trains = "hrm_adapters" if lora_first else "lora_"  # the library applied last decides
    assert [n for n, p in lora.named_parameters() if p.requires_grad] == [
        n for n, _ in lora.named_parameters() if trains in n]
