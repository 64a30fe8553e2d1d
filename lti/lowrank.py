"""Low-rank factors of large sparse Stein (discrete Lyapunov) equations by low-rank ADI.

For a sparse Schur-stable ``A`` (n x n, n up to ~1e5 and beyond) and a dense ``B`` with few
columns, :func:`lowrank_factor` returns a real ``Z`` (n x k, k << n) with

.. math:: A Z Z^T A^T - Z Z^T + B B^T \\approx 0,

never forming an n x n matrix. The observability side uses ``A^T`` and ``C^T``
(``transpose=True``); :func:`lowrank_gramian_factors` computes both with one set of shifts
and one sparse LU per shift.

Method
------
The Cayley map ``F = (A - I)(A + I)^{-1}`` turns the Stein equation into the continuous
Lyapunov equation ``F X + X F^T + G G^T = 0`` with ``G = sqrt(2) (A + I)^{-1} B`` (same
``X``). Low-rank ADI for it (Li & White 2002; Benner, Kuerschner & Saak 2013, with real
arithmetic for complex-conjugate shift pairs) only needs ``(F + p I)^{-1}``, and

.. math:: (F + p I)^{-1} = \\frac{A + I}{1 + p} (A - \\mu I)^{-1},
          \\qquad \\mu = \\frac{1 - p}{1 + p},

so each shift ``p`` (``Re p < 0``, i.e. ``|mu| > 1``) costs one sparse LU of ``A - mu I``.
Carried over to the Stein equation the ADI residual factor becomes
``W = (A + I) W_F / sqrt(2)`` with ``W_0 = B``; the Stein residual is exactly
``A X_j A^T - X_j + B B^T = W_j W_j^T`` (positive semidefinite, so ``X_j <= X``), and its
2-norm ``||W_j^T W_j||`` (an m x m matrix) is the stopping test. For a real shift the step
is ``Y = (A - mu I)^{-1} W``, ``Z <- [Z, sqrt(mu^2 - 1) Y]``, ``W <- mu W + (mu^2 - 1) Y``;
a shift ``mu = 1 / lambda`` at an eigenvalue ``lambda`` of ``A`` annihilates that mode.

Shifts (``shifts="auto"``): Ritz values of ``A`` (Arnoldi with ``A``) and of
``(A - mu_0 I)^{-1}`` (shift-invert Arnoldi reusing the LU of the first shift
``mu_0 = 1 / theta_max``, which resolves the slow modes near ``lambda = 1``) are mapped to
``f = (lambda - 1) / (lambda + 1)``. A (nearly) real Ritz set gets ``J`` log-spaced real
shifts on ``[min |f|, max |f|]``, with ``J`` chosen to minimise the predicted cost to the
tolerance (one LU counted as 100 single-column solves; the ADI gain of a cycle is
evaluated on the interval); otherwise Penzl's heuristic picks ``J``
shifts (complex ones in conjugate pairs) from the Ritz set. The shifts are cycled and the
factorisations are kept, so each distinct shift is factorised once for both Gramians.
In the second case a cycle that leaves more than half of the residual (poles near the unit
circle at many angles lie along the imaginary axis of the Cayley side, where a shift helps
only its neighbours) replaces the shifts by projection shifts: up to 24 of the Ritz values
of ``A`` on the span of the last 48 m columns of ``Z`` (at most 20 times per run; each new
shift is one more LU). A 9-state normal system with poles at ``|lambda| = 0.993...0.9998``
stalled at residual 0.28 after 500 steps before; it converges in 58 steps now.
A Ritz pair that is an eigenvalue of ``A`` on or outside the unit circle up to its residual
(at most 1e-8) raises :class:`~lti.exceptions.UnstableSystemError` naming it; a Ritz value
near the circle far from the first shift (near -1, say) gets a short shift-invert run of
its own for that check. A nilpotent pattern (the graph of ``A`` acyclic: delay lines, FIR
chains, any permuted strictly triangular ``A``) has every eigenvalue at 0, whose shift is
``mu = inf``: a Smith step ``Z <- [Z, W]``, ``W <- A W`` (no factorisation), exact after at
most n steps; such ``A`` gets Smith steps only.

Sparse solver hook
------------------
``solver`` is a callable ``solver(M) -> obj`` receiving ``M = A - mu I`` as a
``scipy.sparse.csc_matrix`` (complex for complex ``mu``) and returning an object with
``obj.solve(rhs, trans)`` for a dense ``rhs`` of shape (n, k), ``trans`` in
``{"N", "T"}`` (``M x = rhs`` or ``M^T x = rhs``), returning the solution with the shape
of ``rhs`` (1-D accepted for k = 1) -- the interface of
:func:`scipy.sparse.linalg.splu`, which :func:`splu_solver` wraps and which is the default.
Each answer is checked (shape, finiteness) and a wrong one raises a typed error.
Pass a distributed or GPU factorisation with the same two methods where one machine's LU is
not enough.
"""

from __future__ import annotations

import math
import numbers
import warnings
from dataclasses import dataclass

import numpy as np
import scipy.linalg as sla
import scipy.sparse as sp

from lti._adi_shifts import (
    SMITH,
    ShiftedSolves,
    auto_shifts,
    mu_of_p,
    pair_shifts,
    projection_shifts,
    splu_solver,
    user_shifts,
)
from lti._validation import as_float_matrix
from lti.exceptions import (
    InvalidArgumentError,
    NonFiniteError,
    ShapeError,
    SolverError,
    SparseNotSupportedError,
    UnstableSystemError,
)

__all__ = [
    "LowRankFactor",
    "as_sparse_state_matrix",
    "dense_only",
    "is_sparse",
    "lowrank_factor",
    "lowrank_gramian_factors",
    "lowrank_stein_residual",
    "splu_solver",
]

#: Relative ADI residual beyond which the iteration is declared divergent (unstable A).
_DIVERGED = 1e8
#: A cycle of shifts that leaves more than this fraction of the ADI residual is stalled:
#: with ``shifts="auto"`` on a spectrum that is not real, the shifts are then replaced by
#: projection shifts from the cycle's columns (:func:`lti._adi_shifts.projection_shifts`).
_STALL = 0.5
#: At most this many projection-shift updates per run (each distinct shift is one LU).
_MAX_UPDATES = 20
#: Projection shifts come from the Ritz values on the span of (at least) this many of the
#: last columns per right-hand-side column.
_PROJ_COLS = 48
_EPS_F = float(np.finfo(np.float64).eps)


def is_sparse(A) -> bool:
    """True for a ``scipy.sparse`` matrix or array."""
    return sp.issparse(A)


_EIGS = "use scipy.sparse.linalg.eigs(G.A, k=6, which='LM') for the dominant poles"
_REDUCE = "reduce the sparse system first (lti.balanced_truncation(G, tol=...).reduced is dense)"
#: What to use instead of a dense-only operation on a sparse system.
SPARSE_ALTERNATIVES = {
    "poles()": _EIGS,
    "spectral_radius()": _EIGS,
    "is_stable()": _EIGS + " (the low-rank solvers check Ritz values themselves)",
    "frequency_response()": _REDUCE + ", or solve (z I - A) X = B with "
    "scipy.sparse.linalg.spsolve at the few points needed",
    "similarity()": "project with T, Ti of shape (n, r), (r, n) from lti.balanced_truncation",
    "an interconnection (G + H, G - H, series)": _REDUCE,
    "to_control()": "python-control systems are dense; " + _REDUCE,
    "an n x n Gramian": "pass factor=True for a low-rank factor (lti.lowrank)",
    "a finite-horizon Gramian": "pass horizon=None, factor=True (infinite horizon, low-rank "
    "ADI factors), or use lti.empirical_gramians(G, horizon=T) (the finite-horizon Gramians, "
    "n x n, by sparse simulation)",
    "solve_discrete_lyapunov()": "for Q = B B^T of low rank use lti.lyapunov_factor(A, B), "
    "a low-rank ADI factor (n x k)",
    "hinf_norm()": _REDUCE + "; its H-infinity norm is within error_bound of G's",
    "hankel_norm_approximation()": _REDUCE + ", then lti.hankel_norm_approximation of "
    "that (the two errors add)",
    "weighted_balanced_truncation()": "for white inputs lti.balanced_truncation(G) (low-rank "
    "factors); otherwise " + _REDUCE + " and weight that",
    "stable_gramian_factors()": "use lti.gramian_factors(G): low-rank ADI factors of both "
    "Gramians (lti.lowrank.lowrank_gramian_factors)",
    "split_unstable()": _EIGS + "; the sparse path (low-rank ADI) needs a Schur-stable A",
    "empirical_gramians() without `horizon`": "pass horizon=T (the sparse simulation "
    "works), or use lti.gramian_factors(G) for the infinite-horizon Gramians' low-rank "
    "factors",
}


def dense_only(what: str, *systems) -> None:
    """Raise :class:`~lti.exceptions.SparseNotSupportedError` when one of `systems` (systems
    or matrices ``A``) is sparse; the message names the alternative of
    ``SPARSE_ALTERNATIVES``."""
    for G in systems:
        A = getattr(G, "A", G)  # a system or the matrix itself
        if is_sparse(A):
            raise SparseNotSupportedError(
                f"{what} needs dense algebra on `A`, which is sparse (n = {A.shape[0]}); "
                f"{SPARSE_ALTERNATIVES.get(what, _REDUCE)}"
            )


def as_sparse_state_matrix(name: str, A) -> sp.csr_matrix:
    """Validated float64 CSR copy of a sparse square matrix (finite entries, read-only
    data)."""
    if np.iscomplexobj(A.data if hasattr(A, "data") else A):
        raise ShapeError(f"`{name}` must be real; got a complex sparse matrix")
    M = sp.csr_matrix(A, dtype=np.float64, copy=True)
    if M.ndim != 2 or M.shape[0] != M.shape[1]:
        raise ShapeError(f"`{name}` must be square; got shape {M.shape}")
    if not np.all(np.isfinite(M.data)):
        raise NonFiniteError(f"`{name}` must be finite; got NaN or inf among its entries")
    M.sum_duplicates()
    M.eliminate_zeros()
    M.data.setflags(write=False)
    return M


@dataclass(frozen=True, eq=False)
class LowRankFactor:
    """A low-rank Gramian factor and how it was obtained.

    Attributes
    ----------
    Z : ndarray, shape (n, k)
        Real factor, ``X ~ Z Z^T``.
    residual : float
        ``||A Z Z^T A^T - Z Z^T + B B^T||_2`` of the returned ``Z`` (``A^T``, ``C^T`` for
        the observability side), computed in low-rank form.
    rel_residual : float
        ``residual / ||B^T B||_2``.
    adi_residual : float
        ``||W^T W||_2 / ||B^T B||_2`` of the last ADI iterate (before column compression):
        the stopping test.
    iterations : int
        ADI steps (a complex pair counts as two).
    shifts : ndarray, shape (J,), complex
        The ADI shifts ``mu`` used (``A - mu I`` factorised once each; ``inf``: a Smith
        step, no factorisation).
    converged : bool
        Whether ``adi_residual <= tol``.
    hsv_rel_error : float or None
        From :func:`lowrank_gramian_factors` with ``hsv_rtol``: the estimated relative
        error of the leading Hankel singular values of the pair (else ``None``).
    radius_estimate : float or None
        With ``shifts="auto"``: the largest modulus among the Ritz values of ``A`` inside
        the unit circle computed for the shifts (0 for a nilpotent pattern), a lower
        estimate of the spectral radius (accurate near 1, where the shift-invert Ritz
        values converge first); :func:`lti.balanced_truncation` takes the conditioning
        ``1 / (1 - rho^2)`` of its noise floor and rounding term from it. ``None`` for
        user shifts.
    """

    Z: np.ndarray
    residual: float
    rel_residual: float
    adi_residual: float
    iterations: int
    shifts: np.ndarray
    converged: bool
    hsv_rel_error: float | None = None
    radius_estimate: float | None = None

    @property
    def rank(self) -> int:
        """Number of columns k of ``Z``."""
        return self.Z.shape[1]


# ------------------------------------------------------------------------- ADI


class _ADIRun:
    """Low-rank ADI in Stein form for one right-hand side, advanced one shift at a time."""

    def __init__(self, solves: ShiftedSolves, B: np.ndarray, trans: bool,
                 shifts: list[complex]):
        self.solves, self.trans, self.shifts = solves, trans, shifts
        self.scale = float(np.linalg.norm(B.T @ B, 2))
        self.W = B.copy()
        self.cols: list[np.ndarray] = []
        self.it, self.j = 0, 0
        self.res = 1.0 if self.scale else 0.0  # ||W^T W|| / ||B^T B||
        self.cycle = (self.res, 0)  # residual and number of columns at the cycle's start
        self.updates = 0

    def step(self) -> None:
        """One shift (a complex pair: two steps); appends columns, updates ``W``."""
        p = self.shifts[self.j % len(self.shifts)]
        self.j += 1
        W = self.W
        if p == SMITH:  # mu = inf: Z <- [Z, W], W <- A W (the limit of the real step)
            self.cols.append(W.copy())
            A = self.solves.A
            self.W = np.asarray(A.T @ W if self.trans else A @ W)
            self.it += 1
            # nilpotent A: W = A^k B vanishes after at most n steps, so growth is transient
            self._update_residual(guard=not self.solves.nilpotent)
            return
        mu = mu_of_p(p)
        Y = self.solves.solve(mu, W, self.trans)
        V = (1.0 + mu) * Y / math.sqrt(2.0)  # (F + p I)^{-1} W_F
        U = 0.5 * (1.0 + mu) * (W + (1.0 + mu) * Y)  # (A + I) V / sqrt(2)
        if p.imag == 0:
            pr = p.real
            self.cols.append(math.sqrt(-2.0 * pr) * V.real)
            self.W = W - 2.0 * pr * U.real
            self.it += 1
        else:
            g = 2.0 * math.sqrt(-p.real)
            d = p.real / p.imag
            Vr = V.real + d * V.imag
            self.cols.append(g * Vr)
            self.cols.append(g * math.sqrt(d * d + 1.0) * V.imag)
            self.W = W + g * g * (U.real + d * U.imag)
            self.it += 2
        self._update_residual()
        if self.j % len(self.shifts) == 0:
            self._end_of_cycle()

    def _end_of_cycle(self) -> None:
        """After a full cycle: a stalled one (residual above ``_STALL`` times its start)
        gets projection shifts in place of the current ones, when the shifts are adaptive
        (the list is shared with the other Gramian's run: both use the new ones)."""
        res0, c0 = self.cycle
        stalled = res0 > 0 and self.res > _STALL * res0
        if (stalled and self.solves.adaptive and self.updates < _MAX_UPDATES
                and len(self.cols) > c0):
            P = projection_shifts(self.solves.A, self._last_columns(c0), self.trans)
            new = pair_shifts(P) if P.size else []
            if new:
                self.shifts[:] = new
                self.solves.added.extend(complex(p) for p in P)
                self.j = 0
                self.updates += 1
        self.cycle = (self.res, len(self.cols))

    def _last_columns(self, c0: int) -> np.ndarray:
        """The last ``max(_PROJ_COLS m, columns since cols[c0])`` columns of ``Z`` (only
        those are stacked: n x 48 m, not the whole factor)."""
        need = max(_PROJ_COLS * self.W.shape[1], sum(c.shape[1] for c in self.cols[c0:]))
        blocks, total = [], 0
        for c in reversed(self.cols):
            blocks.append(c)
            total += c.shape[1]
            if total >= need:
                break
        return np.hstack(blocks[::-1])[:, -need:]

    def _update_residual(self, guard: bool = True) -> None:
        res = float(np.linalg.norm(self.W.T @ self.W, 2)) / self.scale
        if not np.isfinite(res):
            raise SolverError("low-rank ADI diverged (non-finite residual); is `A` stable?")
        if guard and res > _DIVERGED:  # a step maps a mode lambda to
            raise UnstableSystemError(  # (mu lambda - 1)/(lambda - mu): |.| < 1 iff |lambda| < 1
                f"low-rank ADI residual grew to {res:.3g} times ||B^T B|| after {self.it} "
                "steps: `A` must be Schur-stable (a mode with |lambda| > 1 grows at every "
                "step); a stable `A` far from normal (transient growth of ||A^k||) defeats "
                "the iteration too"
            )
        self.res = res

    def run(self, tol: float, max_iter: int) -> None:
        """Steps until ``res <= tol`` or ``max_iter`` steps."""
        while self.scale and self.it < max_iter and self.res > tol:
            self.step()

    @property
    def Z(self) -> np.ndarray:
        n = self.W.shape[0]
        return np.hstack(self.cols) if self.cols else np.zeros((n, 0))


def _adi(solves: ShiftedSolves, B: np.ndarray, trans: bool, shifts: list[complex], tol: float,
         max_iter: int):
    """Low-rank ADI in Stein form. Returns ``(Z, W, iterations, rel_adi_residual)``."""
    run = _ADIRun(solves, B, trans, shifts)
    run.run(tol, max_iter)
    return run.Z, run.W, run.it, run.res


def _refine_hsvs(runs: list[_ADIRun], rtol: float, floor: float,
                 max_iter: int) -> tuple[float, bool]:
    """Continue both ADI runs cycle by cycle until the leading HSVs are accurate.

    The HSVs ``s_i = sigma_i(Zo^T Zc)`` of ADI iterates increase monotonically to the true
    ``sigma_i`` (``Zc Zc^T <= P``, ``Zo Zo^T <= Q``), and their error is proportional to
    the Gramian errors, i.e. to the ADI residuals ``||W^T W||``, which contract by a
    factor ``q`` per cycle of shifts. So the change ``d_i`` over one cycle estimates the
    remaining error as ``d_i q / (1 - q)`` (taken twice, for safety). Cycles continue
    until that estimate is at most ``rtol s_i`` (plus the rounding level of ``Zo^T Zc``)
    for every ``s_i >= floor s_1``, or ``max_iter``. Returns the final estimate
    ``max_i est_i / s_i`` over those values (``inf`` when it could not be formed) and
    whether the rule was met.
    """
    rc, ro = runs
    M = rc.Z.T @ ro.Z  # (kc, ko) = (Zo^T Zc)^T, extended in place below
    s = np.linalg.svd(M, compute_uv=False)
    fro2 = [float(np.sum(rc.Z * rc.Z)), float(np.sum(ro.Z * ro.Z))]  # ||Zc||_F^2, ||Zo||_F^2
    est_rel = np.inf
    while rc.it < max_iter and ro.it < max_iter:
        res0 = (rc.res, ro.res)
        nc, no = len(rc.cols), len(ro.cols)
        for run in runs:
            for _ in range(len(run.shifts)):
                if run.it < max_iter:
                    run.step()
        Zc_old, Zo_old = (np.hstack(r.cols[:k]) for r, k in ((rc, nc), (ro, no)))
        Yc, Yo = np.hstack(rc.cols[nc:]), np.hstack(ro.cols[no:])  # the new columns
        M = np.block([[M, Zc_old.T @ Yo], [Yc.T @ Zo_old, Yc.T @ Yo]])
        s_new = np.linalg.svd(M, compute_uv=False)
        if s_new.size == 0 or s_new[0] == 0.0:  # no Hankel singular value to resolve
            return 0.0, True
        q = max(r1 / r0 if r0 > 0 else 0.0
                for r0, r1 in zip(res0, (rc.res, ro.res), strict=True))
        d = s_new.copy()
        d[: s.size] -= s
        est = 2.0 * np.maximum(d, 0.0) * (q / (1.0 - q)) if q < 1.0 else np.full(d.shape, np.inf)
        lead = s_new >= floor * s_new[0]
        fro2 = [fro2[0] + float(np.sum(Yc * Yc)), fro2[1] + float(np.sum(Yo * Yo))]
        noise = 8.0 * _EPS_F * math.sqrt(fro2[0] * fro2[1])  # rounding level of Zo^T Zc
        est_rel = float(np.max(est[lead] / s_new[lead]))
        s = s_new
        if np.all(est[lead] <= rtol * s_new[lead] + noise):
            return est_rel, True
    return est_rel, False


def _compress_columns(Z: np.ndarray, drop: float) -> np.ndarray:
    """Same ``Z Z^T`` up to a dropped trailing energy ``sum s_i^2 <= drop`` (QR + SVD)."""
    n, k = Z.shape
    if k == 0:
        return Z
    Q, R = np.linalg.qr(Z)
    U, s, _ = sla.svd(R, full_matrices=False, check_finite=False)
    tail = np.cumsum((s**2)[::-1])[::-1]  # tail[i] = sum_{l >= i} s_l^2
    keep = int(np.count_nonzero(tail > drop))
    keep = max(keep, 1)
    return Q @ (U[:, :keep] * s[:keep])


def lowrank_stein_residual(A, Z, B, *, transpose: bool = False) -> float:
    """``||M Z Z^T M^T - Z Z^T + B B^T||_2`` in low-rank form (``M = A`` or ``A^T``).

    Parameters
    ----------
    A : sparse or dense array, shape (n, n)
    Z : ndarray, shape (n, k)
    B : ndarray, shape (n, m)
    transpose : bool, optional
        Use ``A^T``.

    Returns
    -------
    float
        The 2-norm of the residual, from a thin QR of ``[M Z, Z, B]`` (O(n (2k + m)^2)
        flops, nothing n x n): with ``[M Z, Z, B] = Q T`` the residual is
        ``Q (T D T^T) Q^T``, ``D = diag(I, -I, I)``. Its absolute accuracy is about
        ``eps ||Z||^2 ||M||^2`` (the terms cancel).

    Raises
    ------
    ShapeError, NonFiniteError, InvalidArgumentError
        Non-square, complex, non-finite or non-conforming arguments.
    """
    A = as_sparse_state_matrix("A", A) if is_sparse(A) else as_float_matrix("A", A)
    n = A.shape[0]
    if A.shape != (n, n):
        raise ShapeError(f"`A` must be square; got shape {A.shape}")
    Z, B = as_float_matrix("Z", Z), as_float_matrix("B", B)
    for name, X in (("Z", Z), ("B", B)):
        if X.shape[0] != n:
            raise ShapeError(f"`{name}` must have n = {n} rows (A is {n}x{n}); got shape {X.shape}")
    return _stein_residual(A, Z, B, bool(transpose))


def _stein_residual(A, Z: np.ndarray, B: np.ndarray, transpose: bool) -> float:
    """:func:`lowrank_stein_residual` on validated float64 arguments."""
    MZ = (A.T @ Z) if transpose else (A @ Z)
    MZ = np.asarray(MZ)
    k, m = Z.shape[1], B.shape[1]
    T = sla.qr(np.hstack([MZ, Z, B]), mode="r", check_finite=False)[0]
    c = min(T.shape)
    T = T[:c]
    d = np.concatenate([np.ones(k), -np.ones(k), np.ones(m)])
    S = (T * d) @ T.T
    return float(np.max(np.abs(np.linalg.eigvalsh(0.5 * (S + S.T))), initial=0.0))


def _check_tol(tol) -> float:
    if isinstance(tol, bool) or not isinstance(tol, int | float) or not (0 < tol < 1):
        raise InvalidArgumentError(f"`tol` must be a number in (0, 1); got {tol!r}")
    return float(tol)


def _check_options(n_shifts, max_iter, compress) -> None:
    """Typed errors for the integer and flag options of the low-rank solvers."""
    for name, value, lo in (("n_shifts", n_shifts, 1), ("max_iter", max_iter, 1)):
        if value is None and name == "n_shifts":
            continue
        if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < lo:
            raise InvalidArgumentError(
                f"`{name}` must be an integer >= {lo}"
                + (" or None" if name == "n_shifts" else "") + f"; got {value!r}"
            )
    if not isinstance(compress, bool | np.bool_):
        raise InvalidArgumentError(f"`compress` must be True or False; got {compress!r}")


def _check_rhs(name: str, B, n: int) -> np.ndarray:
    B = as_float_matrix(name, B)
    if B.shape[0] != n:
        raise ShapeError(f"`{name}` must have n = {n} rows (A is {n}x{n}); got shape {B.shape}")
    if B.shape[1] > max(64, n // 10):
        raise ShapeError(
            f"`{name}` must have few columns for the low-rank solver (k << n); got {B.shape[1]}"
            f" columns for n = {n} (use the dense solver)"
        )
    return B


def _pow2_scale(X: np.ndarray) -> float:
    """A power of two near ``max |X|`` (1 for a zero ``X``): dividing by it is exact, and
    the iteration then runs on entries of order one whatever the scale of ``B``
    (``||B^T B||`` under- or overflows beyond about 1e+-154 otherwise)."""
    m = float(np.max(np.abs(X), initial=0.0))
    return math.ldexp(1.0, math.frexp(m)[1]) if m > 0.0 else 1.0


def _finish(A, Z, B, transpose, W_res, it, P, tol, ctol, hsv_err=None,
            unscale: float = 1.0, radius: float | None = None) -> LowRankFactor:
    if W_res > tol:
        warnings.warn(
            f"low-rank ADI stopped after {it} steps at relative residual {W_res:.3g} > tol = "
            f"{tol:.3g} (raise max_iter, pass shifts, or check that `A` is Schur-stable with "
            "no eigenvalue on the unit circle)",
            UserWarning,
            stacklevel=3,
        )
    scale = float(np.linalg.norm(B.T @ B, 2))
    if ctol is not None and Z.shape[1]:
        Z = _compress_columns(Z, ctol * scale)
    r = _stein_residual(A, Z, B, transpose) if scale else 0.0
    rel = r / scale if scale else 0.0
    if unscale != 1.0:  # back to the caller's B (exact: a power of two)
        Z = Z * unscale
        with np.errstate(over="ignore", under="ignore"):
            r = r * unscale * unscale
    mus = np.array([mu_of_p(p) for p in P], dtype=np.complex128)  # (those given or chosen)
    Z.setflags(write=False)
    mus.setflags(write=False)
    return LowRankFactor(
        Z=Z, residual=r, rel_residual=rel, adi_residual=W_res,
        iterations=it, shifts=mus, converged=W_res <= tol, hsv_rel_error=hsv_err,
        radius_estimate=radius,
    )


def _empty_factor(hsv_err: float | None = None) -> LowRankFactor:
    """The factor of a system without states (n = 0): nothing to solve."""
    Z, mus = np.zeros((0, 0)), np.zeros(0, dtype=np.complex128)
    Z.setflags(write=False)
    mus.setflags(write=False)
    return LowRankFactor(Z=Z, residual=0.0, rel_residual=0.0, adi_residual=0.0, iterations=0,
                         shifts=mus, converged=True, hsv_rel_error=hsv_err)


def lowrank_gramian_factors(A, B, C, *, tol: float = 1e-10, shifts="auto",
                            n_shifts: int | None = None, max_iter: int = 500, solver=None,
                            compress: bool = True, hsv_rtol: float | None = 1e-9,
                            hsv_floor: float = 1e-6):
    """Low-rank factors of both Gramians of a sparse system, sharing shifts and LUs.

    Parameters
    ----------
    A : scipy.sparse matrix, shape (n, n)
        Schur-stable state matrix.
    B : array_like, shape (n, m)
    C : array_like, shape (p, n)
    tol, shifts, n_shifts, max_iter, solver, compress
        As in :func:`lowrank_factor`.
    hsv_rtol : float or None, optional
        Relative accuracy wanted for the leading Hankel singular values
        ``s_i = sigma_i(Zo^T Zc)``, those with ``s_i >= hsv_floor * s_1``: after both
        residuals reach `tol`, the ADI iterations continue cycle by cycle until the
        estimated error of each such value is at most ``hsv_rtol * s_i`` (see Notes).
        ``None``: stop on the residual alone.
    hsv_floor : float, optional
        Which HSVs `hsv_rtol` applies to, relative to the largest (default ``1e-6``: six
        decades, the range in which reduced orders are usually chosen).

    Returns
    -------
    (LowRankFactor, LowRankFactor)
        Controllability (``A, B``) and observability (``A^T, C^T``) factors; the second uses
        the transposed solves of the same factorisations. ``hsv_rel_error`` holds the final
        estimate of the leading HSVs' relative error (both factors; ``None`` when
        ``hsv_rtol=None``).

    Warns
    -----
    UserWarning
        `max_iter` steps reached before `tol` or the HSV accuracy.

    Notes
    -----
    Residual and HSV error: the ADI iterates satisfy ``Pk = P - Ep``, ``Qk = Q - Eq``
    with ``Ep`` the controllability Gramian of ``(A, Wc)`` and ``Eq`` the observability
    Gramian of ``(A, Wo^T)`` (``Wc``, ``Wo`` the residual factors), both positive
    semidefinite, so ``s_i <= sigma_i``, and by Weyl's inequality

    .. math:: s_i^2 \\le \\sigma_i^2 \\le s_i^2 + \\eta_c^2 + \\eta_o^2,

    ``eta_c`` the Hankel norm of ``(A, Wc, C)``, ``eta_o`` that of ``(A, B, Wo^T)``. The
    errors are quadratic in ``||W||``, i.e. linear in the residuals ``||W^T W||``, and
    grow like ``1 / s_i`` relative to ``s_1`` for the small HSVs: a residual of ``1e-10``
    gives the leading HSV to ~1e-11 but ``sigma_10 ~ 2e-6 sigma_1`` only to ~1e-5 (heat
    equation, ``benchmarks/bench_sparse.py``). Since the ``s_i`` increase monotonically
    and the residuals contract by a factor ``q`` per cycle of shifts, the change ``d_i``
    of ``s_i`` over one cycle estimates the remaining error ``d_i q / (1 - q)``; this is
    the rule `hsv_rtol` applies (with a safety factor 2). It keeps ``Zc Zc^T <= P`` and
    ``Zo Zo^T <= Q`` (plain ADI steps), so the HSVs stay certified lower bounds. The
    column compression then drops at most ``0.05 min(tol, final residual)`` of
    ``||B^T B||``.
    """
    A = as_sparse_state_matrix("A", A) if is_sparse(A) else sp.csr_matrix(as_float_matrix("A", A))
    n = A.shape[0]
    B = _check_rhs("B", B, n)
    Ct = _check_rhs("C^T", as_float_matrix("C", C).T, n)
    sb, sc = _pow2_scale(B), _pow2_scale(Ct)
    B, Ct = B / sb, Ct / sc
    tol = _check_tol(tol)
    _check_options(n_shifts, max_iter, compress)
    if hsv_rtol is not None:
        hsv_rtol = _check_tol(hsv_rtol)
    if (isinstance(hsv_floor, bool) or not isinstance(hsv_floor, int | float)
            or not 0 <= hsv_floor < 1):
        raise InvalidArgumentError(f"`hsv_floor` must be a number in [0, 1); got {hsv_floor!r}")
    if isinstance(shifts, str) and shifts != "auto":
        raise InvalidArgumentError(f"`shifts` must be 'auto' or an array; got {shifts!r}")
    solves = ShiftedSolves(A, solver)
    if n == 0:
        err = None if hsv_rtol is None else 0.0
        return _empty_factor(err), _empty_factor(err)
    both = np.hstack([B / max(np.linalg.norm(B), 1e-300), Ct / max(np.linalg.norm(Ct), 1e-300)])
    P = (auto_shifts(A, both, solves, tol, n_shifts) if isinstance(shifts, str)
         else user_shifts(shifts))
    plist = pair_shifts(P)
    runs = [_ADIRun(solves, R, trans, plist) for R, trans in ((B, False), (Ct, True))]
    for run in runs:
        run.run(tol, max_iter)
    hsv_err = None
    if hsv_rtol is not None and all(r.res <= tol for r in runs):
        hsv_err, met = (_refine_hsvs(runs, hsv_rtol, float(hsv_floor), max_iter)
                        if all(r.scale for r in runs) else (0.0, True))
        if not met:
            warnings.warn(
                f"low-rank ADI stopped after {max(r.it for r in runs)} steps (max_iter) with "
                f"an estimated relative error {hsv_err:.3g} of the leading HSVs > hsv_rtol = "
                f"{hsv_rtol:.3g} (raise max_iter or hsv_rtol)", UserWarning, stacklevel=2)
    out = []
    P = np.concatenate([P, np.asarray(solves.added, dtype=np.complex128)])  # + projection
    for run, R, sr in zip(runs, (B, Ct), (sb, sc), strict=True):
        ctol = 0.05 * min(tol, run.res) if compress else None
        out.append(_finish(A, run.Z, R, run.trans, run.res, run.it, P, tol, ctol, hsv_err, sr,
                           solves.ritz_radius))
    return tuple(out)


def lowrank_factor(A, B, *, transpose: bool = False, tol: float = 1e-10, shifts="auto",
                   n_shifts: int | None = None, max_iter: int = 500, solver=None,
                   compress: bool = True) -> LowRankFactor:
    """Low-rank factor ``Z`` of the Stein equation ``A X A^T - X + B B^T = 0``, ``X ~ Z Z^T``.

    Parameters
    ----------
    A : scipy.sparse matrix, shape (n, n)
        Schur-stable state matrix (kept sparse; dense arrays are accepted and converted).
    B : array_like, shape (n, m)
        Right-hand-side factor with few columns (m << n).
    transpose : bool, optional
        Solve ``A^T X A - X + B B^T = 0`` instead (observability side, pass ``B = C^T``).
    tol : float, optional
        Stop when the ADI residual ``||W^T W||_2 <= tol ||B^T B||_2`` (see Notes).
    shifts : "auto" or array_like of complex, optional
        ``"auto"`` (see the module notes) or the ADI shifts ``mu`` (``|mu| > 1``, complex
        ones in conjugate pairs, ``inf`` for a Smith step), cycled.
    n_shifts : int, optional
        Number of automatic shifts (each costs one sparse LU); ``None`` chooses it by the
        cost model of the module notes for real Ritz spectra, 10 otherwise.
    max_iter : int, optional
        Maximum number of ADI steps.
    solver : callable, optional
        Sparse factorisation hook ``solver(M) -> obj`` with ``obj.solve(rhs, trans)``
        returning an array of the shape of ``rhs`` (or 1-D for one column), see the module
        notes (default :func:`splu_solver`, i.e. :func:`scipy.sparse.linalg.splu`). Another
        answer raises ``ShapeError`` (wrong shape), ``SolverError`` (NaN or inf) or
        ``InvalidArgumentError`` (no ``solve`` method).
    compress : bool, optional
        Compress the columns of ``Z`` (thin QR + SVD), dropping a trailing energy of at most
        ``0.05 tol ||B^T B||``.

    Returns
    -------
    LowRankFactor
        ``Z`` (n x k), the residual of the returned ``Z`` computed in low-rank form, the
        ADI residual, iterations, shifts, ``converged``.

    Raises
    ------
    UnstableSystemError
        An eigenvalue of ``A`` on or outside the unit circle found among the Ritz values
        (named in the message), no Ritz value inside it, or a diverging ADI residual.
    SolverError
        A singular shifted matrix or a diverging iteration.
    ShapeError, NonFiniteError, InvalidArgumentError
        Bad input.

    Notes
    -----
    The ADI residual is exact in exact arithmetic: ``A X_j A^T - X_j + B B^T = W_j W_j^T``
    with ``W_j`` of shape (n, m); since it is positive semidefinite, ``X_j <= X`` (the
    factor never overestimates the Gramian) and the error ``X - X_j`` is the Gramian of
    ``(A, W_j)``. ``residual`` re-evaluates the residual of the compressed factor from
    ``[A Z, Z, B]`` without forming n x n matrices. Reaching ``max_iter`` before ``tol``
    warns (``UserWarning``) and returns ``converged=False``; a residual growing beyond
    ``1e8 ||B^T B||`` raises :class:`~lti.exceptions.UnstableSystemError` (each step maps a
    mode by the factor ``(mu lambda - 1) / (lambda - mu)``, of modulus < 1 exactly
    when ``|lambda| < 1``).

    Examples
    --------
    >>> import numpy as np, scipy.sparse as sp
    >>> from lti.lowrank import lowrank_factor
    >>> n = 400
    >>> A = sp.diags([0.25 * np.ones(n - 1), 0.4 * np.ones(n), 0.25 * np.ones(n - 1)],
    ...              [-1, 0, 1], format="csr")                   # symmetric, rho < 0.9
    >>> B = np.zeros((n, 1)); B[:10] = 1.0
    >>> F = lowrank_factor(A, B, tol=1e-12)
    >>> bool(F.rank < 60 and F.rel_residual < 1e-10 and F.converged)
    True
    """
    A = as_sparse_state_matrix("A", A) if is_sparse(A) else sp.csr_matrix(as_float_matrix("A", A))
    n = A.shape[0]
    B = _check_rhs("B", B, n)
    sb = _pow2_scale(B)
    B = B / sb  # exact; Z is scaled back in _finish
    tol = _check_tol(tol)
    _check_options(n_shifts, max_iter, compress)
    if isinstance(shifts, str) and shifts != "auto":
        raise InvalidArgumentError(f"`shifts` must be 'auto' or an array; got {shifts!r}")
    solves = ShiftedSolves(A, solver)
    if n == 0:
        return _empty_factor()
    P = (auto_shifts(A, B, solves, tol, n_shifts, trans=transpose)
         if isinstance(shifts, str) else user_shifts(shifts))
    Z, _, it, res = _adi(solves, B, transpose, pair_shifts(P), tol, max_iter)
    P = np.concatenate([P, np.asarray(solves.added, dtype=np.complex128)])  # + projection
    return _finish(A, Z, B, transpose, res, it, P, tol, 0.05 * tol if compress else None,
                   unscale=sb, radius=solves.ritz_radius)
