"""benchmarks/bench_balanced.py's options: --rho reaches the systems and the files, --peers
selects the peers (a tiny run: n = 8)."""

from __future__ import annotations

import json

import numpy as np
import pytest

from lti import balanced_truncation

pytest.importorskip("threadpoolctl", reason="the benchmark pins BLAS threads with threadpoolctl")


def test_rho_and_peers_reach_the_result_files(tmp_path):
    from benchmarks import bench_balanced as bb

    argv = ["--sizes", "8", "--rho", "0.9999", "--peers", "AB09AD", "--no-modal",
            "--repeat", "1", "--hinf-max-n", "0", "--out", str(tmp_path), "--name", "slow"]
    assert bb.main(argv) == 0
    data = json.loads((tmp_path / "slow.json").read_text())
    assert data["rho"] == 0.9999
    methods = {row["method"] for row in data["rows"]}
    assert not methods & {"pyMOR BTReductor", "control balred"}
    assert {"lti sr", "lti bfsr", "one scipy.linalg.schur(A)"} <= methods
    assert "spectral radius 0.9999" in (tmp_path / "slow.md").read_text()
    G = bb.random_system(8, seed=8, rho=0.9999)  # the system the rows were measured on
    assert np.max(np.abs(np.linalg.eigvals(G.A))) == pytest.approx(0.9999, rel=1e-12)
    bound = balanced_truncation(G, order=2).error_bound
    assert all(row["bound"] == pytest.approx(bound, rel=1e-9) for row in data["rows"])


def test_result_files_state_the_compiled_kernels(tmp_path, monkeypatch):
    from benchmarks import bench_balanced as bb
    from lti import _jit

    argv = ["--sizes", "8", "--peers", "AB09AD", "--no-modal", "--repeat", "1",
            "--hinf-max-n", "0", "--out", str(tmp_path), "--name", "jit"]
    for disabled in ("0", "1"):
        monkeypatch.setenv("LTI_DISABLE_JIT", disabled)
        assert bb.main(argv) == 0
        md = (tmp_path / "jit.md").read_text()
        assert f"lti._jit.enabled() = {_jit.enabled()}" in md
        assert json.loads((tmp_path / "jit.json").read_text())["jit"] in md
    assert "lti._jit.enabled() = False" in md  # the last run was the disabled one
