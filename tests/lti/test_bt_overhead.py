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
    # D_r = D is G's own read-only D, shared (tests/lti/test_shared_d.py); a matched D is new
    assert not res.reduced.D.flags.writeable
    if match_dc:
        assert not np.shares_memory(res.reduced.D, G.D)
    else:
        assert res.reduced.D is G.D


@pytest.mark.parametrize("unstable", [False, True])
def test_the_complex_triangle_is_made_only_for_the_numpy_rounding_path(unstable, monkeypatch):
    """The compiled rounding kernel works on the real Schur form: with it, balanced
    truncation (stable and split paths) never forms the complex triangle; without it the
    rounding term's NumPy path forms it, and the bounds agree to rounding."""
    import lti._rounding as rounding
    import lti._schur as schur
    from lti import _jit

    if not _jit.available():
        pytest.skip("numba not installed (extra 'fast')")
    monkeypatch.delenv("LTI_DISABLE_JIT", raising=False)
    G = _dense(24, 1.05 if unstable else 0.9999, seed=24)
    calls = []
    real = schur.complex_triangle
    monkeypatch.setattr(schur, "complex_triangle", lambda T: calls.append(1) or real(T))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fast = balanced_truncation(G, order=8)
        assert calls == []
        monkeypatch.setattr(rounding._resolvent_norms, "compiled", lambda: None)
        slow = balanced_truncation(G, order=8)
    assert len(calls) == 1
    assert (fast.n_unstable > 0) is unstable and fast.n_unstable == slow.n_unstable
    assert fast.rounding_term == pytest.approx(slow.rounding_term, rel=1e-10, abs=0)
    assert np.array_equal(fast.hsv, slow.hsv)
