"""Tests written for the survivors of the mutation run of lti/hankel.py
(benchmarks/results/mutmut_lti_hankel.md). Each checks a stated property of
:func:`lti.hankel_norm_approximation` that the earlier tests left open, with every error
measured independently of the construction (the dense frequency sweep of
tests/lti/test_hankel_edge.py)."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

from lti import DiscreteLTI, hankel_norm_approximation
from tests.lti.test_hankel_edge import NEAR_TIES, _hinf_sweep, _twin


def _with_dt(G: DiscreteLTI, dt: float) -> DiscreteLTI:
    return DiscreteLTI(G.A, G.B, G.C, G.D, dt=dt)


def _run(G, order):
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        res = hankel_norm_approximation(G, order=order)
    return res, [str(x.message) for x in w]


# (gap, seed, order, which repair of the near-tie wins): in the first the feed-through of
# the looser grouping (VERIFY_TIE_RTOL) beats Glover's recursion, in the second the whole
# construction with the near-ties grouped does
REPAIRED = [(1e-8, 2, 3, "feed-through"), (1e-6, 6, 4, "grouping")]


@pytest.mark.parametrize(("gap", "seed", "order", "what"), REPAIRED,
                         ids=[w for *_, w in REPAIRED])
def test_a_repaired_near_tie_keeps_glovers_bound_and_the_callers_dt(gap, seed, order, what):
    G = _with_dt(_twin(gap, seed), 0.25)
    res, msgs = _run(G, order)
    assert not [m for m in msgs if "ill-conditioned" in m]  # the repair met the bound
    assert res.order == order and res.reduced.dt == 0.25
    err = _hinf_sweep(G - res.reduced)
    assert res.lower_bound <= err <= res.tail + res.rounding_term == res.error_bound
    assert err <= res.measured_error <= err * (1 + 1e-6)


@pytest.mark.parametrize(("gap", "seed", "order"), [c[:3] for c in NEAR_TIES[:3]])
def test_measured_error_is_the_hinf_error_raised_by_its_accuracy_only(gap, seed, order):
    G = _twin(gap, seed)
    res, _ = _run(G, order)
    err = _hinf_sweep(G - res.reduced)
    assert res.measured_error is not None
    assert err <= res.measured_error <= err * (1 + 1e-6)
    assert np.isfinite(res.error_bound)


# ------------------------------------------------------------- the smallest systems


def test_a_first_order_system_is_approximated_by_an_all_pass_error():
    # G(z) = d + b c / (z - a): one HSV |b c| / (1 - a^2); Glover's order-0 approximant is a
    # constant with G - D0 all-pass, |G - D0| = sigma_1 at every frequency
    a, b, c, d = 0.6, 1.5, -0.8, 0.3
    G = DiscreteLTI([[a]], [[b]], [[c]], [[d]])
    res, _ = _run(G, 0)
    sigma = abs(b * c) / (1 - a * a)
    assert res.hsv.shape == (1,) and abs(res.hsv[0] - sigma) <= 1e-14 * sigma
    assert res.reduced.n == 0 and res.order == 0 and res.hankel_error == res.hsv[0]
    w = np.linspace(0.0, np.pi, 257)
    E = (G.frequency_response(w) - res.reduced.D[None])[:, 0, 0]
    assert np.allclose(np.abs(E), sigma, rtol=1e-12, atol=0)
    assert res.lower_bound <= sigma <= res.error_bound
    full, _ = _run(G, 1)  # order n: the system itself
    assert full.reduced.n == 1 and full.error_bound <= 1e-12 * sigma
    assert np.allclose(full.reduced.frequency_response(w), G.frequency_response(w),
                       rtol=1e-13, atol=0)


def test_a_static_gain_is_returned_unchanged():
    D = np.array([[1.0, -2.0], [0.5, 3.0]])
    G = DiscreteLTI(np.zeros((0, 0)), np.zeros((0, 2)), np.zeros((2, 0)), D, dt=0.1)
    res, msgs = _run(G, 0)
    assert not msgs
    assert res.reduced.n == 0 and np.array_equal(res.reduced.D, D) and res.reduced.dt == 0.1
    assert res.hsv.shape == (0,) and res.order == res.minimal_order == 0
    assert res.hankel_error == res.tail == res.lower_bound == 0.0
    assert 0.0 <= res.error_bound <= 1e-12 * np.linalg.norm(D, 2)  # rounding only


def test_tie_blocks_use_the_relative_gap_to_the_larger_neighbour_chained():
    from lti.hankel import _tie_block

    # a leading pair tied to 1e-12 relative, then a value far below: sigma_1 and sigma_2 are
    # one block whatever the tail (the gap is relative to the larger value, not the smallest)
    s = np.array([1.0, 1.0 - 1e-12, 1e-9])
    assert _tie_block(s, 1) == (0, 2) and _tie_block(s, 0) == (0, 2)
    assert _tie_block(s, 2) == (2, 3)
    # chained: each consecutive gap within rtol, the whole run is one block
    s = np.array([2.0, 1.0, 1.0 - 5e-9, 1.0 - 1e-8, 0.5])
    assert _tie_block(s, 2) == (1, 4) and _tie_block(s, 1, rtol=1e-10) == (1, 2)


def test_cayley_maps_refuse_a_singular_shift_and_map_empty_systems():
    from lti import SolverError
    from lti.hankel import cayley_to_continuous, cayley_to_discrete

    one = np.ones((1, 1))
    with pytest.raises(SolverError, match=r"needs a nonsingular `I \+ A`$"):
        cayley_to_continuous(-one, one, one, one)
    swap = np.array([[0.0, 1.0], [1.0, 0.0]])  # eigenvalues +-1: I + A singular, I - A too
    with pytest.raises(SolverError, match=r"`I \+ A`"):
        cayley_to_continuous(swap, np.ones((2, 1)), np.ones((1, 2)), one)
    with pytest.raises(SolverError, match=r"needs a nonsingular `I - Ac`$"):
        cayley_to_discrete(swap, np.ones((2, 1)), np.ones((1, 2)), one)
    D = np.array([[1.0, 2.0]])
    for f in (cayley_to_continuous, cayley_to_discrete):
        A, B, C, Dc = f(np.zeros((0, 0)), np.zeros((0, 2)), np.zeros((1, 0)), D)
        assert A.shape == (0, 0) and B.shape == (0, 2) and C.shape == (1, 0)
        assert np.array_equal(Dc, D)
