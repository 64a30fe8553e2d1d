"""Third audit: certified bounds stay numbers when ``||D||_F^2`` overflows (|D| > 1.3e154):
the rounding term's ``||D||_F`` was ``sqrt(d @ d) = inf`` and BT's error_bound NaN."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import lti
from lti._rounding import ROUNDING_FACTOR

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
    # the rounding term's gain term is n eps ||D||_F: as large as D, not inf
    unit = ROUNDING_FACTOR * 3 * np.finfo(float).eps * 2.0**540
    assert unit <= res.rounding_term <= 1e6 * unit
    # the stable dynamics are reduced as without D (D_r = D exactly for truncation)
    ref = lti.balanced_truncation(lti.DiscreteLTI(A, B, C), order=1, match_dc=match_dc)
    np.testing.assert_allclose(res.hsv, ref.hsv, rtol=1e-13)
    if not match_dc:
        assert res.reduced.D[0, 0] == 2.0**540
        err = lti.hinf_norm(lti.DiscreteLTI(A, B, C) - lti.DiscreteLTI(
            res.reduced.A, res.reduced.B, res.reduced.C)).value
        assert res.lower_bound <= err <= res.error_bound
