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

Sparse solver hook
------------------
``solver`` is a callable ``solver(M) -> obj`` receiving ``M = A - mu I`` as a
``scipy.sparse.csc_matrix`` (complex for complex ``mu``) and returning an object with
``obj.solve(rhs, trans)`` for a dense ``rhs`` of shape (n, k), ``trans`` in
``{"N", "T"}`` (``M x = rhs`` or ``M^T x = rhs``) -- the interface of
:func:`scipy.sparse.linalg.splu`, which :func:`splu_solver` wraps and which is the default.
Pass a distributed or GPU factorisation with the same two methods where one machine's LU is
not enough.
"""

from __future__ import annotations

import math
import time
import warnings
from dataclasses import dataclass

import numpy as np
import scipy.linalg as sla
import scipy.sparse as sp

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

_ARNOLDI_STEPS = 20  # Arnoldi steps with A
_SI_STEPS = 12  # shift-invert Arnoldi steps with (A - mu_0 I)^{-1}
_MAX_SHIFTS = 24
#: Cost of one sparse LU in single-column solves, for choosing the number of shifts (a
#: fixed model, so that the shifts depend on the input only; measured with splu on 2-D
#: grids, n = 1e3...1e5: 40-140).
_LU_COST_IN_SOLVES = 100.0
#: Relative ADI residual beyond which the iteration is declared divergent (unstable A).
_DIVERGED = 1e8


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
    "a finite-horizon Gramian": "pass horizon=None (infinite horizon, low-rank ADI factors)",
    "solve_discrete_lyapunov()": "for Q = B B^T of low rank use lti.lyapunov_factor(A, B), "
    "a low-rank ADI factor (n x k)",
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


def splu_solver(M):
    """Default sparse factorisation hook: :func:`scipy.sparse.linalg.splu` of ``M``.

    Parameters
    ----------
    M : scipy.sparse matrix, shape (n, n)
        ``A - mu I`` (real or complex).

    Returns
    -------
    scipy.sparse.linalg.SuperLU
        Has ``solve(rhs, trans)`` with ``trans`` in ``{"N", "T"}``.

    Notes
    -----
    A structurally symmetric pattern uses the ``MMD_AT_PLUS_A`` ordering (about half the
    fill of the default for 2-D grids, hence faster solves); other patterns ``COLAMD``.
    """
    from scipy.sparse.linalg import splu

    M = sp.csc_matrix(M)
    S = M.astype(bool)
    symmetric = (S != S.T).nnz == 0
    return splu(M, permc_spec="MMD_AT_PLUS_A" if symmetric else "COLAMD")


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
        The ADI shifts ``mu`` used (``A - mu I`` factorised once each).
    converged : bool
        Whether ``adi_residual <= tol``.
    """

    Z: np.ndarray
    residual: float
    rel_residual: float
    adi_residual: float
    iterations: int
    shifts: np.ndarray
    converged: bool

    @property
    def rank(self) -> int:
        """Number of columns k of ``Z``."""
        return self.Z.shape[1]


class _ShiftedSolves:
    """Cache of factorisations of ``A - mu I``, one per distinct shift, both orientations."""

    def __init__(self, A: sp.csr_matrix, solver):
        self.A = A
        self.solver = splu_solver if solver is None else solver
        self.cache: dict[complex, object] = {}
        self.t_factor: list[float] = []
        self.t_solve: list[float] = []  # seconds per right-hand-side column

    def solve(self, mu: complex, R: np.ndarray, trans: bool) -> np.ndarray:
        key = complex(mu)
        if key not in self.cache:
            n = self.A.shape[0]
            dtype = np.float64 if key.imag == 0 else np.complex128
            shift = key.real if key.imag == 0 else key
            M = self.A.astype(dtype) - shift * sp.eye(n, dtype=dtype)
            t = time.perf_counter()
            try:
                self.cache[key] = self.solver(sp.csc_matrix(M))
            except RuntimeError as exc:  # splu: "Factor is exactly singular"
                raise SolverError(f"sparse LU of A - mu I failed at mu = {key:.6g}") from exc
            self.t_factor.append(time.perf_counter() - t)
        lu, tr = self.cache[key], "T" if trans else "N"
        t = time.perf_counter()
        if key.imag != 0:
            X = np.asarray(lu.solve(np.asfortranarray(R, dtype=np.complex128), trans=tr))
        elif np.iscomplexobj(R):  # real factorisation, complex data: two real solves
            RR = np.asfortranarray(np.hstack([R.real, R.imag]))
            XX = np.asarray(lu.solve(RR, trans=tr)).reshape(RR.shape)
            X = XX[:, : R.shape[1]] + 1j * XX[:, R.shape[1] :]
        else:
            X = np.asarray(lu.solve(np.asfortranarray(R), trans=tr))
        self.t_solve.append((time.perf_counter() - t) / max(R.shape[1], 1))
        return X.reshape(R.shape)


# ------------------------------------------------------------------------- shifts


def _arnoldi_ritz(op, v0: np.ndarray, k: int) -> np.ndarray:
    """Ritz values of ``op`` from k Arnoldi steps started at ``v0`` (complex128)."""
    n = v0.size
    k = min(k, n)
    V = np.zeros((n, k + 1), dtype=v0.dtype)
    H = np.zeros((k + 1, k), dtype=v0.dtype)
    V[:, 0] = v0 / np.linalg.norm(v0)
    j_end = k
    for j in range(k):
        w = op(V[:, j])
        for _ in range(2):  # classical Gram-Schmidt, twice
            h = V[:, : j + 1].conj().T @ w
            w = w - V[:, : j + 1] @ h
            H[: j + 1, j] += h
        H[j + 1, j] = np.linalg.norm(w)
        if H[j + 1, j] <= 1e-12 * np.linalg.norm(H[: j + 2, j]):
            j_end = j + 1
            break
        V[:, j + 1] = w / H[j + 1, j]
    return np.linalg.eigvals(H[:j_end, :j_end]).astype(np.complex128)


def _cayley(lam: np.ndarray) -> np.ndarray:
    """``f = (lambda - 1) / (lambda + 1)``: Stein spectrum -> continuous spectrum."""
    return (lam - 1.0) / (lam + 1.0)


def _mu_of_p(p: complex) -> complex:
    return (1.0 - p) / (1.0 + p)


def _adi_gain(P: np.ndarray, F: np.ndarray) -> np.ndarray:
    """``prod_j |(f - conj(p_j)) / (f + p_j)|`` for each f: one ADI cycle's reduction."""
    out = np.ones(F.shape, dtype=np.float64)
    for p in P:
        out *= np.abs((F - np.conj(p)) / (F + p))
    return out


def _penzl(R: np.ndarray, J: int) -> np.ndarray:
    """Penzl's heuristic: J shifts from the candidate set R (Re R < 0), conjugates paired."""
    cands = np.unique(np.round(R, 14))
    if cands.size == 0:
        raise SolverError("no stable Ritz values to choose ADI shifts from")

    def with_conj(p):
        return [p] if abs(p.imag) <= 1e-12 * abs(p) else [p, np.conj(p)]

    best, best_val = None, np.inf
    for p in cands:  # first shift: minimise the max gain over the candidate set
        val = float(np.max(_adi_gain(np.array(with_conj(p)), cands)))
        if val < best_val:
            best, best_val = p, val
    P = with_conj(best)
    while len(P) < J:
        g = _adi_gain(np.array(P), cands)
        p = cands[int(np.argmax(g))]
        if np.max(g) <= 0:
            break
        P.extend(with_conj(p))
    return np.array(P)


def _log_shifts(a: float, b: float, J: int) -> np.ndarray:
    """J real shifts ``-a (b/a)^((j - 1/2)/J)`` on ``[a, b]`` (near-optimal for real
    spectra in ``[-b, -a]``)."""
    if J == 1 or b <= a:
        return np.array([-math.sqrt(a * b)], dtype=np.complex128)
    j = np.arange(J) + 0.5
    return (-a * (b / a) ** (j / J)).astype(np.complex128)


def _auto_shifts(A: sp.csr_matrix, B: np.ndarray, solves: _ShiftedSolves, tol: float,
                 n_shifts: int | None, trans: bool = False) -> np.ndarray:
    """ADI shifts ``p`` (continuous side, Re p < 0) from Ritz values; see module notes."""
    n = A.shape[0]
    rng = np.random.default_rng(0)
    v0 = B @ np.ones(B.shape[1]) + 1e-3 * np.linalg.norm(B) / math.sqrt(n) * rng.standard_normal(n)
    if not np.any(v0):
        v0 = rng.standard_normal(n)
    v0 = v0.astype(np.complex128)
    ritz_A = _arnoldi_ritz((lambda v: A.T @ v) if trans else (lambda v: A @ v), v0,
                           _ARNOLDI_STEPS)
    inside = ritz_A[np.abs(ritz_A) < 1.0]
    if inside.size == 0:
        raise UnstableSystemError(
            "the Ritz values of the sparse `A` all lie on or outside the unit circle "
            f"(largest modulus {np.max(np.abs(ritz_A)):.6g}); `A` must be Schur-stable"
        )
    # first shift: mirror of the Ritz value closest to lambda = 1 (slowest decay)
    f_all = _cayley(inside)
    theta = inside[int(np.argmin(np.abs(f_all)))]
    theta = complex(min(abs(theta), 1.0 - 1e-8) * np.exp(1j * np.angle(theta)))
    if abs(theta.imag) <= 1e-10:
        theta = complex(theta.real)
    mu0 = 1.0 / theta if theta != 0 else complex(2.0)
    if mu0.imag == 0 and mu0.real < 0:
        mu0 = complex(-mu0.real)  # prefer the slow end near +1
    si = _arnoldi_ritz(lambda v: solves.solve(mu0, v[:, None], trans)[:, 0], v0, _SI_STEPS)
    si = si[np.abs(si) > 0]
    ritz_si = mu0 + 1.0 / si
    ritz = np.concatenate([inside, ritz_si[np.abs(ritz_si) < 1.0]])
    F = _cayley(ritz)
    F = F[np.real(F) < 0]
    p0 = _cayley(1.0 / mu0)  # the shift whose LU already exists
    real_set = np.all(np.abs(F.imag) <= 1e-8 * np.abs(F)) and abs(p0.imag) == 0
    if real_set:
        a = float(np.min(-F.real))
        b = float(np.max(-F.real))
        a = min(a, -p0.real)
        t_sol = float(max(B.shape[1], 1))  # in units of one single-column solve
        t_lu = _LU_COST_IN_SOLVES
        grid = -np.geomspace(a, b, 400)
        best = None
        for J in ([n_shifts] if n_shifts else range(1, _MAX_SHIFTS + 1)):
            P = _log_shifts(a, b, J)
            k = int(np.argmin(np.abs(np.log(-P.real) - math.log(-p0.real))))
            P[k] = p0
            gain = float(np.max(_adi_gain(P, grid)))
            cycles = math.ceil(0.5 * math.log(tol) / math.log(gain)) if gain < 1 else 10**6
            cost = (J - 1) * t_lu + 2.0 * cycles * J * t_sol
            if best is None or cost < best[0]:
                best = (cost, P)
        P = best[1]
    else:
        J = n_shifts or 10
        P = _penzl(np.concatenate([F, [p0]]), J)
        if not np.any(np.isclose(P, p0)):
            P = np.concatenate([[p0], P])
    # order: cycle from the slow end (smallest |p|) to the fast end
    return P[np.argsort(np.abs(P), kind="stable")]


def _pair_shifts(P: np.ndarray) -> list[complex]:
    """Keep one member (Im > 0) of each conjugate pair, the real ones as they are."""
    out = []
    for p in P:
        p = complex(p)
        if abs(p.imag) <= 1e-12 * abs(p):
            out.append(complex(p.real))
        elif p.imag > 0:
            out.append(p)
        elif not any(np.isclose(np.conj(p), q) for q in P):
            out.append(np.conj(p))
    return out


# ------------------------------------------------------------------------- ADI


def _adi(solves: _ShiftedSolves, B: np.ndarray, trans: bool, shifts: list[complex], tol: float,
         max_iter: int):
    """Low-rank ADI in Stein form. Returns ``(Z, W, iterations, rel_adi_residual)``."""
    n, m = B.shape
    scale = float(np.linalg.norm(B.T @ B, 2))
    if scale == 0.0:
        return np.zeros((n, 0)), B.copy(), 0, 0.0
    W = B.copy()
    cols = []
    it, j = 0, 0
    res = 1.0
    while it < max_iter:
        p = shifts[j % len(shifts)]
        j += 1
        mu = _mu_of_p(p)
        Y = solves.solve(mu, W, trans)
        V = (1.0 + mu) * Y / math.sqrt(2.0)  # (F + p I)^{-1} W_F
        U = 0.5 * (1.0 + mu) * (W + (1.0 + mu) * Y)  # (A + I) V / sqrt(2)
        if p.imag == 0:
            pr = p.real
            cols.append(math.sqrt(-2.0 * pr) * V.real)
            W = W - 2.0 * pr * U.real
            it += 1
        else:
            g = 2.0 * math.sqrt(-p.real)
            d = p.real / p.imag
            Vr = V.real + d * V.imag
            cols.append(g * Vr)
            cols.append(g * math.sqrt(d * d + 1.0) * V.imag)
            W = W + g * g * (U.real + d * U.imag)
            it += 2
        res = float(np.linalg.norm(W.T @ W, 2)) / scale
        if not np.isfinite(res):
            raise SolverError("low-rank ADI diverged (non-finite residual); is `A` stable?")
        if res > _DIVERGED:  # a step maps a mode lambda to (mu lambda - 1)/(lambda - mu):
            raise UnstableSystemError(  # a contraction iff |lambda| < 1
                f"low-rank ADI residual grew to {res:.3g} times ||B^T B|| after {it} steps: "
                "`A` must be Schur-stable (a mode with |lambda| > 1 grows at every step)"
            )
        if res <= tol:
            break
    Z = np.hstack(cols) if cols else np.zeros((n, 0))
    return Z, W, it, res


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
    """
    Z = np.asarray(Z, dtype=np.float64)
    B = np.asarray(B, dtype=np.float64)
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


def _user_shifts(shifts) -> np.ndarray:
    mu = np.atleast_1d(np.asarray(shifts, dtype=np.complex128))
    if mu.ndim != 1 or mu.size == 0 or not np.all(np.isfinite(mu)):
        raise InvalidArgumentError("`shifts` must be 'auto' or a non-empty 1-D array of mu")
    if np.any(np.abs(mu) <= 1.0):
        raise InvalidArgumentError(
            f"ADI shifts `mu` must lie outside the unit disk (|mu| > 1); got min |mu| = "
            f"{np.min(np.abs(mu)):.6g}"
        )
    return _cayley(1.0 / mu)  # p = (1 - mu)/(1 + mu) = f(1/mu)


def _finish(A, Z, B, transpose, W_res, it, P, tol, ctol) -> LowRankFactor:
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
    r = lowrank_stein_residual(A, Z, B, transpose=transpose) if scale else 0.0
    mus = np.array([_mu_of_p(p) for p in P], dtype=np.complex128)
    Z.setflags(write=False)
    mus.setflags(write=False)
    return LowRankFactor(
        Z=Z, residual=r, rel_residual=r / scale if scale else 0.0, adi_residual=W_res,
        iterations=it, shifts=mus, converged=W_res <= tol,
    )


def lowrank_gramian_factors(A, B, C, *, tol: float = 1e-10, shifts="auto",
                            n_shifts: int | None = None, max_iter: int = 500, solver=None,
                            compress: bool = True):
    """Low-rank factors of both Gramians of a sparse system, sharing shifts and LUs.

    Parameters
    ----------
    A : scipy.sparse matrix, shape (n, n)
        Schur-stable state matrix.
    B : array_like, shape (n, m)
    C : array_like, shape (p, n)
    tol, shifts, n_shifts, max_iter, solver, compress
        As in :func:`lowrank_factor`.

    Returns
    -------
    (LowRankFactor, LowRankFactor)
        Controllability (``A, B``) and observability (``A^T, C^T``) factors; the second uses
        the transposed solves of the same factorisations.
    """
    A = as_sparse_state_matrix("A", A) if is_sparse(A) else sp.csr_matrix(as_float_matrix("A", A))
    n = A.shape[0]
    B = _check_rhs("B", B, n)
    Ct = _check_rhs("C^T", np.asarray(C, dtype=np.float64).T, n)
    tol = _check_tol(tol)
    solves = _ShiftedSolves(A, solver)
    both = np.hstack([B / max(np.linalg.norm(B), 1e-300), Ct / max(np.linalg.norm(Ct), 1e-300)])
    P = (_auto_shifts(A, both, solves, tol, n_shifts) if isinstance(shifts, str)
         else _user_shifts(shifts))
    if isinstance(shifts, str) and shifts != "auto":
        raise InvalidArgumentError(f"`shifts` must be 'auto' or an array; got {shifts!r}")
    plist = _pair_shifts(P)
    ctol = 0.05 * tol if compress else None
    out = []
    for R, trans in ((B, False), (Ct, True)):
        Z, _, it, res = _adi(solves, R, trans, plist, tol, max_iter)
        out.append(_finish(A, Z, R, trans, res, it, P, tol, ctol))
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
        ones in conjugate pairs), cycled.
    n_shifts : int, optional
        Number of automatic shifts (each costs one sparse LU); ``None`` chooses it by the
        cost model of the module notes for real Ritz spectra, 10 otherwise.
    max_iter : int, optional
        Maximum number of ADI steps.
    solver : callable, optional
        Sparse factorisation hook ``solver(M) -> obj`` with ``obj.solve(rhs, trans)``
        (default :func:`splu_solver`, i.e. :func:`scipy.sparse.linalg.splu`).
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
        No Ritz value of ``A`` inside the unit circle, or a diverging ADI residual.
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
    tol = _check_tol(tol)
    if isinstance(shifts, str) and shifts != "auto":
        raise InvalidArgumentError(f"`shifts` must be 'auto' or an array; got {shifts!r}")
    solves = _ShiftedSolves(A, solver)
    P = (_auto_shifts(A, B, solves, tol, n_shifts, trans=transpose)
         if isinstance(shifts, str) else _user_shifts(shifts))
    Z, _, it, res = _adi(solves, B, transpose, _pair_shifts(P), tol, max_iter)
    return _finish(A, Z, B, transpose, res, it, P, tol, 0.05 * tol if compress else None)
