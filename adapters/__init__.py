"""Stateful SSM adapters for frozen transformers, reduced by balanced truncation.

The library a fine-tuning user imports: configuration, the SSM modules and scans, injection
into a frozen model (and its removal), cached generation, calibration, reduction and its
report, saving and loading. The experiment harness of the paper (tasks, backbones, training
loop, LoRA baseline, presets, the main job) lives in ``benchmarks/hrm`` and is never imported
from here.

Requires PyTorch: ``pip install "lti-adapters[torch]"``.
"""

from __future__ import annotations

try:
    import torch  # noqa: F401
except ImportError as exc:  # pragma: no cover - exercised in a subprocess test
    raise ImportError(
        "the `adapters` package needs PyTorch; install the extra with "
        "`pip install \"lti-adapters[torch]\"` (the CPU wheel: `pip install torch==2.13.0 "
        "--index-url https://download.pytorch.org/whl/cpu`)"
    ) from exc

# --- public API (each module adds its own names below) ---
from adapters.calibration import calibrate
from adapters.config import HRMConfig
from adapters.injection import (
    disable_adapter,
    find_adapters,
    inject,
    print_trainable_parameters,
    remove,
    unload,
)
from adapters.io import load_adapter, save_adapter
from adapters.layer import HRMAdapter
from adapters.reduction import reduce
from adapters.report import LayerReduction, ReductionReport
from adapters.ssm import DiagonalSSM
from adapters.statistics import CalibrationStats

__all__: list[str] = [
    "CalibrationStats",
    "DiagonalSSM",
    "HRMAdapter",
    "HRMConfig",
    "LayerReduction",
    "ReductionReport",
    "calibrate",
    "disable_adapter",
    "find_adapters",
    "inject",
    "load_adapter",
    "print_trainable_parameters",
    "reduce",
    "remove",
    "save_adapter",
    "unload",
]
