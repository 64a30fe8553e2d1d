"""Calibration statistics: exact against an lti reference, masking, merging, DDP, I/O."""

from __future__ import annotations

import copy
import time
from pathlib import Path
from typing import NamedTuple

import numpy as np
import pytest
import torch

import lti
from adapters import CalibrationStats, HRMConfig, calibrate, find_adapters, inject
from adapters.exceptions import AdapterConfigError, AdapterError, CheckpointError
from tests.adapters._tiny import tiny_gpt2


class Batch(NamedTuple):
    """An ``(input_ids, labels)`` pair, the batch form of the experiment harness's tasks."""

    input_ids: torch.Tensor
    labels: torch.Tensor


transformers = pytest.importorskip("transformers", reason="extra 'hf' not installed")

H, VOCAB = 32, 64


def _gpt2(seed=0):
    return tiny_gpt2(width=H, vocab=VOCAB, seed=seed)


@pytest.fixture(scope="module")
def base():
    return _gpt2()


def _adapted(base, mode, seed=1):
    torch.manual_seed(seed)
    return inject(copy.deepcopy(base), HRMConfig(d_state=6, gate_init=0.2, mode=mode))


def _batches(seed=0, n=2, batch=3, length=24):
    g = torch.Generator().manual_seed(seed)
    out = []
    for _ in range(n):
        ids = torch.randint(0, VOCAB, (batch, length), generator=g)
        mask = torch.ones_like(ids)
        mask[0, 17:] = 0  # right padding
        mask[1, :5] = 0  # left padding
        out.append({"input_ids": ids, "attention_mask": mask})
    return out


def _streams(model, batches):
    """The (B, L, H) stream each adapter reads, per batch (captured independently)."""
    got = {name: [] for name in find_adapters(model)}
    handles = []
    for name, wrapper in find_adapters(model).items():
        def hook(module, args, name=name):
            got[name].append(args[0].detach().double())
        handles.append(wrapper.adapter.register_forward_pre_hook(hook))
    with torch.no_grad():
        for b in batches:
            model(**b, use_cache=False)
    for h in handles:
        h.remove()
    return got


@pytest.mark.parametrize("mode", ["real", "complex"])
def test_state_and_input_covariance_match_lti_reference(base, mode):
    model = _adapted(base, mode)
    batches = _batches()
    stats = calibrate(model, batches, gramian="both", progress=False)
    streams = _streams(model, batches)
    n_valid = sum(int(b["attention_mask"].sum()) for b in batches)
    for name, wrapper in find_adapters(model).items():
        G = wrapper.adapter.ssm.as_lti()  # the coordinates the statistics must be in
        S2 = np.zeros((G.n, G.n))
        W2 = np.zeros((H, H))
        for u, b in zip(streams[name], batches, strict=True):
            keep = b["attention_mask"].bool().numpy()
            U = u.numpy() * keep[..., None]  # padded positions feed zeros
            X = lti.datadriven.propagate_states(G.A, G.B, U)  # (B, L, n), float64
            S2 += np.einsum("bti,btj->ij", X[keep][None], X[keep][None])
            W2 += U[keep].T @ U[keep]
        layer = stats[name]
        assert layer.count == n_valid
        P, W = layer.state_covariance(), layer.input_covariance()
        P_ref, W_ref = S2 / n_valid, W2 / n_valid
        assert np.abs(P - P_ref).max() <= 1e-10 * np.abs(P_ref).max()
        assert np.abs(W - W_ref).max() <= 1e-12 * np.abs(W_ref).max()
        # a Gramian: symmetric positive semidefinite, and the controllable directions excited
        assert np.allclose(P, P.T, rtol=0, atol=1e-14 * np.abs(P).max())
        assert np.linalg.eigvalsh(P).min() > 0


def test_padding_does_not_count(base):
    model = _adapted(base, "real")
    ids = torch.randint(0, VOCAB, (2, 16), generator=torch.Generator().manual_seed(3))
    full = calibrate(model, [{"input_ids": ids[:1]}], progress=False)
    mask = torch.ones_like(ids)
    mask[1] = 0  # a fully padded second row contributes nothing
    padded = calibrate(model, [{"input_ids": ids, "attention_mask": mask}], progress=False)
    for name in full:
        assert padded[name].count == full[name].count == 16
        P, Q = padded[name].state_covariance(), full[name].state_covariance()
        assert np.abs(P - Q).max() <= 1e-6 * np.abs(Q).max()  # row 0 runs in a batch of 2


def test_batch_types_and_max_batches(base):
    model = _adapted(base, "real")
    ids = torch.randint(0, VOCAB, (2, 10), generator=torch.Generator().manual_seed(4))
    a = calibrate(model, [ids], progress=False)
    b = calibrate(model, [Batch(ids, ids)], progress=False)
    c = calibrate(model, iter([{"input_ids": ids, "labels": ids}, ids]), progress=False,
                  max_batches=1)
    for name in a:
        assert a[name].count == b[name].count == c[name].count == 20
        assert np.array_equal(a[name].state_covariance(), b[name].state_covariance())
        assert np.array_equal(a[name].state_covariance(), c[name].state_covariance())
    with pytest.raises(AdapterConfigError, match="batch"):
        calibrate(model, ["not a batch"], progress=False)
    with pytest.raises(AdapterConfigError, match="gramian"):
        calibrate(model, [ids], gramian="exact", progress=False)
    with pytest.raises(AdapterConfigError, match="max_batches"):
        calibrate(model, [ids], max_batches=0, progress=False)
    with pytest.raises(AdapterError, match="no token"):
        calibrate(model, [], progress=False)
    with pytest.raises(AdapterError, match="no HRM adapters"):
        calibrate(_gpt2(), [ids], progress=False)
    with pytest.raises(AdapterConfigError, match="no state covariance"):
        calibrate(model, [ids], gramian="input", progress=False)["transformer.h.0.mlp"]\
            .state_covariance()


def test_sequences_longer_than_the_decode_history_in_every_batch_form(base):
    # An HF model in eval mode builds a KV cache unless told not to; sequences longer than the
    # decode history (64 tokens) then reach the adapters in two pieces with a carried state.
    # calibrate must ask for no cache whatever the batch form: one stream per sequence.
    from adapters.generation import HISTORY_MAX_LEN

    model = _adapted(base, "real")
    length = HISTORY_MAX_LEN + 36
    ids = torch.randint(0, VOCAB, (2, length), generator=torch.Generator().manual_seed(8))
    ref = _streams(model, [{"input_ids": ids}])
    for batch in (ids, Batch(ids, ids), (ids,), {"input_ids": ids}):
        stats = calibrate(model, [batch], gramian="both", progress=False)
        for name, got in stats.layers.items():
            assert got.count == 2 * length
            u = ref[name][0].reshape(-1, H).numpy()  # (B L, H) adapter inputs
            assert np.allclose(got.input_covariance(), u.T @ u / u.shape[0], rtol=1e-10,
                               atol=1e-12)


def test_model_state_restored(base):
    model = _adapted(base, "real").train()
    hooks = [len(w.adapter._forward_pre_hooks) for w in find_adapters(model).values()]
    calibrate(model, [torch.zeros(1, 4, dtype=torch.long)], progress=False)
    assert model.training and all(m.training for m in model.modules())
    assert [len(w.adapter._forward_pre_hooks) for w in find_adapters(model).values()] == hooks


def test_merge_and_save_load_round_trip(base, tmp_path):
    model = _adapted(base, "complex")
    batches = _batches(seed=5, n=4)
    whole = calibrate(model, batches, gramian="both", progress=False)
    merged = calibrate(model, batches[:2], gramian="both", progress=False).merge(
        calibrate(model, batches[2:], gramian="both", progress=False))
    path = whole.save(tmp_path / "stats.npz")
    loaded = CalibrationStats.load(path)
    for name in whole:
        for fn in ("state_covariance", "input_covariance"):
            ref = getattr(whole[name], fn)()
            assert np.abs(getattr(merged[name], fn)() - ref).max() <= 1e-13 * np.abs(ref).max()
            assert np.array_equal(getattr(loaded[name], fn)(), ref)
        assert loaded[name].fingerprint == whole[name].fingerprint
        assert loaded[name].count == whole[name].count
    other = calibrate(_adapted(base, "real"), batches[:1], gramian="both", progress=False)
    with pytest.raises(AdapterConfigError, match="different adapters"):
        whole.merge(other)


# ---------------------------------------------------------------- two DDP ranks (gloo, CPU)


@pytest.mark.timeout(420)  # above the ranks' own 300 s deadline, so that it reports first
def test_two_ddp_ranks_equal_one_process(tmp_path, monkeypatch):
    import torch.multiprocessing as mp

    # spawned ranks unpickle the worker by module name: make `tests` importable for them
    monkeypatch.syspath_prepend(str(Path(__file__).resolve().parents[2]))
    init_file = tmp_path / "pg_init"
    out_path = tmp_path / "ddp_stats.npz"
    from tests.adapters import _ddp_calibrate as helper

    ctx = mp.spawn(helper.ddp_worker, args=(2, str(init_file), str(out_path)), nprocs=2,
                   join=False)
    deadline = time.monotonic() + 300  # a hung rank fails this test, not the whole session
    try:
        while not ctx.join(timeout=5):
            if time.monotonic() > deadline:
                pytest.fail("the DDP ranks did not finish within 300 s")
    finally:  # also on pytest-timeout's failure or Ctrl-C: no rank outlives the test
        for proc in ctx.processes:
            if proc.is_alive():
                proc.kill()
                proc.join(30)
    ddp = CalibrationStats.load(out_path)
    shards = helper.shards()
    single = calibrate(helper.ddp_model(), shards[0] + shards[1], gramian="both",
                       progress=False)
    worst = 0.0
    for name in single:
        assert ddp[name].count == single[name].count == 4 * 2 * 40
        for fn in ("state_covariance", "input_covariance"):
            ref = getattr(single[name], fn)()
            err = np.abs(getattr(ddp[name], fn)() - ref).max() / np.abs(ref).max()
            worst = max(worst, err)
    print(f"DDP (2 ranks, gloo) vs one process: max relative difference {worst:.2e}")
    assert worst <= 1e-10



@pytest.mark.parametrize("damage", ["truncated", "empty", "foreign"])
def test_load_of_a_damaged_statistics_file_raises_checkpoint_error(base, tmp_path, damage):
    # regression: a truncated file raised a bare EOFError / zipfile.BadZipFile from np.load
    model = _adapted(base, "real")
    path = calibrate(model, _batches(seed=1, n=1), progress=False).save(tmp_path / "s.npz")
    raw = path.read_bytes()
    if damage == "truncated":
        path.write_bytes(raw[: len(raw) // 2])
    elif damage == "empty":
        path.write_bytes(b"")
    else:
        np.savez(path, x=np.zeros(3))  # a valid .npz without the statistics header
    with pytest.raises(CheckpointError, match="not a calibration-statistics file"):
        CalibrationStats.load(path)


def test_save_into_a_folder_is_refused_and_missing_parents_are_made(base, tmp_path):
    # regression: a folder gave a bare IsADirectoryError naming the temporary file, a missing
    # parent a FileNotFoundError (save_adapter makes its folder)
    stats = calibrate(_adapted(base, "real"), _batches(seed=1, n=1), progress=False)
    with pytest.raises(CheckpointError, match=r"is a folder; `CalibrationStats.save` writes a "
                       r"file, e.g. '.*stats.npz'"):
        stats.save(tmp_path)
    assert list(tmp_path.iterdir()) == []
    path = stats.save(tmp_path / "a" / "b" / "stats.npz")
    back = CalibrationStats.load(path).state_dict()["arrays"]
    want = stats.state_dict()["arrays"]
    assert back.keys() == want.keys() and all(np.array_equal(back[k], want[k]) for k in want)
