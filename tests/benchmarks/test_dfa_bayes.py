"""The exact Bayes ladder against brute force over every table and every full bit string."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from benchmarks.hrm.dfa_bayes import ladder


def _brute(k: int, T: int, m: int) -> float:
    accs = []
    for flat in itertools.product(range(k), repeat=2 * k):
        table = np.array(flat).reshape(k, 2)
        groups: dict[tuple, np.ndarray] = {}
        for bits in itertools.product((0, 1), repeat=T):
            s = 0
            for b in bits:
                s = table[s, b]
            groups.setdefault(bits[T - m:] if m else (), np.zeros(k))[s] += 1
        accs.append(sum(g.max() for g in groups.values()) / 2 ** T)
    return float(np.mean(accs))


@pytest.mark.parametrize("k,T", [(2, 6), (3, 5)])
def test_ladder_equals_brute_force(k, T):
    got = ladder(k, T, ms=(0, 1, 4))
    for m in (0, 1, 4):
        assert got[f"m={m}"] == pytest.approx(_brute(k, T, m), abs=1e-12)
    assert got["m=0"] <= got["m=1"] <= got["m=4"] <= 1.0
