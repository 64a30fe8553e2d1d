"""Empirical Gramians: exact for linear systems at any scale, sensible for nonlinear ones."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.linalg as sla
from hypothesis import given, settings
from hypothesis import strategies as st

from lti import DiscreteLTI
from lti.empirical import EmpiricalGramians, empirical_gramians, lti_horizon
from lti.exceptions import (
    InvalidArgumentError,
    NonFiniteError,
    ShapeError,
    SolverError,
    UnstableSystemError,
)


def random_stable(seed: int, n: int, m: int, p: int, rho: float = 0.9) -> DiscreteLTI:
    rng = np.random.default_rng(seed)
    A = rng.standard_normal((n, n))
    A *= rho / max(np.max(np.abs(np.linalg.eigvals(A))), 1e-12)
    return DiscreteLTI(A, rng.standard_normal((n, m)), rng.standard_normal((p, n)),
                       rng.standard_normal((p, m)))


def finite_sums(G: DiscreteLTI, T: int):
    """Slow reference: the three finite-horizon sums over k = 0..T-1."""
    n = G.n
    P, Q = np.zeros((n, n)), np.zeros((n, n))
    X = np.zeros((n, n)) if G.m == G.p else None
    Ak = np.eye(n)
    for _ in range(T):
        P += Ak @ G.B @ G.B.T @ Ak.T
        Q += Ak.T @ G.C.T @ G.C @ Ak
        if X is not None:
            X += Ak @ G.B @ G.C @ Ak
        Ak = Ak @ G.A
    return P, Q, X


def rel(X, Y) -> float:
    return float(np.linalg.norm(X - Y) / max(np.linalg.norm(Y), 1e-300))


systems = st.tuples(
    st.integers(0, 2**32 - 1), st.integers(1, 6), st.integers(1, 3), st.integers(1, 3)
)
scale_lists = st.lists(st.floats(-3.0, 3.0), min_size=1, max_size=3).map(
    lambda e: tuple(10.0**x for x in e)
)


@settings(max_examples=40, deadline=None)
@given(systems, scale_lists, st.integers(1, 40), st.sampled_from(["signed", "positive"]))
def test_finite_horizon_equals_exact_sums_for_any_scales(spec, scales, T, directions):
    seed, n, m, p = spec
    G = random_stable(seed, n, m, p, rho=0.97)
    rng = np.random.default_rng(seed + 1)
    E = empirical_gramians(G, horizon=T, scales=scales, directions=directions,
                           x0=rng.standard_normal(n), u0=rng.standard_normal(m))
    P, Q, X = finite_sums(G, T)
    assert E.horizon == T and E.converged
    assert rel(E.controllability, P) < 1e-10
    assert rel(E.observability, Q) < 1e-10
    if m == p:
        assert rel(E.cross, X) < 1e-10
    else:
        assert E.cross is None


@settings(max_examples=25, deadline=None)
@given(systems, scale_lists, st.floats(0.0, 0.99))
def test_infinite_horizon_equals_lyapunov_solutions(spec, scales, rho):
    seed, n, m, p = spec
    G = random_stable(seed, n, m, m if seed % 2 else p, rho=rho)
    E = empirical_gramians(G, scales=scales, state_scales=tuple(reversed(scales)))
    P = sla.solve_discrete_lyapunov(G.A, G.B @ G.B.T)
    Q = sla.solve_discrete_lyapunov(G.A.T, G.C.T @ G.C)
    assert rel(E.controllability, P) < 1e-10
    assert rel(E.observability, Q) < 1e-10
    if G.m == G.p:  # Stein equation A X A - X + B C = 0
        Wx = E.cross
        assert np.linalg.norm(G.A @ Wx @ G.A - Wx + G.B @ G.C) < 1e-10 * np.linalg.norm(Wx)


def test_against_library_finite_and_infinite_gramians():
    import lti.gramians as gramians  # the project's own module: a broken import fails
    G = random_stable(7, 5, 2, 3, rho=0.95)
    for horizon in (None, 1, 17):
        E = empirical_gramians(G, horizon=horizon, scales=(1e-2, 1e2))
        P = gramians.controllability_gramian(G, horizon=horizon)
        Q = gramians.observability_gramian(G, horizon=horizon)
        assert rel(E.controllability, P) < 1e-10
        assert rel(E.observability, Q) < 1e-10


def test_black_box_step_function_infinite_horizon_and_affine_offset():
    G = random_stable(3, 4, 2, 2, rho=0.9)
    offset = np.array([0.3, -1.0, 2.0, 0.5])

    def step(X, U):  # affine: exact as well, thanks to centring on the nominal run
        return X @ G.A.T + U @ G.B.T + offset, X @ G.C.T + 1.0

    E = empirical_gramians(step, n=4, m=2, scales=(0.5, 3.0), chunk=64, rtol=1e-14)
    assert E.converged and E.horizon % 64 == 0
    assert E.trajectories == 1 + 2 * 2 * (2 + 4)
    assert rel(E.controllability, sla.solve_discrete_lyapunov(G.A, G.B @ G.B.T)) < 1e-10
    assert rel(E.observability, sla.solve_discrete_lyapunov(G.A.T, G.C.T @ G.C)) < 1e-10


def test_nonlinear_system_small_scales_tend_to_linearisation():
    G = random_stable(11, 3, 1, 1, rho=0.8)

    def step(X, U):
        return np.tanh(X @ G.A.T + U @ G.B.T), np.sin(X @ G.C.T)

    P = sla.solve_discrete_lyapunov(G.A, G.B @ G.B.T)
    errs = [rel(empirical_gramians(step, n=3, m=1, horizon=200, scales=(c,),
                                   which="controllability").controllability, P)
            for c in (1e-1, 1e-2, 1e-3)]
    # odd nonlinearities, signed directions: the error is O(c^2), 100x per decade
    assert errs[0] > errs[1] > errs[2]
    assert errs[2] < 1e-5 and errs[1] / errs[2] > 50


def test_signed_directions_cancel_even_order_terms():
    G = random_stable(5, 3, 1, 1, rho=0.7)

    def step(X, U):  # quadratic output: even order term
        return X @ G.A.T + U @ G.B.T, X @ G.C.T + (X @ G.C.T) ** 2

    Q = sla.solve_discrete_lyapunov(G.A.T, G.C.T @ G.C)
    signed = empirical_gramians(step, n=3, m=1, horizon=300, scales=(0.1,),
                                which="observability").observability
    positive = empirical_gramians(step, n=3, m=1, horizon=300, scales=(0.1,),
                                  directions="positive", which="observability").observability
    assert rel(signed, Q) < 0.2 * rel(positive, Q)


def test_lti_horizon_is_minimal_and_handles_non_normal_and_nilpotent():
    A = np.array([[0.5, 50.0], [0.0, 0.5]])
    T = lti_horizon(A, rtol=1e-12)
    norm = lambda k: np.linalg.norm(np.linalg.matrix_power(A, k), 2) ** 2  # noqa: E731
    assert norm(T) <= 1e-12 < norm(T - 1)
    N = np.diag([1.0, 1.0], k=1)  # nilpotent 3x3
    assert lti_horizon(N) == 3
    with pytest.raises(UnstableSystemError, match="1.01"):
        lti_horizon(np.diag([1.01, 0.2]))
    with pytest.raises(SolverError, match="max_horizon"):
        lti_horizon(np.diag([0.9999]), max_horizon=100)


def test_result_type_and_selection():
    G = random_stable(1, 3, 2, 2)
    E = empirical_gramians(G, which=("cross",), horizon=5)
    assert isinstance(E, EmpiricalGramians)
    assert E.controllability is None and E.observability is None and E.cross.shape == (3, 3)


def test_bad_input_raises_typed_errors():
    G = random_stable(2, 3, 1, 1)
    with pytest.raises(InvalidArgumentError, match="scales"):
        empirical_gramians(G, scales=(1.0, -2.0))
    with pytest.raises(InvalidArgumentError, match="directions"):
        empirical_gramians(G, directions="both")
    with pytest.raises(InvalidArgumentError, match="which"):
        empirical_gramians(G, which=("hankel",))
    with pytest.raises(ShapeError, match="state_scales"):
        empirical_gramians(G, scales=(1.0,), state_scales=(1.0, 2.0))
    with pytest.raises(InvalidArgumentError, match="horizon"):
        empirical_gramians(G, horizon=0)
    with pytest.raises(ShapeError, match="x0"):
        empirical_gramians(G, x0=np.zeros(4))
    with pytest.raises(InvalidArgumentError, match="`n` and `m`"):
        empirical_gramians(lambda X, U: (X, X))
    with pytest.raises(ShapeError, match="X_next"):
        empirical_gramians(lambda X, U: (X[:, :1], X), n=2, m=1, horizon=3)
    with pytest.raises(InvalidArgumentError, match="DiscreteLTI or a callable"):
        empirical_gramians(np.eye(2))
    unstable = DiscreteLTI(np.diag([1.5, 0.1]), np.ones((2, 1)), np.ones((1, 2)))
    with pytest.raises(UnstableSystemError, match="1.5"):
        empirical_gramians(unstable)
    with np.errstate(over="ignore", invalid="ignore"):
        with pytest.raises(NonFiniteError, match="non-finite"):
            empirical_gramians(unstable, horizon=5000)
    with pytest.raises(SolverError, match="max_horizon"):
        empirical_gramians(lambda X, U: (0.9999 * X + U, X), n=1, m=1, chunk=8,
                           max_horizon=64)
