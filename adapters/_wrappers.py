"""The model inside the wrappers that training code puts around it.

``torch.compile(model)`` returns an ``OptimizedModule`` whose submodule names start with
``_orig_mod.``; ``DistributedDataParallel``, ``DataParallel`` and a DeepSpeed engine hold the
model as ``.module`` (names ``module.*``); PEFT's ``PeftModel`` holds its tuner as
``.base_model``, which holds the model as ``.model`` (names ``base_model.model.*``, e.g. LoRA on
the attention of a model whose MLPs carry our adapters). Checkpoints, calibration and
reduction name each adapter by its module's name in the model itself, so they look through
these wrappers first, down to the model (or to a wrapper that holds adapters itself, as
``inject(torch.compile(model))`` made it before :func:`adapters.inject` looked through its
wrappers too: that wrapper's own checkpoints still load back into it).
"""

from __future__ import annotations

from torch import nn

from adapters.exceptions import AdapterConfigError
from adapters.targets import ADAPTERS_ATTR

__all__ = ["unwrap_model"]

#: Wrappers (by class name, so that nothing is imported for them) holding the model in
#: ``.module``: DeepSpeed's engines.
_MODULE_HOLDERS = ("DeepSpeedEngine", "PipelineEngine")


def _inner(model: nn.Module) -> nn.Module | None:
    name = type(model).__name__
    if name == "OptimizedModule" and isinstance(getattr(model, "_orig_mod", None), nn.Module):
        return model._orig_mod
    if isinstance(model, (nn.parallel.DistributedDataParallel, nn.DataParallel)) or (
            name in _MODULE_HOLDERS and isinstance(getattr(model, "module", None), nn.Module)):
        return model.module
    if type(model).__module__.startswith("peft.") and hasattr(model, "peft_config"):
        for attr in ("base_model", "model"):  # PeftModel -> tuner (LoraModel, ...) -> model
            inner = model._modules.get(attr)
            if isinstance(inner, nn.Module) and inner is not model:
                return inner
    return None


def unwrap_model(model: nn.Module) -> nn.Module:
    """``model`` without its ``torch.compile`` / DDP / DataParallel / DeepSpeed / PEFT wrappers.

    Parameters
    ----------
    model : nn.Module

    Returns
    -------
    nn.Module
        The innermost model, or the outermost wrapper that holds the adapters itself
        (``model`` when it is not wrapped).

    Raises
    ------
    AdapterConfigError
        ``model`` is not an ``nn.Module`` (every public function taking a model checks here).

    Examples
    --------
    >>> net = nn.Linear(2, 2)
    >>> unwrap_model(nn.DataParallel(net)) is net
    True
    """
    if not isinstance(model, nn.Module):
        raise AdapterConfigError(f"`model` must be an nn.Module; got {type(model).__name__}")
    for _ in range(16):  # wrappers nest a few levels at most (compile around DDP, ...)
        inner = None if ADAPTERS_ATTR in model._modules else _inner(model)
        if inner is None:
            return model
        model = inner
    return model
