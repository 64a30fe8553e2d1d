"""Third audit of empirical_gramians: a step function that writes into its arguments is
refused (it silently gave a wrong Gramian); a well-behaved one still gives the exact one."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.linalg as sla

from lti import InvalidArgumentError, empirical_gramians

A = np.array([[0.5, 0.2], [0.0, -0.4]])
B = np.array([[1.0], [0.5]])
C = np.array([[1.0, -1.0]])


def _bad_x(X, U):
    Y = X @ C.T
    X *= 0.5  # in place: the caller's trajectory array changes under it
    X += U @ B.T
    return X, Y


def _bad_u(X, U):
    Xn = X @ A.T + U @ B.T
    U[:] = 0.0  # in place: the held operating-point input is lost
    return Xn, X @ C.T


def _view_after_write(X, U):
    X.__imul__(0.5)  # lti-audit2's probe: Y a view of the updated X
    return X, X[:, :1]


@pytest.mark.parametrize("step", [_bad_x, _bad_u, _view_after_write])
def test_a_step_function_that_modifies_its_arguments_is_refused(step):
    with pytest.raises(InvalidArgumentError, match=r"read-only.*must not|passed read-only"):
        empirical_gramians(step, n=2, m=1, horizon=20)


def test_a_step_function_with_its_own_output_buffer_still_works():
    buf = np.empty((7, 2))  # K = 1 + 2 + 4 trajectories; reused every call (allowed)

    def step(X, U):
        Y = X @ C.T
        np.matmul(X, A.T, out=buf)
        np.add(buf, U @ B.T, out=buf)
        return buf, Y

    E = empirical_gramians(step, n=2, m=1, horizon=200)
    P = sla.solve_discrete_lyapunov(A, B @ B.T)
    Q = sla.solve_discrete_lyapunov(A.T, C.T @ C)
    assert np.allclose(E.controllability, P, rtol=1e-12, atol=0)
    assert np.allclose(E.observability, Q, rtol=1e-12, atol=0)


def test_a_tuple_or_scipy_system_goes_in_like_everywhere_else():
    import scipy.signal as ss

    from lti import DiscreteLTI

    ref = empirical_gramians(DiscreteLTI(A, B, C), horizon=40)
    for sys in [(A, B, C), (A, B, C, np.zeros((1, 1))), ss.dlti(A, B, C, np.zeros((1, 1)))]:
        E = empirical_gramians(sys, horizon=40)
        np.testing.assert_array_equal(E.controllability, ref.controllability)
        np.testing.assert_array_equal(E.observability, ref.observability)
    msg = r"DiscreteLTI or a callable.*tuple \(A, B, C\[, D\]\)\); got list"
    with pytest.raises(InvalidArgumentError, match=msg):
        empirical_gramians([A, B, C], horizon=5)  # a list is not a system
