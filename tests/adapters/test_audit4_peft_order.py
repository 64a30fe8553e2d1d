"""HRM adapters first, then ``peft.get_peft_model``: the user is told at the first training call.

PEFT freezes every parameter that is not its own (the HRM adapters' included), and the
PeftModel's ``save_pretrained`` — a Trainer's checkpoints — writes LoRA's weights only, so
trained HRM adapters went missing from every checkpoint without a word (before: no warning,
``['README.md', 'adapter_config.json', 'adapter_model.safetensors']``). Now one UserWarning
says so and names the two ways that keep them; LoRA first, then inject, is not warned.
"""

from __future__ import annotations

import warnings

import pytest
import torch

from adapters import HRMConfig, inject
from tests.adapters._tiny import tiny_causal_lm

peft = pytest.importorskip("peft", reason="the 'peft' extra is not installed")
pytest.importorskip("transformers", reason="the 'hf' extra is not installed")

IDS = torch.randint(0, 64, (1, 6), generator=torch.Generator().manual_seed(0))


def _lora(model):
    return peft.get_peft_model(model, peft.LoraConfig(r=2, target_modules=["q_proj", "v_proj"]))


def _train_step(model):
    model.train()
    model(IDS, labels=IDS).loss.backward()


def test_hrm_first_then_get_peft_model_warns_once_at_the_first_training_call():
    pm = _lora(inject(tiny_causal_lm("llama"), HRMConfig(d_state=4)))
    with torch.no_grad():
        pm.eval()(IDS)  # inference: nothing to say
    with pytest.warns(UserWarning, match=r"0 of \d+ adapter parameters are trainable.*"
                                         r"adapters\.inject on the PeftModel"):
        _train_step(pm)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        _train_step(pm)  # once


@pytest.mark.parametrize("order", ["lora first", "no peft"])
def test_supported_orders_are_not_warned(order):
    base = tiny_causal_lm("llama")
    model = inject(_lora(base) if order == "lora first" else base, HRMConfig(d_state=4))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        _train_step(model)


def test_transformers_own_peft_integration_is_not_warned():
    # model.load_adapter / add_adapter of transformers put LoRA into the model itself (it sets
    # `peft_config` and `_hf_peft_config_loaded` on it); no wrapper's save_pretrained is involved
    model = inject(tiny_causal_lm("llama"), HRMConfig(d_state=4))
    model.peft_config = {"default": object()}  # what the integration leaves on the model
    model._hf_peft_config_loaded = True
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        _train_step(model)
