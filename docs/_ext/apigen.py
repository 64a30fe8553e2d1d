"""Generate the API reference pages from the packages' ``__all__`` at build time.

For every package named in the ``apigen_packages`` config value this writes
``<apigen_outdir>/<package>.rst``: one autosummary table per defining module of the
names in the package's ``__all__`` (in the order the modules first appear), exceptions
last, then one section per public submodule that defines ``__all__`` (plus the extra
ones named in the config), listing the names the package does not re-export. Autosummary then writes
one stub page per name. A file is rewritten only when its text changes, so incremental
builds stay incremental.

The handler runs at ``builder-inited`` before autosummary's own handler (priority 400
< 500), so the generated pages exist when autosummary scans the sources.
"""

from __future__ import annotations

import importlib
import inspect
import pkgutil
from pathlib import Path

from sphinx.application import Sphinx
from sphinx.util import logging

logger = logging.getLogger(__name__)

# Section titles for the modules that define public names, in the order the sections
# appear; unknown modules come last and take the first line of their docstring.
MODULE_TITLES = {
    "lti.system": "Systems",
    "lti.lyapunov": "Lyapunov equations",
    "lti.gramians": "Gramians",
    "lti.empirical": "Empirical Gramians",
    "lti.datadriven": "Data-driven and input-weighted Gramians",
    "lti.balanced": "Hankel singular values and balanced truncation",
    "lti.norms": "System norms",
    "lti.plotting": "Plotting",
    "lti.exceptions": "Exceptions",
    "adapters.config": "Configuration",
    "adapters.injection": "Injection",
    "adapters.targets": "Target modules",
    "adapters.io": "Saving and loading",
    "adapters.ssm": "SSM modules",
    "adapters.ssm_lti": "SSM and lti conversions",
    "adapters.layer": "Adapter layer",
    "adapters.generation": "Generation",
    "adapters.calibration": "Calibration",
    "adapters.statistics": "Calibration statistics",
    "adapters.reduction": "Reduction",
    "adapters.report": "Reduction report",
    "adapters.exceptions": "Exceptions",
}


def public_names(module) -> list[str]:
    """The public names of ``module``: its ``__all__``, else functions/classes defined in it."""
    names = getattr(module, "__all__", None)
    if names is not None:
        return list(names)
    return sorted(
        name
        for name, obj in vars(module).items()
        if not name.startswith("_")
        and (inspect.isfunction(obj) or inspect.isclass(obj))
        and getattr(obj, "__module__", None) == module.__name__
    )


def _reexported(modname: str, name: str) -> bool:
    """Whether a parent package of ``modname`` exposes ``name`` as the very same object."""
    obj = getattr(importlib.import_module(modname), name)
    parts = modname.split(".")
    for i in range(1, len(parts)):
        parent = importlib.import_module(".".join(parts[:i]))
        if name in getattr(parent, "__all__", ()) and getattr(parent, name, None) is obj:
            return True
    return False


def _shadowed(modname: str) -> bool:
    """Whether the parent package's attribute of that name is not the module itself."""
    parent, _, last = modname.rpartition(".")
    return getattr(importlib.import_module(parent), last, None) is not importlib.import_module(
        modname
    )


def _submodules(pkg, extra: list[str]) -> list[str]:
    """Public submodules that define ``__all__``, plus the ``extra`` ones, sorted."""
    found = set(extra)
    for info in pkgutil.walk_packages(pkg.__path__, pkg.__name__ + "."):
        parts = info.name.split(".")
        if any(part.startswith("_") for part in parts):
            continue
        module = importlib.import_module(info.name)
        if hasattr(module, "__all__"):
            found.add(info.name)
    return sorted(found)


def _title(modname: str) -> str:
    if modname in MODULE_TITLES:
        return MODULE_TITLES[modname]
    module = importlib.import_module(modname)
    doc = inspect.getdoc(module) or modname
    return doc.splitlines()[0].rstrip(".")


def _heading(text: str, char: str) -> str:
    return f"{text}\n{char * len(text)}\n"


def _table(current: str, names: list[str]) -> str:
    lines = [f".. currentmodule:: {current}", "", ".. autosummary::", "   :toctree: .",
             "   :nosignatures:", ""]
    lines += [f"   {name}" for name in names]
    return "\n".join(lines) + "\n"


def _is_exception(obj) -> bool:
    return inspect.isclass(obj) and issubclass(obj, BaseException)


def package_page(package: str, submodules: list[str]) -> tuple[str, list[str]]:
    """The reST text of one package's API page and the fully qualified names it lists."""
    pkg = importlib.import_module(package)
    groups: dict[str, list[str]] = {}
    exceptions: list[str] = []
    for name in pkg.__all__:
        if not hasattr(pkg, name):
            logger.warning("apigen: %s.__all__ lists %r, which %s does not define",
                           package, name, package)
            continue
        obj = getattr(pkg, name)
        if _is_exception(obj):
            exceptions.append(name)
            continue
        modname = getattr(obj, "__module__", None) or package
        groups.setdefault(modname, []).append(name)
    parts = [
        f".. _api-{package}:\n",
        _heading(f"``{package}``", "="),
        f".. automodule:: {package}\n   :no-members:\n",
        f"Everything down to the submodule sections is importable as "
        f"``from {package} import <name>``.\n",
    ]
    documented = []
    # Known modules in the order of MODULE_TITLES (the order a reader meets them), then
    # any others in the order they first appear in ``__all__``.
    known = list(MODULE_TITLES)
    ordered = sorted(groups, key=lambda m: (known.index(m) if m in known else len(known)))
    for modname in ordered:
        names = groups[modname]
        parts.append(_heading(_title(modname), "-"))
        parts.append(_table(package, names))
        documented += [f"{package}.{n}" for n in names]
    if exceptions:
        parts.append(_heading("Exceptions", "-"))
        parts.append(_table(package, exceptions))
        documented += [f"{package}.{n}" for n in exceptions]
    for modname in _submodules(pkg, submodules):
        try:
            module = importlib.import_module(modname)
        except ModuleNotFoundError as exc:
            if exc.name != modname:
                raise
            logger.info("apigen: %s does not exist (yet); not documented", modname)
            continue
        # Names a parent package re-exports are documented once, at that level;
        # submodules listed in ``__all__`` get their own section instead.
        names = [n for n in public_names(module)
                 if not _reexported(modname, n) and not inspect.ismodule(getattr(module, n))]
        if not names:
            continue
        parts.append(f".. _api-{modname}:\n")
        parts.append(_heading(f"``{modname}``", "-"))
        if not _shadowed(modname):
            # A module target for :mod: references (skipped when the parent package
            # exports a function of the same name, which owns that dotted name).
            parts.append(f".. py:module:: {modname}\n")
        first = (inspect.getdoc(module) or "").split("\n\n")[0]
        if first:
            parts.append(first + "\n")
        parts.append(_table(modname, names))
        documented += [f"{modname}.{n}" for n in names]
    return "\n".join(parts), documented


def generate(app: Sphinx) -> None:
    outdir = Path(app.srcdir) / app.config.apigen_outdir
    outdir.mkdir(parents=True, exist_ok=True)
    keep = set()
    for package, submodules in app.config.apigen_packages.items():
        text, documented = package_page(package, list(submodules))
        path = outdir / f"{package}.rst"
        if not path.is_file() or path.read_text() != text:
            path.write_text(text)
        keep |= {package, *documented}
        logger.info("apigen: %s lists %d public names", package, len(documented))
    # Stub pages of names that left the public API would be orphans: remove them.
    for stale in outdir.glob("*.rst"):
        if stale.stem not in keep:
            stale.unlink()
    # Sphinx >= 8 collects the source files before ``builder-inited``; refresh the list so
    # that autosummary (which scans ``env.found_docs``) sees the pages written above.
    app.env.find_files(app.config, app.builder)


def setup(app: Sphinx) -> dict:
    app.add_config_value("apigen_packages", {}, "env")
    app.add_config_value("apigen_outdir", "api/generated", "env")
    app.connect("builder-inited", generate, priority=400)
    return {"version": "1.0", "parallel_read_safe": True, "parallel_write_safe": True}
