"""lti._smith.stops_at_early_step: the screened Smith attempt's stop at squaring 4, decided
before the attempt from 31 products A^j B (a compiled loop); it may only reject what the
attempt itself would reject."""

from __future__ import annotations

import numpy as np
import pytest

import lti._smith as smith
import lti.gramians as gramians
from lti import DiscreteLTI
from lti.gramians import stable_gramian_factors
from tests.lti.jit_helpers import needs_compiled

KW = dict(max_iter=smith.SMITH_AUTO_ITER, max_growth=smith.SMITH_MAX_GROWTH, screen=True)


def _dense(n, rho, seed, m=2):  # bench_balanced's family
    rng = np.random.default_rng(seed)
    A = rng.standard_normal((n, n))
    A *= rho / np.max(np.abs(np.linalg.eigvals(A)))
    return A, rng.standard_normal((n, m)), rng.standard_normal((m, n))


def _systems():
    for n in (4, 16, 40):
        for rho in (0.5, 0.9, 0.95, 0.97, 0.99, 0.9999):
            for seed in range(2):
                A, B, C = _dense(n, rho, 100 * n + seed, m=1 + seed)
                yield A, B, C.T
                rng = np.random.default_rng(seed + n)
                T = (np.triu(rng.standard_normal((n, n)), 1) * 0.5
                     + np.diag(rng.uniform(-rho, rho, n)))
                Q, _ = np.linalg.qr(rng.standard_normal((n, n)))
                yield Q @ T @ Q.T, B, C.T  # non-normal


@needs_compiled
def test_rejects_only_what_the_attempt_rejects():
    rejected = 0
    for A, B, Ct in _systems():
        if smith.stops_at_early_step(A, B):
            rejected += 1
            assert smith.smith_factors(A, [B, Ct], [False, True], **KW) is None
    assert rejected >= 10  # (the test sees rejections)


@needs_compiled
@pytest.mark.parametrize("n", [16, 64, 128])
def test_bench_families(n):
    A, B, _ = _dense(n, 0.9999, n)
    assert smith.stops_at_early_step(A, B)  # the slow family: the attempt stops at squaring 4
    A, B, _ = _dense(n, 0.95, n)
    assert not smith.stops_at_early_step(A, B)  # the default family: Smith converges


@needs_compiled
@pytest.mark.parametrize("g, stops", [(0.955, False), (0.965, True), (0.9999, True)])
def test_exact_geometric_decay(g, stops):
    # as test_smith_early: w_4 / w_3 = g^16 (1 + g^16) against t_4 (1 + t_4) = 0.791
    n = 12
    Q, _ = np.linalg.qr(np.random.default_rng(n).standard_normal((n, n)))
    B = np.random.default_rng(1).standard_normal((n, 2))
    assert smith.stops_at_early_step(g * Q, B) is stops


@needs_compiled
def test_growth_negligible_windows_and_limits():
    n = 20  # Jordan-like chain: the sums still grow at squaring 4 (ratio 13.4): not judged
    J = 0.59 * np.eye(n) + 0.5 * np.diag(np.ones(n - 1), -1)
    assert not smith.stops_at_early_step(J, np.eye(n)[:, :1])
    S = np.diag(np.ones(15), -1)  # shift register: windows vanish (the attempt converges)
    assert not smith.stops_at_early_step(S, np.eye(16)[:, :1])
    A, B, _ = _dense(16, 0.9999, 16)
    assert not smith.stops_at_early_step(A, np.zeros_like(B))  # B = 0
    assert not smith.stops_at_early_step(A, B[:, :0])
    assert smith.stops_at_early_step(A, B * 1e-300) and smith.stops_at_early_step(A, B * 1e300)
    A, B, _ = _dense(smith.SMITH_SCREEN_N + 1, 0.9999, 3)
    assert not smith.stops_at_early_step(A, B)  # above SMITH_SCREEN_N: smith_promising's job


def test_off_without_compiled_kernels(monkeypatch):
    monkeypatch.setenv("LTI_DISABLE_JIT", "1")
    A, B, _ = _dense(64, 0.9999, 64)
    assert not smith.stops_at_early_step(A, B)


@needs_compiled
def test_kernel_source_gives_the_compiled_decision():
    for n, rho, seed in [(8, 0.9999, 1), (8, 0.95, 2), (13, 0.99, 3), (6, 0.97, 4)]:
        A, B, _ = _dense(n, rho, seed)
        args = (smith.SMITH_EARLY_STEP, smith._window_ratio(smith.SMITH_EARLY_STEP), 2.0,
                4.0 * np.finfo(float).eps ** 2, smith.EARLY_FALSE_RATIO)
        py = smith._early_stop_py(np.asfortranarray(A), np.array(B, order="F"), *args)
        assert py == bool(smith.stops_at_early_step(A, B))


@needs_compiled
def test_balanced_path_skips_the_attempt_and_keeps_smith(monkeypatch):
    A, B, C = _dense(64, 0.9999, 64)
    calls = []
    real = gramians.smith_factors
    monkeypatch.setattr(gramians, "smith_factors",
                        lambda *a, **k: calls.append(1) or real(*a, **k))
    assert stable_gramian_factors(DiscreteLTI(A, B, C)).path == "schur"
    assert calls == []  # decided before the attempt
    A, B, C = _dense(64, 0.95, 64)
    assert stable_gramian_factors(DiscreteLTI(A, B, C)).path == "smith"
    assert calls == [1]


@needs_compiled
def test_negligible_windows_are_not_judged():
    # B sees a slow mode (0.9999) only at 1e-17: from squaring 3 on its windows are below
    # eps^2 of the sum (the attempt calls this factor converged) and in the stop band
    # (w_4 / w_3 ~ 2); C^T does not see the slow mode: the attempt converges
    d = np.r_[np.full(9, 1e-3), 0.9999]
    B = np.r_[np.ones(9), 1e-17][:, None]
    Ct = np.r_[np.ones(9), 0.0][:, None]
    A = np.diag(d)
    assert smith.smith_factors(A, [B, Ct], [False, True], **KW) is not None
    assert not smith.stops_at_early_step(A, B)


def test_fast_decay_answers_after_window_three():
    """A fast first decay (w3 < EARLY_FALSE_RATIO w2) answers False after 15 products, even
    when a slow mode would pass the squaring-4 test later (then the attempt decides)."""
    n = 12
    A = np.diag(np.r_[0.9999, np.full(n - 1, 0.3)])  # one slow mode, weakly excited
    B = np.r_[1e-3, np.ones(n - 1)][:, None]
    args = (smith.SMITH_EARLY_STEP, smith._window_ratio(smith.SMITH_EARLY_STEP), 2.0,
            4.0 * np.finfo(float).eps ** 2)

    def run(early):
        return smith._early_stop_py(np.asfortranarray(A), np.array(B, order="F"), *args, early)

    assert run(0.0) == 1  # without the early answer: the squaring-4 test stops the attempt
    assert run(smith.EARLY_FALSE_RATIO) == 0  # window 3 / window 2 is small: no stop
