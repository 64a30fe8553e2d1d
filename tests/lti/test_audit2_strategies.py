"""lti.testing.strategies: what it promises (Schur-stable draws) over its whole documented
range, typed errors for its options, and the helpers on every system form."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("hypothesis", reason="hypothesis is not installed (extra 'test')")
from hypothesis import HealthCheck, given, settings  # noqa: E402

from lti import DiscreteLTI, InvalidArgumentError, controllability_gramian  # noqa: E402
from lti.testing import strategies  # noqa: E402

# .example() only to trigger the option checks (they run when the strategy is drawn)
pytestmark = pytest.mark.filterwarnings(
    "ignore::hypothesis.errors.NonInteractiveExampleWarning")


@settings(max_examples=60, deadline=None, derandomize=True, database=None,
          suppress_health_check=list(HealthCheck))
@given(G=strategies.stable_systems(n=(1, 8), kind="near_unit_circle",
                                   min_distance=strategies.MIN_DISTANCE_FLOOR))
def test_closest_allowed_poles_are_stable_for_the_solvers(G):
    assert G.is_stable()
    controllability_gramian(G)  # not refused as a pole on the circle


@pytest.mark.parametrize("md", [1e-15, 1e-13, 0.0, 0.02])
def test_min_distance_below_the_floor_is_refused(md):
    """1e-15 was accepted and 26 of 150 derandomized draws were refused by the Gramian
    solvers as poles on the unit circle."""
    with pytest.raises(InvalidArgumentError, match="min_distance"):
        strategies.stable_systems(min_distance=md).example()


@pytest.mark.parametrize(
    "kwargs",
    [{"max_radius": "0.5"}, {"decades": "3"}, {"nonnormality": None}, {"min_magnitude": True}],
)
def test_non_numeric_options_get_a_typed_error(kwargs):
    """Were bare TypeErrors ('<' between float and str, ufunc 'isfinite')."""
    name = next(iter(kwargs))
    with pytest.raises(InvalidArgumentError, match=f"`{name}` must be a real number"):
        strategies.stable_systems(**kwargs).example()


def test_helpers_take_tuples_and_control_systems():
    """minimal_order / hankel_lower_bounds raised AttributeError ('tuple' has no 'n')."""
    A, B, C = np.diag([0.5, 0.2, 0.0]), np.array([[1.0], [1.0], [0.0]]), np.ones((1, 3))
    G = DiscreteLTI(A, B, C)
    assert strategies.minimal_order((A, B, C)) == strategies.minimal_order(G) == 2
    s, err = strategies.hankel_lower_bounds((A, B, C))
    np.testing.assert_array_equal(s, strategies.hankel_lower_bounds(G)[0])
    control = pytest.importorskip("control", reason="python-control is not installed")
    assert strategies.minimal_order(control.ss(A, B, C, 0, True)) == 2
