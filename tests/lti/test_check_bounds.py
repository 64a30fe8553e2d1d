"""Cheap subset of benchmarks/check_bounds.py (issue 14 acceptance): a few systems of each
family, every method, checked for ``lower_bound <= err <= error_bound`` with err from an
H-infinity norm computed independently of ``lti.hinf_norm`` (AB13DD, or a dense sweep),
``Ti T = I`` and no collapse below the requested order."""

from __future__ import annotations

import importlib.util
import pathlib

import pytest

_PATH = pathlib.Path(__file__).resolve().parents[2] / "benchmarks" / "check_bounds.py"
_spec = importlib.util.spec_from_file_location("check_bounds", _PATH)
cb = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(cb)


def _violations(G, r, methods=cb.METHODS):
    out = []
    for method, dc in methods:
        row = cb.check_one(G, r, method, dc)
        if row["collapse"] or row["upper"] or row["lower"] or row["ti_t"]:
            out.append({k: row[k] for k in ("method", "match_dc", "r", "order", "err",
                                             "error_bound", "lower_bound", "ti_t_rel")})
    return out


@pytest.mark.parametrize(("family", "seed", "r"), [("nonnormal", 0, 5), ("nonnormal", 1, 3),
                                                   ("resonant", 0, 6), ("resonant", 1, 12)])
def test_interior_orders_within_bounds(family, seed, r):
    G = {"nonnormal": cb.nonnormal_system, "resonant": cb.resonant_system}[family](seed)
    assert _violations(G, r) == []


@pytest.mark.parametrize(("seed", "r"), [(10, 8), (61, 10)])
def test_non_normal_bfsr_within_bounds(seed, r):
    assert _violations(cb.nonnormal_system(seed), r, [("bfsr", False), ("bfsr", True)]) == []


@pytest.mark.parametrize("seed", [0, 3])
def test_resonant_full_order_within_bounds(seed):
    G = cb.resonant_system(seed)
    assert _violations(G, G.n, [("sr", False), ("bfsr", False)]) == []


def test_fir_firwin_order_8_every_r():
    G = cb.fir_system(8)
    assert [v for r in range(1, G.n + 1) for v in _violations(G, r)] == []


def test_sweep_agrees_with_ab13dd():
    """The two independent H-infinity measurements agree (the sweep is a lower bound)."""
    pytest.importorskip("slycot", reason="extra 'control' (slycot) not installed")
    for seed in range(3):
        G = cb.resonant_system(seed)
        args = (G.A, G.B, G.C, G.D)
        sw, (ab, how) = cb.sweep_hinf(*args), cb.independent_hinf(*args)
        assert how == "AB13DD" and sw <= ab * (1 + 1e-9) and sw >= ab * (1 - 1e-9)


# SPA (match_dc) of this firwin FIR (nearly tied HSVs, relative gap 2e-8) gives
# A_r = -1 + O(1e-14), a pole within rounding of the unit circle, where no bound holds for
# the computed model (it was first certified with a finite bound, then reported as
# error_bound = inf); lti now returns the truncated model of that order instead, with a
# UserWarning and match_dc False: a finite error inside finite bounds
@pytest.mark.parametrize("method", ["sr", "bfsr"])
def test_fir_spa_order_1_falls_back_to_truncation(method):
    import numpy as np

    from lti import balanced_truncation

    G = cb.fir_system(48, seed=4)
    with pytest.warns(UserWarning, match="pole within rounding of the unit circle"):
        res = balanced_truncation(G, order=1, method=method, match_dc=True)
    assert not res.match_dc and res.order == 1 and np.isfinite(res.error_bound)
    err, _ = cb.independent_hinf(*cb.error_system(G, res.reduced))
    assert np.isfinite(err) and res.lower_bound <= err <= res.error_bound
    assert _violations(G, 1, [(method, True)]) == []
