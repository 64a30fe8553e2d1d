"""weighted_balanced_truncation: the input models it documents, a covariance that is one,
the solvers' stability margin, and invariance to the scale of the data."""

from __future__ import annotations

import numpy as np
import pytest

from lti import DiscreteLTI, InvalidArgumentError, UnstableSystemError
from lti.datadriven import state_covariance, weighted_balanced_truncation

RNG = np.random.default_rng(1)
A = np.diag([0.5, -0.3, 0.2, 0.7])
B = RNG.standard_normal((4, 2))
C = RNG.standard_normal((1, 4))
G = DiscreteLTI(A, B, C)
F = DiscreteLTI(np.diag([0.5, 0.2]), np.eye(2), np.eye(2), np.eye(2))


def test_shaping_filter_as_a_tuple_like_expected_state_covariance():
    """A tuple was accepted by expected_state_covariance and then raised a bare
    AttributeError ('tuple' object has no attribute 'A') in the shaped gain."""
    ref = weighted_balanced_truncation(G, shaping_filter=F, order=2)
    res = weighted_balanced_truncation(G, shaping_filter=(F.A, F.B, F.C, F.D), order=2)
    assert res.shaped_error_bound == ref.shaped_error_bound
    np.testing.assert_array_equal(res.hsv, ref.hsv)


def test_indefinite_state_covariance_is_refused():
    """P - 10 I (eigenvalues down to -9.9) was reduced with 'certified' bounds."""
    P = state_covariance(A, B, RNG.standard_normal((3, 50, 2)))
    with pytest.raises(InvalidArgumentError, match="positive semidefinite.*eigenvalue -9"):
        weighted_balanced_truncation(G, state_covariance=P - 10.0 * np.eye(4), order=2)
    # rounding-level negativity of a genuine covariance is accepted
    w, V = np.linalg.eigh(P)
    w[0] = -1e-15 * w[-1]
    weighted_balanced_truncation(G, state_covariance=(V * w) @ V.T, order=2)


def test_pole_within_the_rounding_margin_is_refused_as_sys():
    Gm = DiscreteLTI(np.diag([1.0 - 1e-16, 0.5]), np.ones((2, 1)), np.ones((1, 2)))
    with pytest.raises(UnstableSystemError, match="`sys` must be Schur-stable.*rounding margin"):
        weighted_balanced_truncation(Gm, input_covariance=np.eye(1), order=1)


@pytest.mark.parametrize("c", [2.0**-500, 2.0**400])
def test_scaling_the_data_scales_the_hsvs_and_bounds(c):
    P = state_covariance(A, B, RNG.standard_normal((2, 40, 2)))
    ref = weighted_balanced_truncation(G, state_covariance=P, order=2)
    res = weighted_balanced_truncation(DiscreteLTI(A, B * c, C), state_covariance=P * c * c,
                                       order=2)
    np.testing.assert_allclose(res.hsv / c, ref.hsv, rtol=1e-12)
    assert res.weighted_error_bound / c == pytest.approx(ref.weighted_error_bound, rel=1e-12)
