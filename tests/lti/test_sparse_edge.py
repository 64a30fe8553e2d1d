"""Edge cases of the sparse low-rank path (lti.lowrank, lti._adi_shifts) found by the
demanding-user audit: tiny and empty systems, the solver hook's contract, eigenvalues on or
outside the unit circle named in the error, nilpotent (shift-chain, FIR) matrices solved by
Smith steps, every scipy.sparse format, and the low-rank residual against a dense one."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import scipy.linalg as sla
import scipy.sparse as sp
import scipy.sparse.linalg as spla

from lti import (
    DiscreteLTI,
    InvalidArgumentError,
    ShapeError,
    SolverError,
    UnstableSystemError,
    balanced_truncation,
    hankel_singular_values,
)
from lti.lowrank import lowrank_factor, lowrank_gramian_factors


def _heat(N: int):
    h = 1.0 / (N + 1)
    L1 = sp.diags([np.ones(N - 1), -2 * np.ones(N), np.ones(N - 1)], [-1, 0, 1]) / h**2
    eye = sp.eye(N)
    A = (sp.eye(N * N) + 0.2 * h * h * (sp.kron(L1, eye) + sp.kron(eye, L1))).tocsr()
    rng = np.random.default_rng(3)
    return A, rng.standard_normal((N * N, 2)), rng.standard_normal((3, N * N))


def _dense_rel_residual(A, Z, B, transpose=False):
    """||M Z Z^T M^T - Z Z^T + B B^T||_2 / ||B^T B||_2, formed densely (M = A or A^T)."""
    M = A.toarray().T if transpose else A.toarray()
    X = Z @ Z.T
    return np.linalg.norm(M @ X @ M.T - X + B @ B.T, 2) / np.linalg.norm(B.T @ B, 2)


# ------------------------------------------------------------------ tiny systems


@pytest.mark.parametrize("n", [1, 2])
def test_tiny_sparse_systems_match_the_dense_path(n):
    """n = 1 raised a bare ValueError (math domain error: the one shift annihilates the only
    Ritz value, a cycle's gain is 0 and its log was taken)."""
    A = np.diag(np.linspace(0.5, 0.6, n)) + np.diag(0.1 * np.ones(n - 1), 1)
    B, C = np.ones((n, 1)), np.arange(1.0, n + 1)[None, :]
    F = lowrank_factor(sp.csr_matrix(A), B)
    X = sla.solve_discrete_lyapunov(A, B @ B.T)
    assert F.converged and np.linalg.norm(F.Z @ F.Z.T - X) <= 1e-13 * np.linalg.norm(X)
    Gs, Gd = DiscreteLTI(sp.csr_matrix(A), B, C, [[0.3]], 0.1), DiscreteLTI(A, B, C, [[0.3]], 0.1)
    hs, hd = hankel_singular_values(Gs), hankel_singular_values(Gd)
    np.testing.assert_allclose(hs, hd[: hs.size], rtol=1e-12, atol=0)
    red = balanced_truncation(Gs, order=1).reduced
    assert red.n == 1 and red.dt == 0.1 and red.D[0, 0] == 0.3


def test_sparse_system_without_states():
    """n = 0 raised a bare ValueError (max of an empty Ritz set)."""
    G = DiscreteLTI(sp.csr_matrix((0, 0)), np.zeros((0, 1)), np.zeros((2, 0)), np.ones((2, 1)))
    assert hankel_singular_values(G).shape == (0,)
    res = balanced_truncation(G, order=0)
    assert res.reduced.n == 0 and res.error_bound == 0.0
    np.testing.assert_array_equal(res.reduced.D, G.D)
    F = lowrank_factor(sp.csr_matrix((0, 0)), np.zeros((0, 2)))
    assert F.Z.shape == (0, 0) and F.converged and F.residual == 0.0


# ------------------------------------------------------------------ solver hook


class _Hook:
    """splu with a deliberately broken answer."""

    def __init__(self, M, how):
        self.lu, self.how = spla.splu(sp.csc_matrix(M)), how

    def solve(self, rhs, trans="N"):
        X = self.lu.solve(rhs, trans)
        if self.how == "transposed":
            return X.T.copy()
        if self.how == "short":
            return X[:-1]
        if self.how == "flat":
            return X.ravel()
        return X * np.nan


@pytest.mark.parametrize(("how", "exc", "match"), [
    ("transposed", ShapeError, r"returned shape \(2, 100\) for a right-hand side of shape "
                               r"\(100, 2\)"),
    ("short", ShapeError, r"returned shape \(99, 2\)"),
    ("flat", ShapeError, r"returned shape \(200,\)"),
    ("nan", SolverError, "NaN or inf"),
])
def test_solver_hook_with_a_wrong_answer_gets_a_typed_error(how, exc, match):
    """Before: a transposed (k, n) answer was silently reshaped to (n, k) and the iteration
    then 'diverged' with UnstableSystemError blaming `A`; the others raised bare
    ValueError / LinAlgError."""
    A, B, _ = _heat(10)
    with pytest.raises(exc, match=match):
        lowrank_factor(A, B, solver=lambda M: _Hook(M, how))


def test_solver_hook_protocol_is_checked():
    A, B, C = _heat(10)
    with pytest.raises(InvalidArgumentError, match="callable"):
        lowrank_factor(A, B, solver=3)
    with pytest.raises(InvalidArgumentError, match=r"solve\(rhs, trans\)"):
        lowrank_factor(A, B, solver=spla.factorized)  # returns a function, not an object
    with pytest.raises(InvalidArgumentError, match="got NoneType"):
        lowrank_gramian_factors(A, B, C, solver=lambda M: None)
    # a 1-D answer for a one-column right-hand side is scipy's convention: accepted
    ref = lowrank_factor(A, B[:, :1])

    class Spsolve:
        def __init__(self, M):
            self.M = M

        def solve(self, rhs, trans="N"):
            return spla.spsolve(self.M.T if trans == "T" else self.M, rhs)  # 1-D for k = 1

    F = lowrank_factor(A, B[:, :1], solver=Spsolve)
    assert F.converged
    np.testing.assert_allclose(F.Z @ F.Z.T, ref.Z @ ref.Z.T, rtol=0, atol=1e-10)


# ------------------------------------------------------------- on/outside the circle


def _diag_with(value, n=100):
    d = np.linspace(-0.9, 0.9, n)
    d[50] = value
    return sp.diags(d, format="csr")


def _rotations(theta=0.3, k=50):
    c, s = np.cos(theta), np.sin(theta)
    return sp.block_diag([sp.csr_matrix([[c, s], [-s, c]])] * k, format="csr")


@pytest.mark.parametrize(("A", "match"), [
    (_diag_with(1.0), r"eigenvalue 1 \(modulus 1, .*\) on the unit circle"),
    (_diag_with(-1.0), r"eigenvalue -1 \(modulus 1, .*\) on the unit circle"),
    (_diag_with(1.05), r"eigenvalue 1\.05 \(modulus 1\.05, .*\) outside the unit circle"),
    (_rotations(), r"eigenvalue 0\.955336489\d*[+-]0\.295520206\d*j \(modulus 1, .*on the unit"),
    (2.0 * sp.eye(100, format="csr"), r"eigenvalue 2 \(modulus 2, .*outside"),
], ids=["at+1", "at-1", "1.05", "rotations", "2I"])
def test_eigenvalue_on_or_outside_the_circle_is_named(A, match):
    """Before: +-1 ran max_iter steps and only warned; the rotations (every eigenvalue on the
    circle) chose shifts on the circle, produced NaN warnings and a factor of size 1e5 with
    converged=False; 1.05 was reported as a growing residual."""
    B = np.ones((A.shape[0], 1))
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no 'stopped after max_iter' warning instead
        with pytest.raises(UnstableSystemError, match=match):
            lowrank_factor(A, B)
        with pytest.raises(UnstableSystemError, match=match):
            hankel_singular_values(DiscreteLTI(A, B, B.T))


def test_stable_system_near_the_circle_is_not_refused():
    """A mode at 1 - 1e-6 and one at -(1 - 1e-6) are stable: the check must not fire."""
    d = np.linspace(-0.9, 0.9, 200)
    d[[10, 150]] = 1.0 - 1e-6, -(1.0 - 1e-6)
    A = sp.diags(d, format="csr")
    B = np.ones((200, 1))
    F = lowrank_factor(A, B, tol=1e-10)
    X = (B @ B.T) / (1.0 - np.outer(d, d))  # closed form for diagonal A
    assert F.converged and _dense_rel_residual(A, F.Z, B) <= 1e-9
    # Gramian error = Gramian of (A, W): up to tol / (1 - rho^2) = 5e-5 relative here
    assert np.linalg.norm(F.Z @ F.Z.T - X, 2) <= 5e-5 * np.linalg.norm(X, 2)


# ----------------------------------------------------------- nilpotent: Smith steps


def _chain(n=100, seed=0):
    """Delay line x_{t+1}[i] = x_t[i-1] with random output taps (an FIR filter)."""
    S = sp.diags([np.ones(n - 1)], [-1], format="csr")
    b = np.zeros((n, 1))
    b[0] = 1.0
    return S, b, np.random.default_rng(seed).standard_normal((1, n))


def test_nilpotent_chain_is_solved_exactly_by_smith_steps():
    """Before: the Ritz values of the shift chain lie on a circle of radius ~0.9, the shifts
    chosen from them stalled: 500 steps, relative residual 6.5e-5 on the observability side,
    and sparse BT warned twice."""
    S, b, c = _chain()
    for R, tr in ((b, False), (c.T, True)):
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            F = lowrank_factor(S, R, transpose=tr)
        assert F.converged and F.iterations <= 100
        assert np.all(np.isinf(F.shifts))  # mu = inf: Smith steps, no factorisation
        assert _dense_rel_residual(S, F.Z, R, transpose=tr) <= 1e-12
        assert F.rel_residual <= 1e-12
    G, Gd = DiscreteLTI(S, b, c), DiscreteLTI(S.toarray(), b, c)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        hs = hankel_singular_values(G)
    hd = hankel_singular_values(Gd)
    np.testing.assert_allclose(hs[:20], hd[:20], rtol=1e-10, atol=0)


def test_permuted_triangular_matrix_counts_as_nilpotent():
    """A strictly lower triangular matrix in a random symmetric permutation: still every
    eigenvalue 0 (acyclic graph), Smith steps still exact."""
    rng = np.random.default_rng(1)
    n = 60
    L = sp.random(n, n, density=0.08, random_state=rng, format="csr")
    L = sp.tril(L, -1, format="csr") * 0.8
    perm = rng.permutation(n)
    A = L[perm][:, perm].tocsr()
    B = rng.standard_normal((n, 2))
    F = lowrank_factor(A, B)
    assert np.all(np.isinf(F.shifts)) and F.converged
    X = sla.solve_discrete_lyapunov(A.toarray(), B @ B.T)
    assert np.linalg.norm(F.Z @ F.Z.T - X, 2) <= 1e-12 * np.linalg.norm(X, 2)


def test_user_smith_shift_mu_inf_mixes_with_finite_shifts():
    A, B, _ = _heat(10)
    F = lowrank_factor(A, B, shifts=[np.inf, 1.01, 1.3])
    assert F.converged and np.isinf(F.shifts[0])
    assert _dense_rel_residual(A, F.Z, B) <= 1e-9
    with pytest.raises(InvalidArgumentError, match="inf for a Smith step"):
        lowrank_factor(A, B, shifts=[np.nan])


# ------------------------------------------------------ formats, residual, rhs


_FORMATS = ["csr", "csc", "coo", "dia", "bsr", "lil", "dok"]


@pytest.mark.parametrize("kind", ["matrix", "array"])
def test_every_sparse_format_gives_the_same_factor(kind):
    A, B, C = _heat(8)
    ref = lowrank_factor(A, B)
    for fmt in _FORMATS:
        M = A.asformat(fmt) if kind == "matrix" else getattr(sp, f"{fmt}_array")(A)
        F = lowrank_factor(M, B)
        np.testing.assert_array_equal(F.Z, ref.Z)
        G = DiscreteLTI(M, B, C)
        assert sp.issparse(G.A) and G.A.format == "csr"
    # residual reported in low-rank form = the dense residual
    # (both carry rounding of about eps ||Z||^2 ||A||^2 / ||B^T B||, far below tol = 1e-10)
    assert abs(ref.rel_residual - _dense_rel_residual(A, ref.Z, B)) <= 1e-13
    assert 0 < ref.rel_residual <= 1e-10


def test_zero_and_rank_deficient_right_hand_sides():
    A, B, C = _heat(8)
    Fc, Fo = lowrank_gramian_factors(A, np.zeros_like(B), C)
    assert Fc.rank == 0 and Fc.converged and Fo.converged
    assert hankel_singular_values(DiscreteLTI(A, np.zeros_like(B), C)).shape == (0,)
    Bd = np.hstack([B, 2.0 * B[:, :1], np.zeros((B.shape[0], 1))])  # rank 2 of 4 columns
    F = lowrank_factor(A, Bd)
    ref = lowrank_factor(A, B)
    assert F.converged and _dense_rel_residual(A, F.Z, Bd) <= 1e-9
    X = sla.solve_discrete_lyapunov(A.toarray(), Bd @ Bd.T)
    assert np.linalg.norm(F.Z @ F.Z.T - X, 2) <= 1e-8 * np.linalg.norm(X, 2)
    assert F.rank <= ref.rank + 8


def test_lti_horizon_gets_typed_errors():
    """lti.empirical.lti_horizon took np.asarray of anything: a sparse A gave a bare
    'ValueError: setting an array element with a sequence', a non-square one an IndexError
    or a wrong answer."""
    from lti import NonFiniteError, SparseNotSupportedError
    from lti.empirical import lti_horizon

    A, _, _ = _heat(4)
    with pytest.raises(SparseNotSupportedError, match="`A` is a scipy.sparse matrix"):
        lti_horizon(A)
    with pytest.raises(ShapeError, match="square"):
        lti_horizon(np.full((2, 3), 0.1))
    with pytest.raises(NonFiniteError):
        lti_horizon(np.array([[np.nan]]))
    assert lti_horizon(A.toarray(), rtol=1e-6) >= 1


def test_empirical_gramians_of_a_sparse_system_name_the_alternatives():
    """Without `horizon` the message named spectral_radius() and eigs, not what to do."""
    from lti import SparseNotSupportedError, empirical_gramians

    A, B, C = _heat(4)
    msg = r"^empirical_gramians\(\) without `horizon`.*horizon=T.*gramian_factors"
    with pytest.raises(SparseNotSupportedError, match=msg):
        empirical_gramians(DiscreteLTI(A, B, C))
    assert empirical_gramians(DiscreteLTI(A, B, C), horizon=10) is not None


@pytest.mark.parametrize(("n", "beta"), [(60, 1.5), (40, 3.0)])
def test_nilpotent_with_transient_growth_is_not_called_unstable(n, beta):
    """A = beta * (upper shift): every eigenvalue 0, but ||A^k|| = beta^k for k < n. Before:
    'residual grew ... A must be Schur-stable' (UnstableSystemError) for a stable A. Smith
    steps end after n steps; the factor matches the finite sum sum_k A^k B B^T A^kT to
    rounding (scipy's dense solve_discrete_lyapunov is off by 1e0 at beta = 3)."""
    A = sp.diags([np.full(n - 1, beta)], [1], format="csr")
    B = np.random.default_rng(0).standard_normal((n, 1))
    F = lowrank_factor(A, B)
    Ad = A.toarray()
    X, AkB = np.zeros((n, n)), B.copy()
    for _ in range(n):
        X += AkB @ AkB.T
        AkB = Ad @ AkB
    assert F.converged and F.iterations == n
    assert np.linalg.norm(F.Z @ F.Z.T - X) <= 1e-13 * np.linalg.norm(X)


@pytest.mark.parametrize(("kw", "match"), [
    ({"n_shifts": -1}, "n_shifts"),  # was a bare ValueError (argmin of an empty sequence)
    ({"n_shifts": 0}, "n_shifts"),   # was silently "auto"
    ({"n_shifts": 1.5}, "n_shifts"),
    ({"n_shifts": True}, "n_shifts"),
    ({"max_iter": 0}, "max_iter"),   # was an empty factor with a warning
    ({"max_iter": -1}, "max_iter"),
    ({"max_iter": 2.5}, "max_iter"),
    ({"compress": "yes"}, "compress"),
])
def test_solver_options_are_validated(kw, match):
    A, B, C = _heat(6)
    with pytest.raises(InvalidArgumentError, match=f"`{match}`"):
        lowrank_factor(A, B, **kw)
    with pytest.raises(InvalidArgumentError, match=f"`{match}`"):
        lowrank_gramian_factors(A, B, C, **kw)


@pytest.mark.parametrize("c", [2.0**-600, 1e-170, 1e160, 2.0**600])
def test_factors_scale_with_b_and_c(c):
    """Before: B scaled by 1e-170 gave LinAlgError (||B^T B|| underflowed to 0, then 0/0),
    by 1e160 SolverError 'diverged (non-finite residual); is `A` stable?' (overflow), and
    hankel_singular_values of B * 1e-170 came back empty. The dense path is scale-invariant;
    now the sparse one is too (B, C^T are divided by a power of two, exactly)."""
    A, B, C = _heat(6)
    ref = lowrank_factor(A, B)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no overflow/underflow RuntimeWarning either
        F = lowrank_factor(A, c * B)
        Fc, Fo = lowrank_gramian_factors(A, c * B, C / c)
    Rc, Ro = lowrank_gramian_factors(A, B, C)
    exact = c in (2.0**-600, 2.0**600)
    tol = 0 if exact else 1e-12
    np.testing.assert_allclose(F.Z / c, ref.Z, rtol=0, atol=tol * np.abs(ref.Z).max())
    np.testing.assert_allclose(Fc.Z / c, Rc.Z, rtol=0, atol=tol * np.abs(Rc.Z).max())
    np.testing.assert_allclose(Fo.Z * c, Ro.Z, rtol=0, atol=tol * np.abs(Ro.Z).max())
    assert F.rel_residual == pytest.approx(ref.rel_residual, rel=1e-3, abs=0)
    hs, h1 = hankel_singular_values(DiscreteLTI(A, c * B, C)) / c, hankel_singular_values(
        DiscreteLTI(A, B, C))
    np.testing.assert_allclose(hs, h1, rtol=0, atol=1e-12 * h1[0])  # (SVD: not bitwise)
