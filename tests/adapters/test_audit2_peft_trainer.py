"""A plain ``Trainer`` of a PeftModel (LoRA) adapted inside keeps the HRM adapters.

The Trainer saves, resumes and loads the best checkpoint of a PeftModel through PEFT's
``save_pretrained`` / ``load_adapter``, which see LoRA's weights only. Before, with
``inject(get_peft_model(model, lora))`` (LoRA frozen by inject, the HRM adapters trained), every
checkpoint held only LoRA's untrained files: the trained adapters were lost without a word
(``load_adapter(checkpoint)``: "holds a PEFT adapter"), and ``resume_from_checkpoint`` went on
from freshly initialised adapters (0.13 from the uninterrupted run).
"""

from __future__ import annotations

import pytest
import torch

from adapters import HRMConfig, find_adapters, inject, load_adapter, remove
from adapters._hooks import save_pretrained_without_adapters
from adapters.io import WEIGHTS_NAME
from tests.adapters._tiny import tiny_causal_lm

transformers = pytest.importorskip("transformers", reason="the 'hf' extra is not installed")
peft = pytest.importorskip("peft", reason="peft (the 'hf' extra) is not installed")
ROWS = [{"input_ids": torch.randint(1, 64, (8,), generator=torch.Generator().manual_seed(i)
                                    ).tolist()} for i in range(16)]


def _collate(features):
    ids = torch.tensor([f["input_ids"] for f in features])
    return {"input_ids": ids, "labels": ids.clone()}


def _model():
    lora = peft.get_peft_model(tiny_causal_lm("llama"),
                               peft.LoraConfig(r=4, target_modules=["q_proj", "v_proj"]))
    return inject(lora, HRMConfig(d_state=4, gate_init=0.5))


def _adapters(model):
    return torch.cat([p.detach().flatten() for a in find_adapters(model).values()
                      for p in a.adapter.parameters()])


def _train(out, resume=None, **kw):
    model = _model()
    args = transformers.TrainingArguments(
        str(out), max_steps=4, per_device_train_batch_size=4, learning_rate=0.05, save_steps=2,
        report_to=[], use_cpu=True, seed=0, remove_unused_columns=False, disable_tqdm=True, **kw)
    trainer = transformers.Trainer(model=model, args=args, train_dataset=ROWS,
                                   eval_dataset=ROWS[:8], data_collator=_collate)
    trainer.train(resume_from_checkpoint=resume)
    return model, trainer


def test_checkpoints_and_resume_of_a_peft_model_keep_the_hrm_adapters(tmp_path):
    model, _ = _train(tmp_path)
    trained = _adapters(model)
    assert not torch.equal(trained, _adapters(_model()))  # the adapters did train
    assert (tmp_path / "checkpoint-4" / WEIGHTS_NAME).is_file()
    assert (tmp_path / "checkpoint-4" / "adapter_model.safetensors").is_file()  # LoRA's too
    loaded = load_adapter(tiny_causal_lm("llama"), tmp_path / "checkpoint-4")
    assert torch.equal(_adapters(loaded), trained)
    resumed, _ = _train(tmp_path, resume=str(tmp_path / "checkpoint-2"))
    assert torch.equal(_adapters(resumed), trained)


def test_load_best_model_at_end_of_a_peft_model_restores_the_hrm_adapters(tmp_path):
    model, trainer = _train(tmp_path, eval_strategy="steps", eval_steps=2,
                            load_best_model_at_end=True, metric_for_best_model="loss",
                            greater_is_better=True)  # the worse of the two: checkpoint-2
    assert trainer.state.best_model_checkpoint.endswith("checkpoint-2")
    best = load_adapter(tiny_causal_lm("llama"), trainer.state.best_model_checkpoint)
    last = load_adapter(tiny_causal_lm("llama"), trainer.state.best_model_checkpoint[:-1] + "4")
    assert torch.equal(_adapters(model), _adapters(best))
    assert not torch.equal(_adapters(model), _adapters(last))
    remove(model)  # PEFT's own methods again (save_pretrained then drops a stale checkpoint)
    assert "load_adapter" not in vars(model)
    assert vars(model)["save_pretrained"].func is save_pretrained_without_adapters


def test_a_peft_model_given_hrm_adapters_by_load_adapter_saves_them_too(tmp_path):
    source = _model()
    with torch.no_grad():
        for a in find_adapters(source).values():
            a.adapter.ssm.B.add_(0.3)
    source.save_pretrained(tmp_path / "a")  # LoRA's files and the HRM checkpoint
    lora = peft.PeftModel.from_pretrained(tiny_causal_lm("llama"), tmp_path / "a")
    assert load_adapter(lora, tmp_path / "a") is lora
    lora.save_pretrained(tmp_path / "b")
    again = load_adapter(tiny_causal_lm("llama"), tmp_path / "b")
    assert torch.equal(_adapters(again), _adapters(source))
