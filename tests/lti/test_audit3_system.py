"""Third audit of DiscreteLTI (simulation): overflow is a typed error, not inf + RuntimeWarning."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

from lti import DiscreteLTI, NonFiniteError


@pytest.mark.parametrize("A", [[[2.0, 1.0], [0.0, 1.5]], [[2.0, 0.0], [0.0, 0.5]]],
                         ids=["dense", "diagonal"])
def test_simulate_overflow_of_an_unstable_system_is_a_typed_error(A):
    G = DiscreteLTI(A, [[1.0], [1.0]], [[1.0, 1.0]])
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no RuntimeWarning from the overflow itself
        with pytest.raises(NonFiniteError, match=r"state x_t overflowed .* step t = 10\d\d "
                                                 r"of 1100 \(spectral radius of `A` 2\)"):
            G.simulate(np.ones((1100, 1)))
        # the finite part is still available: fewer steps
        y = G.simulate(np.ones((1000, 1)))
    assert np.isfinite(y).all() and y[-1, 0] > 1e300


def test_simulate_output_overflow_names_the_output():
    G = DiscreteLTI([[0.5]], [[1.0]], [[1e300]])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with pytest.raises(NonFiniteError, match=r"output y_t overflowed float64 at step t = 0"):
            G.simulate(np.zeros(3), x0=[1e10])


def test_conversion_errors_name_the_argument_not_sys_or_the_callers_B():
    control = pytest.importorskip("control", reason="python-control converts the filter")
    from lti import InvalidArgumentError, ShapeError, empirical_gramians, expected_state_covariance

    A, B = np.diag([0.5, 0.2]), np.ones((2, 1))
    bad_tuple = (np.eye(2) * 0.1, np.ones((3, 1)), np.ones((1, 2)))  # the filter's B: 3 rows
    with pytest.raises(ShapeError, match=r"^`shaping_filter` = \(A, B, C\[, D\]\): `B` must"):
        expected_state_covariance(A, B, shaping_filter=bad_tuple)
    continuous = control.ss([[-1.0]], [[1.0]], [[1.0]], 0)
    with pytest.raises(InvalidArgumentError, match=r"^`shaping_filter` must be discrete-time"):
        expected_state_covariance(A, B, shaping_filter=continuous)
    with pytest.raises(InvalidArgumentError, match=r"^`system` must be discrete-time"):
        empirical_gramians(continuous, horizon=5)
    # the public constructor keeps its own wording
    with pytest.raises(InvalidArgumentError, match=r"^`sys` must be discrete-time"):
        DiscreteLTI.from_control(continuous)


@pytest.mark.parametrize("A", [[[2.0, 1.0], [0.0, 1.5]], [[2.0, 0.0], [0.0, 0.5]]],
                         ids=["dense", "diagonal"])
def test_markov_overflow_is_a_typed_error_naming_the_index(A):
    G = DiscreteLTI(A, [[1.0], [1.0]], [[1.0, 1.0]])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with pytest.raises(NonFiniteError, match=r"C A\^i B overflowed float64 at i = 10\d\d "
                                                 r"of k = 1100 \(spectral radius of `A` 2\)"):
            G.markov(1100)
        H = G.markov(1000)  # the last power A^k B computed is not a term: no warning
    assert np.isfinite(H).all() and H[-1, 0, 0] > 1e300
