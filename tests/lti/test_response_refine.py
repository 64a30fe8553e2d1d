"""The refined Schur evaluation of frequency responses (lti/_response.py: schur_response,
_back_substitute): accuracy against a dense solve per frequency, the frequencies whose
correction is not finite, and the chunking of long frequency grids. Written for the
survivors of the mutation run of lti/_response.py after the refinement step was added
(benchmarks/results/mutmut_lti_response.md, 'later-code')."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

from lti import DiscreteLTI, _response


def _dense(A, B, C, D, w):
    """``C (zI - A)^{-1} B + D`` by one LU solve per frequency, (k, p, m)."""
    n = A.shape[0]
    return np.stack([C @ np.linalg.solve(np.exp(1j * x) * np.eye(n) - A, B) + D for x in w])


def _system(n, m, p, seed):
    rng = np.random.default_rng(seed)
    A = rng.standard_normal((n, n))
    A *= 0.8 / max(abs(np.linalg.eigvals(A)))
    A += np.triu(rng.standard_normal((n, n)), 1)  # non-normal: the coupling terms matter
    return A, rng.standard_normal((n, m)), rng.standard_normal((p, n)), rng.standard_normal((p, m))


@pytest.mark.parametrize("n", [2, 3, 7, 12])
def test_refined_and_unrefined_responses_match_a_dense_solve(n):
    A, B, C, D = _system(n, 2, 3, seed=n)
    G = DiscreteLTI(A, B, C, D)
    w = np.linspace(0.05, np.pi, 17)
    ref = _dense(A, B, C, D, w)
    scale = np.abs(ref).max()
    # every row of the back substitution couples to the rows below it: dropping one coupling
    # term is an O(1) error, which one refinement step would only shrink, not remove
    assert np.abs(G.frequency_response(w) - ref).max() <= 1e-12 * scale
    assert np.abs(G._frequency_response(w, refine=False) - ref).max() <= 1e-10 * scale


def _triangular_case():
    """Schur data (T upper triangular, Z = I) and a refinement matrix A = T + E with one
    coupling E[0, 1] = 1e5 that T lacks (a Schur form's error, exaggerated), so that the
    refined frequencies visibly differ from the unrefined ones. At w = 0 the second state is
    x2 = 1e302 / (1 - 0.99) = 1e304, finite, but the residual's E x2 = 1e309 overflows there
    and nowhere else (|z - 0.99| > 0.8 at the other frequencies: E x2 < 2e307)."""
    T = np.diag([-0.9, 0.99, 0.2])
    E = np.zeros((3, 3))
    E[0, 1] = 1e5
    B = np.array([[0.0], [1e302], [1.0]])
    C = np.array([[1.0, 0.0, 0.0], [0.0, 0.0, 1.0]])  # row 2 reads the small third state
    return T, T + E, B, C, np.zeros((2, 1))


def test_a_frequency_whose_correction_overflows_keeps_its_unrefined_value():
    T, A, B, C, D = _triangular_case()
    w = np.array([0.0, 1.0, 1.5, 2.0])  # k = 4 differs from n = 3 on purpose
    z = np.exp(1j * w)
    Tc, Bc, Cc = T.astype(complex), B.astype(complex), C.astype(complex)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # the overflow is the point
        plain = _response.schur_response(Tc, Bc, Cc, D, z)
        refined = _response.schur_response(Tc, Bc, Cc, D, z,
                                           refine=(A, np.eye(3, dtype=complex), B, C))
    assert np.isfinite(plain).all() and np.isfinite(refined).all()
    # w = 0: the correction is not finite, the unrefined value is kept exactly
    assert np.array_equal(refined[0], plain[0])
    # the other frequencies are refined: one step solves (zI - A) x = b exactly here
    # (the correction's own error is E applied to the correction, which is zero)
    exact = np.stack([C @ np.linalg.solve(x * np.eye(3) - A, B) + D for x in z[1:]])
    np.testing.assert_allclose(refined[1:], exact, rtol=1e-14)
    assert np.abs(plain[1:, 0] - exact[:, 0]).min() > 1e300  # plain reads x1 = 0 there


def test_long_frequency_grids_are_refined_in_chunks(monkeypatch):
    A, B, C, D = _system(5, 2, 2, seed=3)
    G = DiscreteLTI(A, B, C, D)
    w = np.linspace(0.0, np.pi, 23)
    whole = G.frequency_response(w)
    seen = []
    real = _response._back_substitute

    def spy(T, d, R, z):
        seen.append(z.size)
        return real(T, d, R, z)

    monkeypatch.setattr(_response, "_back_substitute", spy)
    monkeypatch.setattr(_response, "REFINE_CHUNK", 5 * 2 * 4)  # k_max = 4 frequencies
    chunked = G.frequency_response(w)
    assert max(seen) == 4 and sum(seen) == 2 * w.size  # two substitutions per chunk
    np.testing.assert_allclose(chunked, whole, rtol=1e-13, atol=1e-13 * np.abs(whole).max())
    np.testing.assert_allclose(chunked, _dense(A, B, C, D, w), rtol=1e-12,
                               atol=1e-12 * np.abs(whole).max())
