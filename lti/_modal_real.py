"""The real block-diagonal realisation of a diagonal (modal) system, real or complex.

:meth:`lti.DiscreteLTI.from_diagonal` documents the mapping; this module holds its body so
that :mod:`lti.system` stays within the layout limit.
"""

from __future__ import annotations

import numpy as np
import scipy.linalg as sla

from lti._validation import as_float_matrix, as_float_vector
from lti.exceptions import InvalidArgumentError, ShapeError

__all__ = ["real_modal_realisation"]


def real_modal_realisation(a, B, C):
    """``(A, B, C)`` real for ``diag(a)``, ``B``, ``C`` (see :meth:`DiscreteLTI.from_diagonal`)."""
    a = as_float_vector("a", a, allow_complex=True)
    n = a.size
    Bm = as_float_matrix("B", B, allow_complex=True)
    Cm = as_float_matrix("C", C, allow_complex=True)
    if Bm.shape[0] != n:
        raise ShapeError(f"`B` must have n = {n} rows (len(a) = {n}); got {Bm.shape}")
    if Cm.shape[1] != n:
        raise ShapeError(f"`C` must have n = {n} columns (len(a) = {n}); got {Cm.shape}")
    if not (np.iscomplexobj(a) or np.iscomplexobj(Bm) or np.iscomplexobj(Cm)):
        return np.diag(a), Bm, Cm
    a = a.astype(np.complex128)
    Bm, Cm = Bm.astype(np.complex128), Cm.astype(np.complex128)
    tol = 1e-12
    bscale = max(float(np.max(np.abs(Bm), initial=0.0)), 1e-300)
    cscale = max(float(np.max(np.abs(Cm), initial=0.0)), 1e-300)
    real_mode = np.abs(a.imag) <= tol * np.maximum(1.0, np.abs(a))
    used = np.zeros(n, dtype=bool)
    blocks_A, rows_B, cols_C = [], [], []
    s2 = np.sqrt(2.0)
    for i in range(n):
        if used[i]:
            continue
        used[i] = True
        b, c = Bm[i], Cm[:, i]
        if real_mode[i]:
            if np.any(np.abs(b.imag) > tol * bscale) or np.any(np.abs(c.imag) > tol * cscale):
                raise InvalidArgumentError(
                    f"real mode `a[{i}]` = {a[i].real:.6g} needs a real row `B[{i}]` and "
                    f"column `C[:, {i}]`"
                )
            blocks_A.append(np.array([[a[i].real]]))
            rows_B.append(b.real[None, :])
            cols_C.append(c.real[:, None])
            continue
        cand = np.flatnonzero(
            ~used
            & (np.abs(a - np.conj(a[i])) <= tol * max(1.0, abs(a[i])))
            & np.all(np.abs(Bm - np.conj(b)[None, :]) <= tol * bscale, axis=1)
            & np.all(np.abs(Cm - np.conj(c)[:, None]) <= tol * cscale, axis=0)
        )
        if cand.size == 0:
            raise InvalidArgumentError(
                f"complex mode `a[{i}]` = {a[i]:.6g} has no conjugate partner with "
                "conjugate row of `B` and column of `C`; the system would not be real "
                "(pass both a and conj(a), see the docstring)"
            )
        used[cand[0]] = True
        lam = a[i]
        blocks_A.append(np.array([[lam.real, lam.imag], [-lam.imag, lam.real]]))
        rows_B.append(s2 * np.vstack([b.real, -b.imag]))
        cols_C.append(s2 * np.column_stack([c.real, c.imag]))
    A = sla.block_diag(*blocks_A) if blocks_A else np.zeros((0, 0))
    Br = np.vstack(rows_B) if rows_B else np.zeros((0, Bm.shape[1]))
    Cr = np.hstack(cols_C) if cols_C else np.zeros((Cm.shape[0], 0))
    return A, Br, Cr
