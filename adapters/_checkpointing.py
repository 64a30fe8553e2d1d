"""Gradient checkpointing of an adapted transformers model, in the adapters' context.

transformers checkpoints each block (``GradientCheckpointingLayer``) through the function
``gradient_checkpointing_enable`` stores on it as ``_gradient_checkpointing_func``; the
backward pass recomputes the block after the model call has returned. The adapters read the
call's context (attention mask: padded positions feed a zero stream; batch size, for the
flattened streams of OPT), so :func:`bind_checkpoints` wraps that function to run the block,
and its recomputation, inside the context of the call that ran it.
"""

from __future__ import annotations

import functools
from collections.abc import Callable

import torch
from torch import nn

from adapters._hooks import warn_if_wrapped_by_peft_after_inject

__all__ = ["CheckpointInContext", "bind_checkpoints", "unbind_checkpoints"]

#: Where transformers keeps a module's gradient checkpointing function (each checkpointed block).
_CHECKPOINT_FUNC = "_gradient_checkpointing_func"


class CheckpointInContext:
    """A block's gradient checkpointing function that runs the block, and its recomputation in
    the backward pass, inside the model call's adapter context (attention mask, batch size).

    Without it the recomputation ran outside any model call: a padded batch's branch then
    skipped the mask (non-reentrant checkpointing: "a different number of tensors was saved";
    reentrant: other gradients) and a flattened stream (OPT) could not be viewed as (B, L, H).
    """

    def __init__(self, runtime, func: Callable) -> None:
        self.runtime, self.func = runtime, func

    def __call__(self, function: Callable, *args, **kwargs):
        runtime = self.runtime
        stack = runtime.calls.stack
        if not stack:  # outside a model call: nothing to carry
            return self.func(function, *args, **kwargs)
        # the context of the model call under way (None inside disable_adapter), and whether
        # the branches were off: the recomputation runs as the forward did
        context = (stack[-1], runtime.disabled)
        return self.func(functools.partial(_run_in_context, runtime, context, function), *args,
                         **kwargs)


def _run_in_context(runtime, context: tuple, function: Callable, *args, **kwargs):
    ctx, disabled = context
    before = runtime.disabled
    stack = runtime.calls.stack  # of the thread recomputing (autograd may use its own)
    stack.append(ctx)
    runtime.disabled = disabled
    try:
        return function(*args, **kwargs)
    finally:
        stack.pop()
        runtime.disabled = before


class _Binder:
    """The forward pre-hook :func:`bind_checkpoints` returns (a class: models are pickled)."""

    def __init__(self, runtime, blocks: list[nn.Module]) -> None:
        self.runtime, self.blocks = runtime, blocks

    def __call__(self, module: nn.Module, args: tuple) -> None:
        if module.training and torch.is_grad_enabled():
            if not getattr(self.runtime, "peft_checked", False):
                warn_if_wrapped_by_peft_after_inject(self.runtime, module)
            for block in self.blocks:
                func = block.__dict__.get(_CHECKPOINT_FUNC)
                if func is not None and not isinstance(func, CheckpointInContext):
                    block.__dict__[_CHECKPOINT_FUNC] = CheckpointInContext(self.runtime, func)


def bind_checkpoints(runtime, blocks: list[nn.Module]) -> Callable:
    """A forward pre-hook of the adapted model: on each training call with gradients, the
    checkpointing function of every block (set by ``gradient_checkpointing_enable``, possibly
    after :func:`adapters.inject`) is wrapped in :class:`CheckpointInContext` (once).

    Parameters
    ----------
    runtime : adapters.generation.AdapterRuntime
    blocks : list of nn.Module
        The modules that may be checkpointed (those with a ``gradient_checkpointing`` flag).

    Returns
    -------
    callable
        ``hook(module, args)``.
    """
    return _Binder(runtime, blocks)


def unbind_checkpoints(model: nn.Module) -> None:
    """Give every block of ``model`` its own checkpointing function back (at ``remove``)."""
    for block in model.modules():
        func = block.__dict__.get(_CHECKPOINT_FUNC)
        if isinstance(func, CheckpointInContext):
            block.__dict__[_CHECKPOINT_FUNC] = func.func
