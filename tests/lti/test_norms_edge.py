"""lti.norms' results at the edges of the Python protocols: HinfNorm is the pair
(value, omega) for copy, pickle, concatenation, repetition, membership and ordering too, like
the named tuple it replaced (tuple's own methods saw its hidden third item, the accuracy)."""

from __future__ import annotations

import copy
import pickle

import pytest

from lti import DiscreteLTI, hinf_norm
from lti.norms import HinfNorm


@pytest.fixture
def res():
    return hinf_norm(DiscreteLTI([[0.5]], [[1.0]], [[1.0]]))


@pytest.mark.parametrize("how", ["copy", "deepcopy", "pickle"])
def test_hinf_result_copies_and_pickles(res, how):
    # the old code: TypeError "HinfNorm.__new__() missing 1 required positional argument"
    f = {"copy": copy.copy, "deepcopy": copy.deepcopy,
         "pickle": lambda x: pickle.loads(pickle.dumps(x))}[how]
    out = f(res)
    assert type(out) is HinfNorm and out == res
    assert (out.value, out.omega, out.accuracy) == (res.value, res.omega, res.accuracy)


def test_hinf_result_sequence_operations_see_the_pair(res):
    acc = res.accuracy
    assert res + (1,) == (2.0, 0.0, 1) and (1,) + res == (1, 2.0, 0.0)  # old: acc inside
    assert res * 2 == 2 * res == (2.0, 0.0, 2.0, 0.0)
    assert acc not in res and res.count(acc) == 0 and res.count(2.0) == 1
    assert res.index(0.0) == 1
    with pytest.raises(ValueError):
        res.index(acc)


def test_hinf_result_orders_as_the_pair(res):
    # the old code compared (2.0, 0.0, acc) with (2.0, 0.0): res > (2.0, 0.0) was True
    assert res <= (2.0, 0.0) and res >= (2.0, 0.0)
    assert not res < (2.0, 0.0) and not res > (2.0, 0.0) and not (2.0, 0.0) < res
    assert res < (2.0, 1e-300) and sorted([res, (1.0, 5.0)])[1] is res
