"""Exception classes raised by :mod:`adapters`.

Each subclasses :class:`AdapterError` and the matching built-in exception, so callers
can catch either.
"""

from __future__ import annotations

__all__ = [
    "AdapterError",
    "AdapterShapeError",
    "AdapterDtypeError",
    "AdapterStabilityError",
    "AdapterConfigError",
    "TargetModulesNotFoundError",
    "CheckpointError",
    "BaseModelMismatchError",
    "MissingDependencyError",
    "CalibrationError",
]


class AdapterError(Exception):
    """Base class of every exception raised by :mod:`adapters`."""


class AdapterShapeError(AdapterError, ValueError):
    """A tensor has the wrong number of dimensions or non-conforming sizes."""


class AdapterDtypeError(AdapterError, TypeError):
    """A tensor has an unsupported dtype (e.g. an integer tensor where floats are needed)."""


class AdapterStabilityError(AdapterError, ValueError):
    """A diagonal state matrix has an entry with modulus >= 1."""


class AdapterConfigError(AdapterError, ValueError):
    """An :class:`~adapters.HRMConfig` field or an option has an invalid value."""


class TargetModulesNotFoundError(AdapterError, ValueError):
    """No module of the model matches the configured target modules."""


class CheckpointError(AdapterError, ValueError):
    """An adapter checkpoint is missing, tampered with, or does not match the model."""


class BaseModelMismatchError(CheckpointError):
    """An adapter checkpoint was saved on another base model (type, width or depth differ)."""


class MissingDependencyError(AdapterError, ImportError):
    """An optional dependency is not installed; the message names the extra to install."""


class CalibrationError(AdapterError, ValueError):
    """Calibration data that cannot give the statistics asked for: a stream with NaN or inf
    at a counted position, or statistics that never excite an adapter (a zero data-driven
    Gramian, which no reduced order can be balanced from)."""
