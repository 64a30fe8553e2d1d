"""One implementation of the diagonal Stein factor (lti.modal.diagonal_stein_factor):
lyapunov_factor's diagonal path and the modal Gramian path agree and both call it."""

from __future__ import annotations

import numpy as np
import pytest

import lti.modal
from lti import DiscreteLTI, lyapunov_factor, solve_discrete_lyapunov
from lti.modal import diagonal_stein_factor, modal_gramian_factors


def _gram(L):
    return L @ L.conj().T


def _case(kind, n, m, seed):
    rng = np.random.default_rng(seed)
    r = rng.uniform(0.2, 0.995, n)
    a = r if kind == "real" else r * np.exp(1j * rng.uniform(-3.0, 3.0, n))
    B = rng.standard_normal((n, m))
    if kind == "complex":
        B = B + 1j * rng.standard_normal((n, m))
    return a, B


@pytest.fixture(params=["auto", "generator"])
def branch(request, monkeypatch):
    """"generator": force the Schur-algorithm branch (no scaled Cholesky)."""
    if request.param == "generator":
        monkeypatch.setattr(lti.modal, "CHOL_RCOND", np.inf)
    return request.param


@pytest.mark.parametrize("kind", ["real", "complex"])
@pytest.mark.parametrize("transpose", [False, True])
@pytest.mark.parametrize("n, m", [(1, 1), (7, 2), (20, 40)])
def test_lyapunov_factor_diagonal_is_the_modal_factor(kind, transpose, n, m, branch):
    a, B = _case(kind, n, m, seed=n + m)
    f = np.conj(a) if transpose else a
    expected = diagonal_stein_factor(f, B)
    for A in (a, np.diag(a)):  # 1-D diagonal and 2-D diagonal matrix, method "auto"
        L = lyapunov_factor(A, B, transpose=transpose)
        np.testing.assert_array_equal(L, expected)
        assert np.allclose(np.triu(L, 1), 0.0)
    # against the dense (Schur / Hammarling) path, independent of lti.modal
    Ad = np.diag(a)
    X = _gram(lyapunov_factor(Ad, B, transpose=transpose, method="hammarling"))
    Xd = _gram(expected)
    assert np.linalg.norm(Xd - X) <= 1e-12 * np.linalg.norm(X)
    M = Ad.conj().T if transpose else Ad
    res = M @ Xd @ M.conj().T - Xd + B @ B.conj().T
    assert np.linalg.norm(res) <= 1e-13 * np.linalg.norm(Xd)


def test_modal_gramian_factors_and_lyapunov_factor_agree_on_a_real_diagonal_system():
    rng = np.random.default_rng(3)
    n = 24
    a = rng.uniform(0.5, 0.999, n)
    B, C = rng.standard_normal((n, 576)), rng.standard_normal((576, n))
    Lc, Lo, rho = modal_gramian_factors(np.diag(a), B, C)
    np.testing.assert_allclose(Lc, lyapunov_factor(a, B), rtol=0, atol=1e-13 * np.abs(Lc).max())
    np.testing.assert_allclose(Lo, lyapunov_factor(a, C.T, transpose=True), rtol=0,
                               atol=1e-13 * np.abs(Lo).max())
    assert rho == pytest.approx(a.max())


def test_complex_pair_system_matches_the_complex_diagonal_factor():
    """from_diagonal's real 2x2 blocks (modal path) vs lyapunov_factor of the complex
    diagonal: same Gramian after the unitary change of variables."""
    lam = np.array([0.9 + 0.3j, 0.9 - 0.3j, 0.5, -0.7 + 0.1j, -0.7 - 0.1j])
    rng = np.random.default_rng(5)
    b = rng.standard_normal((5, 3)) + 1j * rng.standard_normal((5, 3))
    b[1], b[4] = b[0].conj(), b[3].conj()
    b[2] = b[2].real
    G = DiscreteLTI.from_diagonal(lam, b, np.ones((1, 5)))
    Lc, _, _ = modal_gramian_factors(G.A, G.B, G.C)
    P = Lc @ Lc.T
    # diag(lam) = T^{-1} A T with the eigenvectors T of the real block form
    w, T = np.linalg.eig(G.A)
    Pc = _gram(lyapunov_factor(w, np.linalg.solve(T, G.B)))
    np.testing.assert_allclose(T @ Pc @ T.conj().T, P, atol=1e-12 * np.abs(P).max())
    np.testing.assert_allclose(P, solve_discrete_lyapunov(G.A, G.B @ G.B.T),
                               atol=1e-12 * np.abs(P).max())


def test_both_entry_points_run_the_same_code(monkeypatch):
    calls = []
    inner = lti.modal._closed_form_factor

    def spy(*args):
        calls.append(len(args[0]))
        return inner(*args)

    monkeypatch.setattr(lti.modal, "_closed_form_factor", spy)
    a = np.array([0.9, 0.5, -0.3])
    lyapunov_factor(a, np.ones((3, 1)))
    lyapunov_factor(np.diag(a), np.ones((3, 1)), transpose=True, method="diagonal")
    modal_gramian_factors(np.diag(a), np.ones((3, 1)), np.ones((1, 3)))
    assert calls == [3, 3, 3, 3]


def test_ill_conditioned_diagonal_takes_the_generator_branch_accurately():
    """Nearly equal poles and one input: the scaled closed form is numerically singular
    (Schur-algorithm branch); the factor still solves the equation."""
    a = 0.99 - 1e-9 * np.arange(6)
    B = np.ones((6, 1))
    L = lyapunov_factor(a, B)
    assert lti.modal._scaled_cholesky(a, B @ B.T) is None
    X = _gram(L)
    res = np.diag(a) @ X @ np.diag(a) - X + B @ B.T
    assert np.linalg.norm(res) <= 1e-12 * np.linalg.norm(X)


def test_zero_right_hand_side_and_empty_system():
    assert not np.any(lyapunov_factor(np.array([0.5, 0.2]), np.zeros((2, 1))))
    assert lyapunov_factor(np.zeros(0), np.zeros((0, 1))).shape == (0, 0)


@pytest.mark.parametrize("kind", ["real", "complex"])
@pytest.mark.parametrize("transpose", [False, True])
def test_well_conditioned_case_takes_the_cholesky_branch(kind, transpose, monkeypatch):
    """Many inputs (m >= n): the scaled closed form is well conditioned, no Schur loop."""

    def no_loop(*args):
        raise AssertionError("the generator (Schur algorithm) branch was taken")

    monkeypatch.setattr(lti.modal, "stein_factors_diagonal", no_loop)
    a, B = _case(kind, 20, 40, seed=60)
    L = lyapunov_factor(a, B, transpose=transpose)
    M = np.diag(np.conj(a) if transpose else a)
    X = _gram(L)
    res = M @ X @ M.conj().T - X + B @ B.conj().T
    assert np.linalg.norm(res) <= 1e-13 * np.linalg.norm(X)


def test_few_inputs_go_straight_to_the_generator(monkeypatch):
    """k <= n / 4: the scaled closed form is not tried (never well conditioned there)."""
    tried = []
    inner = lti.modal._scaled_cholesky
    monkeypatch.setattr(lti.modal, "_scaled_cholesky",
                        lambda f, S: tried.append(f.size) or inner(f, S))
    a, B = _case("real", 32, 8, seed=1)
    L = lyapunov_factor(a, B)
    assert tried == []
    X = _gram(L)
    res = np.diag(a) @ X @ np.diag(a) - X + B @ B.T
    assert np.linalg.norm(res) <= 1e-13 * np.linalg.norm(X)
    lyapunov_factor(a, _case("real", 32, 9, seed=1)[1])
    assert tried == [32]
