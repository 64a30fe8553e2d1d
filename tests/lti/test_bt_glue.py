"""Overhead cuts of balanced truncation's glue that must not change a bit."""

from __future__ import annotations

import numpy as np
import pytest

from lti._rounding import N_ANGLES, N_POLE_ANGLES, _angles, schur_rounding


def _reference_angles(lam):  # the np.unique formulation the cut replaces
    near = np.argsort(np.abs(np.abs(lam) - 1.0))[:N_POLE_ANGLES]
    return np.unique(np.concatenate([np.linspace(0.0, np.pi, N_ANGLES),
                                     np.abs(np.angle(lam[near]))]))


def _spectra():
    rng = np.random.default_rng(0)
    z = 0.99 * np.exp(1j * rng.uniform(-np.pi, np.pi, 40))
    yield np.r_[z, z.conj()]  # conjugate pairs: repeated angles
    yield np.array([0.5 + 0j])
    yield np.array([-0.9 + 0j, 0.9 + 0j, 0.0 + 0j, 1j * 0.5, -1j * 0.5])  # angles 0, pi, pi/2
    yield np.exp(1j * np.linspace(0.0, np.pi, N_ANGLES)) * 0.999  # on the uniform grid
    yield rng.uniform(-1, 1, 100) + 1j * rng.uniform(-1, 1, 100)


@pytest.mark.parametrize("lam", list(_spectra()), ids=range(5))
def test_angles_equal_the_unique_formulation_bit_for_bit(lam):
    got = _angles(lam)
    np.testing.assert_array_equal(got, _reference_angles(lam))
    assert np.all(np.diff(got) > 0)


def test_schur_rounding_norms_are_numpys():
    rng = np.random.default_rng(1)
    T = np.triu(rng.standard_normal((9, 9)), 1) * 0.3 + np.diag(rng.uniform(-0.9, 0.9, 9))
    B, C = rng.standard_normal((9, 2)), rng.standard_normal((3, 9))
    from lti._rounding import resolvent_gains

    s, c, b = resolvent_gains(T, B, C)
    ref = 4.0 * 9 * np.finfo(float).eps * ((1.0 + np.linalg.norm(T)) * s
                                          + np.linalg.norm(B) * c + np.linalg.norm(C) * b)
    assert schur_rounding(T, B, C, 4.0) == ref


def _schur_system(n, rho, seed, m, p):
    from lti._rounding import _angles
    from lti._schur import quasi_triangular_eigvals
    from lti.lyapunov import real_schur

    rng = np.random.default_rng(seed)
    A = rng.standard_normal((n, n))
    A *= rho / np.max(np.abs(np.linalg.eigvals(A)))
    S = real_schur(A)
    theta = _angles(quasi_triangular_eigvals(S.T))
    B = np.ascontiguousarray(S.Z.T @ rng.standard_normal((n, m)))
    Ct = np.ascontiguousarray(S.Z.T @ rng.standard_normal((n, p)))  # C^T of C = c Z
    return np.ascontiguousarray(S.T), B, Ct, np.cos(theta), np.sin(theta)


def _complex_reference(T, B, zr, zi):  # dense complex solves, one point at a time
    n = T.shape[0]
    return np.array([np.linalg.norm(np.linalg.solve(complex(a, b) * np.eye(n) - T, B))
                     for a, b in zip(zr, zi, strict=True)])


@pytest.mark.parametrize("n, rho, seed, m, p", [(1, 0.5, 0, 1, 1), (2, 0.9, 1, 2, 1),
                                                (7, 0.9999, 2, 3, 2), (12, 0.95, 3, 2, 3),
                                                (13, 0.9999, 4, 1, 1), (30, 0.99, 5, 2, 2)])
def test_resolvent_kernel_source_is_the_compiled_kernel_bit_for_bit(n, rho, seed, m, p):
    """Both sides of the fused kernel against dense complex solves: ``||R B||_F`` and
    ``||C R||_F = ||R^T C^T||_F`` (back and forward substitution, groups of four rows)."""
    import lti._rounding as rnd

    T, B, Ct, zr, zi = _schur_system(n, rho, seed, m, p)
    rb, cr = rnd._resolvent_norms_py(T, B, Ct, zr, zi)  # the kernel's source run as Python
    np.testing.assert_allclose(rb, _complex_reference(T, B, zr, zi), rtol=1e-12, atol=0)
    np.testing.assert_allclose(cr, _complex_reference(T.T, Ct, zr, zi), rtol=1e-12, atol=0)
    kern = rnd._resolvent_norms.compiled()
    if kern is not None:  # the same operations compiled: the same bits
        got = kern(T, B, Ct, zr, zi)
        np.testing.assert_array_equal(got[0], rb)
        np.testing.assert_array_equal(got[1], cr)
