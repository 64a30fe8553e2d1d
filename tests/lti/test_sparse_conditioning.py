"""Sparse balanced truncation near the unit circle: the noise floor and the rounding term
carry the conditioning 1 / (1 - rho^2) of the Stein equations, as on the dense path.

The sparse path used rho = 0 for both (it has no Schur form to read rho from), so at
rho = 0.99999 it accepted orders whose HSVs (< 1e-11 sigma_1) are rounding noise, with
an Enns bound below the error: order 20 of the system below reported 1.7e-6 for an
H-infinity error of 2.1e-6 (the dense path caps the order at its certified HSVs; now
order 17, bound 8.3e-5, error 1.4e-5). rho now comes from the
Ritz values the ADI shifts are computed from (``LowRankFactor.radius_estimate``).
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import scipy.sparse as sp

from lti import DiscreteLTI, balanced_truncation, hankel_singular_values, hinf_norm
from lti.lowrank import lowrank_factor, lowrank_gramian_factors

N = 120


def _near_circle(rho: float) -> sp.csr_matrix:
    """Symmetric tridiagonal A (a 1-D heat equation) with eigenvalues in [-0.2, rho]."""
    L = sp.diags([np.ones(N - 1), -2.0 * np.ones(N), np.ones(N - 1)], [-1, 0, 1])
    lo_ev = 2.0 - 2.0 * np.cos(np.pi / (N + 1))  # eigenvalues of -L: lo_ev .. hi_ev
    hi_ev = 2.0 - 2.0 * np.cos(N * np.pi / (N + 1))
    b = (rho + 0.2) / (hi_ev - lo_ev)
    return sp.csr_matrix((rho + b * lo_ev) * sp.eye(N) + b * L)


def _system(rho: float) -> DiscreteLTI:
    rng = np.random.default_rng(3)
    return DiscreteLTI(_near_circle(rho), rng.standard_normal((N, 1)),
                       rng.standard_normal((1, N)))


def test_radius_estimate_is_the_spectral_radius_near_one():
    G = _system(0.99999)
    rho = np.max(np.abs(np.linalg.eigvalsh(G.A.toarray())))
    Fc, Fo = lowrank_gramian_factors(G.A, G.B, G.C)
    for F in (Fc, Fo):
        assert F.radius_estimate == pytest.approx(rho, abs=1e-9)
    assert lowrank_factor(G.A, G.B).radius_estimate == pytest.approx(rho, abs=1e-9)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # 10 steps with these shifts do not converge
        user = lowrank_factor(G.A, G.B, shifts=[2.0, 3.0], max_iter=10)
    assert user.radius_estimate is None  # no Ritz values computed


@pytest.mark.parametrize("order", [20, 25])
def test_orders_below_the_noise_floor_are_refused_and_the_bound_holds(order):
    G = _system(0.99999)
    Gd = DiscreteLTI(G.A.toarray(), G.B, G.C)
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        res = balanced_truncation(G, order=order)
    assert any("rounding-noise floor" in str(x.message) for x in w)
    assert res.order == res.minimal_order < order
    # the HSVs kept are real values (the dense ones to 1e-4), not rounding noise
    dense = hankel_singular_values(Gd)[: res.order]
    np.testing.assert_allclose(res.hsv[: res.order], dense, rtol=1e-4)
    Gr = res.reduced
    err = hinf_norm(Gd - DiscreteLTI(Gr.A, Gr.B, Gr.C, Gr.D)).value
    assert res.lower_bound <= err <= res.error_bound
