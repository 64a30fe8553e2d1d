"""Batched (array-at-once) forms in lti._schur against their one-block-at-a-time loops."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.linalg as sla

from lti._schur import quasi_triangular_eigvals, real_schur


def _eigvals_loop(T):
    """The per-block loop ``quasi_triangular_eigvals`` replaced."""
    ev = np.diag(T).astype(np.complex128)
    for k in np.flatnonzero(np.diag(T, -1)):
        a, b, c, d = T[k, k], T[k, k + 1], T[k + 1, k], T[k + 1, k + 1]
        half_tr = 0.5 * (a + d)
        disc = np.sqrt(complex(0.25 * (a - d) ** 2 + b * c))
        ev[k], ev[k + 1] = half_tr + disc, half_tr - disc
    return ev


@pytest.mark.parametrize("n, rho", [(1, 0.5), (2, 0.9), (9, 0.9), (64, 0.9999), (65, 1e-200),
                                    (66, 1e200)])
def test_quasi_triangular_eigvals(n, rho):
    rng = np.random.default_rng(n)
    A = rng.standard_normal((n, n))
    A *= rho / np.max(np.abs(np.linalg.eigvals(A)))
    T = sla.schur(A, output="real")[0]
    ev = quasi_triangular_eigvals(T)
    with np.errstate(over="ignore"):  # (the loop overflows at 1e200)
        loop = _eigvals_loop(T)
    if 1e-100 < rho < 1e100:  # the loop's numbers, bit for bit
        assert np.array_equal(ev, loop)
    else:  # there b c under/overflowed in the loop: the pairs came out real (or inf)
        assert not np.allclose(loop, ev, rtol=1e-3, atol=0, equal_nan=True)
    if n > 8:
        assert np.count_nonzero(np.diag(T, -1)) > 2  # pairs present
        ref = np.sort_complex(np.linalg.eigvals(T))
        assert np.allclose(np.sort_complex(ev), ref, rtol=0, atol=1e-12 * rho)


@pytest.mark.parametrize("n", [1, 2, 3, 64, 150])
def test_real_schur_is_scipys(n):
    # real_schur calls LAPACK dgees with a cached workspace size: scipy's numbers, bit for bit
    rng = np.random.default_rng(n)
    A = rng.standard_normal((n, n))
    for _ in range(2):  # the workspace size queried, then cached
        S = real_schur(A)
        T, Z = sla.schur(A, output="real")
        assert np.array_equal(S.T, T) and np.array_equal(S.Z, Z)
    assert np.array_equal(A, np.random.default_rng(n).standard_normal((n, n)))  # not overwritten
    Af = np.asfortranarray(A)
    S = real_schur(Af)
    assert np.array_equal(S.T, T) and np.array_equal(Af, A)


def test_schur_form_eigenvalues_cached(monkeypatch):
    import lti._schur as schur_mod

    rng = np.random.default_rng(3)
    S = real_schur(rng.standard_normal((9, 9)))
    calls = []
    real = schur_mod.quasi_triangular_eigvals
    monkeypatch.setattr(schur_mod, "quasi_triangular_eigvals",
                        lambda T: calls.append(1) or real(T))
    ev = S.eigenvalues()
    ev[:] = 0.0  # a copy: the cache is not changed
    ev2 = S.eigenvalues()
    assert len(calls) == 1 and np.array_equal(ev2, real(S.T)) and ev2 is not ev
