"""benchmarks/bench_lyapunov.py's path column and refine table say what the solver did."""

from __future__ import annotations

import argparse

import numpy as np
import pytest
import scipy.linalg as sla

import lti._stein as stein
import lti._stein_slow as slow
from tests.lti.jit_helpers import needs_numba

pytest.importorskip("threadpoolctl", reason="the benchmark pins BLAS threads with threadpoolctl")


def _taken(monkeypatch, A, Q):
    """What solve_discrete_lyapunov(A, Q) did: "slow" (the slow-mode correction kept),
    "full" (the full step ran) or "none"."""
    from lti import solve_discrete_lyapunov

    seen = {"slow": [], "full": 0}
    orig_ratio, orig_full = slow.ResidualProbe.ratio, stein._refine_full

    def ratio(self, H, V):
        seen["slow"].append(orig_ratio(self, H, V))
        return seen["slow"][-1]

    def full(*args):
        seen["full"] += 1
        return orig_full(*args)

    with monkeypatch.context() as m:
        m.setattr(slow.ResidualProbe, "ratio", ratio)
        m.setattr(stein, "_refine_full", full)
        solve_discrete_lyapunov(A, Q)
    return "full" if seen["full"] else ("slow" if seen["slow"] else "none")


@needs_numba
def test_solve_path_names_the_refinement_that_ran(monkeypatch):
    from benchmarks import bench_lyapunov as bl

    monkeypatch.delenv("LTI_DISABLE_JIT", raising=False)
    A, B = bl.make_case("dense", 256, 0.9999)
    Q = B @ B.T
    assert _taken(monkeypatch, A, Q) == "slow"
    assert bl.solve_path("dense", A, Q) == "schur+F+refine(slow)"
    # eigenvalues on a circle: the slow correction is refused, the full step runs
    rng = np.random.default_rng(6)
    Zq = np.linalg.qr(rng.standard_normal((256, 256)))[0]
    th = rng.uniform(0, np.pi, 128)
    R2 = [np.array([[np.cos(t), -np.sin(t)], [np.sin(t), np.cos(t)]]) for t in th]
    A2 = 0.999 * Zq @ sla.block_diag(*R2) @ Zq.T
    assert _taken(monkeypatch, A2, Q) == "full"
    assert bl.solve_path("dense", A2, Q).startswith("schur+F+refine")
    assert "slow" not in bl.solve_path("dense", A2, Q)
    # rho = 0.95: the factored Smith path, no Schur form
    A3, B3 = bl.make_case("dense", 256, 0.95)
    assert bl.solve_path("dense", A3, B3 @ B3.T) == "smith"


def test_refine_table_runs_the_three_options():
    from benchmarks import bench_lyapunov as bl

    args = argparse.Namespace(sizes=[8, 40], repeats=1, clock="cpu")
    rows = bl.run_refine_modes(args)
    assert [(n, mode) for n, mode, _, _ in rows] == [(40, "'auto'"), (40, "True"), (40, "False")]
    res = {mode: r for _, mode, _, r in rows}
    assert res["True"] <= res["False"] and res["'auto'"] <= res["False"]
