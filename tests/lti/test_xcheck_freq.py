"""frequency_response exactly at a pole on the unit circle: ``inf + nan j`` like
python-control (``sys(z)``, ``frequency_response``) and ``scipy.signal.dfreqresp``, not
``nan + nan j``; found by the cross-check campaign (benchmarks/xcheck_lti.py)."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

from lti import DiscreteLTI

SYSTEMS = {
    "diagonal": (np.diag([1.0, 0.5]), np.ones((2, 1)), np.ones((1, 2))),
    "triangular": (np.array([[1.0, 1.0], [0.0, 0.5]]), np.ones((2, 1)), np.ones((1, 2))),
    "mimo": (np.array([[1.0, 0.3, 0.0], [0.0, 0.2, 1.0], [0.0, 0.0, 0.7]]),
                   np.arange(6.0).reshape(3, 2) + 1, np.arange(9.0).reshape(3, 3) - 4),
}


@pytest.mark.parametrize("name", list(SYSTEMS))
def test_pole_on_the_circle_is_inf_like_control(name):
    control = pytest.importorskip("control", reason="python-control is not installed")
    A, B, C = SYSTEMS[name]
    D = np.zeros((C.shape[0], B.shape[1]))
    G = DiscreteLTI(A, B, C, D)
    w = np.array([0.0, 1.0, np.pi, 2.5])  # the pole is at z = 1 (w = 0)
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)  # no divide-by-zero warnings either
        ours = G.frequency_response(w)
    ref = np.moveaxis(np.asarray(control.ss(A, B, C, D, True)(np.exp(1j * w), squeeze=False)),
                      -1, 0)
    at_pole = ~np.isfinite(ref).all(axis=(1, 2))
    assert at_pole.sum() == 1
    assert np.isinf(ours[at_pole].real).all() and np.isnan(ours[at_pole].imag).all()
    assert np.array_equal(np.isinf(ours), np.isinf(ref))
    assert np.allclose(ours[~at_pole], ref[~at_pole], rtol=1e-13, atol=0)


def test_pole_frequency_matches_scipy_dfreqresp():
    import scipy.signal as ss

    A, B, C = SYSTEMS["diagonal"]
    D = np.zeros((1, 1))
    w = np.array([0.0, 0.7])
    _, ref = ss.dfreqresp((A, B, C, D, 1.0), w)
    ours = DiscreteLTI(A, B, C, D).frequency_response(w)[:, 0, 0]
    assert np.isinf(ref[0].real) and np.isinf(ours[0].real)
    assert ours[1] == pytest.approx(ref[1], rel=1e-13)
