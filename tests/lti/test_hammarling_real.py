"""The compiled real quasi-triangular Hammarling kernel (lti._hammarling_real) against the
complex-triangle path (lti._hammarling.schur_factor) on the same Schur forms."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.linalg as sla

from lti import _hammarling, _hammarling_real
from lti._schur import SchurForm, complex_triangle
from tests.lti.jit_helpers import kernel_path, needs_numba


def _schur(n, rho, seed, kind):
    rng = np.random.default_rng(seed)
    A = rng.standard_normal((n, n))
    if kind == "sym":  # real spectrum: 1x1 steps only, 1x1 blocks in A22
        A = A + A.T
    elif kind == "nonnormal":  # pairs and strong coupling
        A = np.triu(A, -1) + 3.0 * np.triu(rng.standard_normal((n, n)), 1)
    A *= rho / np.max(np.abs(np.linalg.eigvals(A)))
    T, Z = sla.schur(A, output="real")
    return A, T, Z


@pytest.fixture
def jit_on(monkeypatch):
    """Compiled kernels on for this test, whatever LTI_DISABLE_JIT says outside."""
    monkeypatch.delenv("LTI_DISABLE_JIT", raising=False)


def _factor(T, Bs, transpose, compiled):
    """schur_form_factor on the real kernel (and how often it ran) or on the complex path."""
    with kernel_path(_hammarling_real._real_rows, compiled) as calls:
        R, flip = _hammarling.schur_form_factor(SchurForm(T, np.eye(T.shape[0])), Bs, transpose)
    return R, flip, len(calls)


def _gram(R, flip):
    X = R.T @ R
    return X[::-1, ::-1] if flip else X


@needs_numba
@pytest.mark.parametrize("transpose", [False, True])
@pytest.mark.parametrize("kind, rho", [("gauss", 0.9), ("gauss", 0.9999), ("sym", 0.9999),
                                       ("nonnormal", 0.95)])
@pytest.mark.parametrize("n, m", [(2, 1), (3, 2), (9, 1), (64, 2), (150, 3), (5, 8)])
def test_real_kernel_matches_complex_path(n, m, kind, rho, transpose):
    A, T, Z = _schur(n, rho, seed=n + 7 * m, kind=kind)
    if kind != "sym" and n > 8:
        assert np.count_nonzero(np.diag(T, -1)) >= 2  # 2x2 steps and 2x2 blocks in A22
    Bs = np.random.default_rng(n).standard_normal((n, m))
    R, flip, calls = _factor(T, Bs, transpose, True)
    Rc, flipc = _hammarling.schur_factor(*complex_triangle(T), Bs, transpose)
    assert calls == 1 and flip == flipc == (not transpose)
    assert R.dtype == np.float64 and np.array_equal(np.tril(R, -1), np.zeros_like(R))
    X, Xc = _gram(R, flip), _gram(Rc, flipc)
    M = T.T if transpose else T
    for Y in (X, Xc):
        res = np.linalg.norm(M @ Y @ M.T - Y + Bs @ Bs.T)
        assert res <= 1e-13 * n * np.linalg.norm(Y)
    # two backward-stable solutions: they differ by the equation's condition times eps
    tol = 1e-10 if rho > 0.999 or kind == "nonnormal" else 1e-13
    assert np.linalg.norm(X - Xc) <= tol * np.linalg.norm(Xc)


@needs_numba
@pytest.mark.parametrize("transpose", [False, True])
def test_skipped_steps(transpose):
    # a 2x2 step and a 1x1 step whose right-hand side columns are exactly zero: their rows
    # of U stay zero and the later steps see an untouched right-hand side
    rng = np.random.default_rng(3)
    n = 8
    T = np.triu(rng.standard_normal((n, n))) * 0.3
    T[np.diag_indices(n)] = [0.6, 0.6, 0.5, -0.4, 0.7, 0.7, 0.2, 0.9]
    T[1, 0], T[0, 1] = -0.5, 0.4  # pair at (0, 1) ...
    T[5, 4], T[4, 5] = -0.3, 0.6  # ... and at (4, 5)
    Bs = rng.standard_normal((n, 2))
    if transpose:  # A = T: the first steps are T's rows 0-1 (2x2), then row 2 (1x1)
        Bs[0:3] = 0.0
        skipped = [0, 1, 2]
    else:  # A = P T^T P: the first steps are T's rows 7, 6 (1x1), then 5-4 (2x2)
        Bs[4:] = 0.0
        skipped = [0, 1, 2, 3]
    R, flip, calls = _factor(T, Bs, transpose, True)
    assert calls == 1
    assert not R[skipped].any()
    Rc, flipc = _hammarling.schur_factor(*complex_triangle(T), Bs, transpose)
    X, Xc = _gram(R, flip), _gram(Rc, flipc)
    assert np.linalg.norm(X - Xc) <= 1e-13 * np.linalg.norm(Xc)


@needs_numba
@pytest.mark.parametrize("scale", [1e-300, 1e-310, 1e250])
def test_extreme_scales(scale):
    # the 2x2 steps scale their columns by a power of 2, the 1x1 steps as the complex kernel
    A, T, Z = _schur(30, 0.95, seed=4, kind="gauss")
    Bs = np.random.default_rng(4).standard_normal((30, 2))
    R, flip, calls = _factor(T, scale * Bs, True, True)
    R1, _, _ = _factor(T, Bs, True, True)
    assert calls == 1 and np.all(np.isfinite(R))
    rel = 1e-6 if scale < 1e-307 else 1e-13  # subnormal inputs carry fewer digits
    assert np.linalg.norm(R / scale - R1) <= rel * np.linalg.norm(R1)  # (R's norm overflows)


@needs_numba
def test_not_positive_definite_step_stops(jit_on):
    # an unstable 2x2 block: its X11 is not positive definite -> the kernel stops at row 0
    # and leaves the right-hand side untouched
    T = np.array([[1.1, 0.5, 0.3], [-0.5, 1.1, 0.2], [0.0, 0.0, 0.5]])
    C = np.asfortranarray(np.ones((1, 3)))
    U, j, C2 = _hammarling_real.real_hammarling(np.asfortranarray(T.T), C, 0.0)
    assert j == 0 and not U.any() and np.array_equal(C2, np.ones((1, 3)))


@needs_numba
@pytest.mark.parametrize("transpose", [False, True])
def test_nearly_real_pairs_finish_on_the_complex_triangle(transpose, jit_on):
    # 2x2 blocks a +- i sqrt(-b c) with -b c tiny: U11 nearly singular. The real recursion
    # lost accuracy there (residual 1e-13 .. 7e-10 instead of 1e-16); now it stops and the
    # trailing problem is solved on its complex triangle
    rng = np.random.default_rng(11)
    n, stopped = 10, 0
    for a, b, c in ((0.5, 1.0, -1e-6), (0.5, 1e-6, -1e-6), (0.5, 1.0, -1e-14),
                    (0.9, 1e-3, -1e-9), (0.99, 10.0, -1e-12)):
        T = np.triu(rng.standard_normal((n, n))) * 0.2
        np.fill_diagonal(T, rng.uniform(-0.9, 0.9, n))
        for k in (0, 5):  # two such blocks
            T[k, k] = T[k + 1, k + 1] = a
            T[k, k + 1], T[k + 1, k] = b, c
        Bs = rng.standard_normal((n, 1))
        WH = T.T if transpose else T[::-1, ::-1]
        C = np.array((Bs if transpose else Bs[::-1]).T, order="F")
        stopped += _hammarling_real.real_hammarling(np.asfortranarray(WH), C, 0.0)[1] < n
        R, flip, calls = _factor(T, Bs, transpose, True)
        Rc, flipc = _hammarling.schur_factor(*complex_triangle(T), Bs, transpose)
        X, Xc = _gram(R, flip), _gram(Rc, flipc)
        M = T.T if transpose else T
        for Y in (X, Xc):
            assert np.linalg.norm(M @ Y @ M.T - Y + Bs @ Bs.T) <= 2e-15 * np.linalg.norm(Y)
        assert np.linalg.norm(X - Xc) <= 1e-13 * np.linalg.norm(Xc)
        assert np.array_equal(np.tril(R, -1), np.zeros_like(R))
    assert stopped >= 3


def test_kernel_source_runs_as_python():
    # the kernel's source is plain Python too (no numba needed): the same factor
    A, T, Z = _schur(12, 0.99, seed=5, kind="gauss")
    assert np.count_nonzero(np.diag(T, -1)) >= 2
    Bs = np.random.default_rng(5).standard_normal((12, 2))
    U = np.zeros((12, 12), order="F")
    C = np.array(Bs.T, order="F")
    assert _hammarling_real._real_rows.py_func(np.asfortranarray(T.T), C.ravel(order="F"), 2,
                                               U, 0.0) == 12  # all steps taken
    Rc, _ = _hammarling.schur_factor(*complex_triangle(T), Bs, True)
    np.testing.assert_allclose(U.T @ U, Rc.T @ Rc, rtol=0, atol=1e-13 * np.abs(Rc.T @ Rc).max())


def test_disabled_takes_the_complex_path(monkeypatch):
    monkeypatch.setenv("LTI_DISABLE_JIT", "1")
    assert _hammarling_real._real_rows.compiled() is None
    A, T, Z = _schur(20, 0.9, seed=6, kind="gauss")
    Bs = np.random.default_rng(6).standard_normal((20, 2))
    S = SchurForm(T, Z)
    R, flip = _hammarling.schur_form_factor(S, Bs, False)
    Rc, flipc = _hammarling.schur_factor(*complex_triangle(T), Bs, False)
    assert flip == flipc and np.array_equal(R, Rc)


@needs_numba
def test_gramian_factors_and_hsvs_both_paths(monkeypatch):
    # the BT family at rho = 0.9999: HSVs on the real kernel equal the complex path's
    from lti import DiscreteLTI, hankel_singular_values

    rng = np.random.default_rng(64)
    A = rng.standard_normal((64, 64))
    A *= 0.9999 / np.max(np.abs(np.linalg.eigvals(A)))
    G = DiscreteLTI(A, rng.standard_normal((64, 2)), rng.standard_normal((2, 64)))
    monkeypatch.delenv("LTI_DISABLE_JIT", raising=False)
    h = hankel_singular_values(G)
    monkeypatch.setenv("LTI_DISABLE_JIT", "1")
    hc = hankel_singular_values(G)
    big = hc >= 1e-8 * hc[0]
    assert np.max(np.abs(h[big] - hc[big])) <= 1e-10 * hc[0]


@needs_numba
def test_negligible_late_steps_do_not_stop_the_real_recursion(jit_on):
    # fast decay (rho = 0.5): late 2x2 steps, ~1e-8 .. 1e-64 below the factor's scale, have
    # reflections that miss U11 by 1e-13 .. 1e-12 relative; they are taken (their share of
    # X is negligible) instead of sending the rest to the complex path
    n = 512
    rng = np.random.default_rng(10 * n)
    A = rng.standard_normal((n, n))
    A *= 0.5 / np.max(np.abs(np.linalg.eigvals(A)))
    T = sla.schur(A, output="real")[0]
    Bs = rng.standard_normal((n, 2))
    for WH, C in ((T.T, Bs.T), (T[::-1, ::-1], Bs[::-1].T)):
        U, j, _ = _hammarling_real.real_hammarling(np.asfortranarray(WH), np.array(C, order="F"),
                                                   0.0)
        assert j == n
        X = U.T @ U
        M = WH.T
        assert np.linalg.norm(M.T @ X @ M - X + C.T @ C) <= 1e-14 * np.linalg.norm(X)
