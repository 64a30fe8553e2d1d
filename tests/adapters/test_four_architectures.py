"""Issue 16's acceptance on tiny random GPT-2, Llama, Qwen2 and Mistral: the points whose own
test files cover only some of the four families.

Already on all four elsewhere: base names unchanged and ``from_pretrained`` reload
(test_hf_save.py), checkpoint round trip and fingerprint (test_io.py), ``disable_adapter``
(test_inject.py), the dtype policy and bf16/fp16 cached-vs-full (test_dtype.py), graph breaks
(test_generation.py, three of them slow). Here: a plain ``Trainer`` with periodic checkpoints,
``save_model`` and ``resume_from_checkpoint`` (item 1; Llama is in test_hf_save.py), target
validation and the non-MLP targets (item 2), every cross-family load refused (item 3), left
padding under cached generation, no deprecated cache name from our code paths (item 9), and
the SIGKILL test on real model checkpoints (item 10).
"""

from __future__ import annotations

import itertools
import logging
import warnings

import pytest
import torch

from adapters import HRMConfig, find_adapters, inject, load_adapter, save_adapter
from adapters.exceptions import AdapterShapeError, BaseModelMismatchError, CheckpointError
from adapters.io import adapter_state_dict
from tests.adapters._tiny_lm import KINDS, tiny_lm

transformers = pytest.importorskip("transformers", reason="extra 'hf' not installed")

IDS = torch.randint(1, 64, (2, 7), generator=torch.Generator().manual_seed(1))
GEN = {"max_new_tokens": 5, "do_sample": False, "pad_token_id": 0, "output_logits": True,
       "return_dict_in_generate": True}
#: A LoRA-style target (a projection inside the MLP) and the MLP's down projection per family.
INNER = {"gpt2": ("c_fc", "mlp.c_proj"), "llama": ("gate_proj", "mlp.down_proj"),
         "qwen2": ("up_proj", "mlp.down_proj"), "mistral": ("gate_proj", "mlp.down_proj")}
ATTENTION = {"gpt2": "attn", "llama": "self_attn", "qwen2": "self_attn", "mistral": "self_attn"}


def _max_diff(a, b) -> float:
    return max((x - y).abs().max().item() for x, y in zip(a, b, strict=True))


def _activate(model, gate: float = 0.5):
    with torch.no_grad():
        for a in find_adapters(model).values():
            a.adapter.gate.fill_(gate)
            a.adapter.ssm.log_dt.fill_(-2.5)  # long memory: a lost state shows in the logits
    return model


# ------------------------------------------------------------------ item 1: plain Trainer


@pytest.mark.parametrize("kind", [k for k in KINDS if k != "llama"])
def test_plain_trainer_checkpoints_load_back_exactly_and_resume(kind, tmp_path):
    from tests.adapters.test_hf_save import _Snapshots, _trainer

    model = inject(tiny_lm(kind), HRMConfig(d_state=4, gate_init=0.1))
    trainer = _trainer(model, tmp_path / "run", max_steps=4)
    snaps = _Snapshots(model)
    trainer.add_callback(snaps)
    trainer.train()
    trainer.save_model(str(tmp_path / "final"))
    final = adapter_state_dict(model)
    assert sorted(snaps.at) == [2, 4]
    assert not all(torch.equal(final[k], snaps.at[2][k]) for k in final)  # it trained
    for step, folder in [(2, tmp_path / "run" / "checkpoint-2"),
                         (4, tmp_path / "run" / "checkpoint-4"), (4, tmp_path / "final")]:
        got = adapter_state_dict(load_adapter(tiny_lm(kind), folder))
        assert got.keys() == snaps.at[step].keys()
        assert all(torch.equal(got[k], snaps.at[step][k]) for k in got), folder
    resumed = inject(tiny_lm(kind), HRMConfig(d_state=4, gate_init=0.1))
    _trainer(resumed, tmp_path / "resume", max_steps=4).train(
        resume_from_checkpoint=str(tmp_path / "run" / "checkpoint-2"))
    again = adapter_state_dict(resumed)
    assert all(torch.equal(again[k], final[k]) for k in final)


# ------------------------------------------------------------------ item 2: targets


def _snapshot(model):
    return list(model.state_dict()), [p.requires_grad for p in model.parameters()]


def _untouched(model, before):
    assert _snapshot(model) == before
    assert not hasattr(model, "hrm_adapters")
    assert all(not m._forward_hooks and not m._forward_pre_hooks for m in model.modules())


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("which", ["lora-style", "down-projection-input"])
def test_projections_inside_the_mlp_are_refused_at_inject(kind, which):
    model = tiny_lm(kind)
    before = _snapshot(model)
    lora, down = INNER[kind]
    target, match = (lora, r"returns \d+ features; the branch \(width H = 32\)") if (
        which == "lora-style") else (down, r"reads \d+ features, not the stream width H = 32")
    with pytest.raises(AdapterShapeError, match=match) as info:
        inject(model, HRMConfig(d_state=4, target_modules=[target]))
    msg = str(info.value)
    assert "Modules that take one" in msg and f"{ATTENTION[kind]}" in msg  # valid candidates
    _untouched(model, before)


ACTIVATION = {"gpt2": "mlp.act", "llama": "mlp.act_fn", "qwen2": "mlp.act_fn",
              "mistral": "mlp.act_fn"}
DECODER = {"gpt2": "transformer", "llama": "model", "qwen2": "model", "mistral": "model"}


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("which", ["activation", "whole decoder"])
def test_modules_whose_stream_cannot_be_checked_are_refused_at_inject(kind, which):
    """Before: accepted, then an AdapterShapeError at the first forward (the activation is
    called with the 2H-wide hidden layer; the decoder with token ids)."""
    model = tiny_lm(kind)
    before = _snapshot(model)
    target, match = ((ACTIVATION[kind], "has no parameters") if which == "activation"
                     else (DECODER[kind], "holds an embedding"))
    with pytest.raises(AdapterShapeError, match=match):
        inject(model, HRMConfig(d_state=4, target_modules=[target]))
    _untouched(model, before)


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize(("where", "reads"), [("default", "mlp_input"), ("attention", "mlp_input"),
                                              ("attention", "mlp_output"),
                                              ("down-projection", "mlp_output")])
def test_supported_targets_are_exact_at_init_and_decode_like_a_full_rerun(kind, where, reads):
    model = tiny_lm(kind)
    with torch.no_grad():
        base = model(IDS).logits
    target = {"default": None, "attention": [ATTENTION[kind]],
              "down-projection": [INNER[kind][1]]}[where]
    inject(model, HRMConfig(d_state=4, target_modules=target, reads=reads))
    prefix = "transformer.h" if kind == "gpt2" else "model.layers"
    suffix = {"default": "mlp", "attention": ATTENTION[kind],
              "down-projection": INNER[kind][1]}[where]
    assert list(find_adapters(model)) == [f"{prefix}.{i}.{suffix}" for i in range(2)]
    with torch.no_grad():
        assert torch.equal(model(IDS).logits, base)
    _activate(model)
    with torch.no_grad():
        assert (model(IDS).logits - base).abs().max() > 1e-4
    cached, uncached = model.generate(IDS, **GEN), model.generate(IDS, use_cache=False, **GEN)
    assert torch.equal(cached.sequences, uncached.sequences)
    assert _max_diff(cached.logits, uncached.logits) < 1e-5


@pytest.mark.parametrize("kind", [*KINDS, "opt"])
def test_a_left_padded_row_decodes_as_it_does_alone(kind):
    from tests.adapters._tiny import tiny_causal_lm

    model = _activate(inject(tiny_causal_lm(kind), HRMConfig(d_state=4, gate_init=0.5)))
    row = torch.randint(1, 64, (1, 6), generator=torch.Generator().manual_seed(3))
    other = torch.randint(1, 64, (1, 9), generator=torch.Generator().manual_seed(4))
    batch = torch.cat([torch.cat([torch.zeros(1, 3, dtype=torch.long), row], 1), other])
    mask = torch.ones_like(batch)
    mask[0, :3] = 0
    padded = model.generate(batch, attention_mask=mask, **GEN)
    alone = model.generate(row, attention_mask=torch.ones_like(row), **GEN)
    assert torch.equal(padded.sequences[0, 9:], alone.sequences[0, 6:])
    assert _max_diff([x[0] for x in padded.logits], [x[0] for x in alone.logits]) < 1e-5


# ------------------------------------------------------------------ item 3: fingerprint


@pytest.mark.parametrize(("saved_on", "loaded_into"), list(itertools.permutations(KINDS, 2)))
def test_an_adapter_of_one_family_is_refused_by_another_of_the_same_sizes(
        saved_on, loaded_into, tmp_path):
    source = _activate(inject(tiny_lm(saved_on), HRMConfig(d_state=4)))
    save_adapter(source, tmp_path)
    target = tiny_lm(loaded_into)  # width 32, 2 layers, vocabulary 64 for every family
    before = _snapshot(target)
    with pytest.raises(BaseModelMismatchError,
                       match=f"model_type: checkpoint '{saved_on}' vs model '{loaded_into}'"):
        load_adapter(target, tmp_path)
    _untouched(target, before)
    if "gpt2" in (saved_on, loaded_into):  # other module names: the override cannot help
        with pytest.warns(UserWarning, match="another base model"), pytest.raises(
                CheckpointError, match="do not fit|differ"):
            load_adapter(target, tmp_path, allow_base_mismatch=True)
        _untouched(target, before)
        return
    with pytest.warns(UserWarning, match="another base model"):
        load_adapter(target, tmp_path, allow_base_mismatch=True)
    want, got = adapter_state_dict(source), adapter_state_dict(target)
    assert got.keys() == want.keys() and all(torch.equal(got[k], want[k]) for k in want)


# ------------------------------------------------------------------ item 9: cache name


@pytest.mark.parametrize("kind", KINDS)
def test_no_deprecated_cache_name_from_our_code_paths(kind, caplog):
    """transformers logs the ``past_key_values`` deprecation with ``warning_once``; its memo is
    cleared first, and the same capture then sees the log when the old name is used."""
    from transformers.utils import logging as hf_logging

    model = _activate(inject(tiny_lm(kind), HRMConfig(d_state=4, gate_init=0.5)))
    hf_logging.get_logger("transformers").propagate = True

    def deprecations(run) -> list[str]:
        hf_logging.warning_once.cache_clear()
        caplog.clear()
        with warnings.catch_warnings(record=True) as caught, caplog.at_level(logging.WARNING):
            warnings.simplefilter("always")
            run()
        return ([str(w.message) for w in caught
                 if issubclass(w.category, (FutureWarning, DeprecationWarning))]
                + [r.getMessage() for r in caplog.records if "deprecated" in r.getMessage()])

    def ours():
        model.generate(IDS, **GEN)
        with torch.no_grad():
            out = model(IDS)  # use_cache from the config: the adapters read the output's cache
            model(IDS[:, :1], cache=out.cache)

    def old_name():
        with torch.no_grad():
            model(IDS, use_cache=True).past_key_values  # noqa: B018 - the deprecated property

    assert deprecations(ours) == []
    assert deprecations(old_name)  # the capture works despite warning_once


# ------------------------------------------------------------------ item 10: SIGKILL


class _ModelWriter:
    """``save_adapter`` of an adapted tiny model of one family (for ``kill_loop``)."""

    def __init__(self, kind: str):
        self.kind = kind

    def make(self):
        return inject(tiny_lm(self.kind), HRMConfig(d_state=16))

    def stamp(self, model, k):
        from tests.adapters.test_atomic import stamp

        stamp(model, k)

    def save(self, model, directory):
        save_adapter(model, directory)

    def read(self, directory) -> float:
        back = load_adapter(tiny_lm(self.kind), directory)
        values = torch.cat([t.flatten() for t in adapter_state_dict(back).values()]).unique()
        assert values.numel() == 1, f"a mixed checkpoint: values {values.tolist()[:8]}"
        return float(values[0])


@pytest.mark.parametrize("kind", KINDS)
def test_kills_during_a_model_checkpoint_save_leave_the_previous_or_the_new(kind, tmp_path):
    from tests.adapters import test_atomic

    if test_atomic._FORK is None:
        pytest.skip("needs os.fork (POSIX only): the child process is SIGKILLed mid-save")
    kills = 3
    outcome = test_atomic.kill_loop(tmp_path, kills, seed=160, writer=_ModelWriter(kind))
    print(f"{kind} kill test: {dict(outcome)}")
    assert outcome["kills"] == kills and outcome["readable"] == kills
    assert outcome["previous"] + outcome["new"] == kills
