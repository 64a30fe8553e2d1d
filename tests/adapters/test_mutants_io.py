"""Tests written for the survivors of the mutation run of adapters/io.py
(benchmarks/results/mutmut_adapters_io.md): each checks a promise of the checkpoint format
that the earlier tests covered only in combination or not at all (a checkpoint with only
unexpected keys, a reduced float64 layer with its own scan, errors naming the file, ...)."""

from __future__ import annotations

import hashlib
import json
import re
import warnings
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch

from adapters import DiagonalSSM, HRMConfig, find_adapters, inject, load_adapter, save_adapter
from adapters.exceptions import AdapterError, CheckpointError
from adapters.io import (
    _HEADER_KEY,
    CONFIG_NAME,
    LEGACY_CONFIG_NAME,
    LEGACY_WEIGHTS_NAME,
    WEIGHTS_NAME,
    AdapterTrainerMixin,
    _drop_stale,
    adapter_state_dict,
)
from adapters.targets import ADAPTERS_ATTR
from tests.adapters.test_io import (
    H,
    _assert_rejected,
    _rewrite,
    _write_v1,
    header_meta,
    logits,
    tiny,
    trained,
)

st = pytest.importorskip("safetensors.torch", reason="checkpoints need the hf extra")
pytest.importorskip("transformers", reason="the tiny models are transformers models")


@pytest.fixture
def saved(tmp_path):
    model, _ = trained("llama")
    save_adapter(model, tmp_path)
    return tmp_path


def _tensors(directory: Path) -> dict[str, torch.Tensor]:
    return st.load_file(str(directory / WEIGHTS_NAME))


# ------------------------------------------------------------- keys, one kind at a time


def test_only_unexpected_keys_are_refused(saved):
    tensors = _tensors(saved)
    _rewrite(saved, {**tensors, "model.layers.0.mlp.ssm.extra": torch.zeros(3)})
    _assert_rejected(saved, r"unexpected keys \['model\.layers\.0\.mlp\.ssm\.extra'\]")


def test_an_unexpected_zero_dim_tensor_is_named_not_a_type_error(saved):
    # formats 1 and 2 stored 0-dim gates: the 0-dim check must not look up unknown keys
    _rewrite(saved, {**_tensors(saved), "model.layers.0.mlp.extra": torch.tensor(1.0)})
    _assert_rejected(saved, r"unexpected keys \['model\.layers\.0\.mlp\.extra'\]")


def test_only_missing_keys_are_refused(saved):
    key = "model.layers.1.mlp.ssm.B"
    _rewrite(saved, {k: v for k, v in _tensors(saved).items() if k != key})
    _assert_rejected(saved, rf"missing keys \['{key}'\], unexpected keys \[\], mismatched \[\]")


def test_a_gate_of_the_wrong_shape_is_a_mismatch(saved):
    tensors = _tensors(saved)
    tensors["model.layers.0.mlp.gate"] = torch.zeros(2)  # the parameter has shape (1,)
    _rewrite(saved, tensors)
    _assert_rejected(saved, r"mismatched \[.model\.layers\.0\.mlp\.gate: checkpoint \(\(2,\)")


def _edit_layers(directory: Path, edit) -> None:
    """Rewrite the header's per-layer record (the tensors, and so their digest, unchanged)."""
    meta = header_meta(directory)
    edit(meta["layers"])
    st.save_file(_tensors(directory), str(directory / WEIGHTS_NAME),
                 metadata={"format": "pt", _HEADER_KEY: json.dumps(meta)})
    (directory / CONFIG_NAME).write_text(json.dumps(meta))


def test_a_layer_only_in_the_checkpoint_is_named(saved):
    _edit_layers(saved, lambda layers: layers.update(
        {"model.layers.9.mlp": dict(layers["model.layers.0.mlp"])}))
    _assert_rejected(saved, r"missing in checkpoint \[\], unexpected in checkpoint "
                            r"\['model\.layers\.9\.mlp'\]")


def test_invalid_layer_metadata_names_the_layer(saved):
    _edit_layers(saved, lambda layers: layers["model.layers.1.mlp"].pop("n_real"))
    _assert_rejected(saved, r"layer 'model\.layers\.1\.mlp' has invalid metadata")


# --------------------------------------------------------- reduced layers, full record


def test_a_reduced_float64_layer_with_its_own_scan_round_trips(tmp_path):
    """A reduced layer is rebuilt from the record: its sizes, dtype and scan (not defaults)."""
    model, fresh = trained("llama", dtype="float64")
    g = torch.Generator().manual_seed(7)
    a = torch.complex(torch.rand(3, generator=g, dtype=torch.float64) * 0.9,
                      torch.zeros(3, dtype=torch.float64))
    B = torch.randn(3, H, generator=g, dtype=torch.complex128).real.to(torch.complex128)
    C = torch.randn(H, 3, generator=g, dtype=torch.complex128).real.to(torch.complex128)
    name = "model.layers.1.mlp"
    find_adapters(model)[name].adapter.ssm = DiagonalSSM.from_discrete(
        a, B, C, scan="fft", dtype=torch.float64)
    save_adapter(model, tmp_path)
    load_adapter(fresh, tmp_path)
    ssm = find_adapters(fresh)[name].adapter.ssm
    assert (ssm.n_real, ssm.n_complex, ssm.scan) == (3, 0, "fft")
    assert {p.dtype for p in ssm.parameters()} == {torch.float64}
    got, want = adapter_state_dict(fresh), adapter_state_dict(model)
    assert got.keys() == want.keys() and all(torch.equal(got[k], want[k]) for k in want)
    assert torch.equal(logits(model), logits(fresh))


def test_save_takes_the_adapter_tensors_from_a_given_state_dict(tmp_path):
    # (a Trainer under ZeRO-3 passes the gathered state dict; here the values just differ)
    model, _ = trained("llama")
    full = {k: v.clone() for k, v in model.state_dict().items()}
    key = f"{ADAPTERS_ATTR}.model.layers.0.mlp.adapter.gate"
    assert key in full
    full[key] = torch.full_like(full[key], 0.25)
    save_adapter(model, tmp_path, state_dict=full)
    assert _tensors(tmp_path)["model.layers.0.mlp.gate"].tolist() == [0.25]
    assert find_adapters(model)["model.layers.0.mlp"].adapter.gate.tolist() == [0.5]


# --------------------------------------------------------- format 1: errors name the file


@pytest.fixture
def v1(tmp_path):
    model, _ = trained("qwen2")
    _write_v1(model, tmp_path)
    return tmp_path


def _e(path: Path) -> str:
    return re.escape(str(path))


def _meta_v1(directory: Path) -> dict:
    return json.loads((directory / LEGACY_CONFIG_NAME).read_text())


def test_format_1_errors_name_the_file_at_fault(v1):
    cfg, weights = v1 / LEGACY_CONFIG_NAME, v1 / LEGACY_WEIGHTS_NAME
    meta = _meta_v1(v1)
    # the listing disagrees with the file (the SHA-256 of the JSON still matches)
    bad = {**meta, "tensors": {**meta["tensors"], "model.layers.0.mlp.gate": {
        "shape": [7], "dtype": "float32"}}}
    cfg.write_text(json.dumps(bad))
    _assert_rejected(v1, rf"the tensors of '{_e(weights)}' do not match its listing", tiny("qwen2"))
    # a record without `layers`
    cfg.write_text(json.dumps({k: v for k, v in meta.items() if k != "layers"}))
    _assert_rejected(v1, rf"^'{_e(cfg)}' does not hold a valid adapter checkpoint", tiny("qwen2"))
    # weights that are not safetensors (their SHA-256 recorded)
    garbage = b"\x01" * 64
    cfg.write_text(json.dumps({**meta, "weights_sha256": hashlib.sha256(garbage).hexdigest()}))
    blob = weights.read_bytes()
    weights.write_bytes(garbage)
    _assert_rejected(v1, rf"^'{_e(weights)}' could not be read", tiny("qwen2"))
    weights.write_bytes(blob)
    # no weights file
    cfg.write_text(json.dumps(meta))
    weights.unlink()
    _assert_rejected(v1, rf"^adapter checkpoint file '{_e(weights)}' is missing$", tiny("qwen2"))
    cfg.write_text("{ not json")
    _assert_rejected(v1, rf"^'{_e(cfg)}' is not valid JSON", tiny("qwen2"))


def test_format_1_peft_folder_and_warning_name_the_folder(v1, tmp_path_factory):
    model = tiny("qwen2")
    with pytest.warns(FutureWarning) as rec:
        load_adapter(model, v1)
    assert str(rec[0].message).startswith(
        f"'{v1}' is an adapter checkpoint of format version 1 (PEFT's file names, no "
        "base-model fingerprint, so the base model is not checked)")
    peft_like = tmp_path_factory.mktemp("peft")
    (peft_like / LEGACY_CONFIG_NAME).write_text(json.dumps({"peft_type": "LORA"}))
    _assert_rejected(peft_like, rf"^'{_e(peft_like)}' holds a PEFT adapter \(peft_type='LORA'\), "
                                "not an HRM adapter: load it with `peft.PeftModel")


# ----------------------------------------------------- save_pretrained companions


def test_dropping_a_stale_companion_without_its_json_copy(tmp_path):
    # written beside base weights by save_pretrained; its optional JSON copy deleted since
    model, _ = trained("llama")
    model.save_pretrained(tmp_path)
    assert header_meta(tmp_path)["saved_by"] == "save_pretrained"
    (tmp_path / CONFIG_NAME).unlink()
    _drop_stale(tmp_path)
    assert not (tmp_path / WEIGHTS_NAME).exists()


def test_a_kept_checkpoint_warning_names_the_folder(saved):
    with pytest.warns(UserWarning) as rec:
        _drop_stale(saved)
    assert str(rec[0].message).startswith(f"'{saved}' holds an HRM adapter checkpoint")
    assert "`load_adapter` of this folder restores those adapters" in str(rec[0].message)
    assert (saved / WEIGHTS_NAME).is_file()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        load_adapter(inject(tiny("llama"), HRMConfig(d_state=8)), saved)


# ------------------------------------------------------------ header record checks


def test_base_fingerprints_compare_the_class_only_when_no_model_type_is_known():
    from adapters.io import _base_differences

    def fp(model_type, architecture, width=32):
        return {"model_type": model_type, "architecture": architecture,
                "hidden_size": width, "num_layers": 2}

    # same model_type, other head class (LlamaModel vs LlamaForCausalLM): compatible
    assert _base_differences(fp("llama", "LlamaForCausalLM"), fp("llama", "LlamaModel")) == []
    # known on one side only: model_type differs, the class is not compared on top
    for saved, current in [(fp("llama", "A"), fp(None, "B")), (fp(None, "A"), fp("llama", "B"))]:
        assert _base_differences(saved, current) == [
            f"model_type: checkpoint {saved['model_type']!r} vs model {current['model_type']!r}"]
    # plain modules: the class is all there is
    assert _base_differences(fp(None, "A"), fp(None, "B")) == [
        "architecture: checkpoint 'A' vs model 'B'"]
    # a width unknown on one side is left to the shape checks
    assert _base_differences(fp("llama", "A"), fp("llama", "A", width=None)) == []
    assert _base_differences(fp("llama", "A"), fp("llama", "A", width=64)) == [
        "hidden_size: checkpoint 32 vs model 64"]


def _edit_meta(directory: Path, edit) -> None:
    meta = header_meta(directory)
    edit(meta)
    st.save_file(_tensors(directory), str(directory / WEIGHTS_NAME),
                 metadata={"format": "pt", _HEADER_KEY: json.dumps(meta)})
    (directory / CONFIG_NAME).unlink()


@pytest.mark.parametrize("field", ["layers", "tensors"])
def test_a_record_whose_layers_or_listing_is_not_an_object_is_refused(saved, field):
    _edit_meta(saved, lambda meta: meta.update({field: list(meta[field])}))
    _assert_rejected(saved, rf"^'{_e(saved / WEIGHTS_NAME)}' does not hold a valid adapter "
                            r"checkpoint: `layers` and `tensors` must be objects$")


def test_a_listing_mismatch_names_the_tensor_that_differs(saved):
    listing = header_meta(saved)["tensors"]
    listing["model.layers.0.mlp.ssm.B"]["dtype"] = "float64"
    _rewrite(saved, _tensors(saved), listing=listing)
    with pytest.raises(CheckpointError, match="do not match its listing") as info:
        load_adapter(tiny("llama"), saved)
    msg = str(info.value)
    assert msg.startswith(f"the tensors of '{saved / WEIGHTS_NAME}' do not match its listing")
    assert "model.layers.0.mlp.ssm.B" in msg and "float64" in msg
    assert "model.layers.1.mlp.ssm.B" not in msg  # only what differs


def test_a_missing_checkpoint_says_only_what_is_there(tmp_path):
    _assert_rejected(tmp_path, rf"^adapter checkpoint file '{_e(tmp_path / WEIGHTS_NAME)}' is "
                               "missing$")


@pytest.mark.parametrize("case", ["checksum", "garbage", "foreign", "record", "array"])
def test_checkpoint_errors_name_the_weights_file(saved, case):
    w = saved / WEIGHTS_NAME
    if case == "checksum":
        data = bytearray(w.read_bytes())
        data[-3] ^= 0x01
        w.write_bytes(bytes(data))
        match = (rf"^the tensors of '{_e(w)}' do not match the SHA-256 recorded in its header: "
                 "the file was changed after it was written$")
    elif case == "garbage":
        w.write_bytes(b"\x00" * 7)
        match = rf"^'{_e(w)}' could not be read: "
    elif case == "foreign":
        st.save_file({"w": torch.zeros(2)}, str(w))
        match = (rf"^'{_e(w)}' is a safetensors file without an 'hrm_checkpoint' record in its "
                 r"header: it was not written by `adapters\.save_adapter`$")
    elif case == "record":
        st.save_file(_tensors(saved), str(w), metadata={_HEADER_KEY: "{not json"})
        match = rf"^the header record of '{_e(w)}' is not JSON: "
    else:
        st.save_file(_tensors(saved), str(w), metadata={_HEADER_KEY: "[1]"})
        match = (rf"^'{_e(w)}' does not hold a valid adapter checkpoint: expected an object, "
                 "got list$")
    _assert_rejected(saved, match)


# ------------------------------------------------- AdapterTrainerMixin, without a Trainer


class _Trainer(AdapterTrainerMixin):
    """The attributes of ``transformers.Trainer`` the mixin reads, nothing else."""

    def __init__(self, model, output_dir, should_save=True, best=None):
        self.model = model
        self.accelerator = SimpleNamespace(unwrap_model=lambda m: m)
        self.args = SimpleNamespace(output_dir=str(output_dir), should_save=should_save)
        self.state = SimpleNamespace(best_model_checkpoint=best)


def _same_adapters(a, b) -> bool:
    x, y = adapter_state_dict(a), adapter_state_dict(b)
    return x.keys() == y.keys() and all(torch.equal(x[k], y[k]) for k in x)


def test_trainer_mixin_saves_to_its_output_dir_on_the_saving_process_only(tmp_path):
    model, _ = trained("llama")
    _Trainer(model, tmp_path / "quiet", should_save=False)._save()
    assert not (tmp_path / "quiet").exists()
    _Trainer(model, tmp_path / "out")._save()  # output_dir None: the Trainer's own
    _Trainer(model, tmp_path / "unused")._save(str(tmp_path / "ckpt"))
    assert not (tmp_path / "unused").exists()
    for d in ("out", "ckpt"):
        assert _same_adapters(load_adapter(tiny("llama"), tmp_path / d), model)


def test_trainer_mixin_resumes_and_loads_the_best_checkpoint(tmp_path):
    model, _ = trained("llama")
    save_adapter(model, tmp_path / "best")
    target = inject(tiny("llama"), HRMConfig(d_state=8))
    _Trainer(target, tmp_path, best=None)._load_best_model()  # none recorded: nothing
    assert not _same_adapters(target, model)
    _Trainer(target, tmp_path, best=str(tmp_path / "best"))._load_best_model()
    assert _same_adapters(target, model)
    resumed = inject(tiny("llama"), HRMConfig(d_state=8))
    _Trainer(resumed, tmp_path)._load_from_checkpoint(str(tmp_path / "best"))
    assert _same_adapters(resumed, model)
    other = inject(tiny("llama"), HRMConfig(d_state=8))  # `model=` given: that one is loaded
    untouched = inject(tiny("llama"), HRMConfig(d_state=8))
    before = adapter_state_dict(untouched)
    _Trainer(untouched, tmp_path)._load_from_checkpoint(str(tmp_path / "best"), model=other)
    assert _same_adapters(other, model)
    assert all(torch.equal(v, before[k]) for k, v in adapter_state_dict(untouched).items())


def test_trainer_mixin_refuses_a_model_without_adapters(tmp_path):
    with pytest.raises(AdapterError, match=r"^AdapterTrainerMixin needs a model adapted by "
                                           r"`adapters\.inject`$"):
        _Trainer(tiny("llama"), tmp_path)._save()
    assert not any(tmp_path.iterdir())


def test_a_peft_wrappers_load_of_a_lora_only_folder_leaves_the_hrm_adapters(tmp_path):
    # load_adapter of a PeftModel given HRM adapters reads HRM weights only where they are
    peft = pytest.importorskip("peft", reason="peft is part of the hf extra")
    from tests.adapters._tiny import tiny_causal_lm

    def lora():
        return peft.get_peft_model(tiny_causal_lm("llama"),
                                   peft.LoraConfig(r=4, target_modules=["q_proj", "v_proj"]))

    lora().save_pretrained(tmp_path / "lora_only")  # PEFT's files, no HRM checkpoint
    assert not (tmp_path / "lora_only" / WEIGHTS_NAME).exists()
    model = inject(lora(), HRMConfig(d_state=4, gate_init=0.5))
    before = adapter_state_dict(model)
    model.load_adapter(str(tmp_path / "lora_only"), adapter_name="other")
    assert "other" in model.peft_config
    after = adapter_state_dict(model)
    assert after.keys() == before.keys() and all(torch.equal(after[k], before[k]) for k in after)
