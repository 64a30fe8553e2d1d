"""Data-driven Gramians: streaming accumulator, exact expectations, convergence with a
tolerance derived from the sample size, and input-weighted balanced truncation."""

from __future__ import annotations

import gc
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
    assert sigmas[-1] == pytest.approx(sigmas[0] / 8, rel=1e-9, abs=0)


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
    A, B = random_pair(16, 4, 2, rho=0.99, diagonal=True)
    acc = StateCovarianceAccumulator(A, B)
    chunk = (200, 500, 2)  # 10^5 tokens per update
    buf = np.empty(chunk)
    tracemalloc.start()
    try:
        sizes = []
        for i in range(100):
            acc.update(rng.standard_normal(out=buf))
            if i in (9, 99):
                gc.collect()  # cyclic garbage of earlier tests is not retained memory
                sizes.append(tracemalloc.get_traced_memory()[0])
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert acc.count == 10**7
    # nothing retained per update: 90 updates between the readings, so 64 kB allows < 730
    # bytes per update (one retained 16 x 16 matrix would be 2 kB each); a few kB of numpy's
    # small-block cache (lfilter's outputs, depending on earlier tests) are not a leak: with
    # 4096 here the test failed in 1 of 3 multi-file runs (9728 - 2536, 12122 - 940)
    assert sizes[1] - sizes[0] < 64 * 1024
    chunk_bytes = 8 * 200 * 500 * (2 + 4)  # inputs + states of one update
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


# ------------------------------------------------- input-weighted balanced truncation


def _needs_reduction():
    from lti import hinf_norm  # the project's own module: a broken import fails, not skips

    return hinf_norm


def random_system(seed: int, n: int, m: int, p: int, rho: float = 0.9) -> DiscreteLTI:
    A, B = random_pair(seed, n, m, rho=rho)
    rng = np.random.default_rng(seed + 100)
    return DiscreteLTI(A, B, rng.standard_normal((p, n)), rng.standard_normal((p, m)))


def reduced_weighted(res):
    """G~_r: the weighted system reduced by the same projection."""
    Gt = res.weighted_system
    return DiscreteLTI(res.reduced.A, res.Ti @ Gt.B, Gt.C @ res.T)


def right_multiply(G: DiscreteLTI, S: np.ndarray) -> DiscreteLTI:
    return DiscreteLTI(G.A, G.B @ S, G.C, G.D @ S)


def check_between(lower, value, upper):
    slack = 1e-9 * max(upper, 1.0)
    assert lower - slack <= value <= upper + slack, (lower, value, upper)


@settings(max_examples=12, deadline=None)
@given(st.integers(0, 2**32 - 1), st.integers(2, 6), st.integers(1, 3), st.integers(1, 2),
       st.data())
def test_white_covariance_weighted_bound_is_the_bound_of_G_W_half(seed, n, m, p, data):
    hinf_norm = _needs_reduction()
    from lti.datadriven import weighted_balanced_truncation

    G = random_system(seed, n, m, p)
    rng = np.random.default_rng(seed + 3)
    V = rng.standard_normal((m, m))
    W = V @ np.diag(10.0 ** rng.uniform(-4, 1, m)) @ V.T
    r = data.draw(st.integers(0, n - 1))
    res = weighted_balanced_truncation(G, input_covariance=W, order=r)
    assert res.order == r and res.certified and not res.modified
    E = G - res.reduced
    Wh = sla.sqrtm(W).real
    check_between(res.weighted_lower_bound, hinf_norm(right_multiply(E, Wh)).value,
                  res.weighted_error_bound)
    assert res.shaped_error_bound == res.weighted_error_bound
    check_between(res.lower_bound, hinf_norm(E).value, res.error_bound)
    # G~ = G W^{1/2} exactly: same transfer function
    H1 = res.weighted_system.frequency_response([0.3, 2.0])
    H2 = right_multiply(G, Wh).frequency_response([0.3, 2.0]) - G.D @ Wh
    assert np.allclose(H1, H2, rtol=1e-10, atol=1e-10 * np.abs(H2).max())


def test_shaping_filter_bound_holds_for_G_minus_Gr_times_F():
    hinf_norm = _needs_reduction()
    from lti.datadriven import weighted_balanced_truncation

    G = random_system(21, 8, 3, 2)
    rng = np.random.default_rng(22)
    F = DiscreteLTI(np.array([[0.95, 0.0], [0.1, -0.6]]), rng.standard_normal((2, 3)),
                    rng.standard_normal((3, 2)), 0.1 * rng.standard_normal((3, 3)))
    for r in (1, 3, 5, 7):
        res = weighted_balanced_truncation(G, shaping_filter=F, order=r)
        E = G - res.reduced
        shaped = hinf_norm(F.series(E)).value  # ||(G - G_r) F||_inf
        assert shaped <= res.shaped_error_bound
        check_between(res.weighted_lower_bound, hinf_norm(res.weighted_system
                                                          - reduced_weighted(res)).value,
                      res.weighted_error_bound)
        check_between(res.lower_bound, hinf_norm(E).value, res.error_bound)
        assert res.input_model == "shaping_filter" and res.certified


def test_data_driven_and_finite_horizon_bounds_hold():
    hinf_norm = _needs_reduction()
    from lti.datadriven import weighted_balanced_truncation

    G = random_system(23, 7, 2, 2)
    u = np.random.default_rng(24).standard_normal((40, 300, 2)) * np.array([1.0, 0.05])
    P = state_covariance(G.A, G.B, u, burn_in=100)
    for kwargs in ({"state_covariance": P}, {"state_covariance": P, "horizon": 40},
                   {"input_covariance": np.diag([1.0, 0.0025]), "horizon": 40}):
        for r in (1, 4):
            res = weighted_balanced_truncation(G, order=r, **kwargs)
            assert res.modified  # sampling noise / finite horizon: Gramians repaired
            E = G - res.reduced
            check_between(res.weighted_lower_bound,
                          hinf_norm(res.weighted_system - reduced_weighted(res)).value,
                          res.weighted_error_bound)
            check_between(res.lower_bound, hinf_norm(E).value, res.error_bound)
            if "input_covariance" in kwargs:
                Wh = np.diag([1.0, 0.05])
                assert hinf_norm(right_multiply(E, Wh)).value <= res.shaped_error_bound
            else:
                assert res.shaped_error_bound is None


def test_identity_covariance_is_plain_balanced_truncation():
    _needs_reduction()
    from lti.balanced import balanced_truncation
    from lti.datadriven import weighted_balanced_truncation

    G = random_system(25, 6, 2, 2)
    res = weighted_balanced_truncation(G, input_covariance=np.eye(2), order=3)
    plain = balanced_truncation(G, order=3)
    assert np.allclose(res.hsv, res.unweighted_hsv, rtol=1e-10, atol=1e-12)
    assert res.weighted_error_bound == pytest.approx(res.unweighted_error_bound, rel=1e-10, abs=0)
    assert res.error_bound == pytest.approx(plain.error_bound, rel=1e-10, abs=0)
    w = np.linspace(0, np.pi, 7)
    assert np.allclose(res.reduced.frequency_response(w), plain.reduced.frequency_response(w),
                       rtol=1e-8, atol=1e-10)


def test_weighting_wins_under_its_input_model_and_loses_outside_it():
    hinf_norm = _needs_reduction()
    from lti.balanced import balanced_truncation
    from lti.datadriven import weighted_balanced_truncation

    # input 1 drives slow modes weakly, input 2 drives fast modes strongly
    a = np.array([0.95, 0.9, 0.85, 0.5, 0.4, 0.3])
    B = np.zeros((6, 2))
    B[:3, 0], B[3:, 1] = 1.0, 30.0
    G = DiscreteLTI(np.diag(a), B, np.ones((1, 6)))
    W = np.diag([1.0, 1e-6])  # but the data almost never use input 2
    Wh = np.sqrt(W)
    res = weighted_balanced_truncation(G, input_covariance=W, order=3)
    plain = balanced_truncation(G, order=3)
    e_w = hinf_norm(right_multiply(G - res.reduced, Wh)).value
    e_p = hinf_norm(right_multiply(G - plain.reduced, Wh)).value
    assert e_w < 0.1 * e_p  # far better for the inputs actually seen
    assert hinf_norm(G - res.reduced).value > hinf_norm(G - plain.reduced).value  # worse outside
    assert res.unweighted_error_bound < hinf_norm(G - res.reduced).value  # not a bound here


def test_enns_option_reports_uncertified_bounds_as_nan():
    _needs_reduction()
    from lti.datadriven import weighted_balanced_truncation

    G = random_system(26, 5, 2, 1)
    P = state_covariance(G.A, G.B, np.random.default_rng(27).standard_normal((5, 50, 2)))
    res = weighted_balanced_truncation(G, state_covariance=P, order=2, gramian="enns")
    assert not res.certified
    assert np.isnan(res.weighted_error_bound) and np.isnan(res.error_bound)
    assert np.allclose(res.controllability_gramian, P)
    ok = weighted_balanced_truncation(G, input_covariance=np.eye(2), order=2, gramian="enns")
    assert ok.certified and np.isfinite(ok.weighted_error_bound)


def test_weighted_truncation_rejects_bad_input():
    _needs_reduction()
    from lti.datadriven import weighted_balanced_truncation
    from lti.exceptions import NotSymmetricError

    G = random_system(28, 3, 2, 1)
    with pytest.raises(InvalidArgumentError, match="exactly one"):
        weighted_balanced_truncation(G, order=1)
    with pytest.raises(InvalidArgumentError, match="exactly one"):
        weighted_balanced_truncation(G, input_covariance=np.eye(2), state_covariance=np.eye(3))
    with pytest.raises(InvalidArgumentError, match="gramian"):
        weighted_balanced_truncation(G, input_covariance=np.eye(2), gramian="wsl")
    with pytest.raises(ShapeError, match=r"\(n, n\)"):
        weighted_balanced_truncation(G, state_covariance=np.eye(2), order=1)
    with pytest.raises(NotSymmetricError):
        weighted_balanced_truncation(G, state_covariance=np.triu(np.ones((3, 3))), order=1)
    with pytest.raises(ShapeError, match=r"\(m, m\)"):
        weighted_balanced_truncation(G, input_covariance=np.eye(3), order=1)
    with pytest.raises(UnstableSystemError, match="1.1"):
        weighted_balanced_truncation(DiscreteLTI(np.diag([1.1, 0.2]), np.eye(2), np.ones((1, 2))),
                                     input_covariance=np.eye(2), order=1)
    with pytest.raises(InvalidArgumentError, match="DiscreteLTI"):
        weighted_balanced_truncation(np.eye(3), input_covariance=np.eye(2))


def test_float32_states_are_accumulated_in_float64():
    rng = np.random.default_rng(29)
    s = (1e4 + rng.standard_normal((4, 300, 2))).astype(np.float32)
    acc = StateCovarianceAccumulator(n=2)
    acc.update_states(s)
    ref = np.einsum("bti,btj->ij", s.astype(np.float64), s.astype(np.float64)) / 1200
    assert acc.finalize().dtype == np.float64
    assert rel(acc.finalize(), ref) < 1e-13


def test_singular_input_covariance_certifies_only_the_weighted_error():
    hinf_norm = _needs_reduction()
    from lti.datadriven import weighted_balanced_truncation

    G = random_system(30, 5, 2, 1)
    W = np.array([[1.0, 1.0], [1.0, 1.0]])  # inputs always equal: rank one
    res = weighted_balanced_truncation(G, input_covariance=W, order=2)
    assert res.input_gain == np.inf and res.error_bound == np.inf
    Wh = W / np.sqrt(2.0)  # W = v v^T with v = (1, 1): W^{1/2} = v v^T / |v|
    check_between(res.weighted_lower_bound, hinf_norm(right_multiply(G - res.reduced, Wh)).value,
                  res.weighted_error_bound)
    # same HSVs as the single-input system driven along v
    from lti import hankel_singular_values

    single = DiscreteLTI(G.A, G.B @ np.ones((2, 1)), G.C)
    assert np.allclose(res.hsv, hankel_singular_values(single), rtol=1e-9, atol=1e-12)
