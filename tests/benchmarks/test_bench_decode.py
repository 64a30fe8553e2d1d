"""The statistic of ``benchmarks/bench_decode.py``: median of paired per-round ratios with a
bootstrap interval (no timing here; the benchmark itself is not run)."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("scipy", reason="bench_decode's bootstrap needs scipy")
from benchmarks.bench_decode import paired  # noqa: E402


def test_paired_ratio_is_per_round_so_a_drift_common_to_both_arms_cancels():
    rng = np.random.default_rng(0)
    drift = 1.0 + 0.3 * rng.random(25)  # the machine slows both arms alike, round by round
    base = 2.0 * drift
    adapted = 2.04 * drift * (1 + 1e-4 * rng.standard_normal(25))
    r = paired(adapted, base, resamples=2000)
    assert r["median"] == pytest.approx(1.02, rel=2e-4, abs=0)
    assert r["low"] <= r["median"] <= r["high"]
    assert r["high"] - r["low"] < 1e-3  # the drift does not widen the interval
    # the ratio of the arms' own medians does not pair rounds: with a drift it is off
    assert np.median(adapted) / np.median(base) != pytest.approx(r["median"], rel=1e-6, abs=0)
    assert r["ratios"] == pytest.approx(list(adapted / base), rel=1e-12, abs=0)


def test_paired_interval_covers_the_spread_of_noisy_ratios_and_is_reproducible():
    rng = np.random.default_rng(1)
    base = np.full(40, 3.0)
    adapted = base * (1.02 + 0.02 * rng.standard_normal(40))
    r1, r2 = paired(adapted, base, resamples=2000), paired(adapted, base, resamples=2000)
    assert r1 == r2  # fixed seed
    assert r1["low"] < 1.02 < r1["high"]
    assert 0.003 < r1["high"] - r1["low"] < 0.03
    assert r1["min"] == pytest.approx(float((adapted / base).min()), rel=1e-12, abs=0)
