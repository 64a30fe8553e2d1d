"""The discrete-time cases of peer libraries' test suites, ported with their expected values
and tolerances (issue 14).

Only the data are taken (matrices, expected values, tolerances); each case names the file
and test it comes from, at the commit read:

* scipy ``scipy/linalg/tests/test_solvers.py`` @ 3dbf660 (``TestSolveLyapunov.cases``,
  ``check_discrete_case``: ``assert_array_almost_equal(A X A^H - X, -Q)``, 6 decimals);
* python-control ``control/tests/{mateqn,statefbk,sysnorm,modelsimp}_test.py`` @ e60e5eb
  (``assert_array_almost_equal``, 6 decimals, or ``np.allclose``: rtol 1e-5, atol 1e-8);
* Slycot ``slycot/tests/test_ab13bd.py`` and ``slycot/examples.py`` @ 4c28f87 (its
  AB09 tests, ``test_ab09nd.py``, are continuous-time only; ``test_analysis.py`` /
  ``test_sb.py`` check error-code parsing, nothing numeric);
* pyMOR ``src/pymortests/algorithms/lyapunov.py`` @ 4f2036b (``test_disc_lrcf``,
  ``test_disc_dense``: relative residual < 1e-10).

Where the peer is installed (scipy, control, slycot) the same case is also run through it
live and compared; the ``better`` comments record where lti is more accurate or refuses
what it cannot do instead of returning a wrong number.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import scipy.linalg as sla
from numpy.testing import assert_array_almost_equal

import lti
from lti import (
    DiscreteLTI,
    UnstableSystemError,
    controllability_gramian,
    h2_norm,
    hankel_singular_values,
    hinf_norm,
    lyapunov_factor,
    observability_gramian,
    solve_discrete_lyapunov,
)

_EPS = np.finfo(float).eps


def _zoh(A, B, dt):
    """Zero-order hold, by the block exponential (the peers' c2d / sample_system /
    cont2discrete(method="zoh"))."""
    n, m = B.shape
    M = sla.expm(np.block([[A, B], [np.zeros((m, n + m))]]) * dt)
    return M[:n, :n], M[:n, n:]


def _tustin(A, B, C, D):
    """Bilinear map s = (z - 1) / (z + 1) with the sqrt(2) scaling that keeps both
    Gramians, the HSVs and the H-infinity norm exactly (the continuous -> discrete bridge
    for peers' continuous-time expected values)."""
    n = A.shape[0]
    F = np.linalg.inv(np.eye(n) - A)
    return ((np.eye(n) + A) @ F, np.sqrt(2.0) * F @ B, np.sqrt(2.0) * C @ F,
            D + C @ F @ B)


def _stein_residual(A, X, Q):
    return A @ X @ A.conj().T - X + Q


# ------------------------------------------------------------------------------- scipy

# scipy/linalg/tests/test_solvers.py @ 3dbf660, TestSolveLyapunov.cases (discrete check)
_SCIPY_COMPANION = np.diag(np.ones(10), -1).astype(complex)
_SCIPY_COMPANION[0] = [0.100, 0.091, 0.082, 0.073, 0.064, 0.055, 0.046, 0.037, 0.028, 0.019,
                       0.010]
_SCIPY_STABLE = {
    "empty": (np.empty((0, 0)), np.empty((0, 0))),
    "companion_11": (_SCIPY_COMPANION, np.eye(11)),  # "Companion matrix example"
    "gh4176": (np.array([[0.0, 1.0], [-0.5, -1.0]]), np.array([[0.0, 0.0], [0.0, 9.0]])),
}
# the remaining cases have spectral radius > 1 (Stein equations solvable since no
# lambda_i conj(lambda_j) = 1) or a non-Hermitian Q; lti solves the stable, Hermitian
# problem only and says so instead (scipy returns a solution).
_SCIPY_REFUSED = {
    "a_real_2x2": (np.array([[1, 2], [3, 4]]), np.array([[9, 10], [11, 12]])),
    "a_q_complex": (np.array([[1.0 + 1j, 2.0], [3.0 - 4.0j, 5.0]]),
                    np.array([[2.0 - 2j, 2.0 + 2j], [-1.0 - 1j, 2.0]])),
    "a_real_q_complex": (np.array([[1.0, 2.0], [3.0, 5.0]]),
                         np.array([[2.0 - 2j, 2.0 + 2j], [-1.0 - 1j, 2.0]])),
    "a_complex_q_real": (np.array([[1.0 + 1j, 2.0], [3.0 - 4.0j, 5.0]]),
                         np.array([[2.0, 2.0], [-1.0, 2.0]])),
    "kitagawa_1977": (np.array([[3, 9, 5, 1, 4], [1, 2, 3, 8, 4], [4, 6, 6, 6, 3],
                                [1, 5, 2, 0, 7], [5, 3, 3, 1, 5]]),
                      np.array([[2, 4, 1, 0, 1], [4, 1, 0, 2, 0], [1, 0, 3, 0, 3],
                                [0, 2, 0, 1, 0], [1, 0, 3, 0, 4]])),
}


@pytest.mark.parametrize("name", sorted(_SCIPY_STABLE))
@pytest.mark.parametrize("method", ["auto", "schur", "smith"])
def test_scipy_discrete_lyapunov_cases(name, method):
    A, Q = _SCIPY_STABLE[name]
    X = solve_discrete_lyapunov(A, Q, method=method)
    assert X.shape == A.shape
    assert_array_almost_equal(_stein_residual(A, X, Q), np.zeros_like(X))  # scipy's check
    if A.size:  # ours, much tighter: relative residual at rounding level
        rel = np.linalg.norm(_stein_residual(A, X, Q)) / np.linalg.norm(X)
        assert rel <= 100 * A.shape[0] * _EPS
        ref = sla.solve_discrete_lyapunov(A, Q)  # live: scipy itself
        assert np.linalg.norm(X - ref) <= 1e-12 * np.linalg.norm(ref)


@pytest.mark.parametrize("name", sorted(_SCIPY_REFUSED))
def test_scipy_cases_outside_lti_domain_are_refused(name):
    A, Q = _SCIPY_REFUSED[name]
    assert np.max(np.abs(np.linalg.eigvals(A))) >= 1  # all of them are unstable
    with pytest.raises((UnstableSystemError, lti.NotSymmetricError)):
        solve_discrete_lyapunov(A, Q)  # (a non-Hermitian Q is reported first)


# ---------------------------------------------------------------------- python-control


@pytest.mark.parametrize("Q", [np.eye(2), np.array([[3.0, 1.0], [1.0, 1.0]])])
def test_control_mateqn_dlyap(Q):
    """control/tests/mateqn_test.py::test_dlyap (6 decimals on the residual)."""
    A = np.array([[-0.6, 0.0], [-0.1, -0.4]])
    X = solve_discrete_lyapunov(A, Q)
    assert_array_almost_equal(A @ X @ A.T - X + Q, np.zeros((2, 2)))
    control = pytest.importorskip("control", reason="extra 'control' not installed")
    Xc = control.dlyap(A, Q)  # live
    assert np.linalg.norm(X - Xc) <= 1e-12 * np.linalg.norm(X)
    assert np.linalg.norm(_stein_residual(A, X, Q)) <= 10 * _EPS * np.linalg.norm(X)


# control/tests/statefbk_test.py: A, B, C, D of testGramWc/Wo (MIMO) and testGramWc2/Wo2
# (SISO), sampled with c2d(sys, 0.2) (ZOH); discrete expected Gramians and Cholesky factors
_GRAM_A = np.array([[1.0, -2.0], [3.0, -4.0]])
_GRAM_CASES = {
    "mimo": dict(
        B=np.array([[5.0, 6.0], [7.0, 8.0]]), C=np.array([[4.0, 5.0], [6.0, 7.0]]),
        Wc=np.array([[3.666767, 4.853625], [4.853625, 6.435233]]),
        Wo=np.array([[1305.369179, -440.046414], [-440.046414, 333.034844]]),
        Rc=np.array([[1.91488054, 2.53468814], [0.0, 0.10290372]]),  # testGramRc
        Ro=np.array([[36.12989315, -12.17956588], [0.0, 13.59018097]]),  # testGramRo
    ),
    "siso": dict(
        B=np.array([[5.0], [7.0]]), C=np.array([[6.0, 8.0]]),
        Wc=np.array([[1.418978, 1.946180], [1.946180, 2.670758]]),
        Wo=np.array([[1001.835511, -335.337663], [-335.337663, 263.355793]]),
    ),
}


def _upper_factor(L):
    """The upper-triangular R with R^T R = L L^T and a positive diagonal."""
    R = np.linalg.qr(L.T, mode="r")
    return R * np.sign(np.diag(R))[:, None]


@pytest.mark.parametrize("name", sorted(_GRAM_CASES))
def test_control_statefbk_discrete_gramians(name):
    case = _GRAM_CASES[name]
    Ad, Bd = _zoh(_GRAM_A, case["B"], 0.2)
    G = DiscreteLTI(Ad, Bd, case["C"], np.zeros((case["C"].shape[0], Bd.shape[1])), 0.2)
    assert_array_almost_equal(controllability_gramian(G), case["Wc"])  # 6 decimals
    assert_array_almost_equal(observability_gramian(G), case["Wo"])
    if "Rc" in case:  # 'cf' / 'of': upper Cholesky factors, W = R^T R
        Lc = controllability_gramian(G, factor=True)
        Lo = observability_gramian(G, factor=True)
        assert_array_almost_equal(_upper_factor(Lc), case["Rc"])
        assert_array_almost_equal(_upper_factor(Lo), case["Ro"])
    control = pytest.importorskip("control", reason="extra 'control' not installed")
    sysd = control.c2d(control.ss(_GRAM_A, case["B"], case["C"], 0), 0.2)  # live
    np.testing.assert_allclose(controllability_gramian(DiscreteLTI.from_control(sysd)),
                               control.gram(sysd, "c"), rtol=1e-10)


def _sysnorm_g4():
    """control/tests/sysnorm_test.py::test_norm_3rd_order_mimo_system ("random system
    generated in MATLAB"), sampled at 0.1 s (ZOH)."""
    A = np.array([[-1.017041847539126, -0.224182952826418, 0.042538079149249],
                  [-0.310374015319095, -0.516461581407780, -0.119195790221750],
                  [-1.452723568727942, 1.7995860837102088, -1.491935830615152]])
    B = np.array([[0.312858596637428, -0.164879019209038],
                  [-0.864879917324456, 0.627707287528727],
                  [-0.030051296196269, 1.093265669039484]])
    C = np.array([[1.109273297614398, 0.077359091130425, -1.113500741486764],
                  [-0.863652821988714, -1.214117043615409, -0.006849328103348]])
    Ad, Bd = _zoh(A, B, 0.1)
    return DiscreteLTI(Ad, Bd, C, np.zeros((2, 2)), 0.1)


def _sysnorm_g1():
    """test_norm_1st_order_stable_system: 1 / (s + 1) sampled at 0.1 s (ZOH)."""
    a = np.exp(-0.1)
    return DiscreteLTI([[a]], [[1.0 - a]], [[1.0]], [[0.0]], 0.1)


@pytest.mark.parametrize(("make", "hinf", "h2"), [
    (_sysnorm_g1, 1.0, 0.223513699524858),  # "Comparison to norm computed in MATLAB"
    (_sysnorm_g4, 4.276759162964228, 0.707434962289554),
])
def test_control_sysnorm_discrete(make, hinf, h2):
    G = make()
    assert np.allclose(hinf_norm(G).value, hinf)  # their tolerance (np.allclose)
    assert np.allclose(h2_norm(G), h2)
    assert abs(hinf_norm(G).value - hinf) <= 1e-12 * hinf  # MATLAB's 15 digits
    control = pytest.importorskip("control", reason="extra 'control' not installed")
    sysd = G.to_control()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert abs(control.norm(sysd, p="inf") - hinf_norm(G).value) <= 1e-6 * hinf  # live
        assert abs(control.norm(sysd, p=2) - h2_norm(G)) <= 1e-9 * h2


def test_control_sysnorm_first_order_exact():
    """For Gd1 the exact norms are known: ||G||_inf = 1 (at z = 1) and
    ||G||_2^2 = sum_k ((1 - a) a^k)^2 = (1 - a) / (1 + a) = tanh(0.05). lti is exact to
    rounding; MATLAB's 0.223513699524858 (the peer's expected value) is 1.1e-8 low."""
    G = _sysnorm_g1()
    exact = np.sqrt(np.tanh(0.05))
    assert abs(h2_norm(G) - exact) <= 1e-14 * exact
    assert abs(0.223513699524858 - exact) > 1e-9 * exact
    assert abs(hinf_norm(G).value - 1.0) <= 1e-14


def test_control_sysnorm_unstable_discrete():
    """test_norm_1st_order_unstable_system: 1 / (1 - s) sampled at 0.1 s: python-control
    returns inf for the H2 norm with a warning; lti raises (the norm is infinite)."""
    a = np.exp(0.1)
    G = DiscreteLTI([[a]], [[a - 1.0]], [[-1.0]], [[0.0]], 0.1)
    with pytest.raises(UnstableSystemError):
        h2_norm(G)
    with pytest.raises(UnstableSystemError):
        hinf_norm(G)


def _undamped_oscillator():
    """test_norm_2nd_order_system_imag_poles: 1 / (s^2 + 1) sampled at 0.1 s: poles on the
    unit circle up to rounding: with python-control's own sampling (the peer's data) the
    computed spectral radius is 1 - 3.3e-16; the block-exponential fallback gives 1."""
    try:
        import control
    except ImportError:  # pragma: no cover - depends on the environment
        control = None
    if control is not None:
        sysd = control.ss(control.sample_system(control.tf([1.0], [1.0, 0.0, 1.0]), 0.1))
        return DiscreteLTI.from_control(sysd)
    A = np.array([[0.0, 1.0], [-1.0, 0.0]])
    Ad, Bd = _zoh(A, np.array([[0.0], [1.0]]), 0.1)
    return DiscreteLTI(Ad, Bd, [[1.0, 0.0]], [[0.0]], 0.1)


def _infinite_or_refused(f, G) -> bool:
    try:
        with warnings.catch_warnings(record=True) as rec:
            warnings.simplefilter("always")
            v = f(G)
    except UnstableSystemError:
        return True
    v = getattr(v, "value", v)
    return v == np.inf and len(rec) > 0


@pytest.mark.parametrize("norm", [h2_norm, hinf_norm], ids=["h2", "hinf"])
def test_control_sysnorm_poles_on_unit_circle(norm):
    """python-control (and MATLAB) answer inf with a warning; lti must not return a finite
    number (it returned 4.55e13 and 2.74e6 before issue 14 item 4)."""
    assert _infinite_or_refused(norm, _undamped_oscillator())


def test_control_modelsimp_hsvd_through_tustin():
    """control/tests/modelsimp_test.py::testHSVD (MATLAB values, 6 decimals) for the
    continuous system; the sqrt(2)-scaled bilinear map keeps both Gramians, hence the HSVs,
    so the discrete HSVs must be the same numbers. (testBalredTruncate / MatchDC are
    continuous-time reductions, which do not commute with the bilinear map: not ported.)"""
    A = np.array([[1.0, -2.0], [3.0, -4.0]])
    B = np.array([[5.0], [7.0]])
    C = np.array([[6.0, 8.0]])
    D = np.array([[9.0]])
    G = DiscreteLTI(*_tustin(A, B, C, D))
    assert_array_almost_equal(hankel_singular_values(G), [24.42686, 0.5731395])
    # live: AB09AD, dico="D" (control.hsvd raises NotImplementedError for discrete-time systems)
    slycot = pytest.importorskip("slycot", reason="extra 'control' (slycot) not installed")
    hsv_s = slycot.ab09ad("D", "B", "N", 2, 1, 1, G.A, G.B, G.C, nr=2)[-1]
    np.testing.assert_allclose(hankel_singular_values(G), hsv_s, rtol=1e-10)


# ------------------------------------------------------------------------------ Slycot


def test_slycot_ab13bd_h2_discrete():
    """slycot/tests/test_ab13bd.py::test_ab13bd_2norm_dcase (atol 1e-5 against the
    Gramian formula), scipy.signal.cont2discrete(..., 0.1, method="zoh")."""
    A = np.array([[0.0, 1.0], [-0.5, -0.1]])
    B = np.array([[0.0], [1.0]])
    C, D = np.eye(2), np.zeros((2, 1))
    Ad, Bd = _zoh(A, B, 0.1)
    G = DiscreteLTI(Ad, Bd, C, D, 0.1)
    Lc = sla.solve_discrete_lyapunov(Ad, Bd @ Bd.T)
    h2_ref = np.sqrt(np.trace(C @ Lc @ C.T + D @ D.T))
    np.testing.assert_allclose(h2_norm(G), h2_ref, atol=1e-5)
    np.testing.assert_allclose(h2_norm(G), h2_ref, rtol=1e-12)
    slycot = pytest.importorskip("slycot", reason="extra 'control' (slycot) not installed")
    h2_slicot = slycot.ab13bd("D", "H", 2, 1, 2, Ad, Bd, C, D)  # live
    np.testing.assert_allclose(h2_norm(G), h2_slicot, rtol=1e-10)


def test_slycot_sb03md_example_is_unstable():
    """slycot/examples.py::sb03md_example (dico="D"): A has eigenvalues 2, 3 and 4, SB03MD
    solves A^T X A - X = C (no reciprocal eigenvalue pair). lti solves the stable problem
    only (Gramians), and refuses with the measured spectral radius instead."""
    A = np.array([[3.0, 1.0, 1.0], [1.0, 3.0, 0.0], [0.0, 0.0, 3.0]])
    C = np.array([[25.0, 24.0, 15.0], [24.0, 32.0, 8.0], [15.0, 8.0, 40.0]])
    with pytest.raises(UnstableSystemError, match="spectral radius"):
        solve_discrete_lyapunov(A.T, -C)


def _ab13dd_example():
    """slycot/examples.py::ab13dd_example (SLICOT AB13DD's documentation example): three
    lightly damped modes, continuous time; its L-infinity norm is 5.0000E+05 at
    omega = sqrt(2)."""
    A = np.zeros((6, 6))
    for k, (a, c) in enumerate([(0.5, 0.0002), (1.0, 0.00002), (2.0, 0.000002)]):
        A[2 * k:2 * k + 2, 2 * k:2 * k + 2] = [[0.0, 1.0], [-a, -c]]
    B = np.array([[1.0], [0], [1], [0], [1], [0]])
    C = np.array([[1.0, 0, 1, 0, 1, 0]])
    return A, B, C, np.zeros((1, 1))


def _ab13dd_exact() -> float:
    """The norm in 40-digit arithmetic from the closed form G(s) = sum (s + c)/(s^2 + c s + a),
    maximised near omega = sqrt(2) (golden section, then a secant step on the derivative)."""
    mpmath = pytest.importorskip("mpmath", reason="mpmath not installed")
    with mpmath.workdps(40):  # mpmath's precision is global: set it for this call only
        return _ab13dd_exact_at_current_precision(mpmath)


def _ab13dd_exact_at_current_precision(mpmath) -> float:
    modes = [(mpmath.mpf("0.5"), mpmath.mpf("0.0002")), (mpmath.mpf(1), mpmath.mpf("0.00002")),
             (mpmath.mpf(2), mpmath.mpf("0.000002"))]

    def gain(w):
        s = 1j * w
        return abs(sum((s + c) / (s * s + c * s + a) for a, c in modes))

    lo, hi = mpmath.sqrt(2) - mpmath.mpf("1e-4"), mpmath.sqrt(2) + mpmath.mpf("1e-4")
    g = (mpmath.sqrt(5) - 1) / 2
    for _ in range(200):
        m1, m2 = hi - g * (hi - lo), lo + g * (hi - lo)
        if gain(m1) < gain(m2):
            lo = m1
        else:
            hi = m2
    return float(gain((lo + hi) / 2))


def _discrete_exact(G: DiscreteLTI, theta0: float, half_width: float) -> float:
    """max |C (e^{j theta} I - A)^{-1} B + D| of the (float) discrete data in 40-digit
    arithmetic, by golden section on [theta0 - half_width, theta0 + half_width]."""
    mpmath = pytest.importorskip("mpmath", reason="mpmath not installed")
    with mpmath.workdps(40):  # mpmath's precision is global: set it for this call only
        return _discrete_exact_at_current_precision(mpmath, G, theta0, half_width)


def _discrete_exact_at_current_precision(mpmath, G: DiscreteLTI, theta0: float,
                                         half_width: float) -> float:
    A, B, C = (mpmath.matrix(X.tolist()) for X in (G.A, G.B, G.C))
    d = mpmath.mpf(float(G.D[0, 0]))
    eye = mpmath.eye(G.n)

    def gain(t):
        z = mpmath.exp(1j * t)
        return abs((C * mpmath.lu_solve(z * eye - A, B))[0] + d)

    lo, hi = mpmath.mpf(theta0) - half_width, mpmath.mpf(theta0) + half_width
    g = (mpmath.sqrt(5) - 1) / 2
    for _ in range(120):
        m1, m2 = hi - g * (hi - lo), lo + g * (hi - lo)
        if gain(m1) < gain(m2):
            lo = m1
        else:
            hi = m2
    return float(gain((lo + hi) / 2))


def test_slycot_ab13dd_example_through_tustin():
    """AB13DD's example moved to discrete time by the bilinear map s = (z - 1)/(z + 1)
    (which keeps the H-infinity norm; the peak moves to theta = 2 atan(sqrt 2)). The
    continuous norm in 40 digits is SLICOT's documented 5.0000E+05; the discrete data,
    rounded to float, have their own exact norm (40 digits on those very matrices): lti and
    AB13DD are checked against it."""
    assert abs(_ab13dd_exact() - 5e5) <= 1e-3  # SLICOT documents 5.0000E+05
    G = DiscreteLTI(*_tustin(*_ab13dd_example()))
    exact = _discrete_exact(G, 2 * np.arctan(np.sqrt(2.0)), 1e-4)
    value, omega = hinf_norm(G)
    assert abs(value - exact) <= 1e-9 * exact
    assert abs(omega - 2 * np.arctan(np.sqrt(2.0))) <= 1e-5
    slycot = pytest.importorskip("slycot", reason="extra 'control' (slycot) not installed")
    ref = slycot.ab13dd("D", "I", "N", "D", 6, 1, 1, G.A, np.eye(6), G.B, G.C, G.D)[0]
    assert abs(ref - exact) <= 1e-9 * exact  # live: AB13DD on the same data


# ------------------------------------------------------------------------------- pyMOR


def _conv_diff_1d_fd(n, a=1.0, b=0.1):
    """pymortests/algorithms/lyapunov.py::conv_diff_1d_fd(n, a, b, cont_time=False):
    explicit Euler step I + dt A of a 1D convection-diffusion finite-difference operator."""
    A = (np.diag(-a * 2 * (n + 1) ** 2 * np.ones(n))
         + np.diag((a * (n + 1) ** 2 + b * (n + 1) / 2) * np.ones(n - 1), -1)
         + np.diag((a * (n + 1) ** 2 - b * (n + 1) / 2) * np.ones(n - 1), 1))
    dt = 0.1 / (4 * a * (n + 1) ** 2 + b * (n + 1))
    return np.eye(n) + dt * A, dt


def _conv_diff_1d_fem(n, a=1.0, b=0.1):
    """conv_diff_1d_fem(..., cont_time=False): E + dt A with the FEM mass matrix E."""
    A, dt = _conv_diff_1d_fd(n, a, b)
    E = (np.diag(2 / 3 * np.ones(n)) + np.diag(1 / 6 * np.ones(n - 1), -1)
         + np.diag(1 / 6 * np.ones(n - 1), 1))
    return E + (A - np.eye(n)), E


def _pymor_relative_residual(A, E, B, X, trans):
    """pyMOR's relative_residual(..., cont_time=False): ||A X A^T - E X E^T + B B^T||_F /
    ||B B^T||_F (transposed: A^T X A - E^T X E + C^T C)."""
    E = np.eye(A.shape[0]) if E is None else E
    if trans:
        A, E, B = A.T, E.T, B.T
    BBt = B @ B.T
    return np.linalg.norm(A @ X @ A.T - E @ X @ E.T + BBt) / np.linalg.norm(BBt)


@pytest.mark.parametrize("n", [10, 20])
@pytest.mark.parametrize("m", [1, 2])
@pytest.mark.parametrize("with_E", [False, True])
@pytest.mark.parametrize("trans", [False, True])
def test_pymor_disc_lrcf_and_dense(n, m, with_E, trans):
    """test_disc_lrcf / test_disc_dense: relative residual < 1e-10, at most n columns. The
    descriptor case (E, which lti does not take) is solved as E^{-1} A, E^{-1} B; the
    residual is measured in pyMOR's descriptor form."""
    rng = np.random.default_rng(0)
    if with_E:
        A, E = _conv_diff_1d_fem(n)
    else:
        (A, _), E = _conv_diff_1d_fd(n), None
    B = rng.standard_normal((n, m))
    if trans:
        B = B.T  # pyMOR passes C = B^T of shape (m, n)
    Ei = np.eye(n) if E is None else np.linalg.inv(E)
    if not trans:
        Z = lyapunov_factor(Ei @ A, Ei @ B)
    else:  # A^T X A - E^T X E + C^T C = 0  <=>  (A E^-1)^T X (A E^-1) - X + E^-T C^T C E^-1
        Z = lyapunov_factor(A @ Ei, (B @ Ei).T, transpose=True)
    assert Z.shape[1] <= n
    assert _pymor_relative_residual(A, E, B, Z @ Z.T, trans) < 1e-10
    X = solve_discrete_lyapunov((A @ Ei).T if trans else Ei @ A,
                                (Ei.T @ B.T @ B @ Ei) if trans else Ei @ B @ B.T @ Ei.T)
    assert _pymor_relative_residual(A, E, B, X, trans) < 1e-10
