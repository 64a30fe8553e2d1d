"""Data-driven Gramians: streaming accumulator, exact expectations, convergence with a
tolerance derived from the sample size, and input-weighted balanced truncation."""

from __future__ import annotations

import tracemalloc

import numpy as np
import pytest
import scipy.linalg as sla
from hypothesis import given, settings
from hypothesis import strategies as st

from lti import DiscreteLTI
from lti.datadriven import (
    StateCovarianceAccumulator,
    expected_state_covariance,
    propagate_states,
    state_covariance,
)
from lti.empirical import lti_horizon
from lti.exceptions import (
    EmptyDataError,
    InvalidArgumentError,
    NonFiniteError,
    ShapeError,
    UnstableSystemError,
)


def random_pair(seed: int, n: int, m: int, rho: float = 0.9, diagonal: bool = False):
    rng = np.random.default_rng(seed)
    if diagonal:
        A = np.diag(rng.uniform(-rho, rho, n))
    else:
        A = rng.standard_normal((n, n))
        A *= rho / max(np.max(np.abs(np.linalg.eigvals(A))), 1e-12)
    return A, rng.standard_normal((n, m))


def rel(X, Y) -> float:
    return float(np.linalg.norm(X - Y) / max(np.linalg.norm(Y), 1e-300))


# ------------------------------------------------------------------ propagation


@pytest.mark.parametrize("diagonal", [False, True])
def test_propagate_states_matches_simulate(diagonal):
    A, B = random_pair(0, 4, 2, diagonal=diagonal)
    u = np.random.default_rng(1).standard_normal((3, 25, 2))
    S = propagate_states(A, B, u)
    G = DiscreteLTI(A, B, np.eye(4))
    for b in range(3):
        _, X = G.simulate(u[b], return_states=True)
        np.testing.assert_allclose(S[b], X[1:], rtol=1e-13, atol=1e-13)  # s_t = x_{t+1}


# -------------------------------------------------------------- algebraic props

pairs = st.tuples(st.integers(0, 2**32 - 1), st.integers(1, 5), st.integers(1, 3), st.booleans())


@settings(max_examples=30, deadline=None)
@given(pairs, st.integers(1, 6), st.integers(0, 5), st.data())
def test_merge_and_chunking_equal_one_accumulator(spec, batch, burn_in, data):
    seed, n, m, diagonal = spec
    A, B = random_pair(seed, n, m, diagonal=diagonal)
    rng = np.random.default_rng(seed + 1)
    T = burn_in + data.draw(st.integers(1, 20))
    u = rng.standard_normal((batch, T, m)) * rng.uniform(0.1, 10.0, m)
    cut = data.draw(st.integers(0, batch))
    whole = StateCovarianceAccumulator(A, B, burn_in=burn_in)
    whole.update(u)
    a = StateCovarianceAccumulator(A, B, burn_in=burn_in)
    b = StateCovarianceAccumulator(A, B, burn_in=burn_in)
    if cut:
        a.update(u[:cut])
    if cut < batch:
        b.update(u[cut:])
    merged = a.merge(b)
    assert merged.count == whole.count == batch * (T - burn_in)
    assert rel(merged.finalize(), whole.finalize()) < 1e-12
    assert rel(merged.mean, whole.mean) < 1e-12 or np.allclose(whole.mean, 0)
    # all-reduce of the plain arrays == merge
    sa, sb = a.state_dict(), b.state_dict()
    summed = {k: sa[k] + sb[k] for k in sa}
    loaded = StateCovarianceAccumulator.from_state_dict(summed, burn_in=burn_in)
    assert loaded.count == whole.count
    assert rel(loaded.finalize(), whole.finalize()) < 1e-12
    # one-shot function agrees, the factor reproduces P, inputs untouched
    u_copy = u.copy()
    P, L = state_covariance(A, B, u, burn_in=burn_in, factor=True)
    assert np.array_equal(u, u_copy)
    assert rel(P, whole.finalize()) < 1e-12
    assert np.linalg.norm(L @ L.T - P) <= 1e-12 * np.linalg.norm(P)


@settings(max_examples=20, deadline=None)
@given(pairs)
def test_similarity_transforms_the_gramian(spec):
    seed, n, m, _ = spec
    A, B = random_pair(seed, n, m)
    rng = np.random.default_rng(seed + 2)
    T = rng.standard_normal((n, n)) + 3 * np.eye(n)
    u = rng.standard_normal((4, 30, m))
    P = state_covariance(A, B, u)
    Pt = state_covariance(T @ A @ np.linalg.inv(T), T @ B, u)
    assert rel(Pt, T @ P @ T.T) < 1e-9


def test_horizon_cuts_rows_into_contexts_and_states_path_agrees():
    A, B = random_pair(4, 3, 2)
    u = np.random.default_rng(5).standard_normal((2, 60, 2))
    P = state_covariance(A, B, u, horizon=20, burn_in=3)
    assert rel(P, state_covariance(A, B, u.reshape(6, 20, 2), burn_in=3)) < 1e-14
    acc = StateCovarianceAccumulator(n=3, horizon=20, burn_in=3)
    acc.update_states(propagate_states(A, B, u.reshape(6, 20, 2)).reshape(2, 60, 3))
    assert rel(acc.finalize(), P) < 1e-14


def test_complex_states_give_hermitian_second_moment():
    rng = np.random.default_rng(6)
    s = rng.standard_normal((3, 40, 2)) + 1j * rng.standard_normal((3, 40, 2))
    acc = StateCovarianceAccumulator(n=2)
    acc.update_states(s[:1])
    acc2 = StateCovarianceAccumulator(n=2)
    acc2.update_states(s[1:].real)  # real first, complex merged in: promotes
    P = acc.merge(acc2).finalize()
    flat = np.concatenate([s[:1].reshape(-1, 2), s[1:].real.reshape(-1, 2)])
    ref = flat.T @ flat.conj() / flat.shape[0]
    assert np.iscomplexobj(P) and np.allclose(P, P.conj().T, rtol=0, atol=0)
    assert rel(P, ref) < 1e-13


# ------------------------------------------------ convergence with derived tolerance


def frobenius_std(Aa, Ba, n, L, burn_in, contexts):
    """Exact std of ||P_hat - E P_hat||_F for Gaussian white w driving xi = Aa xi + Ba w.

    Per context Z = sum_{t>=b} s_t s_t^T with s the last n coordinates of xi; for zero-mean
    Gaussian s, Isserlis gives E||Z - EZ||_F^2 = sum_{t,u} (tr C_tu)^2 + tr(C_tu C_tu),
    C_tu = E[s_t s_u^T]. Contexts are independent and P_hat averages contexts * (L - b)
    tokens, so Var = E||Z - EZ||_F^2 / (contexts (L - b)^2).
    """
    k = Aa.shape[0]
    Pi, X = [], np.zeros((k, k))
    for _ in range(L):
        X = Aa @ X @ Aa.T + Ba @ Ba.T  # E[xi_t xi_t^T] from xi_{-1} = 0
        Pi.append(X)
    total = 0.0
    for u_ in range(burn_in, L):
        M = Pi[u_]  # E[xi_t xi_u^T] = Aa^{t-u} Pi_u for t >= u
        for t in range(u_, L):
            C = M[-n:, -n:]
            term = np.trace(C) ** 2 + np.trace(C @ C)
            total += term if t == u_ else 2.0 * term  # (t, u) and (u, t)
            M = Aa @ M
    return np.sqrt(total / (contexts * (L - burn_in) ** 2))


K_SIGMA = 6.0  # Chebyshev: P(error > 6 sigma) <= 1/36 for any seed; seeds here are fixed


def test_white_inputs_converge_to_exact_gramian_at_the_derived_rate():
    A, B = random_pair(8, 4, 2, rho=0.8)
    L = 96
    b = lti_horizon(A, rtol=1e-10)  # after b steps the transient is below 1e-10 relative
    assert b < L
    P = sla.solve_discrete_lyapunov(A, B @ B.T)
    target = expected_state_covariance(A, B, horizon=L, burn_in=b)
    assert rel(target, P) < 1e-9
    rng = np.random.default_rng(9)
    acc = StateCovarianceAccumulator(A, B, burn_in=b)
    errors, sigmas = [], []
    for contexts in (25, 75, 300, 1200):  # cumulative 25, 100, 400, 1600 contexts
        acc.update(rng.standard_normal((contexts, L, 2)))
        total = acc.count // (L - b)
        sigma = frobenius_std(A, B, 4, L, b, total)
        errors.append(np.linalg.norm(acc.finalize() - P))
        sigmas.append(sigma)
        assert errors[-1] <= K_SIGMA * sigma + 1e-9 * np.linalg.norm(P)
    assert errors[-1] < errors[0] / 2  # 64x the data: the error shrinks (rate 1/sqrt(N))
    assert sigmas[-1] == pytest.approx(sigmas[0] / 8, rel=1e-9)


def test_finite_context_estimate_converges_to_position_averaged_gramian():
    A, B = random_pair(10, 3, 1, rho=0.95)
    L = 16
    target = expected_state_covariance(A, B, horizon=L)
    slow = np.mean([sum(np.linalg.matrix_power(A, j) @ B @ B.T @ np.linalg.matrix_power(A, j).T
                        for j in range(t + 1)) for t in range(L)], axis=0)
    assert rel(target, slow) < 1e-13
    u = np.random.default_rng(11).standard_normal((4000, L, 1))
    err = np.linalg.norm(state_covariance(A, B, u) - target)
    assert err <= K_SIGMA * frobenius_std(A, B, 3, L, 0, 4000)


def test_coloured_inputs_converge_to_augmented_lyapunov_solution():
    A, B = random_pair(12, 3, 2, rho=0.7)
    rng = np.random.default_rng(13)
    AF = np.array([[0.9, 0.0], [0.3, -0.5]])
    F = DiscreteLTI(AF, rng.standard_normal((2, 2)), rng.standard_normal((2, 2)),
                    rng.standard_normal((2, 2)))
    Aa = np.block([[F.A, np.zeros((2, 3))], [B @ F.C, A]])
    Ba = np.vstack([F.B, B @ F.D])
    P_aug = sla.solve_discrete_lyapunov(Aa, Ba @ Ba.T)
    target = expected_state_covariance(A, B, shaping_filter=F)
    assert rel(target, P_aug[-3:, -3:]) < 1e-12
    white = sla.solve_discrete_lyapunov(A, B @ B.T)
    assert rel(target, white) > 0.1  # colour matters
    L = 160
    b = lti_horizon(Aa, rtol=1e-10)
    contexts = 1500
    w = rng.standard_normal((contexts, L, 2))
    # u = F w, each context from the zero filter state (independent of the code under test)
    Z = np.zeros((contexts, 2))
    u = np.empty((contexts, L, 2))
    for t in range(L):
        u[:, t] = Z @ F.C.T + w[:, t] @ F.D.T
        Z = Z @ F.A.T + w[:, t] @ F.B.T
    est = state_covariance(A, B, u, burn_in=b)
    sigma = frobenius_std(Aa, Ba, 3, L, b, contexts)
    assert rel(expected_state_covariance(A, B, horizon=L, burn_in=b, shaping_filter=F),
               target) < 1e-9
    assert np.linalg.norm(est - target) <= K_SIGMA * sigma + 1e-9 * np.linalg.norm(target)


def test_static_filter_equals_input_covariance():
    A, B = random_pair(14, 3, 2)
    Dm = np.array([[1.0, 0.0], [0.7, 0.2]])
    F = DiscreteLTI(np.zeros((0, 0)), np.zeros((0, 2)), np.zeros((2, 0)), Dm)
    for horizon in (None, 7):
        P1 = expected_state_covariance(A, B, horizon=horizon, shaping_filter=F)
        P2 = expected_state_covariance(A, B, horizon=horizon, input_covariance=Dm @ Dm.T)
        assert rel(P1, P2) < 1e-12


# ------------------------------------------------------------------ constant memory


def test_ten_million_tokens_stream_in_constant_memory():
    rng = np.random.default_rng(15)
    A, B = random_pair(16, 8, 2, rho=0.99, diagonal=True)
    acc = StateCovarianceAccumulator(A, B)
    chunk = (200, 500, 2)  # 10^5 tokens per update
    tracemalloc.start()
    try:
        sizes = []
        for i in range(100):
            acc.update(rng.standard_normal(chunk))
            if i in (9, 99):
                sizes.append(tracemalloc.get_traced_memory()[0])
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert acc.count == 10**7
    assert sizes[1] - sizes[0] < 4096  # nothing retained per update
    chunk_bytes = 8 * 200 * 500 * (2 + 8)  # inputs + states of one update
    assert peak < 4 * chunk_bytes  # bounded by the chunk, not by the 10^7 tokens
    P = acc.finalize()
    assert rel(P, expected_state_covariance(A, B)) < 0.05


# ---------------------------------------------------------------------- bad input


def test_bad_input_raises_typed_errors():
    A, B = random_pair(17, 3, 2)
    acc = StateCovarianceAccumulator(A, B)
    with pytest.raises(EmptyDataError, match="empty"):
        acc.finalize()
    with pytest.raises(EmptyDataError, match="empty"):
        _ = acc.mean
    with pytest.raises(ShapeError, match=r"\(batch, time, m=2\)"):
        acc.update(np.zeros((2, 5, 3)))
    with pytest.raises(ShapeError, match="shape"):
        acc.update(np.zeros(5))
    bad = np.zeros((2, 5, 2))
    bad[1, 3, 0] = np.nan
    with pytest.raises(NonFiniteError, match=r"\(1, 3, 0\)"):
        acc.update(bad)
    with pytest.raises(EmptyDataError, match="empty stream"):
        acc.update(np.zeros((0, 5, 2)))
    with pytest.raises(EmptyDataError, match="empty stream"):
        state_covariance(A, B, np.zeros((3, 0, 2)))
    assert acc.count == 0  # failed updates leave no trace
    with pytest.raises(ShapeError, match="multiple of horizon"):
        StateCovarianceAccumulator(A, B, horizon=4).update(np.zeros((1, 10, 2)))
    with pytest.raises(ShapeError, match="burn_in"):
        StateCovarianceAccumulator(A, B, burn_in=5).update(np.zeros((1, 5, 2)))
    with pytest.raises(InvalidArgumentError, match="burn_in"):
        StateCovarianceAccumulator(A, B, horizon=4, burn_in=4)
    with pytest.raises(InvalidArgumentError, match="update_states"):
        StateCovarianceAccumulator(n=3).update(np.zeros((1, 4, 2)))
    with pytest.raises(ShapeError, match="merge"):
        acc.merge(StateCovarianceAccumulator(n=4))
    with pytest.raises(ShapeError, match="rows"):
        StateCovarianceAccumulator(A, B[:2])
    with pytest.raises(InvalidArgumentError, match="keys"):
        StateCovarianceAccumulator.from_state_dict({"count": 1})
    with pytest.raises(UnstableSystemError, match="1.2"):
        expected_state_covariance(np.diag([1.2, 0.0]), np.ones((2, 1)))
    with pytest.raises(InvalidArgumentError, match="positive semidefinite"):
        expected_state_covariance(A, B, input_covariance=np.diag([1.0, -1.0]))
    with pytest.raises(ShapeError, match="p = m = 2"):
        expected_state_covariance(A, B, shaping_filter=DiscreteLTI([[0.5]], [[1.0]], [[1.0]]))
    with pytest.raises(InvalidArgumentError, match="at most one"):
        expected_state_covariance(A, B, input_covariance=np.eye(2),
                                  shaping_filter=DiscreteLTI([[0.5]], [[1.0]], [[1.0], [1.0]]))
