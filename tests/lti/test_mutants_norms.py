"""Tests that kill the surviving mutants of ``lti/norms.py`` (issue 14, mutation testing).

Each test is named after what the mutant it is for gets wrong; the mutants are listed in
``benchmarks/results/mutmut_norms.md`` (written by ``benchmarks/mutation_report.py`` from
mutmut's own results). References are closed forms, independent of the state-space code:
one-state systems, FIR taps (their frequency response is a finite sum), modal sums
``d + sum r / (z - p)``, exact Gramians of diagonal systems, and dense solves of
``(zI - A) X = B`` on a fine sweep refined by brentq (the level crossings).
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
    sum_k taps_k z^-k + r / (z - a) + r / (z + a). (Here the first stage's local refinement
    already finds the peak and the level sets only confirm it: see
    test_peak_between_grid_points_off_the_nearest_poles for a complex centre they must use.)"""
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


# ------------------------------------------------------- the Cayley map and its level sets


def _gain_direct(A, B, C, D, z):
    """G(z) = C (zI - A)^{-1} B + D by dense solves (independent of the Schur-form code);
    z scalar, or an array of shape (k,) giving shape (k, p, m)."""
    zI = np.multiply.outer(np.asarray(z), np.eye(A.shape[0]))
    return C @ np.linalg.solve(zI - A, np.broadcast_to(B, zI.shape[:-2] + B.shape)) + D


def _random_mimo(seed: int, n: int = 6, m: int = 2, p: int = 3, radius: float = 0.8):
    """Real stable system with a nonzero D; poles well inside the circle (every centre is
    far from them)."""
    rng = np.random.default_rng(seed)
    A = rng.standard_normal((n, n))
    A *= radius / max(abs(np.linalg.eigvals(A)))
    return A, rng.standard_normal((n, m)), rng.standard_normal((p, n)), rng.standard_normal((p, m))


@pytest.mark.parametrize("theta_c", [np.pi, 0.0, 1.1, 2.6])
def test_cayley_map_is_the_documented_identity(theta_c):
    """_Cayley's contract: ``Gc(j w) = G(rho e^{j 2 atan(w)})`` (``rho = -z_c``, angle
    ``arg_rho``) and ``Dc = G(z_c)``, for real and complex centres ``z_c = e^{j theta_c}``.
    A complex centre makes ``I + A~`` complex, where ``(I + A~)^T`` (needed for ``C~ M``)
    and ``(I + A~)^H`` differ."""
    from lti.norms import _Cayley

    A, B, C, D = _random_mimo(3)
    cay = _Cayley(DiscreteLTI(A, B, C, D), theta_c)
    zc = np.exp(1j * theta_c)
    np.testing.assert_allclose(cay.Dc, _gain_direct(A, B, C, D, zc), rtol=1e-12, atol=0)
    for w in (-7.0, -0.4, 0.0, 0.3, 2.5, 40.0):
        Gc = cay.Cc @ np.linalg.solve(1j * w * np.eye(A.shape[0]) - cay.Ac, cay.Bc) + cay.Dc
        z = np.exp(1j * (2.0 * np.arctan(w) + cay.arg_rho))
        np.testing.assert_allclose(Gc, _gain_direct(A, B, C, D, z), rtol=1e-11, atol=0)


def _level_crossings(A, B, C, D, gamma: float) -> np.ndarray:
    """Reference: the angles in (0, pi) where some singular value of G(e^{j theta}) equals
    gamma, from sign changes of sigma_i - gamma on a fine grid refined by brentq."""
    from scipy.optimize import brentq

    def sv(t):
        return np.linalg.svd(_gain_direct(A, B, C, D, np.exp(1j * t)), compute_uv=False)

    t = np.linspace(0.0, np.pi, 4001)
    s = np.linalg.svd(_gain_direct(A, B, C, D, np.exp(1j * t)), compute_uv=False) - gamma
    out = []
    for i in range(s.shape[1]):
        for j in np.flatnonzero(np.sign(s[:-1, i]) != np.sign(s[1:, i])):
            out.append(brentq(lambda x, i=i: sv(x)[i] - gamma, t[j], t[j + 1], xtol=1e-14))
    return np.sort(np.array(out))


@pytest.mark.parametrize("theta_c", [np.pi, 0.0, 1.1, 2.6])
@pytest.mark.parametrize("seed", [3, 5])
def test_crossings_are_where_a_singular_value_equals_the_level(seed, theta_c):
    """The imaginary eigenvalues of the Hamiltonian at level gamma, mapped back to the circle,
    are exactly the angles where some singular value of G equals gamma (each twice for a real
    system: theta and -theta fold onto the same angle). Level halfway between the gain at the
    centre (gamma > sigma_max(Dc) is required) and the peak, so there are crossings."""
    from lti.norms import _Cayley

    A, B, C, D = _random_mimo(seed)
    G = DiscreteLTI(A, B, C, D)
    t = np.linspace(0.0, np.pi, 2001)
    peak = float(np.max(np.linalg.norm(_gain_direct(A, B, C, D, np.exp(1j * t)), 2, axis=(1, 2))))
    dc = np.linalg.norm(_gain_direct(A, B, C, D, np.exp(1j * theta_c)), 2)
    assert dc < 0.8 * peak  # a usable centre
    gamma = 0.5 * (dc + peak)
    ref = _level_crossings(A, B, C, D, gamma)
    assert ref.size >= 2
    got = _Cayley(G, theta_c).crossings(gamma, 1e-8)
    assert got.size == 2 * ref.size, (got, ref)
    np.testing.assert_allclose(got[0::2], ref, rtol=0, atol=1e-9)
    np.testing.assert_allclose(got[1::2], ref, rtol=0, atol=1e-9)


# ---------------------------------------------- a peak that only the level sets can find

_GAMMA_LB = 1.3  # what the first stage sees: d + the small peak


def _hidden_peak(complex_centre: bool):
    """SISO ``G(z) = d + sum_k r_k / (z - p_k) + conj``, d = 1:

    - 32 lightly damped pairs (|p| = 0.999) with tiny residues, one of them a small peak
      0.3 (in phase with d): these are the 64 poles nearest the circle, whose angles join
      hinf_norm's first-stage grid, so the first stage finds ``d + 0.3 = 1.3``;
    - one better damped pair (|p| = 0.996) with a large residue, peak 1.6 in phase with d at
      an angle midway between two grid points: the H-infinity norm ~2.6 is there; the pole is
      the 65th nearest the circle and the grid points are 6 half-widths away (gain <= 1.2);
    - with ``complex_centre``, two real poles at +-0.9985 with peaks 0.3 make the gain at
      z = +1 and z = -1 about 1.3 (> 0.9 gamma_lb), so no real Cayley centre qualifies.

    The gain at the Cayley centre is then ~0.77 gamma_lb: the level-set Hamiltonian depends
    on ``D_c = G(z_c)`` at first order (its ``F = A_c - B_c R^{-1} D_c^H C_c`` block).
    Returns the system and its gain as a closed-form function of theta."""
    grid = np.linspace(0.0, np.pi, 65)
    psi = 0.5 * (grid[20] + grid[21])
    d, rho_big = 1.0, 0.996
    p = [rho_big * np.exp(1j * psi)]
    r = [1.6 * (1.0 - rho_big) * np.exp(1j * psi)]  # peak r e^{-j psi} / (1 - rho) = 1.6
    for k, phi in enumerate(np.linspace(0.15, 2.6, 32)):
        p.append(0.999 * np.exp(1j * phi))
        r.append((0.3 if k == 5 else 1e-3) * 1e-3 * np.exp(1j * phi))
    p, r = np.array(p), np.array(r)
    a, c = np.concatenate([p, p.conj()]), np.concatenate([r, r.conj()])
    if complex_centre:
        a = np.concatenate([a, [0.9985, -0.9985]])
        c = np.concatenate([c, [0.3 * 0.0015, -0.3 * 0.0015]])
    G = DiscreteLTI.from_diagonal(a, np.ones((a.size, 1)), c[None, :], [[d]])

    def gain(t):
        z = np.exp(1j * np.atleast_1d(t))[:, None]
        return np.abs(d + np.sum(c[None, :] / (z - a[None, :]), axis=1))

    return G, gain, grid


@pytest.mark.parametrize("complex_centre", [False, True])
def test_peak_between_grid_points_off_the_nearest_poles(complex_centre):
    """The first stage (grid, angles of the 64 poles nearest the circle, local refinement)
    sees 1.3; the norm ~2.6 is found only by the level sets, whose Hamiltonian must be that of
    G (a wrong sign of its D_c term gives the level sets of G - 2 G(z_c), ~flat at 1 here, and
    returns 1.3). Exact norm from the closed form: dense sweep, then Brent."""
    G, gain, grid = _hidden_peak(complex_centre)
    poles = G.poles()
    nearest = np.argsort(-np.abs(poles))[:64]
    seen = np.concatenate([grid, np.abs(np.angle(poles[nearest]))])
    assert np.max(gain(seen)) <= 1.0001 * _GAMMA_LB
    t = np.linspace(0.0, np.pi, 20001)  # spacing 1.6e-4, the big peak's half-width 4e-3
    g = gain(t)
    i = int(np.argmax(g))
    res = minimize_scalar(lambda x: -gain(x)[0], bounds=(t[i - 1], t[i + 1]),
                          method="bounded", options={"xatol": 1e-14})
    exact = max(float(-res.fun), float(g[i]))
    assert exact > 1.9 * _GAMMA_LB
    value, omega = hinf_norm(G)
    assert abs(value - exact) <= 1e-9 * exact, (value, exact)
    assert abs(omega - float(res.x)) <= 1e-6
