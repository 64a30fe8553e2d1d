"""Overhead removed from balanced_truncation's Schur path (issue 15 part 3): each shortcut
against the computation it replaced, bit for bit."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

import lti._bt_core as core
from lti import DiscreteLTI, balanced_truncation
from lti._order import check_rule
from lti.gramians import stable_gramian_factors


def _dense(n, rho, seed):  # bench_balanced's family
    rng = np.random.default_rng(seed)
    A = rng.standard_normal((n, n))
    A *= rho / np.max(np.abs(np.linalg.eigvals(A)))
    return DiscreteLTI(A, rng.standard_normal((n, 2)), rng.standard_normal((2, n)),
                       rng.standard_normal((2, 2)))


@pytest.mark.parametrize("match_dc", [False, True])
@pytest.mark.parametrize("n", [12, 40])
def test_schur_coordinates_without_a_second_discrete_lti(n, match_dc):
    """reduce_stable on the plain Realisation of (T, Z^T B, C Z, D) equals the one on a
    validated DiscreteLTI of the same matrices (what balanced_truncation built before)."""
    G = _dense(n, 0.9999, seed=n)
    F = stable_gramian_factors(G, in_schur_basis=True)
    S = F.schur
    assert F.path == "schur"
    rule = check_rule(n // 4, None, None, n)
    mats = (S.T, S.Z.T @ G.B, G.C @ S.Z, G.D)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        a = core.reduce_stable(core.Realisation(*mats), F.Lc, F.Lo, rule, "sr", match_dc, 2,
                               rho=F.rho)
        b = core.reduce_stable(DiscreteLTI(*mats, G.dt), F.Lc, F.Lo, rule, "sr", match_dc, 2,
                               rho=F.rho)
        res = balanced_truncation(G, order=n // 4, match_dc=match_dc)
    for f in ("A", "B", "C", "D", "T", "Ti", "hsv", "bounds", "rounding"):
        assert np.array_equal(getattr(a, f), getattr(b, f)), f
    assert (a.order, a.minimal_order, a.kappa, a.gain_unit) == (b.order, b.minimal_order,
                                                                 b.kappa, b.gain_unit)
    assert np.array_equal(res.reduced.A, a.A) and np.array_equal(res.reduced.D, a.D)
    assert res.reduced.D is not G.D and not np.shares_memory(res.reduced.D, G.D)
