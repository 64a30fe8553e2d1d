"""Test helpers for users of :mod:`lti`: hypothesis strategies and reduction assertions.

``from lti.testing import strategies`` gives the hypothesis strategies of
:mod:`lti.testing.strategies` (needs hypothesis, ``pip install "lti-adapters[test]"``);
the assertions (:func:`assert_reduction_within_bounds`, :func:`assert_balanced`,
:func:`reduction_error`, :func:`rounding_term`) need only numpy and scipy.
"""

from __future__ import annotations

import importlib

from lti.testing.assertions import (
    assert_balanced,
    assert_reduction_within_bounds,
    reduction_error,
    rounding_term,
)

__all__ = [
    "assert_balanced",
    "assert_reduction_within_bounds",
    "reduction_error",
    "rounding_term",
    "strategies",
]


def __getattr__(name: str):
    if name == "strategies":  # imported on first use: hypothesis is optional
        return importlib.import_module("lti.testing.strategies")
    raise AttributeError(f"module 'lti.testing' has no attribute {name!r}")
