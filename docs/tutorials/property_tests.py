# ruff: noqa: E402  (imports appear where the page introduces them)
"""Tutorial: property tests of model-reduction code with ``lti.testing.strategies``.

The file is both a pytest module (``pytest docs/tutorials/property_tests.py``) and a
script (``python docs/tutorials/property_tests.py`` runs every test once, which is how
``tests/test_docs.py`` executes it). Each property runs 25 hypothesis examples here,
derandomized so that every run checks the same ones; while developing, drop
``derandomize=True, database=None`` to search new systems on every run.
"""

# [bounds]
import warnings

from hypothesis import given, settings

from lti import balanced_truncation
from lti.testing import assert_reduction_within_bounds, strategies


@settings(max_examples=25, deadline=None, derandomize=True, database=None)
@given(case=strategies.systems_and_orders(n=(2, 10),  # 9 in 10: a real reduction 0 < r < n_min
                                          kind=("dense", "non_normal", "near_unit_circle")))
def test_balanced_truncation_error_within_bounds(case):
    G, r = case
    with warnings.catch_warnings():  # non-minimal draws: the order is capped, with a warning
        warnings.simplefilter("ignore", UserWarning)
        result = balanced_truncation(G, order=r)
    # sigma_{r+1} <= ||G - G_r||_inf <= 2 * sum_{i>r} sigma_i, with the exact H-inf norm
    assert_reduction_within_bounds(G, result)
# [/bounds]


# [similarity]
import numpy as np
from hypothesis import strategies as st

from lti import hankel_singular_values


@settings(max_examples=25, deadline=None, derandomize=True, database=None)
@given(G=strategies.stable_systems(n=(1, 8), kind=("dense", "diagonal", "complex_diagonal")),
       seed=st.integers(0, 2**32 - 1))
def test_hsv_are_invariant_under_a_change_of_coordinates(G, seed):
    rng = np.random.default_rng(seed)
    Q, _ = np.linalg.qr(rng.standard_normal((G.n, G.n)))
    T = Q @ np.diag(rng.uniform(0.5, 2.0, G.n))  # invertible, condition number <= 4
    hsv = hankel_singular_values(G)
    hsv_T = hankel_singular_values(G.similarity(T))
    scale = max(hsv[0], 1e-300)
    np.testing.assert_allclose(hsv_T, hsv, rtol=1e-6, atol=1e-9 * scale)
# [/similarity]


# [dc-gain]
@settings(max_examples=25, deadline=None, derandomize=True, database=None)
@given(case=strategies.systems_and_orders(n=(2, 8), orders="proper", kind=("dense", "diagonal")))
def test_singular_perturbation_keeps_the_dc_gain(case):
    G, r = case
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        Gr = balanced_truncation(G, order=r, match_dc=True).reduced
    dc, dc_r = G.frequency_response([0.0])[0], Gr.frequency_response([0.0])[0]
    scale = np.abs(G.markov(1)).max() + np.abs(dc).max() + 1.0
    np.testing.assert_allclose(dc_r, dc, rtol=1e-7, atol=1e-9 * scale)
# [/dc-gain]


if __name__ == "__main__":
    for test in (test_balanced_truncation_error_within_bounds,
                 test_hsv_are_invariant_under_a_change_of_coordinates,
                 test_singular_perturbation_keeps_the_dc_gain):
        test()  # hypothesis runs the examples; a counterexample raises
        print(f"{test.__name__}: 25 examples passed")
