"""StateCovarianceAccumulator.merge of accumulators of different systems is refused.

Calibration statistics are merged across data-parallel ranks; two accumulators with the
same n, horizon and burn_in but different (A, B) (say two layers' adapters mixed up)
merged silently into a "Gramian" of neither system.
"""

from __future__ import annotations

import numpy as np
import pytest

from lti.covariance import StateCovarianceAccumulator
from lti.exceptions import ShapeError


def _acc(A, B, seed):
    acc = StateCovarianceAccumulator(A, B)
    acc.update(np.random.default_rng(seed).standard_normal((3, 20, B.shape[1])))
    return acc


def test_merge_of_different_systems_is_refused():
    A1, A2 = np.diag([0.5, 0.2]), np.diag([0.5, 0.3])
    B = np.ones((2, 1))
    a, b = _acc(A1, B, 0), _acc(A2, B, 1)
    with pytest.raises(ShapeError, match=r"different systems.*0\.1"):
        a.merge(b)
    with pytest.raises(ShapeError, match="different systems"):
        a.merge(_acc(A1, 2.0 * B, 2))
    assert a.count == b.count == 60  # neither operand touched


def test_merge_of_the_same_system_and_states_only_still_works():
    A, B = np.diag([0.5, 0.2]), np.ones((2, 1))
    a, b = _acc(A, B, 0), _acc(A.copy(), B.copy(), 1)  # equal values, other arrays
    merged = a.merge(b)
    assert merged.count == 120
    s = StateCovarianceAccumulator(n=2)
    s.update_states(np.random.default_rng(3).standard_normal((2, 5, 2)))
    for m in (s.merge(a), a.merge(s)):
        assert m.count == 70
        m.update(np.ones((1, 4, 1)))  # the (A, B) of the operand that has them
        assert m.count == 74
