"""The discretisation of all adapters of a model at once, for a chunk of cached generation.

A prompt (a chunk of more than one token) discretises every adapter's SSM once
(:meth:`adapters.layer.HRMAdapter.scan_decoding`): the zero-order hold of each mode group is a
dozen float64 kernels on vectors of ``n`` modes, each called once per layer. Every one of those
kernels is elementwise, so the same kernels on the modes of all adapters side by side give each
adapter's values bit for bit (``tests/adapters/test_prefill.py`` checks it, tails of the vector
loops included): :func:`projections` computes the hold of all real groups in one set of
kernels, of all complex groups in another, and each adapter's projections from its share.
"""

from __future__ import annotations

import torch
from torch import nn

from adapters.ssm import DiagonalSSM, zoh_complex, zoh_real

__all__ = ["projections"]

_REAL = ("log_A", "log_dt", "sign")
_COMPLEX = ("log_A_re", "A_im", "log_dt_cplx")


def projections(ssms: dict[str, nn.Module]) -> dict[str, tuple]:
    """``{name: ssm._projections()}`` of every :class:`DiagonalSSM` in ``ssms``, bit for bit.

    Parameters
    ----------
    ssms : dict of str to nn.Module
        The SSMs by adapter name; other modules are left out of the result.

    Returns
    -------
    dict of str to tuple
        ``(a_r, a_c, W_in, W_out)`` per name, as :meth:`DiagonalSSM._projections`; the
        zero-order hold of the real (complex) groups is evaluated on all of them at once where
        they share one dtype and device (else per module).

    Examples
    --------
    >>> a, b = DiagonalSSM(8, 4), DiagonalSSM(8, 3, mode="complex")
    >>> got = projections({"a": a, "b": b})
    >>> all(torch.equal(x, y) for x, y in zip(got["b"], b._projections()) if x is not None)
    True
    """
    mods = {k: m for k, m in ssms.items() if isinstance(m, DiagonalSSM)}
    zoh = {k: [None, None] for k in mods}
    for group, (count, names, hold) in enumerate((("n_real", _REAL, zoh_real),
                                                  ("n_complex", _COMPLEX, zoh_complex))):
        part = {k: m for k, m in mods.items() if getattr(m, count)}
        tensors = [[getattr(m, n) for n in names] for m in part.values()]
        if len(part) < 2 or len({(t.dtype, t.device) for ts in tensors for t in ts}) != 1:
            continue  # nothing to share, or kernels of different dtypes: each its own
        sizes = [getattr(m, count) for m in part.values()]
        held = hold(*(torch.cat(ts) for ts in zip(*tensors, strict=True)))  # (a, f), (sum n,)
        for k, a, f in zip(part, *(t.split(sizes) for t in held), strict=True):
            zoh[k][group] = (a, f)
    return {k: m._projections(zoh=tuple(zoh[k])) for k, m in mods.items()}
