"""empirical_gramians with a step function that returns the wrong thing, and data streams
with masked entries: typed errors instead of raw ones or silently wrong Gramians."""

from __future__ import annotations

import numpy as np
import pytest

from lti import InvalidArgumentError, ShapeError
from lti.datadriven import StateCovarianceAccumulator, state_covariance
from lti.empirical import empirical_gramians

A = np.diag([0.5, -0.3])
B = np.array([[1.0], [0.5]])


def _good(X, U):
    return X @ A.T + U @ B.T, X[:, :1] + X[:, 1:]


@pytest.mark.parametrize(
    "step, match",
    [
        (lambda X, U: (X,), r"pair \(X_next, Y\); got tuple of length 1"),
        (lambda X, U: X, r"pair \(X_next, Y\); got ndarray"),
        (lambda X, U: None, r"pair \(X_next, Y\); got NoneType"),
        (lambda X, U: (X + 0j, X[:, :1]), "real numeric X_next; got dtype complex128"),
        (lambda X, U: (X, np.full((X.shape[0], 1), "a")), "real numeric Y"),
    ],
    ids=["one", "array", "none", "complex", "str"],
)
def test_step_function_returning_the_wrong_thing(step, match):
    """Were: bare ValueError (unpacking), a complex X_next silently cut to its real part
    (ComplexWarning), bare ValueError (str)."""
    with pytest.raises(ShapeError, match=match):
        empirical_gramians(step, n=2, m=1, horizon=5)


def test_step_function_that_changes_its_output_width_later():
    """Only the first call was checked: a later Y of another width broadcast into a bare
    ValueError."""
    calls = []

    def step(X, U):
        calls.append(1)
        Xn, Y = _good(X, U)
        return Xn, (Y if len(calls) < 3 else np.hstack([Y, Y]))

    with pytest.raises(ShapeError, match=r"Y of shape \(K, p\) = \(\d+, 1\); got \(\d+, 2\)"):
        empirical_gramians(step, n=2, m=1, horizon=5)


def test_a_good_step_function_still_gives_the_exact_gramians():
    from lti import DiscreteLTI, controllability_gramian

    E = empirical_gramians(_good, n=2, m=1, horizon=400, which=("controllability",))
    P = controllability_gramian(DiscreteLTI(A, B, np.ones((1, 2))))
    np.testing.assert_allclose(E.controllability, P, rtol=1e-12)


def test_masked_stream_entries_are_refused():
    """The values under the mask were used as data."""
    u = np.ma.array(np.ones((2, 6, 1)), mask=np.zeros((2, 6, 1), bool))
    u.mask[1, 3, 0] = True
    with pytest.raises(InvalidArgumentError, match=r"`u` is a masked array .*\(1, 3, 0\)"):
        state_covariance(A, B, u)
    acc = StateCovarianceAccumulator(A, B)
    with pytest.raises(InvalidArgumentError, match="masked"):
        acc.update(u)
    assert acc.count == 0  # nothing half-added
    np.testing.assert_array_equal(state_covariance(A, B, u.filled(0.0)),
                                  state_covariance(A, B, u.filled(0.0).data))


@pytest.mark.parametrize("a", [1.0 - 1e-16, 1.0 - 4e-16])
def test_pole_within_the_rounding_margin_is_unstable_not_slow(a):
    """Was SolverError 'decays too slowly ... (spectral radius 1)': a pole the other
    solvers refuse as on the unit circle."""
    from lti import DiscreteLTI, UnstableSystemError
    from lti.empirical import lti_horizon

    A2 = np.diag([a, 0.5])
    with pytest.raises(UnstableSystemError, match="rounding margin"):
        lti_horizon(A2)
    with pytest.raises(UnstableSystemError, match="rounding margin"):
        empirical_gramians(DiscreteLTI(A2, np.ones((2, 1)), np.ones((1, 2))))


def test_slow_decay_names_the_radius_to_its_digits():
    from lti import SolverError
    from lti.empirical import lti_horizon

    with pytest.raises(SolverError, match=r"spectral radius 0\.99999999999999\)"):
        lti_horizon(np.diag([1.0 - 1e-14]))
