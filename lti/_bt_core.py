"""The numerical core of balanced truncation (internal; the public face is :mod:`lti.balanced`).

The SVD of ``Lo^T Lc`` (the Hankel singular values and the balanced directions), the
square-root and balancing-free projections, the certified noise floor of the HSVs and the
truncation / singular-perturbation step of a stable system with given Gramian factors
(:func:`reduce_stable`). :mod:`lti.balanced` adds the Gramian factors, the stable/unstable
split, the rounding terms of the decompositions and the result object.
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass

import numpy as np
import scipy.linalg as sla
from scipy.linalg import lapack
from scipy.sparse.linalg import norm as sparse_norm

from lti._jit import kernel
from lti._order import Rule, select_order
from lti._rounding import rounding_terms
from lti._svd_lead import MAX_VECTORS, LeadingSVD
from lti._validation import stability_margin
from lti.exceptions import NonFiniteError, SolverError
from lti.lowrank import is_sparse
from lti.system import DiscreteLTI

_EPS = np.finfo(np.float64).eps
# norm2 forms L^T L and squared norms of its columns (fourth powers of the entries): beyond
# these its power iteration runs on the factor scaled by a power of 2 (exact), so ||L||_2
# neither over- nor underflows (factors of B * 1e160 gave NaN, of B * 1e-170 a 2.7x
# underestimate, and the noise floor silently lost its ||Lc|| ||Lo|| term)
_SAFE_LO, _SAFE_HI = 2.0 ** -200, 2.0 ** 200


#: From this order on, reduce_stable computes all HSVs but only the kept singular vectors
#: (lti._svd_lead: dqds values, inverse iteration for the vectors, checked; else dgesdd).
LEAD_MIN_N = 32  # (in context, rho = 0.9999, r = n / 4, paired with dgesdd: n = 32, 48, 64
# -26, -29, -95..-108 us since its LAPACK calls take raw addresses; n = 128: -200..-400 us)


def hsv_svd(Lc: np.ndarray, Lo: np.ndarray, n: int):
    """SVD of Lo^T Lc; HSVs padded with zeros to length n (factors may have < n columns)."""
    M = (Lc.T @ Lo).T  # Lo^T Lc, (ko, kc), Fortran order for LAPACK
    if M.size == 0:
        k = 0
        U, s, Vt = np.zeros((Lo.shape[1], 0)), np.zeros(0), np.zeros((0, Lc.shape[1]))
    else:
        U, s, Vt, info = lapack.dgesdd(M, compute_uv=1, full_matrices=0)
        if info != 0 and not np.isfinite(M).all():  # (only checked when dgesdd failed)
            raise NonFiniteError(
                "the product Lo^T Lc of the Gramian factors overflows float64 (max|Lc| = "
                f"{abs(Lc).max():.3g}, max|Lo| = {abs(Lo).max():.3g}): the Hankel singular "
                "values are at or beyond the float range; scale the factors (B, C) down")
        if info != 0:  # divide and conquer failed to converge: QR iteration instead
            try:
                U, s, Vt = sla.svd(
                    M, full_matrices=False, check_finite=False, lapack_driver="gesvd"
                )
            except np.linalg.LinAlgError as exc:
                raise SolverError(f"SVD of Lo^T Lc did not converge (info={info})") from exc
        k = s.size
    if k == n:  # the square case: s itself (fresh from dgesdd), no padded copy
        return s, U, s, Vt
    hsv = np.zeros(n)
    hsv[: min(k, n)] = s[:n]
    return hsv, U, s, Vt



def projections(Lc, Lo, U, s, Vt, lo, hi, method):
    """``(T, Ti, ||T||_F ||Ti||_F)``: right/left projections onto balanced directions lo..hi-1.

    SR: ``T = Lc V Sigma^{-1/2}``, ``Ti = Sigma^{-1/2} U^T Lo^T``. BFSR (Varga 1991):
    orthonormal bases ``Z = orth(Lc V)`` and ``W = orth(Lo U)`` of the two dominant
    subspaces, ``T = Z``, ``Ti = (W^T Z)^{-1} W^T``; ``Ti T = I`` to rounding (one LU
    solve with the small ``W^T Z``), whatever the spread of the kept HSVs.
    """
    V = Vt[lo:hi].T  # (kc, k)
    Uk = U[:, lo:hi]  # (ko, k)
    if method == "sr":
        d = 1.0 / np.sqrt(s[lo:hi])
        T, Ti = (Lc @ V) * d, (d[:, None] * Uk.T) @ Lo.T
        # Ti T = Sigma^-1/2 U^T (Lo^T Lc) V Sigma^-1/2 forms Lo^T Lc again: off I by about
        # eps ||Lo|| ||Lc|| / sigma_k (2.7e-7 with ||T|| ||Ti|| = 8.7 measured): one Newton
        # step for the left inverse, Ti <- Ti - (Ti T - I) Ti, squares that deviation
        E, k = Ti @ T, hi - lo
        E.flat[:: k + 1] -= 1.0  # E = Ti T - I (k, k), C-contiguous
        with np.errstate(over="ignore", under="ignore"):  # out of range: handled below
            t2, ti2 = fro2(T), fro2(Ti)
        if k and not (t2 < np.inf and ti2 < np.inf and t2 * ti2 > 0.0):  # out of range:
            t2 = ti2 = fro_product(T, Ti)  # t2 ti2 = (||T||_F ||Ti||_F)^2 from scaled copies
        if k and fro2(E) > (8.0 * k * _EPS) ** 2 * t2 * ti2:
            Ti = Ti - E @ Ti
            return T, Ti, fro_product(T, Ti)
        return T, Ti, math.sqrt(t2) * math.sqrt(ti2)
    if hi == lo:
        return np.zeros((Lc.shape[0], 0)), np.zeros((0, Lo.shape[0])), 0.0
    Z = orth(Lc @ V)  # (n, k), orthonormal
    W = orth(Lo @ Uk)  # (n, k), orthonormal
    M = W.T @ Z  # (k, k), = R_W^{-T} Sigma R_Z^{-1}: nonsingular for sigma_k > 0
    # LAPACK dgesv (np.linalg.solve's algorithm; numpy's and scipy's LAPACK builds can
    # differ in the last bit) without np.linalg.solve's wrapper (~5 us at k = 16)
    Ti, info = lapack.dgesv(M, W.T)[2:]
    if info != 0:  # pragma: no cover - sigma_k > 0
        raise SolverError(f"balancing-free square root: W^T Z is singular (dgesv info={info})")
    return Z, Ti, fro_product(Z, Ti)


def fro_product(T: np.ndarray, Ti: np.ndarray) -> float:
    """``||T||_F ||Ti||_F`` (the conditioning of a projection): ``sqrt(fro2(T)) *
    sqrt(fro2(Ti))``, bit for bit, when the squares are in range, else from copies scaled by
    powers of 2 (B ~ 1e200 with C ~ 1e-200 made T ~ 1e200 and Ti ~ 1e-200: inf * 0 = NaN in
    every bound)."""
    with np.errstate(over="ignore", under="ignore"):  # out of range: the scaled copies below
        t2, ti2 = fro2(T), fro2(Ti)
    if t2 < np.inf and ti2 < np.inf and t2 * ti2 > 0.0:
        return math.sqrt(t2) * math.sqrt(ti2)
    big = [float(abs(X).max(initial=0.0)) for X in (T, Ti)]
    if min(big) == 0.0:  # a zero (or empty) projection
        return 0.0
    e = [math.frexp(x)[1] for x in big]
    t, ti = (math.sqrt(fro2(np.ldexp(X, -k))) for X, k in zip((T, Ti), e, strict=True))
    return math.ldexp(t * ti, e[0] + e[1])


def fro2(X: np.ndarray) -> float:
    """``||X||_F^2``: the ``x.dot(x)`` under the root of ``np.linalg.norm(X)``, bit for bit."""
    x = X.ravel(order="K")
    return float(x.dot(x))


def orth(M: np.ndarray) -> np.ndarray:
    """Orthonormal basis ``Q`` (n, k) of the columns of ``M`` (n, k), ``k <= n``, by LAPACK
    ``dgeqrf`` + ``dorgqr`` (the Householder QR of ``np.linalg.qr`` without its overhead)."""
    lwork = max(64 * M.shape[1], 1)  # f2py's default (the minimum) means unblocked code
    qr, tau, _, info = lapack.dgeqrf(M, lwork=lwork)
    if info != 0:  # pragma: no cover - LAPACK argument errors only
        raise SolverError(f"LAPACK dgeqrf failed with info={info}")
    Q, _, info = lapack.dorgqr(qr, tau, lwork=lwork)
    if info != 0:  # pragma: no cover
        raise SolverError(f"LAPACK dorgqr failed with info={info}")
    return Q


def _power_norm_py(L):
    """The power iteration of :func:`norm2` on ``K = L^T L`` applied as ``L^T (L x)`` (``L``
    (n, k), C order): started from ``K``'s column with the largest diagonal entry, at most
    20 steps, until the estimate changes by at most 1e-3 of itself: ``(estimate, max
    |L|)``, the estimate -1.0 when an iterate vanishes (the caller then returns ``max |L|``;
    it is read on the way, no ``abs(L)`` temporary). Compiled by :mod:`lti._jit` (no
    ``K``: ``2 n k`` flops per step and no Python per step); also runs as plain Python."""
    n, k = L.shape
    jb, best, big = 0, -1.0, 0.0
    for j in range(k):  # K's diagonal: the squared column norms
        t = 0.0
        for i in range(n):
            t += L[i, j] * L[i, j]
            big = max(big, abs(L[i, j]))
        if t > best:
            jb, best = j, t
    x = np.empty(k)
    y = np.empty(n)
    for i in range(n):
        y[i] = L[i, jb]
    est = 0.0
    for step in range(21):  # step 0: x = K e_jb, K's column jb; then 20 power steps
        for j in range(k):
            x[j] = 0.0
        for i in range(n):  # x = L^T y
            yi = y[i]
            for j in range(k):
                x[j] += L[i, j] * yi
        nx = 0.0
        for j in range(k):
            nx += x[j] * x[j]
        nx = np.sqrt(nx)
        if nx == 0.0:
            return -1.0, big
        for j in range(k):
            x[j] /= nx
        if step > 0:
            prev, est = est, np.sqrt(nx)
            if abs(est - prev) <= 1e-3 * est:
                break
        if step < 20:
            for i in range(n):  # y = L x
                t = 0.0
                for j in range(k):
                    t += L[i, j] * x[j]
                y[i] = t
    return est, big


_power_norm = kernel(_power_norm_py, fastmath=True)


def norm2(L: np.ndarray) -> float:
    """Estimate of the spectral norm ||L||_2 (power iteration on K = L^T L, started from
    the column of K with the largest diagonal entry, at least ``max |L|``). Up to 128
    columns K is applied as L^T (L x) in one compiled loop (:func:`_power_norm_py`) or,
    without the compiled kernels, formed; beyond, as L^T (L x) by BLAS. The same iteration
    everywhere: the variants agree to rounding."""
    if L.size == 0:
        return 0.0
    if L.ndim == 2 and L.strides[0] < 0 and L[::-1].flags.c_contiguous:
        L = L[::-1]  # the Schur path's row-reversed Lc: the rows' order does not change K
    formed = L.shape[1] <= 128
    kern = _power_norm.compiled() if formed else None  # (above: BLAS's matrix-vector
    if kern is not None and L.dtype == np.float64 and L.flags.c_contiguous:  # products
        est, big = kern(L)  # (max |L| read by the kernel)      # are faster than its loops)
        if _SAFE_LO < big < _SAFE_HI:
            return max(float(est), big)
    big = float(abs(L).max())
    if not _SAFE_LO < big < _SAFE_HI:  # L^T L would over/underflow: scale by a power of 2
        if big == 0.0 or not math.isfinite(big):
            return big
        e = math.frexp(big)[1]  # exact scaling: the estimate of L 2^-e, times 2^e
        return math.ldexp(norm2(np.ldexp(L, -e)), e)
    if kern is not None:
        return max(float(kern(np.ascontiguousarray(L, dtype=np.float64))[0]), big)
    if not (L.flags.c_contiguous or L.flags.f_contiguous):
        # e.g. the Schur path's row-reversed Lc: strided matrix-vector products do not go
        # through BLAS (n = 256: 0.53 ms with the view, 0.15 ms with the copy)
        L = np.ascontiguousarray(L)
    # ndarray methods, not the np.* wrappers or matmul: the same BLAS calls, bit for bit
    if formed:
        K = L.T @ L
        x = K[:, int(K.diagonal().argmax())]
    else:
        x = L.T @ L[:, int(np.einsum("ij,ij->j", L, L).argmax())]
    nx, est = math.sqrt(float(x.dot(x))), 0.0
    if nx == 0.0:
        return big
    x = x / nx
    for _ in range(20):
        y = K.dot(x) if formed else L.T @ (L @ x)
        ny = math.sqrt(float(y.dot(y)))
        if ny == 0.0:
            return big
        x, prev, est = y * (1.0 / ny), est, math.sqrt(ny)
        if abs(est - prev) <= 1e-3 * est:
            break
    return max(est, big)


def noise_floor(hsv, Lc, Lo, rho, exact_schur: bool = False) -> float:
    """HSVs at or below this level are not certified (see balanced_truncation, Notes).

    ``n eps max(sigma_1, ||Lc||_2 ||Lo||_2) / (1 - rho^2)``; with `exact_schur` (the
    factors come from Hammarling's method on an exact Schur form, ``Z`` a signed
    permutation: a triangular ``A``) ``n eps sigma_1 / (1 - rho^2)``: the ``||Lc|| ||Lo||`` term
    covers the Schur decomposition's backward error acting on a non-normal ``A``, which is
    then absent (a chain of 8 lags ``1 / (z - 0.99)``, superdiagonal 1: ``||Lc|| ||Lo||``
    over 1e13 sigma_1 put every HSV below the floor, order 0 for any order asked, although
    the HSVs were accurate to 1e-13 relative)."""
    n = hsv.size
    if n == 0:
        return 0.0
    scale = float(hsv[0]) if exact_schur else norm2(Lc) * norm2(Lo)
    if rho is not None:
        scale /= max(1.0 - rho * rho, _EPS)  # conditioning of the Stein equations
    return n * _EPS * max(float(hsv[0]), scale)


@dataclass(eq=False, slots=True)
class Realisation:
    """The matrices :func:`reduce_stable` reads, for a realisation computed from a validated
    system (the Schur coordinates ``(T, Z^T B, C Z, D)``): no second validation and copy of
    ``T`` through :class:`DiscreteLTI` (~30 us at n = 64). ``reduce_stable`` needs ``rho``
    given with it (a DiscreteLTI computes its spectral radius when ``rho`` is None)."""

    A: np.ndarray
    B: np.ndarray
    C: np.ndarray
    D: np.ndarray


@dataclass(eq=False, slots=True)
class StableReduction:
    """What :func:`reduce_stable` computed for the stable part (internal; not frozen: cheaper)."""

    A: np.ndarray
    B: np.ndarray
    C: np.ndarray
    D: np.ndarray
    T: np.ndarray
    Ti: np.ndarray
    hsv: np.ndarray
    bounds: np.ndarray  # bounds[k] = 2 sum_{i>=k} sigma_i + rounding[k], shape (ns + 1,)
    rounding: np.ndarray  # rounding term of each order, shape (ns + 1,), without kappa
    gain_unit: float  # ROUNDING_FACTOR n eps 2 sum sigma: times kappa(T, Ti)
    order: int
    method: str
    minimal_order: int
    spa_fallback: bool = False  # match_dc asked, truncation returned (SPA pole on the circle)
    kappa: float = 0.0  # ||T||_F ||Ti||_F of T, Ti above


def reduce_stable(G: DiscreteLTI | Realisation, Lc, Lo, rule: Rule, method, match_dc, stacklevel,
                   rho=None, exact_schur: bool = False,
                   n_hsv: int | None = None) -> StableReduction:
    """Balanced truncation / SPA of a stable ``G`` with given Gramian factors
    (`exact_schur`: see :func:`noise_floor`).

    ``n_hsv``: the number of HSVs (default n); the sparse path passes the k resolved by its
    low-rank factors, so that the noise floor and the rounding term count k computed values,
    not n - k zeros standing for the unresolved tail (documented as not covered)."""
    A, B, C, D = G.A, G.B, G.C, G.D
    n = A.shape[0] if n_hsv is None else n_hsv
    lead = None
    # (only for an explicit order the vectors of which it computes: the values alone are
    # half a dgesdd, wasted when dgesdd has to follow)
    if (n >= LEAD_MIN_N and rule.order is not None and rule.order <= MAX_VECTORS
            and not match_dc and Lc.shape == (n, n) and Lo.shape == (n, n)):
        # M = Lo^T Lc (formed in LeadingSVD's block): all values now, the kept vectors
        lead = LeadingSVD(None, (Lc, Lo))  # after the order
        if lead.values is None:
            lead = None
    if lead is None:
        hsv, U, s, Vt = hsv_svd(Lc, Lo, n)
    else:
        hsv = s = lead.values
    tail = np.zeros(n + 1)  # tail[k] = sum_{i>=k} sigma_i, tail[n] = 0
    hsv[::-1].cumsum(out=tail[n - 1 :: -1] if n else tail[:0])  # (np.cumsum, no wrapper)
    bounds = 2.0 * tail  # (n + 1,)
    floor = noise_floor(hsv, Lc, Lo, rho, exact_schur)
    nmin = int(np.count_nonzero(hsv > floor))
    r = select_order(hsv, bounds, rule, nmin, stacklevel + 1)  # on the HSV tails
    rounding, gain_unit = rounding_terms(G, hsv, floor, rho, match_dc)
    if method == "auto":
        method = "sr"  # see balanced_truncation: bfsr has not been shown to help
    if lead is not None:  # the kept vectors only, else dgesdd
        out = lead.vectors(r)
        if out is None:
            U, _, Vt = hsv_svd(Lc, Lo, n)[1:]
        else:
            U, Vt = out
    T1, Ti1, kappa = projections(Lc, Lo, U, s, Vt, 0, r, method)
    Ar, Br, Cr, Dr = Ti1 @ A @ T1, Ti1 @ B, C @ T1, D  # D: DiscreteLTI copies it
    fallback = False
    if match_dc and r < nmin:
        # singular perturbation on the minimal part: x2 frozen at its steady state
        T2, Ti2, _ = projections(Lc, Lo, U, s, Vt, r, nmin, method)
        AT2 = A @ T2
        A12, A21, A22 = Ti1 @ AT2, Ti2 @ A @ T1, Ti2 @ AT2
        B2, C2 = Ti2 @ B, C @ T2
        E = np.eye(nmin - r) - A22
        lu, piv, info = lapack.dgetrf(E)  # sla.lu_factor's LAPACK call, without the wrapper
        if info < 0 or np.min(np.abs(np.diag(lu))) <= _EPS * max(1.0, np.max(np.abs(E))):
            raise SolverError("singular perturbation: I - A22 is singular")
        Y = lapack.dgetrs(lu, piv, np.hstack([A21, B2]))[0]  # E^{-1} [A21 B2] (sla.lu_solve's)
        As = Ar + A12 @ Y[:, :r]
        # SPA can put a pole within rounding of the unit circle (firwin low-pass FIRs at
        # odd r: A_r = -1 + O(1e-15); exactly |A_r|^2 = 1 - B_r^2 / sigma_1 by the
        # balanced Lyapunov equation, B_r ~ 1e-7): no finite bound holds for that model
        # as computed, so the truncated one (same bounds) is returned instead
        rho_r = float(np.max(np.abs(np.linalg.eigvals(As)))) if r else 0.0
        norm_A = sparse_norm(A) if is_sparse(A) else math.sqrt(fro2(A))  # sparse path: sparse A
        margin = stability_margin(n + r, float(np.hypot(math.sqrt(fro2(As)), norm_A)))
        if rho_r < 1.0 - margin:
            Ar, Br = As, Br + A12 @ Y[:, r:]
            Cr, Dr = Cr + C2 @ Y[:, :r], Dr + C2 @ Y[:, r:]
        else:
            fallback = True
            warnings.warn(
                f"the singular-perturbation model has a pole within rounding of the unit "
                f"circle (spectral radius {rho_r!r}), where no bound holds: the balanced "
                "truncation of the same order is returned instead (result.match_dc is "
                "False; same bounds)", UserWarning, stacklevel=stacklevel)
    return StableReduction(Ar, Br, Cr, Dr, T1, Ti1, hsv, bounds + rounding, rounding,
                            gain_unit, r, method, nmin, fallback, kappa)
