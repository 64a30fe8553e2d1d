"""Glover's H-infinity bound with a repeated Hankel singular value below the cut.

``diag(G1, G1)`` has every HSV twice. The antistable mirror ``F`` of Glover's all-pass
construction has HSVs ``sigma_i(F(-s)) <= sigma_{i+r+k}(G)``, but (MIMO ``G1``) they need
not keep the multiplicity, and the feed-through recursion then removes two values where
``G``'s distinct tail has one: the H-infinity error exceeds that tail (by 7.3 % here, at
rho = 0.6, far above any rounding) while staying within Glover's bound ``sigma_{r+1} +
sum of the distinct HSVs of F``. The bound reported is that one (it was the measured error,
with a warning blaming floating point).
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import scipy.linalg as sla

from lti import DiscreteLTI, hankel_norm_approximation, hinf_norm


def _twin(seed: int, m: int, p: int) -> DiscreteLTI:
    rng = np.random.default_rng(seed)
    A = rng.standard_normal((4, 4))
    A *= 0.6 / np.max(np.abs(np.linalg.eigvals(A)))
    B, C = rng.standard_normal((4, m)), rng.standard_normal((p, 4))
    D = rng.standard_normal((p, m))
    return DiscreteLTI(sla.block_diag(A, A), sla.block_diag(B, B), sla.block_diag(C, C),
                       sla.block_diag(D, D))


def _sweep(E: DiscreteLTI, k: int = 20001) -> float:
    """max over a dense grid of sigma_max(E(e^{j theta})): a lower bound of ||E||_inf."""
    H = E.frequency_response(np.linspace(0.0, np.pi, k))
    return float(np.max(np.linalg.svd(H, compute_uv=False)))


def test_repeated_tail_hsv_bound_is_glovers_not_the_measured_error():
    G = _twin(1, 3, 2)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no "ill-conditioned in floating point" warning
        res = hankel_norm_approximation(G, order=0)
    s = res.hsv
    np.testing.assert_allclose(s[0::2], s[1::2], rtol=1e-10)  # every HSV twice
    E = G - res.reduced
    err = hinf_norm(E).value
    assert abs(err - _sweep(E)) <= 1e-8 * err  # independent check of the norm
    assert err > 1.05 * res.tail  # the distinct tail of G is NOT a bound here
    assert res.lower_bound <= err <= res.error_bound
    # Glover's bound: sigma_1 (multiplicity 2, once) + the rest with multiplicity
    assert res.error_bound <= s[0] + s[2:].sum() + res.rounding_term
    assert res.measured_error is not None and res.measured_error < res.error_bound


def test_simple_tail_bound_is_still_the_distinct_tail():
    """Distinct HSVs: Glover's bound from the mirror is at most the tail, error_bound is
    tail + rounding_term as before."""
    rng = np.random.default_rng(3)
    A = rng.standard_normal((6, 6))
    A *= 0.8 / np.max(np.abs(np.linalg.eigvals(A)))
    G = DiscreteLTI(A, rng.standard_normal((6, 3)), rng.standard_normal((2, 6)),
                    rng.standard_normal((2, 3)))
    for r in range(6):
        res = hankel_norm_approximation(G, order=r)
        assert res.error_bound == res.tail + res.rounding_term
        assert res.lower_bound <= hinf_norm(G - res.reduced).value <= res.error_bound


def test_hsv_below_the_conditioned_floor_does_not_break_order_0():
    """Drawn by lti.testing.strategies (near_unit_circle): poles -0.99976 and -0.99012,
    HSVs 64.8 and 5.1e-11 (8e-13 relative, below n eps / (1 - rho^2) = 9e-13). The floor
    without the conditioning kept the second; the mirror's one state then came out on the
    wrong side of the axis and every tie tolerance failed with SolverError at order 0."""
    A = np.array([[-0.995645029382284, -0.00476459023493791],
                  [-0.00476459023493797, -0.9942375348431634]])
    B = np.array([[-0.05763138939776474, 2.79464528836964],
                  [-0.7984348266746596, 1.0164597640795625]])
    C = np.array([[-0.6939705568382414, 0.8040016402382409]])
    D = np.array([[1.6118038531320131, 0.8177558288820161]])
    G = DiscreteLTI(A, B, C, D)
    res = hankel_norm_approximation(G, order=0)
    assert res.order == res.reduced.n == 0 and res.minimal_order == 1
    err = _sweep(G - res.reduced)
    assert res.lower_bound <= err * (1 + 1e-9) and err <= res.error_bound
    with pytest.warns(UserWarning, match="only 1 Hankel singular values exceed"):
        full = hankel_norm_approximation(G, order=2)
    assert full.order == 1 and _sweep(G - full.reduced) <= full.error_bound
