"""The screened Smith attempt of two factors takes the second factor's first steps only after
the first factor passed the screen at squaring SMITH_EARLY_STEP (lti._smith.smith_factors):
a slowly decaying A is rejected after one factor's products; every accepted result stays bit
for bit that of the step-by-step order."""

from __future__ import annotations

import numpy as np
import pytest

import lti._smith as smith

KW = dict(max_iter=smith.SMITH_AUTO_ITER, max_growth=smith.SMITH_MAX_GROWTH, screen=True)


def _dense(n, rho, seed):  # bench_balanced's family
    rng = np.random.default_rng(seed)
    A = rng.standard_normal((n, n))
    A *= rho / np.max(np.abs(np.linalg.eigvals(A)))
    return A, rng.standard_normal((n, 2)), rng.standard_normal((2, n))


def _cases():
    for n, rho in [(16, 0.95), (64, 0.95), (128, 0.95), (64, 0.3), (40, 0.9)]:
        A, B, C = _dense(n, rho, n)
        yield f"dense{n}-{rho}", A, [B, C.T]
    n = 12  # nilpotent: A^16 = 0, every factor done through ||A_k||_F <= eps at k = 4
    yield "shift", np.diag(np.ones(n - 1), -1), [np.eye(n)[:, :1], np.ones((n, 1))]
    # the first factor converges at an early squaring (B in the fast modes), the second not
    d = np.r_[np.full(4, 0.01), np.linspace(0.5, 0.9, 16)]
    Q, _ = np.linalg.qr(np.random.default_rng(2).standard_normal((20, 20)))
    A = Q @ np.diag(d) @ Q.T
    yield "first-early", A, [Q[:, :2], np.ones((20, 1))]
    yield "second-early", A, [np.ones((20, 1)), Q[:, :1]]
    yield "three", A, [np.ones((20, 1)), Q[:, :2], np.arange(20.0)[:, None]]


@pytest.mark.parametrize("case", list(_cases()), ids=lambda c: c[0])
def test_deferred_second_factor_is_bit_for_bit_the_step_by_step_result(case, monkeypatch):
    _, A, Bs = case
    tr = [bool(i % 2) for i in range(len(Bs))]
    out = smith.smith_factors(A, Bs, tr, **KW)
    monkeypatch.setattr(smith, "SMITH_SCREEN_N", 0)  # no deferral: the step-by-step order
    ref = smith.smith_factors(A, Bs, tr, **KW)
    assert (out is None) == (ref is None)
    if ref is not None:
        assert out[1] == ref[1]
        for a, b in zip(out[0], ref[0], strict=True):
            np.testing.assert_array_equal(a, b)
    if case[0] != "dense64-0.3":
        assert ref is not None  # (every case but one converges: the branches are exercised)


def test_second_factor_rejected_after_the_first_passed():
    # B sees only the fast modes, C^T the slow ones (0.9999): the first factor passes (or
    # converges), the second is rejected once it catches up
    d = np.r_[np.full(4, 0.01), np.full(16, 0.9999)]
    Q, _ = np.linalg.qr(np.random.default_rng(3).standard_normal((20, 20)))
    A = Q @ np.diag(d) @ Q.T
    assert smith.smith_factors(A, [Q[:, :2], np.ones((20, 1))], [False, True], **KW) is None


@pytest.mark.parametrize("n", [16, 64])
def test_slow_system_is_rejected_before_the_second_factor_moves(n, monkeypatch):
    A, B, C = _dense(n, 0.9999, n)
    calls = []
    fro2 = smith._fro2
    monkeypatch.setattr(smith, "_fro2", lambda X: calls.append(X.shape) or fro2(X))
    assert smith.smith_factors(A, [B, C.T], [False, True], **KW) is None
    # two initial norms, then per squaring k = 0..4 ||A_k||_F and the first factor's window:
    # the second factor took no step (it was 2 + 3 * 4 + 2 = 16 before)
    assert len(calls) == 2 + 2 * 5, len(calls)


def test_first_factor_converged_early_lets_the_others_catch_up_at_once():
    # both right-hand sides in the modes at 0.01 (converged at squaring 3), the other modes at
    # 0.5 keep ||A_k||_F above eps: with max_iter = 4 the second factor must catch up when
    # the first is done, not at squaring SMITH_EARLY_STEP (never reached)
    Q, _ = np.linalg.qr(np.random.default_rng(4).standard_normal((10, 10)))
    A = Q @ np.diag(np.r_[np.full(4, 0.01), np.full(6, 0.5)]) @ Q.T
    Bs = [Q[:, :1], Q[:, 1:3]]
    kw = dict(KW, max_iter=4)
    out = smith.smith_factors(A, Bs, [False, True], **kw)
    ref = smith.smith_factors(A, Bs, [False, True], **dict(kw, screen=False))
    assert out is not None and ref is not None
    for a, b in zip(out[0], ref[0], strict=True):
        np.testing.assert_array_equal(a, b)
