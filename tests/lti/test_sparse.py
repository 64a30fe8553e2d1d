"""Sparse systems: low-rank ADI factors (lti.lowrank), the sparse DiscreteLTI and balanced
truncation through the factors, checked against the dense solvers at small n."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.linalg as sla
import scipy.sparse as sp
from scipy.sparse.linalg import splu

import lti
from lti import (
    DiscreteLTI,
    LTIError,
    SparseNotSupportedError,
    UnstableSystemError,
    balanced_truncation,
    controllability_gramian,
    gramian_factors,
    hankel_singular_values,
    hinf_norm,
    observability_gramian,
)
from lti.lowrank import (
    is_sparse,
    lowrank_factor,
    lowrank_gramian_factors,
    lowrank_stein_residual,
)
from lti.testing.systems import heat_2d


def heat(N: int):
    """2-D heat equation (lti.testing.systems.heat_2d): sparse A, one input, two outputs."""
    return heat_2d(N)


def rotating(n: int = 200, seed: int = 0):
    """Sparse non-normal A with complex eigenvalue pairs: 2x2 rotation blocks of radius
    0.5...0.95 plus a sparse upper coupling; dense B (2 columns), C (1 row)."""
    rng = np.random.default_rng(seed)
    blocks = []
    for r, t in zip(np.linspace(0.5, 0.95, n // 2), rng.uniform(0.2, 2.5, n // 2), strict=True):
        c, s = r * np.cos(t), r * np.sin(t)
        blocks.append(np.array([[c, s], [-s, c]]))
    A = sp.block_diag(blocks) + sp.diags([0.05 * np.ones(n - 3)], [3])
    return sp.csr_matrix(A), rng.standard_normal((n, 2)), rng.standard_normal((1, n))


def _rel(X, Y):
    return np.linalg.norm(X - Y, 2) / np.linalg.norm(Y, 2)


# ------------------------------------------------------------------ low-rank factors


@pytest.mark.parametrize("transpose", [False, True])
def test_heat_factor_matches_dense_gramian(transpose):
    A, B, C = heat(20)
    R = C.T if transpose else B
    F = lowrank_factor(A, R, transpose=transpose, tol=1e-12)
    M = A.toarray().T if transpose else A.toarray()
    X = sla.solve_discrete_lyapunov(M, R @ R.T)
    assert F.converged and F.rank < 25 * R.shape[1] < A.shape[0]
    assert _rel(F.Z @ F.Z.T, X) < 1e-9
    assert F.rel_residual < 1e-11


def test_complex_spectrum_factor_is_real_and_matches_dense():
    A, B, C = rotating()
    Fc, Fo = lowrank_gramian_factors(A, B, C, tol=1e-12)
    assert np.any(np.abs(Fc.shifts.imag) > 0)  # complex pairs were used ...
    assert Fc.Z.dtype == np.float64  # ... in real arithmetic
    Ad = A.toarray()
    P = sla.solve_discrete_lyapunov(Ad, B @ B.T)
    Q = sla.solve_discrete_lyapunov(Ad.T, C.T @ C)
    assert _rel(Fc.Z @ Fc.Z.T, P) < 1e-9
    assert _rel(Fo.Z @ Fo.Z.T, Q) < 1e-9


def test_user_shifts_with_a_conjugate_pair():
    A, B, _ = rotating(60, seed=1)
    lam = np.linalg.eigvals(A.toarray())
    top = lam[np.argsort(-np.abs(lam))][:8]  # conjugate pairs stay together
    F = lowrank_factor(A, B, shifts=1.0 / top, tol=1e-12, max_iter=2000)
    assert F.converged
    X = sla.solve_discrete_lyapunov(A.toarray(), B @ B.T)
    assert _rel(F.Z @ F.Z.T, X) < 1e-9


def test_lowrank_residual_equals_dense_residual():
    A, B, _ = heat(12)
    Ad = A.toarray()
    rng = np.random.default_rng(3)
    F = lowrank_factor(A, B, tol=1e-6, compress=False)
    for Z in (F.Z, F.Z + 1e-3 * rng.standard_normal(F.Z.shape)):
        for tr in (False, True):
            M = Ad.T if tr else Ad
            dense = np.linalg.norm(M @ Z @ Z.T @ M.T - Z @ Z.T + B @ B.T, 2)
            low = lowrank_stein_residual(A, Z, B, transpose=tr)
            assert abs(low - dense) <= 1e-12 * np.linalg.norm(Z, 2) ** 2 + 1e-10 * dense
    # the ADI's own residual W W^T (the stopping test) is the exact residual
    dense = np.linalg.norm(Ad @ F.Z @ F.Z.T @ Ad.T - F.Z @ F.Z.T + B @ B.T, 2)
    assert F.adi_residual == pytest.approx(dense / np.linalg.norm(B.T @ B, 2), rel=1e-6, abs=0)
    assert F.residual == pytest.approx(dense, rel=1e-6, abs=0)


def test_factor_never_overestimates_the_gramian():
    """The ADI residual is PSD, so Z Z^T <= P: the HSVs from the factors are lower bounds."""
    A, B, _ = heat(12)
    F = lowrank_factor(A, B, tol=1e-4)
    X = sla.solve_discrete_lyapunov(A.toarray(), B @ B.T)
    assert np.min(np.linalg.eigvalsh(X - F.Z @ F.Z.T)) > -1e-12 * np.linalg.norm(X, 2)


def test_solver_hook_factorises_each_shift_once_for_both_gramians():
    A, B, C = heat(15)
    calls = []

    def solver(M):
        calls.append(M.shape)
        return splu(sp.csc_matrix(M))

    Fc, Fo = lowrank_gramian_factors(A, B, C, solver=solver, tol=1e-10)
    assert len(calls) == len(Fc.shifts) == len(np.unique(Fc.shifts))
    assert Fc.converged and Fo.converged


def test_unstable_sparse_matrix_is_rejected():
    A = sp.diags([1.05 * np.ones(50)], [0], format="csr")
    with pytest.raises(UnstableSystemError):
        lowrank_factor(A, np.ones((50, 1)))
    # one unstable mode among stable ones: the shift-invert Ritz value names it
    d = np.full(300, 0.5)
    d[7], d[100:200] = 1.05, np.linspace(-0.9, 0.9, 100)
    with pytest.raises(UnstableSystemError, match=r"eigenvalue 1\.05 .*outside the unit"):
        lowrank_factor(sp.diags(d, format="csr"), np.ones((300, 1)), max_iter=200)
    # user shifts skip the Ritz values: the divergence guard still stops the iteration
    with pytest.raises(UnstableSystemError, match="grew"):
        lowrank_factor(sp.diags(d, format="csr"), np.ones((300, 1)), shifts=[1.5, 3.0],
                       max_iter=200)


def test_no_convergence_warns_and_says_so():
    A, B, _ = heat(12)
    with pytest.warns(UserWarning, match="stopped after 6 steps"):
        F = lowrank_factor(A, B, max_iter=6)
    assert not F.converged and F.adi_residual > 1e-10


# ------------------------------------------------------------- sparse DiscreteLTI


def test_sparse_system_keeps_a_sparse_copy_and_simulates():
    A, B, C = heat(8)
    G = DiscreteLTI(A, B, C)
    assert is_sparse(G.A) and G.A is not A and "sparse" in repr(G)
    assert not G.is_diagonal
    Gd = DiscreteLTI(A.toarray(), B, C)
    u = np.random.default_rng(0).standard_normal((30, 1))
    np.testing.assert_allclose(G.simulate(u), Gd.simulate(u), rtol=1e-13, atol=1e-15)
    np.testing.assert_allclose(G.markov(5), Gd.markov(5), rtol=1e-13, atol=1e-15)
    np.testing.assert_allclose((-2.0 * G).markov(3), -2.0 * Gd.markov(3), rtol=1e-13)


@pytest.mark.parametrize(
    ("call", "hint"),
    [
        (lambda G: G.poles(), "eigs"),
        (lambda G: G.spectral_radius(), "eigs"),
        (lambda G: G.is_stable(), "eigs"),
        (lambda G: G.frequency_response([0.1]), "balanced_truncation"),
        (lambda G: G - G, "balanced_truncation"),
        (lambda G: G.series(G), "balanced_truncation"),
        (lambda G: G.similarity(np.eye(G.n)), "balanced_truncation"),
        (lambda G: G.to_control(), "balanced_truncation"),
        (lambda G: controllability_gramian(G), "factor=True"),
        (lambda G: observability_gramian(G, horizon=5, factor=True), "horizon=None"),
        (lambda G: gramian_factors(G, horizon=5), "horizon=None"),
        (lambda G: hinf_norm(G), "balanced_truncation"),
    ],
)
def test_dense_only_operations_raise_a_typed_error(call, hint):
    A, B, C = heat(6)
    G = DiscreteLTI(A, B, C[:1])  # m = p = 1 so that series() passes its shape check
    with pytest.raises(SparseNotSupportedError, match=hint) as info:
        call(G)
    assert isinstance(info.value, TypeError) and isinstance(info.value, LTIError)


def test_gramian_functions_dispatch_to_low_rank_factors():
    A, B, C = heat(15)
    G = DiscreteLTI(A, B, C)
    Lc, Lo = gramian_factors(G)
    L = observability_gramian(G, factor=True)
    Ad = A.toarray()
    P = sla.solve_discrete_lyapunov(Ad, B @ B.T)
    Q = sla.solve_discrete_lyapunov(Ad.T, C.T @ C)
    assert Lc.shape[1] < 40 and Lo.shape[1] < 60
    assert _rel(Lc @ Lc.T, P) < 1e-7 and _rel(Lo @ Lo.T, Q) < 1e-7 and _rel(L @ L.T, Q) < 1e-7
    Z = lti.lyapunov_factor(A, B)  # the public factor API dispatches sparse A too
    assert Z.shape[1] < 40 and _rel(Z @ Z.T, P) < 1e-7
    with pytest.raises(SparseNotSupportedError, match="lyapunov_factor"):
        lti.solve_discrete_lyapunov(A, B @ B.T)


# ------------------------------------------------------------------ HSVs and BT


def _pair(N=15):
    A, B, C = heat(N)
    return DiscreteLTI(A, B, C), DiscreteLTI(A.toarray(), B, C)


def test_leading_hsvs_match_dense_and_are_lower_bounds():
    Gs, Gd = _pair()
    hs, hd = hankel_singular_values(Gs), hankel_singular_values(Gd)
    k = 8
    assert hs.size < Gs.n
    np.testing.assert_allclose(hs[:k], hd[:k], rtol=1e-6, atol=0)
    assert np.all(hs <= hd[: hs.size] * (1 + 1e-8) + 1e-14 * hd[0])


def test_sparse_balanced_truncation_matches_dense_bounds_and_error():
    Gs, Gd = _pair()
    rs = balanced_truncation(Gs, order=5)
    rd = balanced_truncation(Gd, order=5)
    assert rd.factor_residuals is None and len(rs.factor_residuals) == 2
    assert isinstance(rs.reduced, DiscreteLTI) and not is_sparse(rs.reduced.A)
    assert rs.order == 5 and rs.T.shape == (Gs.n, 5) and rs.Ti.shape == (5, Gs.n)
    assert max(rs.factor_residuals) < 1e-9
    np.testing.assert_allclose(rs.hsv[:8], rd.hsv[:8], rtol=1e-6)
    # the same sigma_6 less each path's rounding term (the sparse one counts the k HSVs
    # resolved, the dense one all n)
    assert abs(rs.lower_bound - rd.lower_bound) <= (
        rs.rounding_term + rd.rounding_term + 1e-6 * rd.lower_bound)
    assert rs.error_bound == pytest.approx(rd.error_bound, rel=1e-5, abs=0)
    err = hinf_norm(Gd - rs.reduced).value
    assert rs.lower_bound * (1 - 1e-6) <= err <= rs.error_bound
    w = np.linspace(0.0, np.pi, 9)
    dG = rs.reduced.frequency_response(w) - rd.reduced.frequency_response(w)
    assert np.max(np.abs(dG)) < 1e-5 * np.max(np.abs(Gd.frequency_response(w)))


def test_sparse_balanced_truncation_by_tolerance_and_order_cap():
    Gs, Gd = _pair()
    rs = balanced_truncation(Gs, tol=1e-3)
    rd = balanced_truncation(Gd, tol=1e-3)
    assert rs.order == rd.order and rs.error_bound <= 1e-3
    k = rs.hsv.size
    with pytest.raises(lti.InvalidArgumentError, match="resolved by the low-rank"):
        balanced_truncation(Gs, order=k + 1)


def test_factors_with_other_options_through_balanced_truncation_from_factors():
    Gs, _ = _pair()
    calls = []

    def solver(M):
        calls.append(1)
        return splu(sp.csc_matrix(M))

    Fc, Fo = lowrank_gramian_factors(Gs.A, Gs.B, Gs.C, tol=1e-13, solver=solver)
    a = lti.balanced_truncation_from_factors(Gs, Fc.Z, Fo.Z, order=5)
    b = balanced_truncation(Gs, order=5)
    assert calls and a.reduced.n == 5
    np.testing.assert_allclose(a.hsv[:5], b.hsv[:5], rtol=1e-6)
    assert a.error_bound == pytest.approx(b.error_bound, rel=1e-4, abs=0)


def test_sparse_bt_of_a_non_normal_complex_spectrum_system_respects_the_bounds():
    A, B, C = rotating()
    Gs, Gd = DiscreteLTI(sp.csc_array(A), B, C), DiscreteLTI(A.toarray(), B, C)
    rs = balanced_truncation(Gs, order=12)
    rd = balanced_truncation(Gd, order=12)
    err = hinf_norm(Gd - rs.reduced).value
    assert rs.lower_bound <= err <= rs.error_bound
    assert err == pytest.approx(hinf_norm(Gd - rd.reduced).value, rel=1e-6, abs=0)
    assert rs.error_bound == pytest.approx(rd.error_bound, rel=1e-6, abs=0)


def test_h2_and_hankel_norms_of_a_sparse_system_from_the_factors():
    Gs, Gd = _pair()
    h2s, h2d = lti.h2_norm(Gs), lti.h2_norm(Gd)
    assert h2s == pytest.approx(h2d, rel=1e-8, abs=0) and h2s <= h2d * (1 + 1e-12)
    assert lti.hankel_norm(Gs) == pytest.approx(lti.hankel_norm(Gd), rel=1e-8, abs=0)
