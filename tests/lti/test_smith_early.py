"""The squared-Smith attempt's earliest screen step (lti._smith.SMITH_EARLY_STEP): sums that
already decay at squaring 4, but too slowly, stop the attempt there."""

from __future__ import annotations

import numpy as np
import pytest

import lti._smith as smith
from lti import DiscreteLTI
from lti.gramians import stable_gramian_factors

KW = dict(max_iter=smith.SMITH_AUTO_ITER, max_growth=smith.SMITH_MAX_GROWTH)


def _counting(monkeypatch):
    """Count the squarings the attempt reaches: one ||A_k||_F per squaring k."""
    calls = []
    fro2 = smith._fro2
    monkeypatch.setattr(smith, "_fro2", lambda X: calls.append(X.shape) or fro2(X))
    return calls


def _dense(n, rho, seed):  # bench_balanced's family
    rng = np.random.default_rng(seed)
    A = rng.standard_normal((n, n))
    A *= rho / np.max(np.abs(np.linalg.eigvals(A)))
    return DiscreteLTI(A, rng.standard_normal((n, 2)), rng.standard_normal((2, n)))


@pytest.mark.parametrize("g, stops", [(0.955, False), (0.965, True), (0.9999, True)])
def test_exact_geometric_decay_is_judged_at_squaring_4(g, stops, monkeypatch):
    # ||A^j B|| = g^j ||B||: w_4 / w_3 = g^16 (1 + g^16), 0.707 for g = 0.955 (< t_4 (1 + t_4)
    # = 0.791: go on, Smith converges), 0.885 for g = 0.965 and 1.995 for g = 0.9999 (flat
    # terms, a ratio near 2 but no growth): stop at k = 4, before the fifth squaring;
    # without the screen Smith converges for 0.955 and 0.965
    n = 12
    Q, _ = np.linalg.qr(np.random.default_rng(n).standard_normal((n, n)))
    M, B = g * Q, np.random.default_rng(1).standard_normal((n, 2))
    plain = smith.smith_factors(M, [B], [False], **KW)
    assert (plain is not None) is (g < 0.99)
    calls = _counting(monkeypatch)
    out = smith.smith_factors(M, [B], [False], screen=True, **KW)
    if stops:
        assert out is None
        # ||B||_F once, then per squaring k = 0..4 ||A_k||_F and ||A_k L_k||_F: stopped at
        # k = 4 (the k = 5 step would make it 13)
        assert len(calls) == 1 + 2 * (4 + 1)
    else:
        np.testing.assert_array_equal(out[0][0], plain[0][0])  # the screen only decides


def test_growing_sums_at_squaring_4_are_not_judged_there():
    # the Jordan-like chain of test_hammarling_fast (pole 0.59): ||A^j B|| still grows at
    # j = 8..63 (window ratios 13.4 and 8.1 at k = 4, 5: above 2); the early steps must leave
    # it alone (Smith converges; the ratio at k = 6 is 0.0024)
    n = 20
    A = 0.59 * np.eye(n) + 0.5 * np.diag(np.ones(n - 1), -1)
    B = np.eye(n)[:, :1]
    assert smith.smith_factors(A, [B], [False], screen=True, **KW) is not None


@pytest.mark.parametrize("n", [16, 64, 128])
def test_bench_family_at_rho_09999_stops_at_squaring_4(n, monkeypatch):
    # window ratios at k = 4 of B / C^T: 1.28 / 1.72 (n = 16), 1.71 / 1.55 (64), 0.86 / 0.95 (128)
    G = _dense(n, 0.9999, seed=n)
    calls = _counting(monkeypatch)
    assert smith.smith_factors(G.A, [G.B, G.C.T], [False, True], screen=True, **KW) is None
    # two initial norms, per squaring k = 0..3 ||A_k||_F and two factor norms, at k = 4
    # ||A_4||_F and one or two factor norms (stopped on the first factor or the second)
    assert len(calls) <= 2 + 3 * 4 + 3, len(calls)
    monkeypatch.undo()
    assert stable_gramian_factors(G).path == "schur"


@pytest.mark.parametrize("n", [16, 64, 128, 256])
def test_bench_family_at_rho_095_keeps_smith_bit_for_bit(n):
    # the default benchmark family passes every screen step: the factors are those of the
    # unscreened iteration, bit for bit
    G = _dense(n, 0.95, seed=n)
    plain = smith.smith_factors(G.A, [G.B, G.C.T], [False, True], **KW)
    out = smith.smith_factors(G.A, [G.B, G.C.T], [False, True], screen=True, **KW)
    assert out is not None and plain is not None
    for a, b in zip(out[0], plain[0], strict=True):
        np.testing.assert_array_equal(a, b)
    assert stable_gramian_factors(G).path == "smith"
