"""The documentation: the Sphinx build passes with warnings as errors, the API reference
lists every public name, and every example script under ``docs/`` executes.

Scripts referenced by a ``.. plot::`` directive are executed by the build itself (and
their figures are checked here); the other scripts are run here, each in a subprocess.
"""

from __future__ import annotations

import importlib
import importlib.util
import inspect
import os
import pkgutil
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

# the first test that needs the site waits for the whole build (its own limit: 600 s)
pytestmark = pytest.mark.timeout(720)

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
EXAMPLE_DIRS = ("quickstart", "tutorials")
# Submodules documented even without an __all__ (as in docs/conf.py: apigen_packages).
SUBMODULES = ("lti.testing.strategies", "adapters.scan")


def _env() -> dict[str, str]:
    env = dict(os.environ)
    env.update(MPLBACKEND="Agg", OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1",
               MKL_NUM_THREADS="1", PYTHONPATH=str(ROOT), TQDM_DISABLE="1")
    env.pop("LTI_DOCS_MATHJAX", None)
    return env


def example_scripts() -> list[Path]:
    return sorted(p for d in EXAMPLE_DIRS for p in (DOCS / d).glob("*.py"))


def plotted_scripts() -> dict[Path, Path]:
    """Scripts executed by a ``.. plot:: <file>`` directive (paths relative to docs/) -> page."""
    found = {}
    for page in DOCS.rglob("*.rst"):
        if "_build" in page.parts or "generated" in page.parts:
            continue
        for match in re.finditer(r"^\s*\.\. plot::\s+(\S+\.py)\s*$", page.read_text(), re.M):
            found[(DOCS / match.group(1)).resolve()] = page
    return found


def scripts_run_here() -> list[Path]:
    plotted = plotted_scripts()
    return [p for p in example_scripts() if p.resolve() not in plotted]


def test_every_example_script_is_executed_somewhere():
    scripts = example_scripts()
    assert scripts, "no example scripts found under docs/quickstart, docs/tutorials"
    plotted = plotted_scripts()
    for path in plotted:
        assert path.is_file(), f"a plot directive names a missing script: {path}"
    # Every script is shown on some page (literalinclude or plot directive).
    pages = "\n".join(p.read_text() for p in DOCS.rglob("*.rst") if "_build" not in p.parts)
    for path in scripts:
        assert path.name in pages, f"{path.name} is not included in any page"


@pytest.mark.parametrize("script", scripts_run_here(), ids=lambda p: p.name)
def test_example_script_runs(script: Path):
    start = time.perf_counter()
    proc = subprocess.run([sys.executable, script.name], cwd=script.parent, env=_env(),
                          capture_output=True, text=True, timeout=300)
    elapsed = time.perf_counter() - start
    assert proc.returncode == 0, f"{script.name} failed:\n{proc.stdout}\n{proc.stderr}"
    print(f"{script.name}: {elapsed:.1f} s")


@pytest.fixture(scope="module")
def _build(tmp_path_factory):
    """Start ``sphinx-build -W`` in the background; the script tests run meanwhile."""
    pytest.importorskip("sphinx", reason="docs extra: pip install 'lti-adapters[docs]'")
    pytest.importorskip("matplotlib", reason="plot extra: pip install 'lti-adapters[plot]'")
    out = tmp_path_factory.mktemp("docs")
    log = (out / "build.log").open("w+")
    cmd = [sys.executable, "-m", "sphinx", "-W", "--keep-going", "-q", "-b", "html",
           "-d", str(out / "doctrees"), str(DOCS), str(out / "html")]
    proc = subprocess.Popen(cmd, cwd=ROOT, env=_env(), stdout=log, stderr=subprocess.STDOUT)
    yield proc, out, log, time.perf_counter()
    if proc.poll() is None:
        proc.kill()
        proc.wait()
    log.close()


@pytest.fixture(autouse=True, scope="module")
def _start_build_first(request):
    # Requesting the fixture here starts the build before the first test of the module,
    # when a selected test needs the built site.
    needs_site = any("built_site" in getattr(item, "fixturenames", ())
                     for item in request.session.items)
    if needs_site and importlib.util.find_spec("sphinx") is not None:
        request.getfixturevalue("_build")


@pytest.fixture(scope="module")
def built_site(_build) -> Path:
    proc, out, log, start = _build
    try:
        returncode = proc.wait(timeout=600)
    except subprocess.TimeoutExpired:
        proc.kill()
        raise
    elapsed = time.perf_counter() - start
    log.seek(0)
    output = log.read()
    assert returncode == 0, f"sphinx-build -W failed after {elapsed:.0f} s:\n{output[-8000:]}"
    print(f"docs build: {elapsed:.1f} s (ran alongside the script tests)")
    return out / "html"


def test_docs_build_without_warnings(built_site: Path):
    for page in ("index.html", "installation.html", "method.html", "theory/index.html",
                 "tutorials/index.html", "comparison.html", "api/index.html",
                 "contributing.html"):
        assert (built_site / page).is_file(), page
    # The diagram of the adapter branch is copied into the site.
    assert list(built_site.rglob("hrm_block.svg"))


def _public_names() -> list[str]:
    """Every name of ``lti.__all__`` / ``adapters.__all__``, and of each public submodule
    that defines ``__all__`` the names no parent package re-exports."""
    names = []
    for package in ("lti", "adapters"):
        pkg = importlib.import_module(package)
        names += [f"{package}.{n}" for n in pkg.__all__]
        modnames = {info.name for info in pkgutil.walk_packages(pkg.__path__, package + ".")
                    if not any(part.startswith("_") for part in info.name.split("."))}
        for modname in sorted(modnames | {m for m in SUBMODULES if m.startswith(package)}):
            try:
                module = importlib.import_module(modname)
            except ModuleNotFoundError as exc:
                if exc.name != modname:
                    raise
                continue
            public = getattr(module, "__all__", None)
            if public is None:
                if modname not in SUBMODULES:
                    continue
                public = [n for n, obj in vars(module).items()
                          if not n.startswith("_")
                          and (inspect.isfunction(obj) or inspect.isclass(obj))
                          and obj.__module__ == modname]
            parents = [importlib.import_module(".".join(modname.split(".")[:i]))
                       for i in range(1, modname.count(".") + 1)]
            names += [f"{modname}.{n}" for n in public
                      if not inspect.ismodule(getattr(module, n))
                      and not any(n in getattr(par, "__all__", ())
                                  and getattr(par, n, None) is getattr(module, n)
                                  for par in parents)]
    return names


def test_api_reference_lists_every_public_name(built_site: Path):
    names = _public_names()
    assert "lti.DiscreteLTI" in names
    missing = [n for n in names if not (built_site / "api" / "generated" / f"{n}.html").is_file()]
    assert not missing, f"public names without an API page: {missing}"
    # ...and each page actually documents the object (autodoc did not silently fail).
    for name in names:
        html = (built_site / "api" / "generated" / f"{name}.html").read_text()
        assert f'id="{name}"' in html, f"{name}: page has no object description"


def test_plotted_tutorials_produced_figures(built_site: Path):
    plotted = plotted_scripts()
    for script, page in plotted.items():
        rel = page.relative_to(DOCS).with_suffix(".html")
        html = (built_site / rel).read_text()
        stem = script.stem
        assert re.search(rf'<img[^>]+src="[^"]*{re.escape(stem)}[^"]*\.png"', html), (
            f"{rel} shows no figure from {script.name}"
        )


# ------------------------------------------------ README code and the commands the docs give
def _readme_python_blocks() -> list[str]:
    return re.findall(r"^```python\n(.*?)^```", (ROOT / "README.md").read_text(), re.M | re.S)


def test_readme_python_examples_run():
    blocks = _readme_python_blocks()
    assert blocks, "README.md has no python example"
    for code in blocks:
        proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=_env(),
                              capture_output=True, text=True, timeout=120)
        assert proc.returncode == 0, f"README example failed:\n{code}\n{proc.stderr[-3000:]}"


# `python script.py --flag ...` / `python -m package.module --flag ...` as written in the text
_COMMAND = re.compile(r"python3? +(-m +)?((?:lti|adapters|benchmarks|docs)[\w./]*)([^`\n|]*)")
_FLAG = re.compile(r"(?<![\w-])--[a-z][\w-]*")


def documented_commands() -> list[tuple[str, str, str]]:
    """(file, target, arguments) of every project command in README, CONTRIBUTING, the docs
    pages and the command lines of the result files the docs include."""
    texts = [ROOT / "README.md", ROOT / "CONTRIBUTING.md"]
    texts += [p for p in DOCS.rglob("*") if p.suffix in (".rst", ".md")
              and "_build" not in p.parts and "generated" not in p.parts]
    shown = "\n".join(p.read_text() for p in texts)
    texts += [p for p in sorted((ROOT / "benchmarks" / "results").rglob("*.md"))
              if p.name in shown]  # the result files the text names or includes
    found = []
    for path in texts:
        for module, target, args in _COMMAND.findall(path.read_text()):
            target = target.rstrip(".,;:")
            if "<" in target or not (module or target.endswith(".py")):
                continue
            found.append((str(path.relative_to(ROOT)), ("-m " if module else "") + target,
                          args))
    return found


def _program(target: str) -> Path | None:
    """The file a command runs (found in the tree, without importing anything)."""
    if not target.startswith("-m "):
        path = ROOT / target
        return path if path.is_file() else None
    base = ROOT.joinpath(*target[3:].split("."))
    for path in (base.with_suffix(".py"), base / "__main__.py"):
        if path.is_file():
            return path
    return None


def test_documented_commands_exist_with_their_options():
    commands = documented_commands()
    assert len(commands) > 20, commands  # the patterns still match the text
    problems = []
    for where, target, args in commands:
        path = _program(target)
        if path is None:
            problems.append(f"{where}: `python {target}`: no such script or module")
            continue
        source = path.read_text()
        for flag in _FLAG.findall(args):
            if flag == "--help":  # argparse's own
                continue
            if f'"{flag}"' not in source and f"'{flag}'" not in source:
                problems.append(f"{where}: `{target}` has no option {flag} ({path.name})")
    assert not problems, "\n".join(problems)
