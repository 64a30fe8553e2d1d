"""Tests for lti.gramians: exact and finite-horizon Gramians and their factors."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import scipy.linalg as sla
from hypothesis import given, settings
from hypothesis import strategies as st

from lti import (
    DiscreteLTI,
    InvalidArgumentError,
    UnstableSystemError,
    controllability_gramian,
    gramian_factors,
    observability_gramian,
    solve_discrete_lyapunov,
)
from lti.testing import strategies


def _truncated_sum(A, B, T):
    """sum_{k<T} A^k B B^T (A^T)^k by direct accumulation (the slow reference)."""
    X = np.zeros((A.shape[0], A.shape[0]))
    V = B.copy()
    for _ in range(T):
        X += V @ V.T
        V = A @ V
    return X


def _term_mass(A, B, T):
    """sum_{k<T} ||A^k B||_F^2: the scale of the rounding errors of any summation order
    (non-normal A sums huge terms to a small Gramian)."""
    total, V = 0.0, B.copy()
    for _ in range(T):
        total += float(np.sum(V * V))
        V = A @ V
    return total


def _random(rng, n, m=2, p=3, rho=0.9):
    A = rng.standard_normal((n, n))
    A *= rho / np.max(np.abs(np.linalg.eigvals(A)))
    return DiscreteLTI(A, rng.standard_normal((n, m)), rng.standard_normal((p, n)))


def _rel(X, Y):
    return np.linalg.norm(X - Y) / max(np.linalg.norm(Y), np.finfo(float).tiny)


# ---------------------------------------------------------------- infinite horizon
@pytest.mark.parametrize("n", [1, 20, 256])
def test_infinite_horizon_residuals(n):
    rng = np.random.default_rng(n)
    G = _random(rng, n, rho=0.95)
    P = controllability_gramian(G)
    Q = observability_gramian(G)
    BB, CC = G.B @ G.B.T, G.C.T @ G.C
    assert np.linalg.norm(G.A @ P @ G.A.T - P + BB) <= 1e-13 * np.linalg.norm(BB)
    assert np.linalg.norm(G.A.T @ Q @ G.A - Q + CC) <= 1e-13 * np.linalg.norm(CC)
    Lc, Lo = gramian_factors(G)
    assert _rel(Lc @ Lc.T, P) <= 1e-12 and _rel(Lo @ Lo.T, Q) <= 1e-12
    Lc1 = controllability_gramian(G, factor=True)
    Lo1 = observability_gramian(G, factor=True)
    assert _rel(Lc1 @ Lc1.T, P) <= 1e-12 and _rel(Lo1 @ Lo1.T, Q) <= 1e-12


def test_agrees_with_scipy_and_slycot():
    rng = np.random.default_rng(1)
    G = _random(rng, 30)
    P = controllability_gramian(G)
    Q = observability_gramian(G)
    assert _rel(P, sla.solve_discrete_lyapunov(G.A, G.B @ G.B.T)) <= 1e-11
    assert _rel(Q, sla.solve_discrete_lyapunov(G.A.T, G.C.T @ G.C)) <= 1e-11
    pytest.importorskip("slycot", reason="extra 'control' (slycot) not installed")
    Ps = solve_discrete_lyapunov(G.A, G.B @ G.B.T, method="slycot")
    Qs = solve_discrete_lyapunov(G.A.T, G.C.T @ G.C, method="slycot")
    assert _rel(P, Ps) <= 1e-12 and _rel(Q, Qs) <= 1e-12


def test_diagonal_closed_forms_match_dense_path():
    rng = np.random.default_rng(2)
    n = 40
    a = rng.uniform(-0.99, 0.99, n)
    G = DiscreteLTI(np.diag(a), rng.standard_normal((n, 2)), rng.standard_normal((2, n)))
    assert G.is_diagonal
    P = controllability_gramian(G)
    Pd = solve_discrete_lyapunov(np.diag(a), G.B @ G.B.T, method="schur")  # dense route
    assert _rel(P, Pd) <= 1e-12
    for T in (1, 5, 64):
        PT = controllability_gramian(G, horizon=T)
        QT = observability_gramian(G, horizon=T)
        assert _rel(PT, _truncated_sum(G.A, G.B, T)) <= 1e-13
        assert _rel(QT, _truncated_sum(G.A.T, G.C.T, T)) <= 1e-13
    # a_i a_j = 1 exactly and near 1: the geometric sum stays exact
    H = DiscreteLTI(np.diag([1.0, 1 - 1e-12, -1.0]), np.ones((3, 1)), np.ones((1, 3)))
    assert _rel(controllability_gramian(H, horizon=7), _truncated_sum(H.A, H.B, 7)) <= 1e-12


# ----------------------------------------------------------------- finite horizon
@pytest.mark.parametrize("direct", [True, False])
@pytest.mark.parametrize("T", [1, 2, 3, 8, 13, 100])
def test_finite_horizon_equals_truncated_sum(T, direct, monkeypatch):
    import lti.gramians

    monkeypatch.setattr(lti.gramians, "_use_direct", lambda n, m, T: direct)  # both paths
    rng = np.random.default_rng(T)
    G = _random(rng, 12, rho=0.97)
    P = controllability_gramian(G, horizon=T)
    Q = observability_gramian(G, horizon=T)
    assert _rel(P, _truncated_sum(G.A, G.B, T)) <= 1e-12
    assert _rel(Q, _truncated_sum(G.A.T, G.C.T, T)) <= 1e-12
    Lc, Lo = gramian_factors(G, horizon=T)
    assert Lc.shape == (12, min(2 * T, 12)) and Lo.shape == (12, min(3 * T, 12))
    assert _rel(Lc @ Lc.T, P) <= 1e-12 and _rel(Lo @ Lo.T, Q) <= 1e-12
    L = controllability_gramian(G, horizon=T, factor=True)
    assert _rel(L @ L.T, P) <= 1e-12


def test_finite_horizon_allows_unstable_and_converges_when_stable():
    A = np.array([[1.2, 0.3], [0.0, 0.5]])
    G = DiscreteLTI(A, np.ones((2, 1)), np.ones((1, 2)))
    assert _rel(controllability_gramian(G, horizon=9), _truncated_sum(A, G.B, 9)) <= 1e-13
    L = observability_gramian(G, horizon=9, factor=True)
    assert _rel(L @ L.T, _truncated_sum(A.T, G.C.T, 9)) <= 1e-13
    with pytest.raises(UnstableSystemError, match=r"spectral radius < 1\); got 1.2"):
        controllability_gramian(G)
    rng = np.random.default_rng(4)
    H = _random(rng, 10, rho=0.8)
    P = controllability_gramian(H)
    errors = [_rel(controllability_gramian(H, horizon=T), P) for T in (1, 4, 16, 64, 256)]
    assert all(e2 <= e1 for e1, e2 in zip(errors, errors[1:], strict=False))
    assert errors[-1] <= 1e-13


@pytest.mark.parametrize("horizon", [0, -3, 2.5, True, "10"])
def test_bad_horizon(horizon):
    G = DiscreteLTI([[0.5]], [[1.0]], [[1.0]])
    with pytest.raises(InvalidArgumentError, match="`horizon` must be None"):
        controllability_gramian(G, horizon=horizon)
    with pytest.raises(InvalidArgumentError, match="`horizon` must be None"):
        gramian_factors(G, horizon=horizon)


def test_bad_system_and_flags():
    with pytest.raises(InvalidArgumentError, match="`sys` must be a DiscreteLTI.*got ndarray"):
        controllability_gramian(np.eye(2))
    G = DiscreteLTI([[0.5]], [[1.0]], [[1.0]])
    with pytest.raises(InvalidArgumentError, match="`factor` must be a bool; got 'yes'"):
        observability_gramian(G, factor="yes")


def test_accepts_python_control_statespace():
    control = pytest.importorskip("control", reason="extra 'control' not installed")
    rng = np.random.default_rng(5)
    G = _random(rng, 6)
    sys = control.ss(G.A, G.B, G.C, 0, True)
    assert _rel(controllability_gramian(sys), controllability_gramian(G)) == 0.0
    Wc = control.gram(sys, "c")  # python-control's own (slycot-based) answer
    assert _rel(controllability_gramian(G), np.asarray(Wc)) <= 1e-11


# ------------------------------------------------------------------ property tests
@settings(max_examples=30, deadline=None)
@given(G=strategies.stable_systems(n=(1, 10)), horizon=st.one_of(st.none(), st.integers(1, 40)))
def test_gramians_symmetric_psd(G, horizon):
    P = controllability_gramian(G, horizon=horizon)
    Q = observability_gramian(G, horizon=horizon)
    for X in (P, Q):
        assert np.array_equal(X, X.T)
        ev = np.linalg.eigvalsh(X)
        assert ev[0] >= -1e-12 * max(ev[-1], np.finfo(float).tiny)


@settings(max_examples=30, deadline=None)
@given(G=strategies.stable_systems(n=(1, 10)), horizon=st.integers(1, 60))
def test_finite_horizon_property(G, horizon):
    P = controllability_gramian(G, horizon=horizon)
    Q = observability_gramian(G, horizon=horizon)
    Pr, Qr = _truncated_sum(G.A, G.B, horizon), _truncated_sum(G.A.T, G.C.T, horizon)
    tol_p = 1e-12 * horizon * _term_mass(G.A, G.B, horizon) + 1e-300
    tol_q = 1e-12 * horizon * _term_mass(G.A.T, G.C.T, horizon) + 1e-300
    assert np.linalg.norm(P - Pr) <= tol_p
    assert np.linalg.norm(Q - Qr) <= tol_q
    Lc, Lo = gramian_factors(G, horizon=horizon)
    assert np.linalg.norm(Lc @ Lc.T - Pr) <= tol_p
    assert np.linalg.norm(Lo @ Lo.T - Qr) <= tol_q


@settings(max_examples=25, deadline=None)
@given(G=strategies.stable_systems(n=(1, 8), kind=("dense", "diagonal", "complex_diagonal")))
def test_convergence_to_infinite_horizon_property(G):
    P = controllability_gramian(G)
    rho = G.spectral_radius()
    T = int(np.ceil(np.log(1e-17) / np.log(max(rho, 1e-3)) / 2.0)) + 1 if rho > 0 else 1
    T = min(max(T, 1), 20000)
    # the tail sum_{k>=T} A^k B B^T (A^T)^k = A^T P (A^T)^T is below eps relative to P
    # up to the transient growth of ||A^k||
    gap = np.linalg.norm(controllability_gramian(G, horizon=T) - P)
    growth = max(np.linalg.norm(np.linalg.matrix_power(G.A, k), 2) for k in range(0, 50))
    assert gap <= 1e-12 * growth**2 * max(np.linalg.norm(P), 1e-300)
    P_short = controllability_gramian(G, horizon=max(T // 4, 1))
    ev = np.linalg.eigvalsh(P - P_short)  # P_T increases to P (Loewner order)
    assert ev[0] >= -1e-12 * max(np.linalg.norm(P), 1e-300)


@settings(max_examples=25, deadline=None)
@given(G=strategies.stable_systems(n=(1, 10)))
def test_agreement_with_scipy_property(G):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        Pr = sla.solve_discrete_lyapunov(G.A, G.B @ G.B.T)
    P = controllability_gramian(G)
    BB = G.B @ G.B.T
    # both are small-residual solutions; compare residuals rather than (ill-conditioned) values
    scale = (np.linalg.norm(G.A, 2) ** 2 + 1) * max(np.linalg.norm(P), 1e-300) + np.linalg.norm(BB)
    r_ours = np.linalg.norm(G.A @ P @ G.A.T - P + BB) / scale
    r_scipy = np.linalg.norm(G.A @ Pr @ G.A.T - Pr + BB) / scale
    assert r_ours <= max(10 * r_scipy, 1e-14)
