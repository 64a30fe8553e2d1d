"""Repository-wide pytest configuration: the ``gpu`` marker skips cleanly without CUDA,
``slow`` tests run only when asked for with ``-m slow`` (or ``--run-slow``), and hypothesis
property tests are derandomized (reproducible CI) unless ``HYPOTHESIS_PROFILE=explore``."""

from __future__ import annotations

import importlib.util
import os

import pytest

if importlib.util.find_spec("hypothesis") is not None:  # a test extra
    # deterministic property tests in the default run; HYPOTHESIS_PROFILE=explore to search
    from hypothesis import settings as _hsettings

    _hsettings.register_profile("default", derandomize=True, database=None)
    _hsettings.register_profile("explore", derandomize=False)
    _hsettings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "default"))


def pytest_addoption(parser):
    parser.addoption("--run-slow", action="store_true", help="also run tests marked slow")


def _cuda_available() -> bool:
    if importlib.util.find_spec("torch") is None:
        return False
    import torch

    return torch.cuda.is_available()


def pytest_collection_modifyitems(config, items):
    markexpr = config.getoption("-m") or ""
    run_slow = config.getoption("--run-slow") or "slow" in markexpr
    need_gpu = any("gpu" in item.keywords for item in items)
    has_gpu = _cuda_available() if need_gpu else False
    skip_slow = pytest.mark.skip(reason="slow test: run with -m slow or --run-slow")
    skip_gpu = pytest.mark.skip(reason="needs a CUDA device (torch.cuda.is_available() is False)")
    for item in items:
        if "slow" in item.keywords and not run_slow:
            item.add_marker(skip_slow)
        if "gpu" in item.keywords and not has_gpu:
            item.add_marker(skip_gpu)
