"""A model whose adapters were removed saves a folder without them; its config tells its dtype.

Before: ``m.save_pretrained(d)`` (adapted: base weights + ``hrm_adapter.safetensors``), then
``remove(m); m.save_pretrained(d)`` rewrote the base weights and left the old adapter
checkpoint beside them, so ``load_adapter(from_pretrained(d), d)`` silently brought back the
adapters that had been removed. Now a removed model's ``save_pretrained`` deletes the checkpoint
an earlier ``save_pretrained`` wrote there (as transformers deletes its own stale shards) and
keeps, with a warning, one written by ``save_adapter`` (the user's own file).

And ``get_adapter_config(model).dtype`` stayed the inject-time value after ``model.double()``
(the checkpoint already recorded the parameters' dtype): it now reads what a reload needs.
"""

from __future__ import annotations

import warnings

import pytest
import torch

from adapters import (
    HRMConfig,
    find_adapters,
    inject,
    load_adapter,
    reduce,
    remove,
    save_adapter,
)
from adapters.exceptions import CheckpointError
from adapters.injection import get_adapter_config
from adapters.io import CONFIG_NAME, WEIGHTS_NAME
from tests.adapters._tiny import tiny_causal_lm

transformers = pytest.importorskip("transformers", reason="the 'hf' extra is not installed")
IDS = torch.randint(1, 64, (1, 6), generator=torch.Generator().manual_seed(0))


def _adapted(kind="llama"):
    return inject(tiny_causal_lm(kind), HRMConfig(d_state=4, gate_init=0.5))


@pytest.mark.parametrize("kind", ["gpt2", "llama"])
def test_save_pretrained_after_remove_drops_the_stale_adapter_checkpoint(kind, tmp_path):
    model = _adapted(kind)
    model.save_pretrained(tmp_path)
    assert (tmp_path / WEIGHTS_NAME).is_file() and (tmp_path / CONFIG_NAME).is_file()
    remove(model)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        model.save_pretrained(tmp_path)
    assert not (tmp_path / WEIGHTS_NAME).exists() and not (tmp_path / CONFIG_NAME).exists()
    loaded = transformers.AutoModelForCausalLM.from_pretrained(tmp_path).eval()
    with torch.no_grad():
        assert torch.equal(loaded(IDS).logits, model(IDS).logits)
    with pytest.raises(CheckpointError, match="is missing"):
        load_adapter(loaded, tmp_path)  # nothing to bring back


def test_a_checkpoint_written_by_save_adapter_is_kept_with_a_warning(tmp_path):
    model = _adapted()
    save_adapter(model, tmp_path)
    remove(model)
    with pytest.warns(UserWarning, match="not written by `save_pretrained`; it was kept"):
        model.save_pretrained(tmp_path)
    assert (tmp_path / WEIGHTS_NAME).is_file()
    assert find_adapters(load_adapter(tiny_causal_lm("llama"), tmp_path))


def test_a_re_adapted_model_saves_its_adapters_again(tmp_path):
    model = _adapted()
    remove(model)
    inject(model, HRMConfig(d_state=4, gate_init=0.5))
    model.save_pretrained(tmp_path)
    assert (tmp_path / WEIGHTS_NAME).is_file()


def test_a_peft_wrapper_after_remove_drops_the_stale_hrm_checkpoint(tmp_path):
    peft = pytest.importorskip("peft", reason="peft (the 'hf' extra) is not installed")
    lora = inject(peft.get_peft_model(tiny_causal_lm("llama"),
                                      peft.LoraConfig(r=4, target_modules=["q_proj"])),
                  HRMConfig(d_state=4, gate_init=0.5))
    lora.save_pretrained(tmp_path)
    assert (tmp_path / WEIGHTS_NAME).is_file()
    remove(lora)
    lora.save_pretrained(tmp_path)
    assert not (tmp_path / WEIGHTS_NAME).exists()
    assert (tmp_path / "adapter_model.safetensors").is_file()  # LoRA's own files stay


@pytest.mark.parametrize("reduced", [False, True])
def test_get_adapter_config_reports_the_parameters_dtype_after_a_cast(reduced, tmp_path):
    model = _adapted()
    if reduced:
        reduce(model, order=2)
    config = get_adapter_config(model)
    assert get_adapter_config(model) is config and config.dtype == "float32"
    model.double()
    assert get_adapter_config(model).dtype == "float64"
    assert get_adapter_config(model).replace(dtype="float32") == config
    save_adapter(model, tmp_path)
    fresh = load_adapter(tiny_causal_lm("llama").double(), tmp_path)  # a reload built from it
    assert get_adapter_config(fresh) == get_adapter_config(model)
    model.float()
    assert get_adapter_config(model) == config
