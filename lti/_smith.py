"""Factored squared Smith iteration: Gramian factors from the powers ``A^(2^k)``.

``L_{k+1} = [L_k, A_k L_k]`` compressed by QR, ``A_{k+1} = A_k^2``, shared by several
right-hand sides (both Gramian factors of one system). Fast for small dense ``A``; its
rounding errors grow with ``max_k ||A^(2^k)||``, hence the growth guard.
"""

from __future__ import annotations

import functools
import math

import numpy as np
from scipy.linalg import blas, lapack

import lti._jit as _jit
from lti.exceptions import SolverError

__all__ = [
    "SMITH_AUTO_ITER",
    "SMITH_EARLY_STEP",
    "SMITH_MAX_GROWTH",
    "SMITH_MAX_N",
    "SMITH_SCREEN_N",
    "SMITH_SCREEN_RATIO",
    "SMITH_SCREEN_STEP",
    "smith_factor",
    "smith_factors",
    "smith_promising",
    "stops_at_early_step",
    "try_smith",
]


SMITH_MAX_N = 1024  # method="auto" tries the factored Smith iteration up to this order,
SMITH_SCREEN_N = 128  # above this order only when smith_promising(...) says so:
SMITH_SCREEN_RATIO = 0.96  # (||A^32 B|| / ||A^16 B||)^(1/16) below this
SMITH_AUTO_ITER = 12  # ... with at most this many squarings (rho^4096 <= eps: rho < ~0.99)
# ... and while ||A^(2^k)||_F <= this * sqrt(n): benign dense A (||A||_F ~ rho sqrt(n), powers
# decaying) pass, transient growth does not -- Smith's rounding scales with max_k ||A^(2^k)||, so
# strongly non-normal A (growth 1e2..1e4 seen: residuals up to 1000x SB03OD's) go to Hammarling.
SMITH_MAX_GROWTH = 8.0
# in-loop screen of the attempts of method="auto" (``screen=True``): at squaring k = 5 the
# window sums w_k = sum_{2^k <= j < 2^(k+1)} ||A^j B||_F^2 that the iteration adds must have
# shrunk by w_5 / w_4 < t_5 (1 + t_5), t_k = SMITH_SCREEN_RATIO^(2^k): for ||A^j B|| ~ g^j
# that ratio is g^32 (1 + g^32), so this is smith_promising's decay test g < 0.96 read off
# the iteration's own norms (no extra products; a slowly decaying A stops after 5 of 12
# squarings). Window k holds twice the terms of window k - 1, so a ratio up to 2 means the
# mean term does not grow (g^32 (1 + g^32) <= 2 for every g <= 1): only a ratio above 2 is
# growth -- the transient growth of a non-normal A, e.g. a Jordan-like chain -- and is judged
# at the next step, at k = 6 with t_6 whatever the ratio.
SMITH_SCREEN_STEP = 5
# ... and one squaring earlier, at k = 4, the same test (t_4 (1 + t_4) <= w_4 / w_3 <= 2:
# g >= 0.96 under exact geometric decay, as at k = 5; growth above 2 is left to k = 5 and 6):
# bench_balanced's rho = 0.9999 family (flat mean terms: ratios 0.86-1.72 at k = 4 for
# n = 16..128) stops after 4 squarings instead of 5-6 (n = 64: ~0.15 ms instead of ~0.37;
# n = 128: ~0.55 ms instead of ~1.6 ms).
SMITH_EARLY_STEP = 4
#: stops_at_early_step answers False (the attempt runs) after 15 of its 31 products when
#: the sums' window 3 is below this fraction of window 2: a decay that fast is the benign
#: families' (rho = 0.95: w3/w2 = 0.33-0.54 at n = 64; the slow family 0.80-2.2). Only the
#: path depends on it: a False for a system the attempt rejects costs that attempt's time.
EARLY_FALSE_RATIO = 0.55


def _window_ratio(k: int) -> float:
    t = SMITH_SCREEN_RATIO ** (2**k)
    return t * (1.0 + t)


_TINY = np.finfo(np.float64).tiny
_EPS = np.finfo(np.float64).eps


def smith_factors(M: np.ndarray, Bs, transposes, *, max_iter: int, max_growth: float,
                  screen: bool = False):
    """Factors of ``sum_k M^k B B^T (M^T)^k`` (``M^T`` for ``transpose``) by squared Smith.

    ``L_{k+1} = [L_k, A_k L_k]`` compressed to its triangular QR factor (a sum of PSD
    terms, no subtraction), ``A_{k+1} = A_k^2`` shared by all right-hand sides; stops when
    every ``||A_k L_k||_F <= eps ||L_k||_F`` and ``||A_k||_F < 1`` (which certifies
    ``rho(M) < 1``). Returns ``(factors, rho_bound)`` with ``rho_bound = min_k
    ||A_k||_F^(2^-k) >= rho(M)``, or ``None`` when that does not happen within
    ``max_iter`` squarings, ``||A_k||_F`` exceeds ``max_growth * sqrt(n)`` or a factor is not
    finite; with `screen`, also ``None`` at squaring ``SMITH_EARLY_STEP``, ``SMITH_SCREEN_STEP``
    or the next one when a factor's window sums decay too slowly for convergence (see
    ``SMITH_SCREEN_STEP`` and ``SMITH_EARLY_STEP``).
    """
    n = M.shape[0]
    eps = _EPS
    grow = max_growth * math.sqrt(n)
    nb = min(n, 16 if n <= 256 else 32)  # block size of the structured QR (measured)
    # Rt[i] = L_i^T: (w, n) while narrow, then (n, n) upper triangular (Fortran order)
    # each right-hand side scaled to max|B| = 1 (the factor scales linearly), so that tiny
    # or huge data neither underflow nor overflow in the norms of the stopping test
    scales = [float(abs(B).max(initial=0.0)) for B in Bs]
    Bs = [B / b if b > 0 else B for B, b in zip(Bs, scales, strict=True)]
    Rt = [_qr_triangle(B.T, n) if B.shape[1] >= n else np.array(B.T, order="F") for B in Bs]
    r2 = [_fro2(R) for R in Rt]  # ||L_k||_F^2: QR keeps it, each step adds ||A_k L_k||_F^2
    wprev = [0.0] * len(Bs)  # ||A_(k-1) L_(k-1)||_F^2, the previous window sum
    todo = list(range(len(Bs)))
    Ak = np.asfortranarray(M)  # A_k = M^(2^k); Ak.T is a C-ordered view
    rho_bound, root = np.inf, 1.0
    # with the screen, the factors after the first take their steps k <= SMITH_EARLY_STEP
    # only once the first has passed the screen at k = SMITH_EARLY_STEP (or converged): a
    # slowly decaying A is then rejected after one factor's products instead of all of
    # them. Every product is the same, on the same powers (kept meanwhile), so the factors
    # are bit for bit those of the step-by-step order.
    lag = [] if screen and len(Bs) > 1 and n <= SMITH_SCREEN_N else None  # the powers kept

    def step(i, k, Ak):
        """Step k of factor i: False when the screen rejects the attempt."""
        R = Rt[i]
        w = R.shape[0]
        op = Ak if transposes[i] else Ak.T  # (A_k L)^T = L^T op
        Wt = blas.dtrmm(1.0, R, op) if w == n else R @ op  # R triangular when w == n
        w2 = _fro2(Wt)
        if w2 <= eps * eps * r2[i]:
            todo.remove(i)
            return True
        if screen and SMITH_EARLY_STEP <= k <= SMITH_SCREEN_STEP + 1:
            ratio = w2 / wprev[i]  # wprev > 0: the factor was not done at k - 1
            # mean term still growing (ratio > 2, see SMITH_SCREEN_STEP) at k = 4 or 5:
            # judged at the next step (at k = 6 whatever the ratio)
            if _window_ratio(k) <= ratio and (k > SMITH_SCREEN_STEP or ratio <= 2.0):
                return False  # too slow to converge in max_iter (see SMITH_SCREEN_STEP)
        wprev[i] = w2
        r2[i] += w2
        if w == n:  # [R; Wt]: triangle over a dense block, structured QR
            R, _, _, info = lapack.dtpqrt(0, nb, R, Wt, overwrite_a=1, overwrite_b=1)
        elif 2 * w < n:
            Rt[i] = np.vstack([R, Wt])
            return True
        else:
            R, info = _qr_triangle(np.vstack([R, Wt]), n), 0
        if info != 0:  # pragma: no cover - LAPACK argument errors only
            raise SolverError(f"LAPACK dtpqrt failed with info={info}")
        Rt[i] = R
        return True

    for k in range(max_iter):
        a = math.sqrt(_fro2(Ak))  # ||A_k||_F >= ||A_k||_2
        if not a <= grow:  # also catches NaN
            return None
        # ||A_k||_F^(2^-k) >= rho(M). A power that is exactly zero (nilpotent M, e.g. a
        # shift register or FIR filter, or entries that underflowed) still bounds rho: its
        # true norm is below n * tiny, which must not be skipped (it was: bound 1.19 for a
        # shift register, and a bound >= 1 sent the noise floor of the HSVs to infinity)
        rho_bound = min(rho_bound, max(a, n * _TINY) ** root)
        done = a <= eps  # ||A_k L||_F <= ||A_k||_2 ||L||_F: every factor has converged
        if lag is None:
            if done:
                todo = []
            for i in list(todo):
                if not step(i, k, Ak):
                    return None
        else:
            if not done:
                lag.append(Ak)
                if 0 in todo and not step(0, k, Ak):
                    return None
            if done or k == SMITH_EARLY_STEP or 0 not in todo:  # the others catch up
                for i in [i for i in todo if i]:
                    for j, Aj in enumerate(lag):
                        if i in todo and not step(i, j, Aj):
                            return None
                lag = None
                if done:
                    todo = []
        if not todo and a < 1.0:
            Ls = [_square_factor(R, n) * (b if b > 0 else 1.0)
                  for R, b in zip(Rt, scales, strict=True)]
            if not all(math.isfinite(L.sum()) for L in Ls):
                return None
            return Ls, rho_bound
        Ak = Ak @ Ak
        root *= 0.5
    return None


def _early_stop_py(A, V, steps, lo, hi, tol, early):
    """The decision of :func:`stops_at_early_step`: 1 to stop, else 0. ``A`` (n, n) and
    ``V = B`` (n, m) in Fortran order (``V`` overwritten by ``A^j B``); ``||A^j B||_F^2``
    for ``j < 2^(steps + 1)`` by ``V <- A V`` as sums of columns of ``A`` (contiguous
    loops, four columns per pass); window k's sum must exceed ``tol`` times the sums before
    it for every ``k <= steps``, and ``lo <= w_steps / w_(steps - 1) <= hi``; 0 already
    after window ``steps - 1`` when ``w_(steps - 1) < early w_(steps - 2)`` (a fast decay:
    half the products on a system the attempt will accept). (NaN or inf sums fail these
    tests: 0.) Compiled by :mod:`lti._jit`."""
    n, m = V.shape
    W = np.empty(n)
    total = 2 ** (steps + 1)
    r2, wprev, w, nxt = 0.0, 1.0, 0.0, 1
    for j in range(total):
        s = 0.0
        for c in range(m):
            for i in range(n):
                s += V[i, c] * V[i, c]
        if j == 0:
            r2 = s
        else:
            w += s
        if j + 1 == 2 * nxt:  # window k = log2(nxt) complete: j = 2^(k+1) - 1
            if not w > tol * r2:
                return 0
            if j + 1 == total:
                ratio = w / wprev
                return 1 if lo <= ratio <= hi else 0
            if 4 * nxt == total and w < early * wprev:  # window steps - 1 decays fast
                return 0
            r2, wprev, w, nxt = r2 + w, w, 0.0, 2 * nxt
        if j + 1 < total:
            for c in range(m):
                for i in range(n):
                    W[i] = 0.0
                l = 0
                while l + 4 <= n:
                    v0, v1, v2, v3 = V[l, c], V[l + 1, c], V[l + 2, c], V[l + 3, c]
                    a0, a1, a2, a3 = A[:, l], A[:, l + 1], A[:, l + 2], A[:, l + 3]
                    for i in range(n):
                        W[i] += a0[i] * v0 + a1[i] * v1 + a2[i] * v2 + a3[i] * v3
                    l += 4
                while l < n:
                    v0 = V[l, c]
                    for i in range(n):
                        W[i] += A[i, l] * v0
                    l += 1
                for i in range(n):
                    V[i, c] = W[i]
    return 0


_early_stop = _jit.kernel(_early_stop_py, error_model="numpy")


def stops_at_early_step(M: np.ndarray, B: np.ndarray) -> bool:
    """Whether the screened attempt of :func:`smith_factors` on ``(M, [B, ...])`` stops at
    squaring ``SMITH_EARLY_STEP`` on its first right-hand side, decided before it: the
    window sums ``w_k = sum_{2^k <= j < 2^(k+1)} ||M^j B||_F^2`` (k <= 4, j < 32) from 31
    products ``M V`` of a compiled loop instead of four squarings of ``M`` and the products
    with the growing factor (n = 64: ~20 us instead of ~100). The same test on the same sums
    (computed in another order: they agree to rounding): no window k <= 4 negligible
    (``w_k > 4 eps^2 sum_{j < 2^k}``, the attempt's convergence test with a margin of 4) and
    ``t_4 (1 + t_4) <= w_4 / w_3 <= 2``. True only then; False (try the attempt) otherwise,
    and whenever the compiled kernels are off or ``n > SMITH_SCREEN_N``. It only chooses the
    path: a True for an ``M`` the attempt would have accepted would cost time (the Schur
    path), never accuracy."""
    n = M.shape[0]
    kern = _early_stop.compiled() if 0 < n <= SMITH_SCREEN_N else None
    if kern is None or M.dtype != np.float64 or B.dtype != np.float64 or B.shape[1] == 0:
        return False
    big = float(abs(B).max())
    if not 0.0 < big < np.inf:
        return False
    k = SMITH_EARLY_STEP
    return bool(kern(np.asfortranarray(M), np.array(B / big, order="F"), k, _window_ratio(k),
                     2.0, 4.0 * _EPS * _EPS, EARLY_FALSE_RATIO))


def smith_promising(M: np.ndarray, B: np.ndarray) -> bool:
    """Cheap screen before a Smith attempt above ``SMITH_SCREEN_N`` states: 32 products
    ``V <- M V`` from ``V = B`` give the decay rate ``g = (||M^32 B||_F / ||M^16 B||_F)^(1/16)``
    of the very sums the iteration accumulates; ``True`` when ``g < SMITH_SCREEN_RATIO``.

    A failed attempt costs up to ``SMITH_AUTO_ITER`` squarings (about one Schur
    decomposition at n = 1024) before the Schur path; this screen costs 32 matrix-vector
    blocks. It only chooses the path (Smith certifies its own convergence); it is
    conservative: Smith converges for spectral radii up to about 0.99, while random dense
    A with spectral radius 0.98 already give g ~ 0.97 here (the bulk of the spectrum
    still decays at step 16-32).
    """
    V = np.asarray(B, dtype=np.float64)
    if V.ndim == 1:
        V = V[:, None]
    logn = 0.0  # log ||M^j B||_F - log ||B||_F, accumulated with renormalisation
    log16 = 0.0
    with np.errstate(over="ignore", invalid="ignore"):
        for j in range(33):
            if j:
                V = M @ V
            big = float(np.max(np.abs(V), initial=0.0))
            if big == 0.0:  # M^j B = 0: the sum is finite (Smith converges) unless B = 0
                return j > 0
            if not np.isfinite(big):
                return False
            V = V / big
            nv = float(np.linalg.norm(V))  # in [1, sqrt(size)]: no under/overflow
            V = V / nv
            if j:
                logn += math.log(big) + math.log(nv)
            if j == 16:
                log16 = logn
    return (logn - log16) / 16.0 < math.log(SMITH_SCREEN_RATIO)


def try_smith(n: int, M: np.ndarray, B: np.ndarray) -> bool:
    """Whether ``method="auto"`` tries the Smith iteration for order n (real dense ``M``,
    right-hand side ``B`` of the sums ``M^k B``): up to ``SMITH_SCREEN_N`` always (the
    attempt screens itself from squaring ``SMITH_EARLY_STEP`` on, ``screen=True``: cheaper
    than this function's 32 products there), up to ``SMITH_MAX_N`` when
    :func:`smith_promising`."""
    return 0 < n <= SMITH_MAX_N and (n <= SMITH_SCREEN_N or smith_promising(M, B))


def _fro2(X: np.ndarray) -> float:
    """Squared Frobenius norm of a contiguous (C or Fortran) array, without a copy."""
    v = X.ravel(order="K")
    return float(v @ v)


def smith_factor(M, B, transpose, max_iter, max_growth, screen=False):
    """The factor of one right-hand side by :func:`smith_factors` (``None`` as there)."""
    out = smith_factors(M, [B], [transpose], max_iter=max_iter, max_growth=max_growth,
                        screen=screen)
    return None if out is None else out[0][0]


def _qr_triangle(S: np.ndarray, n: int) -> np.ndarray:
    """Upper triangular (n, n) ``R`` (Fortran order) with ``R^T R = S^T S``, ``S`` (k >= n, n)."""
    # f2py's default lwork is the minimum, n: LAPACK then runs the unblocked dgeqr2
    # (n = 1024: 0.22 s instead of 0.06 s); 64 n lets it block
    R, _, _, info = lapack.dgeqrf(S, lwork=max(64 * S.shape[1], 1), overwrite_a=1)
    if info != 0:  # pragma: no cover - LAPACK argument errors only
        raise SolverError(f"LAPACK dgeqrf failed with info={info}")
    R = np.array(R[:n], order="F")
    R[_strict_lower(n)] = 0.0  # = np.triu, without its mask (n = 16: 3 us instead of 8)
    return R


@functools.lru_cache(maxsize=4)
def _strict_lower(n: int):
    return np.tril_indices(n, -1)


def _square_factor(Rt: np.ndarray, n: int) -> np.ndarray:
    """``L = Rt^T`` padded with zero columns to (n, n)."""
    w = Rt.shape[0]
    if w == n:
        return Rt.T
    L = np.zeros((n, n))
    L[:, :w] = Rt.T
    return L
