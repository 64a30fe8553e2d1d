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

from lti._jit import kernel
from lti._schur import SchurForm

__all__ = [
    "PROBE_COUNT",
    "SLOW_DIM",
    "SLOW_TOL",
    "ResidualProbe",
    "add_low_rank_",
    "invariant_basis",
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


def _invariant_basis_py(T, p, s, X, col):
    """The invariant subspace of the diagonal block ``S = T[p:p+s, p:p+s]`` (s = 1 or 2) of
    the upper quasi-triangular ``T`` (F order): ``X[:p+s, col:col+s] = [X1; I]`` with
    ``T[:p, :p] X1 - X1 S + T[:p, p:p+s] = 0``, so ``T [X1; I; 0] = [X1; I; 0] S``; rows
    from ``p + s`` on are left as given (zero). (The whole ``X`` and a column offset, not a
    slice: a one-column slice would be typed C-ordered and compile another version.) Back
    substitution by the 1x1 / 2x2 diagonal blocks ``D`` of ``T[:p, :p]`` from the last:
    ``D Y - Y S = C`` (order r s <= 4, Gaussian elimination with partial pivoting), the rows
    above updated by column operations. Those columns of ``X`` (F order) are overwritten.
    Compiled by numba (:data:`invariant_basis`); as
    plain Python it is a slow reference for the tests."""
    M = np.zeros((4, 4))
    b = np.zeros(4)
    for c in range(s):
        for e in range(p):
            X[e, col + c] = -T[e, p + c]  # the right-hand side C, replaced by X1 from the bottom
        for e in range(s):
            X[p + e, col + c] = 1.0 if e == c else 0.0
    i = p
    while i > 0:
        i0 = i - 2 if (i >= 2 and T[i - 1, i - 2] != 0) else i - 1
        r = i - i0
        m = r * s
        for a in range(r):  # M vec(Y) = vec(C), vec by columns: Y[a, c] at a + r c
            for c in range(s):
                b[a + r * c] = X[i0 + a, col + c]
                for bb in range(r):
                    for d in range(s):
                        M[a + r * c, bb + r * d] = (T[i0 + a, i0 + bb] if c == d else 0.0) - (
                            T[p + d, p + c] if a == bb else 0.0)
        for q in range(m):  # Gaussian elimination, partial pivoting
            piv = q
            for e in range(q + 1, m):
                if abs(M[e, q]) > abs(M[piv, q]):
                    piv = e
            if piv != q:
                for e in range(m):
                    tmp = M[q, e]
                    M[q, e] = M[piv, e]
                    M[piv, e] = tmp
                tmp = b[q]
                b[q] = b[piv]
                b[piv] = tmp
            for e in range(q + 1, m):
                f = M[e, q] / M[q, q]
                for g in range(q + 1, m):
                    M[e, g] -= f * M[q, g]
                b[e] -= f * b[q]
        for q in range(m - 1, -1, -1):
            acc = b[q]
            for g in range(q + 1, m):
                acc -= M[q, g] * b[g]
            b[q] = acc / M[q, q]
        for a in range(r):
            for c in range(s):
                X[i0 + a, col + c] = b[a + r * c]
        for c in range(s):  # C[:i0] -= T[:i0, i0:i] Y
            for a in range(r):
                t = X[i0 + a, col + c]
                for e in range(i0):
                    X[e, col + c] -= T[e, i0 + a] * t
        i = i0
    return X


invariant_basis = kernel(_invariant_basis_py, error_model="numpy")  # 1/0: inf, not an error


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


def slow_correction(M, X, Q, schur: SchurForm, basis, leaf):
    """``(H, V)``: the correction ``dX = H V^T + V H^T`` that removes the part
    ``G V^T + V G^T`` of the residual ``R = M X M^T - X + Q`` on the invariant subspace of
    the ``SLOW_DIM`` slowest eigenvalues (module docstring), or ``None`` when that basis is
    not numerically of full rank or not finite (e.g. nearly repeated eigenvalues). Real data;
    ``basis`` / ``leaf``: the compiled kernels (:data:`invariant_basis`,
    ``lti._stein._leaf_kernel``) or their Python forms. O(n^2 SLOW_DIM) flops."""
    T, Z = schur.T, schur.Z
    n = T.shape[0]
    blocks = slow_blocks(T, schur.eigenvalues(), min(SLOW_DIM, n))
    s = sum(size for _, size in blocks)
    Xh = np.zeros((n, s), order="F")
    col = 0
    with np.errstate(divide="ignore", invalid="ignore"):  # a singular block: inf, seen below
        for start, size in blocks:
            basis(T, start, size, Xh, col)
            col += size
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
