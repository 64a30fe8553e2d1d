"""Optional compiled kernels (numba).

A few inner loops of ``lti`` (the rows of Hammarling's method, the columns of the Stein
recursion's leaves) are a long sequence of tiny operations: in Python each costs about a
microsecond of interpreter and call overhead, which dominates below n ~ 500. With the
optional ``numba`` package (extra ``fast``: ``pip install lti-adapters[fast]``) those loops
are compiled on first use and cached on disk; without it, or with the environment variable
``LTI_DISABLE_JIT=1``, the NumPy/BLAS implementations run instead. Both give the same
results up to rounding; the tests compare them.

Usage in a module::

    from lti._jit import kernel    # (``from lti import _jit`` breaks the layout rule
                                   # against importing private names across modules)

    def _kernel_py(T, x):          # plain Python/NumPy loops that numba can compile
        ...

    _kernel = kernel(_kernel_py)

    def solve(...):
        k = _kernel.compiled()      # None: numba missing or disabled -> NumPy path
        if k is not None:
            return k(T, x)
        return _solve_numpy(T, x)

``import lti`` never imports numba: the import and the compilation happen on the first
call of :meth:`Kernel.compiled`.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable

__all__ = ["Kernel", "available", "enabled", "kernel"]

_ENV = "LTI_DISABLE_JIT"
_lock = threading.Lock()
_numba = None  # the module once imported; False when the import failed


def _import_numba():
    global _numba
    if _numba is None:
        try:
            import numba
        except ImportError:
            _numba = False
        else:
            _numba = numba
    return _numba


def available() -> bool:
    """True when numba can be imported (whether or not it is disabled)."""
    return bool(_import_numba())


def enabled() -> bool:
    """True when compiled kernels are used: numba importable and ``LTI_DISABLE_JIT`` unset
    (or ``0``). Read at each call, so tests can switch it with ``monkeypatch.setenv``."""
    return os.environ.get(_ENV, "0") in ("", "0") and available()


class Kernel:
    """A Python function compiled by ``numba.njit(cache=True)`` on first use.

    ``py_func`` is kept as it was written (it also runs, slowly, as plain Python: tests may
    use it as a line-by-line reference of the compiled code).
    """

    def __init__(self, py_func: Callable, **options):
        self.py_func = py_func
        self.options = {"cache": True, "nogil": True, **options}
        self._compiled = None
        self.__name__ = py_func.__name__
        self.__doc__ = py_func.__doc__

    def compiled(self):
        """The compiled function, or None when compiled kernels are not enabled."""
        if not enabled():
            return None
        if self._compiled is None:
            with _lock:
                if self._compiled is None:
                    self._compiled = _numba.njit(**self.options)(self.py_func)
        return self._compiled

    def __repr__(self) -> str:
        state = "compiled" if self._compiled is not None else "not compiled"
        return f"<lti._jit.Kernel {self.__name__} ({state}, jit enabled={enabled()})>"


def kernel(py_func: Callable | None = None, **options):
    """Decorator: ``@kernel`` or ``@kernel(fastmath=False)`` -> :class:`Kernel`."""
    if py_func is None:
        return lambda f: Kernel(f, **options)
    return Kernel(py_func, **options)
