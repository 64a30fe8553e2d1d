"""Parameter counts of a model, in PEFT's format (re-exported by :mod:`adapters.injection`)."""

from __future__ import annotations

from torch import nn

from adapters.exceptions import AdapterConfigError

__all__ = ["get_nb_trainable_parameters", "print_trainable_parameters"]


def get_nb_trainable_parameters(model: nn.Module) -> tuple[int, int]:
    """``(trainable, total)`` parameter counts (shared parameters counted once).

    Parameters
    ----------
    model : nn.Module
        Any module.

    Returns
    -------
    trainable : int
        Scalars in parameters with ``requires_grad``.
    total : int
        Scalars in all parameters.

    Examples
    --------
    After :func:`adapters.inject` only the adapter trains: ``2 N H + 2 N + 1`` scalars here
    (H = 8, N = 4), beside the frozen ``8 * 8 + 8`` of the linear layer.

    >>> from adapters import HRMConfig, inject
    >>> model = inject(nn.ModuleDict({"mlp": nn.Linear(8, 8)}),
    ...                HRMConfig(d_state=4, target_modules=["mlp"]))
    >>> get_nb_trainable_parameters(model)
    (73, 145)
    """
    if not isinstance(model, nn.Module):
        raise AdapterConfigError(f"`model` must be an nn.Module; got {type(model).__name__}")
    trainable = total = 0
    for p in model.parameters():
        total += p.numel()
        if p.requires_grad:
            trainable += p.numel()
    return trainable, total


def print_trainable_parameters(model: nn.Module) -> None:
    """Print the counts in PEFT's format.

    ``trainable params: X || all params: Y || trainable%: Z`` — a user-facing report, the
    one place this package prints (as :meth:`peft.PeftModel.print_trainable_parameters`).

    Parameters
    ----------
    model : nn.Module
        Any module; counts as :func:`get_nb_trainable_parameters`.
    """
    trainable, total = get_nb_trainable_parameters(model)
    pct = 100.0 * trainable / total if total else 0.0
    print(  # noqa: T201 - the documented purpose of this function
        f"trainable params: {trainable:,d} || all params: {total:,d} || trainable%: {pct:.4f}"
    )
