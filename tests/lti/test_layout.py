"""Facts about the layout of ``lti`` anyone can check: no import cycle between its modules
(module-level or inside functions), no import of another module's private (``_name``)
names, no library module far beyond ~700 lines."""

from __future__ import annotations

import ast
from pathlib import Path

import lti

ROOT = Path(lti.__file__).parent


def _modules() -> dict[str, Path]:
    out = {}
    for path in sorted(ROOT.rglob("*.py")):
        rel = path.relative_to(ROOT.parent).with_suffix("")
        parts = list(rel.parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(parts)] = path
    return out


def _imports(path: Path):
    """``(module, names)`` for every ``import``/``from ... import`` in the file (any depth)."""
    tree = ast.parse(path.read_text())
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            yield node.module, [a.name for a in node.names]
        elif isinstance(node, ast.Import):
            for a in node.names:
                yield a.name, []


def _graph():
    mods = _modules()
    graph = {}
    for name, path in mods.items():
        deps = set()
        for mod, names in _imports(path):
            if mod.split(".")[0] != "lti":
                continue
            for target in [mod] + [f"{mod}.{n}" for n in names]:
                if target in mods and target != name:
                    deps.add(target)
        graph[name] = deps
    return graph


def test_no_import_cycle_between_lti_modules():
    graph = _graph()
    # the package __init__ imports everything and is imported by nobody inside lti except
    # through "import lti"; leave it out (it is the root, not part of a cycle)
    graph = {k: {d for d in v if d != "lti"} for k, v in graph.items() if k != "lti"}
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(node):
        state[node] = 1
        stack.append(node)
        for dep in sorted(graph.get(node, ())):
            if state.get(dep) == 1:
                cycle = stack[stack.index(dep):] + [dep]
                raise AssertionError("import cycle: " + " -> ".join(cycle))
            if dep not in state:
                visit(dep)
        stack.pop()
        state[node] = 2

    for node in sorted(graph):
        if node not in state:
            visit(node)


def test_no_private_names_imported_across_modules():
    bad = []
    for name, path in _modules().items():
        for mod, names in _imports(path):
            if mod.split(".")[0] != "lti":
                continue
            bad += [f"{name}: from {mod} import {n}" for n in names if n.startswith("_")]
    assert not bad, bad


def test_library_modules_stay_small():
    sizes = {name: len(path.read_text().splitlines()) for name, path in _modules().items()}
    big = {name: size for name, size in sizes.items() if size > 750}
    assert not big, big
