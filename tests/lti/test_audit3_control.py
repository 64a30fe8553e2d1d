"""The two convention rows of docs/comparison.rst added by the third audit, checked against
python-control 0.10.2 and scipy: simulation overflow and Gramian factors."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import lti

control = pytest.importorskip("control", reason="the rows compare with python-control")


def _system(dt=0.1):
    A = np.array([[0.5, 0.2], [0.0, -0.3]])
    return lti.DiscreteLTI(A, [[1.0], [2.0]], [[1.0, -1.0]], dt=dt)


def test_gramian_factors_vs_control_gram_cf_of():
    G = _system()
    S = G.to_control()
    Lc, Lo = lti.gramian_factors(S)
    Rc, Ro = control.gram(S, "cf"), control.gram(S, "of")
    assert np.allclose(Rc, np.triu(Rc)) and np.allclose(Ro, np.triu(Ro))  # upper triangular
    np.testing.assert_allclose(Rc.T @ Rc, Lc @ Lc.T, rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(Ro.T @ Ro, Lo @ Lo.T, rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(control.gram(S, "c"), lti.controllability_gramian(S),
                               rtol=1e-12, atol=1e-14)


def test_simulation_overflow_lti_raises_where_control_returns_inf():
    G = lti.DiscreteLTI([[2.0]], [[1.0]], [[1.0]], dt=1.0)
    u = np.ones((1100, 1))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        y = control.forced_response(G.to_control(), T=np.arange(1100.0), U=u.T).outputs
    assert not np.isfinite(y).all()  # control: inf / nan, with RuntimeWarnings
    with pytest.raises(lti.NonFiniteError, match="overflowed"):
        G.simulate(u)
    np.testing.assert_allclose(G.simulate(u[:500])[:, 0], y[:500], rtol=1e-12)
