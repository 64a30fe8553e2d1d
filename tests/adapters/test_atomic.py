"""Crash-safe saves: a writer killed with SIGKILL at random moments never loses the checkpoint.

A child process (forked, so it starts at once) overwrites one adapter checkpoint in a loop,
stamping every adapter tensor of save ``k`` with the value ``k``; the parent kills it at a
random moment, loads the folder and checks that it is exactly save ``done`` (the last one the
child finished) or ``done + 1`` (the one it was writing), with every tensor of every layer from
the same save. The default suite kills a few times; the slow test kills 50 times and also shows
that the harness catches the old, non-atomic writer.
"""

from __future__ import annotations

import multiprocessing
import os
import random
import signal
import threading
import time
import warnings
from collections import Counter
from pathlib import Path

import pytest
import torch
from torch import nn

from adapters import HRMConfig, find_adapters, inject, load_adapter, save_adapter
from adapters._atomic import atomic_open, atomic_write_bytes, atomic_write_text
from adapters.io import CONFIG_NAME, WEIGHTS_NAME, adapter_state_dict
from tests._tqdm_locks import replace_tqdm_locks

pytest.importorskip("safetensors", reason="extra 'hf' not installed")
H, LAYERS, N = 64, 4, 16
_FORK = multiprocessing.get_context("fork") if os.name == "posix" else None


def plain_model() -> nn.Module:
    """Four 'blocks' with an ``mlp`` each, found by the default target rule."""
    torch.manual_seed(0)
    blocks = nn.ModuleList(nn.ModuleDict({"mlp": nn.Linear(H, H)}) for _ in range(LAYERS))
    return nn.ModuleDict({"layers": blocks})


def adapted() -> nn.Module:
    return inject(plain_model(), HRMConfig(d_state=N))


def stamp(model: nn.Module, k: int) -> None:
    """Every tensor the checkpoint holds (parameters and buffers of the adapters) := k."""
    with torch.no_grad():
        for a in find_adapters(model).values():
            for t in a.adapter.state_dict().values():
                t.fill_(float(k))


def stamped_value(directory: Path) -> float:
    """The one value all adapter tensors of the loaded checkpoint hold (fails if mixed)."""
    model = load_adapter(plain_model(), directory)
    values = torch.cat([t.flatten() for t in adapter_state_dict(model).values()]).unique()
    assert values.numel() == 1, f"a mixed checkpoint: values {values.tolist()[:8]}"
    return float(values[0])


def naive_save(model: nn.Module, directory: Path) -> None:
    """The old writer (format 1): files written in place, weights first, no rename."""
    import hashlib
    import json

    import safetensors.torch as st

    from adapters.injection import find_adapters, get_adapter_config
    from adapters.io import LEGACY_CONFIG_NAME, LEGACY_WEIGHTS_NAME, _layer_meta

    tensors = adapter_state_dict(model)
    weights = directory / LEGACY_WEIGHTS_NAME
    st.save_file(tensors, str(weights))
    meta = {"config": {**get_adapter_config(model).to_dict(), "format_version": 1},
            "layers": {n: _layer_meta(a) for n, a in find_adapters(model).items()},
            "tensors": {k: {"shape": list(v.shape), "dtype": str(v.dtype).removeprefix("torch.")}
                        for k, v in tensors.items()},
            "weights_sha256": hashlib.sha256(weights.read_bytes()).hexdigest()}
    (directory / LEGACY_CONFIG_NAME).write_text(json.dumps(meta, indent=2))


class AdapterWriter:
    """An adapter checkpoint folder, written by `save_adapter` (or the old in-place writer)."""

    def __init__(self, naive: bool = False):
        self.naive = naive

    def make(self):
        return adapted()

    def stamp(self, model, k):
        stamp(model, k)

    def save(self, model, directory: Path):
        (naive_save if self.naive else save_adapter)(model, directory)

    def read(self, directory: Path) -> float:
        return stamped_value(directory)


class StatsWriter:
    """Calibration statistics (``CalibrationStats.save``, one ``.npz`` file; or the old
    in-place ``open(path, "wb")`` writer)."""

    def __init__(self, naive: bool = False):
        self.naive = naive

    def make(self):
        from adapters.statistics import CalibrationStats, LayerStats

        layers = {f"layers.{i}.mlp": LayerStats(f"layers.{i}.mlp", H, N, 0, "fp", "data")
                  for i in range(LAYERS)}
        return CalibrationStats(layers, "data")

    def stamp(self, stats, k):
        import numpy as np

        for layer in stats.layers.values():
            layer.load_arrays({"state.count": np.int64(k), "state.sum": np.full(N, float(k)),
                               "state.sum_outer": np.full((N, N), float(k))})

    def save(self, stats, directory: Path):
        if not self.naive:
            stats.save(directory / "stats.npz")
            return
        import json

        import numpy as np

        state = stats.state_dict()
        header = np.frombuffer(json.dumps(state["meta"]).encode(), dtype=np.uint8)
        with open(directory / "stats.npz", "wb") as fh:
            np.savez(fh, __meta__=header, **state["arrays"])

    def read(self, directory: Path) -> float:
        import numpy as np

        from adapters.statistics import CalibrationStats

        back = CalibrationStats.load(directory / "stats.npz")
        arrays = back.state_dict()["arrays"]
        values = np.unique(np.concatenate([np.ravel(v) for v in arrays.values()]))
        assert values.size == 1, f"mixed statistics: values {values[:8]}"
        return float(values[0])


_replace_tqdm_locks = replace_tqdm_locks  # (tests/_tqdm_locks.py, shared with conftest.py)


def _own_tqdm_locks() -> None:
    """Give this forked child tqdm write locks of its own.

    A forked child shares the parent's multiprocessing locks, and tqdm's write lock is one
    (every bar takes it, a disabled one too; ``save_pretrained`` makes one per save). A child
    killed while holding it leaves the parent (the test session) blocked for ever on its next
    bar, e.g. in ``calibrate``. Thread locks are not shared across ``fork``.
    """
    _replace_tqdm_locks(threading.RLock)


def _save_forever(directory: str, start: int, ready, done, writer) -> None:
    _own_tqdm_locks()
    obj = writer.make()
    ready.set()
    k = start
    while True:
        writer.stamp(obj, k)
        writer.save(obj, Path(directory))
        done.value = k
        k += 1


def kill_loop(directory: Path, kills: int, *, seed: int, writer=None) -> Counter:
    """Kill a saving child ``kills`` times; count how each checkpoint read back."""
    writer = AdapterWriter() if writer is None else writer
    rng = random.Random(seed)
    obj = writer.make()
    t0 = time.perf_counter()
    for _ in range(3):
        writer.stamp(obj, 0)
        writer.save(obj, directory)
    t_save = (time.perf_counter() - t0) / 3
    done = _FORK.Value("q", 0, lock=False)
    outcome: Counter = Counter(save_seconds=t_save)
    for _ in range(kills):
        ready = _FORK.Event()
        child = _FORK.Process(target=_save_forever,
                              args=(str(directory), int(done.value) + 1, ready, done, writer))
        child.start()
        assert ready.wait(60), "the saving child did not start"
        time.sleep(rng.uniform(0.0, 3.0 * t_save))
        os.kill(child.pid, signal.SIGKILL)
        child.join(60)
        assert child.exitcode == -signal.SIGKILL
        outcome["kills"] += 1
        last = int(done.value)
        try:
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                value = writer.read(directory)
        except Exception as exc:  # noqa: BLE001 - counted, asserted by the caller
            outcome["unreadable"] += 1
            outcome[f"error {type(exc).__name__}"] += 1
            done.value = last + 1  # the next child overwrites with fresh stamps
            continue
        outcome["readable"] += 1
        outcome["stale JSON copy (warned)"] += any("does not match" in str(w.message)
                                                   for w in caught)
        if value == last:
            outcome["previous"] += 1
        elif value == last + 1:
            outcome["new"] += 1
            done.value = last + 1
        else:
            outcome[f"wrong save {value} (done {last})"] += 1
        outcome["saves completed"] = int(done.value)
    return outcome


pytestmark = pytest.mark.skipif(_FORK is None, reason="the kill test forks (POSIX only)")


def _check(outcome: Counter, kills: int) -> None:
    print(f"kill test: {dict(outcome)}")
    assert outcome["kills"] == kills
    assert outcome["readable"] == kills and outcome["unreadable"] == 0
    assert outcome["previous"] + outcome["new"] == kills  # nothing else was ever read back


def test_kills_during_save_leave_the_previous_or_the_new_checkpoint(tmp_path):
    kills = 6
    _check(kill_loop(tmp_path, kills, seed=16), kills)
    save_adapter(adapted(), tmp_path)  # the next save sweeps the killed writers' temporaries
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([CONFIG_NAME, WEIGHTS_NAME])


@pytest.mark.slow
def test_fifty_kills_during_save(tmp_path):
    kills = 50
    outcome = kill_loop(tmp_path, kills, seed=1016)
    _check(outcome, kills)
    assert outcome["previous"] > 0 and outcome["new"] > 0  # kills landed on both sides


@pytest.mark.slow
@pytest.mark.parametrize("writer", [AdapterWriter(naive=True), StatsWriter(naive=True)],
                         ids=["adapter", "statistics"])
def test_the_harness_catches_the_old_non_atomic_writers(tmp_path, writer):
    outcome = kill_loop(tmp_path, 50, seed=1016, writer=writer)
    print(f"old writer: {dict(outcome)}")
    assert outcome["unreadable"] > 0


def test_kills_during_a_statistics_save_leave_the_previous_or_the_new_file(tmp_path):
    kills = 4
    _check(kill_loop(tmp_path, kills, seed=17, writer=StatsWriter()), kills)


@pytest.mark.slow
def test_fifty_kills_during_statistics_saves(tmp_path):
    kills = 50
    outcome = kill_loop(tmp_path, kills, seed=1017, writer=StatsWriter())
    _check(outcome, kills)
    assert outcome["previous"] > 0 and outcome["new"] > 0


class PretrainedWriter:
    """``model.save_pretrained(folder)`` of an adapted tiny GPT-2, overwriting one folder (as
    ``Trainer.save_model`` does): the adapter checkpoint written beside the model must survive;
    the base weights are transformers' own file (frozen: the same bytes every save)."""

    def make(self):
        from tests.adapters._tiny import tiny_gpt2

        return inject(tiny_gpt2(), HRMConfig(d_state=N))

    def stamp(self, model, k):
        stamp(model, k)

    def save(self, model, directory: Path):
        model.save_pretrained(directory)

    def read(self, directory: Path) -> float:
        from tests.adapters._tiny import tiny_gpt2

        model = load_adapter(tiny_gpt2(), directory)
        values = torch.cat([t.flatten() for t in adapter_state_dict(model).values()]).unique()
        assert values.numel() == 1, f"a mixed checkpoint: values {values.tolist()[:8]}"
        return float(values[0])


def test_kills_during_save_pretrained_leave_the_previous_or_the_new_adapters(tmp_path):
    pytest.importorskip("transformers", reason="the 'hf' extra (transformers) is not installed")
    kills = 4
    _check(kill_loop(tmp_path, kills, seed=18, writer=PretrainedWriter()), kills)


@pytest.mark.slow
def test_fifty_kills_during_save_pretrained(tmp_path):
    pytest.importorskip("transformers", reason="the 'hf' extra (transformers) is not installed")
    kills = 50
    outcome = kill_loop(tmp_path, kills, seed=1018, writer=PretrainedWriter())
    _check(outcome, kills)
    assert outcome["previous"] > 0 and outcome["new"] > 0


def _hold_tqdm_lock_forever(ready) -> None:
    _own_tqdm_locks()  # as _save_forever does
    from tqdm.auto import tqdm

    with tqdm.get_lock():
        ready.set()
        time.sleep(600)


def test_a_child_killed_inside_a_tqdm_bar_does_not_block_the_parent():
    # regression: a saving child killed inside transformers' tqdm bar left tqdm's shared lock
    # held, and the next bar in the test session (calibrate's) waited for ever (CI timeout).
    # Without the child's _own_tqdm_locks() call this fails (checked).
    from tqdm import std
    from tqdm.auto import tqdm

    tqdm.get_lock()  # the parent's locks exist before the fork, as in the session
    ready = _FORK.Event()
    child = _FORK.Process(target=_hold_tqdm_lock_forever, args=(ready,))
    child.start()
    try:
        assert ready.wait(60), "the child did not start"
    finally:
        os.kill(child.pid, signal.SIGKILL)
        child.join(60)
    lock = std.TqdmDefaultWriteLock.mp_lock
    free = lock.acquire(timeout=2)
    if free:
        lock.release()
    else:  # mend the session's lock so that the rest of the run does not hang
        _replace_tqdm_locks(_FORK.RLock)
    assert free, "a killed child left tqdm's shared write lock held: the next bar would hang"


# ------------------------------------------------------------------ the helper itself


def test_atomic_write_replaces_and_a_failed_write_leaves_the_old_file(tmp_path):
    target = tmp_path / "f.bin"
    atomic_write_bytes(target, b"old")
    with pytest.raises(RuntimeError, match="boom"), atomic_open(target) as fh:
        fh.write(b"partial")
        raise RuntimeError("boom")
    assert target.read_bytes() == b"old"
    assert [p.name for p in tmp_path.iterdir()] == ["f.bin"]  # no temporary left
    atomic_write_text(target, "new ü")
    assert target.read_text(encoding="utf-8") == "new ü"
    with pytest.raises(ValueError, match="`mode`"):
        atomic_open(target, "a").__enter__()


def test_stale_temporaries_of_dead_writers_are_removed(tmp_path):
    target = tmp_path / "f.bin"
    child = _FORK.Process(target=time.sleep, args=(0,))
    child.start()
    child.join(60)
    dead = tmp_path / f".f.bin.tmp-{child.pid}-abcd"
    alive = tmp_path / f".f.bin.tmp-{os.getppid()}-abcd"
    other = tmp_path / f".g.bin.tmp-{child.pid}-abcd"
    for p in (dead, alive, other):
        p.write_bytes(b"x")
    atomic_write_bytes(target, b"data")
    assert not dead.exists() and alive.exists() and other.exists()
