"""Accuracy of the Hankel singular values from low-rank ADI factors (lti.lowrank): the
residual-to-HSV error relation and the ``hsv_rtol`` stopping rule of
``lowrank_gramian_factors``, against the dense path at small n."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.linalg as sla

from lti import DiscreteLTI, hankel_singular_values
from lti.lowrank import lowrank_gramian_factors
from tests.lti.test_sparse import heat, rotating


def _leading_rel_error(Fc, Fo, ref, floor=1e-6):
    """max_i |s_i - sigma_i| / sigma_i over the reference HSVs >= floor * sigma_1."""
    s = np.linalg.svd(Fo.Z.T @ Fc.Z, compute_uv=False)
    m = int(np.count_nonzero(ref >= floor * ref[0]))
    s = np.concatenate([s, np.zeros(max(m - s.size, 0))])
    return float(np.max(np.abs(s[:m] - ref[:m]) / ref[:m]))


@pytest.fixture(scope="module")
def heat256():
    A, B, C = heat(16)
    return A, B, C, hankel_singular_values(DiscreteLTI(A.toarray(), B, C))


@pytest.fixture(scope="module")
def rot200():
    A, B, C = rotating(200)
    return A, B, C, hankel_singular_values(DiscreteLTI(A.toarray(), B, C))


@pytest.mark.parametrize("case", ["heat256", "rot200"])
def test_default_leading_hsvs_agree_with_dense_to_1e8(case, request):
    A, B, C, ref = request.getfixturevalue(case)
    Fc, Fo = lowrank_gramian_factors(A, B, C)  # defaults: tol 1e-10, hsv_rtol 1e-9
    err = _leading_rel_error(Fc, Fo, ref)
    assert err <= 1e-8
    assert Fc.hsv_rel_error == Fo.hsv_rel_error and Fc.hsv_rel_error <= 1e-8
    # the residual alone (1e-10) leaves the smaller leading HSVs far less accurate
    Rc, Ro = lowrank_gramian_factors(A, B, C, hsv_rtol=None)
    assert Rc.hsv_rel_error is None
    assert _leading_rel_error(Rc, Ro, ref) > 1e-6
    assert Fc.iterations > Rc.iterations


def test_hsv_rtol_is_met_and_monotone_in_cost(heat256):
    A, B, C, ref = heat256
    its = []
    for rtol in (1e-4, 1e-6, 1e-8):
        Fc, Fo = lowrank_gramian_factors(A, B, C, hsv_rtol=rtol)
        assert _leading_rel_error(Fc, Fo, ref) <= rtol
        its.append(Fc.iterations)
    assert its == sorted(its)


def test_public_hsvs_of_a_sparse_system_use_the_rule(heat256):
    A, B, C, ref = heat256
    s = hankel_singular_values(DiscreteLTI(A, B, C))
    m = int(np.count_nonzero(ref >= 1e-6 * ref[0]))
    assert np.max(np.abs(s[:m] - ref[:m]) / ref[:m]) <= 1e-8
    assert np.all(s <= ref[: s.size] * (1 + 1e-11))  # lower bounds (ADI iterates only)


@pytest.mark.parametrize("tol", [1e-4, 1e-8])
def test_residual_to_hsv_error_relation(tol):
    """s_i <= sigma_i <= sqrt(s_i^2 + eta_c^2 + eta_o^2), eta the Hankel norms of the
    Gramian errors: eta_c^2 = lambda_max((P - Pk) Q), eta_o^2 = lambda_max(P (Q - Qk))."""
    A, B, C = heat(12)
    Ad = A.toarray()
    P = sla.solve_discrete_lyapunov(Ad, B @ B.T)
    Q = sla.solve_discrete_lyapunov(Ad.T, C.T @ C)
    sigma = np.sqrt(np.sort(np.abs(np.linalg.eigvals(P @ Q)))[::-1])
    Fc, Fo = lowrank_gramian_factors(A, B, C, tol=tol, hsv_rtol=None)
    Pk, Qk = Fc.Z @ Fc.Z.T, Fo.Z @ Fo.Z.T
    assert np.min(np.linalg.eigvalsh(P - Pk)) >= -1e-12 * np.linalg.norm(P, 2)
    eta_c2 = float(np.max(np.abs(np.linalg.eigvals((P - Pk) @ Q))))
    eta_o2 = float(np.max(np.abs(np.linalg.eigvals(P @ (Q - Qk)))))
    s = np.linalg.svd(Fo.Z.T @ Fc.Z, compute_uv=False)
    k = s.size
    rnd = 1e-12 * sigma[0] ** 2
    assert np.all(s**2 <= sigma[:k] ** 2 + rnd)
    assert np.all(sigma[:k] ** 2 <= s**2 + eta_c2 + eta_o2 + rnd)
    # the relation is not vacuous: the error terms are of the residual's order
    assert eta_c2 + eta_o2 <= 1e3 * tol * sigma[0] ** 2


def test_max_iter_before_the_hsv_accuracy_warns(heat256):
    A, B, C, _ = heat256
    Fc0, _ = lowrank_gramian_factors(A, B, C, hsv_rtol=None)
    with pytest.warns(UserWarning, match="hsv_rtol"):
        Fc, Fo = lowrank_gramian_factors(A, B, C, hsv_rtol=1e-9, max_iter=Fc0.iterations + 4)
    assert Fc.converged and Fc.hsv_rel_error > 1e-9


@pytest.mark.parametrize("bad", [0.0, 1.5, True, "x"])
def test_bad_hsv_options_are_rejected(bad, heat256):
    from lti.exceptions import InvalidArgumentError

    A, B, C, _ = heat256
    with pytest.raises(InvalidArgumentError):
        lowrank_gramian_factors(A, B, C, hsv_rtol=bad)
    if bad != 0.0:
        with pytest.raises(InvalidArgumentError):
            lowrank_gramian_factors(A, B, C, hsv_floor=bad)
