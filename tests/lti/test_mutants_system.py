"""Tests written for the survivors of the mutation runs of lti/_convert.py and
lti/_response.py (benchmarks/results/mutmut_lti_convert.md, mutmut_lti_response.md): each
checks a stated property the earlier tests left open."""

from __future__ import annotations

import sys

import numpy as np
import pytest
import scipy.signal as signal
import scipy.sparse as sp

from lti import DiscreteLTI, as_discrete_system
from lti.exceptions import InvalidArgumentError, MissingDependencyError, NonFiniteError

control = pytest.importorskip("control", reason="python-control is a test extra")


# ------------------------------------------------------------------ lti/_convert.py


@pytest.mark.parametrize("dt", [-1.0, float("nan"), float("inf")])
def test_scipy_sampling_time_error_names_the_argument_and_value(dt):
    # scipy.signal accepts any dt; ours must be True or positive, the error naming `G.dt`
    with pytest.raises(InvalidArgumentError, match=r"^`G\.dt` must be True or a positive") as e:
        as_discrete_system(signal.dlti([1.0], [1.0, -0.5], dt=dt), name="G")
    assert repr(dt) in str(e.value)


@pytest.mark.parametrize("dt", [float("nan"), float("inf")])
def test_control_sampling_time_error_names_the_argument_and_value(dt):
    # python-control refuses dt < 0 itself but keeps nan and inf
    G = control.ss([[0.5]], [[1.0]], [[1.0]], [[0.0]], dt)
    with pytest.raises(InvalidArgumentError, match=r"^`H\.dt` must be True or a positive") as e:
        as_discrete_system(G, name="H")
    assert repr(dt) in str(e.value)
    with pytest.raises(InvalidArgumentError, match=r"^`sys\.dt`"):
        DiscreteLTI.from_control(G)


def test_continuous_scipy_system_error_names_its_class():
    for G in (signal.lti([1.0], [1.0, 1.0]), signal.StateSpace(-1.0, 1.0, 1.0, 0.0)):
        with pytest.raises(InvalidArgumentError, match="must be discrete-time") as e:
            as_discrete_system(G, name="G")
        assert type(G).__name__ in str(e.value)


def test_improper_scipy_transfer_function_error_names_its_class():
    G = signal.dlti([1.0, 0.0, 0.0], [1.0, -0.5], dt=1.0)  # deg num > deg den
    with pytest.raises(InvalidArgumentError, match="no state-space realisation") as e:
        as_discrete_system(G, name="G")
    assert str(e.value).startswith(f"`G` ({type(G).__name__}) ")
    assert "Improper" in str(e.value)  # scipy's reason is kept


def test_missing_python_control_says_how_to_install_it(monkeypatch):
    G = DiscreteLTI([[0.5]], [[1.0]], [[1.0]])
    monkeypatch.setitem(sys.modules, "control", None)  # `import control` raises ImportError
    with pytest.raises(MissingDependencyError, match=r'pip install "lti-adapters\[control\]"'):
        G.to_control()
    assert np.array_equal(G.A, [[0.5]])


# ----------------------------------------------------------------- lti/_response.py


def _overflow(G, u, x0=None) -> str:
    with pytest.raises(NonFiniteError) as e:
        G.simulate(u, x0)
    return str(e.value)


def test_overflow_of_the_last_state_only_is_reported_as_a_state():
    # x_T = 2^1024 overflows; every output uses x_0 .. x_{T-1} and stays finite
    G = DiscreteLTI([[2.0]], [[1.0]], [[1.0]])
    msg = _overflow(G, np.zeros((1024, 1)), [1.0])
    assert msg.startswith("the state x_t overflowed float64 at step t = 1024 of 1024 "
                          "(spectral radius of `A` 2)")


def test_output_overflowing_before_the_state_is_reported_as_the_output():
    # y_3 = D u_3 = inf first (two outputs, T = 6), x_5 = 1e10 x_4 = inf later
    G = DiscreteLTI([[1e10]], [[1.0]], [[0.0], [0.0]], [[1e10], [0.0]])
    u = np.zeros((6, 1))
    u[3] = 1e300
    msg = _overflow(G, u)
    assert msg.startswith("the output y_t overflowed float64 at step t = 3 of 6 ")
    assert "simulate fewer steps (or rescale x0, u, C, D)" in msg


def test_overflow_message_of_a_system_without_states_or_with_sparse_a_has_no_radius():
    G0 = DiscreteLTI(np.zeros((0, 0)), np.zeros((0, 1)), np.zeros((1, 0)), [[1e10]])
    assert _overflow(G0, np.full((1, 1), 1e300)) == (
        "the output y_t overflowed float64 at step t = 0 of 1; simulate fewer steps (or "
        "rescale x0, u, C, D) to keep it finite")
    # sparse A: no spectral radius to quote (it needs dense algebra), still the typed error
    Gs = DiscreteLTI(sp.csr_matrix(np.array([[2.0]])), [[1.0]], [[1.0]])
    msg = _overflow(Gs, np.zeros((1100, 1)), [1.0])
    assert msg.startswith("the state x_t overflowed float64 at step t = 1024 of 1100; ")


def test_markov_overflow_of_a_mimo_system_names_the_first_index():
    # H[i] = C A^i B with A = 1e200: H[2] overflows; p = m = 2
    G = DiscreteLTI([[1e200]], [[1.0, 2.0]], [[1.0], [3.0]])
    with pytest.raises(NonFiniteError) as e:
        G.markov(4)
    assert str(e.value).startswith("C A^i B overflowed float64 at i = 2 of k = 4 "
                                   "(spectral radius of `A` 1e+200)")
    assert "rescale B, C" in str(e.value)


def test_a_sampling_time_beyond_the_float_range_is_refused_typed():
    with pytest.raises(InvalidArgumentError, match=r"^`dt` must be True or a positive number; "
                                                   r"got inf$"):
        DiscreteLTI([[0.5]], [[1.0]], [[1.0]], dt=10**400)
