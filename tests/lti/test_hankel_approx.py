"""Tests of lti.hankel: Glover's optimal Hankel-norm approximation in discrete time.

The two properties (Hankel error = sigma_{r+1}; H-infinity error <= sum of the distinct
tail HSVs), each measured independently of the construction (the Hankel error from lti's
Gramian factors of the error system, the H-infinity error by SLICOT AB13DD or a dense
frequency sweep with local refinement, never ``lti.hinf_norm``); the all-pass error of a
one-step reduction; the Cayley (bilinear) map's invariance of Gramians, HSVs and the
H-infinity norm; multiple HSVs, r = 0, non-minimal input, MIMO; typed errors.
"""

from __future__ import annotations

import importlib.util
import warnings

import numpy as np
import pytest
import scipy.linalg as sla
from scipy.optimize import minimize_scalar

from lti import (
    DiscreteLTI,
    HankelNormApproximation,
    InvalidArgumentError,
    NonFiniteError,
    UnstableSystemError,
    controllability_gramian,
    gramian_factors,
    hankel_norm_approximation,
    hankel_singular_values,
    observability_gramian,
)
from lti.hankel import TIE_RTOL, cayley_to_continuous, cayley_to_discrete

HAVE_SLYCOT = importlib.util.find_spec("slycot") is not None


# ------------------------------------------------------------------ test systems


def _dense(rng, n, m, p, rho):
    A = rng.standard_normal((n, n))
    A *= rho / np.max(np.abs(np.linalg.eigvals(A)))
    return DiscreteLTI(A, rng.standard_normal((n, m)), rng.standard_normal((p, n)),
                       rng.standard_normal((p, m)))


def _resonant(rng, k, m, p):
    """k lightly damped complex pairs, |lambda| = 1 - 1e-4 ... 1 - 1e-1 (2k states)."""
    lam = (1.0 - 10.0 ** rng.uniform(-4, -1, k)) * np.exp(1j * rng.uniform(0.05, 3.0, k))
    b = rng.standard_normal((k, m)) + 1j * rng.standard_normal((k, m))
    c = rng.standard_normal((p, k)) + 1j * rng.standard_normal((p, k))
    return DiscreteLTI.from_diagonal(np.r_[lam, lam.conj()], np.vstack([b, b.conj()]),
                                     np.hstack([c, c.conj()]) / 2, rng.standard_normal((p, m)))


def _nonnormal(rng, n, m, p):
    """Issue 14's family: Q (triu(2 randn, 1) + diag(U(-0.95, 0.95))) Q^T."""
    T = np.triu(2 * rng.standard_normal((n, n)), 1) + np.diag(rng.uniform(-0.95, 0.95, n))
    Q = np.linalg.qr(rng.standard_normal((n, n)))[0]
    return DiscreteLTI(Q @ T @ Q.T, rng.standard_normal((n, m)), rng.standard_normal((p, n)),
                       rng.standard_normal((p, m)))


def _diagonal(rng, n, m, p):
    return DiscreteLTI(np.diag(rng.uniform(-0.99, 0.99, n)), rng.standard_normal((n, m)),
                       rng.standard_normal((p, n)), rng.standard_normal((p, m)))


def _cases():
    """(id, system, order) over the families: dense SISO/MIMO (m != p too), resonant,
    diagonal; orders from 0 to n - 1."""
    rng = np.random.default_rng(20261201)
    out = []
    for i in range(6):
        n, m, p = int(rng.integers(3, 14)), int(rng.integers(1, 4)), int(rng.integers(1, 4))
        G = _dense(rng, n, m, p, rho=rng.uniform(0.3, 0.99))
        out.append((f"dense{i}-{n}x{m}x{p}", G, int(rng.integers(0, n))))
    for i in range(4):
        k, m, p = int(rng.integers(2, 7)), int(rng.integers(1, 3)), int(rng.integers(1, 3))
        G = _resonant(rng, k, m, p)
        out.append((f"resonant{i}-{2 * k}x{m}x{p}", G, int(rng.integers(0, 2 * k))))
    for i in range(3):
        n, m, p = int(rng.integers(3, 14)), int(rng.integers(1, 3)), int(rng.integers(1, 3))
        G = _diagonal(rng, n, m, p)
        out.append((f"diagonal{i}-{n}x{m}x{p}", G, int(rng.integers(0, n))))
    for i in range(3):
        n, m, p = int(rng.integers(3, 12)), int(rng.integers(1, 3)), int(rng.integers(1, 3))
        G = _nonnormal(rng, n, m, p)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            nmin = hankel_norm_approximation(G, order=n).minimal_order
        out.append((f"nonnormal{i}-{n}x{m}x{p}", G, int(rng.integers(0, nmin))))
    return out


CASES = _cases()
IDS = [c[0] for c in CASES]


# ------------------------------------------------------- independent measurements


def _hinf_sweep(E: DiscreteLTI, k: int = 4001) -> float:
    """max_theta sigma_max(E(e^{j theta})): dense grid, then a bounded scalar search around
    the best grid points (a lower bound of the H-infinity norm, converging to it)."""
    def smax(theta):
        z = np.exp(1j * theta)
        H = E.C @ np.linalg.solve(z * np.eye(E.n) - E.A, E.B) + E.D if E.n else E.D
        return float(np.linalg.svd(np.atleast_2d(H), compute_uv=False)[0])

    grid = np.linspace(0.0, np.pi, k)
    vals = np.array([smax(t) for t in grid])
    best = float(vals.max())
    h = grid[1] - grid[0]
    for i in np.argsort(vals)[-5:]:
        lo, hi = max(grid[i] - h, 0.0), min(grid[i] + h, np.pi)
        opt = minimize_scalar(lambda t: -smax(t), bounds=(lo, hi), method="bounded",
                              options={"xatol": 1e-12})
        best = max(best, -float(opt.fun))
    return best


def _hinf_ab13dd(E: DiscreteLTI) -> float:
    import slycot

    if E.n == 0:
        return float(np.linalg.norm(E.D, 2))
    gpeak, _ = slycot.ab13dd("D", "I", "N", "D", E.n, E.m, E.p, E.A.copy(), np.eye(E.n),
                             E.B.copy(), E.C.copy(), E.D.copy(), tol=1e-12)
    return float(gpeak)


def _hinf(E: DiscreteLTI, scale: float = 0.0) -> float:
    """AB13DD where installed, checked against the sweep (agreement to 1e-4 relative, or
    1e-8 * `scale` absolute for errors at rounding level; AB13DD can be the lower one on
    non-normal error systems); the larger of the two."""
    sweep = _hinf_sweep(E)
    if not HAVE_SLYCOT:
        return sweep
    exact = _hinf_ab13dd(E)
    assert abs(sweep - exact) <= 1e-4 * exact + 1e-8 * scale
    return max(exact, sweep)


def _hankel_norm_of(E: DiscreteLTI) -> float:
    """Largest HSV of the (stable) error system from lti's Gramian factors."""
    Lc, Lo = gramian_factors(E)
    return float(np.linalg.svd(Lo.T @ Lc, compute_uv=False)[0])


def _hna(G, order):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # tie/minimality warnings are tested separately
        return hankel_norm_approximation(G, order=order)


# ----------------------------------------------------------------- the properties


@pytest.mark.parametrize(("name", "G", "r"), CASES, ids=IDS)
def test_hankel_error_equals_sigma_r_plus_1(name, G, r):
    res = _hna(G, r)
    E = G - res.reduced
    measured = _hankel_norm_of(E)
    assert res.hankel_error == res.hsv[res.order]
    # the HSVs of a strongly non-normal error system are themselves less accurate
    tol = 1e-6 if name.startswith("nonnormal") else 1e-9
    assert abs(measured - res.hankel_error) <= tol * res.hsv[0]


@pytest.mark.parametrize(("name", "G", "r"), CASES, ids=IDS)
def test_hinf_error_within_glover_bound(name, G, r):
    res = _hna(G, r)
    err = _hinf(G - res.reduced, scale=res.hsv[0])
    assert res.lower_bound <= err <= res.error_bound  # literally, rounding included
    assert res.lower_bound == max(res.hankel_error - res.rounding_term, 0.0)
    # the bound is Glover's (distinct tail counted once), not a loose one
    distinct = [res.hsv[res.order]]
    for s in res.hsv[res.order + 1 : res.minimal_order]:
        if distinct[-1] - s > TIE_RTOL * distinct[-1]:
            distinct.append(s)
    assert res.tail == pytest.approx(sum(distinct), rel=1e-12, abs=0)
    if not name.startswith("nonnormal"):  # there kappa = ||T|| ||Ti|| makes it large
        assert res.rounding_term <= 1e-3 * res.tail  # the rounding does not swallow it


@pytest.mark.parametrize(("name", "G", "r"), CASES, ids=IDS)
def test_reduced_model_is_stable_of_order_r(name, G, r):
    res = _hna(G, r)
    assert isinstance(res, HankelNormApproximation)
    assert res.reduced.n == res.order == r  # distinct random HSVs: no tie lowers r
    assert res.reduced.n == 0 or res.reduced.spectral_radius() < 1.0
    assert res.reduced.dt == G.dt
    assert not res.hsv.flags.writeable


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_one_step_error_is_all_pass(seed):
    """r = n - 1 with distinct HSVs: no antistable part, D_r = D - sigma U, and G - G_r is
    sigma_n times an inner function: every singular value of E(e^{j theta}) is sigma_n."""
    rng = np.random.default_rng(seed)
    G = _dense(rng, 8, 2, 2, rho=0.9)
    res = _hna(G, 7)
    E = G - res.reduced
    theta = np.linspace(0, np.pi, 301)
    s = np.linalg.svd(E.frequency_response(theta), compute_uv=False)  # (301, 2)
    sigma = res.hsv[7]
    assert np.max(np.abs(s - sigma)) <= 1e-8 * sigma


def test_r0_gives_a_constant():
    rng = np.random.default_rng(5)
    G = _dense(rng, 6, 2, 3, rho=0.8)
    res = _hna(G, 0)
    assert res.order == res.reduced.n == 0
    assert _hankel_norm_of(G) == pytest.approx(res.hankel_error, rel=1e-12, abs=0)
    err = _hinf(G - res.reduced)
    assert res.hsv[0] * (1 - 1e-9) <= err <= res.error_bound


# ------------------------------------------------------------------- multiplicity


def test_multiple_hsv_counted_once_in_the_bound():
    """diag(G1, G1) has every HSV twice; the bound counts each distinct value once."""
    rng = np.random.default_rng(7)
    G1 = _dense(rng, 5, 1, 1, rho=0.85)
    G = DiscreteLTI(sla.block_diag(G1.A, G1.A), sla.block_diag(G1.B, G1.B),
                    sla.block_diag(G1.C, G1.C), sla.block_diag(G1.D, G1.D))
    hsv1 = hankel_singular_values(G1)
    for r in (0, 2, 4, 6, 8):
        res = hankel_norm_approximation(G, order=r)
        assert res.order == r and res.multiplicity == 2
        assert res.tail == pytest.approx(hsv1[r // 2 :].sum(), rel=1e-9, abs=0)
        E = G - res.reduced
        assert abs(_hankel_norm_of(E) - hsv1[r // 2]) <= 1e-9 * hsv1[0]
        err = _hinf(E)
        assert hsv1[r // 2] * (1 - 1e-9) <= err <= res.error_bound
        assert err <= hsv1[r // 2 :].sum() * (1 + 1e-9)  # below the once-counted tail


def test_order_splitting_a_tie_returns_the_tie_start():
    rng = np.random.default_rng(8)
    G1 = _dense(rng, 4, 1, 1, rho=0.8)
    G = DiscreteLTI(sla.block_diag(G1.A, G1.A), sla.block_diag(G1.B, G1.B),
                    sla.block_diag(G1.C, G1.C))
    with pytest.warns(UserWarning, match="splits tied"):
        res = hankel_norm_approximation(G, order=3)  # sigma_3 = sigma_4
    assert res.order == res.reduced.n == 2
    assert res.hankel_error == pytest.approx(res.hsv[3], rel=1e-9, abs=0)


def test_pure_delay_all_hsvs_equal():
    """z^{-n}: n equal HSVs (1); every order below n gives the constant 0 and error 1."""
    n = 6
    G = DiscreteLTI(np.diag(np.ones(n - 1), -1), np.eye(n)[:, :1], np.eye(n)[-1:])
    np.testing.assert_allclose(hankel_singular_values(G), 1.0, rtol=1e-12)
    with pytest.warns(UserWarning, match="splits tied"):
        res = hankel_norm_approximation(G, order=3)
    assert res.order == 0 and res.multiplicity == n
    assert res.tail == pytest.approx(1.0)
    assert _hinf(G - res.reduced) <= res.error_bound


# ----------------------------------------------------------------- realisations


def test_non_minimal_input_reduces_like_the_minimal_one():
    rng = np.random.default_rng(9)
    G = _dense(rng, 6, 1, 1, rho=0.9)
    # one uncontrollable and one unobservable state
    A = sla.block_diag(G.A, [[0.5]], [[-0.3]])
    B = np.vstack([G.B, [[0.0]], [[1.0]]])
    C = np.hstack([G.C, [[1.0]], [[0.0]]])
    Gnm = DiscreteLTI(A, B, C, G.D)
    a, b = _hna(G, 3), _hna(Gnm, 3)
    assert b.minimal_order == 6 and b.order == 3
    np.testing.assert_allclose(b.hsv[:6], a.hsv, rtol=1e-9)
    theta = np.linspace(0, np.pi, 101)
    np.testing.assert_allclose(b.reduced.frequency_response(theta),
                               a.reduced.frequency_response(theta), rtol=1e-8, atol=1e-10)
    with pytest.warns(UserWarning, match="minimal balanced realisation"):
        full = hankel_norm_approximation(Gnm, order=8)
    assert full.order == 6 and full.hankel_error == 0.0
    assert _hinf(Gnm - full.reduced, scale=full.hsv[0]) <= full.error_bound


def test_python_control_in_and_out():
    control = pytest.importorskip("control", reason="extra 'control' not installed")
    rng = np.random.default_rng(10)
    G = _dense(rng, 5, 1, 2, rho=0.7)
    sysc = control.ss(G.A, G.B, G.C, G.D, 0.1)
    res = hankel_norm_approximation(sysc, order=2)
    assert isinstance(res.reduced, control.StateSpace) and res.reduced.dt == 0.1
    ref = hankel_norm_approximation(DiscreteLTI(G.A, G.B, G.C, G.D, 0.1), order=2)
    np.testing.assert_allclose(res.reduced.D, ref.reduced.D, rtol=1e-12)


# ------------------------------------------------------------------ Cayley map


@pytest.mark.parametrize("seed", [0, 1])
def test_cayley_map_preserves_gramians_hsvs_and_hinf(seed):
    rng = np.random.default_rng(seed)
    G = _dense(rng, 7, 2, 3, rho=0.95)
    Ac, Bc, Cc, Dc = cayley_to_continuous(G.A, G.B, G.C, G.D)
    assert np.max(np.linalg.eigvals(Ac).real) < 0  # the disc maps into the left half-plane
    # continuous Gramians (scipy, independent of lti) equal the discrete ones
    Pc = sla.solve_continuous_lyapunov(Ac, -Bc @ Bc.T)
    Qc = sla.solve_continuous_lyapunov(Ac.T, -Cc.T @ Cc)
    P, Q = controllability_gramian(G), observability_gramian(G)
    np.testing.assert_allclose(Pc, P, rtol=0, atol=1e-10 * np.abs(P).max())
    np.testing.assert_allclose(Qc, Q, rtol=0, atol=1e-10 * np.abs(Q).max())
    hsv_c = np.sqrt(np.sort(np.abs(np.linalg.eigvals(Pc @ Qc)))[::-1])
    np.testing.assert_allclose(hsv_c, hankel_singular_values(G), rtol=1e-8)
    # G_d(e^{j theta}) = G_c(j tan(theta / 2)): the same values, so the same Hinf norm
    theta = np.linspace(0, np.pi - 1e-3, 400)
    Hd = G.frequency_response(theta)
    Hc = np.array([Cc @ np.linalg.solve(1j * np.tan(t / 2) * np.eye(7) - Ac, Bc) + Dc
                   for t in theta])
    np.testing.assert_allclose(Hc, Hd, rtol=1e-10, atol=1e-12 * np.abs(Hd).max())
    # and the inverse map returns the realisation
    for X, Y in zip(cayley_to_discrete(Ac, Bc, Cc, Dc), (G.A, G.B, G.C, G.D), strict=True):
        np.testing.assert_allclose(X, Y, rtol=0, atol=1e-12 * max(1.0, np.abs(Y).max()))


def test_result_commutes_with_the_sign_flip_of_z():
    """G(-z) has the same HSVs and Hankel/H-infinity geometry; its approximant is the
    approximant of G with z -> -z (the construction's frequency map is not special)."""
    rng = np.random.default_rng(11)
    G = _dense(rng, 6, 1, 1, rho=0.9)
    H = DiscreteLTI(-G.A, G.B, -G.C, G.D)
    a, b = _hna(G, 2), _hna(H, 2)
    np.testing.assert_allclose(a.hsv, b.hsv, rtol=1e-10)
    theta = np.linspace(0, np.pi, 50)
    # H(e^{j(pi - theta)}) = G(-e^{j(pi - theta)}) = G(e^{-j theta}) = conj G(e^{j theta})
    np.testing.assert_allclose(b.reduced.frequency_response(np.pi - theta),
                               np.conj(a.reduced.frequency_response(theta)), rtol=1e-8,
                               atol=1e-10)


# ----------------------------------------------------------------- bad input


def test_typed_errors():
    G = DiscreteLTI([[0.5, 0.1], [0.0, 0.2]], [[1.0], [1.0]], [[1.0, 0.0]])
    with pytest.raises(UnstableSystemError, match=r"spectral radius < 1\); got 1\.1"):
        hankel_norm_approximation(DiscreteLTI([[1.1]], [[1.0]], [[1.0]]), order=0)
    for bad in (-1, 3, 1.5, True, None, "1"):
        with pytest.raises(InvalidArgumentError, match="`order`"):
            hankel_norm_approximation(G, order=bad)
    with pytest.raises(InvalidArgumentError, match="DiscreteLTI"):
        hankel_norm_approximation(np.eye(2), order=1)
    with pytest.raises(NonFiniteError):
        hankel_norm_approximation(DiscreteLTI([[np.nan]], [[1.0]], [[1.0]]), order=0)
    with pytest.raises(TypeError):
        hankel_norm_approximation(G, 1)  # order is keyword-only


def test_continuous_python_control_system_is_refused():
    control = pytest.importorskip("control", reason="extra 'control' not installed")
    with pytest.raises(InvalidArgumentError):
        hankel_norm_approximation(control.ss([[-1.0]], [[1.0]], [[1.0]], [[0.0]]), order=0)
