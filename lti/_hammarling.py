"""Hammarling's square-root method: the factor ``U`` (``X = U^H U``) of
``A^H X A - X + C^H C = 0`` for triangular or diagonal ``A``, without forming ``X``.

Also the structured QR that makes the complex factor of a real problem real. The public
entry point is :func:`lti.lyapunov.lyapunov_factor`.
"""

from __future__ import annotations

import numpy as np
import scipy.linalg as sla
from scipy.linalg import blas, lapack

from lti._schur import ct
from lti.exceptions import SolverError

__all__ = ["compress_rows", "hammarling_dense", "hammarling_diagonal", "real_gram_factor"]

_PANEL = 64  # steps between re-packing the active block in Hammarling's method


def _scaled_unit(c: np.ndarray):
    """``(||c||, c / ||c||)`` without under/overflow (``(0, None)`` for ``c = 0``).

    Hammarling's reflection needs ``||[c / nu; alpha]|| = 1`` to working accuracy even
    when ``c`` has decayed to subnormal size; a plain ``sqrt(sum c^2)`` loses all digits
    there and corrupts the remaining right-hand side.
    """
    cmax = float(np.max(np.abs(c), initial=0.0))
    if cmax == 0.0:
        return 0.0, None
    if np.iscomplexobj(c):  # complex / real would form 1 / cmax: overflow for subnormal cmax
        cs = np.empty_like(c)
        cs.real, cs.imag = c.real / cmax, c.imag / cmax
    else:
        cs = c / cmax
    nrm = float(np.sqrt(np.real(np.vdot(cs, cs))))
    return cmax * nrm, cs / nrm


def hammarling_dense(A: np.ndarray, C: np.ndarray) -> np.ndarray:
    """Hammarling's method for ``A^H X A - X + C^H C = 0``, ``A`` upper triangular.

    Returns upper triangular ``U`` (n, n) with ``X = U^H U``. Row j of ``U`` is found from
    the 1x1 leading block, a shifted triangular solve with the trailing block of ``A^H``
    and a Householder update that keeps the right-hand side factor at m rows.
    """
    n = A.shape[0]
    m = C.shape[0]
    dtype = np.result_type(A, C, np.float64)
    A = A.astype(dtype, copy=False)
    C = np.array(C, dtype=dtype, order="F", copy=True)
    # a column of the right-hand side factor below this level is dropped: it changes
    # C^H C by less than 1e-3 eps relative, so the residual is unaffected
    negligible = 1e-3 * np.finfo(np.float64).eps * _scaled_unit(C.ravel())[0]
    WH = np.asfortranarray(ct(A))  # lower triangular A^H
    U = np.zeros((n, n), dtype=dtype)
    trsv, trmv = (blas.ztrsv, blas.ztrmv) if np.iscomplexobj(A) else (blas.dtrsv, blas.dtrmv)
    start, W, Wdiag = 0, None, None
    tiny = 1e-290
    for j in range(n):
        alpha = A[j, j]
        c = C[:, j]
        cn, chat = _scaled_unit(c)
        s = np.sqrt(max(1.0 - abs(alpha) ** 2, 0.0))
        if j == n - 1:
            U[j, j] = cn / s
            break
        if cn <= negligible:
            continue
        nu = cn / s
        chat_s = chat * s  # c / nu
        a = np.conj(A[j, j + 1 :])
        C2 = C[:, j + 1 :]
        rhs = -(ct(C2) @ chat_s) - (alpha * nu) * a
        # active block of A^H: rows/cols j+1.. ; re-pack a contiguous copy every _PANEL steps
        if W is None or j + 1 - start >= _PANEL:
            start = j + 1
            W = np.asfortranarray(WH[start:, start:])
            Wdiag = W.reshape(-1, order="F")[:: W.shape[0] + 1]
        off = j + 1 - start
        K = W.shape[0]
        if abs(alpha) < tiny:
            u = -rhs
            AHu = None
        else:
            x = np.zeros(K, dtype=dtype)
            x[off:] = rhs / alpha
            d0 = Wdiag.copy()
            Wdiag -= 1.0 / alpha  # (A2^H - I/alpha) u = rhs/alpha
            x = trsv(W, x, lower=1, overwrite_x=1)
            Wdiag[:] = d0
            u = x[off:]
            AHu = (rhs + u) / alpha if abs(alpha) >= 0.5 else None
        if AHu is None:
            x = np.zeros(K, dtype=dtype)
            x[off:] = u
            AHu = trmv(W, x, lower=1, overwrite_x=1)[off:]
        U[j, j] = nu
        U[j, j + 1 :] = np.conj(u)
        y = nu * a + AHu
        # Householder H with H w = beta e_last, w = [c / nu; alpha] (unit norm);
        # the first m rows of H [C2; y^H] are the new right-hand side factor.
        w = np.empty(m + 1, dtype=dtype)
        w[:m], w[m] = chat_s, alpha
        phase = alpha / abs(alpha) if abs(alpha) > tiny else 1.0
        v = w.copy()
        v[m] += phase * np.linalg.norm(w)
        vv = np.real(np.vdot(v, v))
        coef = (2.0 / vv) * (np.conj(v[:m]) @ C2 + np.conj(v[m]) * np.conj(y))  # v^H M
        C[:, j + 1 :] = C2 - np.outer(v[:m], coef)
    return U


def hammarling_diagonal(d: np.ndarray, C: np.ndarray) -> np.ndarray:
    """Hammarling's method for diagonal ``A = diag(d)``: ``A^H X A - X + C^H C = 0``.

    Same recursion as :func:`hammarling_dense` with elementwise solves; returns upper
    triangular ``U`` with ``X = U^H U``, real when ``d`` and ``C`` are real.
    """
    n = d.size
    m = C.shape[0]
    dtype = np.result_type(d, C, np.float64)
    C = np.array(C, dtype=dtype, order="F", copy=True)
    # a column of the right-hand side factor below this level is dropped: it changes
    # C^H C by less than 1e-3 eps relative, so the residual is unaffected
    negligible = 1e-3 * np.finfo(np.float64).eps * _scaled_unit(C.ravel())[0]
    U = np.zeros((n, n), dtype=dtype)
    dc = np.conj(d)
    tiny = 1e-290
    for j in range(n):
        alpha = d[j]
        c = C[:, j]
        cn, chat = _scaled_unit(c)
        s = np.sqrt(max(1.0 - abs(alpha) ** 2, 0.0))
        if j == n - 1:
            U[j, j] = cn / s
            break
        if cn <= negligible:
            continue
        nu = cn / s
        chat_s = chat * s
        C2 = C[:, j + 1 :]
        rhs = -(ct(C2) @ chat_s)
        u = rhs / (alpha * dc[j + 1 :] - 1.0)
        y = dc[j + 1 :] * u
        U[j, j] = nu
        U[j, j + 1 :] = np.conj(u)
        w = np.empty(m + 1, dtype=dtype)
        w[:m], w[m] = chat_s, alpha
        phase = alpha / abs(alpha) if abs(alpha) > tiny else 1.0
        v = w.copy()
        v[m] += phase * np.linalg.norm(w)
        vv = np.real(np.vdot(v, v))
        coef = (2.0 / vv) * (np.conj(v[:m]) @ C2 + np.conj(v[m]) * np.conj(y))
        C[:, j + 1 :] = C2 - np.outer(v[:m], coef)
    return U


def compress_rows(C: np.ndarray) -> np.ndarray:
    """Return ``R`` with ``R^H R = C^H C`` and at most n rows."""
    m, n = C.shape
    if m <= n:
        return C
    return sla.qr(C, mode="r", check_finite=False)[0][:n]


def real_gram_factor(M: np.ndarray) -> np.ndarray:
    """Upper triangular real ``R`` with ``R^T R = M^H M`` for complex quasi-upper-triangular
    ``M`` (nonzeros at most one below the diagonal) whose Gram matrix is real.

    ``M^H M = Mr^T Mr + Mi^T Mi``: one Givens rotation per subdiagonal entry makes ``Mr``
    and ``Mi`` triangular (row rotations leave each Gram matrix unchanged), then LAPACK
    ``dtpqrt`` computes the QR factor of the stacked triangles in about ``n^3 / 3`` flops.
    """
    n = M.shape[0]
    parts = []
    for P in (M.real, M.imag):
        P = np.array(P, order="F", copy=True)
        if n > 1:
            k = np.flatnonzero(np.diag(P, -1)) + 1
            if k.size:
                x, y = P[k - 1, k - 1], P[k, k - 1]
                r = np.hypot(x, y)
                c, s = x / r, y / r
                r0, r1 = P[k - 1].copy(), P[k].copy()
                P[k - 1] = c[:, None] * r0 + s[:, None] * r1
                P[k] = -s[:, None] * r0 + c[:, None] * r1
        parts.append(np.triu(P))
    if not np.any(parts[1]):
        return parts[0]
    R, _, _, info = lapack.dtpqrt(n, min(64, n), parts[0], parts[1], overwrite_a=1, overwrite_b=1)
    if info != 0:  # pragma: no cover - LAPACK argument errors only
        raise SolverError(f"LAPACK dtpqrt failed with info={info}")
    return np.triu(R)
