"""Overhead cuts of balanced truncation's glue that must not change a bit."""

from __future__ import annotations

import math

import numpy as np
import pytest

from lti._rounding import N_ANGLES, N_POLE_ANGLES, _angles, schur_rounding


def _reference_angles(lam):  # the np.unique formulation the cut replaces (ties: first)
    near = np.argsort(np.abs(np.abs(lam) - 1.0), kind="stable")[:N_POLE_ANGLES]
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
    from lti._schur import quasi_triangular_eigvals
    from lti.lyapunov import real_schur

    rng = np.random.default_rng(seed)
    A = rng.standard_normal((n, n))
    A *= rho / np.max(np.abs(np.linalg.eigvals(A)))
    S = real_schur(A)
    B = np.ascontiguousarray(S.Z.T @ rng.standard_normal((n, m)))
    Ct = np.ascontiguousarray(S.Z.T @ rng.standard_normal((n, p)))  # C^T of C = c Z
    return np.ascontiguousarray(S.T), B, Ct, quasi_triangular_eigvals(S.T)


def _complex_reference(T, B, theta):  # dense complex solves, one point at a time
    n = T.shape[0]
    return np.array([np.linalg.norm(np.linalg.solve(np.exp(1j * t) * np.eye(n) - T, B))
                     for t in theta])


@pytest.mark.parametrize("n, rho, seed, m, p", [(1, 0.5, 0, 1, 1), (2, 0.9, 1, 2, 1),
                                                (7, 0.9999, 2, 3, 2), (12, 0.95, 3, 2, 3),
                                                (13, 0.9999, 4, 1, 1), (30, 0.99, 5, 2, 2)])
def test_resolvent_kernel_source_and_compiled_against_dense_solves(n, rho, seed, m, p):
    """Both sides of the fused kernel against dense complex solves at the angles of _angles:
    ``||R B||_F`` and ``||C R||_F = ||R^T C^T||_F`` (back and forward substitution, groups of
    four rows) and their maxima; the compiled kernel agrees with its source (its cos / sin
    may differ from NumPy's in the last bit, which the resolvent near a pole amplifies)."""
    import lti._rounding as rnd

    T, B, Ct, lam = _schur_system(n, rho, seed, m, p)
    theta = rnd._angles(lam)
    rb, cr, s, c, b = rnd._resolvent_norms_py(T, B, Ct, lam, rnd._UNIFORM)  # source as Python
    np.testing.assert_allclose(rb, _complex_reference(T, B, theta), rtol=1e-10, atol=0)
    np.testing.assert_allclose(cr, _complex_reference(T.T, Ct, theta), rtol=1e-10, atol=0)
    assert (s, c, b) == (np.max(rb * cr), np.max(cr), np.max(rb))
    kern = rnd._resolvent_norms.compiled()
    if kern is not None:
        got = kern(T, B, Ct, lam, rnd._UNIFORM)
        for x, y in zip(got, (rb, cr, s, c, b), strict=True):
            np.testing.assert_allclose(x, y, rtol=1e-10, atol=0)


@pytest.mark.parametrize("k", [0, 40, 99, 150])
def test_schur_rounding_exact_under_powers_of_two(k):
    """The term is bilinear in (B, C) and scaling by powers of 2 is exact: in range (no
    rescaling inside) and out of it (B and C rescaled near their largest entries) the same
    bits for B 2^k, C 2^-k."""
    rng = np.random.default_rng(3)
    T = np.triu(rng.standard_normal((10, 10)), 1) * 0.3 + np.diag(rng.uniform(-0.9, 0.9, 10))
    B, C = rng.standard_normal((10, 2)), rng.standard_normal((2, 10))
    ref = schur_rounding(T, B, C, 4.0)
    assert schur_rounding(T, np.ldexp(B, k), np.ldexp(C, -k), 4.0) == ref
    assert schur_rounding(T, np.ldexp(B, k), C, 4.0) == math.ldexp(ref, k)


def test_schur_rounding_same_for_either_layout_of_t():
    """LAPACK's T is in Fortran order and goes to the kernel without a copy: the same
    operations, the same bits as for a C-order T."""
    rng = np.random.default_rng(4)
    A = rng.standard_normal((20, 20))
    A *= 0.99 / np.max(np.abs(np.linalg.eigvals(A)))
    from lti.lyapunov import real_schur

    S = real_schur(A)
    B, C = S.Z.T @ rng.standard_normal((20, 2)), rng.standard_normal((2, 20)) @ S.Z
    assert schur_rounding(np.asfortranarray(S.T), B, C, 4.0) == schur_rounding(
        np.ascontiguousarray(S.T), B, C, 4.0)


def test_schur_basis_factors_carry_the_schur_coordinate_b_and_c():
    from lti.gramians import stable_gramian_factors
    from lti.system import DiscreteLTI

    rng = np.random.default_rng(5)
    A = rng.standard_normal((24, 24))
    A *= 0.9999 / np.max(np.abs(np.linalg.eigvals(A)))  # slow: the Schur path
    G = DiscreteLTI(A, rng.standard_normal((24, 2)), rng.standard_normal((3, 24)))
    F = stable_gramian_factors(G, in_schur_basis=True)
    assert F.path == "schur"
    Bs, Cs = F.schur_BC
    np.testing.assert_array_equal(Bs, F.schur.Z.T @ G.B)
    np.testing.assert_array_equal(Cs, G.C @ F.schur.Z)
    assert stable_gramian_factors(G).schur_BC is None


def test_unit_scaled_norm_is_the_scaled_unit_norm_bit_for_bit():
    """lti._hammarling.schur_form_factor takes ||c|| as sqrt(c . c) when the largest entry
    is exactly 1 (lti.gramians scales every right-hand side so): _scaled_unit's value."""
    from lti._hammarling import _scaled_unit

    rng = np.random.default_rng(6)
    for _ in range(300):
        m, n = int(rng.integers(1, 4)), int(rng.integers(1, 200))
        c = rng.standard_normal((m, n)) * 10.0 ** rng.uniform(-3, 3)
        c = np.asfortranarray(c / np.abs(c).max()).ravel(order="K")
        assert math.sqrt(float(c.dot(c))) == _scaled_unit(c)[0]
