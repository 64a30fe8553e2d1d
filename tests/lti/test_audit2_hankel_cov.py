"""cayley_to_continuous / cayley_to_discrete and StateCovarianceAccumulator.from_state_dict:
typed errors instead of raw numpy ones or NaN passed through."""

from __future__ import annotations

import numpy as np
import pytest

from lti import InvalidArgumentError, NonFiniteError, ShapeError
from lti.datadriven import StateCovarianceAccumulator
from lti.hankel import cayley_to_continuous, cayley_to_discrete

A = np.diag([0.5, -0.3])
B = np.ones((2, 1))
C = np.ones((1, 2))
D = np.zeros((1, 1))


@pytest.mark.parametrize("f", [cayley_to_continuous, cayley_to_discrete])
def test_cayley_maps_check_their_realisation(f):
    """Were a bare ValueError from np.hstack (B with 1 row) and NaN matrices out for NaN in."""
    with pytest.raises(ShapeError, match="must have shapes"):
        f(A, B[:1], C, D)
    with pytest.raises(ShapeError, match="must have shapes"):
        f(A, B, C, np.zeros((2, 1)))
    with pytest.raises(ShapeError, match="square"):
        f(np.ones((2, 3)), B, C, D)
    with pytest.raises(NonFiniteError, match="nan at index"):
        f(A * np.nan, B, C, D)


def test_cayley_round_trip_still_exact():
    back = cayley_to_discrete(*cayley_to_continuous(A, B, C, D))
    for X, Y in zip(back, (A, B, C, D), strict=True):
        np.testing.assert_allclose(X, Y, rtol=0, atol=1e-15)


def test_from_state_dict_refuses_non_finite_sums_and_non_numeric_counts():
    """A NaN sum_outer was accepted (finalize then returned NaN); count '5' raised a bare
    UFuncTypeError."""
    acc = StateCovarianceAccumulator(A, B)
    acc.update(np.random.default_rng(0).standard_normal((2, 10, 1)))
    state = acc.state_dict()
    bad = dict(state, sum_outer=state["sum_outer"] * np.nan)
    with pytest.raises(NonFiniteError, match="sum_outer"):
        StateCovarianceAccumulator.from_state_dict(bad)
    with pytest.raises(InvalidArgumentError, match="count"):
        StateCovarianceAccumulator.from_state_dict(dict(state, count="5"))
    again = StateCovarianceAccumulator.from_state_dict(state)
    np.testing.assert_array_equal(again.finalize(), acc.finalize())
