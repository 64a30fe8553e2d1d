"""Optimizer states saved while :class:`adapters.HRMAdapter`'s gate was 0-dim (formats 1, 2).

Up to checkpoint format 2 the gate was a 0-dim parameter, so an optimizer state saved then (a
Trainer checkpoint's ``optimizer.pt``, or ``optimizer.state_dict()`` of one's own loop) holds
0-dim moments for it. The gate now has shape (1,); the model's side of such a checkpoint is
upgraded where it is read (:func:`adapters.load_adapter`, ``HRMAdapter._load_from_state_dict``),
but ``torch.optim.Optimizer.load_state_dict`` casts a state entry to the parameter's dtype and
device, never to its shape. The first ``step`` then fails in every in-place update of the
foreach and for-loop implementations (Adam, AdamW, SGD with momentum, RMSprop, Adagrad, ...):
``output with shape [] doesn't match the broadcast shape [1]`` (fused AdamW broadcasts and
keeps the 0-dim moments).

:func:`upgrade_optimizer_state` gives such entries the parameter's shape (the same value).
Building the first adapter registers one global optimizer step pre-hook
(:func:`torch.optim.optimizer.register_optimizer_step_pre_hook`) that does so before an
optimizer's first step and registers the same upgrade as that optimizer's
``load_state_dict`` post-hook, so later loads are upgraded too. After the first step of an
optimizer the hook costs one weak-set lookup per step; it does nothing while compiling
(call :func:`upgrade_optimizer_state` yourself before a compiled first step of an old state).

The same hook warns when an optimizer trains an adapter whose SSM a state-dict load rebuilt
with parameters it did not have (:func:`note_rebuilt`: a checkpoint of reduced adapters with
complex modes loaded into real ones): the optimizer was built before the load and does not
hold the new parameters, which would then never be trained.
"""

from __future__ import annotations

import warnings
import weakref
from typing import Any

import torch
from torch.optim.optimizer import register_optimizer_step_pre_hook

__all__ = ["note_rebuilt", "upgrade_optimizer_state", "watch_optimizers"]

#: Per-element entries (a parameter's shape) of torch's optimizers: Adam(W), Adamax, NAdam,
#: RAdam, SGD, RMSprop, Adagrad, Adadelta, ASGD, Rprop. Used where no other parameter of the
#: optimizer has a state that shows which entries are per element (e.g. LBFGS, whose whole
#: state sits under its first parameter, with a 0-dim ``H_diag`` that is not per element).
PER_ELEMENT_KEYS = frozenset({"exp_avg", "exp_avg_sq", "max_exp_avg_sq", "exp_inf",
                              "momentum_buffer", "square_avg", "grad_avg", "acc_delta", "sum",
                              "ax", "prev", "step_size"})

_watched: weakref.WeakSet = weakref.WeakSet()
_handle = None
#: (parameters before, parameters added, where) of each SSM a state-dict load rebuilt
_rebuilt: list[tuple[weakref.WeakSet, weakref.WeakSet, str]] = []


def note_rebuilt(before, added, where: str) -> None:
    """Record that a load gave the SSM at ``where`` the new parameters ``added``; an optimizer
    that steps with any of ``before`` but not all of ``added`` is warned (once per check)."""
    _rebuilt[:] = [r for r in _rebuilt if len(r[1])]
    _rebuilt.append((weakref.WeakSet(before), weakref.WeakSet(added), where))


def _warn_if_stale(optimizer: torch.optim.Optimizer) -> None:
    if not _rebuilt:
        return
    held = {id(p) for group in optimizer.param_groups for p in group["params"]}
    stale = [where for before, added, where in _rebuilt
             if any(id(p) in held for p in before) and not all(id(p) in held for p in added)]
    if stale:
        warnings.warn(
            f"this optimizer trains the adapters at {stale[:3]} but not the parameters that "
            "loading a state dict of another structure (e.g. reduced adapters with complex "
            "modes) gave them: they will not be trained; build the optimizer after loading",
            stacklevel=4)


def upgrade_optimizer_state(optimizer: torch.optim.Optimizer) -> int:
    """Give 0-dim state entries of one-element parameters the parameter's shape, in place.

    An entry is reshaped when its parameter has one element but at least one dimension (the
    gate's (1,)), the entry is a 0-dim tensor, and it holds a per-element quantity (a
    moment), not a per-parameter scalar (``step``, ASGD's ``eta``/``mu``, NAdam's
    ``mu_product``). Which keys are which is read off the optimizer's other parameters (an
    entry of a parameter's shape is per element, a 0-dim one is a scalar); keys no other
    parameter shows are reshaped only when they are torch's own per-element entries
    (:data:`PER_ELEMENT_KEYS`). Anything else is left as it is.

    Parameters
    ----------
    optimizer : torch.optim.Optimizer

    Returns
    -------
    int
        How many entries were reshaped (0 for a state saved with (1,) gates).

    Examples
    --------
    >>> p = torch.nn.Parameter(torch.zeros(1))
    >>> opt = torch.optim.SGD([p], lr=0.1, momentum=0.9)
    >>> opt.state[p] = {"momentum_buffer": torch.tensor(0.5)}  # as saved for a 0-dim gate
    >>> upgrade_optimizer_state(opt), tuple(opt.state[p]["momentum_buffer"].shape)
    (1, (1,))
    """
    params = [p for group in optimizer.param_groups for p in group["params"]]
    state = optimizer.state
    per_element, scalar = set(), set()
    for p in params:
        entries = state.get(p)  # .get: optimizer.state is a defaultdict
        if not entries or p.numel() < 2:
            continue
        for key, value in entries.items():
            if isinstance(value, torch.Tensor):
                if value.shape == p.shape:
                    per_element.add(key)
                elif value.dim() == 0:
                    scalar.add(key)
    count = 0
    for p in params:
        entries = state.get(p)
        if not entries or p.dim() == 0 or p.numel() != 1:
            continue
        for key, value in list(entries.items()):
            if isinstance(value, torch.Tensor) and value.dim() == 0 and (
                    key in per_element or (key in PER_ELEMENT_KEYS and key not in scalar)):
                entries[key] = value.reshape(p.shape)
                count += 1
    return count


def _after_load(optimizer: torch.optim.Optimizer) -> None:
    upgrade_optimizer_state(optimizer)
    _warn_if_stale(optimizer)


def _before_step(optimizer: torch.optim.Optimizer, args: Any, kwargs: Any) -> None:
    if torch.compiler.is_compiling() or optimizer in _watched:
        return
    _watched.add(optimizer)
    optimizer.register_load_state_dict_post_hook(_after_load)
    upgrade_optimizer_state(optimizer)
    _warn_if_stale(optimizer)


def watch_optimizers() -> None:
    """Register the global step pre-hook described in the module docstring (once)."""
    global _handle
    if _handle is None:
        _handle = register_optimizer_step_pre_hook(_before_step)
