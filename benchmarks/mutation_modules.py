"""Per-module mutation runs (mutmut) of lti/ and adapters/ modules with a targeted test
selection, and their survivor records.

mutmut on the whole suite is far too slow on a small shared machine, and setup.cfg's [mutmut]
section names one selection for one set of modules (lti/norms.py, lti/balanced.py,
lti/_bt_core.py: ``benchmarks/mutation_report.py``). This driver runs one module at a time in
a scratch copy of the repository whose setup.cfg [mutmut] section mutates that module only and
selects the module's own test files (``MODULES``), under a wall-clock cap; mutmut runs the
mutants whose tests are cheapest first, so a capped run leaves the costliest "not checked".
From the repository root::

    python benchmarks/mutation_modules.py run lti/_response.py --cap 600
    python benchmarks/mutation_modules.py collect lti/_response.py --source "main abc1234"
    python benchmarks/mutation_modules.py report lti/_response.py   # from the JSON only

``run`` copies the tracked and untracked, not ignored files into ``--tree`` (default
``/tmp/mutmut-<module>``) and calls ``OMP_NUM_THREADS=1 nice -n 10 timeout CAP mutmut run
--max-children 1 [PATTERNS]`` there. ``collect`` reads mutmut's verdicts
(``TREE/mutants/<module>.meta``) and each mutant's diff into
``benchmarks/results/mutmut_<slug>.json`` and writes the Markdown record
``mutmut_<slug>.md``: a table per function, every survivor with its diff and, from
``TRIAGE`` (keyed by function and diff, so it survives renumbering), the reason it is
equivalent or the test that kills it now. A later run of the same module (e.g. after new
tests) is merged: a mutant killed in either run is killed.
"""

# ruff: noqa: E501 (the triage keys are mutmut's diff lines, verbatim)
from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import shutil
import subprocess
import sys
from collections import Counter, defaultdict
from datetime import UTC, datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
RESULTS = ROOT / "benchmarks" / "results"
KILLED = {"killed", "timeout"}

#: module -> the test files that exercise it (the per-mutant selection is narrowed further by
#: mutmut's own stats: only the tests that call the mutated function run)
MODULES: dict[str, list[str]] = {
    "lti/_response.py": [
        "tests/lti/test_system.py", "tests/lti/test_audit2_system.py",
        "tests/lti/test_audit3_system.py", "tests/lti/test_xcheck_freq.py",
        "tests/lti/test_audit3_inputs.py", "tests/lti/test_mutants_system.py",
    ],
    "lti/_convert.py": [
        "tests/lti/test_system.py", "tests/lti/test_audit2_system.py",
        "tests/lti/test_audit3_system.py", "tests/lti/test_control_conventions.py",
        "tests/lti/test_audit3_control.py", "tests/lti/test_mutants_system.py",
    ],
    "lti/hankel.py": [
        "tests/lti/test_hankel_approx.py", "tests/lti/test_hankel_edge.py",
        "tests/lti/test_audit2_hankel_cov.py", "tests/lti/test_mutants_hankel.py",
    ],
    "lti/lyapunov.py": [
        "tests/lti/test_lyapunov.py", "tests/lti/test_solve_fast.py",
        "tests/lti/test_dense_fast.py", "tests/lti/test_mutants_lyapunov.py",
    ],
    "adapters/io.py": [
        "tests/adapters/test_io.py", "tests/adapters/test_atomic.py",
        "tests/adapters/test_audit3_stale_checkpoint.py", "tests/adapters/test_mutants_io.py",
    ],
    "adapters/targets.py": [
        "tests/adapters/test_targets.py", "tests/adapters/test_audit4_targets.py",
        "tests/adapters/test_mutants_targets.py",
    ],
    "adapters/reduction.py": [
        "tests/adapters/test_reduction.py", "tests/adapters/test_mutants_reduction.py",
    ],
    "adapters/scan.py": [
        "tests/adapters/test_scan.py", "tests/adapters/test_audit3_scan_half.py",
        "tests/adapters/test_mutants_scan.py",
    ],
}

# ----------------------------------------------------------------------------- triage

#: reason key -> what it means
REASONS = {
    "equal-value": "equivalent: the mutated expression has the same value on every reachable "
                   "input (the note says why)",
    "dead": "unreachable: the branch cannot be taken (argument in the note)",
    "message": "error or warning text only; the error's type (and the offending value where "
               "it matters) is tested",
    "cost": "equivalent up to cost: the same result by a slower or faster route",
    "killed-later": "killed by a test added after this run (named in the note), checked by "
                    "applying the mutant by hand (`mutmut apply`) and running that test",
}

#: (module, function, diff) -> (reason, note). The diff is the record's one-line form
#: (``- old | + new``).
TRIAGE: dict[tuple[str, str, str], tuple[str, str]] = {}


def _t(module: str, function: str, diffs, reason: str, note: str = "") -> None:
    assert reason in REASONS, reason
    for d in [diffs] if isinstance(diffs, str) else diffs:
        TRIAGE[(module, function, d)] = (reason, note)


# lti/_response.py (run 1 on main a44e713)
_R = "lti/_response.py"
_t(_R, "diagonal_response", "- R = 1.0 / np.where(pole, 1.0, Zd) | + R = 1.0 / np.where(pole, 2.0, Zd)",
   "equal-value", "the placeholder at an exact pole only avoids a division by zero: "
   "_at_poles overwrites those frequencies with inf + nan j")
_t(_R, "diagonal_response", '- G = np.einsum("pi,ki,im->kpm", C, R, B) + D[None] | '
   '+ G = np.einsum("PI,KI,IM->KPM", C, R, B) + D[None]', "equal-value",
   "einsum subscripts in upper case: the same contraction")
_t(_R, "schur_response", '- G = np.einsum("pi,ikm->kpm", Ct, X) | '
   '+ G = np.einsum("PI,IKM->KPM", Ct, X)', "equal-value",
   "einsum subscripts in upper case: the same contraction")
_t(_R, "schur_response", "- n, k, m = T.shape[0], z.size, Bt.shape[1] | "
   "+ n, k, m = T.shape[1], z.size, Bt.shape[1]", "equal-value", "T is square")
_t(_R, "schur_response", [
    "- d = np.where(pole, z[:, None] - 1.0, d[None, :])  # (k, n), 1 on those rows | "
    "+ d = np.where(pole, z[:, None] + 1.0, d[None, :])  # (k, n), 1 on those rows",
    "- d = np.where(pole, z[:, None] - 1.0, d[None, :])  # (k, n), 1 on those rows | "
    "+ d = np.where(pole, z[:, None] - 2.0, d[None, :])  # (k, n), 1 on those rows"],
   "equal-value", "another nonzero pivot on the rows of an exact pole: those frequencies are "
   "overwritten with inf + nan j by _at_poles, the other rows keep the true diagonal")
_t(_R, "schur_response", ["- if i + 1 < n: | + if i - 1 < n:", "- if i + 1 < n: | + if i + 1 <= n:"],
   "equal-value", "the guard only skips the last row, whose coupling T[n-1, n:] @ X[n:] is an "
   "empty product (zeros), the same rhs")
_t(_R, "markov_overflow_message", "- i = int(np.argmax(~np.isfinite(H).reshape(H.shape[0], -1).all(axis=1))) | "
   "+ i = int(np.argmax(~np.isfinite(H).reshape(H.shape[0], -2).all(axis=1)))", "equal-value",
   "numpy reads any negative size in reshape as the one inferred dimension (numpy 2.4)")
_KR = ("tests/lti/test_mutants_system.py (overflow of the last state only; output before state; "
       "no radius for n = 0 or sparse A; MIMO Markov overflow)")
for _fn, _d in [
    ("_radius", "- if sys.n and not sp.issparse(sys.A): | + if sys.n or not sp.issparse(sys.A):"),
    ("_radius", "- if sys.n and not sp.issparse(sys.A): | + if sys.n and not sp.issparse(None):"),
    ("_radius", '- return "" | + return "XXXX"'),
    ("markov_overflow_message", "- i = int(np.argmax(~np.isfinite(H).reshape(H.shape[0], -1).all(axis=1))) | "
     "+ i = int(np.argmax(~np.isfinite(H).reshape(H.shape[0], +1).all(axis=1)))"),
    ("markov_overflow_message", '- "for fewer terms (or rescale B, C)") | + "for fewer terms (or rescale b, c)")'),
    ("overflow_message", "- ty = int(np.argmax(bad_y)) if bad_y.any() else None | "
     "+ ty = int(np.argmax(bad_y)) if (bad_y.any()) or True else None"),
    ("overflow_message", "- if tx is not None and (ty is None or tx <= ty): | "
     "+ if tx is not None and (ty is not None or tx <= ty):"),
    ("overflow_message", '- what = f"the output y_t overflowed float64 at step t = {ty} of {Y.shape[0]}" | '
     '+ what = f"the output y_t overflowed float64 at step t = {ty} of {Y.shape[1]}"'),
]:
    _t(_R, _fn, _d, "killed-later", _KR)
for _fn, _lit in [("markov_overflow_message", "for fewer terms (or rescale B, C)"),
                  ("overflow_message", "; simulate fewer steps (or rescale x0, u, C, D) to keep it finite")]:
    if _fn == "markov_overflow_message":
        _t(_R, _fn, f'- "{_lit}") | + "{_lit.upper()}")', "killed-later", _KR)
        _t(_R, _fn, f'- "{_lit}") | + "XX{_lit}XX")', "message", "characters around the "
           "advice, which is still there (the test asserts 'rescale B, C')")
    else:
        _pre = "return what + _radius(sys) + "
        _t(_R, _fn, [f'- {_pre}"{_lit}" | + {_pre}"XX{_lit}XX"',
                     f'- {_pre}"{_lit}" | + {_pre}"{_lit.upper()}"',
                     f'- {_pre}"{_lit}" | + {_pre}"{_lit.replace("C, D", "c, d")}"'],
           "killed-later", _KR)

# lti/_convert.py (run 1 on main a44e713)
_V = "lti/_convert.py"
_t(_V, "scipy_matrices", '- if getattr(sys, "dt", None) is None: | + if getattr(sys, "dt", ) is None:',
   "equal-value", "only scipy.signal systems with to_ss reach it (as_discrete_system checks the "
   "module and to_ss), and every one has a dt property (None when continuous)")
_KV = ("tests/lti/test_mutants_system.py (the sampling-time error names `G.dt` and the value; "
       "continuous and improper scipy systems are named by class; python-control missing)")
for _fn, _d in [
    ("control_matrices", '- return sys.A, sys.B, sys.C, sys.D, check_dt(dt, f"{name}.dt") | '
     '+ return sys.A, sys.B, sys.C, sys.D, check_dt(dt, None)'),
    ("control_matrices", '- return sys.A, sys.B, sys.C, sys.D, check_dt(dt, f"{name}.dt") | '
     '+ return sys.A, sys.B, sys.C, sys.D, check_dt(dt, )'),
    ("scipy_matrices", '- return ss.A, ss.B, ss.C, ss.D, check_dt(ss.dt, f"{name}.dt") | '
     '+ return ss.A, ss.B, ss.C, ss.D, check_dt(ss.dt, None)'),
    ("scipy_matrices", '- return ss.A, ss.B, ss.C, ss.D, check_dt(ss.dt, f"{name}.dt") | '
     '+ return ss.A, ss.B, ss.C, ss.D, check_dt(ss.dt, )'),
    ("scipy_matrices", '- f"{type(sys).__name__} (discretise it with its to_discrete(dt) first)" | '
     '+ f"{type(None).__name__} (discretise it with its to_discrete(dt) first)"'),
    ("scipy_matrices", '- f"`{name}` ({type(sys).__name__}) has no state-space realisation: {exc}" | '
     '+ f"`{name}` ({type(None).__name__}) has no state-space realisation: {exc}"'),
]:
    _t(_V, _fn, _d, "killed-later", _KV)
_lit = 'python-control is required; install it with pip install "lti-adapters[control]"'
_t(_V, "import_control", [f"- '{_lit}' | + None", f"- '{_lit}' | + '{_lit.upper()}'"],
   "killed-later", _KV)
_t(_V, "import_control", f"- '{_lit}' | + 'XX{_lit}XX'", "message", "characters around the "
   "install command, which is still there (the test asserts it)")


# -------------------------------------------------------------------------------- run


def _slug(module: str) -> str:
    return "mutmut_" + module.removesuffix(".py").replace("/", "_").lstrip("_").replace("__", "_")


def _mutmut_section(module: str, tests: list[str]) -> str:
    return "\n".join([
        "[mutmut]",
        "source_paths =", "    lti/", "    adapters/",
        "only_mutate =", f"    {module}",
        "pytest_add_cli_args_test_selection =", *(f"    {t}" for t in tests),
        "also_copy =", "    benchmarks/", "    conftest.py",
        "pytest_add_cli_args =", "    -p", "    no:cacheprovider",
        "timeout_multiplier = 10", "",
    ])


def prepare(module: str, tree: Path) -> list[str]:
    tests = [t for t in MODULES[module] if (ROOT / t).exists()]
    if tree.exists():
        shutil.rmtree(tree)
    files = subprocess.run(["git", "ls-files", "-co", "--exclude-standard", "-z"], cwd=ROOT,
                           check=True, capture_output=True).stdout.decode().split("\0")
    for f in filter(None, files):
        src = ROOT / f
        if src.is_file():
            (tree / f).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(src, tree / f)
    cfg = (tree / "setup.cfg").read_text()
    # replace the [mutmut] section (up to the next section header) by this module's
    cfg = re.sub(r"(?ms)^\[mutmut\]\n.*?(?=^\[|\Z)", "", cfg).rstrip() + "\n\n"
    (tree / "setup.cfg").write_text(cfg + _mutmut_section(module, tests))
    return tests


def run(module: str, tree: Path, cap: int, patterns: list[str]) -> int:
    tests = prepare(module, tree)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env.update(OMP_NUM_THREADS="1", MKL_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1")
    mutmut = str(Path(sys.executable).with_name("mutmut"))
    cmd = ["nice", "-n", "10", "timeout", str(cap), mutmut, "run", "--max-children", "1",
           *patterns]
    print(f"{module}: tests {tests}\n$ (cd {tree} && {' '.join(cmd)})", flush=True)
    t0 = datetime.now(UTC)
    rc = subprocess.run(cmd, cwd=tree, env=env, stdout=subprocess.DEVNULL).returncode
    wall = (datetime.now(UTC) - t0).total_seconds()
    (tree / "mutmut_run.json").write_text(json.dumps(
        {"cmd": cmd, "rc": rc, "cap_s": cap, "wall_s": round(wall, 1), "tests": tests,
         "started": t0.strftime("%Y-%m-%d %H:%M:%S UTC"), "patterns": patterns}))
    print(f"rc {rc} (124: stopped by the cap) after {wall:.0f} s")
    return 0


# ---------------------------------------------------------------------------- collect


def _status(code) -> str:
    from mutmut.stats import status_by_exit_code

    return "not checked" if code is None else status_by_exit_code[code]


def _function(name: str) -> str:
    fn = name.split(".")[-1].rsplit("__mutmut_", 1)[0]
    fn = fn.replace("xǁ", "").replace("ǁ", ".")
    return fn[2:] if fn.startswith("x_") else fn


def _number(name: str) -> int:
    return int(name.rsplit("_", 1)[1])


@contextlib.contextmanager
def _cwd(path: Path):
    old = os.getcwd()
    os.chdir(path)
    try:
        yield
    finally:
        os.chdir(old)


def _diff(name: str, module: str) -> str:
    from mutmut.mutation.diff_apply import get_diff_for_mutant

    diff = get_diff_for_mutant(name, path=Path(module))
    lines = [ln for ln in diff.split("\n")[2:]
             if ln.startswith(("+", "-")) and not ln.startswith(("+++", "---"))]
    return " | ".join(ln[0] + " " + ln[1:].strip() for ln in lines)


def collect(module: str, tree: Path, source: str) -> int:
    import mutmut

    tree = tree.resolve()
    meta = json.loads((tree / "mutants" / f"{module}.meta").read_text())
    info = json.loads((tree / "mutmut_run.json").read_text())
    path = RESULTS / f"{_slug(module)}.json"
    data = json.loads(path.read_text()) if path.exists() else {"runs": [], "mutants": {}}
    label = f"run{len(data['runs']) + 1}"
    with _cwd(tree):
        for name, code in meta["exit_code_by_key"].items():
            e = data["mutants"].setdefault(name, {})
            d = _diff(name, module)
            if e.get("diff", d) != d:  # the source changed: a new mutant under an old number
                e.clear()
            e["diff"] = d
            e[label] = _status(code)
    data["runs"].append({
        "label": label, "source": source, "mutmut": getattr(mutmut, "__version__", "?"),
        "tests": info["tests"], "patterns": info["patterns"], "cap_s": info["cap_s"],
        "wall_s": info["wall_s"], "rc": info["rc"], "started": info["started"]})
    path.write_text(json.dumps(data, indent=1, sort_keys=True, ensure_ascii=False) + "\n")
    return report(module)


def _final(e: dict) -> str:
    vs = [v for k, v in e.items() if k.startswith("run")]
    if any(v in KILLED for v in vs):
        return "killed"
    ran = [v for v in vs if v != "not checked"]
    return ran[-1] if ran else "not checked"


def report(module: str) -> int:
    slug = _slug(module)
    data = json.loads((RESULTS / f"{slug}.json").read_text())
    mutants = data["mutants"]
    out = [f"# Mutation testing of `{module}` (mutmut, one module, targeted tests)", "",
           f"Written by `benchmarks/mutation_modules.py` from mutmut's own verdicts "
           f"(`{slug}.json`). Commands, from the repository root: "
           f"`python benchmarks/mutation_modules.py run {module} --cap CAP [PATTERNS]` "
           "(a scratch copy of the tree whose setup.cfg [mutmut] section mutates this module "
           "only, with the tests below; there `OMP_NUM_THREADS=1 nice -n 10 timeout CAP mutmut "
           f"run --max-children 1`), then `... collect {module} --source SOURCE`.", ""]
    for r in data["runs"]:
        stopped = " (stopped by the cap)" if r["rc"] == 124 else ""
        pats = (f"; {len(r['patterns'])} named mutants (the survivors of the runs before)"
                if len(r["patterns"]) > 3 else
                f"; patterns {' '.join(r['patterns'])}" if r["patterns"] else "")
        out.append(f"- **{r['label']}**: source {r['source']}; mutmut {r['mutmut']}; started "
                   f"{r['started']}, {r['wall_s']:.0f} s wall, cap {r['cap_s']} s{stopped}"
                   f"{pats}; tests " + ", ".join(f"`{t}`" for t in r["tests"]))
    out += ["", "\"killed\" counts mutmut's timeouts too; a mutant killed in any run is "
            "killed; \"not run\": the cap stopped the run first (mutmut runs the mutants with "
            "the cheapest tests first).", "",
            "| function | mutants | run | killed | survived | no tests | not run |",
            "|---|" + "---:|" * 6]
    rows = defaultdict(Counter)
    for n, e in mutants.items():
        rows[_function(n)]["m"] += 1
        rows[_function(n)][_final(e)] += 1
    tot = Counter()
    for fn in sorted(rows, key=lambda f: -rows[f]["m"]):
        c = rows[fn]
        vals = [c["m"], c["m"] - c["not checked"], c["killed"], c["survived"], c["no tests"],
                c["not checked"]]
        for k, v in zip("mrksnx", vals, strict=True):
            tot[k] += v
        out.append(f"| `{fn}` | " + " | ".join(map(str, vals)) + " |")
    out.append("| **total** | " + " | ".join(f"**{tot[k]}**" for k in "mrksnx") + " |")
    left = sorted((n for n, e in mutants.items() if _final(e) in ("survived", "no tests")),
                  key=lambda n: (_function(n), _number(n)))
    by = defaultdict(list)
    for n in left:
        by[TRIAGE.get((module, _function(n), mutants[n]["diff"]), ("UNTRIAGED", ""))[0]].append(n)
    out += ["", f"## Survivors ({len(left)}), by reason", ""]
    for reason in [*REASONS, "UNTRIAGED"]:
        if not by.get(reason):
            continue
        out += [f"### {reason} ({len(by[reason])})", "",
                REASONS.get(reason, "no reason recorded yet"), ""]
        for n in by[reason]:
            note = TRIAGE.get((module, _function(n), mutants[n]["diff"]), ("", ""))[1]
            out.append(f"- `{_function(n)}` #{_number(n)} ({_final(mutants[n])}): "
                       f"`{mutants[n]['diff']}`" + (f" — {note}" if note else ""))
        out.append("")
    (RESULTS / f"{slug}.md").write_text("\n".join(out).rstrip() + "\n")
    print(f"{slug}.md: {tot['m']} mutants, run {tot['r']}, killed {tot['k']}, survived "
          f"{tot['s']}, no tests {tot['n']}, not run {tot['x']}; "
          f"untriaged {len(by.get('UNTRIAGED', []))}")
    return 0


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    for c in ("run", "collect", "report"):
        p = sub.add_parser(c)
        p.add_argument("module", choices=sorted(MODULES))
        if c != "report":
            p.add_argument("--tree", type=Path, default=None)
    sub.choices["run"].add_argument("--cap", type=int, default=600, help="wall seconds")
    sub.choices["run"].add_argument("patterns", nargs="*", help="mutmut mutant-name patterns")
    sub.choices["run"].add_argument("--survivors", action="store_true",
                                    help="run only the record's survivors (after new tests)")
    sub.choices["collect"].add_argument("--source", required=True)
    a = ap.parse_args(argv)
    if a.cmd == "report":
        return report(a.module)
    tree = a.tree or Path("/tmp") / _slug(a.module).replace("_", "-", 1)
    if a.cmd == "run":
        patterns = list(a.patterns)
        if a.survivors:
            data = json.loads((RESULTS / f"{_slug(a.module)}.json").read_text())
            patterns += sorted(n for n, e in data["mutants"].items()
                               if _final(e) in ("survived", "no tests"))
        return run(a.module, tree, a.cap, patterns)
    return collect(a.module, tree, a.source)


if __name__ == "__main__":
    sys.exit(main())
