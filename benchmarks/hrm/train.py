"""A plain training loop and the evaluation metrics (answer accuracy, bits per character).

Works for any causal LM called as ``model(input_ids)`` that returns logits of shape
``(B, Lseq, V)`` or an object with a ``.logits`` attribute (Hugging Face models, peft
models, models with injected adapters). Batches are :class:`~benchmarks.hrm.tasks.Batch` pairs
``(input_ids, labels)`` of shape ``(B, Lseq)`` in the Hugging Face convention:
``labels[:, i]`` is predicted from the logits at position ``i - 1``, ``-100`` means no loss.
The loss is plain cross-entropy (no label smoothing), so bits per character are exact.
"""

from __future__ import annotations

import functools
import inspect
import math
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import torch
from torch import nn
from torch.nn import functional

from adapters.exceptions import AdapterConfigError, AdapterShapeError
from benchmarks.hrm.tasks import IGNORE_INDEX

__all__ = ["TrainHistory", "causal_lm_loss", "evaluate_accuracy", "evaluate_bpc", "train"]


@dataclass(frozen=True)
class TrainHistory:
    """What a call to :func:`train` did.

    Attributes
    ----------
    losses : tuple of float
        Training loss (mean cross-entropy in nats over the labelled positions) per step.
    learning_rates : tuple of float
        Learning rate used at each step.
    n_trainable : int
        Number of trainable scalar parameters that were optimised.
    seconds : float
        Wall-clock time of the loop.
    """

    losses: tuple[float, ...]
    learning_rates: tuple[float, ...]
    n_trainable: int
    seconds: float


@functools.lru_cache(maxsize=64)
def _takes_use_cache(model_type: type) -> bool:
    """Whether ``model_type.forward`` accepts ``use_cache`` (by name or ``**kwargs``)."""
    try:
        params = inspect.signature(model_type.forward).parameters.values()
    except (TypeError, ValueError):
        return False
    return any(p.name == "use_cache" or p.kind is p.VAR_KEYWORD for p in params)


def _logits(model: nn.Module, input_ids: torch.Tensor) -> torch.Tensor:
    # whole sequences, no KV cache: one parallel scan per adapter, no decode bookkeeping
    if _takes_use_cache(type(model)):
        out = model(input_ids, use_cache=False)
    else:
        out = model(input_ids)
    logits = getattr(out, "logits", out)
    if not isinstance(logits, torch.Tensor) or logits.ndim != 3:
        raise AdapterShapeError(
            "the model must return logits of shape (B, Lseq, V) or an object with .logits; got "
            f"{type(logits).__name__} of shape {tuple(getattr(logits, 'shape', ()))}"
        )
    return logits


def _device(model: nn.Module) -> torch.device:
    for p in model.parameters():
        return p.device
    return torch.device("cpu")


def causal_lm_loss(
    logits: torch.Tensor, labels: torch.Tensor, *, reduction: str = "mean"
) -> torch.Tensor:
    """Next-token cross-entropy on the labelled positions, without label smoothing.

    Parameters
    ----------
    logits : torch.Tensor, shape (B, Lseq, V)
    labels : torch.Tensor, shape (B, Lseq), int64
        ``-100`` where no loss is taken.
    reduction : {"mean", "sum"}

    Returns
    -------
    loss : torch.Tensor, scalar
        In nats; computed in float32 or wider whatever the logits' dtype.

    Notes
    -----
    ``loss = -(1/|M|) sum_{(b,i) in M} log softmax(logits[b, i-1])[labels[b, i]]`` with
    ``M`` the labelled positions ``i >= 1``.
    """
    if logits.shape[:2] != labels.shape:
        raise AdapterShapeError(
            f"`labels` must have shape {tuple(logits.shape[:2])} (the logits' (B, Lseq)); got "
            f"{tuple(labels.shape)}"
        )
    shifted = logits[:, :-1].reshape(-1, logits.shape[-1])  # (B*(Lseq-1), V)
    if shifted.dtype in (torch.float16, torch.bfloat16):
        shifted = shifted.float()
    return functional.cross_entropy(
        shifted, labels[:, 1:].reshape(-1), ignore_index=IGNORE_INDEX, reduction=reduction
    )


def _unpack(batch: object, device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
    if not (isinstance(batch, tuple) and len(batch) == 2):
        raise AdapterConfigError(
            "each batch must be a pair (input_ids, labels), e.g. benchmarks.hrm.tasks.Batch; got "
            f"{type(batch).__name__}"
        )
    input_ids, labels = batch
    return input_ids.to(device), labels.to(device)


def train(
    model: nn.Module,
    task_batches: Iterable[tuple[torch.Tensor, torch.Tensor]],
    *,
    steps: int,
    lr: float,
    weight_decay: float = 0.0,
    grad_clip: float | None = 1.0,
    warmup_steps: int = 0,
    min_lr_ratio: float = 0.1,
    seed: int = 0,
    progress: bool = True,
    desc: str = "train",
) -> TrainHistory:
    """Train the parameters with ``requires_grad=True`` for a fixed number of steps.

    Parameters
    ----------
    model : torch.nn.Module
        A causal LM (see the module docstring); frozen parameters stay untouched.
    task_batches : iterable of (input_ids, labels), each of shape (B, Lseq)
        An endless stream (e.g. :func:`~benchmarks.hrm.tasks.dfa_batches`) or a re-iterable
        collection (e.g. a list), which is cycled through when it runs out.
    steps : int
        Number of optimiser steps.
    lr : float
        Peak learning rate of AdamW.
    weight_decay : float
        AdamW's decoupled weight decay.
    grad_clip : float or None
        Clip the global gradient norm to this value (None: no clipping).
    warmup_steps : int
        Linear warm-up steps before the cosine decay.
    min_lr_ratio : float
        The cosine decays the learning rate from ``lr`` to ``min_lr_ratio * lr``.
    seed : int
        Seeds torch's generator inside the loop (dropout); the global state outside is
        restored afterwards. The data order is fixed by ``task_batches`` itself.
    progress : bool
        Show a tqdm progress bar.
    desc : str
        The progress bar's label.

    Returns
    -------
    history : TrainHistory
        Per-step losses and learning rates, trainable-parameter count and wall time.

    Notes
    -----
    Learning rate at step ``s`` (0-based): ``lr * (s + 1) / warmup_steps`` during warm-up,
    then ``lr * (m + (1 - m) * (1 + cos(pi * u)) / 2)`` with ``m = min_lr_ratio`` and
    ``u = (s - warmup_steps) / max(1, steps - warmup_steps - 1)``.
    """
    if not isinstance(steps, int) or steps < 1:
        raise AdapterConfigError(f"`steps` must be a positive integer; got {steps!r}")
    if not (lr > 0 and math.isfinite(lr)):
        raise AdapterConfigError(f"`lr` must be a positive finite float; got {lr!r}")
    if not 0.0 <= min_lr_ratio <= 1.0:
        raise AdapterConfigError(f"`min_lr_ratio` must lie in [0, 1]; got {min_lr_ratio!r}")
    if not isinstance(warmup_steps, int) or not 0 <= warmup_steps <= steps:
        raise AdapterConfigError(
            f"`warmup_steps` must be an integer in [0, steps={steps}]; got {warmup_steps!r}"
        )
    params = [p for p in model.parameters() if p.requires_grad]
    if not params:
        raise AdapterConfigError("`model` has no trainable parameters (requires_grad=True)")
    from tqdm.auto import tqdm

    def lr_at(step: int) -> float:
        if step < warmup_steps:
            return lr * (step + 1) / warmup_steps
        u = (step - warmup_steps) / max(1, steps - warmup_steps - 1)
        return lr * (min_lr_ratio + (1.0 - min_lr_ratio) * 0.5 * (1.0 + math.cos(math.pi * u)))

    device = _device(model)
    optimizer = torch.optim.AdamW(params, lr=lr, weight_decay=weight_decay)
    losses: list[float] = []
    lrs: list[float] = []
    was_training = model.training
    model.train()
    iterator = iter(task_batches)
    start = time.perf_counter()
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        bar = tqdm(range(steps), desc=desc, disable=not progress, leave=False)
        for step in bar:
            try:
                batch = next(iterator)
            except StopIteration:
                iterator = iter(task_batches)
                if iterator is task_batches:
                    raise AdapterConfigError(
                        f"`task_batches` is an exhausted iterator after {step} of steps={steps} "
                        "steps; pass an endless stream or a re-iterable collection"
                    ) from None
                batch = next(iterator)
            input_ids, labels = _unpack(batch, device)
            for group in optimizer.param_groups:
                group["lr"] = lr_at(step)
            loss = causal_lm_loss(_logits(model, input_ids), labels)
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            if grad_clip is not None:
                torch.nn.utils.clip_grad_norm_(params, grad_clip)
            optimizer.step()
            losses.append(float(loss.detach()))
            lrs.append(lr_at(step))
            if progress:
                bar.set_postfix(loss=f"{losses[-1]:.4f}", refresh=False)
        bar.close()
    model.train(was_training)
    return TrainHistory(
        losses=tuple(losses),
        learning_rates=tuple(lrs),
        n_trainable=sum(p.numel() for p in params),
        seconds=time.perf_counter() - start,
    )


@torch.no_grad()
def evaluate_accuracy(
    model: nn.Module,
    batches: Iterable[tuple[torch.Tensor, torch.Tensor]],
    *,
    candidates: Sequence[int] | None = None,
) -> float:
    """Fraction of answer positions where the model's top prediction is the label.

    Parameters
    ----------
    model : torch.nn.Module
        A causal LM (see the module docstring).
    batches : iterable of (input_ids, labels), each of shape (B, Lseq)
        A finite collection, e.g. ``[dfa_task(...)]``.
    candidates : sequence of int or None
        Restrict the argmax to these token ids (e.g. ``STATE_IDS[:k]``); None takes the
        argmax over the whole vocabulary (stricter).

    Returns
    -------
    accuracy : float
        Correct answers over all positions with a label other than -100.
    """
    device = _device(model)
    was_training = model.training
    model.eval()
    cand = None if candidates is None else torch.as_tensor(list(candidates), device=device)
    correct = total = 0
    for batch in batches:
        input_ids, labels = _unpack(batch, device)
        logits = _logits(model, input_ids)[:, :-1]  # (B, Lseq-1, V)
        target = labels[:, 1:]  # (B, Lseq-1)
        mask = target != IGNORE_INDEX
        if cand is None:
            pred = logits.argmax(dim=-1)
        else:
            pred = cand[logits[..., cand].argmax(dim=-1)]
        correct += int((pred[mask] == target[mask]).sum())
        total += int(mask.sum())
    model.train(was_training)
    if total == 0:
        raise AdapterConfigError("`batches` contain no answer positions (all labels are -100)")
    return correct / total


@torch.no_grad()
def evaluate_bpc(model: nn.Module, batches: Iterable[tuple[torch.Tensor, torch.Tensor]]) -> float:
    """Bits per character of a character-level LM on held-out text.

    Parameters
    ----------
    model : torch.nn.Module
        A causal LM over the character vocabulary.
    batches : iterable of (input_ids, labels), each of shape (B, Lseq)
        E.g. :func:`~benchmarks.hrm.tasks.lm_eval_batches` of the validation split.

    Returns
    -------
    bpc : float
        ``sum of -log p(label) / (n_predicted * ln 2)`` over every labelled position,
        without label smoothing.
    """
    device = _device(model)
    was_training = model.training
    model.eval()
    nats = 0.0
    count = 0
    for batch in batches:
        input_ids, labels = _unpack(batch, device)
        nats += float(causal_lm_loss(_logits(model, input_ids), labels, reduction="sum"))
        count += int((labels[:, 1:] != IGNORE_INDEX).sum())
    model.train(was_training)
    if count == 0:
        raise AdapterConfigError("`batches` contain no labelled positions")
    return nats / (count * math.log(2.0))
