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


def _lightly_damped(n: int = 120) -> DiscreteLTI:
    """60 rotations with moduli 1 - 10^[-4, -0.3] at angles in (0.1, 3): a spectrum that
    few ADI shifts cannot cover (the Cayley images lie along the imaginary axis)."""
    rng = np.random.default_rng(3)
    th = rng.uniform(0.1, 3.0, n // 2)
    r = 1.0 - np.geomspace(1e-4, 0.5, n // 2)
    blocks = [rr * np.array([[np.cos(t), np.sin(t)], [-np.sin(t), np.cos(t)]])
              for rr, t in zip(r, th, strict=True)]
    return DiscreteLTI(sp.csr_matrix(sp.block_diag(blocks)), rng.standard_normal((n, 1)),
                       rng.standard_normal((1, n)))


def test_unstable_reduced_model_from_inaccurate_factors_gets_no_finite_bound(monkeypatch):
    """Factors far from converged (20 ADI steps with two real shifts, far from this
    complex spectrum) can give a reduced model with a pole outside the unit circle
    (spectral radius 1.068 at order 10). G - G_r is then unstable: error_bound was a
    finite number; it is inf, with a warning."""
    import lti.balanced as lb

    G = _lightly_damped()
    monkeypatch.setattr(lb, "_sparse_factors", lambda S: lowrank_gramian_factors(
        S.A, S.B, S.C, shifts=[1.01, 1.5], max_iter=20))
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        res = balanced_truncation(G, order=10)
    assert res.reduced.spectral_radius() >= 1.0
    assert any("not Schur-stable" in str(x.message) for x in w)
    assert res.error_bound == np.inf and res.error_bounds[res.order] == np.inf
    assert not res.error_bounds.flags.writeable
    assert res.lower_bound <= res.hsv[10]  # the lower bound stays (any order-10 model)


def test_finite_horizon_gramian_of_a_sparse_system_points_to_what_works():
    """controllability_gramian(G_sparse, horizon=T) said 'pass factor=True', which then
    failed with 'pass horizon=None': the advice now names both, and the empirical Gramians
    (which give the finite-horizon Gramian by sparse simulation)."""
    from lti import controllability_gramian, empirical_gramians
    from lti.exceptions import SparseNotSupportedError

    G = _system(0.9)
    for factor in (False, True):
        with pytest.raises(SparseNotSupportedError,
                           match=r"horizon=None, factor=True.*empirical_gramians"):
            controllability_gramian(G, horizon=5, factor=factor)
    Z = controllability_gramian(G, factor=True)  # following the advice works
    assert Z.shape[0] == N and Z.shape[1] < N
    A = G.A.toarray()
    P5, Ak = np.zeros((N, N)), np.eye(N)
    for _ in range(5):
        P5 += Ak @ G.B @ G.B.T @ Ak.T
        Ak = A @ Ak
    W = empirical_gramians(G, horizon=5, which=("controllability",)).controllability
    np.testing.assert_allclose(W, P5, rtol=1e-12, atol=1e-12 * np.abs(P5).max())
