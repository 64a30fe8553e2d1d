"""Regression tests for issue 14 (items 1-7) and the issue-17 additions to the lti API.

Each test failed on the code before its fix (main at 16055fb).
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest

from lti import (
    DiscreteLTI,
    InvalidArgumentError,
    balanced_truncation,
    balanced_truncation_from_factors,
    controllability_gramian,
    gramian_factors,
    h2_norm,
    hankel_singular_values,
    hinf_norm,
    observability_gramian,
    weighted_balanced_truncation,
)
from lti.system import as_discrete_system


def _random_stable(seed, n=8, m=1, p=1, rho=0.9):
    rng = np.random.default_rng(seed)
    A = rng.standard_normal((n, n))
    A *= rho / np.max(np.abs(np.linalg.eigvals(A)))
    return DiscreteLTI(A, rng.standard_normal((n, m)), rng.standard_normal((p, n)),
                       rng.standard_normal((p, m)))


# ------------------------------------------------------------- issue 17: rel_tol


def test_rel_tol_keeps_the_hsvs_above_the_threshold():
    G = _random_stable(1, n=12)
    hsv = hankel_singular_values(G)
    for rel in (1.0, 0.5, 1e-2, 1e-4):
        res = balanced_truncation(G, rel_tol=rel)
        assert res.order == int(np.count_nonzero(hsv >= rel * hsv[0]))
        assert res.error_bound == pytest.approx(2 * hsv[res.order:].sum(), rel=1e-12, abs=0)
    # the same rule from given factors and for the weighted reduction
    Lc, Lo = gramian_factors(G)
    assert balanced_truncation_from_factors(G, Lc, Lo, rel_tol=1e-2).order == (
        balanced_truncation(G, rel_tol=1e-2).order
    )
    W = weighted_balanced_truncation(G, input_covariance=np.eye(1), rel_tol=1e-2)
    assert W.order == int(np.count_nonzero(W.hsv >= 1e-2 * W.hsv[0]))


def test_rel_tol_keeps_the_unstable_part():
    G = _random_stable(2, n=6)
    A = np.zeros((8, 8))
    A[:6, :6] = G.A
    A[6:, 6:] = np.diag([1.5, -2.0])
    rng = np.random.default_rng(3)
    Gu = DiscreteLTI(A, rng.standard_normal((8, 1)), rng.standard_normal((1, 8)))
    res = balanced_truncation(Gu, rel_tol=1e-3)
    assert res.n_unstable == 2
    assert res.order == 2 + int(np.count_nonzero(res.hsv >= 1e-3 * res.hsv[0]))


@pytest.mark.parametrize(
    "kwargs",
    [dict(rel_tol=0.0), dict(rel_tol=1.5), dict(rel_tol=np.nan), dict(rel_tol=True),
     dict(rel_tol=0.1, order=2), dict(rel_tol=0.1, tol=1e-3), dict()],
)
def test_rel_tol_is_validated(kwargs):
    with pytest.raises(InvalidArgumentError):
        balanced_truncation(_random_stable(4), **kwargs)


def test_rel_tol_of_the_zero_system_keeps_nothing():
    G = DiscreteLTI(0.5 * np.eye(3), np.zeros((3, 1)), np.ones((1, 3)))
    assert balanced_truncation(G, rel_tol=0.5).order == 0


# ------------------------------------------- issue 14 item 7: one conversion rule


def test_every_entry_point_accepts_transfer_functions_and_tuples():
    control = pytest.importorskip("control")
    tf = control.tf([1.0, 0.5], [1.0, -0.9, 0.2], True)  # (z + 0.5) / (z^2 - 0.9 z + 0.2)
    G = DiscreteLTI.from_control(tf)
    tup = (G.A, G.B, G.C, G.D)
    ref_hinf = hinf_norm(G).value
    for sys in (tf, tup, control.ss(tf)):
        assert hinf_norm(sys).value == pytest.approx(ref_hinf, rel=1e-12)
        assert h2_norm(sys) == pytest.approx(h2_norm(G), rel=1e-12)
        assert np.allclose(controllability_gramian(sys), controllability_gramian(G))
        assert np.allclose(observability_gramian(sys), observability_gramian(G))
        assert np.allclose(hankel_singular_values(sys), hankel_singular_values(G))
        res = balanced_truncation(sys, order=1)
        assert res.order == 1
    # a python-control input gives a python-control result; a tuple gives a DiscreteLTI
    assert isinstance(balanced_truncation(tf, order=1).reduced, control.StateSpace)
    assert isinstance(balanced_truncation(tup, order=1).reduced, DiscreteLTI)


def test_conversion_rule_rejects_what_it_cannot_read():
    with pytest.raises(InvalidArgumentError, match="tuple"):
        as_discrete_system((np.eye(2),))
    with pytest.raises(InvalidArgumentError, match="DiscreteLTI"):
        hinf_norm(np.eye(2))
    control = pytest.importorskip("control")
    with pytest.raises(InvalidArgumentError, match="discrete-time"):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            h2_norm(control.tf([1.0], [1.0, 1.0]))  # continuous time
