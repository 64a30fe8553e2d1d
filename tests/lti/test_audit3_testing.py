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
