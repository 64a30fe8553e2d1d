"""The fast dense Lyapunov paths against plain reference implementations.

``lti._hammarling.hammarling_lower`` (BLAS calls, in-place rank-1 updates, rows conjugated
at the end), ``schur_factor`` (Hammarling on the complex triangle without complex Schur
vectors) and the batched 2x2 rotations of ``lti._schur`` are checked against the
straightforward NumPy versions they replaced.
"""

from __future__ import annotations

import numpy as np
import pytest
import scipy.linalg as sla

from lti._hammarling import hammarling_dense, real_gram_factor, schur_factor
from lti._schur import complex_triangle, ct, rotate_columns, rotate_rows_, to_complex_schur


def _reference_hammarling(A, C):
    """Hammarling's method, one row of U per step, plain NumPy (the slow reference)."""
    n, m = A.shape[0], C.shape[0]
    dtype = np.result_type(A, C, np.float64)
    C = np.array(C, dtype=dtype)
    U = np.zeros((n, n), dtype=dtype)
    for j in range(n):
        alpha = A[j, j]
        c = C[:, j]
        cn = np.linalg.norm(c)
        s = np.sqrt(max(1.0 - abs(alpha) ** 2, 0.0))
        if j == n - 1:
            U[j, j] = cn / s
            break
        if cn == 0:
            continue
        nu = cn / s
        w0 = c / nu
        a = np.conj(A[j, j + 1 :])
        C2 = C[:, j + 1 :]
        rhs = -(ct(C2) @ w0) - alpha * nu * a
        A2h = ct(A[j + 1 :, j + 1 :])
        if alpha == 0:
            u = -rhs
        else:
            u = sla.solve_triangular(A2h - np.eye(n - j - 1) / alpha, rhs / alpha, lower=True)
        U[j, j] = nu
        U[j, j + 1 :] = np.conj(u)
        y = nu * a + A2h @ u
        w = np.r_[w0, alpha]
        phase = alpha / abs(alpha) if alpha != 0 else 1.0
        v = w.copy()
        v[m] += phase * np.linalg.norm(w)
        H = np.eye(m + 1) - 2.0 * np.outer(v, np.conj(v)) / np.vdot(v, v).real
        C[:, j + 1 :] = (H @ np.vstack([C2, np.conj(y)[None, :]]))[:m]
    return U


def _triangular(n, rng, kind):
    if kind == "complex":
        T = np.triu(rng.standard_normal((n, n)) + 1j * rng.standard_normal((n, n)))
        d = rng.uniform(0.0, 0.97, n) * np.exp(2j * np.pi * rng.uniform(size=n))
    else:
        T = np.triu(rng.standard_normal((n, n)))
        d = rng.uniform(-0.97, 0.97, n)
    if n > 3:  # both branches of the kernel: |alpha| < 0.5, >= 0.5 and alpha = 0
        d[1], d[2], d[3] = 0.0, 0.3, 0.9
    T[np.diag_indices(n)] = d
    return T


@pytest.mark.parametrize("kind", ["real", "complex"])
@pytest.mark.parametrize("n, m", [(1, 1), (2, 3), (7, 1), (40, 2), (90, 5)])
def test_kernel_matches_the_reference(kind, n, m):
    rng = np.random.default_rng(10 * n + m)
    A = _triangular(n, rng, kind)
    C = rng.standard_normal((m, n)) + (1j * rng.standard_normal((m, n)) if kind == "complex" else 0)
    U = hammarling_dense(A, C)
    Uref = _reference_hammarling(A, C)
    assert np.array_equal(np.tril(U, -1), np.zeros_like(U))
    X, Xref = ct(U) @ U, ct(Uref) @ Uref
    assert np.linalg.norm(X - Xref) <= 1e-12 * np.linalg.norm(Xref)
    R = ct(A) @ X @ A - X + ct(C) @ C
    assert np.linalg.norm(R) <= 1e-13 * np.linalg.norm(X)


def test_kernel_with_subnormal_right_hand_side():
    rng = np.random.default_rng(5)
    A = _triangular(30, rng, "complex")
    C = 1e-310 * (rng.standard_normal((2, 30)) + 1j * rng.standard_normal((2, 30)))
    U = hammarling_dense(A, C)
    Uref = _reference_hammarling(A, C * 1e300) * 1e-300  # same problem, normal range
    assert np.all(np.isfinite(U))
    assert np.linalg.norm(U - Uref) <= 1e-6 * np.linalg.norm(Uref)  # subnormal rounding


def test_pair_rotations_match_the_loop_versions():
    rng = np.random.default_rng(2)
    A = rng.standard_normal((60, 60))
    T, Z = sla.schur(A, output="real")
    Tc, Zc, idx, G = to_complex_schur(T, Z)
    assert idx.size > 10
    assert np.array_equal(np.tril(Tc, -1), np.zeros_like(Tc))
    assert np.linalg.norm(Zc @ Tc @ ct(Zc) - A) <= 1e-13 * np.linalg.norm(A)
    Tc2, idx2, G2 = complex_triangle(T)
    assert np.array_equal(Tc, Tc2) and np.array_equal(idx, idx2)
    M = rng.standard_normal((60, 5)) + 0j
    ref = M.copy()
    for k, i in enumerate(idx):  # row pairs times G_k, one at a time
        ref[[i - 1, i]] = G[k] @ ref[[i - 1, i]]
    assert np.allclose(rotate_rows_(M.copy(), idx, G), ref, rtol=0, atol=1e-14)
    N = rng.standard_normal((4, 60)) + 0j
    ref = N.copy()
    for k, i in enumerate(idx):
        ref[:, [i - 1, i]] = ref[:, [i - 1, i]] @ G[k]
    assert np.allclose(rotate_columns(N, idx, G), ref, rtol=0, atol=1e-14)


@pytest.mark.parametrize("transpose", [False, True])
@pytest.mark.parametrize("n", [1, 2, 9, 64])
def test_schur_factor_real_triangular_and_exact(transpose, n):
    rng = np.random.default_rng(n)
    A = rng.standard_normal((n, n))
    A *= 0.9 / max(np.max(np.abs(np.linalg.eigvals(A))), 1e-300)
    B = rng.standard_normal((n, 2))
    T, Z = sla.schur(A, output="real")
    R, flip = schur_factor(*complex_triangle(T), Z.T @ B, transpose)
    assert flip is not transpose and R.dtype == np.float64
    assert np.array_equal(np.tril(R, -1), np.zeros_like(R))  # upper triangular, exactly
    L = (Z[:, ::-1] if flip else Z) @ R.T
    M = A.T if transpose else A
    X = L @ L.T
    assert np.linalg.norm(M @ X @ M.T - X + B @ B.T) <= 1e-13 * np.linalg.norm(X)
    # the slow reference: complex Schur vectors, reference kernel, QR of the real factor
    Tc, Zc = sla.rsf2csf(T, Z)
    Bt = ct(Zc) @ B
    if transpose:
        U = _reference_hammarling(Tc, ct(Bt))
        K = U @ ct(Zc)
    else:
        U = _reference_hammarling(ct(Tc)[::-1, ::-1], ct(Bt[::-1]))
        K = U @ ct(Zc[:, ::-1])
    Xref = ct(K) @ K
    assert np.linalg.norm(X - Xref.real) <= 1e-12 * np.linalg.norm(Xref)


def test_real_gram_factor_is_exactly_triangular():
    rng = np.random.default_rng(4)
    M = np.triu(rng.standard_normal((30, 30)) + 1j * rng.standard_normal((30, 30)))
    M[np.arange(1, 30, 3), np.arange(0, 29, 3)] = rng.standard_normal(10)  # quasi-triangular
    R = real_gram_factor(M)
    assert np.array_equal(np.tril(R, -1), np.zeros_like(R))
    K = ct(M) @ M
    assert np.linalg.norm(R.T @ R - K.real) <= 1e-13 * np.linalg.norm(K)


@pytest.mark.parametrize("cols", [5, 128, 129, 300])
def test_norm2_estimate_both_paths(cols):
    """_bt_core.norm2 forms L^T L up to 128 columns and applies it as L^T (L x) above:
    the same power iteration, a lower estimate of ||L||_2 within its 1e-3 tolerance."""
    import lti._bt_core as bl

    rng = np.random.default_rng(cols)
    L = rng.standard_normal((cols + 7, cols)) * (0.97 ** np.arange(cols))[None, :]
    est, exact = bl.norm2(L), np.linalg.norm(L, 2)
    assert 0.99 * exact <= est <= exact * (1 + 1e-12)
    K = L.T @ L  # the reference iteration on the formed K
    x = K[:, int(np.argmax(np.diagonal(K)))]
    x = x / np.linalg.norm(x)
    ref = 0.0
    for _ in range(20):
        y = K @ x
        prev, ref = ref, np.sqrt(np.linalg.norm(y))
        x = y / np.linalg.norm(y)
        if abs(ref - prev) <= 1e-3 * ref:
            break
    assert est == pytest.approx(max(ref, np.max(np.abs(L))), rel=1e-12)


def _random_stable(n, rho, seed):
    rng = np.random.default_rng(seed)
    A = rng.standard_normal((n, n))
    A *= rho / np.max(np.abs(np.linalg.eigvals(A)))
    return A, rng.standard_normal((n, 2)), rng.standard_normal((2, n))


def test_smith_above_128_states_only_when_the_screen_predicts_convergence(monkeypatch):
    import lti.gramians as gramians
    from lti import DiscreteLTI, hankel_singular_values

    A, B, C = _random_stable(160, 0.9, 1)
    G = DiscreteLTI(A, B, C)
    F = gramians.stable_gramian_factors(G)
    assert F.path == "smith"
    for L, M, R in ((F.Lc, A, B), (F.Lo, A.T, C.T)):
        X = L @ L.T
        assert np.linalg.norm(M @ X @ M.T - X + R @ R.T) <= 1e-13 * np.linalg.norm(X)
    S = gramians.real_schur(A)  # the Schur path (a given Schur form skips Smith)
    Fs = gramians.stable_gramian_factors(G, schur=S)
    hs = np.linalg.svd(Fs.Lo.T @ Fs.Lc, compute_uv=False)
    assert np.max(np.abs(hankel_singular_values(G) - hs)) <= 1e-12 * hs[0]
    # spectral radius 0.9999: Smith would fail after 12 squarings; the screen skips it
    A, B, C = _random_stable(160, 0.9999, 2)

    def no_smith(*args, **kwargs):
        raise AssertionError("Smith attempted although the screen predicts no convergence")

    monkeypatch.setattr(gramians, "smith_factors", no_smith)
    assert gramians.stable_gramian_factors(DiscreteLTI(A, B, C)).path == "schur"


def test_auto_factor_above_128_states():
    import lti.lyapunov as lyapunov

    for rho, smith in ((0.9, True), (0.9999, False)):
        A, B, _ = _random_stable(150, rho, 3)
        for transpose in (False, True):
            L = lyapunov.lyapunov_factor(A, B, transpose=transpose)
            expect = "smith" if smith else "hammarling"
            assert np.array_equal(L, lyapunov.lyapunov_factor(A, B, transpose=transpose,
                                                              method=expect))
            M = A.T if transpose else A
            X = L @ L.T
            assert np.linalg.norm(M @ X @ M.T - X + B @ B.T) <= 1e-12 * np.linalg.norm(X)


def test_smith_screen_edge_cases():
    from lti._smith import smith_promising

    n = 200
    shift = np.eye(n, k=-1)  # nilpotent
    assert smith_promising(shift, np.eye(n)[:, [n - 10]]) is True  # A^10 B = 0
    assert smith_promising(shift, np.eye(n, 1)) is False  # ||A^j B|| = 1 for j < n: Schur path
    assert smith_promising(0.5 * np.eye(n), np.zeros((n, 2))) is False  # nothing to sum
    assert smith_promising(1.01 * np.eye(n), np.ones(n)) is False  # growing
    assert smith_promising(1e200 * np.eye(n), np.ones((n, 1))) is False  # no overflow
    assert smith_promising(0.95 * np.eye(n), 1e-300 * np.ones((n, 1))) is True  # no underflow
    assert smith_promising(0.97 * np.eye(n), np.ones((n, 1))) is False  # g = 0.97


def test_auto_solve_of_a_low_rank_psd_right_hand_side_goes_through_the_factor(monkeypatch):
    import lti.lyapunov as lyapunov

    A, B, _ = _random_stable(200, 0.9, 4)
    Q = B @ B.T
    Xs = lyapunov.solve_discrete_lyapunov(A, Q, method="schur")

    def no_schur(*args, **kwargs):
        raise AssertionError("Schur path taken")

    monkeypatch.setattr(lyapunov, "solve_schur", no_schur)
    X = lyapunov.solve_discrete_lyapunov(A, Q)
    assert np.linalg.norm(A @ X @ A.T - X + Q) <= 1e-13 * np.linalg.norm(Q)
    assert np.linalg.norm(X - Xs) <= 1e-12 * np.linalg.norm(Xs)
    assert np.array_equal(X, X.T)


@pytest.mark.parametrize("case", ["indefinite", "rank 33", "slow decay", "explicit schur"])
def test_auto_solve_keeps_the_schur_path(case, monkeypatch):
    import lti.lyapunov as lyapunov

    A, B, C = _random_stable(150, 0.9999 if case == "slow decay" else 0.9, 5)
    rng = np.random.default_rng(6)
    if case == "indefinite":
        Q = B @ B.T - 0.5 * np.outer(C[0], C[0])
    elif case == "rank 33":
        W = rng.standard_normal((150, 33))
        Q = W @ W.T
    else:
        Q = B @ B.T

    def no_smith(*args, **kwargs):
        raise AssertionError("Smith attempted")

    monkeypatch.setattr(lyapunov, "smith_factor", no_smith)
    method = "schur" if case == "explicit schur" else "auto"
    X = lyapunov.solve_discrete_lyapunov(A, Q, method=method)
    assert np.linalg.norm(A @ X @ A.T - X + Q) <= 1e-12 * np.linalg.norm(X)


def test_psd_low_rank_factor():
    from lti.lyapunov import _psd_low_rank

    rng = np.random.default_rng(7)
    W = rng.standard_normal((60, 5))
    F = _psd_low_rank(W @ W.T, 8)
    assert F.shape == (60, 5)
    assert np.linalg.norm(F @ F.T - W @ W.T) <= 1e-14 * np.linalg.norm(W @ W.T)
    assert _psd_low_rank(W @ W.T, 4) is None  # rank above kmax
    Q = W @ W.T
    Q[0, 0] -= 1.0  # indefinite: the pivoted Cholesky stops, the check turns it down
    assert _psd_low_rank(Q, 8) is None
    assert _psd_low_rank(np.zeros((4, 4)), 8) is None
    # the check reads every block of rows: a mismatch only in the last row of n = 600
    W = rng.standard_normal((600, 3))
    Q = W @ W.T
    assert _psd_low_rank(Q, 8).shape == (600, 3)
    Q[-1, -1] -= 1e-6 * np.abs(Q).max()  # below the pivot tolerance's reach, not the check's
    assert _psd_low_rank(Q, 8) is None


@pytest.mark.parametrize("rho", [1.01, 1.0 - 1e-15])
def test_auto_solve_with_low_rank_q_still_refuses_unstable_a(rho):
    from lti import solve_discrete_lyapunov
    from lti.exceptions import UnstableSystemError

    A, B, _ = _random_stable(150, rho, 8)
    with pytest.raises(UnstableSystemError):
        solve_discrete_lyapunov(A, B @ B.T)
