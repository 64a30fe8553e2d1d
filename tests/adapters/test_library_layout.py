"""Layout invariants of the ``adapters`` library: it loads no experiment-harness module, its
``__all__`` holds library names only, and its modules import each other without a cycle."""

from __future__ import annotations

import ast
import importlib
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

pytest.importorskip("torch", reason="extra 'torch' not installed")

import adapters  # noqa: E402

PACKAGE = Path(adapters.__file__).parent
# The harness moved to benchmarks/hrm; these names must not come back into the library.
HARNESS = ("tasks", "backbone", "train", "lora", "presets", "experiment", "__main__")


def _run(code: str) -> subprocess.CompletedProcess:
    # the child imports the same ``adapters`` as this test (a worktree, not an installed copy)
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(PACKAGE.parent), env.get("PYTHONPATH", "")])
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True,
                          text=True, timeout=300, env=env)


def test_import_adapters_loads_no_harness_module():
    harness = sorted(f"adapters.{h}" for h in HARNESS)
    code = f"""
        import sys
        import adapters
        bad = sorted(m for m in sys.modules
                     if m.split('.')[0] == 'benchmarks' or m in {harness!r})
        print('LOADED', bad)
        sys.exit(1 if bad else 0)
    """
    proc = _run(code)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_no_harness_module_in_the_package():
    present = sorted(h for h in HARNESS if (PACKAGE / f"{h}.py").exists())
    assert present == []


def test_all_holds_library_names_only():
    assert len(set(adapters.__all__)) == len(adapters.__all__)
    for name in adapters.__all__:
        obj = getattr(adapters, name)
        module = getattr(obj, "__module__", "")
        assert module.split(".")[0] == "adapters", f"{name} comes from {module}"
        assert module.split(".")[-1] not in HARNESS, f"{name} comes from {module}"


def test_no_submodule_is_shadowed_by_a_package_attribute():
    # e.g. a function ``adapters.calibrate`` hiding the module ``adapters/calibrate.py``
    for path in sorted(PACKAGE.glob("*.py")):
        if path.stem == "__init__":
            continue
        module = importlib.import_module(f"adapters.{path.stem}")
        assert getattr(adapters, path.stem) is module, f"adapters.{path.stem} is not the module"


MAX_LINES = 750  # "no module over ~700 lines" (issue 17); lti's layout test uses the same


def test_no_library_module_is_oversized():
    sizes = {p.name: len(p.read_text().splitlines()) for p in PACKAGE.glob("*.py")}
    assert {k: v for k, v in sizes.items() if v > MAX_LINES} == {}


def _imported_submodules(path: Path, package: str) -> set[str]:
    """Modules of ``package`` that a source file imports, at any depth (lazy imports too)."""
    tree = ast.parse(path.read_text())
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names if a.name.startswith(package + ".")}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            if node.module == package:
                # ``from adapters import x``: x is a submodule or a name of the package root
                found |= {f"{package}.{a.name}" for a in node.names
                          if (PACKAGE / f"{a.name}.py").exists()} or {package}
            elif node.module.startswith(package + "."):
                found.add(node.module)
    return found


def import_graph(package: str = "adapters") -> dict[str, set[str]]:
    """``{module: modules of the package it imports}`` for every submodule (not __init__)."""
    graph = {}
    for path in sorted(PACKAGE.glob("*.py")):
        if path.stem == "__init__":
            continue
        name = f"{package}.{path.stem}"
        graph[name] = _imported_submodules(path, package) - {name}
    return graph


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One import cycle of ``graph`` as a list of modules, or None (depth-first search)."""
    state: dict[str, int] = {}  # 1: on the stack, 2: done
    stack: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                return stack[stack.index(nxt):] + [nxt]
            if nxt not in state and (found := visit(nxt)):
                return found
        stack.pop()
        state[node] = 2
        return None

    for node in sorted(graph):
        if node not in state and (found := visit(node)):
            return found
    return None


def test_find_cycle_sees_a_cycle():
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": set()}) is None


def test_submodules_never_import_the_package_root():
    # ``from adapters import name`` inside the package runs adapters/__init__.py, which imports
    # every module: a cycle through the root.
    graph = import_graph()
    assert sorted(m for m, deps in graph.items() if "adapters" in deps) == []


def test_adapters_modules_import_without_a_cycle():
    graph = import_graph()
    assert graph, "no modules found"
    for deps in graph.values():
        for dep in deps:
            importlib.import_module(dep)  # every edge names a real module
    assert find_cycle(graph) is None, " -> ".join(find_cycle(graph))


def _private_imports(package_dir: Path, package: str) -> list[str]:
    """``module: from x import _name`` for every import of another module's private name."""
    bad = []
    for path in sorted(package_dir.glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if (isinstance(node, ast.ImportFrom) and node.level == 0 and node.module
                    and node.module.split(".")[0] in ("adapters", "lti")):
                bad += [f"{package}.{path.stem}: from {node.module} import {a.name}"
                        for a in node.names if a.name.startswith("_")]
    return bad


def test_no_private_names_imported_across_modules(tmp_path):
    assert _private_imports(PACKAGE, "adapters") == []
    # the check sees one: a module importing another's private helper
    (tmp_path / "m.py").write_text("from adapters.scan import _fast_len\n")
    found = _private_imports(tmp_path, "adapters")
    assert found == ["adapters.m: from adapters.scan import _fast_len"]
