"""Third audit: arguments of the sparse (low-rank) paths and covariance streams go through
the typed validation (complex was cut to real silently, masks read through, raw errors)."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import scipy.sparse as sp

import lti
from lti import InvalidArgumentError, ShapeError, SparseNotSupportedError
from lti.lowrank import lowrank_gramian_factors

A_SP = sp.diags([0.5, 0.3, -0.2, 0.1]).tocsr()
ONES = np.ones((4, 1))


def _masked(shape):
    mask = np.zeros(shape, dtype=bool)
    mask.flat[0] = True
    return np.ma.array(np.ones(shape), mask=mask)


BAD = [
    (ONES * (1 + 1j), ShapeError, "must be real"),
    (_masked((4, 1)), InvalidArgumentError, "masked array"),
    (sp.csr_matrix(ONES), SparseNotSupportedError, "sparse"),
    ([["a"], ["b"], ["c"], ["d"]], ShapeError, "numeric"),
]


@pytest.mark.parametrize("B, exc, msg", BAD, ids=["complex", "masked", "sparse", "str"])
def test_lyapunov_factor_of_a_sparse_A_validates_B(B, exc, msg):
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # was a ComplexWarning and a real-part factor
        with pytest.raises(exc, match=msg):
            lti.lyapunov_factor(A_SP, B)


@pytest.mark.parametrize("B, exc, msg", BAD, ids=["complex", "masked", "sparse", "str"])
def test_lowrank_gramian_factors_validates_C(B, exc, msg):
    C = B.T if not isinstance(B, list) else [[r[0] for r in B]]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with pytest.raises(exc, match=msg):
            lowrank_gramian_factors(A_SP, ONES, C)


def test_the_validated_sparse_paths_still_agree_with_the_dense_solution():
    Z = lti.lyapunov_factor(A_SP, np.ones(4))  # 1-D B still accepted
    P = lti.solve_discrete_lyapunov(A_SP.toarray(), ONES @ ONES.T)
    assert np.linalg.norm(Z @ Z.T - P) <= 1e-9 * np.linalg.norm(P)
    F = lowrank_gramian_factors(A_SP, ONES, ONES.T)
    assert np.linalg.norm(F[1].Z @ F[1].Z.T - P) <= 1e-9 * np.linalg.norm(P)


def test_a_sparse_input_stream_is_a_typed_error_naming_sparse():
    A = np.diag([0.5, 0.2])
    B = np.ones((2, 1))
    with pytest.raises(SparseNotSupportedError, match=r"`u` is a scipy.sparse matrix"):
        lti.state_covariance(A, B, sp.csr_matrix(np.ones((10, 1))))


def test_a_shaping_filter_within_rounding_of_the_circle_is_named_as_the_filter():
    A, B = np.diag([0.5, 0.2]), np.ones((2, 1))
    near = ([[1 - 1e-16]], [[1.0]], [[1.0]])  # radius 1 - 1.1e-16: refused, but as `A`
    with pytest.raises(lti.UnstableSystemError, match=r"^`shaping_filter` must be Schur-stable"
                                                      r".*rounding margin"):
        lti.expected_state_covariance(A, B, shaping_filter=near)
    with pytest.raises(lti.UnstableSystemError, match=r"^`shaping_filter` must be Schur-stable"):
        lti.expected_state_covariance(A, B, shaping_filter=([[1.5]], [[1.0]], [[1.0]]))
    ok = lti.expected_state_covariance(A, B, shaping_filter=([[1 - 1e-9]], [[1.0]], [[1.0]]))
    assert np.all(np.isfinite(ok)) and ok[0, 0] > 1e8  # still accepted just inside


def test_a_refused_complex_update_leaves_the_accumulator_as_it_was():
    acc = lti.StateCovarianceAccumulator(n=2)
    acc.update_states(np.ones((1, 3, 2)))
    before = acc.finalize()
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no RuntimeWarning beside the typed error
        with pytest.raises(lti.NonFiniteError, match="overflowed"):
            acc.update_states(np.full((1, 3, 2), 1e200 + 1e200j))
    after = acc.finalize()
    assert acc.count == 3 and after.dtype == np.float64 and np.array_equal(after, before)


@pytest.mark.parametrize("Z, B, exc, msg", [
    (np.ones((4, 2)) * (1 + 1j), ONES, ShapeError, "`Z` must be real"),
    (np.full((4, 2), np.nan), ONES, lti.NonFiniteError, "`Z` must be finite"),
    (np.ones((3, 2)), ONES, ShapeError, "`Z` must have n = 4 rows"),
    (np.ones((4, 2)), np.ones(4), ShapeError, "`B` must be a 2-D array"),
], ids=["complex", "nan", "rows", "1-D"])
def test_lowrank_stein_residual_validates_its_arguments(Z, B, exc, msg):
    from lti.lowrank import lowrank_stein_residual

    with warnings.catch_warnings():
        warnings.simplefilter("error")  # was a ComplexWarning / LinAlgError / raw errors
        with pytest.raises(exc, match=msg):
            lowrank_stein_residual(A_SP, Z, B)


def test_lowrank_stein_residual_still_equals_the_dense_residual():
    from lti.lowrank import lowrank_stein_residual

    Z = lti.lyapunov_factor(A_SP, ONES)
    A = A_SP.toarray()
    dense = np.linalg.norm(A @ Z @ Z.T @ A.T - Z @ Z.T + ONES @ ONES.T, 2)
    for M in (A_SP, A):
        assert abs(lowrank_stein_residual(M, Z, ONES) - dense) <= 1e-14


@pytest.mark.parametrize("dt", [0.1, 1.0])
def test_weighted_bt_refuses_a_shaping_filter_at_another_sampling_time(dt):
    control = pytest.importorskip("control", reason="the filter is a python-control system")
    G = lti.DiscreteLTI(np.diag([0.9, 0.5, 0.2]), np.ones((3, 1)), np.ones((1, 3)), dt=dt)
    other = control.ss([[0.5]], [[1.0]], [[1.0]], [[0.0]], 0.2)  # was accepted silently
    with pytest.raises(lti.InvalidArgumentError, match=r"`shaping_filter` has sampling time "
                                                       r"dt = 0.2, `sys` dt = " + str(dt)):
        lti.weighted_balanced_truncation(G, shaping_filter=other, order=1)
    for F in (control.ss([[0.5]], [[1.0]], [[1.0]], [[0.0]], dt),
              control.ss([[0.5]], [[1.0]], [[1.0]], [[0.0]], True),
              ([[0.5]], [[1.0]], [[1.0]])):  # same rate, or unspecified: accepted
        assert lti.weighted_balanced_truncation(G, shaping_filter=F, order=1).reduced.dt == dt
