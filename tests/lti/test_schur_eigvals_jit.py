"""lti._schur.quasi_triangular_eigvals' compiled loop: bit for bit the NumPy code (which stays
the fallback and handles the rescaled blocks), signed zeros included."""

from __future__ import annotations

import numpy as np
import pytest

import lti._schur as schur_mod
from lti.lyapunov import real_schur
from tests.lti.jit_helpers import needs_compiled


def _cases():
    rng = np.random.default_rng(0)
    for n, rho in [(2, 0.9), (7, 0.95), (40, 0.9999), (65, 3.0)]:
        A = rng.standard_normal((n, n))
        A *= rho / np.max(np.abs(np.linalg.eigvals(A)))
        T = real_schur(A).T  # LAPACK's standard 2x2 blocks (a = d, b c < 0), Fortran order
        yield T
        yield np.ascontiguousarray(T)
    for _ in range(40):  # non-standard blocks: real pairs, a != d, b or c zero, tiny / big
        n = int(rng.integers(2, 10))
        T = np.triu(rng.standard_normal((n, n)))
        for i in range(0, n - 1, 2):
            if rng.random() < 0.7:
                T[i + 1, i] = rng.standard_normal() * 10.0 ** int(rng.integers(-3, 3))
        yield T
    yield np.array([[0.5, 1.0], [-0.0625, 0.0]])  # a double real eigenvalue (x = 0)
    yield np.array([[0.3, -0.0], [1.0, 0.3]])  # b = -0: a signed zero in b c
    yield np.array([[0.0, 1e-200], [1e-200, 0.0]])  # b c underflows: the NumPy rescaling
    yield np.array([[1e200, 1e200], [-1e200, 1e200]])  # b c overflows
    yield np.array([[0.7]])


def _numpy_path(T, monkeypatch):
    with monkeypatch.context() as m:
        m.setenv("LTI_DISABLE_JIT", "1")
        return schur_mod.quasi_triangular_eigvals(T)


@needs_compiled
@pytest.mark.parametrize("T", list(_cases()), ids=lambda T: f"n{T.shape[0]}")
def test_compiled_equals_numpy_bit_for_bit(T, monkeypatch):
    ref = _numpy_path(T, monkeypatch)
    got = schur_mod.quasi_triangular_eigvals(T)
    assert got.dtype == np.complex128 and got.shape == ref.shape
    np.testing.assert_array_equal(got.view(np.uint64), ref.view(np.uint64))


def test_source_as_python_equals_numpy(monkeypatch):
    for T in list(_cases())[:12]:
        n = T.shape[0]
        if n < 2:
            continue
        out = np.empty((n, 2))
        ok = schur_mod._eigvals_py(T.diagonal(), T.diagonal(1), T.diagonal(-1), out)
        assert ok
        ref = _numpy_path(T, monkeypatch)
        np.testing.assert_array_equal(out.view(np.complex128).reshape(n).view(np.uint64),
                                      ref.view(np.uint64))


@needs_compiled
def test_compiled_kernel_is_used(monkeypatch):
    calls = []
    kern = schur_mod._eigvals.compiled()
    monkeypatch.setattr(schur_mod._eigvals, "_compiled",
                        lambda *a: calls.append(1) or kern(*a))
    schur_mod.quasi_triangular_eigvals(real_schur(np.diag([0.5, 0.2]) + np.eye(2, k=1)).T)
    assert calls == [1]
