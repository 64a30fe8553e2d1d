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
