"""Edge cases of lti.covariance found by the audit: a system without states, and a
python-control shaping filter (issue 16 item 7: a control object goes in)."""

from __future__ import annotations

import numpy as np
import pytest

from lti import DiscreteLTI, StateCovarianceAccumulator, expected_state_covariance, state_covariance


def test_state_covariance_without_states():
    """n = 0 raised a bare 'ValueError: cannot reshape array of size 0 into shape (0)'."""
    u = np.ones((3, 5, 1))
    P = state_covariance(np.zeros((0, 0)), np.zeros((0, 1)), u)
    assert P.shape == (0, 0)
    acc = StateCovarianceAccumulator(np.zeros((0, 0)), np.zeros((0, 1)), horizon=5, burn_in=2)
    acc.update(u)
    assert acc.finalize().shape == (0, 0)


@pytest.mark.parametrize("kind", ["control", "tuple"])
def test_shaping_filter_may_be_a_python_control_system_or_a_tuple(kind):
    """Was: InvalidArgumentError 'must be a DiscreteLTI; got StateSpace'."""
    A, B = np.array([[0.6, 0.2], [0.0, 0.3]]), np.array([[1.0], [0.5]])
    F = DiscreteLTI([[0.5]], [[1.0]], [[2.0]], [[0.1]], 0.1)
    if kind == "control":
        pytest.importorskip("control", reason="python-control is not installed")
        G = F.to_control()
    else:
        G = (F.A, F.B, F.C, F.D)
    for horizon in (None, 12):
        ref = expected_state_covariance(A, B, shaping_filter=F, horizon=horizon)
        got = expected_state_covariance(A, B, shaping_filter=G, horizon=horizon)
        np.testing.assert_array_equal(got, ref)
