"""Balanced truncation's norm estimate at extreme scales: ``lti._bt_core.norm2`` formed
``L^T L`` unscaled, so factors beyond ~1e154 gave NaN and below ~1e-154 an underestimate, and
the noise floor (hence ``rounding_term`` and ``minimal_order``) silently lost its
``||Lc|| ||Lo||`` term."""

import warnings

import numpy as np
import pytest

from lti import DiscreteLTI, balanced_truncation
from lti._bt_core import noise_floor, norm2

EXPONENTS = [-1000, -600, -300, -210, 210, 300, 600, 1000]


@pytest.mark.parametrize("e", EXPONENTS)
@pytest.mark.parametrize("cols", [10, 200])  # L^T L formed / applied as L^T (L x)
def test_norm2_scales_exactly(e, cols):
    L = np.random.default_rng(cols).standard_normal((30, cols))
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no overflow / invalid-value warnings either
        got = norm2(L * 2.0**e)
    assert got == norm2(L) * 2.0**e  # power-of-2 scaling is exact
    assert norm2(L) == pytest.approx(np.linalg.norm(L, 2), rel=1e-2)


def test_norm2_strided_view_and_edge_values():
    L = np.random.default_rng(1).standard_normal((40, 40))
    V = L[::-1] * 2.0**700  # the Schur path's row-reversed factor, huge
    assert norm2(V) == norm2(np.ascontiguousarray(L[::-1])) * 2.0**700
    assert norm2(np.zeros((3, 2))) == 0.0
    assert norm2(np.full((2, 2), 5e-324)) > 0.0  # subnormal entries: still positive


def _system():
    rng = np.random.default_rng(3)
    n = 12
    A = rng.standard_normal((n, n))
    A *= 0.9 / np.max(np.abs(np.linalg.eigvals(A)))
    return DiscreteLTI(A, rng.standard_normal((n, 2)), rng.standard_normal((2, n)))


@pytest.mark.parametrize("e", [530, -560])  # B * 2^e: the factor Lc ~ 1e160 / 1e-169
def test_balanced_truncation_rounding_term_is_scale_invariant(e):
    G = _system()
    Gs = DiscreteLTI(G.A, G.B * 2.0**e, G.C)
    ref = balanced_truncation(G, order=4)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        res = balanced_truncation(Gs, order=4)
    s = 2.0**e
    assert res.minimal_order == ref.minimal_order
    np.testing.assert_allclose(res.hsv / s, ref.hsv, rtol=1e-12, atol=0)
    # the rounding term (through the noise floor's ||Lc|| ||Lo||) scales with B
    assert res.rounding_term / s == pytest.approx(ref.rounding_term, rel=1e-10, abs=0)
    assert res.error_bound / s == pytest.approx(ref.error_bound, rel=1e-12, abs=0)


def test_noise_floor_keeps_the_factor_norms_at_large_scale():
    rng = np.random.default_rng(4)
    Lc, Lo = rng.standard_normal((8, 8)), rng.standard_normal((8, 8))
    hsv = np.linalg.svd(Lo.T @ Lc, compute_uv=False)
    s = 2.0**600
    ref = noise_floor(hsv, Lc, Lo, 0.999)
    assert ref > 8 * np.finfo(float).eps * hsv[0]  # the ||Lc|| ||Lo|| / (1 - rho^2) term wins
    assert noise_floor(hsv * s, Lc * s, Lo, 0.999) == ref * s


@pytest.mark.parametrize("n, rho", [(1, 0.5), (12, 0.6), (12, 0.9999), (40, 0.9999)])
def test_opposite_scales_of_b_and_c_leave_every_bound_unchanged(n, rho):
    # B * 2^660, C * 2^-660: the same transfer function; the projections T ~ 1e200 and
    # Ti ~ 1e-200 squared to inf and 0 (kappa = inf * 0 = NaN: every bound NaN), and the Schur
    # rounding term's ||B|| and ||C|| likewise
    rng = np.random.default_rng(n)
    A = rng.standard_normal((n, n))
    A *= rho / np.max(np.abs(np.linalg.eigvals(A)))
    G = DiscreteLTI(A, rng.standard_normal((n, 2)), rng.standard_normal((2, n)),
                    rng.standard_normal((2, 2)))
    Gs = DiscreteLTI(G.A, G.B * 2.0**660, G.C * 2.0**-660, G.D)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)  # (a cap at the minimal order)
        ref = balanced_truncation(G, order=max(n // 4, 1))
        warnings.simplefilter("error", RuntimeWarning)
        res = balanced_truncation(Gs, order=max(n // 4, 1))
    assert np.isfinite(res.error_bounds).all() and np.isfinite(res.rounding_term)
    np.testing.assert_allclose(res.error_bounds, ref.error_bounds, rtol=1e-12, atol=0)
    assert res.rounding_term == pytest.approx(ref.rounding_term, rel=1e-12, abs=0)
    assert res.lower_bound == pytest.approx(ref.lower_bound, rel=1e-12, abs=0)
    np.testing.assert_allclose(res.hsv, ref.hsv, rtol=1e-12, atol=0)
