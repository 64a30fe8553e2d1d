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
from adapters.backbone import (
    Backbone,
    BackboneConfig,
    load_smollm2,
    pretrained_backbone,
)
from adapters.calibrate import CalibrationStats, calibrate
from adapters.config import HRMConfig
from adapters.injection import (
    find_adapters,
    inject,
    print_trainable_parameters,
    remove,
    unload,
)
from adapters.io import load_adapter, save_adapter
from adapters.layer import HRMAdapter
from adapters.presets import PRESETS, Preset, get_preset
from adapters.reduce import LayerReduction, ReductionReport, reduce
from adapters.ssm import DiagonalSSM
from adapters.train import TrainHistory, evaluate_accuracy, evaluate_bpc, train

__all__: list[str] = [
    "PRESETS",
    "Backbone",
    "BackboneConfig",
    "CalibrationStats",
    "DiagonalSSM",
    "HRMAdapter",
    "HRMConfig",
    "LayerReduction",
    "Preset",
    "ReductionReport",
    "TrainHistory",
    "calibrate",
    "evaluate_accuracy",
    "evaluate_bpc",
    "find_adapters",
    "get_preset",
    "inject",
    "load_adapter",
    "load_smollm2",
    "pretrained_backbone",
    "print_trainable_parameters",
    "reduce",
    "remove",
    "save_adapter",
    "train",
    "unload",
]
