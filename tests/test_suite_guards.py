"""The test suite's own guards (conftest.py): a file that leaves process state behind is
reported and the state is put back, a left-over child process is killed, importorskip
reasons name the extra, and the session stops after two timed-out tests.

Each check runs a small pytest session in a subprocess, with this repository's conftest.py
copied into a temporary directory.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _session(tmp_path: Path, files: dict[str, str], *args: str) -> subprocess.CompletedProcess:
    (tmp_path / "conftest.py").write_text((ROOT / "conftest.py").read_text())
    (tmp_path / "setup.cfg").write_text("[options.extras_require]\ncontrol =\n    control>=0.10\n")
    (tmp_path / "pytest.ini").write_text("[pytest]\n")
    for name, code in files.items():
        (tmp_path / name).write_text(textwrap.dedent(code))
    return subprocess.run([sys.executable, "-m", "pytest", "-q", "-rs", "-p", "no:cacheprovider",
                           *args], cwd=tmp_path, capture_output=True, text=True, timeout=240)


def test_state_left_behind_is_reported_and_put_back(tmp_path):
    out = _session(tmp_path, {
        "test_a_leaks.py": """
            import os, subprocess, numpy as np
            def test_leaks(tmp_path):
                os.environ["GUARD_CHECK_LEAK"] = "1"
                np.seterr(all="raise")
                subprocess.Popen(["sleep", "60"])
                open("left_over.txt", "w").write("x")
        """,
        "test_b_after.py": """
            import os, sys, numpy as np, pytest
            def test_state_was_put_back():
                assert "GUARD_CHECK_LEAK" not in os.environ
                assert np.geterr()["divide"] == "warn"
            def test_skip_names_the_extra(monkeypatch):
                monkeypatch.setitem(sys.modules, "control", None)
                # no reason on purpose: the conftest hook under test adds the extra to name
                pytest.importorskip("control")
        """})
    text = out.stdout + out.stderr
    assert "test_a_leaks.py left state behind" in text, text
    assert "environment variable GUARD_CHECK_LEAK: None -> '1'" in text
    assert "numpy error handling (np.seterr)" in text
    assert "child process" in text and "'sleep 60' (killed)" in text
    assert "file written in the repository (use tmp_path): left_over.txt" in text
    # the leaking test passes and its file errors at teardown; test_b saw everything put back
    assert "2 passed, 1 skipped, 1 error" in text, text
    assert "(extra 'control': pip install -e \".[control]\")" in text, text


@pytest.mark.skipif(sys.platform == "win32", reason="pytest-timeout's signal method (POSIX)")
def test_the_session_stops_after_two_timed_out_tests(tmp_path):
    pytest.importorskip("pytest_timeout", reason="test extra: pip install -e '.[test]'")
    out = _session(tmp_path, {"test_hangs.py": """
        import time, pytest
        @pytest.mark.timeout(1)
        def test_hang_1():
            time.sleep(30)
        @pytest.mark.timeout(1)
        def test_hang_2():
            time.sleep(30)
        def test_not_reached():
            raise AssertionError("ran: the session should have stopped after two timed-out tests")
    """})
    text = out.stdout + out.stderr
    assert out.returncode != 0
    assert text.count("Timeout (>1.0s) from pytest-timeout") == 2, text
    assert "2 tests ran into the per-test timeout" in text, text
    assert "2 failed" in text and "passed" not in text, text  # the third test did not run
