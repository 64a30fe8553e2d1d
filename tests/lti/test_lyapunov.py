"""Tests for lti.lyapunov: Stein-equation solvers, Hammarling factors, psd_factor."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import scipy.linalg as sla
from hypothesis import given, reject, settings
from hypothesis import strategies as st

import lti._hammarling
import lti._stein
from lti import (
    InvalidArgumentError,
    NonFiniteError,
    NotSymmetricError,
    SchurForm,
    ShapeError,
    SolverError,
    UnstableSystemError,
    lyapunov_factor,
    psd_factor,
    real_schur,
    solve_discrete_lyapunov,
)
from lti.testing import strategies


def _stable(rng, n, rho=0.95):
    A = rng.standard_normal((n, n))
    return A * (rho / np.max(np.abs(np.linalg.eigvals(A))))


def _nonnormal(rng, n, rho=0.9, strength=0.3):
    """Q (Lambda + N) Q^T with strictly upper N; rescaled to the computed radius rho."""
    Q = np.linalg.qr(rng.standard_normal((n, n)))[0]
    lam = rng.uniform(-1.0, 1.0, n)
    N = strength * np.triu(rng.standard_normal((n, n)), 1)
    A = Q @ (np.diag(lam) + N) @ Q.T
    return A * (rho / np.max(np.abs(np.linalg.eigvals(A))))


def _residual(A, X, Q):
    return np.linalg.norm(A @ X @ A.conj().T - X + Q) / np.linalg.norm(Q)


def _scaled_residual(A, X, Q, u=None):
    """``||A X A^H - X + Q||_F`` in units of ``n u (||A||_2^2 ||X||_F + ||X||_F + ||Q||_F)``,
    the size of the rounding errors of forming the residual from a solution correct to
    working precision (a normwise backward error, Higham 2002 §16.2, times n u): a
    backward stable answer gives a value of order one, whatever the scale of the data.
    ``u`` is the unit roundoff of the data (default eps; coarser for subnormal data)."""
    n = A.shape[0]
    u = np.finfo(np.float64).eps if u is None else u
    nX, nA = np.linalg.norm(X), np.linalg.norm(A, 2)
    R = A @ X @ A.conj().T - X + Q
    unit = n * u * (nA**2 * nX + nX + np.linalg.norm(Q))
    return np.linalg.norm(R) / unit


def _backward_error(A, X, Q):
    nA = np.linalg.norm(A, 2)
    R = A @ X @ A.conj().T - X + Q
    return np.linalg.norm(R) / ((nA**2 + 1) * np.linalg.norm(X) + np.linalg.norm(Q))


# ------------------------------------------------------------------------- solvers
@pytest.mark.parametrize("n", [1, 2, 3, 17, 47, 48, 49, 97, 256])
def test_schur_residual_dense(n):
    rng = np.random.default_rng(n)
    A = _stable(rng, n)
    B = rng.standard_normal((n, 3))
    Q = B @ B.T + np.eye(n)
    X = solve_discrete_lyapunov(A, Q)
    assert _residual(A, X, Q) <= 1e-13
    assert np.array_equal(X, X.T)


@pytest.mark.parametrize("n", [5, 60])
def test_methods_agree_with_scipy(n):
    rng = np.random.default_rng(10 + n)
    A = _stable(rng, n, 0.9)
    S = rng.standard_normal((n, n))
    Q = S + S.T  # indefinite symmetric right-hand side is allowed
    ref = sla.solve_discrete_lyapunov(A, Q)
    for method in ("schur", "smith"):
        X = solve_discrete_lyapunov(A, Q, method=method)
        assert np.linalg.norm(X - ref) <= 1e-11 * np.linalg.norm(ref)
        assert _residual(A, X, Q) <= 1e-13


def test_triangular_nilpotent_and_real_spectrum():
    rng = np.random.default_rng(2)
    n = 70
    A = np.eye(n, k=1)  # nilpotent shift: X = sum_{k<n} A^k Q (A^T)^k
    Q = np.diag(rng.uniform(0.5, 1.0, n))
    X = solve_discrete_lyapunov(A, Q)
    ref = sum(np.linalg.matrix_power(A, k) @ Q @ np.linalg.matrix_power(A, k).T for k in range(n))
    assert np.allclose(X, ref, rtol=1e-13, atol=1e-13)
    T = np.triu(rng.standard_normal((n, n)) * 0.1, 1) + np.diag(rng.uniform(-0.9, 0.9, n))
    X = solve_discrete_lyapunov(T, Q)  # only 1x1 Schur blocks
    assert _residual(T, X, Q) <= 1e-13


def test_complex_conventions():
    rng = np.random.default_rng(3)
    n = 30
    A = _stable(rng, n, 0.9) * np.exp(0.4j)
    G = rng.standard_normal((n, 2)) + 1j * rng.standard_normal((n, 2))
    Q = G @ G.conj().T
    X = solve_discrete_lyapunov(A, Q)  # A X A^H - X + Q = 0
    assert _residual(A, X, Q) <= 1e-13
    assert np.allclose(X, X.conj().T)
    a = 0.95 * np.exp(1j * rng.uniform(0, 2 * np.pi, n)) * rng.uniform(0, 1, n)
    Xd = solve_discrete_lyapunov(a, Q)  # closed form X_ij = Q_ij / (1 - a_i conj(a_j))
    assert _residual(np.diag(a), Xd, Q) <= 1e-14
    np.testing.assert_allclose(Xd, solve_discrete_lyapunov(np.diag(a), Q, method="schur"),
                               rtol=1e-11, atol=0)
    assert np.allclose(Xd, Q / (1 - a[:, None] * np.conj(a)[None, :]))


def test_diagonal_large_and_auto_choice():
    rng = np.random.default_rng(4)
    n = 2048
    a = rng.uniform(-0.9999, 0.9999, n)
    B = rng.standard_normal((n, 2))
    Q = B @ B.T
    X = solve_discrete_lyapunov(a, Q)
    R = (a[:, None] * X) * a[None, :] - X + Q
    assert np.linalg.norm(R) <= 1e-13 * np.linalg.norm(Q)
    assert np.array_equal(solve_discrete_lyapunov(np.diag(a[:50]), Q[:50, :50]), X[:50, :50])


def test_schur_no_worse_than_slycot_on_hard_cases():
    pytest.importorskip("slycot", reason="extra 'control' (slycot) not installed")
    rng = np.random.default_rng(5)
    n = 64
    cases = {
        "rho=0.9999": _stable(rng, n, 0.9999),
        "non-normal": _nonnormal(rng, n, 0.95, 0.3),
    }
    for name, A in cases.items():
        B = rng.standard_normal((n, 2))
        Q = B @ B.T
        ours = _residual(A, solve_discrete_lyapunov(A, Q), Q)
        theirs = _residual(A, solve_discrete_lyapunov(A, Q, method="slycot"), Q)
        assert ours <= 3.0 * theirs + 1e-15, (name, ours, theirs)


def test_slycot_method_agrees():
    pytest.importorskip("slycot", reason="extra 'control' (slycot) not installed")
    rng = np.random.default_rng(6)
    A = _stable(rng, 40)
    B = rng.standard_normal((40, 2))
    X = solve_discrete_lyapunov(A, B @ B.T)
    Xs = solve_discrete_lyapunov(A, B @ B.T, method="slycot")
    assert np.linalg.norm(X - Xs) <= 1e-12 * np.linalg.norm(X)
    for transpose in (False, True):
        L = lyapunov_factor(A, B, method="slycot", transpose=transpose)
        Ls = lyapunov_factor(A, B, transpose=transpose)
        assert np.linalg.norm(L @ L.T - Ls @ Ls.T) <= 1e-12 * np.linalg.norm(L @ L.T)
    with pytest.raises(UnstableSystemError, match="got 1.5"):
        solve_discrete_lyapunov(np.diag([1.5, 0.1]) + np.eye(2, k=1), np.eye(2), method="slycot")


# ------------------------------------------------------------------------- factors
@pytest.mark.parametrize("n", [1, 2, 31, 64, 256])
@pytest.mark.parametrize("transpose", [False, True])
def test_factor_well_conditioned(n, transpose):
    rng = np.random.default_rng(100 + n)
    A = _stable(rng, n, 0.9)
    B = rng.standard_normal((n, n + 1))  # full rank: X well conditioned
    L = lyapunov_factor(A, B, transpose=transpose)
    M = A.T if transpose else A
    X = solve_discrete_lyapunov(M, B @ B.T)
    assert L.shape == (n, n)
    assert np.linalg.norm(L @ L.T - X) <= 1e-12 * np.linalg.norm(X)
    assert _residual(M, L @ L.T, B @ B.T) <= 1e-13


def test_factor_shares_schur_and_validates_it():
    rng = np.random.default_rng(7)
    A = _stable(rng, 50)
    B = rng.standard_normal((50, 2))
    S = real_schur(A)
    assert isinstance(S, SchurForm) and S.n == 50
    assert np.allclose(np.sort_complex(S.eigenvalues()), np.sort_complex(np.linalg.eigvals(A)))
    L1 = lyapunov_factor(A, B, schur=S)
    L2 = lyapunov_factor(A, B, method="hammarling")  # same method without the shared form
    assert np.allclose(L1 @ L1.T, L2 @ L2.T, rtol=1e-12, atol=1e-14)
    Tc, Zc = S.complex_form()
    assert np.allclose(Zc @ Tc @ Zc.conj().T, A, atol=1e-13)
    assert np.array_equal(Tc, np.triu(Tc))
    with pytest.raises(InvalidArgumentError, match="`schur` must be the SchurForm of `A`"):
        lyapunov_factor(A, B, schur=real_schur(A[:3, :3]))


@pytest.mark.parametrize("n", [1, 3, 17, 64])
@pytest.mark.parametrize("m", [1, 2, "wide"])
@pytest.mark.parametrize("transpose", [False, True])
def test_smith_factor_matches_hammarling(n, m, transpose):
    rng = np.random.default_rng(300 + n)
    A = _stable(rng, n, 0.9)
    B = rng.standard_normal((n, n + 3 if m == "wide" else m))
    M = A.T if transpose else A
    Ls = lyapunov_factor(A, B, transpose=transpose, method="smith")
    Lh = lyapunov_factor(A, B, transpose=transpose, method="hammarling")
    Xs, Xh = Ls @ Ls.T, Lh @ Lh.T
    assert Ls.shape == (n, n)
    # measured at most 0.61 over this parametrisation (n = 3, transpose, m = 1: the
    # residual relative to ||B B^T|| is 1.2e-14 there because ||X|| / ||B B^T|| is 10)
    assert _scaled_residual(M, Xs, B @ B.T) <= 2.0
    assert _scaled_residual(M, Xh, B @ B.T) <= 2.0
    assert np.linalg.norm(Xs - Xh) <= 1e-12 * np.linalg.norm(Xh)
    if m == "wide" or n <= 2:
        assert np.array_equal(Ls, np.tril(Ls))
    if n > 1:  # small dense real input: "auto" takes the Smith iteration
        assert np.array_equal(lyapunov_factor(A, B, transpose=transpose), Ls)


def test_smith_auto_falls_back_to_hammarling():
    rng = np.random.default_rng(12)
    B = rng.standard_normal((40, 2))
    slow = _stable(rng, 40, 0.999)  # needs more than 12 squarings
    rough = np.diag(rng.uniform(-0.5, 0.5, 40))
    rough[0, 1] = 2e4  # ||A||_F above 1e4: strongly non-normal

    for A in (slow, rough):
        L = lyapunov_factor(A, B)
        assert np.array_equal(L, lyapunov_factor(A, B, method="hammarling"))
        Ls = lyapunov_factor(A, B, method="smith")  # by name: iterates to convergence
        assert _backward_error(A, Ls @ Ls.T, B @ B.T) <= 1e-15
    with pytest.raises(UnstableSystemError, match="got 1.1"):
        lyapunov_factor(np.diag([1.1, 0.5]) + np.eye(2, k=1), B[:2], method="smith")
    with pytest.raises(InvalidArgumentError, match='method="smith" needs real'):
        lyapunov_factor(np.eye(2) * 0.5j, B[:2], method="smith")
    # unstable part not excited by B: the iteration must not certify it (Schur path raises)
    A = np.diag([1.5, 0.5]) + np.eye(2, k=1) * 1e-3
    with pytest.raises(UnstableSystemError):
        lyapunov_factor(A.T, np.array([[0.0], [1.0]]).T.T)


def test_factor_nearly_singular_as_accurate_as_slycot():
    pytest.importorskip("slycot", reason="extra 'control' (slycot) not installed")
    rng = np.random.default_rng(8)
    n = 60
    a = rng.uniform(-0.9, 0.9, n)
    U = np.linalg.qr(rng.standard_normal((n, n)))[0]
    A = U @ np.diag(a) @ U.T
    B = U @ rng.standard_normal((n, 1))  # single input: eigenvalues of X decay to eps
    Bm = U.T @ B
    X = U @ ((Bm @ Bm.T) / (1 - a[:, None] * a[None, :])) @ U.T  # accurate reference
    ev = np.linalg.eigvalsh(X)
    assert ev[0] < 1e-14 * ev[-1]  # really nearly singular
    for transpose in (False, True):
        ours = lyapunov_factor(A, B, transpose=transpose)
        theirs = lyapunov_factor(A, B, method="slycot", transpose=transpose)
        e_ours = np.linalg.norm(ours @ ours.T - X) / np.linalg.norm(X)
        e_theirs = np.linalg.norm(theirs @ theirs.T - X) / np.linalg.norm(X)
        assert e_ours <= max(3.0 * e_theirs, 1e-14), (e_ours, e_theirs)


def test_factor_diagonal_real_and_complex():
    rng = np.random.default_rng(9)
    n = 300
    a = rng.uniform(-0.999, 0.999, n)
    B = rng.standard_normal((n, 2))
    L = lyapunov_factor(a, B)
    X = solve_discrete_lyapunov(a, B @ B.T)
    assert np.isrealobj(L) and np.array_equal(L, np.tril(L))
    assert np.linalg.norm(L @ L.T - X) <= 1e-13 * np.linalg.norm(X)
    Ld = lyapunov_factor(np.diag(a), B, transpose=True)
    assert np.linalg.norm(Ld @ Ld.T - X) <= 1e-13 * np.linalg.norm(X)
    ac = 0.99 * np.exp(1j * rng.uniform(0, 6.3, n)) * np.sqrt(rng.uniform(0, 1, n))
    Bc = B + 1j * rng.standard_normal((n, 2))
    Qc = Bc @ Bc.conj().T
    Lc = lyapunov_factor(ac, Bc)  # A X A^H - X + B B^H = 0
    Xc = Lc @ Lc.conj().T
    assert np.linalg.norm(Xc - solve_discrete_lyapunov(ac, Qc)) <= 1e-13 * np.linalg.norm(Xc)
    Lt = lyapunov_factor(ac, Bc, transpose=True)  # A^H X A - X + B B^H = 0
    Xt = Lt @ Lt.conj().T
    Rt = np.conj(ac)[:, None] * Xt * ac[None, :] - Xt + Qc
    assert np.linalg.norm(Rt) <= 1e-13 * np.linalg.norm(Qc)


@pytest.mark.parametrize(("n", "rtol"), [(1024, 1e-13), (4096, 1e-14)])
def test_diagonal_factor_survives_right_hand_side_decaying_to_subnormal(n, rtol):
    # regressions: with two inputs and n modes up to |a| = 0.9999 the updated right-hand side
    # factor decays below 1e-154; unscaled norms underflowed and corrupted later rows
    # (n = 1024), and the diagonal factor at n = 4096 (the case of bench_lyapunov.make_case,
    # docs/_benchmarks/bench_lyapunov.md before 90f18f2) had relative residual 3.7e-7
    # against 1.4e-16 for the closed form
    rng = np.random.default_rng(n)
    a = rng.uniform(-0.9999, 0.9999, n)
    a[0] = 0.9999
    B = rng.standard_normal((n, 2))
    Q = B @ B.T
    L = lyapunov_factor(a, B)
    X = L @ L.T
    R = (a[:, None] * X) * a[None, :] - X + Q
    assert np.linalg.norm(R) <= rtol * np.linalg.norm(Q)
    Xf = solve_discrete_lyapunov(a, Q)
    assert np.linalg.norm(X - Xf) <= 1e-13 * np.linalg.norm(Xf)


@pytest.mark.parametrize("transpose", [False, True])
@pytest.mark.parametrize("method", ["auto", "hammarling"])
def test_factor_near_underflow_is_finite_without_warnings(transpose, method):
    # regression: a right-hand side column of subnormal size made the complex scaling
    # c / max|c| form 1 / max|c| (overflow), giving RuntimeWarnings and NaN factors
    A = np.array(
        [[5.934e-201, -1.386e-200, 3.152e-202, 1.210e-200],
         [3.528e-201, 5.097e-201, 8.849e-201, 1.691],
         [1.478e-201, 1.200, -6.262e-202, -5.330e-201],
         [3.072e-201, -5.912e-001, -5.593e-201, -5.931e-001]]
    )
    A *= 0.99 / np.max(np.abs(np.linalg.eigvals(A)))  # complex pair: complex Schur form
    rng = np.random.default_rng(3)
    M = A.T if transpose else A
    for scale in (1.0, 1e-150, 1e-300, 1e-310):
        B = rng.standard_normal((4, 1)) * scale
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            L = lyapunov_factor(A, B, transpose=transpose, method=method)
        assert np.all(np.isfinite(L)) and np.any(L)
        Ls = L / scale  # compare on unit scale
        Bs = B / scale
        # subnormal B (scale 1e-310) carries only about 13 digits: the rounding unit of the
        # data is the smallest subnormal relative to max|B|, not eps
        u = max(np.finfo(np.float64).eps, np.nextafter(0.0, 1.0) / np.max(np.abs(B)))
        assert _scaled_residual(M, Ls @ Ls.T, Bs @ Bs.T, u) <= 2.0
    # subnormal off-diagonal entries: a dense A; every method gives L L^T = X (the form of
    # L is method dependent, see the docstring); no warnings either
    A = np.array([[0.5, 5e-324], [-5e-324, 0.99]])
    B = np.array([[1.0], [2.0]])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for meth in ("auto", "hammarling", "smith"):
            L = lyapunov_factor(A, B, transpose=transpose, method=meth)
            Mx = A.T if transpose else A
            assert _residual(Mx, L @ L.T, B @ B.T) <= 1e-14
        assert np.array_equal(L, np.tril(L))  # "smith": lower triangular


def test_large_symmetry_check_is_tiled():
    rng = np.random.default_rng(14)
    n = 700  # above the tile threshold
    G = rng.standard_normal((n, n))
    Q = G @ G.T
    a = rng.uniform(-0.5, 0.5, n)
    Xs = solve_discrete_lyapunov(a, Q)
    assert np.array_equal(Xs, Xs.T)
    Q[650, 3] += 1e-6 * np.max(np.abs(Q))  # asymmetry in an off-diagonal tile
    with pytest.raises(NotSymmetricError, match="`Q` must be symmetric"):
        solve_discrete_lyapunov(a, Q)
    Q[3, 650] = Q[650, 3] + 1e-15  # rounding-level: accepted and symmetrised
    X = solve_discrete_lyapunov(a, Q)
    assert np.array_equal(X, X.T)


def test_factor_complex_dense_and_edge_sizes():
    rng = np.random.default_rng(10)
    A = _stable(rng, 20, 0.9) * np.exp(0.3j)
    B = rng.standard_normal((20, 2)) + 1j * rng.standard_normal((20, 2))
    L = lyapunov_factor(A, B)
    assert _residual(A, L @ L.conj().T, B @ B.conj().T) <= 1e-13
    assert lyapunov_factor(np.zeros((0, 0)), np.zeros((0, 1))).shape == (0, 0)
    A2 = np.array([[0.5, 0.1], [0.2, 0.3]])
    assert not np.any(lyapunov_factor(A2, np.zeros((2, 1))))
    Bw = rng.standard_normal((2, 5))  # more inputs than states
    Lw = lyapunov_factor(A2, Bw)
    assert Lw.shape == (2, 2)
    assert _residual(A2, Lw @ Lw.T, Bw @ Bw.T) <= 1e-14
    Lv = lyapunov_factor(A2, np.array([1.0, 2.0]))  # 1-D B is one column
    assert _residual(A2, Lv @ Lv.T, np.outer([1.0, 2.0], [1.0, 2.0])) <= 1e-14


def test_psd_factor():
    rng = np.random.default_rng(11)
    G = rng.standard_normal((8, 3))
    X = G @ G.T
    L = psd_factor(X)
    assert L.shape == (8, 3)
    assert np.linalg.norm(L @ L.T - X) <= 1e-13 * np.linalg.norm(X)
    assert psd_factor(np.zeros((3, 3))).shape == (3, 0)
    with pytest.warns(RuntimeWarning, match="not positive semidefinite"):
        Ln = psd_factor(X - 0.5 * np.eye(8) * np.linalg.norm(X, 2))
    assert np.all(np.isfinite(Ln))
    with pytest.raises(NotSymmetricError, match="`X` must be symmetric"):
        psd_factor(np.array([[1.0, 2.0], [0.0, 1.0]]))
    with pytest.raises(InvalidArgumentError, match="`rtol` must be a non-negative number"):
        psd_factor(X, rtol=-1.0)


# ---------------------------------------------------------------------- bad inputs
@pytest.mark.parametrize(
    ("A", "Q", "kwargs", "error", "fragment"),
    [
        (np.ones((2, 3)), np.eye(2), {}, ShapeError, "`A` must be square; got shape (2, 3)"),
        (np.eye(2) * 0.5, np.eye(3), {}, ShapeError, "`Q` must have shape (n, n) = (2, 2)"),
        (np.eye(2) * 0.5, np.ones(2), {}, ShapeError, "`Q` must be a 2-D array"),
        ([[np.nan, 0], [0, 0.1]], np.eye(2), {}, NonFiniteError, "`A` must be finite; got nan"),
        (np.eye(2) * 0.5, [[1, 0], [np.inf, 1]], {}, NonFiniteError, "`Q` must be finite; got inf"),
        (np.eye(2) * 0.5, [[1, 1], [0, 1]], {}, NotSymmetricError, "`Q` must be symmetric"),
        (np.diag([1.03, 0.5]), np.eye(2), {}, UnstableSystemError, "< 1); got 1.03"),
        (
            np.array([[0.5, 2.0], [0.0, -1.2]]),
            np.eye(2),
            {},
            UnstableSystemError,
            "`A` must be Schur-stable (spectral radius < 1); got 1.2",
        ),
        (
            np.array([[0.5, 2.0], [0.0, -1.2]]),
            np.eye(2),
            {"method": "smith"},
            UnstableSystemError,
            "got 1.2",
        ),
        (np.eye(2) * 0.5, np.eye(2), {"method": "qz"}, InvalidArgumentError, "got 'qz'"),
        (
            np.array([[0.5, 0.1], [0.0, 0.2]]),
            np.eye(2),
            {"method": "diagonal"},
            InvalidArgumentError,
            'method="diagonal" needs a diagonal `A`',
        ),
    ],
)
def test_solver_bad_input(A, Q, kwargs, error, fragment):
    with pytest.raises(error) as info:
        solve_discrete_lyapunov(A, Q, **kwargs)
    assert fragment in str(info.value)


@pytest.mark.parametrize(
    ("A", "B", "kwargs", "error", "fragment"),
    [
        (np.eye(2) * 0.5, np.ones((3, 1)), {}, ShapeError, "`B` must have n = 2 rows"),
        (np.diag([0.5, -1.5]), np.ones((2, 1)), {}, UnstableSystemError, "got 1.5"),
        (
            np.array([[0.5, 3.0], [0.0, 1.1]]),
            np.ones((2, 1)),
            {},
            UnstableSystemError,
            "got 1.1",
        ),
        (np.eye(2) * 0.5, [[np.nan], [0]], {}, NonFiniteError, "`B` must be finite"),
        (np.eye(2) * 0.5, np.ones((2, 1)), {"method": "bad"}, InvalidArgumentError, "`method`"),
        (np.eye(2) * 0.5, np.ones((2, 1)), {"schur": "S"}, InvalidArgumentError, "`schur`"),
    ],
)
def test_factor_bad_input(A, B, kwargs, error, fragment):
    with pytest.raises(error) as info:
        lyapunov_factor(A, B, **kwargs)
    assert fragment in str(info.value)


def test_small_asymmetry_is_tolerated_and_inputs_untouched():
    rng = np.random.default_rng(12)
    A = _stable(rng, 10)
    Q = np.eye(10)
    Q[0, 1] += 1e-15  # rounding-level asymmetry: accepted
    A0, Q0 = A.copy(), Q.copy()
    X = solve_discrete_lyapunov(A, Q)
    L = lyapunov_factor(A, rng.standard_normal((10, 2)))
    assert np.array_equal(A, A0) and np.array_equal(Q, Q0)
    assert np.all(np.isfinite(X)) and np.all(np.isfinite(L))


def test_missing_slycot_is_reported(monkeypatch):
    import builtins

    real_import = builtins.__import__

    def fake_import(name, *args, **kwargs):
        if name == "slycot":
            raise ImportError("no slycot")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", fake_import)
    with pytest.raises(ImportError, match=r"lti-adapters\[control\]"):
        solve_discrete_lyapunov(np.eye(2) * 0.5, np.eye(2), method="slycot")


def test_leaf_size_does_not_change_the_answer(monkeypatch):
    rng = np.random.default_rng(13)
    A = _stable(rng, 40)
    Q = np.eye(40)
    X = solve_discrete_lyapunov(A, Q)
    monkeypatch.setattr(lti._stein, "_LEAF", 4)  # deep recursion through many 2x2 blocks
    X4 = solve_discrete_lyapunov(A, Q)
    assert np.linalg.norm(X - X4) <= 1e-12 * np.linalg.norm(X)
    monkeypatch.setattr(lti._hammarling, "_PANEL", 3)  # frequent re-packing in Hammarling
    B = rng.standard_normal((40, 2))
    L = lyapunov_factor(A, B)
    assert _residual(A, L @ L.T, B @ B.T) <= 1e-13


# ------------------------------------------------------------------ property tests
@settings(max_examples=30, deadline=None)
@given(G=strategies.stable_systems(n=(1, 12), nonnormality=3.0),
       method=st.sampled_from(["schur", "smith"]))
def test_solver_backward_error_property(G, method):
    # nonnormality=3 (not the default 10): with n = 12 and upper-triangular entries 10x the
    # spectral radius, ||X|| reaches 1e16 and no solver (SLICOT's included) is accurate.
    Q = G.B @ G.B.T + np.eye(G.n)
    try:
        X = solve_discrete_lyapunov(G.A, Q, method=method)
    except (UnstableSystemError, SolverError):
        # Eigenvalues of strongly non-normal A move by up to ~eps**(1/n) under rounding, so a
        # computed spectral radius >= 1 is a correct refusal there -- and only there.
        assert np.linalg.cond(np.linalg.eig(G.A)[1]) > 1e8
        reject()
    # Bartels-Stewart is backward stable. Squared Smith forms A^(2^k), whose rounding errors
    # scale with the transient growth max_k ||A^k||^2 of a non-normal A.
    if method == "schur":
        tol = 5e-14
    else:
        P, growth = np.eye(G.n), 1.0
        for _ in range(4 * G.n + 8):
            P = P @ G.A
            growth = max(growth, np.linalg.norm(P, 2) ** 2)
        tol = 1e-13 * growth
    assert _backward_error(G.A, X, Q) <= tol
    assert np.min(np.linalg.eigvalsh(X)) >= -1e-12 * np.max(np.abs(X))


@settings(max_examples=30, deadline=None)
@given(G=strategies.stable_systems(n=(1, 12)), transpose=st.booleans())
def test_factor_property(G, transpose):
    B = G.C.T if transpose else G.B
    M = G.A.T if transpose else G.A
    if np.any(B):
        B = B / np.max(np.abs(B))  # the equation is homogeneous in B B^T; avoid underflow
    L = lyapunov_factor(G.A, B, transpose=transpose)
    X = L @ L.T
    Q = B @ B.T
    if not np.any(Q):
        assert not np.any(L)
        return
    assert _backward_error(M, X, Q) <= 1e-13
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ref = sla.solve_discrete_lyapunov(M, Q)
    # forward agreement with scipy, scaled by a cheap condition estimate
    sep = np.min(sla.svdvals(np.kron(M, M) - np.eye(G.n**2))) if G.n <= 8 else None
    if sep is not None:
        tol = 1e-12 * (1 + np.linalg.norm(M, 2) ** 2) / sep
        assert np.linalg.norm(X - ref) <= tol * np.linalg.norm(X) + 1e-14 * np.linalg.norm(Q)


def test_auto_factor_avoids_smith_under_transient_growth():
    # Regression: squared Smith's rounding scales with max_k ||A^(2^k)||; on this non-normal A
    # (powers grow ~100x before decaying) "auto" picked Smith and lost 17x in the residual.
    n = 64
    rng = np.random.default_rng(7 + n)
    Z = np.linalg.qr(rng.standard_normal((n, n)))[0]
    N = (2.4 / np.sqrt(n)) * np.triu(rng.standard_normal((n, n)), 1)
    A = Z @ (np.diag(rng.uniform(-1, 1, n)) + N) @ Z.T
    A *= 0.95 / np.max(np.abs(np.linalg.eigvals(A)))
    B = rng.standard_normal((n, 2))
    Q = B @ B.T
    L_auto = lyapunov_factor(A, B)
    L_ref = lyapunov_factor(A, B, method="hammarling")
    res_auto = _residual(A, L_auto @ L_auto.T, Q)
    res_ref = _residual(A, L_ref @ L_ref.T, Q)
    assert res_auto <= 2 * res_ref
