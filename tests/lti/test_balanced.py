"""Tests of lti.balanced: HSVs (vs slycot AB09AD, similarity invariance), balanced
truncation bounds for SR / BFSR / SPA, order selection (tol, ties, zero HSVs, 0 and n),
unstable parts, python-control round trips, bad input."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import scipy.linalg as sla

from lti import (
    BalancedTruncation,
    DiscreteLTI,
    InvalidArgumentError,
    NonFiniteError,
    ShapeError,
    UnstableSystemError,
    balanced_truncation,
    balanced_truncation_from_factors,
    hankel_singular_values,
    hinf_norm,
)
from lti.testing import assert_balanced, assert_reduction_within_bounds, reduction_error


def _random_system(rng, n, m, p, rho=0.9, feedthrough=True):
    A = rng.standard_normal((n, n))
    A *= rho / np.max(np.abs(np.linalg.eigvals(A)))
    D = rng.standard_normal((p, m)) if feedthrough else None
    return DiscreteLTI(A, rng.standard_normal((n, m)), rng.standard_normal((p, n)), D)


def _decaying_system(rng, n, m=1, p=1, decades=10.0):
    """Stable system with HSVs spread over about `decades` decades (dense A)."""
    a = rng.uniform(-0.95, 0.95, n)
    w = 10.0 ** (-0.5 * decades * np.arange(n) / (n - 1))
    Q, _ = np.linalg.qr(rng.standard_normal((n, n)))
    A = Q @ np.diag(a) @ Q.T
    B = Q @ (w[:, None] * rng.standard_normal((n, m)))
    C = (rng.standard_normal((p, n)) * w) @ Q.T
    return DiscreteLTI(A, B, C)


def _ab09ad_hsv(G):
    slycot = pytest.importorskip("slycot", reason="extra 'control' (slycot) not installed")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        out = slycot.ab09ad(
            "D", "B", "N", G.n, G.m, G.p, G.A.copy(), G.B.copy(), G.C.copy(), nr=G.n
        )
    return out[-1]


# ------------------------------------------------------------------------------ HSVs


@pytest.mark.parametrize("n", [5, 40, 200])
def test_hsv_agree_with_ab09ad(n):
    rng = np.random.default_rng(n)
    for G in (_random_system(rng, n, 2, 3, 0.95), _decaying_system(rng, n, 2, 2, 12.0)):
        ours, ref = hankel_singular_values(G), _ab09ad_hsv(G)
        keep = ref >= 1e-8 * ref[0]
        assert keep.sum() >= 3
        assert np.max(np.abs(ours[keep] - ref[keep]) / ref[keep]) <= 1e-8


def test_small_dense_smith_path_matches_hammarling_factors():
    from lti.lyapunov import lyapunov_factor

    rng = np.random.default_rng(77)
    for G in (_random_system(rng, 40, 2, 2, 0.95), _decaying_system(rng, 30, 2, 2, 12.0)):
        res = balanced_truncation(G, order=6)
        Lc = lyapunov_factor(G.A, G.B, method="hammarling")
        Lo = lyapunov_factor(G.A, G.C.T, transpose=True, method="hammarling")
        ref = balanced_truncation_from_factors(G, Lc, Lo, order=6)
        keep = ref.hsv >= 1e-8 * ref.hsv[0]
        assert np.max(np.abs(res.hsv[keep] - ref.hsv[keep]) / ref.hsv[keep]) <= 1e-9
        assert res.order == ref.order == 6 and res.n_unstable == 0
        err = hinf_norm(res.reduced - ref.reduced).value
        assert err <= 1e-8 * hinf_norm(G).value


@pytest.mark.slow
def test_hsv_agree_with_ab09ad_n1024():
    rng = np.random.default_rng(1024)
    G = _random_system(rng, 1024, 2, 2, 0.95)
    ours, ref = hankel_singular_values(G), _ab09ad_hsv(G)
    keep = ref >= 1e-8 * ref[0]
    assert keep.sum() >= 100
    assert np.max(np.abs(ours[keep] - ref[keep]) / ref[keep]) <= 1e-8


def test_hsv_invariant_under_similarity_and_equal_sqrt_eig():
    rng = np.random.default_rng(5)
    G = _random_system(rng, 9, 2, 2, 0.8)
    T = rng.standard_normal((9, 9)) + 3 * np.eye(9)
    s1, s2 = hankel_singular_values(G), hankel_singular_values(G.similarity(T))
    assert np.max(np.abs(s1 - s2)) <= 1e-10 * s1[0]
    P = sla.solve_discrete_lyapunov(G.A, G.B @ G.B.T)
    Q = sla.solve_discrete_lyapunov(G.A.T, G.C.T @ G.C)
    s3 = np.sort(np.sqrt(np.abs(np.linalg.eigvals(P @ Q))))[::-1]  # well conditioned here
    assert np.max(np.abs(s1 - s3)) <= 1e-9 * s1[0]


def test_hsv_diagonal_and_nonminimal():
    G = DiscreteLTI(np.diag([0.5, -0.2]), [[1.0], [1.0]], [[1.0, 0.0]])
    hsv = hankel_singular_values(G)
    assert abs(hsv[0] - 1.0 / 0.75) <= 1e-14 and hsv[1] <= 1e-15
    assert hankel_singular_values(DiscreteLTI(np.zeros((0, 0)), np.zeros((0, 1)),
                                              np.zeros((1, 0)))).shape == (0,)


def test_hsv_unstable_raises():
    with pytest.raises(UnstableSystemError, match="1.5"):
        hankel_singular_values(DiscreteLTI(np.diag([1.5, 0.2]), np.ones((2, 1)), np.ones((1, 2))))


# -------------------------------------------------------------------- bounds, methods


@pytest.mark.parametrize("method", ["sr", "bfsr"])
@pytest.mark.parametrize("match_dc", [False, True])
def test_error_within_bounds(method, match_dc):
    rng = np.random.default_rng(7)
    for _ in range(6):
        n = int(rng.integers(4, 16))
        G = _random_system(rng, n, 2, 2, rng.uniform(0.5, 0.99))
        for r in (0, 1, n // 2, n - 1, n):
            res = balanced_truncation(G, order=r, method=method, match_dc=match_dc)
            assert res.method == method and res.order == r == res.reduced.n
            assert res.reduced.is_stable()
            assert_reduction_within_bounds(G, res, rtol=1e-8)
            assert res.error_bound == res.error_bounds[r]
            rt = res.rounding_term
            assert 0.0 < rt <= 1e-10 * res.hsv[0]
            assert res.lower_bound == (max(res.hsv[r] - rt, 0.0) if r < n else 0.0)
            assert res.error_bound == pytest.approx(2 * res.hsv[r:].sum() + rt, rel=1e-14, abs=0)
            assert np.allclose(res.Ti @ res.T, np.eye(r), atol=1e-10)
            if not match_dc:
                Ar = res.Ti @ G.A @ res.T
                scale = max(1.0, np.abs(Ar).max(initial=0.0))
                assert np.allclose(res.reduced.A, Ar, atol=1e-12 * scale)
            else:  # singular perturbation keeps the DC gain G(1) exactly
                g0 = G.frequency_response([0.0])[0]
                assert np.allclose(res.reduced.frequency_response([0.0])[0], g0,
                                   rtol=1e-9, atol=1e-11 * np.abs(g0).max())


def test_error_bounds_array_and_order_zero():
    rng = np.random.default_rng(8)
    G = _random_system(rng, 8, 1, 1)
    res = balanced_truncation(G, order=0)
    tail = np.array([2 * res.hsv[k:].sum() for k in range(9)])
    assert np.all(res.error_bounds > tail)
    assert np.allclose(res.error_bounds, tail, rtol=1e-12, atol=1e-12 * res.hsv[0])
    assert 0.0 < res.error_bounds[-1] <= 1e-12 * res.hsv[0]  # the rounding term at r = n
    # order 0 keeps only D: the error is ||G - D||_inf, between sigma_1 and 2 sum sigma
    assert res.reduced.n == 0 and np.array_equal(res.reduced.D, G.D)
    err = hinf_norm(G - res.reduced).value
    assert res.hsv[0] * (1 - 1e-12) <= err <= res.error_bound


def test_full_order_sr_is_balanced_and_exact():
    rng = np.random.default_rng(9)
    G = _random_system(rng, 10, 2, 2, 0.9)
    res = balanced_truncation(G, order=10, method="sr")
    assert_balanced(res.reduced, res.hsv, rtol=1e-10)
    assert res.error_bound == res.rounding_term and res.lower_bound == 0.0
    assert reduction_error(G, res) <= res.error_bound


def test_spa_reduced_model_is_balanced():
    rng = np.random.default_rng(10)
    G = _random_system(rng, 9, 2, 2, 0.9)
    res = balanced_truncation(G, order=4, method="sr", match_dc=True)
    assert_balanced(res.reduced, res.hsv[:4], rtol=1e-10)


def test_bfsr_projection_orthonormal_and_same_transfer_function():
    rng = np.random.default_rng(11)
    G = _random_system(rng, 12, 2, 2, 0.9)
    sr = balanced_truncation(G, order=5, method="sr")
    bf = balanced_truncation(G, order=5, method="bfsr")
    assert np.allclose(bf.T.T @ bf.T, np.eye(5), atol=1e-12)
    w = np.linspace(0, np.pi, 50)
    Hs, Hb = sr.reduced.frequency_response(w), bf.reduced.frequency_response(w)
    assert np.max(np.abs(Hs - Hb)) <= 1e-9 * np.max(np.abs(Hs))


def test_auto_method_is_square_root():
    # issue 14: "auto" used bfsr once sigma_1 / sigma_r > 1e10; it is "sr" until bfsr is
    # shown to help
    rng = np.random.default_rng(12)
    G = _decaying_system(rng, 30, decades=14.0)
    assert balanced_truncation(G, order=3).method == "sr"
    hsv = hankel_singular_values(G)
    r = int(np.argmax(hsv < 1e-10 * hsv[0]))  # kept HSVs span > 1e10
    res = balanced_truncation(G, order=r + 1)
    assert res.method == "sr"
    assert_reduction_within_bounds(G, res, rtol=1e-6)


# ------------------------------------------------------------------ order selection


def test_tol_picks_smallest_qualifying_order():
    rng = np.random.default_rng(13)
    G = _random_system(rng, 15, 2, 2)
    full = balanced_truncation(G, order=15)
    for tol in np.logspace(-2, 1, 9) * full.hsv[0]:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # the smallest tol may need the full order
            res = balanced_truncation(G, tol=tol)
        r = res.order
        assert res.error_bound <= tol
        assert r == 0 or full.error_bounds[r - 1] > tol
        assert_reduction_within_bounds(G, res, rtol=1e-8)


def test_tol_met_only_by_full_order_warns():
    G = DiscreteLTI(np.diag([0.5, 0.4]), np.ones((2, 1)), np.ones((1, 2)))
    hsv = hankel_singular_values(G)
    with pytest.warns(UserWarning, match="no order below"):
        res = balanced_truncation(G, tol=hsv[1])  # bound at order 1 is 2 sigma_2 > tol
    assert res.order == 2 and res.error_bound == res.rounding_term <= 1e-13 * res.hsv[0]


def _tied_system():
    # two identical decoupled SISO channels: every HSV appears twice (exact ties)
    A1 = np.array([[0.8, 0.3], [0.0, -0.4]])
    b, c = np.array([[1.0], [0.5]]), np.array([[1.0, -1.0]])
    A = sla.block_diag(A1, A1)
    B, C = sla.block_diag(b, b), sla.block_diag(c, c)
    return DiscreteLTI(A, B, C)


def test_explicit_order_splitting_a_tie_warns():
    G = _tied_system()
    hsv = hankel_singular_values(G)
    assert abs(hsv[0] - hsv[1]) <= 1e-12 * hsv[0]
    with pytest.warns(UserWarning, match="tied"):
        res = balanced_truncation(G, order=1)
    assert res.order == 1


def test_tol_never_splits_a_tie():
    G = _tied_system()
    hsv = hankel_singular_values(G)
    tol = 2 * hsv[2:].sum() * 1.0001 + 2 * hsv[1] * 0.5  # order 1 would qualify but splits
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        res = balanced_truncation(G, tol=2 * (hsv[1] + hsv[2:].sum()) * 1.0001)
    assert res.order == 2  # moved from 1 to the end of the tie
    assert res.error_bound <= tol
    assert_reduction_within_bounds(G, res)


def test_zero_hsvs_cap_order_at_minimal():
    # state 3 uncontrollable, state 4 unobservable: minimal order 2
    A = np.diag([0.9, -0.5, 0.3, 0.2])
    B = np.array([[1.0], [1.0], [0.0], [1.0]])
    C = np.array([[1.0, 2.0, 1.0, 0.0]])
    G = DiscreteLTI(A, B, C)
    with pytest.warns(UserWarning, match="keeping 2"):
        res = balanced_truncation(G, order=4)
    assert res.minimal_order == 2 and res.order == 2
    assert reduction_error(G, res) <= 1e-12
    res = balanced_truncation(G, tol=1e-3)
    assert res.order == 2 and res.error_bound <= 1e-12


# ------------------------------------------------------------------------- unstable


def _unstable_system():
    rng = np.random.default_rng(14)
    A = np.diag([1.3, -1.1, 1.0, 0.9, 0.6, -0.5, 0.3, 0.1])
    A = A + np.triu(0.3 * rng.standard_normal((8, 8)), 1)
    Q, _ = np.linalg.qr(rng.standard_normal((8, 8)))
    return DiscreteLTI(Q @ A @ Q.T, rng.standard_normal((8, 2)), rng.standard_normal((2, 8)),
                       rng.standard_normal((2, 2)))


@pytest.mark.parametrize("match_dc", [False, True])
def test_unstable_part_is_kept(match_dc):
    G = _unstable_system()
    res = balanced_truncation(G, order=5, match_dc=match_dc)
    assert res.n_unstable == 3 and res.hsv.shape == (5,)
    assert np.all(np.isinf(res.error_bounds[:3])) and res.error_bounds[3] > 0
    un_G = np.sort_complex(G.poles()[np.abs(G.poles()) >= 1])
    un_r = np.sort_complex(res.reduced.poles()[np.abs(res.reduced.poles()) >= 1])
    assert np.allclose(un_G, un_r, atol=1e-10)
    assert_reduction_within_bounds(G, res, rtol=1e-8)
    assert np.allclose(res.Ti @ res.T, np.eye(5), atol=1e-10)
    with pytest.raises(InvalidArgumentError, match="unstable states"):
        balanced_truncation(G, order=2)
    res = balanced_truncation(G, tol=1e9)
    assert res.order == 3 and res.reduced.n == 3


# -------------------------------------------------------------- factors, control


def test_from_factors_matches_and_accepts_low_rank():
    from lti.lyapunov import lyapunov_factor, psd_factor

    rng = np.random.default_rng(15)
    G = _random_system(rng, 10, 2, 2)
    Lc, Lo = lyapunov_factor(G.A, G.B), lyapunov_factor(G.A, G.C.T, transpose=True)
    a = balanced_truncation_from_factors(G, Lc, Lo, order=4)
    b = balanced_truncation(G, order=4)
    assert isinstance(a, BalancedTruncation) and a.n_unstable == 0
    assert np.allclose(a.hsv, b.hsv, rtol=1e-12, atol=1e-14 * b.hsv[0])
    # a rank-3 controllability Gramian: 3 non-zero HSVs, zeros padded to n
    Lc3 = psd_factor(Lc[:, :3] @ Lc[:, :3].T)
    c = balanced_truncation_from_factors(G, Lc3, Lo, tol=1e-3 * b.hsv[0])
    assert c.hsv.shape == (10,) and c.minimal_order <= 3
    with pytest.raises(ShapeError, match="Lc"):
        balanced_truncation_from_factors(G, Lc[:5], Lo, order=2)
    with pytest.raises(NonFiniteError, match="Lo"):
        balanced_truncation_from_factors(G, Lc, np.full((10, 10), np.nan), order=2)


@pytest.mark.parametrize("dt", [True, 0.05])
def test_control_statespace_in_and_out(dt):
    control = pytest.importorskip("control", reason="extra 'control' not installed")
    rng = np.random.default_rng(16)
    G = _random_system(rng, 8, 1, 2)
    sys = control.ss(G.A, G.B, G.C, G.D, dt)
    res = balanced_truncation(sys, order=3)
    assert isinstance(res.reduced, control.StateSpace)
    assert res.reduced.dt == dt and res.reduced.nstates == 3
    assert_reduction_within_bounds(G, res)


def test_python_control_balred_breaks_the_discrete_bound():
    """python-control's balred reduces a discrete system as if it were continuous: its
    result comes back with dt = 0 and, read as the discrete model it should be, violates
    the discrete-time bound; ours stays within it."""
    control = pytest.importorskip("control", reason="extra 'control' not installed")
    rng = np.random.default_rng(0)
    n, r = 8, 2
    A = rng.standard_normal((n, n))
    A *= 0.95 / np.max(np.abs(np.linalg.eigvals(A)))
    G = DiscreteLTI(A, rng.standard_normal((n, 1)), rng.standard_normal((1, n)))
    ours = balanced_truncation(G, order=r)
    err = assert_reduction_within_bounds(G, ours)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        theirs = control.balred(G.to_control(), r)
    assert theirs.dt == 0  # continuous-time result for a discrete-time input
    Gb = DiscreteLTI(theirs.A, theirs.B, theirs.C, theirs.D)
    err_balred = hinf_norm(G - Gb).value if Gb.is_stable() else np.inf
    assert err_balred > ours.error_bound > err


# ----------------------------------------------------------------------- bad input


def test_bad_input_typed_errors():
    G = DiscreteLTI(np.diag([0.5, 0.2, 0.1]), np.ones((3, 1)), np.ones((1, 3)))
    cases = [
        (dict(order=2.5), "order"),
        (dict(order="2"), "order"),
        (dict(order=True), "order"),
        (dict(order=-1), "order"),
        (dict(order=4), "order"),
        (dict(tol=0.0), "tol"),
        (dict(tol=-1.0), "tol"),
        (dict(tol=float("nan")), "tol"),
        (dict(order=1, tol=1e-3), "exactly one"),
        (dict(), "exactly one"),
        (dict(order=1, method="fast"), "method"),
    ]
    for kwargs, match in cases:
        with pytest.raises(InvalidArgumentError, match=match):
            balanced_truncation(G, **kwargs)
    assert balanced_truncation(G, order=np.int64(1)).order == 1


def test_bad_systems():
    control = pytest.importorskip("control", reason="extra 'control' not installed")
    with pytest.raises(InvalidArgumentError, match="dt"):
        balanced_truncation(control.ss([[-1.0]], [[1.0]], [[1.0]], [[0.0]]), order=1)
    with pytest.raises(NonFiniteError):
        balanced_truncation(control.ss([[np.nan]], [[1.0]], [[1.0]], [[0.0]], True), order=1)
    with pytest.raises(InvalidArgumentError, match="sys"):
        balanced_truncation(np.eye(3), order=1)


# ------------------------------------------------------------------ plot and demo


def test_plot_hsv_marks_order_and_bounds(monkeypatch):
    matplotlib = pytest.importorskip("matplotlib", reason="extra 'plot' not installed")
    matplotlib.use("Agg")
    from lti.exceptions import MissingDependencyError
    from lti.plotting import plot_hsv

    G = _unstable_system()
    res = balanced_truncation(G, order=5)
    ax = plot_hsv(res, relative=True)
    labels = [line.get_label() for line in ax.lines]
    assert any("chosen order r = 5" in lab for lab in labels)
    assert any("error bound" in lab for lab in labels)
    assert any("lower bound" in lab for lab in labels)
    ydata = ax.lines[0].get_ydata()
    np.testing.assert_allclose(ydata, res.hsv / res.hsv[0], rtol=1e-15, atol=0)
    monkeypatch.setitem(__import__("sys").modules, "matplotlib.pyplot", None)
    with pytest.raises(MissingDependencyError, match=r"\[plot\]"):
        plot_hsv(res)


def test_demo_runs_and_reports_error_within_bounds(capsys):
    from lti.demo import main

    assert main(["--n", "40", "--tol", "1e-4"]) == 0
    out = capsys.readouterr().out
    assert "within the bounds" in out and "leading Hankel singular values" in out
