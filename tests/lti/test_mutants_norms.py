"""Tests that kill the surviving mutants of ``lti/norms.py`` (issue 14, mutation testing).

Each test is named after what the mutant it is for gets wrong; the mutants are listed in
``benchmarks/results/mutmut_norms.md`` (written by ``benchmarks/mutation_report.py`` from
mutmut's own results). References are closed forms, independent of the state-space code:
one-state systems, FIR taps (their frequency response is a finite sum), and exact Gramians
of diagonal systems.
"""

from __future__ import annotations

import numpy as np
import pytest
from scipy.optimize import minimize_scalar

from lti import DiscreteLTI, h2_norm, hankel_norm, hinf_norm

GRID = np.linspace(0.0, np.pi, 65)  # hinf_norm's coarse first-stage grid
_NFFT = 2**18


def _fir(taps: np.ndarray) -> DiscreteLTI:
    """Shift-register realisation of sum_k taps[k] z^-k (poles all at 0)."""
    n = taps.size - 1
    B = np.zeros((n, 1))
    B[0, 0] = 1.0
    return DiscreteLTI(np.diag(np.ones(n - 1), -1), B, taps[1:][None, :], [[taps[0]]])


def _fir_peak(taps: np.ndarray) -> tuple[float, float]:
    """Exact H-infinity norm of an FIR filter from its taps: FFT grid, then Brent at the best
    few local maxima of |sum_k taps[k] e^{-j k theta}|."""
    k = np.arange(taps.size)

    def gain(t):
        return float(np.abs(np.exp(-1j * k * t) @ taps))

    g = np.abs(np.fft.rfft(taps, _NFFT))
    theta = 2 * np.pi * np.arange(g.size) / _NFFT
    best_v, best_t = float(np.max(g)), float(theta[int(np.argmax(g))])
    idx = [i for i in range(1, g.size - 1) if g[i] >= g[i - 1] and g[i] >= g[i + 1]]
    for i in sorted(idx, key=lambda i: -g[i])[:5]:
        res = minimize_scalar(lambda t: -gain(t), bounds=(theta[i - 1], theta[i + 1]),
                              method="bounded", options={"xatol": 1e-15})
        if -res.fun > best_v:
            best_v, best_t = float(-res.fun), float(res.x)
    return best_v, best_t


# ------------------------------------------------------------------------ hinf_norm


def _spike_on_a_large_feedthrough(d: float):
    """A 160-tap FIR spike (taps cos(th0 k), main lobe narrower than the grid spacing) centred
    midway between two grid points, on top of a feedthrough d: |G| is about d + 80 at the
    spike, much less on the grid, and |G - d| <= 80 everywhere."""
    th0 = 0.5 * (GRID[37] + GRID[38])
    taps = np.cos(th0 * np.arange(160))
    taps[0] += d
    return taps, th0


def test_level_set_system_keeps_the_feedthrough():
    """The level sets are those of G / gamma, D / gamma included. Without D (the sets of
    (G - D) / gamma) no level above the first-stage bound is ever crossed, since
    |G - D| <= 80 < d, and the first-stage value is returned (0.67 of the norm)."""
    taps, th0 = _spike_on_a_large_feedthrough(150.0)
    G = _fir(taps)
    exact, t_exact = _fir_peak(taps)
    k = np.arange(taps.size)
    grid_max = float(np.max(np.abs(np.exp(-1j * np.outer(GRID, k)) @ taps)))
    assert grid_max < 0.75 * exact  # the first stage alone is far off
    value, omega = hinf_norm(G)
    assert abs(value - exact) <= 1e-9 * exact, (value, exact)
    assert abs(omega - t_exact) <= 1e-5 and abs(omega - th0) < 0.02


def test_complex_cayley_centre():
    """Poles within 1e-3 of z = 1 and z = -1 (tiny residues) rule out the real Cayley centres,
    so the level sets are computed with a complex centre (complex Hamiltonian); the peak is
    the FIR spike between grid points as above. Exact norm from the closed form
    sum_k taps_k z^-k + r / (z - a) + r / (z + a)."""
    taps, th0 = _spike_on_a_large_feedthrough(0.0)
    a, r = 0.9995, 1e-3
    H = _fir(taps)
    P = DiscreteLTI(np.diag([a, -a]), [[1.0], [1.0]], [[r, r]])
    G = H + P
    k = np.arange(taps.size)

    def gain(t):
        z = np.exp(1j * np.atleast_1d(t))
        return np.abs(np.exp(-1j * np.outer(np.atleast_1d(t), k)) @ taps
                      + r / (z - a) + r / (z + a))

    theta = 2 * np.pi * np.arange(_NFFT // 2 + 1) / _NFFT
    z = np.exp(1j * theta)
    g = np.abs(np.fft.rfft(taps, _NFFT) + r / (z - a) + r / (z + a))
    i = int(np.argmax(g))
    res = minimize_scalar(lambda t: -gain(t)[0], bounds=(theta[i - 1], theta[i + 1]),
                          method="bounded", options={"xatol": 1e-15})
    exact = max(float(-res.fun), float(g[i]))
    assert abs(float(res.x) - th0) < 0.02 and max(gain(0.0)[0], gain(np.pi)[0]) < 0.1 * exact
    value, omega = hinf_norm(G)
    assert abs(value - exact) <= 1e-9 * exact, (value, exact)


def test_accuracy_is_the_documented_formula():
    """accuracy = 2 tol + 8 n eps ||zI - A||_F ||(zI - A)^{-1}||_2 at the peak z. Closed forms:
    one state, kappa = 1; a diagonal A, kappa = sqrt(sum |z - a_i|^2) / min |z - a_i|."""
    eps = np.finfo(np.float64).eps
    res = hinf_norm(DiscreteLTI([[0.5]], [[1.0]], [[3.0]]), tol=1e-6)  # 3 / (z - 0.5)
    assert res.value == pytest.approx(6.0, rel=1e-14, abs=0) and res.omega == 0.0
    assert res.accuracy == pytest.approx(2e-6 + 8.0 * eps, rel=1e-12, abs=0)
    a = np.array([0.9, -0.5])
    G = DiscreteLTI(np.diag(a), [[1.0], [1.0]], [[1.0, 1.0]])  # peak at z = 1: 10 + 2/3
    res = hinf_norm(G, tol=1e-8)
    assert res.value == pytest.approx(10.0 + 2.0 / 3.0, rel=1e-13, abs=0) and res.omega == 0.0
    d = np.abs(1.0 - a)
    kappa = np.sqrt(np.sum(d**2)) / np.min(d)
    assert res.accuracy == pytest.approx(2e-8 + 8.0 * 2 * eps * kappa, rel=1e-12, abs=0)


def test_systems_without_inputs_outputs_or_states():
    """No input or no output: the norm is 0 (the empty D included); no states: ||D||_2."""
    for G in (DiscreteLTI(np.diag([0.5, -0.3]), np.zeros((2, 0)), np.ones((1, 2))),
              DiscreteLTI(np.diag([0.5, -0.3]), np.ones((2, 1)), np.zeros((0, 2)))):
        assert tuple(hinf_norm(G)) == (0.0, 0.0)
        assert h2_norm(G) == 0.0
    D = np.array([[3.0, 0.0], [4.0, 0.0], [0.0, 1.0]])  # singular values 5 and 1
    G0 = DiscreteLTI(np.zeros((0, 0)), np.zeros((0, 2)), np.zeros((3, 0)), D)
    res = hinf_norm(G0)
    assert res.value == pytest.approx(5.0, rel=1e-15, abs=0) and res.omega == 0.0
    assert res.accuracy == pytest.approx(4.0 * np.finfo(np.float64).eps, abs=0)
    assert h2_norm(G0) == pytest.approx(np.sqrt(26.0), rel=1e-15, abs=0)  # ||D||_F
    assert hankel_norm(G0) == 0.0


def test_zero_b_or_zero_c_leaves_the_feedthrough():
    """B = 0 or C = 0 (states, inputs and outputs present): G(z) = D, the norm ||D||_2 at any
    frequency. The level-set system must not divide by the zero B or C when it balances
    their sizes (it would be NaN: a SolverError)."""
    D = np.array([[3.0, 0.0], [4.0, 0.0]])  # ||D||_2 = 5
    A = np.diag([0.5, -0.2, 0.1])
    rng = np.random.default_rng(0)
    for B, C in ((np.zeros((3, 2)), rng.standard_normal((2, 3))),
                 (rng.standard_normal((3, 2)), np.zeros((2, 3)))):
        value, _ = hinf_norm(DiscreteLTI(A, B, C, D))
        assert value == pytest.approx(5.0, rel=1e-14, abs=0)


def test_hinf_result_behaves_as_a_pair():
    """HinfNorm: two items (value, omega) for len, unpacking, indexing, slicing, equality and
    hashing, like the named tuple it replaced; accuracy only as an attribute."""
    res = hinf_norm(DiscreteLTI([[0.5]], [[1.0]], [[1.0]]))
    assert len(res) == 2 and len(tuple(res)) == 2
    value, omega = res
    assert (value, omega) == (2.0, 0.0) == (res.value, res.omega)
    assert res[0] == 2.0 and res[1] == 0.0 and res[-1] == 0.0 and res[:] == (2.0, 0.0)
    with pytest.raises(IndexError):
        res[2]
    assert res == (2.0, 0.0) and hash(res) == hash((2.0, 0.0))
    # like a tuple: not equal to a list or a number (no conversion of the other side)
    assert (res == [2.0, 0.0]) is False and (res == 2.0) is False and res != 2.0
    assert "accuracy=" in repr(res) and np.isfinite(res.accuracy)


@pytest.mark.parametrize(
    ("norm", "name"), [(hinf_norm, "H-infinity norm"), (h2_norm, "H2 norm")]
)
def test_unstable_message_names_the_norm(norm, name):
    from lti import UnstableSystemError

    G = DiscreteLTI([[1.5]], [[1.0]], [[1.0]])
    with pytest.raises(UnstableSystemError, match=f"^the {name} is defined for Schur-stable "
                       "systems only: `sys.A` must be Schur-stable"):
        norm(G)


def test_tol_is_an_open_interval():
    from lti import InvalidArgumentError

    G = DiscreteLTI([[0.5]], [[1.0]], [[1.0]])
    assert hinf_norm(G, tol=0.0099).value == pytest.approx(2.0, rel=1e-12, abs=0)
    for tol in (0.01, 0.0, -1e-3, float("nan"), True):
        with pytest.raises(InvalidArgumentError, match="must be a number in"):
            hinf_norm(G, tol=tol)
