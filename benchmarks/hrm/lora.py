"""The LoRA baseline, through HF ``peft`` (not re-implemented), matched in parameter count.

The comparison the paper should have made: LoRA on the linear layers of the *same* MLPs the
HRM adapters sit beside (same matching rule, same skipped layers), with the rank whose
trainable parameter count is closest to the HRM adapters'. A rank-r LoRA on a linear map
``in -> out`` has ``r * (in + out)`` parameters.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from torch import nn

from adapters._optional import require
from adapters.config import HRMConfig
from adapters.exceptions import AdapterConfigError, TargetModulesNotFoundError
from adapters.injection import AdaptedMLP, build_adapter, find_adapters
from adapters.targets import find_target_modules
from adapters.targets import linear_dims as _linear_dims
from adapters.targets import select_layers as _select_layers

__all__ = [
    "lora_target_linears",
    "count_lora_parameters",
    "count_hrm_parameters",
    "iso_parameter_lora_rank",
    "make_lora_model",
]


def _targets(model: nn.Module, config: HRMConfig) -> list[str]:
    adapted = find_adapters(model)
    if adapted:
        return list(adapted)
    names = find_target_modules(model, config.target_modules)
    if not names:
        raise TargetModulesNotFoundError(
            f"`target_modules`={config.target_modules!r} matches no module of "
            f"{type(model).__name__}"
        )
    return _select_layers(names, config)


def lora_target_linears(model: nn.Module, config: HRMConfig | None = None,
                        ) -> dict[str, tuple[int, int]]:
    """The linear layers inside the modules HRM adapts: ``{dotted name: (in, out)}``.

    Parameters
    ----------
    model : nn.Module
        A base model, or one already adapted by :func:`adapters.inject` (its adapted MLPs
        are used, and the names point inside them).
    config : HRMConfig or None
        Matching rule and ``layers_to_skip``; ``None`` uses ``HRMConfig()``.

    Returns
    -------
    dict
        ``nn.Linear`` and transformers' ``Conv1D`` leaves, in module order.

    Raises
    ------
    TargetModulesNotFoundError
        No target module, or no linear layer inside the targets.
    """
    config = HRMConfig() if config is None else config
    out: dict[str, tuple[int, int]] = {}
    for name in _targets(model, config):
        module = model.get_submodule(name)
        if isinstance(module, AdaptedMLP):
            module, name = module.mlp, name + ".mlp"
        for sub, leaf in module.named_modules():
            dims = _linear_dims(leaf)
            if dims is not None and sub:
                out[f"{name}.{sub}"] = dims
    if not out:
        raise TargetModulesNotFoundError("the target modules contain no linear layer for LoRA")
    return out


def count_lora_parameters(linears: dict[str, tuple[int, int]], rank: int) -> int:
    """Trainable parameters of a rank-``rank`` LoRA on ``linears``: ``rank * sum(in + out)``.

    Parameters
    ----------
    linears : dict of str to (int, int)
        ``{name: (in_features, out_features)}`` of the adapted linear layers.
    rank : int
        LoRA rank ``r``; each layer adds ``A`` (r, in) and ``B`` (out, r).

    Returns
    -------
    int
        ``rank * sum(in_features + out_features)`` over ``linears``.

    Examples
    --------
    >>> count_lora_parameters({"up": (8, 32), "down": (32, 8)}, rank=4)
    320
    """
    return rank * sum(i + o for i, o in linears.values())


def count_hrm_parameters(model: nn.Module, config: HRMConfig | None = None) -> int:
    """Trainable parameters the HRM adapters have (adapted model) or would have (base model).

    Parameters
    ----------
    model : nn.Module
    config : HRMConfig or None
        Used only for a base model; ``None`` uses ``HRMConfig()``.

    Returns
    -------
    int
        For an adapted model the real count (per-layer sizes of reduced adapters included).
    """
    adapted = find_adapters(model)
    if adapted:
        return sum(p.numel() for a in adapted.values() for p in a.adapter.parameters())
    from adapters.targets import infer_width as _infer_width

    config = HRMConfig() if config is None else config
    per_width: dict[int, int] = {}
    total = 0
    for name in _targets(model, config):
        width = _infer_width(model, name, model.get_submodule(name), config)
        if width not in per_width:
            adapter = build_adapter(width, config)
            per_width[width] = sum(p.numel() for p in adapter.parameters())
        total += per_width[width]
    return total


def iso_parameter_lora_rank(model: nn.Module, config: HRMConfig | None = None) -> int:
    """LoRA rank whose trainable parameters best match the HRM adapters' on the same MLPs.

    Parameters
    ----------
    model : nn.Module
        Base or adapted model.
    config : HRMConfig or None
        Targets, skipped layers and SSM sizes; ``None`` uses ``HRMConfig()``.

    Returns
    -------
    int
        ``r >= 1`` minimising ``|r * S - P_hrm|`` with ``S = sum(in + out)`` over
        :func:`lora_target_linears`; ties go to the smaller rank.
    """
    linears = lora_target_linears(model, config)
    per_rank = count_lora_parameters(linears, 1)
    hrm = count_hrm_parameters(model, config)
    low = max(1, hrm // per_rank)
    return min((low, low + 1), key=lambda r: (abs(r * per_rank - hrm), r))


def make_lora_model(model: nn.Module, rank: int, target_modules: Sequence[str] | None = None, *,
                    config: HRMConfig | None = None, lora_alpha: float | None = None,
                    lora_dropout: float = 0.0, **lora_kwargs: Any) -> nn.Module:
    """Wrap a base model with a peft LoRA of rank ``rank`` (``peft.get_peft_model``).

    Parameters
    ----------
    model : nn.Module
        A base model without HRM adapters.
    rank : int
        LoRA rank r >= 1 (see :func:`iso_parameter_lora_rank`).
    target_modules : sequence of str or None
        Passed to ``peft.LoraConfig``; ``None`` uses the exact names of
        :func:`lora_target_linears` (the linears of the MLPs HRM would adapt).
    config : HRMConfig or None
        Matching rule and skipped layers for the default targets.
    lora_alpha : float or None
        ``None`` uses ``rank`` (scale ``alpha / r = 1``).
    lora_dropout : float
    **lora_kwargs
        More ``peft.LoraConfig`` fields; ``task_type`` defaults to ``"CAUSAL_LM"`` for models
        with ``generate``.

    Returns
    -------
    peft.PeftModel
    """
    peft = require("peft", extra="hf", purpose="the LoRA baseline")
    if isinstance(rank, bool) or not isinstance(rank, int) or rank < 1:
        raise AdapterConfigError(f"`rank` must be a positive int; got {rank!r}")
    if find_adapters(model):
        raise AdapterConfigError(
            "`model` has HRM adapters; build the LoRA baseline on a base model"
        )
    if target_modules is None:
        target_modules = list(lora_target_linears(model, config))
    if "task_type" not in lora_kwargs and hasattr(model, "generate") and hasattr(model, "config"):
        lora_kwargs["task_type"] = "CAUSAL_LM"
    conv1d = any(type(model.get_submodule(n)).__name__ == "Conv1D" for n in target_modules
                 if _has_submodule(model, n))
    lora_config = peft.LoraConfig(
        r=rank,
        lora_alpha=rank if lora_alpha is None else lora_alpha,
        lora_dropout=lora_dropout,
        target_modules=list(target_modules),
        fan_in_fan_out=lora_kwargs.pop("fan_in_fan_out", conv1d),
        **lora_kwargs,
    )
    return peft.get_peft_model(model, lora_config)


def _has_submodule(model: nn.Module, name: str) -> bool:
    try:
        model.get_submodule(name)
    except AttributeError:
        return False
    return True
