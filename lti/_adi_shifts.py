"""ADI machinery shared by :mod:`lti.lowrank`: the cache of sparse factorisations of
``A - mu I`` (one per distinct shift, both orientations) and the automatic choice of shifts
from Ritz values (see the module notes of :mod:`lti.lowrank`)."""

from __future__ import annotations

import math
import time

import numpy as np
import scipy.sparse as sp

from lti.exceptions import InvalidArgumentError, SolverError, UnstableSystemError

__all__ = ["ShiftedSolves", "auto_shifts", "cayley", "mu_of_p", "pair_shifts", "splu_solver",
           "user_shifts"]

_ARNOLDI_STEPS = 20  # Arnoldi steps with A
_SI_STEPS = 12  # shift-invert Arnoldi steps with (A - mu_0 I)^{-1}
_MAX_SHIFTS = 24
#: Cost of one sparse LU in single-column solves, for choosing the number of shifts (a
#: fixed model, so that the shifts depend on the input only; measured with splu on 2-D
#: grids, n = 1e3...1e5: 40-140).
_LU_COST_IN_SOLVES = 100.0


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


def cayley(lam: np.ndarray) -> np.ndarray:
    """``f = (lambda - 1) / (lambda + 1)``: Stein spectrum -> continuous spectrum."""
    return (lam - 1.0) / (lam + 1.0)


def mu_of_p(p: complex) -> complex:
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
    f_all = cayley(inside)
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
    mu = np.atleast_1d(np.asarray(shifts, dtype=np.complex128))
    if mu.ndim != 1 or mu.size == 0 or not np.all(np.isfinite(mu)):
        raise InvalidArgumentError("`shifts` must be 'auto' or a non-empty 1-D array of mu")
    if np.any(np.abs(mu) <= 1.0):
        raise InvalidArgumentError(
            f"ADI shifts `mu` must lie outside the unit disk (|mu| > 1); got min |mu| = "
            f"{np.min(np.abs(mu)):.6g}"
        )
    return cayley(1.0 / mu)  # p = (1 - mu)/(1 + mu) = f(1/mu)
