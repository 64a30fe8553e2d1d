"""Conversions of other packages' systems to state-space matrices (python-control,
scipy.signal), and the sampling-time rule, for :mod:`lti.system`."""

from __future__ import annotations

import math
import numbers

import numpy as np

from lti.exceptions import InvalidArgumentError, MissingDependencyError

__all__ = ["check_dt", "control_matrices", "import_control", "scipy_matrices"]


def check_dt(dt, name: str = "dt", *, allow_true: bool = True):
    """Return a validated sampling time: ``True`` (unspecified, when `allow_true`) or a
    positive float."""
    if dt is True and allow_true:
        return True
    want = "True or a positive number" if allow_true else "a positive number (a sampling time)"
    if isinstance(dt, bool) or not isinstance(dt, numbers.Real):
        raise InvalidArgumentError(f"`{name}` must be {want}; got {dt!r}")
    try:
        dt = float(dt)
    except OverflowError:  # an int beyond the float range
        dt = math.inf
    if not (np.isfinite(dt) and dt > 0):
        raise InvalidArgumentError(f"`{name}` must be {want}; got {dt!r}")
    return dt


def control_matrices(sys, name: str) -> tuple:
    """``(A, B, C, D, dt)`` of a python-control system (``is_control_system(sys)``), the
    errors naming the argument `name`."""
    control = import_control()
    if not isinstance(sys, control.StateSpace):
        try:
            sys = control.ss(sys)
        except (TypeError, ValueError) as exc:  # an improper tf, an FRD, ...
            raise InvalidArgumentError(
                f"`{name}` ({type(sys).__name__}) has no state-space realisation: {exc}"
            ) from exc
    dt = sys.dt
    if dt is None:
        dt = True
    if dt is not True and (isinstance(dt, bool) or dt == 0):
        raise InvalidArgumentError(
            f"`{name}` must be discrete-time (dt True or > 0); got dt={sys.dt!r}"
        )
    return sys.A, sys.B, sys.C, sys.D, check_dt(dt, f"{name}.dt")


def scipy_matrices(sys, name: str) -> tuple:
    """``(A, B, C, D, dt)`` of a ``scipy.signal.dlti`` (state space, transfer function or
    zeros/poles/gain)."""
    if getattr(sys, "dt", None) is None:
        raise InvalidArgumentError(
            f"`{name}` must be discrete-time; got a continuous-time scipy.signal "
            f"{type(sys).__name__} (discretise it with its to_discrete(dt) first)"
        )
    try:
        ss = sys.to_ss()
    except (TypeError, ValueError) as exc:  # an improper transfer function
        raise InvalidArgumentError(
            f"`{name}` ({type(sys).__name__}) has no state-space realisation: {exc}"
        ) from exc
    return ss.A, ss.B, ss.C, ss.D, check_dt(ss.dt, f"{name}.dt")


def import_control():
    try:
        import control
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise MissingDependencyError(
            'python-control is required; install it with pip install "lti-adapters[control]"'
        ) from exc
    return control
