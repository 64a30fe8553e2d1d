"""Packed (padding-free) batches: several sequences in one row, told apart by ``position_ids``.

transformers' ``DataCollatorWithFlattening`` (and TRL's ``padding_free``) concatenates the
examples of a batch into one row and restarts ``position_ids`` at 0 for each; the base model
keeps the sequences apart (``masking_utils.find_packed_sequence_indices``: a new sequence
wherever ``position_ids`` does not step by 1, for calls without a 2-D ``attention_mask`` and
without a cache). The adapters do the same: each packed sequence's SSM starts from the zero
state, as it would alone.

With ``s`` the state trajectory of the whole row (no restart) and ``t0`` the first position of
the sequence holding position ``t``, linearity gives the restarted state

    s'_t = s_t - ā^(t - t0 + 1) ⊙ s_(t0 - 1)

(``s_(-1) = 0``), so one parallel scan of the row serves all its sequences, in O(L) memory
(:meth:`adapters.HRMAdapter.forward` with ``starts``; :func:`adapters.calibrate` alike).
Shapes: B batch, L length, H width, N states.
"""

from __future__ import annotations

from collections.abc import Mapping

import torch
from torch import nn

__all__ = ["mask_starts", "packed_starts", "restarted"]


def packed_starts(position_ids, batch: int | None, length: int) -> torch.Tensor | None:
    """First position of each position's packed sequence, shape (B, L), or None when no row
    holds more than one sequence (or ``position_ids`` is not a (B or 1, L) tensor).

    Parameters
    ----------
    position_ids : torch.Tensor or None
        The model call's ``position_ids``, shape (B, L) or (1, L).
    batch : int or None
        B.
    length : int
        L.

    Returns
    -------
    torch.Tensor or None
        int64, ``t0[b, t]`` = the position where the sequence of ``(b, t)`` starts.

    Examples
    --------
    >>> packed_starts(torch.tensor([[0, 1, 2, 0, 1]]), 1, 5).tolist()
    [[0, 0, 0, 3, 3]]
    >>> packed_starts(torch.arange(4)[None], 1, 4) is None
    True
    """
    if (not isinstance(position_ids, torch.Tensor) or position_ids.dim() != 2
            or position_ids.is_floating_point() or position_ids.shape[-1] != length
            or batch is None or position_ids.shape[0] not in (1, batch)):
        return None
    pos = position_ids.expand(batch, -1)
    new = torch.diff(pos, prepend=pos[:, :1] - 1, dim=-1) != 1  # (B, L) a sequence starts
    if not torch.compiler.is_compiling() and not bool(new[:, 1:].any()):
        return None  # (a host sync, as the base model's own check; while compiling the
        # restart runs anyway: with no new sequence it changes nothing)
    t = torch.arange(length, device=pos.device).expand(batch, -1)
    return torch.cummax(torch.where(new, t, torch.zeros_like(t)), dim=1).values


def mask_starts(mask, length: int, batch: int | None) -> torch.Tensor | None:
    """Packed sequences' starts read off a custom 4-D attention mask, shape (B, L), or None.

    Packing with a block-diagonal mask ``(B or 1, heads or 1, L, L)`` (True or 0 = attend)
    instead of restarting ``position_ids`` alone: the base model keeps the sequences apart as
    the mask says, so the adapters do too. A sequence starts at each real query ``i`` (its own
    key slot attended) that does not attend key ``i - 1`` although ``i - 1`` is a real token;
    the first real token after padding is no start (the padding fed no state), so a causal,
    sliding-window or padded mask gives None.

    Parameters
    ----------
    mask : torch.Tensor or mapping
        The model call's ``attention_mask`` (a mapping of such masks: its ``full_attention``).
    length : int
        L, the queries of the call (no cache: keys are the same L positions).
    batch : int or None
        B (a broadcast batch dimension of 1 is expanded to it).

    Returns
    -------
    torch.Tensor or None
        int64 ``t0[b, t]`` as :func:`packed_starts`; None for other layouts or no start.

    Examples
    --------
    >>> seg = torch.tensor([0, 0, 0, 1, 1])
    >>> block = (seg[:, None] == seg[None, :]) & torch.ones(5, 5, dtype=torch.bool).tril()
    >>> mask_starts(block[None, None], 5, 1).tolist()
    [[0, 0, 0, 3, 3]]
    >>> mask_starts(torch.ones(5, 5, dtype=torch.bool).tril()[None, None], 5, 1) is None
    True
    """
    if isinstance(mask, Mapping):
        mask = mask.get("full_attention", next(iter(mask.values()), None))
    if (not isinstance(mask, torch.Tensor) or mask.dim() != 4 or length < 2 or batch is None
            or mask.shape[-2] != length or mask.shape[-1] != length
            or mask.shape[0] not in (1, batch)
            or not (mask.dtype == torch.bool or mask.is_floating_point())):
        return None
    allowed = mask[:, 0] if mask.dtype == torch.bool else mask[:, 0] == 0  # (B or 1, L, L)
    i = torch.arange(length, device=mask.device)
    real = allowed[:, i, i]  # (B or 1, L): each query's own key slot
    sees_prev = allowed[:, i[1:], i[1:] - 1]  # (B or 1, L - 1)
    new = torch.zeros_like(real)
    new[:, 1:] = real[:, 1:] & real[:, :-1] & ~sees_prev
    if not torch.compiler.is_compiling() and not bool(new.any()):
        return None  # (a host sync, as in packed_starts)
    t = i.expand(new.shape[0], -1)
    starts = torch.cummax(torch.where(new, t, torch.zeros_like(t)), dim=1).values
    return starts.expand(batch, -1)


def restarted(ssm: nn.Module, s: torch.Tensor, starts: torch.Tensor) -> torch.Tensor:
    """States ``s`` of a whole packed row restarted at each packed sequence's start.

    Parameters
    ----------
    ssm : DiagonalSSM
    s : torch.Tensor, shape (B, L, N)
        ``ssm.trajectory(u)`` of the row, from the zero state.
    starts : torch.Tensor, shape (B, L)
        From :func:`packed_starts`.

    Returns
    -------
    torch.Tensor, shape (B, L, N)
        ``s'_t = s_t - ā^(t - t0 + 1) ⊙ s_(t0 - 1)``: each sequence's states as if alone.
    """
    a = ssm.discrete()[0].to(s.dtype)  # (N,)
    starts = starts.to(s.device)
    t = torch.arange(s.shape[1], device=s.device)
    steps = (t - starts + 1).to(a.real.dtype if a.is_complex() else a.dtype)  # (B, L)
    prev = (starts - 1).clamp(min=0)[..., None].expand(-1, -1, s.shape[-1])
    carried = torch.gather(s, 1, prev) * (starts > 0)[..., None]  # s_(t0 - 1), (B, L, N)
    return s - torch.pow(a, steps[..., None]) * carried
