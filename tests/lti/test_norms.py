"""Tests of lti.norms: H2 (vs impulse-response energy), Hankel (vs HSVs), exact H-infinity
(vs closed forms, a dense grid and slycot AB13DD)."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

from lti import (
    DiscreteLTI,
    InvalidArgumentError,
    UnstableSystemError,
    h2_norm,
    hankel_norm,
    hankel_singular_values,
    hinf_norm,
)
from lti.norms import HinfNorm


def _sigma_max(G, theta):
    H = G.frequency_response(theta)
    return np.linalg.svd(H, compute_uv=False)[:, 0]


def _random_system(rng, n, m, p, rho, feedthrough=True):
    A = rng.standard_normal((n, n))
    A *= rho / np.max(np.abs(np.linalg.eigvals(A)))
    D = rng.standard_normal((p, m)) if feedthrough else None
    return DiscreteLTI(A, rng.standard_normal((n, m)), rng.standard_normal((p, n)), D)


def _resonant_system(rng, n, m, p):
    """Lightly damped pole pairs (1 - |lambda| down to 1e-4) in a conditioned basis."""
    k = n // 2
    r = 1.0 - 10.0 ** rng.uniform(-4, -1, k)
    th = rng.uniform(0.05, np.pi - 0.05, k)
    a = np.concatenate([r * np.exp(1j * th), r * np.exp(-1j * th)])
    B = rng.standard_normal((k, m)) + 1j * rng.standard_normal((k, m))
    C = rng.standard_normal((p, k)) + 1j * rng.standard_normal((p, k))
    G = DiscreteLTI.from_diagonal(
        a, np.vstack([B, B.conj()]), np.hstack([C, C.conj()]), rng.standard_normal((p, m))
    )
    Q1, _ = np.linalg.qr(rng.standard_normal((G.n, G.n)))
    Q2, _ = np.linalg.qr(rng.standard_normal((G.n, G.n)))
    return G.similarity(Q1 @ np.diag(np.logspace(0, 1, G.n)) @ Q2)


# ------------------------------------------------------------------------------ H2


def test_h2_equals_impulse_energy():
    rng = np.random.default_rng(0)
    G = _random_system(rng, 12, 2, 3, 0.6)
    energy = np.sum(G.D**2) + np.sum(G.markov(400) ** 2)  # 0.6^400: tail negligible
    assert abs(h2_norm(G) ** 2 - energy) <= 1e-12 * energy


def test_h2_diagonal_and_control_input():
    control = pytest.importorskip("control", reason="extra 'control' not installed")
    a = np.array([0.9, -0.5, 0.2])
    G = DiscreteLTI(np.diag(a), np.ones((3, 1)), np.ones((1, 3)))
    exact = np.sqrt(np.sum(1.0 / (1.0 - np.outer(a, a))))  # sum_ij c_i b_i c_j b_j/(1-a_i a_j)
    assert abs(h2_norm(G) - exact) <= 1e-13 * exact
    sys = control.ss(G.A, G.B, G.C, G.D, 0.1)
    assert abs(h2_norm(sys) - exact) <= 1e-13 * exact


def test_h2_unstable_raises():
    G = DiscreteLTI([[1.01]], [[1.0]], [[1.0]])
    with pytest.raises(UnstableSystemError, match="1.01"):
        h2_norm(G)


# -------------------------------------------------------------------------- Hankel


def test_hankel_norm_is_first_hsv_and_below_hinf():
    rng = np.random.default_rng(1)
    G = _random_system(rng, 10, 2, 2, 0.9)
    hsv = hankel_singular_values(G)
    assert hankel_norm(G) == hsv[0]
    # sigma_1 <= ||G - D||_inf (the Hankel operator ignores D)
    G0 = DiscreteLTI(G.A, G.B, G.C)
    assert hankel_norm(G) <= hinf_norm(G0).value * (1 + 1e-12)


# ---------------------------------------------------------------------------- Hinf


@pytest.mark.parametrize("a", [0.5, -0.5, 0.99])
def test_hinf_first_order_closed_form(a):
    # 1/(z - a): peak 1/(1 - |a|) at z = sign(a)
    value, omega = hinf_norm(DiscreteLTI([[a]], [[1.0]], [[1.0]]))
    assert abs(value - 1.0 / (1.0 - abs(a))) <= 1e-13 / (1.0 - abs(a))
    assert omega == (0.0 if a > 0 else np.pi)


def test_hinf_resonance_peak_frequency():
    # pole pair r e^{+-j th} with r close to 1: the peak sits next to th and is ~1/(1-r)
    r, th = 0.999, 1.3
    a = np.array([r * np.exp(1j * th), r * np.exp(-1j * th)])
    G = DiscreteLTI.from_diagonal(a, np.array([[1.0], [1.0]]), np.array([[0.5, 0.5]]))
    res = hinf_norm(G)
    value, omega = res
    assert abs(omega - th) < 1e-3
    fine = np.linspace(th - 2e-3, th + 2e-3, 40001)
    assert value >= _sigma_max(G, fine).max() * (1 - 1e-12)
    # the gain at the returned frequency, up to the reported accuracy of its evaluation
    assert abs(_sigma_max(G, [omega])[0] - value) <= res.accuracy * value
    assert res.accuracy < 1e-9


def test_hinf_allpass_and_static():
    # first-order all-pass (a z - 1)/(z - a): |G| = 1 on the whole circle
    a = 0.7
    G = DiscreteLTI([[a]], [[1.0]], [[a * a - 1.0]], [[a]])
    value, _ = hinf_norm(G)
    assert abs(value - 1.0) <= 1e-12
    D = np.array([[3.0, 0.0], [0.0, 4.0]])
    static = DiscreteLTI(np.zeros((0, 0)), np.zeros((0, 2)), np.zeros((2, 0)), D)
    assert hinf_norm(static) == HinfNorm(4.0, 0.0)


def test_hinf_at_least_dense_grid_and_attained():
    rng = np.random.default_rng(2)
    theta = np.linspace(0.0, np.pi, 20001)
    for trial in range(30):
        n = int(rng.integers(1, 25))
        G = (
            _random_system(rng, n, 2, 3, [0.5, 0.9, 0.99][trial % 3], feedthrough=trial % 2 == 0)
            if trial % 4
            else _resonant_system(rng, max(n, 2), 2, 2)
        )
        res = hinf_norm(G)
        value, omega = res
        assert value >= _sigma_max(G, theta).max() * (1 - 1e-12)
        # the value is the gain at the returned frequency, up to the reported accuracy
        assert abs(_sigma_max(G, [omega])[0] - value) <= res.accuracy * value


def test_hinf_agrees_with_slycot_ab13dd():
    slycot = pytest.importorskip("slycot", reason="extra 'control' (slycot) not installed")
    rng = np.random.default_rng(3)
    worst = 0.0
    for trial in range(60):
        n = int(rng.integers(1, 40))
        m, p = int(rng.integers(1, 4)), int(rng.integers(1, 4))
        if trial % 3 == 2:
            G = _resonant_system(rng, max(n, 2), m, p)
        else:
            G = _random_system(rng, n, m, p, [0.5, 0.9, 0.99, 0.999][trial % 4], trial % 2 == 0)
        value, _ = hinf_norm(G)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            ref, _ = slycot.ab13dd(
                "D", "I", "N", "D", G.n, G.m, G.p, G.A, np.eye(G.n), G.B, G.C, G.D, 1e-12
            )
        worst = max(worst, abs(value - ref) / ref)
    assert worst <= 1e-8, worst


def test_hinf_control_statespace_and_unstable():
    control = pytest.importorskip("control", reason="extra 'control' not installed")
    sys = control.ss([[0.5]], [[1.0]], [[1.0]], [[0.0]], True)
    assert abs(hinf_norm(sys).value - 2.0) <= 1e-13
    with pytest.raises(InvalidArgumentError, match="dt"):
        hinf_norm(control.ss([[-1.0]], [[1.0]], [[1.0]], [[0.0]]))  # continuous time
    with pytest.raises(UnstableSystemError, match="1.2"):
        hinf_norm(DiscreteLTI([[1.2]], [[1.0]], [[1.0]]))


@pytest.mark.parametrize("tol", [0.0, -1e-3, 0.5, float("nan"), "1e-8", True])
def test_hinf_bad_tol(tol):
    with pytest.raises(InvalidArgumentError, match="tol"):
        hinf_norm(DiscreteLTI([[0.5]], [[1.0]], [[1.0]]), tol=tol)


def test_norms_reject_non_systems():
    with pytest.raises(InvalidArgumentError, match="sys"):
        hinf_norm(np.eye(2))


@pytest.mark.parametrize("shape", [(6, 40, 3), (6, 3, 40), (5, 30, 30)])
@pytest.mark.parametrize("feedthrough", [True, False])
def test_hinf_compresses_wide_and_tall_systems(shape, feedthrough, monkeypatch):
    import lti.norms as norms

    n, m, p = shape
    rng = np.random.default_rng(sum(shape))
    A = rng.standard_normal((n, n))
    A *= 0.9 / np.max(np.abs(np.linalg.eigvals(A)))
    G = DiscreteLTI(A, rng.standard_normal((n, m)), rng.standard_normal((p, n)),
                    rng.standard_normal((p, m)) if feedthrough else None)
    Gc = norms._compress_io(G)
    k = n + p if feedthrough else n
    assert Gc.m == min(m, k) and Gc.p <= (n + Gc.m if feedthrough else n) and Gc.n == n
    theta = np.linspace(0.0, np.pi, 33)
    s, sc = (np.linalg.svd(H.frequency_response(theta), compute_uv=False) for H in (G, Gc))
    assert np.allclose(s[:, : sc.shape[1]], sc, rtol=1e-12, atol=0)
    fast = hinf_norm(G)
    monkeypatch.setattr(norms, "_compress_io", lambda H: H)  # uncompressed reference
    slow = hinf_norm(G)
    assert abs(fast.value - slow.value) <= 1e-10 * slow.value
    assert abs(np.exp(1j * fast.omega) - np.exp(1j * slow.omega)) <= 1e-4
