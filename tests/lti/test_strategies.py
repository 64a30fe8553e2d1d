"""Property tests of balanced truncation over the lti.testing strategies, and tests of the
strategies' knobs. The opt-in run (``-m slow``) checks the bounds on 10,000 examples."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

hypothesis = pytest.importorskip("hypothesis")
from hypothesis import HealthCheck, assume, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from lti import (  # noqa: E402
    InvalidArgumentError,
    balanced_truncation,
    hankel_singular_values,
)
from lti.testing import (  # noqa: E402
    assert_balanced,
    assert_reduction_within_bounds,
    strategies,
)

_FAST = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _reduce(G, **kwargs):
    with warnings.catch_warnings():
        # tied / zero HSVs are legitimate draws; their warnings are tested elsewhere
        warnings.simplefilter("ignore", UserWarning)
        return balanced_truncation(G, **kwargs)


def _check_bounds(G, r, method, match_dc):
    res = _reduce(G, order=r, method=method, match_dc=match_dc)
    assert res.order <= r and res.reduced.n == res.order
    # reduction_error (inside) raises unless the reduced model is Schur-stable
    assert_reduction_within_bounds(G, res, rtol=1e-6)


@_FAST
@given(
    case=strategies.systems_and_orders(n=(1, 8)),
    method=st.sampled_from(["sr", "bfsr"]),
    match_dc=st.booleans(),
)
def test_error_within_bounds_property(case, method, match_dc):
    G, r = case
    _check_bounds(G, r, method, match_dc)


@_FAST
@given(G=strategies.stable_systems(n=(1, 8)))
def test_balanced_realisation_gramians_equal_diag_hsv(G):
    """Square-root balancing of the states with sigma_i >= 1e-6 sigma_1 (the rest removed by
    singular perturbation, which keeps the realisation balanced): both Gramians equal
    diag(hsv). Balancing is only as accurate as its conditioning
    kappa = sqrt(||P|| ||Q||) / sigma_k allows, so badly conditioned draws are skipped."""
    from lti.lyapunov import solve_discrete_lyapunov

    hsv = hankel_singular_values(G)
    assume(hsv[0] > 1e-150)
    k = int(np.count_nonzero(hsv >= 1e-6 * hsv[0]))
    P = solve_discrete_lyapunov(G.A, G.B @ G.B.T)
    Q = solve_discrete_lyapunov(G.A.T, G.C.T @ G.C)
    kappa = np.sqrt(np.linalg.norm(P, 2) * np.linalg.norm(Q, 2)) / hsv[k - 1]
    assume(kappa <= 1e6)
    res = _reduce(G, order=k, method="sr", match_dc=True)
    assert res.order == k
    assert_balanced(res.reduced, hsv[:k], rtol=1e-7)


@_FAST
@given(
    G=strategies.stable_systems(n=(1, 8), kind=("dense", "diagonal", "complex_diagonal",
                                                 "near_unit_circle", "hsv_decades")),
    data=st.data(),
)
def test_hsv_invariant_under_similarity(G, data):
    from hypothesis.extra import numpy as hnp

    n = G.n
    M = data.draw(hnp.arrays(np.float64, (n, n), elements=st.floats(-1, 1)))
    U, _, Vt = np.linalg.svd(M + 2 * np.eye(n))
    s = data.draw(hnp.arrays(np.float64, (n,), elements=st.floats(1.0, 10.0)))
    T = (U * s) @ Vt  # condition number <= 10
    h1, h2 = hankel_singular_values(G), hankel_singular_values(G.similarity(T))
    # relative to sigma_1, with an absolute floor at the rounding level of the Gramian factors
    # (sigma_1 can be exactly 0 while the transformed system gives 1e-33, e.g. A = 0, CB = 0)
    decay = max(1.0 - G.spectral_radius() ** 2, 1e-12)
    floor = 1e-12 * np.linalg.norm(G.B) * np.linalg.norm(G.C) / decay
    assert np.max(np.abs(h1 - h2), initial=0.0) <= 1e-9 * (h1[0] if n else 0.0) + floor


# ----------------------------------------------------------------- strategy knobs


@settings(max_examples=40, deadline=None)
@given(G=strategies.stable_systems(n=(0, 8), max_radius=0.7,
                                   kind=("dense", "diagonal", "complex_diagonal", "non_normal",
                                         "hsv_decades")))
def test_strategy_spectral_radius_knob(G):
    assert G.spectral_radius() <= 0.7 + 1e-12


@settings(max_examples=30, deadline=None)
@given(G=strategies.stable_systems(n=(2, 8), kind="near_unit_circle", min_distance=1e-5))
def test_strategy_near_unit_circle(G):
    dist = 1.0 - np.abs(G.poles())
    assert np.all(dist >= 1e-5 * (1 - 1e-6)) and np.all(dist <= 1e-2 * (1 + 1e-6))


@settings(max_examples=30, deadline=None)
@given(G=strategies.stable_systems(n=(3, 3), m=1, p=1, kind="diagonal", feedthrough=False))
def test_strategy_fixed_sizes_and_diagonal(G):
    assert (G.n, G.m, G.p) == (3, 1, 1) and G.is_diagonal and not np.any(G.D)


def test_strategy_hsv_spread_and_bad_knobs():
    spreads = []

    @settings(max_examples=20, deadline=None)
    @given(G=strategies.stable_systems(n=(10, 10), kind="hsv_decades", decades=12.0))
    def collect(G):
        h = hankel_singular_values(G)
        spreads.append(np.log10(h[0] / max(h[-1], 1e-300)))

    collect()
    assert np.median(spreads) >= 6.0  # HSVs spread over many decades
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # .example() outside @given: fine for this check
        for kwargs in (dict(kind="sparse"), dict(max_radius=1.0), dict(min_distance=0.5),
                       dict(n=(3, 1)), dict(min_magnitude=-1.0)):
            with pytest.raises(InvalidArgumentError):
                strategies.stable_systems(**kwargs).example()
        with pytest.raises(InvalidArgumentError, match="proper"):
            strategies.systems_and_orders(n=(0, 1), orders="proper").example()


# ------------------------------------------------------------------ opt-in, 10,000


@pytest.mark.slow
@settings(max_examples=10_000, deadline=None, suppress_health_check=list(HealthCheck))
@given(
    case=strategies.systems_and_orders(n=(1, 10)),
    method=st.sampled_from(["sr", "bfsr"]),
    match_dc=st.booleans(),
)
def test_error_within_bounds_10000_examples(case, method, match_dc):
    G, r = case
    _check_bounds(G, r, method, match_dc)
