"""H-infinity norms that a frequency grid plus local refinement gets wrong.

``lti.hinf_norm`` starts from the gain on a 65-point grid of ``[0, pi]`` plus the angles of
the 64 poles closest to the unit circle, refines the best point locally, and then runs
level-set (Hamiltonian) iterations, which are what make it exact. Every case here is
built so that the first stage alone misses the peak by far (it was checked by deleting the
level-set stage: all of them fail, see the lti-tests note), and the exact norm is computed
independently of the state-space code, from a closed form of the frequency response
(partial fractions or the FIR taps) on a dense grid with Brent refinement, and
cross-checked with SLICOT AB13DD where slycot is installed.
"""

from __future__ import annotations

import numpy as np
import pytest
import scipy.linalg as sla
from scipy.optimize import minimize_scalar

from lti import DiscreteLTI, hinf_norm

GRID = np.linspace(0.0, np.pi, 65)  # hinf_norm's coarse grid (the first stage)


def _refined_max(f, theta: np.ndarray, g=None) -> tuple[float, float]:
    """max of a closed-form gain f over a dense grid (values g, computed as f(theta) when not
    given), refined by Brent at the 5 best local maxima; returns (value, theta)."""
    g = f(theta) if g is None else g
    best_v, best_t = float(np.max(g)), float(theta[int(np.argmax(g))])
    idx = [i for i in range(1, theta.size - 1) if g[i] >= g[i - 1] and g[i] >= g[i + 1]]
    for i in sorted(idx, key=lambda i: -g[i])[:5]:
        res = minimize_scalar(lambda t: -f(np.array([t]))[0], bounds=(theta[i - 1], theta[i + 1]),
                              method="bounded", options={"xatol": 1e-15})
        if -res.fun > best_v:
            best_v, best_t = float(-res.fun), float(res.x)
    return best_v, best_t


def _ab13dd(G: DiscreteLTI) -> float | None:
    try:
        import slycot
    except ImportError:  # pragma: no cover - depends on the environment
        return None
    n, m, p = G.n, G.m, G.p
    return float(slycot.ab13dd("D", "I", "N", "D", n, m, p, G.A, np.eye(n), G.B, G.C, G.D,
                               tol=1e-12)[0])


def _pair_block(rad: float, th: float) -> np.ndarray:
    c, s = rad * np.cos(th), rad * np.sin(th)
    return np.array([[c, s], [-s, c]])


def _hidden_resonance():
    """40 pole pairs at radius 0.999 (decoys, small residues) and one pair at radius 0.998
    with a 10x larger residue, its angle midway between two grid points. The decoys are the
    64 poles closest to the circle, so the target's angle is not among the first-stage
    frequencies; the grid sees ~40 near the target, the decoys peak near 100, the true
    peak is ~ 250."""
    rng = np.random.default_rng(7)
    th0 = 0.5 * (GRID[20] + GRID[21])  # midway between grid points
    angles = []
    while len(angles) < 40:  # decoys well away from the target
        t = rng.uniform(0.05, np.pi - 0.05)
        if abs(t - th0) > 0.2:
            angles.append(t)
    blocks = [_pair_block(0.999, t) for t in angles] + [_pair_block(0.998, th0)]
    A = sla.block_diag(*blocks)
    n = A.shape[0]
    B = np.zeros((n, 1))
    C = np.zeros((1, n))
    B[0::2, 0] = 1.0
    C[0, 0::2] = 0.1  # decoys: residue ~ 0.05 each
    C[0, -2] = 1.0  # target: residue ~ 0.5
    G = DiscreteLTI(A, B, C)

    # closed form: each 2x2 block [[c, s], [-s, c]] = rad * rotation; with B = e_1 and
    # C = w e_1^T its transfer function is w (z - c) / ((z - c)^2 + s^2)
    rads = np.array([0.999] * 40 + [0.998])
    ths = np.array(angles + [th0])
    ws = np.array([0.1] * 40 + [1.0])

    def gain(theta):
        z = np.exp(1j * np.asarray(theta))[:, None]
        c, s = rads * np.cos(ths), rads * np.sin(ths)
        return np.abs(np.sum(ws * (z - c) / ((z - c) ** 2 + s**2), axis=1))

    theta = np.unique(np.concatenate([np.linspace(0, np.pi, 200_001), ths]))
    return G, gain, theta, th0


def _narrow_fir(length: int, th0: float) -> np.ndarray:
    """Taps cos(th0 k) (rectangular window): a main lobe of half-width 2 pi / length at th0,
    narrower than the grid spacing pi / 64 for length 200, peak ~ length / 2."""
    return np.cos(th0 * np.arange(length))


def _fir_system(h: np.ndarray) -> DiscreteLTI:
    n = h.size - 1
    A = np.diag(np.ones(n - 1), -1)
    B = np.zeros((n, 1))
    B[0, 0] = 1.0
    return DiscreteLTI(A, B, h[1:][None, :], [[h[0]]])


def _fir_gain(h: np.ndarray):
    k = np.arange(h.size)

    def gain(theta):
        return np.abs(np.exp(-1j * np.outer(np.asarray(theta), k)) @ h)

    return gain


_NFFT = 2**20


def _fft_grid(h: np.ndarray):
    """theta in [0, pi] on 2^19 + 1 points and the FIR gain there (by FFT)."""
    theta = 2 * np.pi * np.arange(_NFFT // 2 + 1) / _NFFT
    return theta, np.abs(np.fft.rfft(h, _NFFT))


def _hump_and_spike():
    """H1: a broad low-pass hump (pole 0.5, peak 60 at theta = 0, a grid point) and H2: a
    200-tap FIR spike of height ~100 centred midway between two grid points, where the
    grid sees ~26 (all poles of H2 are at 0, so no pole angle points at it either)."""
    th0 = 0.5 * (GRID[37] + GRID[38])
    h = _narrow_fir(200, th0)
    H2 = _fir_system(h)
    H1 = DiscreteLTI([[0.5]], [[1.0]], [[30.0]])  # 30 / (z - 0.5): peak 60 at z = 1
    g2 = _fir_gain(h)

    def g1(theta):
        return np.abs(30.0 / (np.exp(1j * np.asarray(theta)) - 0.5))

    return H1, H2, g1, g2, th0


def _stack_diag(G1: DiscreteLTI, G2: DiscreteLTI) -> DiscreteLTI:
    return DiscreteLTI(sla.block_diag(G1.A, G2.A), sla.block_diag(G1.B, G2.B),
                       sla.block_diag(G1.C, G2.C), sla.block_diag(G1.D, G2.D))


def _check(G, exact, theta_exact, rtol=1e-9):
    value, omega = hinf_norm(G)
    assert abs(value - exact) <= rtol * exact, (value, exact)
    ref = _ab13dd(G)
    if ref is not None:  # a third opinion: SLICOT AB13DD
        assert abs(ref - exact) <= 1e-8 * exact, (ref, exact)
    assert abs(omega - theta_exact) <= 1e-4  # the peak frequency too


def test_first_stage_misses_these_peaks():
    """The cases are hard: the first-stage frequencies (grid + pole angles) see less than
    half of the true norm, so only the level-set stage can find it."""
    G, gain, theta, _ = _hidden_resonance()
    poles = G.poles()
    near = np.argsort(-np.abs(poles))[:64]
    stage1 = np.concatenate([GRID, np.abs(np.angle(poles[near]))])
    exact, _ = _refined_max(gain, theta)
    assert np.max(gain(stage1)) < 0.3 * exact
    H1, H2, g1, g2, _ = _hump_and_spike()
    exact2 = _refined_max(g2, *_fft_grid(np.r_[H2.D[0], H2.C[0]]))[0]
    assert np.max(np.maximum(g1(GRID), g2(GRID))) < 0.7 * exact2


def test_resonance_hidden_among_64_decoy_poles():
    G, gain, theta, th0 = _hidden_resonance()
    exact, t_exact = _refined_max(gain, theta)
    assert abs(t_exact - th0) < 0.01 and exact > 200
    _check(G, exact, t_exact)


def test_siso_fir_spike_between_grid_points():
    H1, H2, g1, g2, th0 = _hump_and_spike()
    G = H1 + H2  # disjoint bands: the spike dominates near th0, the hump near 0
    taps = np.r_[H2.D[0], H2.C[0]]  # h[0], h[1:]
    k = np.arange(taps.size)

    def gain(theta):
        z = np.exp(1j * np.asarray(theta))
        return np.abs(30.0 / (z - 0.5) + np.exp(-1j * np.outer(np.asarray(theta), k)) @ taps)

    theta = _fft_grid(taps)[0]
    g = np.abs(30.0 / (np.exp(1j * theta) - 0.5) + np.fft.rfft(taps, _NFFT))  # sum h_k e^-jk.
    exact, t_exact = _refined_max(gain, theta, g)
    assert abs(t_exact - th0) < 0.02
    _check(G, exact, t_exact)


@pytest.mark.parametrize("rotate", [False, True])
def test_mimo_largest_singular_value_switches_branch(rotate):
    """sigma_max(G) = max(|H1|, |H2|) for G = U diag(H1, H2) V^T: near theta = 0 the hump's
    branch is the largest, near th0 the spike's. The grid and its refinement stay on the
    hump's branch (60); the norm is the spike's (~100)."""
    H1, H2, g1, g2, th0 = _hump_and_spike()
    G = _stack_diag(H1, H2)
    if rotate:  # constant orthogonal factors: same singular values, coupled entries
        U = np.array([[np.cos(0.7), -np.sin(0.7)], [np.sin(0.7), np.cos(0.7)]])
        V = np.array([[np.cos(-1.9), -np.sin(-1.9)], [np.sin(-1.9), np.cos(-1.9)]])
        G = DiscreteLTI(G.A, G.B @ V.T, U @ G.C, U @ G.D @ V.T)

    def gain(theta):
        return np.maximum(g1(theta), g2(theta))

    theta, g_fir = _fft_grid(np.r_[H2.D[0], H2.C[0]])
    exact, t_exact = _refined_max(gain, theta, np.maximum(g1(theta), g_fir))
    assert exact > 90 and abs(t_exact - th0) < 0.02
    _check(G, exact, t_exact)


def test_control_systems_get_rad_per_second_and_the_same_accuracy():
    """python-control systems: omega in rad/s (theta / dt, as control.linfnorm), value and
    accuracy as for the DiscreteLTI, `tol` passed through (mutmut survivors of hinf_norm's
    control branch)."""
    control = pytest.importorskip("control", reason="extra 'control' not installed")
    G, _, _, _ = _hidden_resonance()
    for dt in (0.1, True):
        sysc = control.ss(G.A, G.B, G.C, G.D, dt)
        for tol in (1e-10, 1e-3):
            ref = hinf_norm(DiscreteLTI(G.A, G.B, G.C, G.D, dt), tol=tol)
            got = hinf_norm(sysc, tol=tol)
            scale = 0.1 if dt == 0.1 and dt is not True else 1.0
            assert got.value == ref.value and got.accuracy == ref.accuracy
            assert abs(got.omega - ref.omega / scale) <= 1e-12 * abs(ref.omega / scale)
            assert got.accuracy >= 2 * tol  # the tolerance reached the level-set stage


def test_static_gain_norm_and_its_accuracy():
    """n = 0: the norm is ||D||_2, exact to rounding, and the reported accuracy says so
    (mutmut survivors of the static branch: accuracy 4 / eps, 1.0 for an empty D)."""
    D = np.array([[3.0, 0.0], [4.0, 0.0]])
    res = hinf_norm(DiscreteLTI(np.zeros((0, 0)), np.zeros((0, 2)), np.zeros((2, 0)), D))
    assert abs(res.value - 5.0) <= 4 * np.finfo(float).eps * 5.0 and res.omega == 0.0
    assert 0.0 < res.accuracy <= 1e-15


@pytest.mark.parametrize("zero", ["B", "C"])
def test_zero_gain_system(zero):
    """G = 0 with states (B = 0 or C = 0, D = 0): the norm is exactly 0 at omega 0 with
    accuracy 0 (mutmut survivors of the gamma_lb == 0 exit)."""
    rng = np.random.default_rng(3)
    A = 0.5 * np.linalg.qr(rng.standard_normal((4, 4)))[0]
    B = np.zeros((4, 2)) if zero == "B" else rng.standard_normal((4, 2))
    C = np.zeros((3, 4)) if zero == "C" else rng.standard_normal((3, 4))
    res = hinf_norm(DiscreteLTI(A, B, C, np.zeros((3, 2))))
    assert res.value == 0.0 and res.omega == 0.0 and res.accuracy == 0.0
