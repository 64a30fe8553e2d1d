"""Stein equations ``A X A^H - X + Q = 0`` for the solution ``X`` itself.

Recursive blocked Bartels-Stewart (Kitagawa; Jonsson & Kagstrom's recursion) on the real
Schur form, with one residual-triggered refinement step, and the squared Smith iteration
for ``X``. The public entry point is :func:`lti.lyapunov.solve_discrete_lyapunov`.
"""

from __future__ import annotations

import numpy as np
from scipy.linalg import blas

from lti._schur import SchurForm, ct, real_schur, to_complex_schur
from lti._validation import check_stable, spectral_radius, symmetrize_
from lti.exceptions import SolverError

__all__ = ["REFINE_RTOL", "SteinRecursion", "smith_solve", "solve_schur"]

_LEAF = 48  # leaf size of the recursive Stein solvers


class SteinRecursion:
    """Recursive blocked solver for ``T X T^H - X + Q = 0`` on a (quasi-)triangular ``T``.

    Index ranges ``[lo, hi)`` of ``T`` are bisected without cutting 2x2 blocks; couplings
    between halves are matrix products (level-3). At the leaves (at most ``_LEAF``
    states) the small diagonal blocks are brought to complex triangular form once
    (cached; unitary, so backward stable) and the leaf equation is solved column by
    column with triangular solves.
    """

    def __init__(self, T: np.ndarray):
        self.T = T
        self.real = not np.iscomplexobj(T)
        self._leaf_forms: dict[tuple[int, int], tuple[np.ndarray, np.ndarray | None]] = {}

    def _split(self, lo: int, hi: int) -> int:
        h = lo + (hi - lo) // 2
        if self.T[h, h - 1] != 0:
            h += 1
        return h

    def _leaf_form(self, lo: int, hi: int):
        key = (lo, hi)
        form = self._leaf_forms.get(key)
        if form is None:
            Tb = self.T[lo:hi, lo:hi]
            if self.real and np.any(np.diag(Tb, -1)):
                Tc, G = to_complex_schur(Tb, np.eye(hi - lo))[:2]
            else:
                Tc, G = Tb.astype(np.complex128), None
            form = (np.asfortranarray(Tc), G)
            self._leaf_forms[key] = form
        return form

    def leaf(self, r1: tuple[int, int], r2: tuple[int, int], R: np.ndarray) -> np.ndarray:
        """``T1 Y T2^H - Y + R = 0`` with ``T1 = T[r1, r1]``, ``T2 = T[r2, r2]`` small."""
        T1, G1 = self._leaf_form(*r1)
        T2, G2 = self._leaf_form(*r2)
        k1, k2 = R.shape
        Rt = R.astype(np.complex128)
        if G1 is not None:
            Rt = ct(G1) @ Rt
        if G2 is not None:
            Rt = Rt @ G2
        Y = np.empty((k1, k2), dtype=np.complex128, order="F")
        trsv = blas.ztrsv
        T2c = T2.conj()
        for j in range(k2 - 1, -1, -1):
            rhs = -Rt[:, j]
            if j + 1 < k2:
                rhs = rhs - T1 @ (Y[:, j + 1 :] @ T2c[j, j + 1 :])
            M = T2c[j, j] * T1  # F-ordered copy
            M.reshape(-1, order="F")[:: k1 + 1] -= 1.0
            Y[:, j] = trsv(M, rhs, overwrite_x=1)
        if G1 is not None:
            Y = G1 @ Y
        if G2 is not None:
            Y = Y @ ct(G2)
        return Y.real if self.real else Y

    def sylvester(self, r1: tuple[int, int], r2: tuple[int, int], R: np.ndarray) -> np.ndarray:
        """``T1 Y T2^H - Y + R = 0`` on the ranges ``r1``, ``r2`` of ``T``."""
        (lo1, hi1), (lo2, hi2) = r1, r2
        k1, k2 = hi1 - lo1, hi2 - lo2
        T = self.T
        if k1 <= _LEAF and k2 <= _LEAF:
            return self.leaf(r1, r2, R)
        if k1 >= k2:
            h = self._split(lo1, hi1)
            Y2 = self.sylvester((h, hi1), r2, R[h - lo1 :])
            R1 = R[: h - lo1] + T[lo1:h, h:hi1] @ (Y2 @ ct(T[lo2:hi2, lo2:hi2]))
            Y1 = self.sylvester((lo1, h), r2, R1)
            return np.vstack([Y1, Y2])
        h = self._split(lo2, hi2)
        Y2 = self.sylvester(r1, (h, hi2), R[:, h - lo2 :])
        R1 = R[:, : h - lo2] + (T[lo1:hi1, lo1:hi1] @ Y2) @ ct(T[lo2:h, h:hi2])
        Y1 = self.sylvester(r1, (lo2, h), R1)
        return np.hstack([Y1, Y2])

    def symmetric(self, r: tuple[int, int], Q: np.ndarray) -> np.ndarray:
        """``T_r X T_r^H - X + Q = 0`` for Hermitian ``Q`` on the range ``r`` of ``T``."""
        lo, hi = r
        if hi - lo <= _LEAF:
            X = self.leaf(r, r, Q)
            return 0.5 * (X + ct(X))
        h = self._split(lo, hi)
        k = h - lo
        T11, T12, T22 = self.T[lo:h, lo:h], self.T[lo:h, h:hi], self.T[h:hi, h:hi]
        X22 = self.symmetric((h, hi), Q[k:, k:])
        W = T12 @ X22
        X12 = self.sylvester((lo, h), (h, hi), Q[:k, k:] + W @ ct(T22))
        V = (T11 @ X12) @ ct(T12)
        Q11 = Q[:k, :k] + V + ct(V) + W @ ct(T12)
        X11 = self.symmetric((lo, h), 0.5 * (Q11 + ct(Q11)))
        X = np.empty((hi - lo, hi - lo), dtype=X22.dtype)
        X[:k, :k], X[:k, k:], X[k:, :k], X[k:, k:] = X11, X12, ct(X12), X22
        return X



REFINE_RTOL = 1e-13  # one refinement step when ||A X A^H - X + Q||_F exceeds this * ||Q||_F


def solve_schur(
    M: np.ndarray, Q: np.ndarray, schur: SchurForm | None = None, *, refine: bool = False
) -> np.ndarray:
    n = M.shape[0]
    if n == 0:
        return np.zeros((0, 0), dtype=np.result_type(M, Q))
    if schur is None:
        schur = real_schur(M)
    check_stable("A", schur.T, rho=float(np.max(np.abs(schur.eigenvalues()))))
    T, Z = schur.T, schur.Z
    if np.iscomplexobj(Q) and not np.iscomplexobj(T):
        T, Z = schur.complex_form()
    recursion = SteinRecursion(T)

    def solve(R):
        Y = recursion.symmetric((0, n), symmetrize_(ct(Z) @ R @ Z))
        return symmetrize_(Z @ Y @ ct(Z))

    X = solve(Q)
    if refine:
        R = symmetrize_((M @ X) @ ct(M) - X + Q)
        if np.linalg.norm(R) > REFINE_RTOL * np.linalg.norm(Q):
            X = symmetrize_(X + solve(R))
    return X


def smith_solve(M: np.ndarray, Q: np.ndarray, *, max_iter: int = 100) -> np.ndarray:
    X = Q.copy()
    Ak = M.copy()
    eps = np.finfo(np.float64).eps
    for _ in range(max_iter):
        dX = Ak @ X @ ct(Ak)
        X = X + dX
        if not np.all(np.isfinite(X)):
            raise SolverError(
                'method="smith" overflowed (the powers of `A` grow before they decay: '
                f"spectral radius {spectral_radius(M):.6g}); use method=\"schur\""
            )
        if np.linalg.norm(dX) <= eps * np.linalg.norm(X):
            return X
        Ak = Ak @ Ak
    raise SolverError(
        f'method="smith" did not converge in {max_iter} doublings (spectral radius '
        f"{spectral_radius(M):.6g})"
    )
