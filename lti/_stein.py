"""Stein equations ``A X A^H - X + Q = 0`` for the solution ``X`` itself.

Recursive blocked Bartels-Stewart (Kitagawa; Jonsson & Kagstrom's recursion) on the real
Schur form, with one residual-triggered refinement step (by default first the O(n^2)
slow-mode correction of :mod:`lti._stein_slow`), and the squared Smith iteration for ``X``.
The public entry point is :func:`lti.lyapunov.solve_discrete_lyapunov`.
"""

from __future__ import annotations

import functools

import numpy as np
from scipy.linalg import blas

from lti._hammarling import schur_form_factor
from lti._jit import enabled, kernel
from lti._schur import SchurForm, complex_triangle, ct, real_schur
from lti._stein_slow import SLOW_TOL, ResidualProbe, add_low_rank_, slow_correction
from lti._validation import check_stable, spectral_radius, symmetrize_
from lti.exceptions import SolverError

__all__ = ["REFINE_RTOL", "SteinRecursion", "congruence", "fro_norm", "smith_solve", "solve_schur"]

_LEAF = 64  # leaf size of the recursive Stein solvers (n = 1024: 64-state leaves)
_LEAF_COMPILED = 48  # with the compiled leaf kernel (capped by _LEAF)


class SteinRecursion:
    """Recursive blocked solver for ``T X T^H - X + Q = 0`` on a (quasi-)triangular ``T``.

    Index ranges ``[lo, hi)`` of ``T`` are bisected without cutting 2x2 blocks; couplings
    between halves are matrix products (level-3). At the leaves (at most ``_LEAF``
    states; ``_LEAF_COMPILED`` with the compiled kernel) the leaf equation is solved by
    :data:`_leaf_kernel` (numba, in ``T``'s own real or complex arithmetic) when compiled
    kernels are enabled (``lti._jit``); otherwise the small diagonal blocks are brought
    to complex triangular form once (cached; one unitary 2x2 rotation per complex pair,
    applied to the leaf's right-hand side and solution as batched 2x2 products) and the
    leaf equation is solved column by column with triangular solves (BLAS).
    """

    def __init__(self, T: np.ndarray):
        self.T = T
        self.real = not np.iscomplexobj(T)
        self._leaf_forms: dict[tuple[int, int], tuple[np.ndarray, np.ndarray | None]] = {}
        self._kernel = _leaf_kernel.compiled()  # None: the NumPy leaves below
        self._blocks: dict[tuple[int, int], np.ndarray] = {}
        self.leaf_size = _LEAF if self._kernel is None else min(_LEAF, _LEAF_COMPILED)

    def _split(self, lo: int, hi: int) -> int:
        h = lo + (hi - lo) // 2
        if self.T[h, h - 1] != 0:
            h += 1
        return h

    def _leaf_form(self, lo: int, hi: int):
        """``(Tc, pairs, G, Gh)``: the leaf block in complex triangular form
        ``Tc = Gf^H T Gf`` (F order; ``Gf`` one 2x2 rotation ``G_k^H`` per complex pair on
        the index pairs ``pairs``, :func:`complex_triangle`; ``Gh = G^H``), or
        ``pairs = None`` when the block is triangular already."""
        key = (lo, hi)
        form = self._leaf_forms.get(key)
        if form is None:
            Tb = self.T[lo:hi, lo:hi]
            if self.real and np.any(np.diag(Tb, -1)):
                Tc, idx, G = complex_triangle(Tb)
                form = (np.asfortranarray(Tc), np.stack([idx - 1, idx], axis=1), G,
                        np.conj(np.swapaxes(G, 1, 2)))
            else:
                form = (np.asfortranarray(Tb.astype(np.complex128)), None, None, None)
            self._leaf_forms[key] = form
        return form

    def _block(self, lo: int, hi: int) -> np.ndarray:
        """The diagonal block ``T[lo:hi, lo:hi]`` in F order (cached) for the kernel."""
        B = self._blocks.get((lo, hi))
        if B is None:
            B = self._blocks[(lo, hi)] = np.asfortranarray(self.T[lo:hi, lo:hi])
        return B

    def leaf(self, r1: tuple[int, int], r2: tuple[int, int], R: np.ndarray) -> np.ndarray:
        """``T1 Y T2^H - Y + R = 0`` with ``T1 = T[r1, r1]``, ``T2 = T[r2, r2]`` small:
        by the compiled kernel in ``T``'s own arithmetic when numba is enabled, else by
        the complex triangular form and a column loop of BLAS calls (NumPy). A block of
        one row or column (n = 1) takes the NumPy path: numba would type it as C-ordered
        and compile another specialization (seconds) for a trivial solve."""
        if self._kernel is not None and min(R.shape) > 1:
            dtype = np.result_type(self.T, R)
            T1, T2 = self._block(*r1), self._block(*r2)
            if T1.dtype != dtype:
                T1, T2 = T1.astype(dtype, order="F"), T2.astype(dtype, order="F")
            Y = np.empty(R.shape, dtype=dtype, order="F")
            return self._kernel(T1, T2, np.asfortranarray(R, dtype=dtype), Y)
        return self._leaf_numpy(r1, r2, R)

    def _leaf_numpy(self, r1: tuple[int, int], r2: tuple[int, int], R: np.ndarray) -> np.ndarray:
        T1, p1, G1, G1h = self._leaf_form(*r1)
        T2, p2, G2, G2h = self._leaf_form(*r2)
        k1, k2 = R.shape
        Rt = R.astype(np.complex128)  # Gf1^H R Gf2 by batched 2x2 rotations (O(k^2))
        if p1 is not None:
            Rt[p1] = G1 @ Rt[p1]
        if p2 is not None:
            Rt[:, p2] = (Rt[:, p2].transpose(1, 0, 2) @ G2h).transpose(1, 0, 2)
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
        if p1 is not None:  # Gf1 Y Gf2^H
            Y[p1] = G1h @ Y[p1]
        if p2 is not None:
            Y[:, p2] = (Y[:, p2].transpose(1, 0, 2) @ G2).transpose(1, 0, 2)
        return Y.real if self.real else Y

    def sylvester(self, r1: tuple[int, int], r2: tuple[int, int], R: np.ndarray) -> np.ndarray:
        """``T1 Y T2^H - Y + R = 0`` on the ranges ``r1``, ``r2`` of ``T``."""
        (lo1, hi1), (lo2, hi2) = r1, r2
        k1, k2 = hi1 - lo1, hi2 - lo2
        T = self.T
        if k1 <= self.leaf_size and k2 <= self.leaf_size:
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
        if hi - lo <= self.leaf_size:
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


def _leaf_kernel_py(T1, T2, R, Y):
    """``T1 Y T2^H - Y + R = 0`` for upper (quasi-)triangular ``T1`` (k1 x k1, F order) and
    ``T2`` (k2 x k2), real or complex, in their own arithmetic (a real block keeps its 2x2
    blocks: no complex form). Bartels-Stewart by the 1x1 / 2x2 diagonal blocks ``S`` of
    ``T2`` from the last column; in each block column ``T1 Y_J S^H - Y_J = C`` by the
    diagonal blocks of ``T1`` from the last row, each a dense system of order 1, 2 or 4
    (Gaussian elimination, partial pivoting), the rows above updated by column operations
    (axpy form: vectorizes without reassociation). ``Y`` (F order) is overwritten and
    returned. Compiled by numba (:data:`_leaf_kernel`); as plain Python it is a slow
    line-by-line reference for the tests."""
    k1 = T1.shape[0]
    k2 = T2.shape[0]
    zero = np.zeros(1, dtype=Y.dtype)[0]
    w = np.zeros(k1, dtype=Y.dtype)
    C = np.zeros((2, k1), dtype=Y.dtype)  # C[c]: the right-hand side of column j0 + c
    M = np.zeros((4, 4), dtype=Y.dtype)
    b = np.zeros(4, dtype=Y.dtype)
    Zs = np.zeros((2, 2), dtype=Y.dtype)
    j = k2
    while j > 0:
        j0 = j - 2 if (j >= 2 and T2[j - 1, j - 2] != 0) else j - 1
        s = j - j0
        for c in range(s):  # C[c] = -R[:, j0 + c] - T1 @ (Y[:, j:] @ conj(T2[j0 + c, j:]))
            for i in range(k1):
                w[i] = zero
            for col in range(j, k2):
                t = np.conj(T2[j0 + c, col])
                for i in range(k1):
                    w[i] += Y[i, col] * t
            for i in range(k1):
                C[c, i] = -R[i, j0 + c]
            for p in range(k1):
                t = w[p]
                for i in range(min(p + 2, k1)):
                    C[c, i] -= T1[i, p] * t
        i = k1
        while i > 0:  # T1 Y_J S^H - Y_J = C by the row blocks of T1, from the last
            i0 = i - 2 if (i >= 2 and T1[i - 1, i - 2] != 0) else i - 1
            r = i - i0
            m = r * s
            for a in range(r):
                for c in range(s):
                    b[a + r * c] = C[c, i0 + a]
                    for bb in range(r):
                        t = T1[i0 + a, i0 + bb]
                        for d in range(s):
                            M[a + r * c, bb + r * d] = t * np.conj(T2[j0 + c, j0 + d])
                    M[a + r * c, a + r * c] -= 1.0
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
                    Y[i0 + a, j0 + c] = b[a + r * c]
            for a in range(r):  # Zs = Y_IJ S^H; C[:, :i0] -= (T1[:i0, I] Zs)^T
                for c in range(s):
                    acc = zero
                    for d in range(s):
                        acc += b[a + r * d] * np.conj(T2[j0 + c, j0 + d])
                    Zs[a, c] = acc
            for c in range(s):
                for a in range(r):
                    t = Zs[a, c]
                    for e in range(i0):
                        C[c, e] -= T1[e, i0 + a] * t
            i = i0
        j = j0
    return Y


_leaf_kernel = kernel(_leaf_kernel_py)


def fro_norm(X: np.ndarray) -> float:
    """Frobenius norm without under/overflow of the squares (BLAS ``nrm2``, scaled, on the
    flat array): ``np.linalg.norm`` returns inf for entries ~1e155 and 0 for ~1e-155, which
    made the residual tests below (refine or not, keep a correction or not) meaningless."""
    x = np.ravel(X)
    if x.size == 0:
        return 0.0
    return float((blas.dznrm2 if np.iscomplexobj(x) else blas.dnrm2)(x))


REFINE_RTOL = 1e-13  # one refinement step when ||A X A^H - X + Q||_F exceeds this * ||Q||_F
_CONGRUENCE_BLOCKS = 4  # symmetric products by 4 x 4 tiles: 10 of the 16 tiles computed


def congruence(Z: np.ndarray, Y: np.ndarray) -> np.ndarray:
    """``Z Y Z^H`` for Hermitian ``Y``: the product ``P = Z Y`` in full, then only the
    upper tiles of ``P Z^H`` (the result is Hermitian), mirrored. Not for the residual:
    there the average of both computed triangles (``symmetrize_``) is measurably more
    accurate (n = 1024, rho = 0.9999: refined residual 2.41e-14 vs 2.70e-14)."""
    n = Z.shape[0]
    P = Z @ Y
    if n < 256:
        return symmetrize_(P @ ct(Z))
    X = np.empty((n, n), dtype=P.dtype)
    b = [i * n // _CONGRUENCE_BLOCKS for i in range(_CONGRUENCE_BLOCKS + 1)]
    for lo, hi in zip(b[:-1], b[1:], strict=True):
        X[lo:hi, lo:] = P[lo:hi] @ ct(Z[lo:])
        Xd = X[lo:hi, lo:hi]
        Xd[...] = 0.5 * (Xd + ct(Xd))
    for lo, hi in zip(b[:-1], b[1:], strict=True):
        X[hi:, lo:hi] = ct(X[lo:hi, hi:])
    return X


def solve_schur(
    M: np.ndarray,
    Q: np.ndarray,
    schur: SchurForm | None = None,
    *,
    refine: bool | str = False,
    factor: np.ndarray | None = None,
) -> np.ndarray:
    """``M X M^H - X + Q = 0`` on the Schur form of ``M``. ``factor``: ``F`` with
    ``F F^H = Q`` to rounding (e.g. ``B`` of ``Q = B B^T``), so that the Schur-coordinate
    right-hand side is ``(Z^H F)(Z^H F)^H`` at O(n^2 k) instead of two n^3 products; for
    real data with compiled kernels (n >= ``_FACTOR_PASS_MIN``) the first solve is then
    ``X = L L^T`` from Hammarling's factor (:func:`_factor_first_pass`) instead of the
    recursion and the congruence.
    ``refine``: ``False`` none; ``True`` the full refinement step (:func:`_refine_full`)
    when the relative residual exceeds ``REFINE_RTOL``; ``"auto"``: for real data with
    compiled kernels and n >= ``_SLOW_MIN``, the residual is first estimated with
    ``lti._stein_slow.PROBE_COUNT`` probe vectors (O(n^2)) and nothing more is done when
    the estimate is at most ``REFINE_RTOL``; else the slow-mode correction
    (:func:`lti._stein_slow.slow_correction`, O(n^2)) is kept when the probes show it
    leaving at most ``SLOW_TOL`` of the residual; otherwise (and below ``_SLOW_MIN``, for
    complex data, without compiled kernels) as ``True``."""
    n = M.shape[0]
    if n == 0:
        return np.zeros((0, 0), dtype=np.result_type(M, Q))
    if schur is None:
        schur = real_schur(M)
    check_stable("A", schur.T, rho=float(np.max(np.abs(schur.eigenvalues()))))
    T, Z = schur.T, schur.Z
    if (np.iscomplexobj(Q) or np.iscomplexobj(factor)) and not np.iscomplexobj(T):
        T, Z = schur.complex_form()
    recursion = SteinRecursion(T)

    def to_schur(R, F=None):  # the right-hand side in Schur coordinates
        if F is None:
            return congruence(ct(Z), R)
        C = ct(Z) @ F
        return symmetrize_(C @ ct(C))

    if (factor is not None and n >= _FACTOR_PASS_MIN and enabled()
            and not np.iscomplexobj(T) and factor.dtype == np.float64):
        X = _factor_first_pass(schur, factor)
    else:
        X = congruence(Z, recursion.symmetric((0, n), to_schur(Q, factor)))
    if not refine:
        return X
    if (refine == "auto" and n >= _SLOW_MIN and not np.iscomplexobj(T)
            and not np.iscomplexobj(Q) and not np.iscomplexobj(M)):
        leaf = _leaf_kernel.compiled()
        if leaf is not None:
            probe = ResidualProbe(M, X, Q)
            if probe.estimate() <= REFINE_RTOL * fro_norm(Q):
                return X
            corr = slow_correction(M, X, Q, schur, leaf)
            if corr is not None and probe.ratio(*corr) <= SLOW_TOL:
                return add_low_rank_(X, *corr, mirror_upper_)
    return _refine_full(M, Q, X, T, Z, recursion, to_schur)


_SLOW_MIN = 256  # refine="auto" tries the slow-mode correction from this n on


def _refine_full(M, Q, X, T, Z, recursion, to_schur):
    """One step of iterative refinement when ``||M X M^H - X + Q||_F`` exceeds
    ``REFINE_RTOL ||Q||_F``: the residual ``R`` in full (4 n^3), the correction from the
    same Schur form (in single precision from ``_SINGLE_MIN`` on, kept when its probes
    show at most ``_SINGLE_TOL`` of ``R`` left; else in double, dropped when its probes
    show it raising the residual); ``X`` updated in place and returned."""
    n = T.shape[0]
    R = symmetrize_((M @ X) @ ct(M) - X + Q)
    norm_r, norm_q = fro_norm(R), fro_norm(Q)
    if norm_r > REFINE_RTOL * norm_q:
        single = n >= _SINGLE_MIN and norm_r <= _SINGLE_MAX_RESIDUAL * norm_q
        dX = _single_correction(M, R, T, Z) if single else None
        if dX is None:
            dX = congruence(Z, recursion.symmetric((0, n), to_schur(R)))
            # a hopeless (e.g. strongly non-normal, rho ~ 1) equation: a correction that
            # the probes show raising the residual is dropped (100 states: 4.6e+05 would
            # have become 3.4e+08)
            if not _probe_ratio(M, R, dX) < 1.0:
                return X
        X += dX  # both exactly Hermitian (congruence), so is the sum
    return X


def _factor_first_pass(schur: SchurForm, F: np.ndarray) -> np.ndarray:
    """``X = L L^T`` for ``Q = F F^T`` (real): Hammarling's factor ``R`` in Schur
    coordinates (:func:`lti._hammarling.schur_form_factor`, the compiled real kernel when
    enabled), ``L = Z R^T`` (one ``dtrmm``) and ``L L^T`` by one ``dsyrk`` (its upper
    triangle, mirrored: exactly symmetric). Two n^3 products after an O(n^2 m) row loop,
    instead of the recursion's ~3.75 n^3 and the congruence's 3.25 n^3; the residual is the
    same (both are limited by the Schur form's backward error times ``||X||``)."""
    R, flip = schur_form_factor(schur, schur.Z.T @ F, False)
    Zr = schur.Z[:, ::-1] if flip else schur.Z
    L = blas.dtrmm(1.0, R, Zr, side=1, trans_a=1)  # Zr @ R^T
    return mirror_upper_(blas.dsyrk(1.0, L, lower=0))


# with compiled kernels, from this n on: below it the row kernel's setup costs what the
# products save (n = 32: +1.5 %, n = 64: even, n = 256: -5 %, n = 1024: -14 % of the solve);
# without them the NumPy row loop is slower than the recursion's leaves at small n
_FACTOR_PASS_MIN = 64
_MIRROR_BLOCK = 128


def mirror_upper_(X: np.ndarray) -> np.ndarray:
    """In place: the strict lower triangle of square ``X`` replaced by the transpose of its
    strict upper one (what BLAS ``syrk`` leaves), by tiles; returns ``X``."""
    n, b = X.shape[0], _MIRROR_BLOCK
    for i in range(0, n, b):
        D = X[i : i + b, i : i + b]
        D[...] = np.triu(D) + np.triu(D, 1).T
        X[i + b :, i : i + b] = X[i : i + b, i + b :].T
    return X


_SINGLE_MIN = 256  # the correction in single precision from this n on
_SINGLE_TOL = 1e-2  # ... kept when the probes show it removes at least 99 % of the residual
# ... tried when the first residual is at most eps(double) / eps(single): its error grows
# like the first solve's, by that ratio (measured: 2-100x less), so above it there is no hope
_SINGLE_MAX_RESIDUAL = float(np.finfo(np.float64).eps / np.finfo(np.float32).eps)
_PROBES = 4


def _ldexp(X: np.ndarray, e: int) -> np.ndarray:
    """``X 2^e`` (exact: no rounding, no intermediate 2^e that could overflow), real or
    complex."""
    if not np.iscomplexobj(X):
        return np.ldexp(X, e)
    out = np.empty_like(X)
    out.real, out.imag = np.ldexp(X.real, e), np.ldexp(X.imag, e)
    return out


def _single_correction(M, R, T, Z):
    """The refinement's correction ``dX`` (``M dX M^H - dX + R = 0``) from a single
    precision solve, or ``None`` when it is not accurate enough
    (:func:`single_correction_parts`)."""
    return single_correction_parts(M, R, T, Z)[0]


def single_correction_parts(M, R, T, Z):
    """``(dX, back_transform)``: the refinement's correction ``dX``
    (``M dX M^H - dX + R = 0``) with its Schur-coordinate right-hand side ``Z^H R Z`` and
    recursion in single precision, and the precision (``"single"`` or ``"double"``) of the
    back-transform ``dX = Z dY Z^H`` that was kept; ``(None, None)`` when neither is
    accurate enough. The correction needs a few digits only (it takes a residual of ~1e-12
    to the ~1e-14 of the residual's own evaluation). ``Z``, ``T`` and ``R / 2^e``
    (``2^e ~ max|R|``: no under/overflow) are rounded.
    The back-transform is tried in single precision first (half the time of double). There
    ``||dY|| >> ||R||``, so ``Z`` rounded to single leaves more of ``R`` than the recursion
    does (n = 1024, rho = 0.9999: 3.4e-3 of ``R`` left vs 2.9e-4 with it in double; 1.3e-2
    vs 6.0e-4 at rho = 0.99999, n = 400); the refined residual is the same to 0.3 % (it is
    limited by the residual's own evaluation, ~25x below the first one's). When the
    single back-transform falls short of the guard, the same ``dY`` is back-transformed in
    double precision and checked again.
    The guard is a posteriori: for ``_PROBES`` fixed Gaussian vectors ``V`` the new
    residual ``(R + M dX M^H - dX) V`` (double precision, O(n^2) per vector) must be at
    most ``_SINGLE_TOL`` of ``R V``; when both fail (an ill-conditioned Stein operator, e.g.
    strongly non-normal ``A``) the caller solves in double precision."""
    n = T.shape[0]
    low = np.complex64 if np.iscomplexobj(T) else np.float32
    amax = float(np.max(np.abs(R)))
    if not 0 < amax < np.inf:
        return None, None
    e = int(np.frexp(amax)[1])  # R / 2^e: exact, max entry in [0.5, 1), even from subnormals
    Z1 = Z.astype(low)
    Rz = congruence(ct(Z1), _ldexp(R, -e).astype(low))
    dY = SteinRecursion(T.astype(low)).symmetric((0, n), Rz)
    probes = _Probes(M, R)
    for back_transform in ("single", "double"):
        if back_transform == "single":
            dX = _ldexp(congruence(Z1, dY).astype(R.dtype), e)
        else:
            dX = congruence(Z, _ldexp(dY.astype(R.dtype), e))
        if probes.ratio(dX) <= _SINGLE_TOL:
            return dX, back_transform
    return None, None


class _Probes:
    """``||(R + M dX M^H - dX) V||_F / ||R V||_F`` for ``_PROBES`` fixed Gaussian vectors
    ``V`` (double precision, O(n^2) per vector): the residual left by a correction ``dX``,
    relative to the one it corrects, estimated a posteriori (within ~30 % of the true
    Frobenius ratio on every case measured)."""

    def __init__(self, M, R):
        self.M = M
        self.V = _probe_vectors(M.shape[0])
        self.RV = R @ self.V
        self.MhV = ct(M) @ self.V
        self.norm = fro_norm(self.RV)

    def ratio(self, dX) -> float:
        left = fro_norm(self.RV + self.M @ (dX @ self.MhV) - dX @ self.V)
        return left / self.norm if self.norm > 0 else (0.0 if left == 0 else np.inf)


@functools.lru_cache(maxsize=16)
def _probe_vectors(n: int) -> np.ndarray:
    """The fixed Gaussian probes (n, ``_PROBES``), read-only, cached per n (drawing them
    costs ~10 us: 2 % of a solve at n = 16)."""
    V = np.random.default_rng(0).standard_normal((n, _PROBES))
    V.flags.writeable = False
    return V


def _probe_ratio(M, R, dX) -> float:
    return _Probes(M, R).ratio(dX)


def smith_solve(M: np.ndarray, Q: np.ndarray, *, max_iter: int = 100) -> np.ndarray:
    X = Q.copy()
    Ak = M.copy()
    eps = np.finfo(np.float64).eps
    for _ in range(max_iter):
        with np.errstate(over="ignore", invalid="ignore"):  # an overflow: typed below
            dX = Ak @ X @ ct(Ak)
            X = X + dX
        if not np.all(np.isfinite(X)):
            raise SolverError(
                'method="smith" overflowed (the powers of `A` grow before they decay: '
                f"spectral radius {spectral_radius(M):.6g}); use method=\"schur\""
            )
        if fro_norm(dX) <= eps * fro_norm(X):
            return X
        with np.errstate(over="ignore", invalid="ignore"):
            Ak = Ak @ Ak
    raise SolverError(
        f'method="smith" did not converge in {max_iter} doublings (spectral radius '
        f"{spectral_radius(M):.6g})"
    )
