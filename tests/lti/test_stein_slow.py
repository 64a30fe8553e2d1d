"""The refinement's slow-mode correction (``lti._stein_slow``, ``refine="auto"``) against
plain references: the invariant-subspace kernel against the defining equation, the
correction against a dense solve of the projected residual, the probes against the formed
residual, and the solve's choice of path (slow correction, full refinement, none)."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.linalg as sla

import lti._stein as stein
import lti._stein_slow as slow
from lti import solve_discrete_lyapunov
from lti._schur import SchurForm, quasi_triangular_eigvals, real_schur
from lti.exceptions import InvalidArgumentError
from tests.lti.jit_helpers import needs_numba
from tests.lti.test_solve_fast import _random_quasi_triangular


def _gauss(n, rho, seed, m=2):
    rng = np.random.default_rng(seed)
    A = rng.standard_normal((n, n))
    A *= rho / np.max(np.abs(np.linalg.eigvals(A)))
    return A, rng.standard_normal((n, m))


def _circle(rng, n, radii=False):
    """``Zq R Zq^T``: 2x2 rotations by random angles (times random radii in [0.5, 1] when
    ``radii``), one 0.3 more for odd n: eigenvalues on (or inside) the unit circle."""
    Zq = np.linalg.qr(rng.standard_normal((n, n)))[0]
    th = rng.uniform(0, np.pi, n // 2)
    D = sla.block_diag(*[[[np.cos(t), -np.sin(t)], [np.sin(t), np.cos(t)]] for t in th])
    if radii:
        D = D * np.repeat(rng.uniform(0.5, 1, n // 2), 2)[:, None]
    if D.shape[0] < n:
        D = sla.block_diag(D, [[0.3]])
    return Zq @ D @ Zq.T


def _nonnormal(rng, n, c):
    """``Z (diag(uniform(-1, 1)) + N) Z^T``, strictly upper ``N`` of size ~ c / sqrt(n)."""
    Z = np.linalg.qr(rng.standard_normal((n, n)))[0]
    N = (c / np.sqrt(n)) * np.triu(rng.standard_normal((n, n)), 1)
    return Z @ (np.diag(rng.uniform(-1, 1, n)) + N) @ Z.T


def _residual(A, X, Q):
    return np.linalg.norm(A @ X @ A.T - X + Q) / np.linalg.norm(Q)


@needs_numba
def test_invariant_block_spans_the_block_invariant_subspace():
    # every diagonal block of random quasi-triangular T (first, second, last, 1x1, 2x2):
    # with the compiled leaf kernel and its Python source, [X1; I; 0] with
    # T [X1; I; 0] = [X1; I; 0] S, into the given columns only
    rng = np.random.default_rng(3)
    kern = stein._leaf_kernel.compiled()
    for _ in range(12):
        k = int(rng.integers(2, 14))
        T = _random_quasi_triangular(rng, k)
        p = 0
        while p < k:
            s = 2 if (p + 1 < k and T[p + 1, p] != 0) else 1
            S = T[p : p + s, p : p + s]
            outs = []
            for leaf in (kern, stein._leaf_kernel.py_func):
                Xall = np.zeros((k, s + 2), order="F")
                slow.invariant_block(T, p, s, Xall, 1, leaf)  # columns 1 .. s only
                assert not Xall[:, 0].any() and not Xall[:, s + 1].any()
                X = Xall[:, 1 : s + 1]
                assert np.array_equal(X[p : p + s], np.eye(s)) and not X[p + s :].any()
                scale = np.linalg.norm(T) * np.linalg.norm(X)
                assert np.linalg.norm(T @ X - X @ S) <= 1e-12 * scale
                outs.append(X)
            assert np.allclose(outs[0], outs[1], rtol=1e-13, atol=1e-13 * np.abs(outs[1]).max())
            p += s


def test_slow_blocks_take_the_largest_eigenvalues_with_pairs_whole():
    T = np.zeros((6, 6))
    T[0, 0] = 0.3
    T[1:3, 1:3] = [[0.9, 0.2], [-0.2, 0.9]]  # |lambda| = 0.922
    T[3, 3] = -0.95
    T[4:6, 4:6] = [[0.1, 0.5], [-0.5, 0.1]]  # |lambda| = 0.51
    ev = quasi_triangular_eigvals(T)
    assert slow.slow_blocks(T, ev, 1) == [(3, 1)]
    assert slow.slow_blocks(T, ev, 2) == [(3, 1), (1, 2)]
    assert slow.slow_blocks(T, ev, 4) == [(3, 1), (1, 2), (4, 2)]


@needs_numba
@pytest.mark.parametrize("python_kernels", [False, True])
def test_slow_correction_solves_the_projected_residual(python_kernels):
    # dX = H V^T + V H^T is the exact solution for R - (I - V V^T) R (I - V V^T), V the
    # invariant subspace of the SLOW_DIM largest eigenvalues (against numpy's eigenvectors
    # and scipy's dense Stein solve)
    n = 60 if python_kernels else 90
    A, B = _gauss(n, 0.9999, 5)
    Q = B @ B.T
    S = real_schur(A)
    # X perturbed far above rounding: the residual is known to ~1e-12 of itself whichever
    # way it is evaluated (near a rounding-level residual the evaluations differ by ~5 %)
    D = np.random.default_rng(1).standard_normal((n, n))
    X0 = stein.solve_schur(A, Q, S, factor=B) + 1e-3 * (D + D.T)
    leaf = stein._leaf_kernel.py_func if python_kernels else stein._leaf_kernel.compiled()
    H, V = slow.slow_correction(A, X0, Q, S, leaf)
    s = V.shape[1]
    assert s in (slow.SLOW_DIM, slow.SLOW_DIM + 1)
    assert np.linalg.norm(V.T @ V - np.eye(s)) <= 1e-13
    lam, W = np.linalg.eig(A)
    top = np.argsort(-np.abs(lam))[: slow.SLOW_DIM]
    for j in top:  # the slowest eigenvectors lie in span(V)
        w = W[:, j] / np.linalg.norm(W[:, j])
        assert np.linalg.norm(w - V @ (V.T @ w)) <= 1e-9
    R = A @ X0 @ A.T - X0 + Q
    P = np.eye(n) - V @ V.T
    Rpart = R - P @ R @ P
    ref = sla.solve_discrete_lyapunov(A, Rpart, method="bilinear")
    dX = H @ V.T + V @ H.T
    assert np.linalg.norm(dX - ref) <= 1e-8 * np.linalg.norm(ref)
    # and what it leaves of the residual is the projected-out part (to rounding)
    left = R + A @ dX @ A.T - dX
    assert np.linalg.norm(left - P @ R @ P) <= 1e-6 * np.linalg.norm(R)


@needs_numba
def test_slow_correction_refuses_a_rank_deficient_basis():
    # a repeated eigenvalue in two 1x1 blocks with a coupling: the second block's invariant
    # subspace is not separable (X1 solves a singular system): no correction, not garbage
    T = np.asfortranarray(np.triu(np.full((4, 4), 0.1)))
    np.fill_diagonal(T, [0.99, 0.99, 0.2, 0.1])
    S = SchurForm(T, np.eye(4))
    for leaf in (stein._leaf_kernel.compiled(), stein._leaf_kernel.py_func):
        assert slow.slow_correction(T, np.eye(4), np.eye(4), S, leaf) is None
    # nearly repeated (1e-12 apart): a finite basis [e1, (-1e11, 1)], numerically of rank 1
    T[1, 1] = 0.99 + 1e-12
    X1 = slow.invariant_block(T, 1, 1, np.zeros((4, 1), order="F"), 0, stein._leaf_kernel.py_func)
    assert np.all(np.isfinite(X1)) and abs(X1[0, 0]) > 1e10
    assert slow.slow_correction(T, np.eye(4), np.eye(4), S, stein._leaf_kernel.compiled()) is None
    # and deeper in T (the leaf kernel's path): a repeated eigenvalue at rows 0 and 3
    T6 = np.asfortranarray(np.triu(np.full((6, 6), 0.1)))
    np.fill_diagonal(T6, [0.99, 0.5, 0.4, 0.99, 0.2, 0.1])
    S6 = SchurForm(T6, np.eye(6))
    for leaf in (stein._leaf_kernel.compiled(), stein._leaf_kernel.py_func):
        assert slow.slow_correction(T6, np.eye(6), np.eye(6), S6, leaf) is None


def test_residual_probe_matches_the_formed_residual():
    A, B = _gauss(70, 0.999, 2)
    Q = B @ B.T
    D = np.random.default_rng(3).standard_normal((70, 70))
    X = solve_discrete_lyapunov(A, Q, refine=False) + 1e-3 * (D + D.T)
    R = A @ X @ A.T - X + Q
    P = slow.probe_vectors(70)
    for Xo in (X, np.asfortranarray(X)):
        probe = slow.ResidualProbe(A, Xo, Q)
        assert np.linalg.norm(probe.RP - R @ P) <= 1e-9 * np.linalg.norm(R @ P)
        assert probe.estimate() == pytest.approx(np.linalg.norm(R @ P) / 4, rel=1e-12)
        rng = np.random.default_rng(0)
        H, V = rng.standard_normal((70, 3)) * 1e-3, np.linalg.qr(rng.standard_normal((70, 3)))[0]
        X1 = X + H @ V.T + V @ H.T
        R1 = A @ X1 @ A.T - X1 + Q
        want = np.linalg.norm(R1 @ P) / np.linalg.norm(R @ P)
        assert probe.ratio(H, V) == pytest.approx(want, rel=1e-6)
    assert probe_vectors_read_only()


def probe_vectors_read_only():
    with pytest.raises(ValueError):
        slow.probe_vectors(5)[0, 0] = 1.0
    return True


@pytest.mark.parametrize("order", ["C", "F"])
def test_add_low_rank_is_exact_and_symmetric(order):
    rng = np.random.default_rng(1)
    X = rng.standard_normal((130, 130))
    X = np.array(X + X.T, order=order)
    H, V = rng.standard_normal((130, 5)), rng.standard_normal((130, 5))
    want = X + H @ V.T + V @ H.T
    out = slow.add_low_rank_(X, H, V, stein.mirror_upper_)
    assert out is X
    assert np.array_equal(X, X.T)
    assert np.linalg.norm(X - want) <= 1e-14 * np.linalg.norm(want)


def _spy(monkeypatch):
    calls = {"slow": [], "full": 0}
    orig_ratio, orig_full = slow.ResidualProbe.ratio, stein._refine_full

    def ratio(self, H, V):
        calls["slow"].append(orig_ratio(self, H, V))
        return calls["slow"][-1]

    def full(*args):
        calls["full"] += 1
        return orig_full(*args)

    monkeypatch.setattr(slow.ResidualProbe, "ratio", ratio)
    monkeypatch.setattr(stein, "_refine_full", full)
    return calls


@needs_numba
@pytest.mark.parametrize("method", ["auto", "schur"])
def test_auto_refinement_keeps_the_slow_correction(method, monkeypatch):
    # rho = 0.9999, n = 256: the residual is the slow modes' (7-8x cut), no full step;
    # "auto": first pass from Hammarling's factor (F-ordered X), "schur": the recursion
    # and the congruence (C-ordered X)
    monkeypatch.delenv("LTI_DISABLE_JIT", raising=False)
    A, B = _gauss(256, 0.9999, 0)
    Q = B @ B.T
    calls = _spy(monkeypatch)
    X = solve_discrete_lyapunov(A, Q, method=method)
    X0 = solve_discrete_lyapunov(A, Q, method=method, refine=False)
    assert X0.flags.c_contiguous == (method == "schur")
    assert calls["full"] == 0 and len(calls["slow"]) == 1
    assert calls["slow"][0] <= slow.SLOW_TOL
    r0, r1 = _residual(A, X0, Q), _residual(A, X, Q)
    assert r0 > 10 * stein.REFINE_RTOL
    assert r1 <= 1.25 * calls["slow"][0] * r0  # the probes' estimate holds (to 25 %)
    assert r1 <= 0.25 * r0
    assert np.array_equal(X, X.T)


@needs_numba
def test_auto_refinement_falls_back_to_the_full_step(monkeypatch):
    # eigenvalues on a circle (every mode slow): the slow correction removes little, the
    # probes see it and the full step runs: the same result as refine=True, bit for bit
    monkeypatch.delenv("LTI_DISABLE_JIT", raising=False)
    rng = np.random.default_rng(6)
    A = 0.999 * _circle(rng, 256)
    B = rng.standard_normal((256, 2))
    Q = B @ B.T
    calls = _spy(monkeypatch)
    X = solve_discrete_lyapunov(A, Q)
    assert calls["full"] == 1 and calls["slow"][0] > slow.SLOW_TOL
    assert np.array_equal(X, solve_discrete_lyapunov(A, Q, refine=True))
    assert _residual(A, X, Q) <= 0.2 * _residual(A, solve_discrete_lyapunov(A, Q, refine=False), Q)


@needs_numba
def test_auto_refinement_skipped_when_the_probes_show_a_small_residual(monkeypatch):
    monkeypatch.delenv("LTI_DISABLE_JIT", raising=False)
    A, B = _gauss(256, 0.95, 4)
    Q = B @ B.T
    calls = _spy(monkeypatch)
    X = solve_discrete_lyapunov(A, Q, method="schur")
    assert calls == {"slow": [], "full": 0}
    assert np.array_equal(X, solve_discrete_lyapunov(A, Q, method="schur", refine=False))
    assert _residual(A, X, Q) <= stein.REFINE_RTOL


@needs_numba
def test_auto_refinement_never_raises_a_hopeless_residual(monkeypatch):
    # strongly non-normal A at rho = 0.9999 (relative residual >> 1): whatever is tried,
    # the residual returned is not above the first solve's
    monkeypatch.delenv("LTI_DISABLE_JIT", raising=False)
    rng = np.random.default_rng(1)
    A = _nonnormal(rng, 256, 3.0)
    A *= 0.9999 / np.max(np.abs(np.linalg.eigvals(A)))
    B = rng.standard_normal((256, 2))
    Q = B @ B.T
    r0 = _residual(A, solve_discrete_lyapunov(A, Q, refine=False), Q)
    assert r0 > 1.0
    assert _residual(A, solve_discrete_lyapunov(A, Q), Q) <= r0


@needs_numba
@pytest.mark.parametrize("c", [2.0**-480, 2.0**480])
def test_auto_refinement_is_scale_invariant(c, monkeypatch):
    monkeypatch.delenv("LTI_DISABLE_JIT", raising=False)
    A, B = _gauss(256, 0.9999, 0)
    calls = _spy(monkeypatch)
    X1 = solve_discrete_lyapunov(A, B @ B.T)
    Bc = c * B
    Xc = solve_discrete_lyapunov(A, Bc @ Bc.T)
    assert calls["full"] == 0 and len(calls["slow"]) == 2  # the slow correction both times
    assert np.array_equal(Xc / c**2, X1)


def test_auto_without_compiled_kernels_is_the_full_step(monkeypatch):
    monkeypatch.setenv("LTI_DISABLE_JIT", "1")
    A, B = _gauss(256, 0.9999, 0)
    Q = B @ B.T
    calls = _spy(monkeypatch)
    X = solve_discrete_lyapunov(A, Q)
    assert calls["slow"] == [] and calls["full"] == 1
    assert np.array_equal(X, solve_discrete_lyapunov(A, Q, refine=True))


@pytest.mark.parametrize("bad", ["yes", "full", None, 1, 0.0])
def test_refine_argument_is_checked(bad):
    A, B = _gauss(8, 0.9, 0)
    with pytest.raises(InvalidArgumentError, match="refine"):
        solve_discrete_lyapunov(A, B @ B.T, refine=bad)


@pytest.mark.parametrize("method", ["schur", "smith"])
def test_refine_false_returns_the_first_solve(method):
    A, B = _gauss(40, 0.9999, 2)
    Q = B @ B.T
    X = solve_discrete_lyapunov(A, Q, method=method, refine=False)
    Xr = solve_discrete_lyapunov(A, Q, method=method, refine=np.True_)
    r, rr = _residual(A, X, Q), _residual(A, Xr, Q)
    assert r > stein.REFINE_RTOL and rr < r  # refined when asked, not when not
    if method == "schur":
        S = real_schur(A)
        assert np.array_equal(X, stein.solve_schur(A, Q, S, refine=False))


def _mixed_system(seed):
    """A stable A of one of four kinds (Gaussian, mildly / strongly non-normal, a circle of
    eigenvalues with random radii) near the unit circle, and a Q = B B^T of rank 1-3."""
    rng = np.random.default_rng(200 + seed)
    n = int(rng.integers(256, 300))
    kind = seed % 4
    if kind == 0:
        A = rng.standard_normal((n, n))
    elif kind == 3:
        A = _circle(rng, n, radii=True)
    else:
        A = _nonnormal(rng, n, 0.5 if kind == 1 else 2.0)
    A *= [0.999, 0.9999, 0.99][seed % 3] / np.max(np.abs(np.linalg.eigvals(A)))
    B = rng.standard_normal((n, 1 + seed % 3))
    return A, B @ B.T


@needs_numba
@pytest.mark.parametrize("seed", range(8))
def test_auto_refinement_guarantee_on_mixed_systems(seed, monkeypatch):
    # the documented outcome of refine="auto": the first solve when the probes show a small
    # residual, the slow correction only when it left <= 1/4 of it (true residual within
    # 25 % of the probes' estimate), else exactly refine=True; never above the first solve
    monkeypatch.delenv("LTI_DISABLE_JIT", raising=False)
    A, Q = _mixed_system(seed)
    calls = _spy(monkeypatch)
    X = solve_discrete_lyapunov(A, Q)
    r0 = _residual(A, solve_discrete_lyapunov(A, Q, refine=False), Q)
    r = _residual(A, X, Q)
    assert r <= r0
    if not calls["slow"]:
        assert calls["full"] == 0 and r == r0 and r0 <= 1.5 * stein.REFINE_RTOL
    elif calls["full"] == 0:
        assert calls["slow"][0] <= slow.SLOW_TOL and r <= 1.25 * slow.SLOW_TOL * r0
    else:
        assert calls["slow"][0] > slow.SLOW_TOL
        assert np.array_equal(X, solve_discrete_lyapunov(A, Q, refine=True))
