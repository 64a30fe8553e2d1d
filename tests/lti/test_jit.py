"""The optional compiled-kernel switch (lti._jit)."""

import subprocess
import sys

import numpy as np
import pytest

from lti import _jit


def _dot_py(x, y):
    s = 0.0
    for i in range(x.shape[0]):
        s += x[i] * y[i]
    return s


_dot = _jit.kernel(_dot_py)


def test_import_lti_does_not_import_numba():
    code = "import sys, lti; print('numba' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         timeout=300)
    assert out.stdout.strip() == "False"


def test_disable_switch(monkeypatch):
    monkeypatch.setenv("LTI_DISABLE_JIT", "1")
    assert not _jit.enabled()
    assert _dot.compiled() is None


@pytest.mark.skipif(not _jit.available(), reason="numba not installed (extra 'fast')")
def test_kernel_compiles_and_agrees(monkeypatch):
    monkeypatch.delenv("LTI_DISABLE_JIT", raising=False)
    assert _jit.enabled()
    f = _dot.compiled()
    assert f is not None and f is _dot.compiled()  # compiled once
    x, y = np.random.default_rng(0).standard_normal((2, 50))
    assert f(x, y) == pytest.approx(_dot.py_func(x, y), rel=1e-14, abs=0)
    assert "compiled" in repr(_dot)
