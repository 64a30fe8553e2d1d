"""Item 1 of issue 16: the base model's parameter names survive injection, so HF's own
``save_pretrained``/``from_pretrained`` and a plain ``transformers.Trainer`` keep working."""

from __future__ import annotations

import copy
import logging
import warnings

import pytest
import torch

from adapters import HRMConfig, find_adapters, inject, load_adapter, remove
from adapters._hooks import save_pretrained_without_adapters
from adapters.io import adapter_state_dict
from tests.adapters._tiny import tiny_causal_lm

transformers = pytest.importorskip("transformers", reason="extra 'hf' not installed")

KINDS = ["gpt2", "llama", "qwen2", "mistral"]
IDS = torch.randint(1, 64, (2, 9), generator=torch.Generator().manual_seed(1))


def _activate(model, gate=0.5):
    with torch.no_grad():
        for a in find_adapters(model).values():
            a.adapter.gate.fill_(gate)
    return model


@pytest.mark.parametrize("kind", KINDS)
def test_base_parameter_names_and_objects_are_unchanged(kind):
    model = tiny_causal_lm(kind)
    before = dict(model.named_parameters())
    keys = set(model.state_dict())
    inject(model, HRMConfig(d_state=4))
    after = dict(model.named_parameters())
    assert {k: id(v) for k, v in after.items() if k in before} == {
        k: id(v) for k, v in before.items()}
    extra = sorted(set(after) - set(before))
    assert extra and all(k.startswith("hrm_adapters.") for k in extra)
    assert set(model.state_dict()) - keys == {
        k for k in model.state_dict() if k.startswith("hrm_adapters.")}


@pytest.mark.parametrize("kind", KINDS)
def test_save_pretrained_from_pretrained_restores_the_base_and_reports_adapter_keys(
        kind, tmp_path, caplog):
    model = tiny_causal_lm(kind)
    with torch.no_grad():
        base = model(IDS).logits
    _activate(inject(model, HRMConfig(d_state=4)))
    with torch.no_grad():
        adapted = model(IDS).logits
    model.save_pretrained(tmp_path)
    with caplog.at_level(logging.WARNING):
        loaded, info = transformers.AutoModelForCausalLM.from_pretrained(
            tmp_path, output_loading_info=True)
    loaded.eval()
    assert info["missing_keys"] == [] or set(info["missing_keys"]) <= {"lm_head.weight"}
    unexpected = set(info["unexpected_keys"])
    assert unexpected == set(k for k in model.state_dict() if k.startswith("hrm_adapters."))
    with torch.no_grad():
        d_base = (loaded(IDS).logits - base).abs().max().item()
    load_adapter(loaded, tmp_path)  # the adapter checkpoint written beside the model
    with torch.no_grad():
        d_adapted = (loaded(IDS).logits - adapted).abs().max().item()
    print(f"{kind}: from_pretrained vs base max |dlogit| = {d_base}; + load_adapter vs "
          f"adapted = {d_adapted}; {len(unexpected)} adapter keys reported as unexpected")
    assert d_base == 0.0 and d_adapted == 0.0
    assert (adapted - base).abs().max() > 1e-3  # the adapters matter
    remove(model)  # the class's save_pretrained, then the stale checkpoint's removal
    assert vars(model)["save_pretrained"].func is save_pretrained_without_adapters


def _dataset(n=8, length=8):
    g = torch.Generator().manual_seed(3)
    return [{"input_ids": x, "labels": x.clone()} for x in torch.randint(1, 64, (n, length),
                                                                           generator=g)]


def _trainer(model, out, **kw):
    args = transformers.TrainingArguments(
        output_dir=str(out), per_device_train_batch_size=2, learning_rate=1e-2, seed=0,
        save_strategy="steps", save_steps=2, report_to=[], use_cpu=True, logging_steps=100,
        disable_tqdm=True, dataloader_num_workers=0, **kw)
    return transformers.Trainer(model=model, args=args, train_dataset=_dataset())


class _Snapshots(transformers.TrainerCallback if transformers else object):
    def __init__(self, model):
        self.model, self.at = model, {}

    def on_save(self, args, state, control, **kw):
        self.at[state.global_step] = copy.deepcopy(adapter_state_dict(self.model))


def test_plain_trainer_checkpoints_load_back_exactly_and_resume(tmp_path):
    model = inject(tiny_causal_lm("llama"), HRMConfig(d_state=4, gate_init=0.1))
    trainer = _trainer(model, tmp_path / "run", max_steps=4)
    snaps = _Snapshots(model)
    trainer.add_callback(snaps)
    trainer.train()
    trainer.save_model(str(tmp_path / "final"))
    final = adapter_state_dict(model)
    assert sorted(snaps.at) == [2, 4]
    for step, folder in [(2, tmp_path / "run" / "checkpoint-2"),
                         (4, tmp_path / "run" / "checkpoint-4"), (4, tmp_path / "final")]:
        fresh = load_adapter(tiny_causal_lm("llama"), folder)
        got = adapter_state_dict(fresh)
        assert got.keys() == snaps.at[step].keys()
        assert all(torch.equal(got[k], snaps.at[step][k]) for k in got), folder
    assert all(torch.equal(final[k], snaps.at[4][k]) for k in final)
    assert not all(torch.equal(final[k], snaps.at[2][k]) for k in final)  # it trained

    # resume from step 2 with a freshly adapted model: the same final adapter, exactly
    resumed = inject(tiny_causal_lm("llama"), HRMConfig(d_state=4, gate_init=0.1))
    _trainer(resumed, tmp_path / "resume", max_steps=4).train(
        resume_from_checkpoint=str(tmp_path / "run" / "checkpoint-2"))
    again = adapter_state_dict(resumed)
    d = max((again[k] - final[k]).abs().max().item() for k in final)
    print(f"resume_from_checkpoint: max |adapter param diff| vs uninterrupted run = {d}")
    assert d == 0.0

    # a checkpoint written before format 3 (0-dim gates in the model's state dict, in the
    # optimizer's moments and in a format-2 adapter checkpoint) resumes to the same adapter
    old = _as_before_format_3(tmp_path / "run" / "checkpoint-2", tmp_path / "old-2")
    fresh = load_adapter(tiny_causal_lm("llama"), old)
    assert all(torch.equal(v, snaps.at[2][k]) for k, v in adapter_state_dict(fresh).items())
    resumed = inject(tiny_causal_lm("llama"), HRMConfig(d_state=4, gate_init=0.1))
    _trainer(resumed, tmp_path / "resume-old", max_steps=4).train(
        resume_from_checkpoint=str(old))
    again = adapter_state_dict(resumed)
    assert all(torch.equal(again[k], final[k]) for k in final)


def _as_before_format_3(checkpoint, out):
    """A copy of a Trainer checkpoint as code with a 0-dim gate wrote it."""
    import shutil

    import safetensors.torch as st

    from tests.adapters.test_io import _zero_dim_gates

    shutil.copytree(checkpoint, out)
    full = st.load_file(str(out / "model.safetensors"))
    st.save_file(_zero_dim_gates(full), str(out / "model.safetensors"), metadata={"format": "pt"})
    optim = torch.load(out / "optimizer.pt", weights_only=True)
    moments = [v for state in optim["state"].values() for v in state.values()
               if isinstance(v, torch.Tensor) and v.shape == (1,)]  # only gates have shape (1,)
    assert len(moments) == 4  # exp_avg, exp_avg_sq of two gates
    for state in optim["state"].values():
        for key, v in state.items():
            if isinstance(v, torch.Tensor) and v.shape == (1,):
                state[key] = v.reshape(())
    torch.save(optim, out / "optimizer.pt")
    model = load_adapter(tiny_causal_lm("llama"), checkpoint)
    with pytest.MonkeyPatch.context() as m:
        from tests.adapters.test_io import _write_v2

        _write_v2(model, out, m)
    return out


def test_a_full_state_dict_of_adapters_of_another_structure_loads():
    """``model.load_state_dict`` takes each stored SSM's structure (mode counts), as
    ``load_adapter`` does: reduced or mixed adapters into freshly injected ones."""
    from adapters.layer import ssm_of_structure

    source = _activate(inject(tiny_causal_lm("llama"), HRMConfig(d_state=8, mode="complex")))
    for adapted, (n_real, n_cplx) in zip(find_adapters(source).values(), [(2, 3), (4, 0)],
                                         strict=True):
        ssm = ssm_of_structure(32, n_real, n_cplx, dtype=torch.float32)
        with torch.no_grad():
            for t in ssm.parameters():
                t.add_(0.01 * torch.randn(t.shape, generator=torch.Generator().manual_seed(7)))
        adapted.adapter.ssm = ssm
    with torch.no_grad():
        want = source(IDS).logits
    fresh = inject(tiny_causal_lm("llama"), HRMConfig(d_state=8, mode="complex"))
    fresh.load_state_dict(source.state_dict())
    assert [(a.adapter.ssm.n_real, a.adapter.ssm.n_complex)
            for a in find_adapters(fresh).values()] == [(2, 3), (4, 0)]
    with torch.no_grad():
        assert torch.equal(fresh(IDS).logits, want)


def test_plain_trainer_resumes_reduced_adapters_into_freshly_injected_ones(tmp_path):
    from adapters import calibrate, reduce

    config = HRMConfig(d_state=8, gate_init=0.3)
    model = inject(tiny_causal_lm("llama"), config)
    reduce(model, stats=calibrate(model, [IDS], progress=False), gramian="data",
           order={"model.layers.0.mlp": 3, "model.layers.1.mlp": 5})
    sizes = {k: a.adapter.d_state for k, a in find_adapters(model).items()}
    assert sizes["model.layers.0.mlp"] == 3 and max(sizes.values()) < 8
    _trainer(model, tmp_path / "run", max_steps=4).train()
    final = adapter_state_dict(model)
    resumed = inject(tiny_causal_lm("llama"), config)  # 8 modes per layer
    _trainer(resumed, tmp_path / "resume", max_steps=4).train(
        resume_from_checkpoint=str(tmp_path / "run" / "checkpoint-2"))
    assert {k: a.adapter.d_state for k, a in find_adapters(resumed).items()} == sizes
    again = adapter_state_dict(resumed)
    assert again.keys() == final.keys() and all(torch.equal(again[k], final[k]) for k in final)


def test_a_loop_of_one_s_own_resumes_smaller_adapters_with_an_optimizer_built_before(tmp_path):
    """``opt = AdamW(model.parameters()); model.load_state_dict(...); opt.load_state_dict(...)``
    with adapters of fewer real modes: the same Parameter objects are resized, so the optimizer
    built before the load trains them, from its saved state, as the uninterrupted run does. A
    structure with complex modes where there were none adds parameters: that warns."""
    from adapters.layer import ssm_of_structure

    def steps(model, opt, n):
        for _ in range(n):
            opt.zero_grad()
            model(IDS, labels=IDS).loss.backward()
            opt.step()

    def trainable(model):
        return [p for p in model.parameters() if p.requires_grad]

    config = HRMConfig(d_state=8, gate_init=0.3)
    model = inject(tiny_causal_lm("llama"), config)
    for adapted, n in zip(find_adapters(model).values(), (3, 5), strict=True):
        adapted.adapter.ssm = ssm_of_structure(32, n, 0, dtype=torch.float32)
    opt = torch.optim.AdamW(trainable(model), lr=1e-2)
    steps(model, opt, 2)
    torch.save({"model": model.state_dict(), "opt": opt.state_dict()}, tmp_path / "ckpt.pt")
    steps(model, opt, 2)
    want = adapter_state_dict(model)

    fresh = inject(tiny_causal_lm("llama"), config)  # 8 real modes per layer
    resumed = torch.optim.AdamW(trainable(fresh), lr=1e-2)
    saved = torch.load(tmp_path / "ckpt.pt", weights_only=True)
    fresh.load_state_dict(saved["model"])
    resumed.load_state_dict(saved["opt"])
    steps(fresh, resumed, 2)
    got = adapter_state_dict(fresh)
    assert got.keys() == want.keys() and all(torch.equal(got[k], want[k]) for k in want)

    mixed = inject(tiny_causal_lm("llama"), config)
    find_adapters(mixed)["model.layers.1.mlp"].adapter.ssm = ssm_of_structure(32, 3, 1)
    target = inject(tiny_causal_lm("llama"), config)
    early = torch.optim.AdamW(trainable(target), lr=1e-2)  # built before: misses the new ones
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the load itself does not warn (a Trainer builds after)
        target.load_state_dict(mixed.state_dict())
        late = torch.optim.AdamW(trainable(target), lr=1e-2)
        steps(target, late, 1)
    with pytest.warns(UserWarning, match=r"adapters at \['hrm_adapters.model.layers.1.mlp"
                      r".*will not be trained; build the optimizer after loading"):
        steps(target, early, 1)
