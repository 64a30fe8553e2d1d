"""Third audit: certified bounds stay numbers when ``||D||_F^2`` overflows (|D| > 1.3e154):
the rounding term's ``||D||_F`` was ``sqrt(d @ d) = inf`` and BT's error_bound NaN."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import lti

A = np.diag([0.5, 0.3, -0.2])
B = np.array([[1.0], [0.5], [2.0]])
C = np.array([[1.0, -1.0, 0.5]])


@pytest.mark.parametrize("match_dc", [False, True])
def test_bt_bounds_with_a_huge_feedthrough_are_finite_and_hold(match_dc):
    D = np.array([[2.0**540]])  # ~3.6e162: D^2 overflows, D itself is fine
    G = lti.DiscreteLTI(A, B, C, D)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        res = lti.balanced_truncation(G, order=1, match_dc=match_dc)
    assert np.isfinite(res.error_bound) and np.isfinite(res.rounding_term)
    assert np.all(np.isfinite(res.error_bounds))
    # the stable dynamics are reduced as without D (D_r = D exactly for truncation)
    ref = lti.balanced_truncation(lti.DiscreteLTI(A, B, C), order=1, match_dc=match_dc)
    if match_dc:  # the computed D_r = D + correction: eps ||D||_F, as large as D, not inf
        d_part = np.finfo(float).eps * 2.0**540
        assert d_part <= res.rounding_term <= d_part + 1e6 * ref.rounding_term
    else:  # D_r = D bit for bit: D cancels in G - G_r and adds nothing
        assert res.rounding_term == ref.rounding_term
    np.testing.assert_allclose(res.hsv, ref.hsv, rtol=1e-13)
    if not match_dc:
        assert res.reduced.D[0, 0] == 2.0**540
        err = lti.hinf_norm(lti.DiscreteLTI(A, B, C) - lti.DiscreteLTI(
            res.reduced.A, res.reduced.B, res.reduced.C)).value
        assert res.lower_bound <= err <= res.error_bound


def test_hna_when_max_B_times_max_C_overflows_but_the_hsvs_do_not():
    # B, C ~ 2^511 each: the power-of-two scale sb sc = 2^1024 overflows (the construction then
    # ran unscaled and sigma^2 raised a raw OverflowError); sigma_1 ~ 3.7e307 is representable
    G1 = lti.DiscreteLTI(A[:2, :2], B[:2], C[:, :2], [[0.25]])
    s = 2.0**511
    G = lti.DiscreteLTI(G1.A, G1.B * s, G1.C * s, [[0.25]])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        res = lti.hankel_norm_approximation(G, order=1)
    ref = lti.hankel_norm_approximation(G1, order=1)
    np.testing.assert_array_equal(res.hsv / s / s, ref.hsv)  # powers of two: exact
    assert res.hankel_error / s / s == ref.hankel_error
    np.testing.assert_allclose(res.error_bound / s / s, ref.error_bound, rtol=1e-9)
    w = np.linspace(0.0, np.pi, 9)
    Gr = res.reduced
    np.testing.assert_allclose(Gr.frequency_response(w) / s / s - 0.25 / s / s,
                               ref.reduced.frequency_response(w) - 0.25, rtol=1e-8, atol=1e-12)


@pytest.mark.parametrize("s", [1e154, 1e160])
def test_hinf_norm_beyond_the_float_range_is_a_typed_error_not_about_C(s):
    # the response ~1.3 s^2 overflows: was NonFiniteError "`C` must be finite; got nan" (an
    # internal G / gamma with gamma = nan) at 1e154 and LinAlgError "SVD did not converge" at 1e160
    G = lti.DiscreteLTI(A[:2, :2], np.array([[1.0], [0.5]]) * s, np.array([[1.0, -1.0]]) * s)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with pytest.raises(lti.NonFiniteError, match="frequency response of `sys` overflows"):
            lti.hinf_norm(G)


def test_hinf_norm_just_inside_the_float_range_still_scales():
    G1 = lti.DiscreteLTI(A[:2, :2], [[1.0], [0.5]], [[1.0, -1.0]])
    s = 2.0**500
    G = lti.DiscreteLTI(G1.A, G1.B * s, G1.C * s)
    assert lti.hinf_norm(G).value / s / s == pytest.approx(lti.hinf_norm(G1).value, rel=1e-12)


def test_hankel_norm_beyond_the_float_range_is_a_typed_error_not_nan():
    s = 1e160  # sigma_1 ~ 8e319: hankel_norm returned nan silently
    G = lti.DiscreteLTI(A[:2, :2], np.array([[1.0], [0.5]]) * s, np.array([[1.0, -1.0]]) * s)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # (from the HSV computation itself)
        with pytest.raises(lti.NonFiniteError, match="Hankel norm of `sys` overflows"):
            lti.hankel_norm(G)
    s = 1e150  # inside the range: sigma_1 ~ 8.3e299, s^2 times the unscaled value
    G1 = lti.DiscreteLTI(A[:2, :2], [[1.0], [0.5]], [[1.0, -1.0]])
    G = lti.DiscreteLTI(G1.A, G1.B * s, G1.C * s)
    assert lti.hankel_norm(G) / s / s == pytest.approx(lti.hankel_norm(G1), rel=1e-12)
