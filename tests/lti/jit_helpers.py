"""Shared pieces of the compiled-kernel tests (lti._jit)."""

import contextlib

import pytest

from lti import _jit

needs_numba = pytest.mark.skipif(not _jit.available(),
                                 reason="numba not installed (extra 'fast')")
# for tests of a public function's compiled path (not forced with kernel_path): they have
# nothing to check when the run disables the kernels (the suite also runs with LTI_DISABLE_JIT=1)
needs_compiled = pytest.mark.skipif(
    not _jit.enabled(),
    reason="compiled kernels off (numba not installed: extra 'fast'; or LTI_DISABLE_JIT=1)")


@contextlib.contextmanager
def kernel_path(kernel, compiled):
    """Run the block on ``kernel``'s compiled form, counting its calls in the yielded list
    (so a test cannot silently run the NumPy path), or with compiled kernels disabled."""
    calls = []
    with pytest.MonkeyPatch.context() as mp:
        if compiled:
            mp.delenv("LTI_DISABLE_JIT", raising=False)
            kern = kernel.compiled()
            mp.setattr(kernel, "_compiled", lambda *a: calls.append(1) or kern(*a))
        else:
            mp.setenv("LTI_DISABLE_JIT", "1")
        yield calls
