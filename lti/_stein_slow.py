"""The refinement's cheap first step: the residual's slow-mode part, removed in O(n^2).

Near ``rho(A) = 1`` the residual ``R = A X A^T - X + Q`` of the Schur-path solution is the
Schur form's backward error times the large part of ``X`` that the slowest modes carry
(``lti._stein.solve_schur``). That part has the form ``G V^T + V G^T`` with ``V`` an
orthonormal basis of the invariant subspace of the slowest eigenvalues (``A V = V L``):
for such a right-hand side the correction is exactly ``dX = H V^T + V H^T`` with
``A H L^T - H + G = 0``, an n x s Stein-Sylvester equation that the Schur form solves in
O(n^2 s). The part of ``R`` of that form is ``R - (I - V V^T) R (I - V V^T)`` (its
orthogonal projection on the matrices ``G V^T + V G^T``), so ``G = R V - V (V^T R V) / 2``,
and ``R V`` costs four products with n x s blocks: ``R`` itself (4 n^3) is never formed.
Whether it worked is estimated with fixed Gaussian probe vectors (:class:`ResidualProbe`).
"""

from __future__ import annotations

import functools

import numpy as np
import scipy.linalg as sla
from scipy.linalg import blas

from lti._schur import SchurForm

__all__ = [
    "PROBE_COUNT",
    "SLOW_DIM",
    "SLOW_TOL",
    "ResidualProbe",
    "add_low_rank_",
    "invariant_block",
    "slow_correction",
]

PROBE_COUNT = 16  # Gaussian probes of the residual estimate (||R V||_F^2 / 16 ~ ||R||_F^2)
SLOW_DIM = 8  # dimension of the slow invariant subspace (the slowest 8 eigenvalues, pairs whole)
SLOW_TOL = 0.25  # the slow-mode correction is kept when it leaves at most this of the residual


@functools.lru_cache(maxsize=16)
def probe_vectors(n: int) -> np.ndarray:
    """The fixed Gaussian probes (n, ``PROBE_COUNT``), read-only, cached per n."""
    V = np.random.default_rng(1).standard_normal((n, PROBE_COUNT))
    V.flags.writeable = False
    return V


def _nrm(X) -> float:
    """Frobenius norm by BLAS ``nrm2`` (scaled: no overflow of the squares, as
    ``lti._stein.fro_norm``)."""
    x = np.ravel(X)
    return float(blas.dnrm2(x)) if x.size else 0.0


def residual_times(M, X, Q, V) -> np.ndarray:
    """``(M X M^T - X + Q) V`` without forming the residual: ``M (X (M^T V)) - X V + Q V``,
    10 n^2 k flops for k columns. Its rounding error is that of the residual formed in full
    (``eps ||M||^2 ||X||`` relative to ``||V||``). ``Q`` itself, not a factor of it: a
    factor reproduces ``Q`` only to ``16 k eps`` (``lti.lyapunov._psd_low_rank``), which
    for k = 32 is the order of the refinement threshold."""
    k = V.shape[1]
    MtV = M.T @ V
    W = X @ np.hstack([MtV, V])
    return M @ W[:, :k] - W[:, k:] + Q @ V


class ResidualProbe:
    """``R P`` for the fixed probes ``P`` (:func:`probe_vectors`), ``R = M X M^T - X + Q``:
    ``estimate()`` is ``||R P||_F / sqrt(PROBE_COUNT)``, an unbiased estimate of
    ``||R||_F^2`` in the square (``E ||R p||^2 = ||R||_F^2`` for a standard Gaussian
    ``p``); ``ratio(H, V)`` the same estimate for the residual after ``X + H V^T + V H^T``,
    relative to that of ``X``, from the low-rank update alone (O(n^2) more)."""

    def __init__(self, M, X, Q):
        self.M = M
        self.P = probe_vectors(M.shape[0])
        self.MtP = M.T @ self.P
        W = X @ np.hstack([self.MtP, self.P])
        k = self.P.shape[1]
        self.RP = self.M @ W[:, :k] - W[:, k:] + Q @ self.P  # as residual_times
        self.norm = _nrm(self.RP)

    def estimate(self) -> float:
        return self.norm / np.sqrt(self.P.shape[1])

    def ratio(self, H, V) -> float:
        def dx(Y):  # (H V^T + V H^T) Y
            return H @ (V.T @ Y) + V @ (H.T @ Y)

        left = _nrm(self.RP + self.M @ dx(self.MtP) - dx(self.P))
        return left / self.norm if self.norm > 0 else (0.0 if left == 0 else np.inf)


def invariant_block(T, p, s, X, col, leaf):
    """The invariant subspace of the diagonal block ``S = T[p:p+s, p:p+s]`` (s = 1 or 2) of
    the upper quasi-triangular ``T``: ``X[:p+s, col:col+s] = [X1; I]`` with
    ``T[:p, :p] X1 - X1 S + T[:p, p:p+s] = 0``, so ``T [X1; I; 0] = [X1; I; 0] S``; rows
    from ``p + s`` on are left as given (zero). ``X1`` solves the Stein-Sylvester form
    ``T11 X1 S^-1 - X1 + T12 S^-1 = 0`` by the recursion's leaf kernel ``leaf``
    (``lti._stein._leaf_kernel``, compiled or its Python source), with ``S^-1`` padded to
    order 2 by a zero block for s = 1 (its column is then zero): the kernel sees the array
    shapes of the recursion's leaves (no other compiled version); p = 1 by a dense 2x2 solve.
    Raises ``ZeroDivisionError`` (compiled kernel) or gives inf when ``T11`` shares an
    eigenvalue with ``S``."""
    S = T[p : p + s, p : p + s]
    X[p : p + s, col : col + s] = np.eye(s)
    if p == 0:
        return X
    Si = np.linalg.inv(S)
    if p == 1:  # (I kron T11 - S^T kron I) vec(X1) = -vec(T12), order s
        K = T[0, 0] * np.eye(s) - S.T
        X[0, col : col + s] = np.linalg.solve(K, -T[0, p : p + s])
        return X
    T2 = np.zeros((2, 2), order="F")
    T2[:s, :s] = Si.T  # T2^H = S^-1 (real data)
    R = np.zeros((p, 2), order="F")
    R[:, :s] = T[:p, p : p + s] @ Si
    Y = leaf(np.asfortranarray(T[:p, :p]), T2, R, np.empty((p, 2), order="F"))
    X[:p, col : col + s] = Y[:, :s]
    return X


def slow_blocks(T: np.ndarray, ev: np.ndarray, dim: int) -> list[tuple[int, int]]:
    """``(start, size)`` of the diagonal blocks of ``T`` holding the largest eigenvalues in
    modulus (``ev``, in ``T``'s order), complex pairs whole, until ``dim`` are taken."""
    n = T.shape[0]
    blocks, seen, total = [], set(), 0
    for i in np.argsort(-np.abs(ev), kind="stable"):
        i = int(i)
        start = i - 1 if (i > 0 and T[i, i - 1] != 0) else i
        if start in seen:
            continue
        size = 2 if (start + 1 < n and T[start + 1, start] != 0) else 1
        seen.add(start)
        blocks.append((start, size))
        total += size
        if total >= dim:
            break
    return blocks


def slow_correction(M, X, Q, schur: SchurForm, leaf):
    """``(H, V)``: the correction ``dX = H V^T + V H^T`` that removes the part
    ``G V^T + V G^T`` of the residual ``R = M X M^T - X + Q`` on the invariant subspace of
    the ``SLOW_DIM`` slowest eigenvalues (module docstring), or ``None`` when that basis is
    not numerically of full rank or not finite (e.g. nearly repeated eigenvalues). Real data;
    ``leaf``: ``lti._stein._leaf_kernel``, compiled or its Python form. O(n^2 SLOW_DIM)
    flops (plus a copy of ``T[:p, :p]`` per slow block at row p)."""
    T, Z = schur.T, schur.Z
    n = T.shape[0]
    blocks = slow_blocks(T, schur.eigenvalues(), min(SLOW_DIM, n))
    s = sum(size for _, size in blocks)
    Xh = np.zeros((n, s), order="F")
    col = 0
    try:
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            for start, size in blocks:  # a singular system gives inf (seen below) or raises
                invariant_block(T, start, size, Xh, col, leaf)
                col += size
    except (ZeroDivisionError, np.linalg.LinAlgError):
        return None
    if not np.all(np.isfinite(Xh)):
        return None
    Xh /= np.linalg.norm(Xh, axis=0)  # unit columns: R's diagonal then shows near dependence
    Vh, Rq = np.linalg.qr(Xh)
    if not np.min(np.abs(np.diag(Rq))) > 1e-8:
        return None
    L, U = sla.schur(Vh.T @ (T @ Vh), output="real")  # T Vh = Vh L0, L0 = U L U^T
    Vh = Vh @ U
    V = Z @ Vh  # orthonormal, M V = V L (to the Schur form's backward error)
    RV = residual_times(M, X, Q, V)
    G = RV - V @ (0.5 * (V.T @ RV))
    Gh = np.asfortranarray(Z.T @ G)
    Hh = leaf(T, np.asfortranarray(L), Gh, np.empty((n, s), order="F"))  # T Hh L^T - Hh + Gh = 0
    H = Z @ Hh
    if not np.all(np.isfinite(H)):
        return None
    return H, V


def add_low_rank_(X: np.ndarray, H: np.ndarray, V: np.ndarray, mirror) -> np.ndarray:
    """In place: ``X += H V^T + V H^T`` for symmetric ``X`` by one ``dsyr2k`` on the upper
    triangle, mirrored (``mirror``: ``lti._stein.mirror_upper_``): exactly symmetric."""
    target = X if X.flags.f_contiguous else X.T  # X symmetric: X.T is the same matrix
    out = blas.dsyr2k(1.0, H, V, beta=1.0, c=target, lower=0, overwrite_c=1)
    if out is not target:
        target[...] = out
    mirror(target)
    return X
