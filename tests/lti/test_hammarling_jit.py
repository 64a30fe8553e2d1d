"""The compiled Hammarling kernel (lti._hammarling._hammarling_rows, numba) against the
NumPy/BLAS loop of ``hammarling_lower`` on the same triangles, and the NumPy path with the
compiled kernels switched off (LTI_DISABLE_JIT=1)."""

from __future__ import annotations

import numpy as np
import pytest

from lti import _hammarling
from lti._schur import ct
from tests.lti.jit_helpers import kernel_path, needs_numba
from tests.lti.test_dense_fast import _reference_hammarling, _triangular
from tests.lti.test_hammarling_fast import _slow_triangular


def _factor(A, C, compiled):
    """``hammarling_dense(A, C)`` on the compiled path or the NumPy one, and the number of
    calls of the compiled kernel it made."""
    with kernel_path(_hammarling._hammarling_rows, compiled) as calls:
        U = _hammarling.hammarling_dense(A, C)
    return U, len(calls)


def _rhs(rng, m, n, kind):
    C = rng.standard_normal((m, n))
    return C + 1j * rng.standard_normal((m, n)) if kind == "complex" else C


def _agree(U, V, A, C, tol=1e-13):
    """Same Gramian ``X = U^H U`` and a small residual for both factors."""
    assert np.array_equal(np.tril(U, -1), np.zeros_like(U))
    X, Y = ct(U) @ U, ct(V) @ V
    assert np.linalg.norm(X - Y) <= tol * np.linalg.norm(Y)
    for Z in (X, Y):
        R = ct(A) @ Z @ A - Z + ct(C) @ C
        assert np.linalg.norm(R) <= 1e-12 * np.linalg.norm(Z)


@needs_numba
@pytest.mark.parametrize("kind", ["real", "complex"])
@pytest.mark.parametrize("n, m", [(1, 1), (2, 3), (7, 1), (40, 2), (90, 5)])
def test_compiled_matches_numpy_loop(kind, n, m):
    # general triangles with the three branches: alpha = 0, |alpha| < 0.5 and >= 0.5
    rng = np.random.default_rng(10 * n + m)
    A, C = _triangular(n, rng, kind), _rhs(rng, m, n, kind)
    U, calls = _factor(A, C, True)
    V, _ = _factor(A, C, False)
    assert calls == (n >= 2) and U.dtype == V.dtype  # n = 1: no loop to compile
    _agree(U, V, A, C)
    if n <= 40:  # moderately non-normal (at n = 90, |U| reaches 1e21): U itself agrees
        assert np.abs(U - V).max() <= 1e-12 * np.abs(V).max()
    Uref = _reference_hammarling(A, C)
    _agree(U, Uref, A, C)


@needs_numba
@pytest.mark.parametrize("kind", ["real", "complex"])
@pytest.mark.parametrize("n, m", [(64, 1), (150, 2)])
def test_compiled_on_slow_decay(kind, n, m):
    # rho = 0.9999 (complex: bench_balanced's family; real: a third of the spectrum within
    # 1e-3 of +-1), one alpha = 0
    rng = np.random.default_rng(n + m)
    A, C = _slow_triangular(n, rng, kind), _rhs(rng, m, n, kind)
    U, calls = _factor(A, C, True)
    V, _ = _factor(A, C, False)
    assert calls == 1
    _agree(U, V, A, C)


@needs_numba
@pytest.mark.parametrize("kind", ["real", "complex"])
def test_blas_rows_then_compiled_rows(kind, monkeypatch):
    # above _JIT_ROWS the leading rows run in the BLAS loop (re-packing every _PANEL steps)
    # and the compiled kernel takes the trailing block with the updated right-hand side
    monkeypatch.setattr(_hammarling, "_JIT_ROWS", 40)
    monkeypatch.setattr(_hammarling, "_PANEL", 16)
    rng = np.random.default_rng(3)
    n = 100
    A, C = _slow_triangular(n, rng, kind), _rhs(rng, 3, n, kind)
    U, calls = _factor(A, C, True)
    V, _ = _factor(A, C, False)
    assert calls == 1
    _agree(U, V, A, C)
    _agree(U, _reference_hammarling(A, C), A, C)


@needs_numba
def test_compiled_after_a_skipped_row():
    # column 1 of the right-hand side stays exactly zero (A[0, 1] = 0, C[:, 1] = 0): row 1
    # is skipped; the next rows must not see stale work vectors
    rng = np.random.default_rng(5)
    n = 12
    A = np.triu(rng.standard_normal((n, n))) * 0.3
    A[np.diag_indices(n)] = rng.uniform(0.6, 0.99, n)
    A[0, 1] = 0.0
    A[2, 2] = 0.0  # and an alpha = 0 row after it
    C = rng.standard_normal((2, n))
    C[:, 1] = 0.0
    U, _ = _factor(A, C, True)
    V, _ = _factor(A, C, False)
    assert U[1, 1] == 0.0 and not U[1].any()
    np.testing.assert_allclose(U, V, rtol=0, atol=1e-13 * np.abs(V).max())
    _agree(U, _reference_hammarling(A, C), A, C)


@needs_numba
@pytest.mark.parametrize("scale", [1e-300, 1e-310])
def test_compiled_with_tiny_right_hand_side(scale):
    # below the kernel's 1e-290 the unit vector of c is formed by exact scaling (1e-310:
    # subnormal, where 1 / ||c|| overflows): same factor as the problem in normal range
    rng = np.random.default_rng(5)
    A = _triangular(30, rng, "complex")
    C0 = rng.standard_normal((2, 30)) + 1j * rng.standard_normal((2, 30))
    U, _ = _factor(A, scale * C0, True)
    V, _ = _factor(A, scale * C0, False)
    W, _ = _factor(A, C0, True)
    assert np.all(np.isfinite(U))
    rel = 1e-6 if scale < 1e-307 else 1e-13  # subnormal inputs carry fewer digits
    assert np.linalg.norm(U - scale * W) <= rel * scale * np.linalg.norm(W)
    assert np.linalg.norm(U - V) <= rel * scale * np.linalg.norm(W)


def test_kernel_source_runs_as_python():
    # the kernel's source is also plain Python (no numba needed): the same rows as the
    # BLAS loop, branch for branch
    rng = np.random.default_rng(8)
    for kind in ("real", "complex"):
        A, C = _triangular(25, rng, kind), _rhs(rng, 2, 25, kind)
        V, _ = _factor(A, C, False)
        WH = np.asfortranarray(ct(A.astype(V.dtype)))
        U = np.zeros_like(V, order="F")
        c = np.array(C, dtype=V.dtype, order="F").ravel(order="F")
        _hammarling._hammarling_rows.py_func(WH, c, C.shape[0], U, 0, 0.0)
        if kind == "complex":
            U = np.conj(U)
        np.testing.assert_allclose(U, V, rtol=0, atol=1e-13 * np.abs(V).max())


def test_numpy_path_when_disabled(monkeypatch):
    monkeypatch.setenv("LTI_DISABLE_JIT", "1")
    assert _hammarling._hammarling_rows.compiled() is None
    rng = np.random.default_rng(2)
    A, C = _triangular(40, rng, "complex"), _rhs(rng, 2, 40, "complex")
    _agree(_hammarling.hammarling_dense(A, C), _reference_hammarling(A, C), A, C)


@pytest.mark.parametrize("disabled", ["1", "0"])
@pytest.mark.parametrize("transpose", [False, True])
def test_empty_right_hand_side(disabled, transpose, monkeypatch):
    # B with no columns: X = 0 on both paths (the BLAS loop used to fail inside dznrm2)
    from lti import lyapunov_factor

    monkeypatch.setenv("LTI_DISABLE_JIT", disabled)
    rng = np.random.default_rng(0)
    A = rng.standard_normal((6, 6))
    A *= 0.9 / np.max(np.abs(np.linalg.eigvals(A)))
    L = lyapunov_factor(A, np.zeros((6, 0)), method="hammarling", transpose=transpose)
    assert L.shape == (6, 6) and not L.any()
