"""Stateful SSM adapters for frozen transformers, reduced by balanced truncation.

Requires PyTorch: ``pip install "lti-adapters[torch]"``.
"""

from __future__ import annotations

try:
    import torch  # noqa: F401
except ImportError as exc:  # pragma: no cover - exercised in a subprocess test
    raise ImportError(
        "the `adapters` package needs PyTorch; install the extra with "
        "`pip install \"lti-adapters[torch]\"` (CPU wheel: `pip install torch==2.13.0`)"
    ) from exc

# --- public API (each module adds its own names below) ---
from adapters.config import HRMConfig
from adapters.inject import (
    find_adapters,
    inject,
    print_trainable_parameters,
    remove,
    unload,
)
from adapters.io import load_adapter, save_adapter
from adapters.ssm import DiagonalSSM, HRMAdapter

__all__: list[str] = [
    "DiagonalSSM",
    "HRMAdapter",
    "HRMConfig",
    "find_adapters",
    "inject",
    "load_adapter",
    "print_trainable_parameters",
    "remove",
    "save_adapter",
    "unload",
]
