"""benchmarks/bench_lyapunov.py's path column and refine table say what the solver did."""

from __future__ import annotations

import argparse

import numpy as np
import pytest

from tests.lti.jit_helpers import needs_numba
from tests.lti.test_stein_slow import _circle, _spy

pytest.importorskip("threadpoolctl", reason="the benchmark pins BLAS threads with threadpoolctl")


def _taken(monkeypatch, A, Q):
    """What solve_discrete_lyapunov(A, Q) did: "slow" (the slow-mode correction kept),
    "full" (the full step ran) or "none"."""
    from lti import solve_discrete_lyapunov

    with monkeypatch.context() as m:
        seen = _spy(m)
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
    A2 = 0.999 * _circle(np.random.default_rng(6), 256)
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
