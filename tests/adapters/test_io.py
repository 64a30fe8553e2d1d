"""save_adapter / load_adapter: adapter-only safetensors, bit-identical reload, typed errors."""

from __future__ import annotations

import copy
import json
import re
from pathlib import Path

import pytest
import torch
from torch import nn

from adapters import DiagonalSSM, HRMConfig, find_adapters, inject, load_adapter, save_adapter
from adapters.exceptions import CheckpointError
from adapters.io import CONFIG_NAME, WEIGHTS_NAME, adapter_state_dict

transformers = pytest.importorskip("transformers")
st = pytest.importorskip("safetensors.torch")

H, N = 32, 8
IDS = torch.randint(0, 64, (2, 11), generator=torch.Generator().manual_seed(1))


def tiny(kind: str = "llama", width: int = H) -> nn.Module:
    torch.manual_seed(0)
    if kind == "gpt2":
        cfg = transformers.GPT2Config(n_layer=2, n_embd=width, n_head=2, vocab_size=64,
                                      bos_token_id=0, eos_token_id=0)
        return transformers.GPT2LMHeadModel(cfg).eval()
    cfg = transformers.LlamaConfig(hidden_size=width, intermediate_size=64, num_hidden_layers=2,
                                   num_attention_heads=2, num_key_value_heads=1, vocab_size=64,
                                   bos_token_id=0, eos_token_id=0)
    return transformers.LlamaForCausalLM(cfg).eval()


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


@pytest.mark.parametrize(("kind", "cfg"), [("gpt2", {}), ("llama", {"mode": "complex"}),
                                           ("llama", {"reads": "mlp_output",
                                                      "dtype": "float64"})])
def test_save_load_into_fresh_base_is_bit_identical(tmp_path, kind, cfg):
    model, fresh = trained(kind, **cfg)
    save_adapter(model, tmp_path)
    assert sorted(p.name for p in tmp_path.iterdir()) == [CONFIG_NAME, WEIGHTS_NAME]
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
    meta = json.loads((tmp_path / CONFIG_NAME).read_text())
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


def _rewrite(directory: Path, tensors: dict, *, fix_checksum: bool = True) -> None:
    """Write `tensors` as the weights file; keep the JSON consistent unless told otherwise."""
    import hashlib

    st.save_file(tensors, str(directory / WEIGHTS_NAME))
    meta = json.loads((directory / CONFIG_NAME).read_text())
    meta["tensors"] = {k: {"shape": list(v.shape), "dtype": str(v.dtype).removeprefix("torch.")}
                       for k, v in tensors.items()}
    if fix_checksum:
        meta["weights_sha256"] = hashlib.sha256((directory / WEIGHTS_NAME).read_bytes()).hexdigest()
    (directory / CONFIG_NAME).write_text(json.dumps(meta))


@pytest.fixture
def saved(tmp_path):
    model, _ = trained("llama")
    save_adapter(model, tmp_path)
    return tmp_path


def _assert_rejected(directory: Path, match: str, model: nn.Module | None = None) -> None:
    model = tiny("llama") if model is None else model
    before = {k: v.clone() for k, v in model.state_dict().items()}
    with pytest.raises(CheckpointError, match=match):
        load_adapter(model, directory)
    assert not find_adapters(model)  # a base model is left unadapted and unchanged
    after = model.state_dict()
    assert after.keys() == before.keys() and all(torch.equal(after[k], before[k]) for k in before)


def test_tampered_bytes_fail_the_checksum(saved):
    data = bytearray((saved / WEIGHTS_NAME).read_bytes())
    data[-3] ^= 0x01  # one bit of one weight
    (saved / WEIGHTS_NAME).write_bytes(bytes(data))
    _assert_rejected(saved, "SHA-256")


def test_truncated_or_garbage_weights(saved):
    (saved / WEIGHTS_NAME).write_bytes(b"\x00" * 7)
    meta = json.loads((saved / CONFIG_NAME).read_text())
    import hashlib

    meta["weights_sha256"] = hashlib.sha256(b"\x00" * 7).hexdigest()
    (saved / CONFIG_NAME).write_text(json.dumps(meta))
    _assert_rejected(saved, "could not be read")


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
    meta = json.loads((saved / CONFIG_NAME).read_text())
    _rewrite(saved, {k: v.double() for k, v in tensors.items()})
    new = json.loads((saved / CONFIG_NAME).read_text())
    new["tensors"] = meta["tensors"]  # the listing still says float32
    (saved / CONFIG_NAME).write_text(json.dumps(new))
    _assert_rejected(saved, "does not match its listing")


def test_bad_json_missing_files_and_wrong_model(saved, tmp_path_factory):
    _assert_rejected(saved, r"layers differ.*unexpected in checkpoint \['model\.layers\.0\.mlp'",
                     tiny("gpt2"))  # another architecture
    (saved / CONFIG_NAME).write_text("{ not json")
    _assert_rejected(saved, "not a valid adapter config")
    empty = tmp_path_factory.mktemp("empty")
    _assert_rejected(empty, "is missing")


def test_mismatched_models_give_checkpoint_errors(tmp_path):
    model, _ = trained("llama")
    save_adapter(model, tmp_path)
    _assert_rejected(tmp_path, "width 32 in the checkpoint but 48", tiny("llama", width=48))
    _assert_rejected(tmp_path, "do not fit this model", nn.Sequential(nn.Linear(3, 3)))
    skip = inject(tiny("llama"), HRMConfig(d_state=N, layers_to_skip=(1,)))
    with pytest.raises(CheckpointError, match="layers_to_skip"):
        load_adapter(skip, tmp_path)
    cplx = inject(tiny("llama"), HRMConfig(d_state=N, mode="complex"))
    with pytest.raises(CheckpointError, match="mode"):
        load_adapter(cplx, tmp_path)


def test_no_pickle_path_in_the_adapters_package():
    import adapters

    pattern = re.compile(r"\btorch\.load\s*\(|^\s*import\s+pickle|\bpickle\.|\bdill\b|"
                         r"\bjoblib\b|\btorch\.save\s*\(", re.M)
    offenders = [str(p) for p in Path(adapters.__file__).parent.rglob("*.py")
                 if pattern.search(p.read_text())]
    assert offenders == []
