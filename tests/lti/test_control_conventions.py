"""lti <-> python-control conventions (issue 16 item 7): frequency units of hinf_norm,
array layouts of frequency_response and simulate, checked against python-control."""

from __future__ import annotations

import numpy as np
import pytest

from lti import DiscreteLTI, balanced_truncation, hinf_norm

control = pytest.importorskip("control", reason="extra 'control' not installed")


def _system(dt):
    """A resonance at 0.7 rad/sample (poles 0.97 e^{+-0.7j}) in a random stable system,
    so that the peak frequency is well defined and away from 0 and pi."""
    rng = np.random.default_rng(7)
    A = rng.standard_normal((6, 6))
    A *= 0.6 / np.max(np.abs(np.linalg.eigvals(A)))
    c, s = 0.97 * np.cos(0.7), 0.97 * np.sin(0.7)
    A[:2, :2] = [[c, s], [-s, c]]
    A[2:, :2] = 0.0  # block triangular: the pair stays an eigenvalue pair
    return DiscreteLTI(A, rng.standard_normal((6, 2)), rng.standard_normal((3, 6)),
                       rng.standard_normal((3, 2)), dt)


@pytest.mark.parametrize("dt", [0.1, 2.5, True])
def test_hinf_norm_omega_is_rad_per_s_for_control_systems(dt):
    G = _system(dt)
    sys = G.to_control()
    gpeak, fpeak = control.linfnorm(sys)
    ours_lti = hinf_norm(G)
    ours_ctl = hinf_norm(sys)
    scale = 1.0 if dt is True else dt
    assert ours_ctl.value == pytest.approx(gpeak, rel=1e-8)
    assert ours_lti.value == pytest.approx(gpeak, rel=1e-8)
    assert ours_ctl.omega == pytest.approx(fpeak, rel=1e-6, abs=1e-9)  # rad/s, as control
    assert ours_lti.omega == pytest.approx(fpeak * scale, rel=1e-6, abs=1e-9)  # rad/sample
    assert ours_lti.omega == pytest.approx(0.7, abs=0.05)  # rad/sample, whatever dt
    # both are the peak of the same response
    z = np.exp(1j * ours_ctl.omega * scale)
    assert np.linalg.norm(sys(z), 2) == pytest.approx(ours_ctl.value, rel=1e-8)


def test_frequency_response_layout_and_units_against_control():
    dt = 0.05
    G = _system(dt)
    w = np.array([0.3, 1.0, 7.0, 40.0])  # rad/s, below the Nyquist frequency pi/dt
    ref = control.frequency_response(G.to_control(), w, squeeze=False).complex  # (p, m, k)
    ours = G.frequency_response(w * dt)  # rad/sample in, (k, p, m) out
    assert ours.shape == (w.size, G.p, G.m) and ref.shape == (G.p, G.m, w.size)
    np.testing.assert_allclose(np.moveaxis(ours, 0, -1), ref, rtol=1e-12, atol=1e-12)


def test_simulate_layout_against_control_forced_response():
    dt = 0.2
    G = _system(dt)
    rng = np.random.default_rng(1)
    U = rng.standard_normal((G.m, 40))  # python-control layout: (m, T)
    x0 = rng.standard_normal(G.n)
    ref = control.forced_response(G.to_control(), T=np.arange(40) * dt, U=U, X0=x0)
    y, X = G.simulate(U.T, x0, return_states=True)  # ours: (T, m) -> (T, p), (T + 1, n)
    np.testing.assert_allclose(y.T, ref.outputs, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(X[:-1].T, ref.states, rtol=1e-12, atol=1e-12)


def test_control_system_in_control_system_out_with_its_dt():
    sys = _system(0.1).to_control()
    res = balanced_truncation(sys, order=3)
    assert isinstance(res.reduced, control.StateSpace) and res.reduced.dt == 0.1


# ------------------------------------------- audit: SISO squeeze, impulse, dt, HNA


def test_siso_layouts_against_control_default_squeeze():
    """python-control squeezes SISO results by default ((k,) and (T,)); lti never does:
    ``G.frequency_response(theta)[:, 0, 0]`` and ``G.simulate(u)[:, 0]``."""
    G = DiscreteLTI(np.diag([0.5, -0.3, 0.8]), [[1.0], [2.0], [-1.0]], [[0.3, 1.0, 2.0]],
                    [[0.4]], 0.1)
    sys = G.to_control()
    w = np.array([0.2, 3.0, 20.0])  # rad/s
    ref = control.frequency_response(sys, w).complex
    assert ref.shape == (3,)
    np.testing.assert_allclose(G.frequency_response(w * 0.1)[:, 0, 0], ref, rtol=1e-13, atol=0)
    u = np.random.default_rng(2).standard_normal(25)
    out = control.forced_response(sys, T=np.arange(25) * 0.1, U=u).outputs
    assert out.shape == (25,)
    np.testing.assert_allclose(G.simulate(u)[:, 0], out, rtol=1e-12, atol=1e-13)


def test_markov_against_control_impulse_response():
    """control.impulse_response of a discrete system applies a pulse of unit area
    (u_0 = 1/dt): outputs (p, m, T) = [D, C B, C A B, ...] / dt; lti's markov(k) is
    (k, p, m) = [C B, C A B, ...] without D."""
    dt = 0.1
    G = _system(dt)
    r = control.impulse_response(G.to_control(), T=np.arange(7) * dt)
    assert r.outputs.shape == (G.p, G.m, 7)
    np.testing.assert_allclose(r.outputs[..., 0] * dt, G.D, rtol=1e-12, atol=1e-13)
    np.testing.assert_allclose(np.moveaxis(r.outputs[..., 1:], -1, 0) * dt, G.markov(6),
                               rtol=1e-12, atol=1e-13)


def test_norms_of_a_control_system_match_control_norm():
    G = _system(0.1)
    sys = G.to_control()
    from lti import h2_norm

    assert h2_norm(sys) == pytest.approx(control.norm(sys, p=2), rel=1e-10, abs=0)
    assert hinf_norm(sys).value == pytest.approx(control.norm(sys, p="inf"), rel=1e-8, abs=0)


def test_dt_none_is_read_as_discrete():
    """python-control's dt=None (unspecified timebase) is read as discrete, dt=True (lti
    is discrete-time only); control's own norms treat such a system as continuous, so the
    two libraries differ there: documented, not matched."""
    G = _system(True)
    sys = control.ss(G.A, G.B, G.C, G.D, None)
    assert DiscreteLTI.from_control(sys).dt is True
    assert hinf_norm(sys) == hinf_norm(G.to_control())
    assert balanced_truncation(sys, order=2).reduced.dt is True


def test_hankel_norm_approximation_control_in_control_out():
    from lti import hankel_norm_approximation

    G = _system(0.25)
    res = hankel_norm_approximation(G.to_control(), order=2)
    assert isinstance(res.reduced, control.StateSpace) and res.reduced.dt == 0.25
    tf = control.ss2tf(G.to_control()[0, 0])
    res_tf = hankel_norm_approximation(tf, order=1)
    assert isinstance(res_tf.reduced, control.StateSpace) and res_tf.reduced.dt == 0.25
    assert res_tf.reduced.nstates == 1


def test_weighted_balanced_truncation_control_in_control_out():
    """Was: InvalidArgumentError '`sys` must be a DiscreteLTI; got StateSpace', while
    balanced_truncation and hankel_norm_approximation take and return control systems."""
    from lti import weighted_balanced_truncation

    G = _system(0.1)
    W = np.diag([1.0, 0.25])
    ref = weighted_balanced_truncation(G, input_covariance=W, order=3)
    res = weighted_balanced_truncation(G.to_control(), input_covariance=W, order=3)
    assert isinstance(res.reduced, control.StateSpace) and res.reduced.dt == 0.1
    np.testing.assert_array_equal(res.reduced.A, ref.reduced.A)
    assert res.error_bound == ref.error_bound


def test_empirical_gramians_of_a_control_system():
    """A control.StateSpace is callable (it evaluates G(s)), so it was taken for a step
    function: "`n` and `m` are required when `system` is a step function"."""
    from lti import empirical_gramians

    G = DiscreteLTI(np.diag([0.9, 0.5, -0.3]), np.ones((3, 2)), np.arange(6.0).reshape(2, 3),
                    dt=0.1)
    ref = empirical_gramians(G, horizon=50)
    res = empirical_gramians(G.to_control(), horizon=50)
    np.testing.assert_array_equal(res.controllability, ref.controllability)
    np.testing.assert_array_equal(res.observability, ref.observability)
