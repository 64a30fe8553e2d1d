"""lti.norms at extreme data scales: the H2 norm of (A, c B, C, c D) is c times that of
(A, B, C, D) for every c where it is representable (the squares of the entries are not)."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import scipy.sparse as sp

from lti import DiscreteLTI, UnstableSystemError, h2_norm
from lti.norms import _require_stable

SCALES = (1e-300, 1e-250, 1e-200, 1e-170, 1e-100, 1e-10, 3.0, 1e10, 1e100, 1e160, 1e200, 1e250,
          1e300)


def _system(m=2, p=3, feedthrough=True):
    rng = np.random.default_rng(7)
    n = 5
    A = rng.standard_normal((n, n))
    A *= 0.8 / np.max(np.abs(np.linalg.eigvals(A)))
    D = rng.standard_normal((p, m)) if feedthrough else np.zeros((p, m))
    return DiscreteLTI(A, rng.standard_normal((n, m)), rng.standard_normal((p, n)), D, 0.1)


@pytest.mark.parametrize("feedthrough", [True, False])
def test_h2_norm_scales_with_b_and_d(feedthrough):
    G = _system(feedthrough=feedthrough)
    ref = h2_norm(G)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no overflow / underflow warnings either
        for c in SCALES:
            Gc = DiscreteLTI(G.A, c * G.B, G.C, c * G.D, G.dt)
            assert h2_norm(Gc) == pytest.approx(c * ref, rel=1e-12, abs=0.0), c


def test_h2_norm_scales_with_b_and_c_separately():
    # B large and C small (and the reverse): the product is O(1), no intermediate overflow
    G = _system(feedthrough=False)
    ref = h2_norm(G)
    for cb, cc in ((1e300, 1e-300), (1e-300, 1e300), (1e200, 1e-150), (1e-160, 1e-140)):
        Gc = DiscreteLTI(G.A, cb * G.B, cc * G.C, G.D, G.dt)
        assert h2_norm(Gc) == pytest.approx(cb * cc * ref, rel=1e-12, abs=0.0), (cb, cc)


def test_h2_norm_d_only_and_mixed_magnitudes():
    # D alone (B = 0) at the scales; and D tiny beside a large C Lc term (and the reverse)
    G = _system()
    for c in SCALES:
        G0 = DiscreteLTI(G.A, np.zeros_like(G.B), G.C, c * G.D)
        assert h2_norm(G0) == pytest.approx(c * np.linalg.norm(G.D), rel=1e-13, abs=0.0), c
    energy = h2_norm(DiscreteLTI(G.A, G.B, G.C))
    d = np.linalg.norm(G.D)
    assert h2_norm(DiscreteLTI(G.A, 1e200 * G.B, G.C, G.D)) == pytest.approx(1e200 * energy,
                                                                              rel=1e-12, abs=0.0)
    small = h2_norm(DiscreteLTI(G.A, 1e-200 * G.B, G.C, G.D))
    assert small == pytest.approx(d, rel=1e-12, abs=0.0)


def test_h2_norm_sparse_scales():
    G = _system(m=1, p=1, feedthrough=False)
    As = sp.csr_matrix(np.diag([0.5, -0.3, 0.2, 0.7, -0.6]))
    ref = h2_norm(DiscreteLTI(As, G.B, G.C))  # the low-rank ADI value (residual ~1e-10)
    assert ref == pytest.approx(h2_norm(DiscreteLTI(As.toarray(), G.B, G.C)), rel=1e-8, abs=0.0)
    for c in (1e-200, 1e-170, 1e160, 1e200):
        value = h2_norm(DiscreteLTI(As, c * G.B, G.C))
        assert value == pytest.approx(c * ref, rel=1e-12, abs=0.0), c


def test_stability_check_without_overflow_warning():
    # ||A||_F of a matrix with a 1e160 entry: np.linalg.norm overflowed (RuntimeWarning, inf
    # margin); no warning either way now. The pole 0.5 of this triangular block is exact and
    # the same system in balanced units, [[0.5, 0.71], [0, 0.5]], separates it from the
    # circle (lti._validation.balanced_margin: it was refused as within the margin before);
    # a pole within rounding of the circle is refused at that scaling as well
    G = DiscreteLTI([[0.5, 1e160], [0.0, 0.5]], [[0.0], [1.0]], [[1.0, 0.0]])
    H = DiscreteLTI([[1.0 - 2.0**-52, 1e160], [0.0, 0.5]], [[0.0], [1.0]], [[1.0, 0.0]])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        _require_stable(G, "H2 norm")
        with pytest.raises(UnstableSystemError, match="rounding margin"):
            _require_stable(H, "H2 norm")


@pytest.mark.parametrize("zero", ["B", "C"])
def test_h2_norm_zero_b_or_c_still_checks_stability(zero):
    # sparse A: the low-rank solver's Ritz-value check is the stability test, so B = 0 or
    # C = 0 must not short-cut it (dense A: _require_stable); B = 0 -> ||D||_F when stable
    B = np.zeros((2, 1)) if zero == "B" else np.ones((2, 1))
    C = np.zeros((1, 2)) if zero == "C" else np.ones((1, 2))
    for A in (np.diag([1.5, 0.2]), sp.csr_matrix(np.diag([1.5, 0.2]))):
        with pytest.raises(UnstableSystemError):
            h2_norm(DiscreteLTI(A, B, C))
    for A in (np.diag([0.5, 0.2]), sp.csr_matrix(np.diag([0.5, 0.2]))):
        assert h2_norm(DiscreteLTI(A, B, C, [[-2.0]])) == 2.0


def test_h2_norm_prescaling_where_the_factor_is_not_representable():
    # B * 1e308 at a pole 0.99: the Gramian factor itself overflows (lyapunov_factor raised a
    # bare ValueError without the power-of-two prescaling) while ||G||_2 = 1e8 * ||G_1||_2 is
    # representable; B * 1e-308 with C * 1e-15: C Lc is subnormal (7 % off without it).
    # Closed form for diagonal A: ||G||_2^2 = sum_ij c_i b_i c_j b_j / (1 - a_i a_j).
    a, b, c = np.array([0.99, 0.5]), np.array([1.0, 0.5]), np.array([1.0, -2.0])
    exact = np.sqrt(np.sum(np.outer(c * b, c * b) / (1.0 - np.outer(a, a))))
    for cb, cc in ((1e308, 1e-300), (1e-308, 1e-15)):
        G = DiscreteLTI(np.diag(a), cb * b[:, None], cc * c[None, :])
        assert h2_norm(G) == pytest.approx(cb * cc * exact, rel=1e-12, abs=0.0), (cb, cc)
