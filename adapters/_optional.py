"""The one way ``adapters`` (and the harness in ``benchmarks/hrm``) import an optional
dependency: :func:`require` imports it where it is used, or raises
:class:`~adapters.exceptions.MissingDependencyError` naming the extra to install."""

from __future__ import annotations

import importlib
from types import ModuleType

from adapters.exceptions import MissingDependencyError

__all__ = ["require"]


def require(module: str, *, extra: str, purpose: str) -> ModuleType:
    """Import an optional dependency, or say which extra installs it.

    Parameters
    ----------
    module : str
        Dotted module name, e.g. ``"safetensors.torch"``.
    extra : str
        The ``lti-adapters`` extra that installs it (``"hf"``, ``"plot"``, ...).
    purpose : str
        What needs it, the subject of the error message (e.g. ``"the LoRA baseline"``).

    Returns
    -------
    module
        The imported module.

    Raises
    ------
    MissingDependencyError
        The module (or one of its own imports) is missing.

    Examples
    --------
    >>> require("json", extra="none", purpose="this example").__name__
    'json'
    >>> try:
    ...     require("no_such_module_here", extra="plot", purpose="the plot")
    ... except ImportError as exc:  # MissingDependencyError is an ImportError
    ...     print(exc)
    the plot needs no_such_module_here: `pip install "lti-adapters[plot]"`
    """
    try:
        return importlib.import_module(module)
    except ImportError as exc:
        package = module.split(".")[0]
        raise MissingDependencyError(
            f'{purpose} needs {package}: `pip install "lti-adapters[{extra}]"`'
        ) from exc
