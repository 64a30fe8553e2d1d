"""Zero-order-hold discretisation: the body of :func:`lti.system.discretize_zoh` (which
documents it), here so that :mod:`lti.system` stays within the layout limit."""

from __future__ import annotations

import numpy as np
import scipy.linalg as sla

from lti._validation import as_float_matrix, as_float_vector, check_not_masked, check_square
from lti.exceptions import ShapeError, SolverError
from lti.lowrank import is_sparse

__all__ = ["zoh"]


def _check_representable(*arrays) -> None:
    if not all(np.isfinite(X).all() for X in arrays):
        raise SolverError(
            "exp(dt A) overflows float64: `A` has modes that grow beyond 1e308 within one "
            "sampling period (max Re(dt lambda) > ~709); use a smaller `dt`"
        )


def zoh(A, B, dt: float):
    """``(Ad, Bd)`` of :func:`lti.system.discretize_zoh` for a validated ``dt > 0``."""
    check_not_masked("A", A)  # (np.asarray below would read the values under a mask)
    check_not_masked("B", B)
    A_arr = A if is_sparse(A) else np.asarray(A)  # sparse: the typed error below
    if A_arr.ndim == 1:
        a = as_float_vector("A", A_arr, allow_complex=True)
        diag_input = True
    else:
        A_m = as_float_matrix("A", A_arr, allow_complex=True)
        check_square("A", A_m)
        diag_input = not np.any(A_m - np.diag(np.diag(A_m)))
        a = np.diag(A_m).copy()
    n = a.size
    B_arr = np.asarray(B)
    vec_b = B_arr.ndim == 1
    Bm = (
        as_float_vector("B", B_arr, allow_complex=True)[:, None]
        if vec_b
        else as_float_matrix("B", B_arr, allow_complex=True)
    )
    if Bm.shape[0] != n:
        raise ShapeError(f"`B` must have n = {n} rows; got shape {B_arr.shape}")
    if diag_input:
        with np.errstate(over="ignore"):
            ad = np.exp(dt * a)
            safe = np.where(a == 0, 1.0, a)
            g = np.where(a == 0, dt, np.expm1(dt * a) / safe)  # (n,)
        _check_representable(ad, g)
        Bd = g[:, None] * Bm
        Bd = Bd[:, 0] if vec_b else Bd
        Ad = ad if A_arr.ndim == 1 else np.diag(ad)
        return Ad, Bd
    m = Bm.shape[1]
    M = np.zeros((n + m, n + m), dtype=np.result_type(A_m, Bm))
    M[:n, :n] = A_m * dt
    M[:n, n:] = Bm * dt
    with np.errstate(over="ignore", invalid="ignore"):
        E = sla.expm(M)
    _check_representable(E)
    Ad, Bd = E[:n, :n], E[:n, n:]
    return Ad, (Bd[:, 0] if vec_b else Bd)
