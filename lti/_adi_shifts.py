"""ADI machinery shared by :mod:`lti.lowrank`: the cache of sparse factorisations of
``A - mu I`` (one per distinct shift, both orientations) and the automatic choice of shifts
from Ritz values (see the module notes of :mod:`lti.lowrank`)."""

from __future__ import annotations

import math
import time

import numpy as np
import scipy.sparse as sp

from lti._validation import stability_margin
from lti.exceptions import InvalidArgumentError, ShapeError, SolverError, UnstableSystemError

__all__ = ["SMITH", "ShiftedSolves", "auto_shifts", "cayley", "is_nilpotent_pattern", "mu_of_p",
           "pair_shifts", "projection_shifts", "splu_solver", "user_shifts"]

_ARNOLDI_STEPS = 20  # Arnoldi steps with A
_SI_STEPS = 12  # shift-invert Arnoldi steps with (A - mu_0 I)^{-1}
_MAX_SHIFTS = 24
#: Cost of one sparse LU in single-column solves, for choosing the number of shifts (a
#: fixed model, so that the shifts depend on the input only; measured with splu on 2-D
#: grids, n = 1e3...1e5: 40-140).
_LU_COST_IN_SOLVES = 100.0
#: The continuous-side shift ``p = -1``, i.e. ``mu = inf``: a Smith step ``Z <- [Z, W]``,
#: ``W <- A W`` (the ADI shift at the eigenvalue 0; no factorisation).
SMITH = complex(-1.0)
#: A Ritz pair with residual at most this (absolute) counts as an eigenvalue of ``A`` for
#: the stability check of :func:`auto_shifts`.
_RITZ_RES = 1e-8
#: Ritz values of ``A`` with modulus above ``1 - _NEAR_CIRCLE`` away from the first shift
#: get a short shift-invert run of their own (the stability check near -1, say).
_NEAR_CIRCLE = 1e-3
#: Automatic and projection shifts with ``|mu|`` above this become a Smith step.
_SMITH_MU = 1e4


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


class ShiftedSolves:
    """Cache of factorisations of ``A - mu I``, one per distinct shift, both orientations."""

    def __init__(self, A: sp.csr_matrix, solver):
        if solver is not None and not callable(solver):
            raise InvalidArgumentError(
                "`solver` must be a callable solver(M) -> obj with obj.solve(rhs, trans) "
                f"(like scipy.sparse.linalg.splu); got {type(solver).__name__}"
            )
        self.A = A
        self.solver = splu_solver if solver is None else solver
        self.nilpotent = is_nilpotent_pattern(A)
        self.cache: dict[complex, object] = {}
        #: Largest modulus among the Ritz values of ``A`` inside the unit circle that
        #: :func:`auto_shifts` computed (0 for a nilpotent pattern; None before / without):
        #: a lower estimate of the spectral radius, for the conditioning ``1 / (1 - rho^2)``.
        self.ritz_radius: float | None = None
        #: Whether stalled ADI cycles replace the shifts by projection shifts (set by
        #: :func:`auto_shifts` for a spectrum that is not real: Penzl's heuristic there
        #: rests on a few Ritz values, and a lightly damped spectrum along the imaginary
        #: axis of the Cayley side is not covered by them); the shifts so added (``p``).
        self.adaptive = False
        self.added: list[complex] = []
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
                lu = self.solver(sp.csc_matrix(M))
            except RuntimeError as exc:  # splu: "Factor is exactly singular"
                raise SolverError(f"sparse LU of A - mu I failed at mu = {key:.6g}") from exc
            if not callable(getattr(lu, "solve", None)):
                raise InvalidArgumentError(
                    "the `solver` hook must return an object with a method solve(rhs, trans) "
                    f"(like scipy.sparse.linalg.splu's SuperLU); got {type(lu).__name__}"
                )
            self.cache[key] = lu
            self.t_factor.append(time.perf_counter() - t)
        lu, tr = self.cache[key], "T" if trans else "N"
        t = time.perf_counter()
        if key.imag != 0:
            X = np.asarray(lu.solve(np.asfortranarray(R, dtype=np.complex128), trans=tr))
        elif np.iscomplexobj(R):  # real factorisation, complex data: two real solves
            RR = np.asfortranarray(np.hstack([R.real, R.imag]))
            XX = _checked_solution(np.asarray(lu.solve(RR, trans=tr)), RR, key, tr)
            X = XX[:, : R.shape[1]] + 1j * XX[:, R.shape[1] :]
        else:
            X = np.asarray(lu.solve(np.asfortranarray(R), trans=tr))
        self.t_solve.append((time.perf_counter() - t) / max(R.shape[1], 1))
        return _checked_solution(X, R, key, tr)


def _checked_solution(X: np.ndarray, R: np.ndarray, mu: complex, tr: str) -> np.ndarray:
    """The solver hook's answer for the right-hand side ``R`` (n, k): shape (n, k), or (n,)
    for k = 1 (scipy's 1-D convention), finite; else a typed error naming the hook."""
    if X.shape != R.shape and not (R.shape[1] == 1 and X.shape == (R.shape[0],)):
        raise ShapeError(
            f"the sparse solver's solve(rhs, trans={tr!r}) returned shape {X.shape} for a "
            f"right-hand side of shape {R.shape} (mu = {mu:.6g}); it must return the "
            "solution with the shape of rhs"
        )
    if not np.all(np.isfinite(X)):
        raise SolverError(
            f"the sparse solver returned NaN or inf for A - mu I at mu = {mu:.6g} "
            f"(trans={tr!r}); is the factorisation singular?"
        )
    return X.reshape(R.shape)


def is_nilpotent_pattern(A: sp.csr_matrix) -> bool:
    """True when the directed graph of ``A``'s nonzeros is acyclic (no self-loops, every
    strongly connected component one node): ``A`` is then a permuted strictly triangular
    matrix, nilpotent, with every eigenvalue exactly 0 (delay lines, FIR chains)."""
    from scipy.sparse.csgraph import connected_components

    n = A.shape[0]
    if n == 0 or np.any(A.diagonal()):
        return n == 0
    ncomp, _ = connected_components(A, directed=True, connection="strong")
    return ncomp == n


# ------------------------------------------------------------------------- shifts


def _arnoldi_ritz(op, v0: np.ndarray, k: int, residuals: bool = False):
    """Ritz values of ``op`` from k Arnoldi steps started at ``v0`` (complex128); with
    `residuals`, also ``||op x - theta x||`` of each unit Ritz vector x."""
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
    if not residuals:
        return np.linalg.eigvals(H[:j_end, :j_end]).astype(np.complex128)
    theta, Y = np.linalg.eig(H[:j_end, :j_end])
    Y = Y / np.linalg.norm(Y, axis=0)
    return theta.astype(np.complex128), np.abs(H[j_end, j_end - 1]) * np.abs(Y[-1])


def cayley(lam: np.ndarray) -> np.ndarray:
    """``f = (lambda - 1) / (lambda + 1)``: Stein spectrum -> continuous spectrum."""
    return (lam - 1.0) / (lam + 1.0)


def mu_of_p(p: complex) -> complex:
    """``mu = (1 - p) / (1 + p)``; ``inf`` for the Smith shift ``p = -1``."""
    if p == SMITH:
        return complex(np.inf)
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


def auto_shifts(A: sp.csr_matrix, B: np.ndarray, solves: ShiftedSolves, tol: float,
                 n_shifts: int | None, trans: bool = False) -> np.ndarray:
    """ADI shifts ``p`` (continuous side, Re p < 0) from Ritz values; see module notes."""
    n = A.shape[0]
    if solves.nilpotent:  # every eigenvalue is 0: Smith steps, exact after <= n
        solves.ritz_radius = 0.0
        return np.array([SMITH])
    rng = np.random.default_rng(0)
    v0 = B @ np.ones(B.shape[1]) + 1e-3 * np.linalg.norm(B) / math.sqrt(n) * rng.standard_normal(n)
    if not np.any(v0):
        v0 = rng.standard_normal(n)
    v0 = v0.astype(np.complex128)
    ritz_A, res_A = _arnoldi_ritz((lambda v: A.T @ v) if trans else (lambda v: A @ v), v0,
                                  _ARNOLDI_STEPS, residuals=True)
    absA = abs(A)
    norm_2 = math.sqrt(float(absA.sum(axis=0).max()) * float(absA.sum(axis=1).max()))
    margin = stability_margin(n, float(np.linalg.norm(A.data)))  # ||A||_F, as the dense check
    _check_ritz_stable(ritz_A, res_A, margin)
    inside = ritz_A[np.abs(ritz_A) < 1.0]
    if inside.size == 0:
        raise UnstableSystemError(
            "the Ritz values of the sparse `A` all lie on or outside the unit circle "
            f"(largest modulus {np.max(np.abs(ritz_A)):.6g}); `A` must be Schur-stable"
        )
    # first shift: mirror of the Ritz value closest to lambda = 1 (slowest decay)
    f_all = cayley(inside)
    theta = inside[int(np.argmin(np.abs(f_all)))]
    theta = complex(min(abs(theta), 1.0 - 1e-8) * np.exp(1j * np.angle(theta)))
    if abs(theta.imag) <= 1e-10:
        theta = complex(theta.real)
    mu0 = 1.0 / theta if theta != 0 else complex(2.0)
    if mu0.imag == 0 and mu0.real < 0:
        mu0 = complex(-mu0.real)  # prefer the slow end near +1
    si, res_si = _arnoldi_ritz(lambda v: solves.solve(mu0, v[:, None], trans)[:, 0], v0,
                               _SI_STEPS, residuals=True)
    nz = np.abs(si) > 0
    si, res_si = si[nz], res_si[nz]
    ritz_si = mu0 + 1.0 / si
    # (A - mu0 I)^{-1} x = nu x + r gives (A - lambda I) x = -(A - mu0 I) r / nu
    _check_ritz_stable(ritz_si, (norm_2 + abs(mu0)) * res_si / np.abs(si), margin)
    ritz = np.concatenate([inside, ritz_si[np.abs(ritz_si) < 1.0]])
    # a Ritz value of A near the circle far from 1 / mu0 (e.g. near -1) is resolved by a
    # short shift-invert run of its own, so that an eigenvalue on the circle there is seen
    far = ritz_A[(np.abs(ritz_A) >= 1.0 - _NEAR_CIRCLE) & (np.abs(ritz_A - 1.0 / mu0) > 0.1)]
    if far.size:
        t1 = complex(far[int(np.argmax(np.abs(far)))])
        mu1 = 1.0 / (min(abs(t1), 1.0 - 1e-8) * np.exp(1j * np.angle(t1)))
        mu1 = complex(mu1.real) if abs(mu1.imag) <= 1e-10 else complex(mu1)
        s1, r1 = _arnoldi_ritz(lambda v: solves.solve(mu1, v[:, None], trans)[:, 0], v0,
                               _SI_STEPS // 2, residuals=True)
        nz = np.abs(s1) > 0
        ritz_1 = mu1 + 1.0 / s1[nz]
        _check_ritz_stable(ritz_1, (norm_2 + abs(mu1)) * r1[nz] / np.abs(s1[nz]), margin)
        ritz = np.concatenate([ritz, ritz_1[np.abs(ritz_1) < 1.0]])
    radius = float(np.max(np.abs(ritz)))
    solves.ritz_radius = radius if solves.ritz_radius is None else max(solves.ritz_radius,
                                                                        radius)
    F = cayley(ritz)
    F = F[np.real(F) < 0]
    p0 = cayley(1.0 / mu0)  # the shift whose LU already exists
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
            if gain <= 0.0:  # the shifts annihilate every Ritz value (e.g. n = 1)
                cycles = 1
            else:
                cycles = math.ceil(0.5 * math.log(tol) / math.log(gain)) if gain < 1 else 10**6
            cost = (J - 1) * t_lu + 2.0 * cycles * J * t_sol
            if best is None or cost < best[0]:
                best = (cost, P)
        P = _smith_for_fast_modes(best[1])  # (log-spaced: p = -1 when a b = 1)
    else:
        solves.adaptive = True  # stalled cycles get projection shifts (lti.lowrank)
        J = n_shifts or 10
        P = _penzl(np.concatenate([F, [p0]]), J)
        if not np.any(np.isclose(P, p0)):
            P = np.concatenate([[p0], P])
        P = _smith_for_fast_modes(P)
    # order: cycle from the slow end (smallest |p|) to the fast end
    return P[np.argsort(np.abs(P), kind="stable")]


def projection_shifts(A: sp.csr_matrix, V: np.ndarray, trans: bool) -> np.ndarray:
    """Projection shifts: Ritz values ``theta`` of ``A`` (``A^T``) on the span of the
    columns `V` (n, k) of the last ADI cycle, mapped to ``p = (theta - 1) / (theta + 1)``
    (those inside the unit circle, ``Re p < 0``), at most ``_MAX_SHIFTS`` chosen by Penzl's
    heuristic, ordered by ``|p|``; empty when none qualifies. (Benner, Kuerschner & Saak
    2014 for the continuous-time ADI: the columns of a cycle span the directions the
    residual still has, so their Ritz values are the eigenvalues the shifts have missed.)
    """
    if V.size == 0:
        return np.zeros(0, dtype=np.complex128)
    Q = np.linalg.qr(V)[0]
    AQ = np.asarray(A.T @ Q if trans else A @ Q)
    theta = np.linalg.eigvals(Q.T @ AQ).astype(np.complex128)
    theta = theta[np.isfinite(theta) & (np.abs(theta) < 1.0 - 1e-12)]
    if theta.size == 0:
        return np.zeros(0, dtype=np.complex128)
    theta[np.abs(theta.imag) <= 1e-10 * np.maximum(np.abs(theta), 1e-300)] = theta.real[
        np.abs(theta.imag) <= 1e-10 * np.maximum(np.abs(theta), 1e-300)]
    F = cayley(theta)
    F = F[np.real(F) < 0]
    if F.size == 0:
        return np.zeros(0, dtype=np.complex128)
    P = _smith_for_fast_modes(_penzl(F, min(F.size, _MAX_SHIFTS)))
    return P[np.argsort(np.abs(P), kind="stable")]


def _smith_for_fast_modes(P: np.ndarray) -> np.ndarray:
    """Shifts with ``|mu| > _SMITH_MU`` (Ritz values ``|theta| < 1 / _SMITH_MU``) replaced
    by one Smith step (``mu = inf``): the ADI formulas with ``mu ~ 1 / theta`` lose about
    ``|mu| eps`` (a dense nilpotent 2 x 2 ``A``, Ritz values ~1e-8: factor residual 5e-7
    while the ADI residual read 1e-10), and the Smith step ``W <- A W`` damps such a mode by
    ``|theta|`` anyway."""
    P = np.asarray(P, dtype=np.complex128)
    big = np.abs(1.0 - P) > _SMITH_MU * np.abs(1.0 + P)
    if not np.any(big):
        return P
    return np.concatenate([P[~big], [SMITH]])


def _check_ritz_stable(theta: np.ndarray, res: np.ndarray, margin: float) -> None:
    """UnstableSystemError for a Ritz value that is an eigenvalue of ``A`` on or outside the
    unit circle up to its residual: ``|theta| - res >= 1 - margin`` with ``res <= 1e-8``
    (an eigenvalue of a matrix within ``res`` of ``A``; within ``res`` of ``theta`` for
    normal ``A``). Ritz values of a non-normal ``A`` outside the circle with larger
    residuals say nothing and are ignored."""
    bad = (np.abs(theta) - res >= 1.0 - margin) & (res <= _RITZ_RES)
    if np.any(bad):
        i = int(np.flatnonzero(bad)[np.argmax(np.abs(theta[bad]))])
        lam, r = complex(theta[i]), float(res[i])
        lam_s = f"{lam.real:.12g}" if abs(lam.imag) <= 1e-14 else f"{lam:.12g}"
        where = "on" if abs(lam) < 1.0 + margin + r else "outside"
        raise UnstableSystemError(
            f"the sparse `A` has an eigenvalue {lam_s} (modulus {abs(lam):.12g}, Ritz "
            f"residual {r:.2g}) {where} the unit circle: `A` must be Schur-stable "
            "(spectral radius < 1) for the infinite-horizon Gramians (for `A` far from "
            f"normal: `A` is within {r:.2g} of a matrix with that eigenvalue, which "
            "low-rank ADI cannot tell apart)"
        )


def pair_shifts(P: np.ndarray) -> list[complex]:
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


def user_shifts(shifts) -> np.ndarray:
    """Continuous-side shifts ``p`` of the user's ``mu`` (``mu = inf``: a Smith step)."""
    mu = np.atleast_1d(np.asarray(shifts, dtype=np.complex128))
    smith = (mu.real == np.inf) & (mu.imag == 0)
    if mu.ndim != 1 or mu.size == 0 or not np.all(np.isfinite(mu) | smith):
        raise InvalidArgumentError(
            "`shifts` must be 'auto' or a non-empty 1-D array of mu (finite, or inf for a "
            "Smith step)"
        )
    finite = mu[~smith]
    if np.any(np.abs(finite) <= 1.0):
        raise InvalidArgumentError(
            f"ADI shifts `mu` must lie outside the unit disk (|mu| > 1); got min |mu| = "
            f"{np.min(np.abs(finite)):.6g}"
        )
    p = np.full(mu.size, SMITH)
    p[~smith] = cayley(1.0 / finite)  # p = (1 - mu)/(1 + mu) = f(1/mu)
    return p
