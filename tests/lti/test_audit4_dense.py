"""Dense-core audit (session 8): balanced truncation and the norms when ``max|B| max|C|``
leaves the range of squared quantities, and the BT rounding term's dependence on ``D``.

Found by probing: with ``B, C ~ 3e153`` (HSVs ~ 7e307, representable) every bound of
``balanced_truncation`` was NaN and an explicit ``order=5`` (full) came back as order 0
with a "noise floor" warning (the floor ``||Lc|| ||Lo|| / (1 - rho^2)`` overflowed); with
``B, C ~ 1e154`` the HSVs raised ``SolverError("SVD ... did not converge")`` although
``hankel_norm`` documents ``NonFiniteError``; ``h2_norm`` returned inf with a
RuntimeWarning where ``hinf_norm`` raises. The rounding term carried ``||D||_F`` although
truncation returns ``D_r = D`` bit for bit: ``D = 1e8`` made the full-order bound 1e-6.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest

from lti import (
    DiscreteLTI,
    balanced_truncation,
    balanced_truncation_from_factors,
    h2_norm,
    hankel_norm,
    hankel_singular_values,
)
from lti.exceptions import NonFiniteError

EPS = np.finfo(np.float64).eps


def _abc(n=5, seed=0):
    rng = np.random.default_rng(seed)
    A = rng.standard_normal((n, n))
    A *= 0.8 / np.max(np.abs(np.linalg.eigvals(A)))
    return A, rng.standard_normal((n, 2)), rng.standard_normal((3, n)), rng.standard_normal(
        (3, 2))


def _finite_result(res):
    vals = [res.error_bound, res.lower_bound, res.rounding_term]
    return not np.isnan(vals).any() and not np.isnan(res.error_bounds).any() and not np.isnan(
        res.hsv).any()


@pytest.mark.parametrize("s", [3e153, 2.0**200, 1e-100, 2.0**-250])  # |B||C| beyond 2^+-300
@pytest.mark.parametrize("match_dc", [False, True])
def test_bt_at_extreme_scales_is_the_scaled_unit_problem(s, match_dc):
    A, B, C, _ = _abc()
    ref = balanced_truncation(DiscreteLTI(A, B, C), order=2, match_dc=match_dc)
    full = balanced_truncation(DiscreteLTI(A, B * s, C * s), order=5, match_dc=match_dc)
    assert full.order == 5 and _finite_result(full)  # was order 0 and NaN at 3e153
    G = DiscreteLTI(A, B * s, C * s)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no overflow warnings, no noise-floor warning
        res = balanced_truncation(G, order=2, match_dc=match_dc)
    s2 = s * s
    assert res.order == 2 and res.minimal_order == 5 and _finite_result(res)
    np.testing.assert_allclose(res.hsv, ref.hsv * s2, rtol=1e-12)
    assert res.error_bound == pytest.approx(ref.error_bound * s2, rel=1e-12)
    assert res.lower_bound == pytest.approx(ref.lower_bound * s2, rel=1e-12)
    np.testing.assert_allclose(res.T, ref.T, rtol=1e-10, atol=1e-12 * np.abs(ref.T).max())
    w = np.linspace(0.0, np.pi, 9)
    np.testing.assert_allclose(res.reduced.frequency_response(w) / s / s,
                               ref.reduced.frequency_response(w), rtol=1e-10)


def test_bt_with_huge_bc_keeps_the_requested_order_and_control_type():
    control = pytest.importorskip("control", reason="python-control converts the result")
    A, B, C, D = _abc()
    res = balanced_truncation(control.ss(A, B * 3e153, C * 3e153, D, 0.5), order=3)
    assert isinstance(res.reduced, control.StateSpace) and res.reduced.dt == 0.5
    assert res.order == 3 and np.isfinite(res.error_bound) and np.isfinite(res.lower_bound)
    np.testing.assert_array_equal(res.reduced.D, D)


def test_tol_and_warnings_are_in_the_units_of_the_system_passed():
    A, B, C, _ = _abc()
    ref = balanced_truncation(DiscreteLTI(A, B, C), order=0)
    s = 2.0**-170  # max|B| max|C| ~ 2^-340: rescaled inside
    G = DiscreteLTI(A, B * s, C * s)
    tol = 1.0001 * ref.error_bounds[2]
    assert balanced_truncation(G, tol=tol * s * s).order == balanced_truncation(
        DiscreteLTI(A, B, C), tol=tol).order == 2
    with pytest.warns(UserWarning, match=r"no order below n = 5.*times 4\^-1\d\d are") as rec:
        balanced_truncation(G, tol=1e-30 * s * s)
    assert rec[0].filename == __file__  # re-issued at the caller's line


def test_hsv_beyond_the_float_range_are_inf_and_the_norms_say_so():
    A, B, C, D = _abc()
    G = DiscreteLTI(A, B * 1e154, C * 1e154)  # sigma_1 ~ 7.8e308: not representable
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        hsv = hankel_singular_values(G)  # was SolverError (SVD did not converge)
    assert np.isinf(hsv[0]) and not np.isnan(hsv).any()
    with pytest.raises(NonFiniteError, match="overflows float64"):
        hankel_norm(G)  # documented; was SolverError
    with pytest.raises(NonFiniteError, match="H2 norm"):
        h2_norm(DiscreteLTI(A, B * 1e160, C * 1e160, D))  # was inf and a RuntimeWarning
    ref = hankel_singular_values(DiscreteLTI(A, B, C))
    got = hankel_singular_values(DiscreteLTI(A, B * 2.0**500, C * 2.0**-2000))
    np.testing.assert_allclose(got, np.ldexp(ref, -1500), rtol=1e-12)


@pytest.mark.filterwarnings("ignore:overflow encountered:RuntimeWarning")  # the product's
def test_from_factors_overflow_is_typed():
    A, B, C, _ = _abc()
    G = DiscreteLTI(A, B, C)
    L = np.full((5, 5), 1e200)
    with pytest.raises(NonFiniteError, match="Lo\\^T Lc"):
        balanced_truncation_from_factors(G, L, L, order=2)


@pytest.mark.parametrize("order", [0, 2, 5])
def test_truncation_bounds_do_not_depend_on_d(order):
    """``D_r = D`` exactly: ``G - G_r`` is the same system whatever ``D``."""
    A, B, C, _ = _abc()
    G0 = DiscreteLTI(A, B, C)
    GD = DiscreteLTI(A, B, C, 1e8 * np.random.default_rng(1).standard_normal((3, 2)))
    a, b = balanced_truncation(G0, order=order), balanced_truncation(GD, order=order)
    np.testing.assert_array_equal(a.error_bounds, b.error_bounds)  # was + 4 n eps 1e8 ...
    assert a.rounding_term == b.rounding_term and a.lower_bound == b.lower_bound
    np.testing.assert_array_equal(b.reduced.D, GD.D)
    if order == 5:
        assert b.error_bound < 1e-10  # was 4e-6 (the D part of the rounding term)


def test_match_dc_bound_adds_the_rounding_of_d_r():
    A, B, C, _ = _abc()
    D = 1e8 * np.random.default_rng(1).standard_normal((3, 2))
    a = balanced_truncation(DiscreteLTI(A, B, C), order=2, match_dc=True)
    b = balanced_truncation(DiscreteLTI(A, B, C, D), order=2, match_dc=True)
    assert b.match_dc and a.match_dc
    assert b.rounding_term - a.rounding_term == pytest.approx(EPS * np.linalg.norm(D), rel=1e-6)
    # the SPA feedthrough is D plus the same correction: (G - G_r) is the same system
    np.testing.assert_allclose(b.reduced.D - D, a.reduced.D, rtol=0, atol=4 * EPS * 1e9)


# ------------------------------------------------ frequency response: one refinement step


def _exact_response(mpmath, A, B, C, z):
    """``C (zI - A)^{-1} B`` in 40-digit arithmetic (mpmath's precision set for this call)."""
    with mpmath.workdps(40):
        M = mpmath.mpc(z) * mpmath.eye(A.shape[0]) - mpmath.matrix(A.tolist())
        Y = mpmath.matrix(C.tolist()) * (mpmath.inverse(M) * mpmath.matrix(B.tolist()))
        return np.array([[complex(Y[i, j]) for j in range(Y.cols)] for i in range(Y.rows)])


@pytest.mark.parametrize("kind", ["random", "non-normal"])
def test_frequency_response_is_as_accurate_as_a_dense_solve(kind):
    """The complex Schur form's backward error (QR iteration) limited the response: 7e-15
    geometric mean (4e-14 max) relative error on random A (rho 0.98), 5x SLICOT TB05AD's and
    15x a dense LU solve's. One refinement step with the residual in A's own coordinates
    brings it to the LU solve's level (measured 4e-16)."""
    mpmath = pytest.importorskip("mpmath", reason="the 40-digit reference")
    rng = np.random.default_rng(3)
    n = 16
    if kind == "random":
        A = rng.standard_normal((n, n))
        A *= 0.98 / np.max(np.abs(np.linalg.eigvals(A)))
    else:  # unit-size strictly upper part, rotated: ||A|| >> rho(A)
        Q = np.linalg.qr(rng.standard_normal((n, n)))[0]
        A = Q @ (np.triu(rng.standard_normal((n, n)), 1)
                 + np.diag(rng.uniform(-0.9, 0.9, n))) @ Q.T
    B, C = rng.standard_normal((n, 2)), rng.standard_normal((3, n))
    w = np.linspace(0.03, 3.1, 6)
    ours = DiscreteLTI(A, B, C).frequency_response(w)
    err, err_lu = [], []
    for k, wk in enumerate(w):
        z = np.exp(1j * wk)
        ref = _exact_response(mpmath, A, B, C, z)
        err.append(np.linalg.norm(ours[k] - ref) / np.linalg.norm(ref))
        lu = C @ np.linalg.solve(z * np.eye(n) - A, B)
        err_lu.append(np.linalg.norm(lu - ref) / np.linalg.norm(ref))
    geo = float(np.exp(np.mean(np.log(err))))
    geo_lu = float(np.exp(np.mean(np.log(err_lu))))
    assert geo <= 1.5 * geo_lu, (geo, geo_lu)  # was 7.0x (random), 2.1x (non-normal)


def test_frequency_response_refinement_keeps_poles_and_near_poles():
    """Exact poles stay inf + nan j; a frequency next to a pole stays finite and accurate."""
    A = np.array([[1.0, 0.3, 0.0], [0.0, 0.2, 1.0], [0.0, 0.0, 0.7]])
    G = DiscreteLTI(A, np.arange(6.0).reshape(3, 2) + 1, np.arange(9.0).reshape(3, 3) - 4)
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        H = G.frequency_response([0.0, 1e-9, 2.0])
    assert np.isinf(H[0].real).all() and np.isnan(H[0].imag).all()
    z = np.exp(1e-9j)
    ref = G.C @ np.linalg.solve(z * np.eye(3) - A, G.B)
    np.testing.assert_allclose(H[1], ref, rtol=1e-6)
    assert np.isfinite(H[1:]).all()


# ------------------------------------- upper (quasi-)triangular A: the Schur form is exact


def _jordan_chain(lam=0.99, c=1.0, n=8):
    """``lam I + c N`` (N the shift), input at the last state, output at the first: the
    cascade ``c^(n-1) / (z - lam)^n`` of n first-order lags."""
    A = lam * np.eye(n) + c * np.diag(np.ones(n - 1), 1)
    return DiscreteLTI(A, np.eye(n)[:, -1:], np.eye(n)[:1])


def test_jordan_chain_keeps_the_order_asked():
    """The floor n eps ||Lc|| ||Lo|| / (1 - rho^2) exceeded sigma_1 (||Lc|| ||Lo|| > 1e13
    sigma_1): every order came back as 0 with a noise-floor warning, although the HSVs are
    accurate (lam = 0.999: 1.1e-13 relative against a 60-digit reference, SLICOT AB09AD's
    1.5e-13)."""
    from lti import hinf_norm

    G = _jordan_chain()
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # was: "requested 4 stable states but only 0 ..."
        res = balanced_truncation(G, order=4)
    assert res.order == 4 and res.minimal_order == 8
    err = hinf_norm(G - res.reduced).value
    assert res.lower_bound <= err <= res.error_bound
    # the same chain with coupling 0.1 is the system scaled by a diagonal similarity and
    # B, C: its reduced model's error, scaled back, is the same
    small = balanced_truncation(_jordan_chain(c=0.1), order=4)
    err_small = hinf_norm(_jordan_chain(c=0.1) - small.reduced).value
    assert err == pytest.approx(err_small * 1e7, rel=1e-6)
    np.testing.assert_allclose(res.hsv, small.hsv * 1e7, rtol=1e-10)


def test_exact_schur_is_recognised_only_for_quasi_triangular_a():
    from lti.balanced import _exact_schur
    from lti.lyapunov import real_schur

    J = _jordan_chain().A
    assert _exact_schur(real_schur(J), J)
    rng = np.random.default_rng(0)
    A = rng.standard_normal((6, 6)) * 0.2
    assert not _exact_schur(real_schur(A), A)
    P = np.eye(8)[::-1]
    assert _exact_schur(real_schur(P @ J @ P), P @ J @ P)  # lower triangular: Z a permutation
    Q = np.linalg.qr(rng.standard_normal((8, 8)))[0]
    assert not _exact_schur(real_schur(Q @ J @ Q.T), Q @ J @ Q.T)  # rotated: rounding


def test_lower_triangular_jordan_chain_keeps_the_order_asked():
    """The same chain in reversed state order (lower bidiagonal, B = e_1, C = e_n): dgees
    returns a permutation as Schur vectors, exact as well; it came back at order 0 too."""
    from lti import hinf_norm

    G = _jordan_chain()
    P = np.eye(8)[::-1]
    H = G.similarity(P)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        res = balanced_truncation(H, order=4)
    ref = balanced_truncation(G, order=4)
    assert res.order == 4 and res.minimal_order == 8
    np.testing.assert_allclose(res.hsv, ref.hsv, rtol=1e-12)
    err = hinf_norm(H - res.reduced).value
    assert res.lower_bound <= err <= res.error_bound


# ------------------------------------------ finite-horizon Gramians of unstable systems


@pytest.mark.parametrize("A", [np.diag([3.0, 3.1]), np.array([[3.0, 1.0], [0.0, 2.0]])],
                         ids=["diagonal", "dense"])
def test_finite_horizon_overflow_is_typed(A):
    """Returned inf (Gramian) and NaN (factors, from the QR compression of inf) silently."""
    from lti import controllability_gramian, gramian_factors, observability_gramian

    G = DiscreteLTI(A, [[1.0], [1.0]], [[1.0, 0.0]])
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no overflow RuntimeWarnings either
        for call in (lambda: controllability_gramian(G, horizon=700),
                     lambda: observability_gramian(G, horizon=700, factor=True),
                     lambda: gramian_factors(G, horizon=700)):
            with pytest.raises(NonFiniteError, match=r"horizon T = 700, spectral radius"):
                call()
        P = controllability_gramian(G, horizon=20)  # a shorter horizon is fine
    S = sum(np.linalg.matrix_power(A, k) @ G.B @ G.B.T @ np.linalg.matrix_power(A, k).T
            for k in range(20))
    np.testing.assert_allclose(P, S, rtol=1e-12)


# ------------------------------------------------------------- copies of a DiscreteLTI


@pytest.mark.parametrize("how", ["pickle", "deepcopy", "copy"])
def test_copies_are_read_only_with_fresh_caches(how):
    """numpy unpickles and deep-copies arrays writeable: a copy's A could be changed in
    place and kept the original's cached is_diagonal (and Schur form), so its frequency
    response was that of the old A."""
    import copy
    import pickle

    G = DiscreteLTI(np.diag([0.5, 0.3]), np.ones((2, 1)), np.ones((1, 2)), dt=0.25)
    G.frequency_response([0.3])
    H = {"pickle": lambda g: pickle.loads(pickle.dumps(g)), "deepcopy": copy.deepcopy,
         "copy": copy.copy}[how](G)
    assert type(H) is DiscreteLTI and H.dt == 0.25 and H.is_diagonal
    for X in (H.A, H.B, H.C, H.D):
        assert not X.flags.writeable
        with pytest.raises(ValueError, match="read-only"):
            X[0, 0] = 1.0
    np.testing.assert_array_equal(H.frequency_response([0.3]), G.frequency_response([0.3]))


# ------------------------------------------------------------------ argument types


@pytest.mark.filterwarnings("ignore:no order below:UserWarning")  # (tol 1/2: full order)
def test_fraction_tolerances_and_typed_refusals():
    from fractions import Fraction

    from lti import hinf_norm
    from lti.exceptions import InvalidArgumentError

    A, B, C, D = _abc()
    G = DiscreteLTI(A, B, C, D)
    # numbers.Real values: np.isfinite raised a bare TypeError on a Fraction
    assert balanced_truncation(G, tol=Fraction(1, 2)).order == balanced_truncation(
        G, tol=0.5).order
    assert balanced_truncation(G, rel_tol=Fraction(1, 10)).order == balanced_truncation(
        G, rel_tol=0.1).order
    assert hinf_norm(G, tol=Fraction(1, 10**6)).value == hinf_norm(G, tol=1e-6).value
    for bad in (10**400, -(10**400)):
        with pytest.raises(InvalidArgumentError, match="`tol`"):
            balanced_truncation(G, tol=bad)
    for bad in ("yes", 1, None):  # "yes" and 1 were read as True
        with pytest.raises(InvalidArgumentError, match="`match_dc` must be a bool"):
            balanced_truncation(G, order=2, match_dc=bad)
    assert balanced_truncation(G, order=2, match_dc=np.True_).match_dc


def test_psd_factor_rtol_and_dt_refusals_are_typed():
    from fractions import Fraction

    from lti import psd_factor
    from lti.exceptions import InvalidArgumentError

    X = np.diag([1.0, 1e-13, 0.0])
    assert psd_factor(X, rtol=Fraction(1, 10**12)).shape == (3, 1)  # was a bare TypeError
    assert psd_factor(X, rtol=10**400).shape == (3, 0)
    for bad in ("a", np.nan, -1, True, [1e-3]):
        with pytest.raises(InvalidArgumentError, match="`rtol`"):
            psd_factor(X, rtol=bad)
    with pytest.raises(InvalidArgumentError, match="`rtol`"):
        psd_factor(np.zeros((0, 0)), rtol="a")  # checked for n = 0 too
    A, B, C, _ = _abc()
    with pytest.raises(InvalidArgumentError, match="`dt` must be True or a positive"):
        DiscreteLTI(A, B, C, dt=10**400)  # was OverflowError
    assert DiscreteLTI(A, B, C, dt=Fraction(1, 4)).dt == 0.25


def test_refined_frequency_response_in_chunks_equals_one_pass(monkeypatch):
    import lti._response as resp

    rng = np.random.default_rng(4)
    A = rng.standard_normal((9, 9))
    A *= 0.9 / np.max(np.abs(np.linalg.eigvals(A)))
    G = DiscreteLTI(A, rng.standard_normal((9, 2)), rng.standard_normal((3, 9)))
    w = np.linspace(0.0, np.pi, 37)
    whole = G.frequency_response(w)
    monkeypatch.setattr(resp, "REFINE_CHUNK", 9 * 2 * 5)  # 5 frequencies per chunk
    np.testing.assert_allclose(G.frequency_response(w), whole, rtol=1e-14, atol=0)
    assert G.frequency_response(w[:0]).shape == (0, 3, 2)


def test_not_an_array_says_why():
    """A tensor that requires grad (numpy() refuses it) and a ragged list were reported as
    'must be array-like; got Tensor' without numpy's reason."""
    from lti.exceptions import ShapeError

    class GradTensor:  # what a torch tensor with requires_grad=True does in np.asarray
        def __array__(self, dtype=None, copy=None):
            raise RuntimeError("Can't call numpy() on Tensor that requires grad")

    with pytest.raises(ShapeError, match=r"got GradTensor \(Can't call numpy\(\) on Tensor"):
        DiscreteLTI(GradTensor(), [[1.0]], [[1.0]])
    with pytest.raises(ShapeError, match="`A` must be array-like; got list .*inhomogeneous"):
        DiscreteLTI([[0.5, 1.0], [1.0]], [[1.0]], [[1.0]])


def test_discretize_zoh_dt_message_does_not_offer_true():
    """discretize_zoh refuses dt=True (a continuous system needs a sampling time) with the
    message '`dt` must be True or a positive number; got True'."""
    from lti import discretize_zoh
    from lti.exceptions import InvalidArgumentError

    for bad in (True, 0, -0.5, float("nan")):
        with pytest.raises(InvalidArgumentError) as info:
            discretize_zoh(np.array([[-1.0]]), [[1.0]], bad)
        assert "must be a positive number (a sampling time)" in str(info.value)
        assert "True or" not in str(info.value)
    Ad, Bd = discretize_zoh(np.array([[-1.0]]), [[1.0]], 0.5)
    assert Ad[0, 0] == pytest.approx(np.exp(-0.5), rel=1e-15)


# ------------------------------------------------- method="smith" on non-normal A


def _rotated_triangular(seed, n=17, scale=2.5):
    rng = np.random.default_rng(seed)
    T = np.triu(rng.standard_normal((n, n)) * scale, 1) + np.diag(rng.uniform(-0.9, 0.9, n))
    Q = np.linalg.qr(rng.standard_normal((n, n)))[0]
    B = rng.standard_normal((n, 2))
    return Q @ T @ Q.T, B @ B.T


@pytest.mark.parametrize("seed", [13, 15])
def test_smith_refuses_an_inaccurate_solution(seed):
    """Squaring a non-normal A: rounding grows with ||A^(2^k)|| and one refinement step was
    not enough; the result came back with a backward error of 1.2e-4 (seed 13) without a
    word. Now SolverError pointing to method="schur", which solves it to rounding."""
    from lti import solve_discrete_lyapunov
    from lti.exceptions import SolverError

    A, Q = _rotated_triangular(seed)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # and no overflow RuntimeWarnings on the way
        with pytest.raises(SolverError, match='method="smith" is inaccurate.*method="schur"'):
            solve_discrete_lyapunov(A, Q, method="smith")
    X = solve_discrete_lyapunov(A, Q, method="schur")
    R = A @ X @ A.T - X + Q
    assert np.linalg.norm(R) <= 1e-13 * (np.linalg.norm(A) ** 2 * np.linalg.norm(X))


def test_smith_still_answers_where_it_is_accurate():
    from lti import solve_discrete_lyapunov

    A, Q = _rotated_triangular(12)
    X = solve_discrete_lyapunov(A, Q, method="smith")
    R = A @ X @ A.T - X + Q
    assert np.linalg.norm(R) <= 1e-13 * (np.linalg.norm(A) ** 2 * np.linalg.norm(X))


@pytest.mark.parametrize("transpose", [False, True])
def test_smith_factor_refuses_an_inaccurate_factor(transpose):
    """lyapunov_factor(method="smith") returned factors with backward errors up to 8.8e-5
    (seed 18) without a word, and overflowed with RuntimeWarnings (seed 2)."""
    from lti import lyapunov_factor
    from lti.exceptions import SolverError

    for seed, what in ((18, "is inaccurate"), (2, "did not converge")):
        rng = np.random.default_rng(seed)
        n = 17
        T = np.triu(rng.standard_normal((n, n)) * 2.5, 1) + np.diag(rng.uniform(-0.9, 0.9, n))
        Q = np.linalg.qr(rng.standard_normal((n, n)))[0]
        A, B = Q @ T @ Q.T, rng.standard_normal((n, 2))
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            with pytest.raises(SolverError, match=f'{what}.*method="hammarling"'):
                lyapunov_factor(A, B, method="smith", transpose=transpose)
        L = lyapunov_factor(A, B, method="hammarling", transpose=transpose)
        M = A.T if transpose else A
        X = L @ L.T
        assert np.linalg.norm(M @ X @ M.T - X + B @ B.T) <= 1e-13 * (
            np.linalg.norm(M) ** 2 * np.linalg.norm(X))


# ------------------------------------------- stability margin of badly scaled realisations


@pytest.mark.parametrize("big", [1e12, 1e14])
def test_badly_scaled_state_is_not_a_pole_on_the_circle(big):
    """``[[0.999, big], [0, 0.5]]`` (a state in units ``big`` times too small) is the system
    ``[[0.999, 1], [0, 0.5]]`` with C scaled: the rounding margin 8 n eps ||A||_F (3.5e-3 at
    1e12) refused it as a pole on the circle in is_stable, hinf_norm, h2_norm, the HSVs and
    the Gramians, while its balanced form passed."""
    from lti import controllability_gramian, h2_norm, hinf_norm, solve_discrete_lyapunov

    A = np.array([[0.999, big], [0.0, 0.5]])
    G = DiscreteLTI(A, [[0.0], [1.0]], [[1.0, 0.0]])
    H = DiscreteLTI([[0.999, 1.0], [0.0, 0.5]], [[0.0], [1.0]], [[big, 0.0]])
    assert G.is_stable() and H.is_stable()
    assert hinf_norm(G).value == pytest.approx(hinf_norm(H).value, rel=1e-12)
    assert h2_norm(G) == pytest.approx(h2_norm(H), rel=1e-12)
    np.testing.assert_allclose(hankel_singular_values(G), hankel_singular_values(H), rtol=1e-10)
    res = balanced_truncation(G, order=1)
    assert res.n_unstable == 0 and res.order == 1
    P = controllability_gramian(G)
    np.testing.assert_allclose(A @ P @ A.T - P + G.B @ G.B.T, 0.0, atol=1e-12 * np.abs(P).max())
    X = solve_discrete_lyapunov(A, np.eye(2))
    assert np.abs(A @ X @ A.T - X + np.eye(2)).max() <= 1e-12 * np.abs(X).max()


def test_a_pole_on_the_circle_is_still_refused_when_badly_scaled():
    """The balanced margin is no licence: a rotation (|lambda| = 1) with a badly scaled state
    is refused as before, and so is 1 - 1e-16."""
    from lti import hinf_norm
    from lti.exceptions import UnstableSystemError

    c, s = np.cos(0.3), np.sin(0.3)
    S = np.diag([1.0, 2.0**40])
    A = np.linalg.solve(S, np.array([[c, -s], [s, c]]) @ S)
    G = DiscreteLTI(A, [[1.0], [0.0]], [[1.0, 0.0]])
    assert not G.is_stable()
    with pytest.raises(UnstableSystemError):
        hinf_norm(G)
    J = np.array([[1.0 - 1e-16, 1e12], [0.0, 0.5]])
    assert not DiscreteLTI(J, [[0.0], [1.0]], [[1.0, 0.0]]).is_stable()


def test_badly_scaled_dense_unstable_system_is_refused():
    """The balanced margin comes with the balanced matrix's own spectral radius: a dense,
    badly scaled A with an eigenvalue 1 + 1e-5 (whose unbalanced Schur eigenvalues are only
    as good as eps ||A||_F) is refused everywhere, and its stable twin 1 - 1e-5 accepted."""
    from lti import hinf_norm
    from lti.exceptions import UnstableSystemError

    rng = np.random.default_rng(6)
    Q = np.linalg.qr(rng.standard_normal((3, 3)))[0]
    S = np.diag([1.0, 1e6, 1e12])
    for lam, stable in ((1.0 + 1e-5, False), (1.0 - 1e-5, True)):
        M = Q @ np.diag([lam, 0.5, 0.3]) @ Q.T
        A = np.linalg.solve(S, M @ S)
        G = DiscreteLTI(A, np.linalg.solve(S, np.ones((3, 1))), np.ones((1, 3)) @ S)
        assert G.is_stable() is stable
        if stable:
            ref = hinf_norm(DiscreteLTI(M, np.ones((3, 1)), np.ones((1, 3)))).value
            assert hinf_norm(G).value == pytest.approx(ref, rel=1e-6)
        else:
            with pytest.raises(UnstableSystemError):
                hinf_norm(G)
            with pytest.raises(UnstableSystemError):
                hankel_singular_values(G)


def test_similarity_refuses_a_numerically_singular_t():
    """T = [[1, 1], [1, 1 + 2^-52]] (rcond ~ 5e-17) was accepted: T^{-1} A T with entries
    ~ 1e16 of no correct digit, a system that only looked like the original."""
    from lti.exceptions import InvalidArgumentError

    A, B, C, _ = _abc(n=2)
    G = DiscreteLTI(A, B, C)
    with pytest.raises(InvalidArgumentError, match="numerically singular .*reciprocal"):
        G.similarity([[1.0, 1.0], [1.0, 1.0 + 2.0**-52]])
    H = G.similarity([[1.0, 1.0], [1.0, 1.0 + 1e-4]])  # ill-conditioned but usable
    np.testing.assert_allclose(H.frequency_response([0.4]), G.frequency_response([0.4]),
                               rtol=1e-6)


def test_simulate_names_the_control_layout():
    """control.forced_response takes U as (m, T): passing that layout said only 'must have
    shape (T, m=2)'."""
    from lti.exceptions import ShapeError

    A, B, C, D = _abc()
    G = DiscreteLTI(A, B, C, D)
    U = np.ones((2, 7))  # (m, T)
    with pytest.raises(ShapeError, match=r"layout \(m, T\)\? pass `u.T`"):
        G.simulate(U)
    assert G.simulate(U.T).shape == (7, 3)
    with pytest.raises(ShapeError) as info:
        G.simulate(np.ones((7, 3)))  # neither layout: no hint
    assert "u.T" not in str(info.value)
