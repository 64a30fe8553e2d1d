"""The padding of a 4-D attention mask, for the adapters' state.

transformers' ``generate`` with a static cache (``cache_implementation="static"``) hands the
model a prepared 4-D mask ``(B, 1, L, K)`` over the cache's K slots instead of the 2-D
``(B, past + L)`` padding mask. Each query's own key slot (``past + i``, its diagonal entry) is
masked exactly when that query is a padded position (a real token always attends to itself:
causal, sliding-window and block masks alike), so the diagonal is the 2-D mask the adapters
need; without it, a left-padded row's pads drove the state and its tokens differed from an
uncached run.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import torch

__all__ = ["token_mask"]


def token_mask(mask: Any, past: int, length: int,
               batch: int | None) -> torch.Tensor | None:
    """``(B, L)`` bool (True = a real token) from a 4-D mask, or None where it cannot be read.

    Parameters
    ----------
    mask : torch.Tensor, shape (B or 1, heads or 1, L, K), or a mapping of them
        Boolean (True = attend) or additive floating-point (0 = attend) mask, K >= past + L;
        or the ``{"full_attention": ..., "sliding_attention": ...}`` mapping of models with
        both kinds of layers (Qwen2, ...; the diagonal is the same in each).
    past : int
        Tokens already in the cache (the first query's key slot).
    length : int
        Queries L of this call.
    batch : int or None
        Batch size of the call (a broadcast batch dimension of 1 is expanded to it).

    Returns
    -------
    torch.Tensor or None
        None for other layouts and for integer masks (no single convention).

    Examples
    --------
    >>> causal = torch.ones(3, 3, dtype=torch.bool).tril()
    >>> m = causal.expand(2, 1, 3, 3).clone()
    >>> m[0, 0, :, 0] = False  # row 0: its first position is padding
    >>> m[0, 0, 0] = False
    >>> token_mask(m, 0, 3, 2).tolist()
    [[False, True, True], [True, True, True]]
    """
    if isinstance(mask, Mapping):
        mask = mask.get("full_attention", next(iter(mask.values()), None))
    if (not isinstance(mask, torch.Tensor) or mask.dim() != 4 or mask.shape[-2] != length
            or mask.shape[-1] < past + length
            or not (mask.dtype == torch.bool or mask.is_floating_point())):
        return None
    cols = torch.arange(length, device=mask.device)
    diag = mask[:, 0, cols, cols + past]  # (B or 1, L): each query's own key slot
    real = diag if diag.dtype == torch.bool else diag == 0
    if batch is not None and real.shape[0] != batch:
        if real.shape[0] != 1:
            return None
        real = real.expand(batch, length)
    return real
