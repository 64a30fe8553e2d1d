"""save_adapter / load_adapter: our own file names, the base model's fingerprint, typed errors.

Bit-identical reload on tiny random GPT-2, Llama, Qwen2 and Mistral models; a Llama adapter
does not load silently into a Qwen2 model of the same sizes; PEFT folders and PEFT's loader
on our folders fail clearly; the old (version 1) format is still read.
"""

from __future__ import annotations

import copy
import hashlib
import json
import re
import warnings
from pathlib import Path

import pytest
import torch
from torch import nn

from adapters import DiagonalSSM, HRMConfig, find_adapters, inject, load_adapter, save_adapter
from adapters.config import FORMAT_VERSION
from adapters.exceptions import BaseModelMismatchError, CheckpointError
from adapters.io import (
    _HEADER_KEY,
    CONFIG_NAME,
    LEGACY_CONFIG_NAME,
    LEGACY_WEIGHTS_NAME,
    WEIGHTS_NAME,
    _header_metadata,
    _tensors_digest,
    adapter_state_dict,
    base_fingerprint,
)
from tests.adapters._tiny_lm import KINDS, tiny_lm

transformers = pytest.importorskip("transformers", reason="extra 'hf' not installed")
st = pytest.importorskip("safetensors.torch", reason="extra 'hf' not installed")

H, N = 32, 8
IDS = torch.randint(0, 64, (2, 11), generator=torch.Generator().manual_seed(1))


def tiny(kind: str = "llama", width: int = H) -> nn.Module:
    return tiny_lm(kind, width=width)


def trained(kind: str, **cfg) -> tuple[nn.Module, nn.Module]:
    """(adapted model with non-trivial adapter values, an untouched copy of its base)."""
    model = tiny(kind)
    fresh = copy.deepcopy(model)
    inject(model, HRMConfig(d_state=N, **cfg))
    torch.manual_seed(3)
    with torch.no_grad():
        for a in find_adapters(model).values():
            a.adapter.gate.fill_(0.5)
            for p in a.adapter.ssm.parameters():
                p.add_(0.01 * torch.randn_like(p))
    return model, fresh


def logits(model: nn.Module) -> torch.Tensor:
    with torch.no_grad():
        return model(IDS, use_cache=False).logits


def header_meta(directory: Path) -> dict:
    return json.loads(_header_metadata((directory / WEIGHTS_NAME).read_bytes())[_HEADER_KEY])


@pytest.mark.parametrize(("kind", "cfg"), [(k, {}) for k in KINDS]
                         + [("llama", {"mode": "complex"}),
                            ("llama", {"reads": "mlp_output", "dtype": "float64"})])
def test_save_load_into_fresh_base_is_bit_identical(tmp_path, kind, cfg):
    model, fresh = trained(kind, **cfg)
    save_adapter(model, tmp_path)
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([CONFIG_NAME, WEIGHTS_NAME])
    stored = st.load_file(str(tmp_path / WEIGHTS_NAME))
    assert set(stored) == set(adapter_state_dict(model))  # adapter tensors only
    assert all(re.search(r"\.mlp\.(gate|ssm\.)", k) for k in stored)
    n_base = sum(p.numel() for p in fresh.parameters())
    assert sum(t.numel() for t in stored.values()) < n_base / 5
    assert load_adapter(fresh, tmp_path) is fresh
    a, b = logits(model), logits(fresh)
    print(f"{kind} {cfg}: reload max |diff| = {(a - b).abs().max().item()}")
    assert torch.equal(a, b)
    for (n1, p1), (n2, p2) in zip(model.named_parameters(), fresh.named_parameters(), strict=True):
        assert n1 == n2 and torch.equal(p1, p2) and p1.requires_grad == p2.requires_grad


@pytest.mark.parametrize("kind", KINDS)
def test_fingerprint_is_recorded_in_header_and_copy(tmp_path, kind):
    model, _ = trained(kind)
    model.config._name_or_path = f"org/tiny-{kind}"
    save_adapter(model, tmp_path)
    meta = header_meta(tmp_path)
    assert json.loads((tmp_path / CONFIG_NAME).read_text()) == meta  # the copy is the header
    assert meta["format_version"] == FORMAT_VERSION == 3 and meta["adapter_type"] == "HRM"
    base = meta["base_model"]
    assert base == base_fingerprint(model)
    assert base["model_type"] == model.config.model_type == kind
    assert base["name_or_path"] == f"org/tiny-{kind}"
    assert base["hidden_size"] == H and base["num_layers"] == 2
    assert base["architecture"] == type(model).__name__
    assert base["target_modules"] == list(find_adapters(model)) and len(base["target_modules"]) == 2
    assert meta["tensors_sha256"] == _tensors_digest(st.load_file(str(tmp_path / WEIGHTS_NAME)))
    gates = {k: v for k, v in meta["tensors"].items() if k.endswith(".gate")}
    assert len(gates) == 2 and all(v["shape"] == [1] for v in gates.values())  # format 3


def test_llama_adapter_refuses_a_qwen2_base_of_the_same_sizes(tmp_path):
    model, _ = trained("llama")
    save_adapter(model, tmp_path)
    qwen = tiny("qwen2")
    mlp_shapes = lambda m: [(n, p.shape) for n, p in m.named_parameters() if ".mlp." in n]  # noqa: E731
    assert mlp_shapes(qwen) == mlp_shapes(tiny())  # same sizes: only the fingerprint differs
    with pytest.raises(BaseModelMismatchError, match=r"model_type: checkpoint 'llama' vs model "
                                                     r"'qwen2'.*allow_base_mismatch=True"):
        load_adapter(qwen, tmp_path)
    assert not find_adapters(qwen)
    with pytest.warns(UserWarning, match="another base model.*'llama' vs model 'qwen2'"):
        load_adapter(qwen, tmp_path, allow_base_mismatch=True)
    got, want = adapter_state_dict(qwen), adapter_state_dict(model)
    assert got.keys() == want.keys() and all(torch.equal(got[k], want[k]) for k in want)


def test_width_and_depth_differences_are_named(tmp_path):
    model, _ = trained("llama")
    save_adapter(model, tmp_path)
    with pytest.raises(BaseModelMismatchError, match="hidden_size: checkpoint 32 vs model 48"):
        load_adapter(tiny("llama", width=48), tmp_path)
    deeper = tiny_lm("llama", layers=3)
    with pytest.raises(BaseModelMismatchError, match="num_layers: checkpoint 2 vs model 3"):
        load_adapter(deeper, tmp_path)
    # the override does not bypass the shape checks
    with pytest.warns(UserWarning), pytest.raises(CheckpointError, match="width 32 in the "
                                                                       "checkpoint but 48"):
        load_adapter(tiny("llama", width=48), tmp_path, allow_base_mismatch=True)
    with pytest.warns(UserWarning), pytest.raises(CheckpointError, match="layers differ"):
        load_adapter(deeper, tmp_path, allow_base_mismatch=True)
    assert not find_adapters(deeper)


def test_name_or_path_alone_does_not_block(tmp_path):
    model, fresh = trained("llama")
    model.config._name_or_path = "org/a"
    fresh.config._name_or_path = "/local/copy/of/a"
    save_adapter(model, tmp_path)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        load_adapter(fresh, tmp_path)
    assert torch.equal(logits(model), logits(fresh))


def test_reduced_adapters_with_per_layer_sizes_round_trip(tmp_path):
    model, fresh = trained("llama")
    g = torch.Generator().manual_seed(5)
    shapes = {"model.layers.0.mlp": (2, 1), "model.layers.1.mlp": (0, 3)}  # (n_real, n_cplx)
    for name, (nr, nc) in shapes.items():  # swap in reduced (modal) SSMs, as reduce() does
        n = nr + nc
        a = torch.complex(torch.rand(n, generator=g) * 0.9, torch.zeros(n))
        a[nr:] = a[nr:] * torch.exp(torch.tensor(0.3j))
        B = torch.randn(n, H, generator=g, dtype=torch.complex128)
        C = torch.randn(H, n, generator=g, dtype=torch.complex128)
        B[:nr], C[:, :nr] = B[:nr].real, C[:, :nr].real
        find_adapters(model)[name].adapter.ssm = DiagonalSSM.from_discrete(a, B, C)
    save_adapter(model, tmp_path)
    meta = header_meta(tmp_path)
    assert {k: (v["n_real"], v["n_complex"]) for k, v in meta["layers"].items()} == shapes
    load_adapter(fresh, tmp_path)
    for name, (nr, nc) in shapes.items():
        ssm = find_adapters(fresh)[name].adapter.ssm
        assert (ssm.n_real, ssm.n_complex) == (nr, nc)
    assert torch.equal(logits(model), logits(fresh))
    # and into a model that already has full-size adapters (phase-2 resume)
    other = inject(tiny("llama"), HRMConfig(d_state=N))
    load_adapter(other, tmp_path)
    assert torch.equal(logits(model), logits(other))


def _rewrite(directory: Path, tensors: dict, *, fix_digest: bool = True,
             listing: dict | None = None) -> None:
    """Write `tensors` as the checkpoint, keeping its header consistent unless told otherwise."""
    meta = header_meta(directory)
    meta["tensors"] = listing if listing is not None else {
        k: {"shape": list(v.shape), "dtype": str(v.dtype).removeprefix("torch.")}
        for k, v in tensors.items()}
    if fix_digest:
        meta["tensors_sha256"] = _tensors_digest(tensors)
    st.save_file(tensors, str(directory / WEIGHTS_NAME),
                 metadata={"format": "pt", _HEADER_KEY: json.dumps(meta)})
    (directory / CONFIG_NAME).write_text(json.dumps(meta))


@pytest.fixture
def saved(tmp_path):
    model, _ = trained("llama")
    save_adapter(model, tmp_path)
    return tmp_path


def _assert_rejected(directory: Path, match: str, model: nn.Module | None = None,
                     error: type = CheckpointError) -> None:
    model = tiny("llama") if model is None else model
    before = {k: v.clone() for k, v in model.state_dict().items()}
    with pytest.raises(error, match=match):
        load_adapter(model, directory)
    assert not find_adapters(model)  # a base model is left unadapted and unchanged
    after = model.state_dict()
    assert after.keys() == before.keys() and all(torch.equal(after[k], before[k]) for k in before)


def test_tampered_bytes_fail_the_checksum(saved):
    data = bytearray((saved / WEIGHTS_NAME).read_bytes())
    data[-3] ^= 0x01  # one bit of one weight
    (saved / WEIGHTS_NAME).write_bytes(bytes(data))
    _assert_rejected(saved, "SHA-256")


@pytest.mark.parametrize("cut", [0, 7, 100, -5])
def test_truncated_or_garbage_weights(saved, cut):
    data = (saved / WEIGHTS_NAME).read_bytes()
    (saved / WEIGHTS_NAME).write_bytes(b"\x00" * 7 if cut == 7 else data[:cut])
    _assert_rejected(saved, "could not be read")


def test_foreign_safetensors_file_is_named(saved):
    st.save_file({"w": torch.zeros(2)}, str(saved / WEIGHTS_NAME))
    _assert_rejected(saved, "not written by `adapters.save_adapter`")


def test_missing_unexpected_and_mismatched_keys_are_named(saved):
    tensors = st.load_file(str(saved / WEIGHTS_NAME))
    key = "model.layers.1.mlp.ssm.B"
    edited = {k: v for k, v in tensors.items() if k != key}
    edited["model.layers.1.mlp.ssm.extra"] = torch.zeros(3)
    edited["model.layers.0.mlp.ssm.C"] = torch.zeros(H, N + 1)
    _rewrite(saved, edited)
    with pytest.raises(CheckpointError) as info:
        load_adapter(tiny("llama"), saved)
    msg = str(info.value)
    assert key in msg and "ssm.extra" in msg and "model.layers.0.mlp.ssm.C" in msg
    _assert_rejected(saved, "missing keys")


def test_listing_disagrees_with_file(saved):
    tensors = st.load_file(str(saved / WEIGHTS_NAME))
    listing = header_meta(saved)["tensors"]  # still says float32
    _rewrite(saved, {k: v.double() for k, v in tensors.items()}, listing=listing)
    _assert_rejected(saved, "do not match its listing")


def test_json_copy_is_not_needed_and_a_stale_copy_warns(saved):
    model, _ = trained("llama")
    expect = adapter_state_dict(model)
    (saved / CONFIG_NAME).write_text("{ not json")
    with pytest.warns(UserWarning, match="does not match the config recorded"):
        fresh = load_adapter(tiny("llama"), saved)
    got = adapter_state_dict(fresh)
    assert all(torch.equal(got[k], expect[k]) for k in expect)
    (saved / CONFIG_NAME).unlink()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        load_adapter(tiny("llama"), saved)
    (saved / WEIGHTS_NAME).unlink()
    (saved / CONFIG_NAME).write_text("{}")
    _assert_rejected(saved, "is missing .the folder holds only the JSON copy")


def test_missing_files_and_wrong_model(saved, tmp_path_factory):
    _assert_rejected(saved, r"model_type: checkpoint 'llama' vs model 'gpt2'", tiny("gpt2"),
                     error=BaseModelMismatchError)
    empty = tmp_path_factory.mktemp("empty")
    _assert_rejected(empty, "is missing")


def test_mismatched_adapter_configs_give_checkpoint_errors(tmp_path):
    model, _ = trained("llama")
    save_adapter(model, tmp_path)
    _assert_rejected(tmp_path, "architecture: checkpoint 'LlamaForCausalLM' vs model 'Sequential'|"
                     "model_type", nn.Sequential(nn.Linear(3, 3)), error=BaseModelMismatchError)
    skip = inject(tiny("llama"), HRMConfig(d_state=N, layers_to_skip=(1,)))
    with pytest.raises(CheckpointError, match="layers_to_skip"):
        load_adapter(skip, tmp_path)
    cplx = inject(tiny("llama"), HRMConfig(d_state=N, mode="complex"))
    with pytest.raises(CheckpointError, match="mode"):
        load_adapter(cplx, tmp_path)


def test_plain_module_checkpoint_checks_the_class(tmp_path):
    def plain():
        torch.manual_seed(0)
        return nn.ModuleDict({"mlp": nn.Linear(H, H)})

    model = inject(plain(), HRMConfig(d_state=4, target_modules=["mlp"]))
    save_adapter(model, tmp_path)
    assert header_meta(tmp_path)["base_model"]["model_type"] is None
    load_adapter(plain(), tmp_path)
    other = nn.Sequential()
    other.add_module("mlp", nn.Linear(H, H))
    _assert_rejected(tmp_path, "architecture: checkpoint 'ModuleDict' vs model 'Sequential'",
                     other, error=BaseModelMismatchError)


def _zero_dim_gates(tensors: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """The adapter tensors as code before format 3 held them: each gate a 0-dim tensor."""
    out = {k: v.reshape(()) if k.endswith(".gate") else v for k, v in tensors.items()}
    assert sum(v.dim() == 0 for v in out.values()) == sum(k.endswith(".gate") for k in out) > 0
    return out


def _write_v2(model: nn.Module, directory: Path, monkeypatch) -> None:
    """A format-2 checkpoint as `save_adapter` wrote it before format 3: the same writer, fed
    the 0-dim gates the parameters had and format version 2 (the only differences)."""
    import adapters.config
    import adapters.io

    sd = adapters.io.adapter_state_dict
    with monkeypatch.context() as m:
        m.setattr(adapters.io, "adapter_state_dict", lambda *a: _zero_dim_gates(sd(*a)))
        m.setattr(adapters.io, "FORMAT_VERSION", 2)
        m.setattr(adapters.config, "FORMAT_VERSION", 2)
        save_adapter(model, directory)


@pytest.mark.parametrize("kind", KINDS)
def test_format_2_checkpoints_with_a_0_dim_gate_load_bit_for_bit(tmp_path, monkeypatch, kind):
    model, fresh = trained(kind)
    _write_v2(model, tmp_path, monkeypatch)
    meta = header_meta(tmp_path)
    assert meta["format_version"] == 2 and meta["config"]["format_version"] == 2
    gates = {k: v for k, v in meta["tensors"].items() if k.endswith(".gate")}
    assert len(gates) == 2 and all(v["shape"] == [] for v in gates.values())
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a supported format: no warning
        load_adapter(fresh, tmp_path)
    want, got = adapter_state_dict(model), adapter_state_dict(fresh)
    assert got.keys() == want.keys()
    assert all(got[k].shape == want[k].shape and torch.equal(got[k], want[k]) for k in want)
    assert all(a.adapter.gate.shape == (1,) for a in find_adapters(fresh).values())
    assert torch.equal(logits(model), logits(fresh))
    save_adapter(fresh, tmp_path)  # saving again writes format 3
    assert header_meta(tmp_path)["format_version"] == FORMAT_VERSION == 3


def test_a_full_state_dict_with_a_0_dim_gate_loads_bit_for_bit():
    """``model.load_state_dict`` (a Trainer resuming from an older ``model.safetensors``)."""
    model, fresh = trained("mistral")
    inject(fresh, HRMConfig(d_state=N))
    old = {k: v.reshape(()) if k.endswith(".gate") else v for k, v in model.state_dict().items()}
    assert sum(v.dim() == 0 for v in old.values()) == 2
    fresh.load_state_dict(old)
    assert all(torch.equal(a, b) for a, b in zip(fresh.state_dict().values(),
                                                  model.state_dict().values(), strict=True))
    assert torch.equal(logits(model), logits(fresh))


def _write_v1(model: nn.Module, directory: Path) -> None:
    """The format-1 layout exactly as the old `save_adapter` wrote it (PEFT's file names,
    0-dim gates)."""
    from adapters.injection import get_adapter_config
    from adapters.io import _layer_meta

    tensors = _zero_dim_gates(adapter_state_dict(model))
    weights = directory / LEGACY_WEIGHTS_NAME
    st.save_file(tensors, str(weights), metadata={"format": "pt", "adapter_type": "HRM"})
    meta = {"config": {**get_adapter_config(model).to_dict(), "format_version": 1},
            "format_version": 1,
            "layers": {n: _layer_meta(a) for n, a in find_adapters(model).items()},
            "tensors": {k: {"shape": list(v.shape), "dtype": str(v.dtype).removeprefix("torch.")}
                        for k, v in tensors.items()},
            "weights_sha256": hashlib.sha256(weights.read_bytes()).hexdigest()}
    (directory / LEGACY_CONFIG_NAME).write_text(json.dumps(meta, indent=2, sort_keys=True))


def test_format_1_folders_are_read_with_a_warning_and_converted(tmp_path):
    model, fresh = trained("qwen2")
    _write_v1(model, tmp_path)
    with pytest.warns(FutureWarning, match="format version 1.*save it again to convert"):
        load_adapter(fresh, tmp_path)
    assert torch.equal(logits(model), logits(fresh))
    save_adapter(fresh, tmp_path)  # conversion: the new files win from now on
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        again = load_adapter(tiny("qwen2"), tmp_path)
    assert torch.equal(logits(model), logits(again))
    data = bytearray((tmp_path / LEGACY_WEIGHTS_NAME).read_bytes())
    data[-3] ^= 0x01
    (tmp_path / WEIGHTS_NAME).unlink()
    (tmp_path / LEGACY_WEIGHTS_NAME).write_bytes(bytes(data))
    _assert_rejected(tmp_path, "SHA-256", tiny("qwen2"))


@pytest.fixture
def peft_folder(tmp_path):
    peft = pytest.importorskip("peft", reason="extra 'hf' not installed")
    lora = peft.get_peft_model(tiny("llama"), peft.LoraConfig(r=2, target_modules=["down_proj"]))
    lora.save_pretrained(tmp_path)
    assert (tmp_path / LEGACY_CONFIG_NAME).is_file()
    return tmp_path


def test_a_peft_folder_is_named_as_such(peft_folder):
    _assert_rejected(peft_folder, r"holds a PEFT adapter \(peft_type='LORA'\).*PeftModel")


def test_peft_loader_on_our_folder_fails_at_once_with_a_clear_error(saved):
    peft = pytest.importorskip("peft", reason="extra 'hf' not installed")
    with pytest.raises(ValueError, match=r"Can't find 'adapter_config.json'") as info:
        peft.PeftModel.from_pretrained(tiny("llama"), str(saved))
    assert not isinstance(info.value, KeyError)
    print(f"PeftModel.from_pretrained on our folder: {type(info.value).__name__}: "
          f"{str(info.value)[:120]}")


def test_other_files_in_the_folder_are_kept(saved):
    (saved / "optimizer.pt").write_bytes(b"opt")
    (saved / "sub").mkdir()
    model, _ = trained("llama")
    save_adapter(model, saved)
    assert (saved / "optimizer.pt").read_bytes() == b"opt" and (saved / "sub").is_dir()


def test_no_pickle_path_in_the_adapters_package():
    import adapters

    pattern = re.compile(r"\btorch\.load\s*\(|^\s*import\s+pickle|\bpickle\.|\bdill\b|"
                         r"\bjoblib\b|\btorch\.save\s*\(", re.M)
    offenders = [str(p) for p in Path(adapters.__file__).parent.rglob("*.py")
                 if pattern.search(p.read_text())]
    assert offenders == []


def test_save_pretrained_with_a_gathered_state_dict_writes_partitioned_adapters(tmp_path):
    """Under DeepSpeed ZeRO-3 a Trainer passes ``save_pretrained`` the gathered state dict
    while the live adapter parameters are shards (simulated as in test_zero3.py): the adapter
    checkpoint is written from the gathered tensors, bit for bit."""
    model, _ = trained("llama")
    want = adapter_state_dict(model)
    gathered = {k: v.clone() for k, v in model.state_dict().items()}
    for a in find_adapters(model).values():
        for p in a.adapter.parameters():  # what ZeRO-3 leaves outside a gathered region
            p.ds_shape = p.shape
            p.data = torch.empty(0, dtype=p.dtype)
    with pytest.raises(CheckpointError, match="ZeRO-3"):
        model.save_pretrained(tmp_path / "empty", state_dict={})  # nothing gathered
    model.save_pretrained(tmp_path / "hf", state_dict=gathered)
    got = adapter_state_dict(load_adapter(tiny("llama"), tmp_path / "hf"))
    assert got.keys() == want.keys() and all(torch.equal(got[k], want[k]) for k in want)


def test_saving_into_a_file_path_is_a_checkpoint_error(tmp_path):
    path = tmp_path / "not-a-folder"
    path.write_text("x")
    model = inject(tiny_lm("llama"), HRMConfig(d_state=4))
    with pytest.raises(CheckpointError, match="is a file; `save_adapter` writes a folder"):
        save_adapter(model, path)
    assert path.read_text() == "x"


def test_load_adapter_of_smaller_adapters_keeps_an_optimizer_built_before_training_them(tmp_path):
    from adapters.layer import ssm_of_structure

    source = inject(tiny("llama"), HRMConfig(d_state=8, gate_init=0.3))
    for adapted, n in zip(find_adapters(source).values(), (3, 5), strict=True):
        adapted.adapter.ssm = ssm_of_structure(H, n, 0, dtype=torch.float32)
    save_adapter(source, tmp_path)
    target = inject(tiny("llama"), HRMConfig(d_state=8, gate_init=0.3))
    params = [p for p in target.parameters() if p.requires_grad]
    opt = torch.optim.SGD(params, lr=0.1)
    load_adapter(target, tmp_path)
    assert {id(p) for p in target.parameters() if p.requires_grad} == {id(p) for p in params}
    want = adapter_state_dict(source)
    got = adapter_state_dict(target)
    assert all(torch.equal(got[k], want[k]) for k in want)
    target(IDS, labels=IDS).loss.backward()
    opt.step()
    assert any(not torch.equal(adapter_state_dict(target)[k], want[k]) for k in want)
