"""Repository-wide pytest configuration: the ``gpu`` marker skips cleanly without CUDA,
``slow`` tests run only when asked for with ``-m slow`` (or ``--run-slow``), hypothesis
property tests are derandomized (reproducible CI) unless ``HYPOTHESIS_PROFILE=explore``, hangs
are bounded (per-test limit, a hard exit with every thread's stack, a stop after repeated
timeouts) and every test file must leave the process as it found it (``--no-state-check`` to
switch that check off)."""

from __future__ import annotations

import contextlib
import importlib.util
import os
import re
import signal
import sys

import pytest

if importlib.util.find_spec("hypothesis") is not None:  # a test extra
    # deterministic property tests in the default run; HYPOTHESIS_PROFILE=explore to search
    from hypothesis import settings as _hsettings

    _hsettings.register_profile("default", derandomize=True, database=None)
    _hsettings.register_profile("explore", derandomize=False)
    _hsettings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "default"))


def pytest_addoption(parser):
    parser.addoption("--run-slow", action="store_true", help="also run tests marked slow")
    parser.addoption("--no-state-check", action="store_true",
                     help="do not check that each test file leaves the process as it found it")


def _cuda_available() -> bool:
    if importlib.util.find_spec("torch") is None:
        return False
    import torch

    return torch.cuda.is_available()


# per-test limit of a slow test (real pretrained models, large examples) without its own marker
_SLOW_TIMEOUT = 1800


def pytest_collection_modifyitems(config, items):
    markexpr = config.getoption("-m") or ""
    run_slow = config.getoption("--run-slow") or "slow" in markexpr
    need_gpu = any("gpu" in item.keywords for item in items)
    has_gpu = _cuda_available() if need_gpu else False
    skip_slow = pytest.mark.skip(reason="slow test: run with -m slow or --run-slow")
    skip_gpu = pytest.mark.skip(reason="needs a CUDA device (torch.cuda.is_available() is False)")
    for item in items:
        if "slow" in item.keywords and item.get_closest_marker("timeout") is None:
            item.add_marker(pytest.mark.timeout(_SLOW_TIMEOUT))
        if "slow" in item.keywords and not run_slow:
            item.add_marker(skip_slow)
        if "gpu" in item.keywords and not has_gpu:
            item.add_marker(skip_gpu)


# --------------------------------------------------------------------------- hang guards
# A hang must cost minutes, not the CI run (the last one timed out at 90 min: a forked child
# killed inside tqdm's shared lock made every later test block, and each ran into a 900 s
# per-test limit). Three layers, configured in pyproject.toml ([tool.pytest.ini_options]):
# - pytest-timeout fails a test after `timeout` seconds (signal method: the session goes on)
#   and dumps every thread's stack;
# - if a test is still running `_HARD_EXIT_GRACE` s after its limit (stuck in C code that
#   never returns to Python, where a signal cannot interrupt it), faulthandler dumps every
#   thread's stack to the real stderr and ends the process;
# - after `_MAX_TIMEOUTS` timed-out tests the session stops (a hang that repeats is shared
#   state left behind, and every later test would wait out its limit too); pytest-timeout's
#   `session_timeout` stops starting new tests after that many seconds in all (60 min: the
#   CI limit is 90).
_HARD_EXIT_GRACE = 60.0
_MAX_TIMEOUTS = 2
_TIMEOUT_MESSAGE = "from pytest-timeout"


def _item_timeout(item) -> float:
    """The per-test limit pytest-timeout applies to ``item`` (its marker, else the option)."""
    # pytest-timeout missing or its internals changed: fall back to the marker and the option
    with contextlib.suppress(Exception):
        from pytest_timeout import _get_item_settings

        settings = _get_item_settings(item)
        if settings.timeout is not None:
            return float(settings.timeout)
    marker = item.get_closest_marker("timeout")
    if marker is not None and marker.args:
        return float(marker.args[0])
    try:
        return float(item.config.getoption("timeout") or item.config.getini("timeout") or 0)
    except ValueError:
        return 0.0


def pytest_configure(config):
    # a copy of the real stderr (capturing is suspended while plugins configure), as pytest's
    # own faulthandler plugin takes it: the hard-exit dump must not go into a capture file
    try:
        config._hard_exit_fd = os.dup(sys.stderr.fileno())
    except (AttributeError, OSError, ValueError):  # a stderr without a file: no hard exit
        config._hard_exit_fd = None
    config._timeouts = []
    config._check_state = not config.getoption("--no-state-check")
    config._check_files = config._check_state


def pytest_unconfigure(config):
    fd = getattr(config, "_hard_exit_fd", None)
    if fd is not None:
        os.close(fd)
        config._hard_exit_fd = None


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item, nextitem):
    import faulthandler

    limit = _item_timeout(item)
    fd = getattr(item.config, "_hard_exit_fd", None)
    armed = limit > 0 and fd is not None
    if armed:
        faulthandler.dump_traceback_later(limit + _HARD_EXIT_GRACE, exit=True, file=fd)
    try:
        return (yield)
    finally:
        if armed:
            faulthandler.cancel_dump_traceback_later()


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item, call):
    report = yield
    _name_the_extra(report)
    if report.failed and _TIMEOUT_MESSAGE in str(report.longrepr):
        timeouts = item.config._timeouts
        timeouts.append(item.nodeid)
        if len(timeouts) >= _MAX_TIMEOUTS:
            item.session.shouldfail = (
                f"{len(timeouts)} tests ran into the per-test timeout ({', '.join(timeouts)}): "
                "stopping, since a hang that repeats is usually state left behind by an "
                "earlier test and every later test would wait out its limit as well")
    return report


# ------------------------------------------------------------------ state left behind
# Every test file must leave the process as it found it: environment variables, the working
# directory, numpy's error handling and print options, torch's global settings, mpmath's
# precision, BLAS thread limits, tqdm's shared write lock, child processes and files in the
# repository. Checked once per file (after its module-scoped fixtures are torn down): what
# changed is put back and reported as an error at the teardown of the file's last test, so
# a leak fails where it happens instead of changing, or hanging, the tests that run after it.
# (set by pytest itself; and by torch's inductor for itself and its workers on first use)
# (threadpoolctl sets KMP_DUPLICATE_LIB_OK once, at its first import, whichever test imports it)
_IGNORED_ENV = {"PYTEST_CURRENT_TEST", "TORCHINDUCTOR_CACHE_DIR", "TRITON_CACHE_DIR",
                "KMP_DUPLICATE_LIB_OK"}
_IGNORED_DIRS = {".git", ".venv", "__pycache__", ".pytest_cache", ".hypothesis", "_build",
                 "generated", ".ruff_cache", "mutants"}
# helper processes that libraries start once and keep for the session
_SESSION_HELPERS = ("multiprocessing.resource_tracker", "multiprocessing.forkserver",
                    "torch._inductor", "torch/_inductor")
_ROOT = os.path.dirname(os.path.abspath(__file__))


def _repo_files() -> set[str]:
    found: set[str] = set()
    stack = [_ROOT]
    while stack:
        top = stack.pop()
        try:
            entries = list(os.scandir(top))
        except OSError:
            continue
        for entry in entries:
            if entry.is_dir(follow_symlinks=False):
                if entry.name not in _IGNORED_DIRS and not entry.name.endswith(".egg-info"):
                    stack.append(entry.path)
            elif not entry.name.endswith((".py", ".pyc", ".nbi", ".nbc", ".swp", "~")):
                # (.py: tests write no code into the tree; a developer may, during a run)
                found.add(entry.path)
    return found


def _proc_children() -> list[int] | None:
    """Descendants of this process from /proc (Linux; a few microseconds), else None."""
    if not os.path.exists(f"/proc/{os.getpid()}/task"):
        return None
    found, stack = [], [os.getpid()]
    while stack:
        pid = stack.pop()
        try:
            tasks = os.listdir(f"/proc/{pid}/task")
        except OSError:
            continue
        for task in tasks:
            try:
                with open(f"/proc/{pid}/task/{task}/children") as fh:
                    kids = [int(k) for k in fh.read().split()]
            except OSError:
                continue
            found += kids
            stack += kids
    return found


def _describe(pid: int) -> tuple[str, str] | None:
    """(state, command line) of a process, None if it is gone."""
    with contextlib.suppress(OSError):  # no /proc: ask psutil below
        with open(f"/proc/{pid}/stat") as fh:
            state = fh.read().rsplit(")", 1)[1].split()[0]
        with open(f"/proc/{pid}/cmdline", "rb") as fh:
            cmdline = fh.read().replace(b"\0", b" ").decode(errors="replace").strip()
        return state, cmdline
    try:
        import psutil

        proc = psutil.Process(pid)
        state = "Z" if proc.status() == psutil.STATUS_ZOMBIE else "R"
        return state, " ".join(proc.cmdline())
    except Exception:  # noqa: BLE001 - psutil missing or the process gone
        return None


def _child_pids() -> dict[int, str]:
    """Live descendant processes (pid -> command line), without libraries' session helpers."""
    pids = _proc_children()
    if pids is None:
        try:
            import psutil

            pids = [c.pid for c in psutil.Process().children(recursive=True)]
        except Exception:  # noqa: BLE001 - psutil missing: nothing to check
            return {}
    alive = {}
    for pid in pids:
        info = _describe(pid)
        if info is None or info[0] == "Z" or any(h in info[1] for h in _SESSION_HELPERS):
            continue
        alive[pid] = info[1]
    return alive


def _blas_threads() -> dict[str, int]:
    from threadpoolctl import threadpool_info

    return {info["filepath"]: info["num_threads"] for info in threadpool_info()}


def _set_blas_threads(limits: dict[str, int]) -> None:
    from threadpoolctl import ThreadpoolController

    controller = ThreadpoolController()
    for filepath, n in limits.items():
        controller.select(filepath=filepath).limit(limits=n)


def _differs(old, new) -> bool:
    if isinstance(old, dict) and isinstance(new, dict) and old.keys() != new.keys():
        # libraries loaded meanwhile (e.g. torch's OpenMP) are not a change
        common = old.keys() & new.keys()
        return any(old[k] != new[k] for k in common)
    return old != new


def _settings() -> dict[str, tuple]:
    """Process-wide settings as (value, restore) pairs; restore(value) puts one back."""
    import numpy as np

    out: dict[str, tuple] = {
        "working directory": (os.getcwd(), os.chdir),
        "numpy error handling (np.seterr)": (np.geterr(), lambda v: np.seterr(**v)),
        "numpy print options": (np.get_printoptions(), lambda v: np.set_printoptions(**v)),
    }
    torch = sys.modules.get("torch")
    if torch is not None:
        out.update({
            "torch default dtype": (torch.get_default_dtype(), torch.set_default_dtype),
            "torch threads (torch.set_num_threads)": (torch.get_num_threads(),
                                                      torch.set_num_threads),
            "torch deterministic algorithms": (
                (torch.are_deterministic_algorithms_enabled(),
                 torch.is_deterministic_algorithms_warn_only_enabled()),
                lambda v: torch.use_deterministic_algorithms(v[0], warn_only=v[1])),
            "torch grad mode": (torch.is_grad_enabled(), torch.set_grad_enabled),
            "torch anomaly detection": (torch.is_anomaly_enabled(),
                                        torch.autograd.set_detect_anomaly),
            "torch float32 matmul precision": (torch.get_float32_matmul_precision(),
                                               torch.set_float32_matmul_precision),
        })
        if hasattr(torch, "get_default_device"):
            out["torch default device"] = (torch.get_default_device(),
                                           torch.set_default_device)
    mpmath = sys.modules.get("mpmath")
    if mpmath is not None:
        out["mpmath precision (mpmath.mp.prec)"] = (
            mpmath.mp.prec, lambda v: setattr(mpmath.mp, "prec", v))
    hf_logging = sys.modules.get("transformers.utils.logging")
    if hf_logging is not None:
        out["transformers log level"] = (hf_logging.get_verbosity(), hf_logging.set_verbosity)
        out["transformers progress bars"] = (
            hf_logging.is_progress_bar_enabled(),
            lambda v: hf_logging.enable_progress_bar() if v
            else hf_logging.disable_progress_bar())
    if "threadpoolctl" in sys.modules:
        with contextlib.suppress(Exception):  # threadpoolctl cannot inspect this process
            out["BLAS/OpenMP thread limits (threadpoolctl)"] = (_blas_threads(),
                                                                 _set_blas_threads)
    return out


def _snapshot(config) -> dict:
    return {"environ": dict(os.environ), "settings": _settings(), "children": _child_pids(),
            "files": _repo_files() if config._check_files else set()}


def _tqdm_lock_held() -> bool:
    """True if tqdm's shared write lock is held (e.g. by a killed forked child), then replaced
    by a new one so that the rest of the session does not block on its next progress bar."""
    std = sys.modules.get("tqdm.std")
    lock = getattr(getattr(std, "TqdmDefaultWriteLock", None), "mp_lock", None)
    if lock is None:
        return False
    if lock.acquire(timeout=2):
        lock.release()
        return False
    import multiprocessing

    from tests._tqdm_locks import replace_tqdm_locks

    replace_tqdm_locks(multiprocessing.RLock)
    return True


def _leaks(before: dict, config) -> list[str]:
    """What changed since ``before``; each change is undone."""
    problems = []
    env_now = dict(os.environ)
    env_before = before["environ"]
    for key in sorted(set(env_now) | set(env_before)):
        if key in _IGNORED_ENV or env_now.get(key) == env_before.get(key):
            continue
        problems.append(f"environment variable {key}: {env_before.get(key)!r} -> "
                        f"{env_now.get(key)!r}")
        if key in env_before:
            os.environ[key] = env_before[key]
        else:
            del os.environ[key]
    now = _settings()
    for name, (value, restore) in before["settings"].items():
        if name in now and _differs(value, now[name][0]):
            new = now[name][0]
            if isinstance(value, dict) and isinstance(new, dict):
                changes = [f"{os.path.basename(str(k))} {value[k]!r} -> {new[k]!r}"
                           for k in value.keys() & new.keys() if value[k] != new[k]]
                problems.append(f"{name}: {', '.join(sorted(changes))}")
            else:
                problems.append(f"{name}: {value!r} -> {new!r}")
            try:
                restore(value)
            except Exception as exc:  # noqa: BLE001 - reported with the leak
                problems.append(f"  (could not restore it: {exc!r})")
    if _tqdm_lock_held():
        problems.append("tqdm's shared write lock was left held (replaced by a new one)")
    now_children = _child_pids()
    for pid in sorted(now_children.keys() - before["children"].keys()):
        problems.append(f"child process {pid} still running: {now_children[pid]!r} (killed)")
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            continue
        with contextlib.suppress(Exception):  # psutil missing, or already reaped
            import psutil

            psutil.Process(pid).wait(10)
    if config._check_files:
        new_files = _repo_files() - before["files"]
        for path in sorted(new_files):
            problems.append(f"file written in the repository (use tmp_path): "
                            f"{os.path.relpath(path, _ROOT)}")
    return problems


def _file_of(item) -> str:
    return item.nodeid.split("::", 1)[0]


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item):
    config = item.config
    if not getattr(config, "_check_state", False):
        return
    if getattr(config, "_state_file", None) != _file_of(item):
        config._state_file = _file_of(item)
        config._state_before = _snapshot(config)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_teardown(item, nextitem):
    config = item.config
    try:
        result = yield
    finally:
        last_of_file = nextitem is None or _file_of(nextitem) != _file_of(item)
        before = getattr(config, "_state_before", None)
        problems = []
        if getattr(config, "_check_state", False) and last_of_file and before is not None:
            config._state_file = config._state_before = None
            problems = _leaks(before, config)
    if problems:
        raise AssertionError(
            f"{_file_of(item)} left state behind (put back now; fix the test or use "
            "monkeypatch / tmp_path / a fixture that restores it):\n  " + "\n  ".join(problems))
    return result


# --------------------------------------------------- skip reasons name what is missing
# ``pytest.importorskip("control")`` skips with "could not import 'control': ..."; the report
# adds which extra of setup.cfg installs it, so every skip says what to install.
_IMPORT_SKIP = re.compile(r"could not import '([\w.]+)'")


def _extras() -> dict[str, str]:
    import configparser

    cfg = configparser.ConfigParser()
    cfg.read(os.path.join(_ROOT, "setup.cfg"))
    found: dict[str, str] = {}
    if not cfg.has_section("options.extras_require"):
        return found
    for extra, value in cfg.items("options.extras_require"):
        if extra == "all":
            continue
        for line in value.splitlines():
            name = re.split(r"[<>=!~ \[;]", line.strip(), maxsplit=1)[0]
            if name and not name.startswith("%"):
                found.setdefault(name.lower().replace("-", "_"), extra)
    return found


def _with_extra(reason: str) -> str:
    match = _IMPORT_SKIP.search(reason)
    if match is None or "(extra " in reason or "(not in any extra" in reason:
        return reason
    top = match.group(1).split(".")[0].lower()
    extra = _extras().get(top)
    if extra is None:
        return f"{reason} (not in any extra of setup.cfg)"
    return f'{reason} (extra {extra!r}: pip install -e ".[{extra}]")'


def _name_the_extra(report) -> None:
    longrepr = report.longrepr
    if report.skipped and isinstance(longrepr, tuple) and len(longrepr) == 3:
        path, lineno, reason = longrepr
        report.longrepr = (path, lineno, _with_extra(str(reason)))


@pytest.hookimpl(wrapper=True)
def pytest_make_collect_report(collector):
    report = yield
    _name_the_extra(report)
    return report
