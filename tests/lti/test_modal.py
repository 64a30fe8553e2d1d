"""Tests of lti.modal: closed-form Gramian factors of diagonal and complex-pair (modal)
systems against the dense path (Hammarling on the same quasi-triangular A), including the
graded realisations on which a factor of the closed-form Gramian matrix loses the small
Hankel singular values, and the dispatch in lti.gramians / balanced truncation."""

from __future__ import annotations

import numpy as np
import pytest

import lti.modal
from lti import (
    DiscreteLTI,
    SchurForm,
    UnstableSystemError,
    balanced_truncation,
    gramian_factors,
    hankel_singular_values,
    solve_discrete_lyapunov,
)
from lti.gramians import stable_gramian_factors
from lti.modal import modal_form, modal_gramian_factors, stein_factors_diagonal


def _modal_system(rng, k, nreal, m, p, rmax=0.999, scale=None):
    """k conjugate pairs and nreal real modes (from_diagonal layout, 2k + nreal states)."""
    lam = rng.uniform(0.3, rmax, k) * np.exp(1j * rng.uniform(0.01, 3.1, k))
    b = rng.standard_normal((k, m)) + 1j * rng.standard_normal((k, m))
    c = rng.standard_normal((p, k)) + 1j * rng.standard_normal((p, k))
    ar = rng.uniform(-rmax, rmax, nreal)
    br, cr = rng.standard_normal((nreal, m)), rng.standard_normal((p, nreal))
    if scale is not None:  # graded: pair i scaled by scale[i] in B and 1/scale[i] in C
        b, c = b * scale[:k, None], c / scale[None, :k]
    return DiscreteLTI.from_diagonal(np.r_[lam, ar, lam.conj()], np.vstack([b, br, b.conj()]),
                                     np.hstack([c, cr, c.conj()]) / 2)


def _dense_factors(G):
    """The dense path on the same (already quasi-triangular) A: Hammarling via SchurForm."""
    F = stable_gramian_factors(G, schur=SchurForm(G.A, np.eye(G.n)))
    assert F.path == "schur"
    return F.Lc, F.Lo


def _hsv(Lc, Lo):
    return np.linalg.svd(Lo.T @ Lc, compute_uv=False)


# ------------------------------------------------------------------ detection


def test_modal_form_detects_diagonal_and_pairs():
    rng = np.random.default_rng(0)
    G = _modal_system(rng, 3, 2, 1, 1)
    lam, pairs = modal_form(G.A)
    np.testing.assert_allclose(np.sort_complex(lam), np.sort_complex(np.linalg.eigvals(G.A)),
                               rtol=1e-14, atol=1e-15)
    assert pairs.size == 3
    lam_d, pairs_d = modal_form(np.diag([0.5, -0.2, 0.0]))
    assert pairs_d.size == 0 and np.all(lam_d.imag == 0)


@pytest.mark.parametrize(
    "A",
    [
        np.array([[0.5, 0.1], [0.0, 0.3]]),  # triangular
        np.array([[0.5, 0.2], [-0.1, 0.5]]),  # not a rotation block
        np.array([[0.5, 0.2], [-0.2, 0.4]]),  # unequal diagonal
        np.array([[0.5, 0.2, 0.0], [-0.2, 0.5, 0.3], [0.0, -0.3, 0.5]]),  # chained blocks
        np.array([[0.5, 0.0, 0.1], [0.0, 0.2, 0.0], [0.0, 0.0, 0.3]]),  # outside the band
    ],
)
def test_modal_form_rejects_other_matrices(A):
    assert modal_form(A) is None
    assert modal_gramian_factors(A, np.ones((A.shape[0], 1)), np.ones((1, A.shape[0]))) is None


# ------------------------------------------------------- against the dense path


@pytest.fixture(params=["auto", "generator"])
def branch(request, monkeypatch):
    """Both ways to the factor: "auto" (scaled Cholesky of the closed form where it is well
    conditioned, else the generator algorithm) and the generator algorithm forced."""
    if request.param == "generator":
        monkeypatch.setattr(lti.modal, "CHOL_RCOND", np.inf)
    return request.param


@pytest.mark.parametrize(("k", "nreal", "m", "p"), [(0, 6, 2, 3), (4, 0, 1, 1), (3, 2, 3, 2),
                                                    (16, 0, 576, 576), (8, 16, 40, 7)])
def test_factors_match_the_dense_path(k, nreal, m, p, branch):
    rng = np.random.default_rng(k + 10 * nreal + m)
    G = _modal_system(rng, k, nreal, m, p)
    F = stable_gramian_factors(G)
    assert F.path == "modal"
    Lc, Lo = _dense_factors(G)
    P, Q = F.Lc @ F.Lc.T, F.Lo @ F.Lo.T
    np.testing.assert_allclose(P, Lc @ Lc.T, rtol=0, atol=1e-12 * np.abs(P).max())
    np.testing.assert_allclose(Q, Lo @ Lo.T, rtol=0, atol=1e-12 * np.abs(Q).max())
    # residuals of the Stein equations, relative to the data
    BB, CC = G.B @ G.B.T, G.C.T @ G.C
    assert np.linalg.norm(G.A @ P @ G.A.T - P + BB) <= 1e-13 * np.linalg.norm(P)
    assert np.linalg.norm(G.A.T @ Q @ G.A - Q + CC) <= 1e-13 * np.linalg.norm(Q)
    h, hd = _hsv(F.Lc, F.Lo), _hsv(Lc, Lo)
    np.testing.assert_allclose(h, hd, rtol=0, atol=1e-13 * hd[0])


def _eigh_factor(X):
    """Clipped eigendecomposition factor of a formed Gramian (the approach not taken)."""
    w, V = np.linalg.eigh(X)
    return V * np.sqrt(np.clip(w, 0, None))


def test_graded_realisation_keeps_every_hsv(branch):
    """B scaled by 1e-k and C by 1e+k on pair k: P and Q span 14 decades while the HSVs do
    not. A factor of the closed-form P (eigendecomposition) gets the HSVs wrong by more than
    1e-3 relative here; the generator algorithm matches the dense path to 1e-9 each."""
    rng = np.random.default_rng(3)
    scale = 10.0 ** -np.arange(8)
    G = _modal_system(rng, 8, 0, 3, 3, rmax=0.99, scale=scale)
    F = stable_gramian_factors(G)
    h, hd = _hsv(F.Lc, F.Lo), _hsv(*_dense_factors(G))
    np.testing.assert_allclose(h, hd, rtol=1e-9)
    P = solve_discrete_lyapunov(G.A, G.B @ G.B.T)
    Q = solve_discrete_lyapunov(G.A.T, G.C.T @ G.C)
    he = _hsv(_eigh_factor(P), _eigh_factor(Q))
    assert np.max(np.abs(he - hd) / hd) > 1e-3  # the case is hard


def test_balanced_truncation_same_as_dense_path():
    """The adapter case: 32 states (16 pairs), 576 inputs and outputs; the reduced model,
    HSVs and bounds equal the dense path's to rounding."""
    rng = np.random.default_rng(4)
    G = _modal_system(rng, 16, 0, 576, 576)
    a = balanced_truncation(G, order=8)
    Lc, Lo = _dense_factors(G)
    from lti import balanced_truncation_from_factors

    b = balanced_truncation_from_factors(G, Lc, Lo, order=8)
    np.testing.assert_allclose(a.hsv, b.hsv, rtol=0, atol=1e-12 * b.hsv[0])
    assert a.error_bound == pytest.approx(b.error_bound, rel=1e-10, abs=0)
    theta = np.array([0.0, 0.3, 1.0, 3.0])
    Ha, Hb = a.reduced.frequency_response(theta), b.reduced.frequency_response(theta)
    np.testing.assert_allclose(Ha, Hb, rtol=0, atol=1e-9 * np.abs(Hb).max())


def test_real_diagonal_against_closed_form_solution():
    rng = np.random.default_rng(5)
    a = rng.uniform(-0.999, 0.999, 20)
    B = rng.standard_normal((20, 3))
    G = DiscreteLTI(np.diag(a), B, rng.standard_normal((2, 20)))
    Lc, _ = gramian_factors(G)
    P = solve_discrete_lyapunov(a, B @ B.T)  # closed form (B B^T)_ij / (1 - a_i a_j)
    np.testing.assert_allclose(Lc @ Lc.T, P, rtol=0, atol=1e-12 * np.abs(P).max())


# ------------------------------------------------------------------ edge cases


def test_adapter_case_takes_the_cholesky_branch(monkeypatch):
    """N = 32, 576 channels, modes scaled over 6 decades in B (and back in C): P itself is
    ill-conditioned, its diagonally scaled form is not, so no generator loop is needed."""
    rng = np.random.default_rng(8)
    G = _modal_system(rng, 16, 0, 576, 576, scale=10.0 ** -np.linspace(0, 6, 16))

    def no_loop(*args, **kwargs):
        raise AssertionError("generator algorithm used")

    monkeypatch.setattr(lti.modal, "stein_factors_diagonal", no_loop)
    Lc, Lo, _ = modal_gramian_factors(G.A, G.B, G.C)
    np.testing.assert_allclose(_hsv(Lc, Lo), _hsv(*_dense_factors(G)), rtol=1e-11)


def test_ill_conditioned_case_takes_the_generator_branch(monkeypatch):
    """One input, nearby poles: the scaled Gramian is nearly singular; the generator
    algorithm is used and matches the dense path."""
    rng = np.random.default_rng(9)
    G = _modal_system(rng, 6, 0, 1, 1)
    calls = []
    real_loop = lti.modal.stein_factors_diagonal
    monkeypatch.setattr(lti.modal, "stein_factors_diagonal",
                        lambda *a, **k: calls.append(1) or real_loop(*a, **k))
    Lc, Lo, _ = modal_gramian_factors(G.A, G.B, G.C)
    assert len(calls) == 2
    hd = _hsv(*_dense_factors(G))
    np.testing.assert_allclose(_hsv(Lc, Lo), hd, rtol=0, atol=1e-13 * hd[0])


def test_rank_deficient_and_zero_inputs(branch):
    rng = np.random.default_rng(6)
    G = _modal_system(rng, 5, 2, 1, 1)
    B = G.B.copy()
    B[:4] = 0.0  # two pairs unreachable
    G2 = DiscreteLTI(G.A, B, G.C)
    F = stable_gramian_factors(G2)
    P = F.Lc @ F.Lc.T
    assert np.all(np.isfinite(F.Lc))
    assert np.abs(P[:4]).max() <= 1e-15 * np.abs(P).max()
    h = hankel_singular_values(G2)
    assert np.count_nonzero(h > 1e-12 * h[0]) == G.n - 4
    Z = DiscreteLTI(G.A, np.zeros_like(G.B), G.C)
    assert not np.any(stable_gramian_factors(Z).Lc)


def test_unstable_modal_system_is_refused():
    G = DiscreteLTI.from_diagonal([0.5, 0.99 + 0.2j, 0.99 - 0.2j], np.ones((3, 1)),
                                  np.ones((1, 3)))
    with pytest.raises(UnstableSystemError, match="got 1.0"):
        gramian_factors(G)


def test_stein_factors_diagonal_residual_complex():
    rng = np.random.default_rng(7)
    n = 12
    f = 0.95 * rng.uniform(0, 1, n) * np.exp(1j * rng.uniform(0, np.pi, n))
    Gm = rng.standard_normal((n, 3)) + 1j * rng.standard_normal((n, 3))
    (L,) = stein_factors_diagonal(f[None, :], [Gm])
    X = L @ L.conj().T
    R = X - f[:, None] * X * f.conj()[None, :] - Gm @ Gm.conj().T
    assert np.linalg.norm(R) <= 1e-14 * np.linalg.norm(X)
    assert np.allclose(np.triu(L, 1), 0)  # lower triangular
