"""lti.modal's public functions at the edges: sparse input raises SparseNotSupportedError
naming the alternative (as the systems' entry points do), wrong shapes and complex ``A``
raise ShapeError (a complex diagonal was read by its real part), n = 0 / 1 work."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp

from lti import NonFiniteError, ShapeError, SparseNotSupportedError, UnstableSystemError
from lti.modal import (
    diagonal_stein_factor,
    modal_form,
    modal_gramian_factors,
    stein_factors_diagonal,
)

A = np.diag([0.5, -0.3, 0.2])
B = np.ones((3, 2))
C = np.ones((1, 3))
FORMATS = ("csr", "csc", "coo", "dia", "bsr", "lil", "dok")


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("kind", [sp.csr_matrix, sp.csr_array])
def test_sparse_a_is_refused_with_the_alternative(fmt, kind):
    As = kind(A).asformat(fmt)
    for call in (lambda: modal_form(As), lambda: modal_gramian_factors(As, B, C)):
        with pytest.raises(SparseNotSupportedError, match=r"`A`.*A\.toarray\(\).*lyapunov_factor"):
            call()
    with pytest.raises(SparseNotSupportedError, match=r"`f`.*1-D"):
        diagonal_stein_factor(As, B)


def test_sparse_generators_are_refused():
    Bs, Cs = sp.csr_matrix(B), sp.csr_array(C)
    with pytest.raises(SparseNotSupportedError, match=r"`B`.*B\.toarray\(\)"):
        modal_gramian_factors(A, Bs, C)
    with pytest.raises(SparseNotSupportedError, match=r"`C`.*C\.toarray\(\)"):
        modal_gramian_factors(A, B, Cs)
    with pytest.raises(SparseNotSupportedError, match=r"`G`.*G\.toarray\(\)"):
        diagonal_stein_factor(np.diag(A), Bs)
    with pytest.raises(SparseNotSupportedError, match=r"`f`"):
        diagonal_stein_factor(sp.csr_matrix(np.diag(A)[None, :]), B)
    with pytest.raises(SparseNotSupportedError, match=r"`Gs\[i\]`"):
        stein_factors_diagonal(np.diag(A), [Bs])
    # SparseNotSupportedError is a TypeError, as lti.lowrank.dense_only's
    with pytest.raises(TypeError):
        modal_form(sp.csr_matrix(A))


def test_complex_a_is_refused_not_read_by_its_real_part():
    # the old code returned the Gramian factors of diag(0, 0.3) for diag(0.5j, 0.3)
    Ac = np.diag([0.5j, 0.3])
    for call in (lambda: modal_form(Ac), lambda: modal_gramian_factors(Ac, B[:2], C[:, :2])):
        with pytest.raises(ShapeError, match="must be real.*diagonal_stein_factor"):
            call()
    # the suggested alternative gives the complex Gramian
    L = diagonal_stein_factor(np.diag(Ac), B[:2])
    X = L @ L.conj().T
    f = np.diag(Ac)
    assert np.allclose(X - f[:, None] * X * f.conj()[None, :], B[:2] @ B[:2].T, atol=1e-14)


def test_shapes_are_checked():
    with pytest.raises(ShapeError, match="square"):
        modal_form(np.zeros((2, 3)))
    with pytest.raises(ShapeError, match="square"):
        modal_form(np.zeros(3))
    with pytest.raises(ShapeError, match=r"`B` must be 2-D with n = 3 rows; got shape \(3,\)"):
        modal_gramian_factors(A, np.ones(3), C)
    with pytest.raises(ShapeError, match=r"`B` must be 2-D with n = 3 rows; got shape \(2, 1\)"):
        modal_gramian_factors(A, np.ones((2, 1)), C)
    with pytest.raises(ShapeError, match=r"`C` must be 2-D with n = 3 columns"):
        modal_gramian_factors(A, B, np.ones((1, 2)))
    with pytest.raises(ShapeError, match=r"`f` must be 1-D"):
        diagonal_stein_factor(A, B)  # the matrix instead of its diagonal
    with pytest.raises(ShapeError, match=r"`G` must be 2-D with n = 3 rows"):
        diagonal_stein_factor(np.diag(A), np.ones((2, 2)))


def test_small_and_list_inputs():
    lam, pairs = modal_form([[0.5, 0.2], [-0.2, 0.5]])  # a list, as DiscreteLTI accepts
    assert np.allclose(lam, [0.5 + 0.2j, 0.5 - 0.2j]) and list(pairs) == [0]
    Lc, Lo, rho = modal_gramian_factors(np.zeros((0, 0)), np.zeros((0, 2)), np.zeros((1, 0)))
    assert Lc.shape == Lo.shape == (0, 0) and rho == 0.0
    Lc, Lo, rho = modal_gramian_factors(np.array([[0.6]]), np.array([[2.0]]), np.array([[3.0]]))
    assert Lc @ Lc.T == pytest.approx(4.0 / 0.64, rel=1e-15)
    assert Lo @ Lo.T == pytest.approx(9.0 / 0.64, rel=1e-15) and rho == 0.6


def test_modes_on_or_outside_the_circle_are_refused():
    # the old code returned NaN factors (RuntimeWarnings only): diagonal_stein_factor([1, 0.5])
    # -> [[nan, 0], [0, 1.1547]]; modal_gramian_factors(diag(1.2, 0.5)) -> NaN, rho 1.2
    G = np.ones((2, 1))
    for f in ([1.0, 0.5], [1.2, 0.5], [0.3, 0.8 + 0.6j]):
        with pytest.raises(UnstableSystemError, match=r"inside the unit circle"):
            diagonal_stein_factor(np.array(f), G)
        with pytest.raises(UnstableSystemError, match=r"inside the unit circle"):
            stein_factors_diagonal(np.array(f), [G])
    for Ab in (np.diag([1.2, 0.5]), np.array([[0.6, 0.8], [-0.8, 0.6]])):  # |0.6 + 0.8j| = 1
        with pytest.raises(UnstableSystemError, match=r"max \|lambda\| = "):
            modal_gramian_factors(Ab, G, G.T)
    with pytest.raises(NonFiniteError):
        diagonal_stein_factor(np.array([0.5, np.nan]), G)
    # just inside: finite factors
    L = diagonal_stein_factor(np.array([1.0 - 1e-12, 0.5]), G)
    assert np.all(np.isfinite(L))
