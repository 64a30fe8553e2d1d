"""Regression tests for issue 14 (items 1-7) and the issue-17 additions to the lti API.

Each test failed on the code before its fix (main at 16055fb).
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest

from lti import (
    DiscreteLTI,
    InvalidArgumentError,
    balanced_truncation,
    balanced_truncation_from_factors,
    controllability_gramian,
    gramian_factors,
    h2_norm,
    hankel_singular_values,
    hinf_norm,
    observability_gramian,
    weighted_balanced_truncation,
)
from lti.system import as_discrete_system


def _random_stable(seed, n=8, m=1, p=1, rho=0.9):
    rng = np.random.default_rng(seed)
    A = rng.standard_normal((n, n))
    A *= rho / np.max(np.abs(np.linalg.eigvals(A)))
    return DiscreteLTI(A, rng.standard_normal((n, m)), rng.standard_normal((p, n)),
                       rng.standard_normal((p, m)))


# ------------------------------------------------------------- issue 17: rel_tol


def test_rel_tol_keeps_the_hsvs_above_the_threshold():
    G = _random_stable(1, n=12)
    hsv = hankel_singular_values(G)
    for rel in (1.0, 0.5, 1e-2, 1e-4):
        res = balanced_truncation(G, rel_tol=rel)
        assert res.order == int(np.count_nonzero(hsv >= rel * hsv[0]))
        assert res.error_bound == pytest.approx(2 * hsv[res.order:].sum() + res.rounding_term,
                                               rel=1e-12, abs=0)
    # the same rule from given factors and for the weighted reduction
    Lc, Lo = gramian_factors(G)
    assert balanced_truncation_from_factors(G, Lc, Lo, rel_tol=1e-2).order == (
        balanced_truncation(G, rel_tol=1e-2).order
    )
    W = weighted_balanced_truncation(G, input_covariance=np.eye(1), rel_tol=1e-2)
    assert W.order == int(np.count_nonzero(W.hsv >= 1e-2 * W.hsv[0]))


def test_rel_tol_keeps_the_unstable_part():
    G = _random_stable(2, n=6)
    A = np.zeros((8, 8))
    A[:6, :6] = G.A
    A[6:, 6:] = np.diag([1.5, -2.0])
    rng = np.random.default_rng(3)
    Gu = DiscreteLTI(A, rng.standard_normal((8, 1)), rng.standard_normal((1, 8)))
    res = balanced_truncation(Gu, rel_tol=1e-3)
    assert res.n_unstable == 2
    assert res.order == 2 + int(np.count_nonzero(res.hsv >= 1e-3 * res.hsv[0]))


@pytest.mark.parametrize(
    "kwargs",
    [dict(rel_tol=0.0), dict(rel_tol=1.5), dict(rel_tol=np.nan), dict(rel_tol=True),
     dict(rel_tol=0.1, order=2), dict(rel_tol=0.1, tol=1e-3), dict()],
)
def test_rel_tol_is_validated(kwargs):
    with pytest.raises(InvalidArgumentError):
        balanced_truncation(_random_stable(4), **kwargs)


def test_rel_tol_of_the_zero_system_keeps_nothing():
    G = DiscreteLTI(0.5 * np.eye(3), np.zeros((3, 1)), np.ones((1, 3)))
    assert balanced_truncation(G, rel_tol=0.5).order == 0


# ------------------------------------------- issue 14 item 7: one conversion rule


def test_every_entry_point_accepts_transfer_functions_and_tuples():
    control = pytest.importorskip("control", reason="extra 'control' not installed")
    tf = control.tf([1.0, 0.5], [1.0, -0.9, 0.2], True)  # (z + 0.5) / (z^2 - 0.9 z + 0.2)
    G = DiscreteLTI.from_control(tf)
    tup = (G.A, G.B, G.C, G.D)
    ref_hinf = hinf_norm(G).value
    for sys in (tf, tup, control.ss(tf)):
        assert hinf_norm(sys).value == pytest.approx(ref_hinf, rel=1e-12, abs=0)
        assert h2_norm(sys) == pytest.approx(h2_norm(G), rel=1e-12, abs=0)
        assert np.allclose(controllability_gramian(sys), controllability_gramian(G))
        assert np.allclose(observability_gramian(sys), observability_gramian(G))
        np.testing.assert_allclose(hankel_singular_values(sys), hankel_singular_values(G),
                                   rtol=1e-12, atol=0)
        res = balanced_truncation(sys, order=1)
        assert res.order == 1
    # a python-control input gives a python-control result; a tuple gives a DiscreteLTI
    assert isinstance(balanced_truncation(tf, order=1).reduced, control.StateSpace)
    assert isinstance(balanced_truncation(tup, order=1).reduced, DiscreteLTI)


def test_conversion_rule_rejects_what_it_cannot_read():
    with pytest.raises(InvalidArgumentError, match="tuple"):
        as_discrete_system((np.eye(2),))
    with pytest.raises(InvalidArgumentError, match="DiscreteLTI"):
        hinf_norm(np.eye(2))
    control = pytest.importorskip("control", reason="extra 'control' not installed")
    with pytest.raises(InvalidArgumentError, match="discrete-time"):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            h2_norm(control.tf([1.0], [1.0, 1.0]))  # continuous time


# ------------------------------------------------ issue 14 item 1: BFSR bound


def _hinf_slycot(E: DiscreteLTI) -> float:
    """||E||_inf independently of lti.hinf_norm: the larger of SLICOT AB13DD and a dense
    sweep of sigma_max(E(e^{j theta})) on 20001 angles (AB13DD alone missed the peak of
    the bidiagonal case below: 0.1290 at 0.775 rad where the peak is 0.1647 at 1.353)."""
    slycot = pytest.importorskip("slycot", reason="extra 'control' (slycot) not installed")
    n, m, p = E.n, E.m, E.p
    gpeak, _ = slycot.ab13dd("D", "I", "N", "D", n, m, p, E.A.copy(), np.eye(n), E.B.copy(),
                             E.C.copy(), E.D.copy(), tol=1e-12)
    H = E.frequency_response(np.linspace(0.0, np.pi, 20001))
    sweep = float(np.max(np.linalg.svd(H, compute_uv=False)[:, 0]))
    return max(float(gpeak), sweep)


def _nonnormal_family(seed):
    """Issue 14's family: A = Q (triu(2 randn, 1) + diag(U(-0.95, 0.95))) Q^T."""
    rng = np.random.default_rng(seed)
    n, m, p = int(rng.integers(20, 31)), int(rng.integers(1, 3)), int(rng.integers(1, 3))
    T = np.triu(2 * rng.standard_normal((n, n)), 1) + np.diag(rng.uniform(-0.95, 0.95, n))
    Q = np.linalg.qr(rng.standard_normal((n, n)))[0]
    G = DiscreteLTI(Q @ T @ Q.T, rng.standard_normal((n, m)), rng.standard_normal((p, n)),
                    rng.standard_normal((p, m)))
    return G, rng


@pytest.mark.parametrize("seed", [8, 18, 28, 29])  # bfsr err / bound 4.05, 1.86, 11.3, 27
@pytest.mark.parametrize("method", ["sr", "bfsr", "auto"])
@pytest.mark.parametrize("match_dc", [False, True])
def test_bfsr_bound_on_strongly_non_normal_systems(seed, method, match_dc):
    G, rng = _nonnormal_family(seed)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        nmin = balanced_truncation(G, order=G.n).minimal_order
    r = int(rng.integers(1, nmin))
    res = balanced_truncation(G, order=r, method=method, match_dc=match_dc)
    err = _hinf_slycot(G - res.reduced)
    assert res.lower_bound <= err <= res.error_bound
    # an oblique projector to working accuracy (||Ti|| reaches 1e6 here, so the absolute
    # error of the product itself is eps ||Ti|| ||T||; it was 0.19 before the fix)
    TiT = res.Ti @ res.T
    scale = np.linalg.norm(res.Ti, 2) * np.linalg.norm(res.T, 2)
    assert np.linalg.norm(TiT - np.eye(r), 2) <= 1e-8 * scale
    if res.method == "bfsr":
        assert np.linalg.norm(res.T.T @ res.T - np.eye(r), 2) <= 1e-12
    assert res.method == ("bfsr" if method == "bfsr" else "sr")


# --------------------------------------- issue 14 items 5, 7: slycot width, Q^H message


@pytest.mark.parametrize("transpose", [False, True])
def test_slycot_factor_with_more_input_columns_than_states(transpose):
    pytest.importorskip("slycot", reason="extra 'control' (slycot) not installed")
    from lti import lyapunov_factor

    # the shape of SLICOT's SB03OD example (n = 4 states, m = 5 columns): f2py refused it
    rng = np.random.default_rng(5)
    A = rng.standard_normal((4, 4))
    A *= 0.8 / np.max(np.abs(np.linalg.eigvals(A)))
    B = rng.standard_normal((4, 5))
    L = lyapunov_factor(A, B, method="slycot", transpose=transpose)
    Lh = lyapunov_factor(A, B, method="hammarling", transpose=transpose)
    assert L.shape == (4, 4)
    X, Xh = L @ L.T, Lh @ Lh.T
    assert np.linalg.norm(X - Xh) <= 1e-12 * np.linalg.norm(Xh)


def test_complex_asymmetry_message_says_hermitian():
    from lti import NotSymmetricError, solve_discrete_lyapunov

    Q = np.array([[1.0, 1j], [1j, 1.0]])  # symmetric but not Hermitian
    with pytest.raises(NotSymmetricError, match=r"Hermitian; got max\|Q - Q\^H\|"):
        solve_discrete_lyapunov(np.diag([0.5, 0.2j]), Q)
    with pytest.raises(NotSymmetricError, match=r"symmetric; got max\|Q - Q\^T\|"):
        solve_discrete_lyapunov(np.diag([0.5, 0.2]), np.array([[1.0, 2.0], [0.0, 1.0]]))


# --------------------------------------------- issue 14 item 2: FIR / nilpotent systems


@pytest.mark.parametrize("n", [1, 2, 5, 12])
def test_shift_register_reduces_at_every_order(n):
    # z^-n: A the down-shift, B = e_1, C = e_n^T; every HSV is exactly 1
    A = np.diag(np.ones(n - 1), -1)
    G = DiscreteLTI(A, np.eye(n)[:, :1], np.eye(n)[-1:])
    assert np.allclose(hankel_singular_values(G), 1.0, rtol=1e-14, atol=0)
    for r in range(n + 1):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # splitting ties warns
            res = balanced_truncation(G, order=r)
        assert res.order == r and res.minimal_order == n
        assert res.error_bound == pytest.approx(2.0 * (n - r), abs=1e-10)
        assert 0.0 < res.rounding_term <= 1e-10
        err = _hinf_slycot(G - res.reduced) if r < n else hinf_norm(G - res.reduced).value
        assert res.lower_bound <= err <= res.error_bound + 1e-12


def test_nilpotent_spectral_radius_bound_is_zero():
    from lti.gramians import stable_gramian_factors

    A = np.diag(np.ones(7), -1)
    F = stable_gramian_factors(DiscreteLTI(A, np.eye(8)[:, :1], np.eye(8)[-1:]))
    assert F.path == "smith" and F.rho <= 1e-30  # was 1.19: the zero power A^8 was skipped


@pytest.mark.parametrize("numtaps", [9, 17, 33, 65])
def test_fir_filters_reduce_at_every_order(numtaps):
    signal = pytest.importorskip("scipy.signal", reason="scipy is required")
    h = signal.firwin(numtaps, 0.3)
    N = numtaps - 1
    G = DiscreteLTI(np.diag(np.ones(N - 1), -1), np.eye(N)[:, :1], h[1:][None, :], h[:1][None, :])
    hsv = hankel_singular_values(G)
    nmin = balanced_truncation(G, order=N).minimal_order
    assert nmin == int(np.count_nonzero(hsv > N * np.finfo(float).eps * hsv[0])) > N // 2
    for r in sorted({1, 2, nmin // 2, nmin - 1, nmin}):
        res = balanced_truncation(G, order=r)
        assert res.order == r
        err = _hinf_slycot(G - res.reduced)
        assert res.lower_bound <= err <= res.error_bound + 1e-12 * hsv[0]


def test_bidiagonal_non_normal_system_is_not_collapsed():
    # 1 / (z - 0.59)^20 in bidiagonal form: HSVs from 5.1e7 down to 1.2e-3, computed to
    # 1e-17 sigma_1 (checked against 60-digit arithmetic)
    n = 20
    A = 0.59 * np.eye(n) + np.diag(np.ones(n - 1), -1)
    G = DiscreteLTI(A, np.eye(n)[:, :1], np.eye(n)[-1:])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        res = balanced_truncation(G, order=n)
    assert res.hsv[0] == pytest.approx(5.08451e7, rel=1e-5)
    assert res.minimal_order >= 17  # the certified floor n eps ||Lc|| ||Lo|| / (1 - rho^2)
    for r in (1, 5, 10, res.minimal_order):
        red = balanced_truncation(G, order=r)
        err = _hinf_slycot(G - red.reduced)
        assert red.lower_bound <= err <= red.error_bound + 1e-12 * res.hsv[0]
    # the same transfer function where the Smith path runs (a smaller subdiagonal)
    A = 0.59 * np.eye(n) + 0.5 * np.diag(np.ones(n - 1), -1)
    from lti.gramians import stable_gramian_factors

    F = stable_gramian_factors(DiscreteLTI(A, np.eye(n)[:, :1], np.eye(n)[-1:]))
    assert F.path == "smith" and 0.59 <= F.rho < 1.0


# ------------------------------------------ issue 14 item 4: poles on the unit circle


def _sampled_oscillator(shrink=0.0):
    import scipy.linalg as sla

    A = sla.expm(0.1 * np.array([[0.0, 1.0], [-1.0, 0.0]]))  # |lambda| = 1 to rounding
    A = A * (1.0 - shrink) / np.max(np.abs(np.linalg.eigvals(A)))
    return DiscreteLTI(A, [[0.0], [1.0]], [[1.0, 0.0]])


def test_poles_within_rounding_of_the_unit_circle_are_refused_everywhere():
    from lti import UnstableSystemError

    G = _sampled_oscillator(shrink=3e-16)  # spectral radius 1 - 3e-16 (as python-control's)
    assert G.spectral_radius() < 1.0
    for f in (hinf_norm, h2_norm, hankel_singular_values, gramian_factors,
              controllability_gramian, observability_gramian):
        with pytest.raises(UnstableSystemError, match="rounding margin"):
            f(G)
    # balanced truncation keeps the marginal pair exactly, as an unstable part
    res = balanced_truncation(G, order=2)
    assert res.n_unstable == 2 and res.order == 2
    # a pole well inside (1 - 1e-9) is still stable
    assert np.isfinite(hinf_norm(_sampled_oscillator(shrink=1e-9)).value)


# ------------------------------------------------- issue 14 item 6: hinf_norm accuracy


def test_hinf_of_ab13dd_example_after_tustin_dt_01():
    """SLICOT AB13DD's lightly damped example (three modes, damping 2e-4..2e-6), moved to
    discrete time by Tustin with dt = 0.1; the exact peak of these float data, in 40-digit
    arithmetic, is 500000.000420913. lti was off by 1.3e-9 here (above the norm, Schur-form
    evaluation), AB13DD by 2.1e-10."""
    A = np.zeros((6, 6))
    for k, (a, c) in enumerate([(0.5, 0.0002), (1.0, 0.00002), (2.0, 0.000002)]):
        A[2 * k:2 * k + 2, 2 * k:2 * k + 2] = [[0.0, 1.0], [-a, -c]]
    B = np.array([[1.0], [0], [1], [0], [1], [0]])
    C = np.array([[1.0, 0, 1, 0, 1, 0]])
    dt = 0.1
    M = np.linalg.inv(np.eye(6) - A * dt / 2)
    G = DiscreteLTI((np.eye(6) + A * dt / 2) @ M, np.sqrt(dt) * M @ B, np.sqrt(dt) * C @ M,
                    C @ M @ B * dt / 2)
    res = hinf_norm(G)
    exact = 500000.000420913
    assert abs(res.value - exact) <= 1e-10 * exact
    assert abs(res.value - exact) <= res.accuracy * exact
    assert abs(res.omega - 2 * np.arctan(np.sqrt(2.0) * dt / 2)) <= 1e-6
    value, omega = res  # still unpacks as two values
    assert (value, omega) == (res.value, res.omega)


def test_spa_pole_on_the_unit_circle_falls_back_to_truncation():
    """SPA of a firwin low-pass FIR at order 1: A_r = -1 to 1e-14 (|A_r|^2 = 1 - B_r^2 /
    sigma_1 with B_r ~ 1e-7); the bound was first reported as finite although the computed
    model's error is infinite, then as inf; now the truncated model of that order is
    returned (finite, certified bounds) with a warning and match_dc False."""
    signal = pytest.importorskip("scipy.signal", reason="scipy is required")
    from lti.testing import assert_reduction_within_bounds

    rng = np.random.default_rng(3019)  # benchmarks/bt_rounding_term.py's fir family, seed 19
    N = int(rng.integers(8, 65))
    h = signal.firwin(N + 1, rng.uniform(0.1, 0.9))
    G = DiscreteLTI(np.diag(np.ones(N - 1), -1), np.eye(N)[:, :1], h[1:][None, :],
                    h[:1][None, :])
    with pytest.warns(UserWarning, match="pole within rounding of the unit"):
        res = balanced_truncation(G, order=1, match_dc=True)
    plain = balanced_truncation(G, order=1)
    assert not res.match_dc and res.order == 1 and np.isfinite(res.error_bound)
    # the same truncated model to rounding: from N = 32 (LEAD_MIN_N) on, plain truncation
    # takes the leading-vector SVD, the SPA attempt all vectors (dgesdd)
    np.testing.assert_allclose(np.abs(res.reduced.A), np.abs(plain.reduced.A), rtol=1e-9)
    assert res.error_bound == pytest.approx(plain.error_bound, rel=1e-9, abs=0)
    assert res.reduced.spectral_radius() < 1.0 - 1e-6
    assert_reduction_within_bounds(G, res)
