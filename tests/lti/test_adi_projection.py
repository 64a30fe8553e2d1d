"""Low-rank ADI on lightly damped complex spectra: stalled cycles get projection shifts.

For a spectrum that is not real, the automatic shifts are Penzl's choice among a few
Ritz values. Poles near the unit circle at many angles map (Cayley) to a band along the
imaginary axis, where a shift helps only the poles next to it: the iteration stalled.
A 9-state normal system (drawn by lti.testing.strategies, near_unit_circle) stopped
after 500 steps at residuals 0.015 and 0.28 (Gramian error 0.45 %), with Ritz values
that missed one pole pair. A cycle that leaves more than half of the residual now
replaces the shifts by Ritz values of A on the span of the last columns (projection
shifts): 40 + 18 steps to 1e-45. Real spectra (the heat equation) never use them.
"""

from __future__ import annotations

import warnings

import numpy as np
import scipy.linalg as sla
import scipy.sparse as sp

import lti.lowrank as lowrank
from lti.lowrank import lowrank_gramian_factors
from lti.testing.systems import heat_2d


def _nine_states():
    lam = np.array([-0.357843 + 0.931676j, -0.33077 + 0.9435j, 0.148404 + 0.982203j,
                    0.328402 + 0.942827j])
    blocks = [np.array([[x.real, x.imag], [-x.imag, x.real]]) for x in lam]
    rng = np.random.default_rng(0)
    Q = np.linalg.qr(rng.standard_normal((9, 9)))[0]
    A = Q @ sla.block_diag(*blocks, [[0.999447]]) @ Q.T
    return A, rng.standard_normal((9, 1)), rng.standard_normal((1, 9))


def test_stalled_cycles_get_projection_shifts_and_converge():
    A, B, C = _nine_states()
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no "stopped after 500 steps" warning
        Fc, Fo = lowrank_gramian_factors(sp.csr_matrix(A), B, C)
    assert Fc.converged and Fo.converged
    assert Fc.iterations + Fo.iterations < 100
    P = sla.solve_discrete_lyapunov(A, B @ B.T)
    Q = sla.solve_discrete_lyapunov(A.T, C.T @ C)
    assert np.linalg.norm(Fc.Z @ Fc.Z.T - P) <= 1e-10 * np.linalg.norm(P)
    assert np.linalg.norm(Fo.Z @ Fo.Z.T - Q) <= 1e-10 * np.linalg.norm(Q)
    assert len(Fc.shifts) > 11  # the 11 automatic ones and the projection shifts


def test_many_lightly_damped_pairs_get_much_closer():
    """60 rotations, moduli 1 - 10^[-4, -0.3]: the residual after 500 steps was 0.37."""
    rng = np.random.default_rng(3)
    n = 120
    th = rng.uniform(0.1, 3.0, n // 2)
    r = 1.0 - np.geomspace(1e-4, 0.5, n // 2)
    A = sp.csr_matrix(sp.block_diag([rr * np.array([[np.cos(t), np.sin(t)],
                                                    [-np.sin(t), np.cos(t)]])
                                     for rr, t in zip(r, th, strict=True)]))
    B = rng.standard_normal((n, 1))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # may stop just short of tol = 1e-10
        F = lowrank.lowrank_factor(A, B)
    assert F.adi_residual < 1e-6


def test_real_spectra_never_use_projection_shifts(monkeypatch):
    A, B, C = heat_2d(15)
    ref = lowrank_gramian_factors(A, B, C)
    monkeypatch.setattr(lowrank, "_STALL", np.inf)  # no cycle is ever stalled
    off = lowrank_gramian_factors(A, B, C)
    for a, b in zip(ref, off, strict=True):
        np.testing.assert_array_equal(a.Z, b.Z)
        np.testing.assert_array_equal(a.shifts, b.shifts)
        assert np.all(a.shifts.imag == 0)


def test_numerically_nilpotent_dense_pattern_gets_smith_steps():
    """A = Q N Q^T (lti.testing.strategies, fir family): a dense pattern, so not detected
    as nilpotent, with Ritz values ~1e-8. They became shifts mu ~ 1.6e8, and the ADI
    formulas lose |mu| eps: the factors' residuals were 5e-7 and 7e-7 while the ADI
    residual read 1e-10, and the 'lower bound' HSVs exceeded the dense ones by 6e-7
    relative. Shifts with |mu| > 1e4 are Smith steps now."""
    from lti import DiscreteLTI, hankel_singular_values

    A = np.array([[0.7019266410940084, -0.7925409109151478],
                  [0.6216726514579474, -0.7019266410940083]])
    B = np.array([[0.1257302210933933], [-0.1321048632913019]])
    C = np.array([[0.6404226504432821, 0.10490011715303971]])
    Fc, Fo = lowrank_gramian_factors(sp.csr_matrix(A), B, C)
    assert max(Fc.rel_residual, Fo.rel_residual) < 1e-10
    assert np.any(np.isinf(Fc.shifts))  # the Smith step
    hs = hankel_singular_values(DiscreteLTI(sp.csr_matrix(A), B, C))
    hd = hankel_singular_values(DiscreteLTI(A, B, C))
    np.testing.assert_allclose(hs, hd, rtol=1e-10)


def test_log_spaced_shift_at_p_minus_one_is_a_smith_step():
    """n = 1, a = -0.892: the real branch's shifts are log-spaced on [|f(1/a)|, |f(a)|],
    whose product is 1, so the middle one was p = -1 up to rounding, mu = 1.8e16: the
    factor's residual was 0.25 while the ADI residual read 1e-10, the sparse HSV 25 % too
    large (lti.testing.strategies, diagonal family, 2 inputs, 3 outputs)."""
    from lti import DiscreteLTI, hankel_singular_values

    A = np.array([[-0.8924678822839213]])
    B = np.array([[0.3826778866523825, -0.15702841896628855]])
    C = np.array([[-1.2993161348233924], [0.9312383073910108], [0.23518692061331095]])
    exact = np.sqrt((B @ B.T)[0, 0] * (C.T @ C)[0, 0]) / (1.0 - A[0, 0] ** 2)
    Fc, Fo = lowrank_gramian_factors(sp.csr_matrix(A), B, C)
    assert max(Fc.rel_residual, Fo.rel_residual) < 1e-10
    assert np.all(np.abs(Fc.shifts[np.isfinite(Fc.shifts)]) < 1e4)
    hs = hankel_singular_values(DiscreteLTI(sp.csr_matrix(A), B, C))
    np.testing.assert_allclose(hs, [exact], rtol=1e-10)
