"""HinfNorm.index with a start: the pair's semantics (mutmut_norms_rerun2.md's survivor
HinfNorm.index #3, which dropped the start/stop arguments)."""

from __future__ import annotations

import pytest

from lti.norms import HinfNorm


def test_index_honours_start_and_stop_on_the_pair():
    res = HinfNorm(2.0, 2.0, 1e-10)
    assert res.index(2.0) == 0
    assert res.index(2.0, 1) == 1
    with pytest.raises(ValueError):
        res.index(2.0, 0, 0)
    with pytest.raises(ValueError):
        res.index(1e-10)  # the hidden third item is not part of the pair
