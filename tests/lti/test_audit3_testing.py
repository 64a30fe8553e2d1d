"""Third audit of lti.testing: the bound helpers take every reduction result whose bounds
bound ||G - G_r||_inf (a WeightedBalancedTruncation raised a bare AttributeError
'n_unstable'), and refuse other objects with a typed error."""

from __future__ import annotations

import numpy as np
import pytest

import lti
from lti.testing import assert_reduction_within_bounds, reduction_error, rounding_term

G = lti.DiscreteLTI(np.diag([0.9, 0.5, -0.3, 0.1]), [[1.0], [0.5], [-1.0], [2.0]],
                    [[1.0, -1.0, 0.5, 0.3]])


def test_weighted_result_is_checked_against_its_plain_error_bounds():
    w = lti.weighted_balanced_truncation(G, input_covariance=[[4.0]], order=2)
    err = assert_reduction_within_bounds(G, w)
    assert err == reduction_error(G, w)
    assert abs(err - lti.hinf_norm(G - w.reduced).value) <= 1e-9 * err
    assert w.lower_bound <= err <= w.error_bound
    assert rounding_term(G, w) == w.rounding_term


def test_a_weighted_result_whose_bound_is_broken_fails_the_assertion():
    w = lti.weighted_balanced_truncation(G, input_covariance=[[4.0]], order=2)
    import dataclasses

    broken = dataclasses.replace(w, error_bound=0.5 * reduction_error(G, w))
    with pytest.raises(AssertionError, match="outside"):
        assert_reduction_within_bounds(G, broken)


@pytest.mark.parametrize("helper", [assert_reduction_within_bounds, reduction_error,
                                    rounding_term])
def test_a_non_result_is_a_typed_error_naming_what_is_missing(helper):
    with pytest.raises(lti.InvalidArgumentError, match=r"got object without reduced"):
        helper(G, object())


def test_every_kind_draws_valid_systems_with_no_states():
    pytest.importorskip("hypothesis", reason="the strategies are hypothesis strategies")
    from hypothesis import HealthCheck, given, settings

    from lti.testing import strategies

    def check(kind):  # "fir" with n = 0 built a 1x1 A (np.diag([], -1)): ShapeError
        drawn = []

        @settings(max_examples=8, deadline=None, derandomize=True,
                  suppress_health_check=list(HealthCheck))
        @given(G=strategies.stable_systems(n=0, kind=kind))
        def draw(G):
            assert G.n == 0 and G.B.shape == (0, G.m) and G.C.shape == (G.p, 0)
            drawn.append(G)

        draw()
        return len(drawn)

    assert all(check(kind) > 0 for kind in strategies.KINDS)


def test_non_normal_draws_are_stable_by_every_computation_of_the_radius():
    """A strongly non-normal matrix's computed eigenvalues depend on the algorithm (dgeev read
    <= 0.95 where lti's Schur-based check read 1.04 on a 10-state draw with ||A|| ~ 400): the
    strategies' non_normal / fir matrices are scaled until all three computations agree."""
    import scipy.linalg as sla

    from lti.testing.strategies import _radius, _robust_radius

    n = 10
    Q = np.linalg.qr(np.random.default_rng(0).standard_normal((n, n)))[0]
    A = Q @ (0.9 * np.eye(n) + 20.0 * np.diag(np.ones(n - 1), 1)) @ Q.T  # exact radius 0.9
    assert not lti.DiscreteLTI(A, np.ones((n, 1)), np.ones((1, n))).is_stable()  # computed: 1.24
    A = _robust_radius(A, 0.95)
    radii = (_radius(A), _radius(A.T), _radius(sla.schur(A)[0]))
    assert max(radii) <= 0.95, radii
    assert lti.DiscreteLTI(A, np.ones((n, 1)), np.ones((1, n))).is_stable()
