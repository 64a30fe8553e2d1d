"""Exception classes raised by :mod:`lti`.

Every error raised for bad user input subclasses both :class:`LTIError` and the
matching built-in (``ValueError``, ``ArithmeticError``, ``ImportError``), so callers
can catch either the project-specific or the generic class.
"""

from __future__ import annotations

__all__ = [
    "LTIError",
    "ShapeError",
    "NonFiniteError",
    "NotSymmetricError",
    "UnstableSystemError",
    "InvalidArgumentError",
    "SolverError",
    "MissingDependencyError",
    "EmptyDataError",
    "SparseNotSupportedError",
]


class LTIError(Exception):
    """Base class of every exception raised by :mod:`lti`."""


class ShapeError(LTIError, ValueError):
    """An array has the wrong number of dimensions or non-conforming sizes."""


class NonFiniteError(LTIError, ValueError):
    """An array contains NaN or infinite entries."""


class NotSymmetricError(LTIError, ValueError):
    """A matrix that must be symmetric (Hermitian) is not, relative to its scale."""


class UnstableSystemError(LTIError, ValueError):
    """A matrix that must be Schur-stable (spectral radius < 1) is not."""


class InvalidArgumentError(LTIError, ValueError):
    """An option has an invalid value (unknown method, bad order or tolerance...)."""


class SolverError(LTIError, ArithmeticError):
    """A numerical algorithm failed (no convergence, singular pencil, ...)."""


class MissingDependencyError(LTIError, ImportError):
    """An optional dependency is not installed; the message names the extra to install."""


class EmptyDataError(LTIError, ValueError):
    """A statistic was requested from no data (an empty stream or an empty accumulator)."""


class SparseNotSupportedError(LTIError, TypeError):
    """An operation needs dense algebra but the system's ``A`` is ``scipy.sparse``; the
    message names the sparse alternative (low-rank factors, reduce first, ARPACK)."""
