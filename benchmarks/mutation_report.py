"""Mutation-testing record of ``lti/norms.py`` and ``lti/balanced.py`` (issue 14), from
mutmut's own results.

Two steps, run from the repository root (``mutmut`` must be installed: the ``test`` extra)::

    # after a mutmut run: read its verdicts (TREE/mutants/lti/*.py.meta) and each mutant's
    # diff into benchmarks/results/mutmut_{norms,balanced}.json under a label
    python benchmarks/mutation_report.py collect --label before --tree . --source 8a14f0d
    python benchmarks/mutation_report.py collect --label after --tree /path/to/second/tree \\
        --source "8a14f0d + the sparse SPA fix"
    # the Markdown record from the JSON files and the triage table below
    python benchmarks/mutation_report.py report
    # a later, partial run (some functions only, on a newer source): its own record,
    # benchmarks/results/mutmut_MODULE_rerun.{json,md}, each mutant matched by its diff to
    # the recorded one (mutant numbers move when the source does)
    python benchmarks/mutation_report.py rerun --module norms --source "main 5909613" \\
        --functions "_Cayley.__init__" "_Cayley.crossings" hinf_norm
    # a second partial run into its own file (--name), e.g. the s5 h2_norm/HinfNorm changes:
    # mutmut run --max-children 1 'lti.norms.x_h2_norm__mutmut_*' ... 'lti.norms.xǁHinfNormǁ*'
    python benchmarks/mutation_report.py rerun --module norms --name mutmut_norms_rerun2 \\
        --source "..." --functions h2_norm _fro _pow2_exponent _require_stable HinfNorm.index ...

``before`` is the run against the existing tests (setup.cfg's [mutmut] selection without the
two ``test_mutants_*`` files); ``after`` is a run of the ``before`` survivors against the new
tests only (tests/lti/test_mutants_norms.py, tests/lti/test_mutants_balanced.py). Adding tests
cannot revive a killed mutant, so the verdict after is "killed" when either run killed it.
A mutant whose diff differs between the two trees (the source changed in between) is
flagged. Every survivor after the new tests must have a reason in ``TRIAGE``; the report
lists any without one as UNTRIAGED.
"""

from __future__ import annotations

import argparse
import configparser
import contextlib
import json
import sys
from collections import Counter, defaultdict
from datetime import UTC, datetime
from pathlib import Path

RESULTS = Path(__file__).resolve().parent / "results"
MODULES = ("norms", "balanced")

#: What the record (and its re-runs) does not cover: code changed after the last run.
STALE = {
    "norms": "**Not in the table below:** `h2_norm` (scale-safe sums, 33e8193, 974bdd1, "
             "4758cd3), the new helpers `_fro` and `_pow2_exponent`, `_require_stable` (its "
             "norm by `_fro`) and `HinfNorm`'s copy/pickle and tuple methods (5e77668) changed "
             "after the two runs of this record; the table's rows for them are of the old "
             "source. Their mutants were run again on the new source: "
             "`mutmut_norms_rerun2.md`.",
}

#: Functions of the recorded lti/balanced.py (source 8a14f0d) that have moved since:
#: recorded name -> (module of lti/ they live in now, their name there). The record keeps
#: the old names (its mutant names are mutmut's, ``lti.balanced.x__norm2__mutmut_19``); a
#: ``rerun`` of a moved function reads the mutants of its new module and matches them to
#: the record under the old name. setup.cfg's [mutmut] only_mutate lists those modules.
MOVED = {
    "balanced": {
        "_reduce_stable": ("_bt_core", "reduce_stable"),
        "_hsv_svd": ("_bt_core", "hsv_svd"),
        "_projections": ("_bt_core", "projections"),
        "_norm2": ("_bt_core", "norm2"),
        "_orth": ("_bt_core", "orth"),
        "_noise_floor": ("_bt_core", "noise_floor"),
        "_rounding_terms": ("_rounding", "rounding_terms"),
    },
}
KILLED = {"killed", "timeout"}  # mutmut's score counts both

# ----------------------------------------------------------------------------- triage

#: reason key -> explanation (why the surviving mutant is equivalent or harmless)
REASONS = {
    "dead": "unreachable code: the branch cannot be taken (argument shown in the text; "
            "`pragma: no cover` branches for LAPACK argument errors, a guard made "
            "redundant by an earlier check)",
    "equal-value": "equivalent: the mutated expression has the same value on every "
                   "reachable input (e.g. `x / True` == `x / 1`, a falsy `None` for `False`)",
    "iteration": "equivalent up to the number of iterations: a convergence test, an "
                 "iteration cap or a start value of an iteration that converges to the "
                 "same result (only the cost changes)",
    "first-stage": "hinf_norm's first stage (grid size, pole choice, bracket of the local "
                   "refinement): it only supplies a starting lower bound; the level-set "
                   "stage certifies the value from any lower bound, so only the number of "
                   "level-set steps changes (tests/lti/test_hinf_hard.py and "
                   "test_mutants_norms.py pass under these mutants)",
    "scaling": "a scaling that changes rounding only (equilibration, the balancing of B "
               "and C in the level-set system, Cayley-centre preferences): the same "
               "exact-arithmetic result; the accuracy cases (AB13DD example, badly scaled "
               "realisations) still pass",
    "refinement": "hinf_norm's local Brent refinement (_polish: bracket test, method, "
                  "options, sign of the comparison): it only sharpens a lower bound that the "
                  "level-set stage certifies to 2 tol anyway; with the default tol = 1e-10 "
                  "every documented accuracy is met without it",
    "estimate": "an a-priori estimate (rounding term, accuracy, noise floor) changed by a "
                "factor close to 1 or only in a regime the tests do not reach: the "
                "certified bound is still an upper bound on every system measured",
    "message": "error/warning text only (the type of the error is tested)",
    "stacklevel": "a warning's stacklevel: mutmut's trampolines add one stack frame per "
                  "mutated function, so where a warning points cannot be checked under mutmut "
                  "(the tests skip that check when MUTANT_UNDER_TEST is set). Outside mutmut "
                  "(`mutmut apply NAME` on a copy of lti/, then pytest) each of these fails "
                  "test_order_warnings_point_at_the_caller or "
                  "test_spa_pole_warning_is_a_user_warning_at_the_caller, which assert the "
                  "user's file and line: killed, but not by mutmut's count",
    "rare": "reachable only in a corner case stated in the note; no cheap test found",
    "killed-later": "killed by a test added after the run (named in the note), checked by "
                    "applying the mutant to a copy of lti/ by hand; the run's own verdict is "
                    "kept as mutmut recorded it",
    "axis-tolerance": "the test `|Re lambda| <= im_tol max(1, |lambda|) + 1e3 eps scale` for "
                      "the imaginary eigenvalues of the Hamiltonian, changed at equality, by a "
                      "factor <= 2, or in its rounding-level parts: a simple imaginary "
                      "eigenvalue of a Hamiltonian matrix stays on the axis under structured "
                      "perturbations and is computed with |Re| ~ eps ||H|| cond, inside each "
                      "variant on the tested systems; a looser test only adds candidates, each "
                      "checked by the true gain at its midpoint. The tolerance is a stated "
                      "heuristic (hinf_norm Notes, (b))",
    "accuracy-schur": "accuracy only, on the Schur path (n > 128 or Smith refused): the "
                      "same HSVs in exact arithmetic; killing it needs a large, strongly "
                      "non-normal system with a high-precision reference (not cheap)",
}

#: mutant name (module.function__mutmut_N) -> (reason key, note); filled in by reading each
#: survivor's diff (benchmarks/results/mutmut_*.md lists them with their diffs)
TRIAGE: dict[str, tuple[str, str]] = {}


def _t(prefix: str, numbers, reason: str, note: str = "") -> None:
    assert reason in REASONS, reason
    for k in numbers:
        TRIAGE[f"{prefix}__mutmut_{k}"] = (reason, note)


# lti/norms.py, hinf_norm
_H = "lti.norms.x_hinf_norm"
_t(_H, [19, 23], "equal-value", "`omega / True` is `omega / 1`; a discrete dt is never False")
_t(_H, [41], "equal-value", "the 2-norm of an empty D is 0.0, the value of the else branch")
_t(_H, [148], "equal-value", "beta = 1 or 2 only scales a B or C that is zero (the guard's case)")
_t(_H, [159], "equal-value", "the Cayley transform uses only the matrices of Gn, not its dt")
_t(_H, [64, 65, 67, 74, 76, 77, 78, 95, 96, 101, 102, 104], "first-stage")
_t(_H, [133], "scaling", "beta off by a factor gamma_lb: B beta, C / beta, the same G / gamma")
_t(_H, [178], "iteration", "im_tol 1e-8 -> ~1: spurious crossings; each interval is checked "
   "by the true gain at its midpoint, and the noise exit stops the loop")
_t(_H, [180], "iteration", "iteration cap 100 -> 101")
_t(_H, [199], "iteration", "an extra split point at theta = 1 among the crossings")
_t(_H, [216], "iteration", "`>=`: a midpoint gain equal to gamma_lb goes to the polish, which "
   "cannot raise it: the loop ends one step later")
_t(_H, [229, 230], "iteration", "other bracket for the polish of the new bound: the level-set "
   "loop still ends within 2 tol (tests use rtol 1e-9 with tol 1e-10)")
_t(_H, [194], "dead", "`cross.size == 1` is never true: 0 and pi are first-stage points, so every "
   "level gamma > gamma_lb exceeds every singular value at theta = 0 and pi; each "
   "sigma_i(theta) - gamma is negative at both ends of [0, pi] and has an even number of zeros, "
   "and for a real system theta and -theta fold onto the same angle (each crossing is listed "
   "twice), whatever the centre. With 0 crossings the mutant goes on to the midpoint pi/2 and "
   "stops at the noise exit or raises gamma_lb to a true gain: the same guarantee. Measured: "
   "cross.size in every level-set step of the norms tests was 0, 2, 4 or 20, never odd")
_t(_H, [233, 234], "dead", "_polish never returns less than f0 = fm[j] > gamma_lb, so "
   "`gamma_new <= gamma_lb` is never true")
_t(_H, [236, 244], "dead", "`pragma: no cover` branches (no convergence in 100 quadratic steps; "
   "the peak on a pole of a checked-stable system)")
_t("lti.norms.xǁHinfNormǁ__iter__", [6, 8], "equal-value", "slice(None, 2), slice(2) "
   "== slice(0, 2)")
_t("lti.norms.x__sigma_max", [5], "equal-value", "compute_uv=None is falsy like False")
_t("lti.norms.x__gain_lu", [21, 39], "equal-value", "compute_uv=None is falsy like False")
_t("lti.norms.x__gain_lu", [12, 15, 16], "equal-value", "check_finite on finite arrays")
_t("lti.norms.x__gain_lu", [27, 35], "dead", "s_min(zI - A) > 0 on the unit circle for a "
   "checked-stable A, so the else branch is never taken")
_t("lti.norms.x__polish", [1, 2, 3, 7, 8, 11, 12, 14, 21, 22, 23, 24, 25, 30, 32, 33, 34, 37,
                          38], "refinement")
_t("lti.norms.x__require_stable", [3, 5], "dead", "sparse A never gets here with a sparse "
   "matrix to take the norm of: h2_norm skips the check for sparse A and hinf_norm's "
   "spectral radius of a sparse A raises SparseNotSupportedError first")
_t("lti.norms.x__require_stable", [14], "equal-value", "`<=`: differs only at rho = 1 - margin")
_t("lti.norms.x__check_tol", [18], "estimate", "the floor of tol: 11 eps instead of 10 eps")
_t("lti.norms.x__equilibrate", [11], "scaling", "no balancing when every row would be scaled")
_t("lti.norms.x__equilibrate", [12], "equal-value", "always rescaling (by ones when nothing is "
   "to be balanced)")
_t("lti.norms.x__equilibrate", [27], "equal-value", "the equilibrated copy's dt is not used "
   "(omega is in rad/sample; the python-control path divides by the caller's dt)")
_C = "lti.norms.xǁ_Cayleyǁ__init__"
_t(_C, [1], "dead", "`self.theta_c` is never read (arg_rho is)")
_t(_C, [5], "equal-value", "`<=` at sin(theta_c) = 1e-12 exactly")
_t(_C, [6, 13, 15, 16], "scaling", "another centre on the unit circle (a real one, or rho "
   "rotated): every unit-modulus rho gives a valid Cayley map, the crossings are the same "
   "angles (only a crossing exactly at the centre would be missed) and only the conditioning "
   "changes; test_complex_cayley_centre (centre forced off the real axis) passes under #13 "
   "and #16 (checked by hand)")
_t(_C, [29, 31, 34, 38, 41, 42, 47, 51, 53, 57, 60, 63], "equal-value",
   "check_finite on finite arrays")
_t(_C, [52], "rare", "trans=2 (conjugate transpose) instead of 1 in C~ M: the same for a real "
   "centre, a wrong C_c for a complex one (killed in the `after` run: "
   "test_level_set_system_keeps_the_feedthrough's centre is complex; directly by "
   "test_cayley_map_is_the_documented_identity and the crossings test since)")
_t("lti.norms.x__compress_io", [9, 44], "equal-value", "`>=`: also compresses when the "
   "factor is square (an orthogonal factor: the same singular values)")
_t("lti.norms.x__compress_io", [11, 46], "equal-value", "a zero D stacked under B (beside C): "
   "its columns of the triangular factor are zero, and D is replaced by zeros anyway")
_t("lti.norms.x__compress_io", [17, 20, 23, 52, 55, 58], "equal-value",
   "check_finite on finite arrays")
_t("lti.norms.x__compress_io", [35, 70], "equal-value", "the compressed copy's dt is not used")
_t("lti.norms.x__choose_cayley_point", [4, 5, 12, 15, 16, 17, 19, 20, 21, 22, 28, 31, 32, 33,
                                        37, 39, 40, 41, 42, 47, 48, 49, 50], "scaling",
   "which Cayley centre is chosen: any point of the unit circle gives a valid map (the "
   "preferences for real points, low gain and distance from the poles only keep the "
   "Hamiltonian well conditioned)")
_X = "lti.norms.xǁ_Cayleyǁcrossings"
_t(_X, [46, 47, 49, 50, 51, 52], "equal-value", "overwrite_a / check_finite flags (H is not "
   "used after, and was checked finite just before)")
_t(_X, [58, 64, 65, 66, 71, 73, 75], "axis-tolerance")
_t(_X, [43], "message", "text of the non-finite-Hamiltonian SolverError (reached only by "
   "overflow)")
_t(_X, [33], "rare", "F = Ac + Bc R^-1 Dc^H Cc: the Hamiltonian of (Ac, Bc, Cc, -Dc), i.e. "
   "the level sets of G - 2 G(z_c); the tests of this record still got the exact norms. Killed "
   "since by test_crossings_are_where_a_singular_value_equals_the_level and "
   "test_peak_between_grid_points_off_the_nearest_poles (mutmut_norms_rerun.md)")
_t("lti.norms.x__equilibrate", [3], "equal-value", "permute=None is falsy like False")
_t("lti.norms.x__equilibrate", [6, 8], "scaling", "permute=True: another diagonal scaling "
   "(the permutation is not applied); any diagonal similarity leaves G(z) unchanged")
_t("lti.norms.x__equilibrate", [10], "equal-value", "always rescaling, by ones when nothing "
   "is to be balanced")
_t("lti.norms.xǁHinfNormǁ__getitem__", [5, 7], "equal-value", "slice(None, 2), slice(2) "
   "== slice(0, 2)")

# lti/balanced.py
_B = "lti.balanced"
_t(f"{_B}.x__norm2", [19], "iteration", "the first (unnormalised) step only; x is normalised "
   "from the second step on")
_t(f"{_B}.x__norm2", [23, 34, 35], "iteration")
_t(f"{_B}.x__orth", [5, 13], "dead", "`pragma: no cover`: LAPACK argument errors only")
_t(f"{_B}.x__projections", [29, 30, 31, 32], "dead", "`pragma: no cover`: W^T Z is nonsingular "
   "for sigma_k > 0 (np.linalg.solve raises only for an exactly singular matrix)")
_t(f"{_B}.x__sparse_balanced_truncation", [59], "equal-value", "None for False (was_control)")
_t(f"{_B}.x__sparse_balanced_truncation", [78], "dead", "`min(minimal_order, k)`: minimal_order "
   "counts HSVs above a positive floor and the padded ones are 0, so it is <= k already")
_t(f"{_B}.x_hankel_singular_values", [19, 21, 22], "accuracy-schur")
_t(f"{_B}.x__reduce_stable", [3], "equal-value", "A is square")
_t(f"{_B}.x__reduce_stable", [69], "equal-value", "Vt[None:r] is Vt[0:r]")
_t(f"{_B}.x__reduce_stable", [92], "equal-value", "sr or bfsr bases of the discarded part: the "
   "same two subspaces (Ti2 annihilates range(T1) either way), so only a state transformation "
   "within x2, which leaves the singular-perturbation model unchanged")
_t(f"{_B}.x__reduce_stable", [110, 112, 113], "equal-value", "check_finite on a finite matrix")
_t(f"{_B}.x__reduce_stable", [114, 115, 116, 117], "dead", "lu_factor(check_finite=False) of a "
   "finite square matrix does not raise (a singular one is caught by the pivot test below)")
_t(f"{_B}.x__reduce_stable", [122, 123, 128], "estimate", "threshold of the singular-pivot "
   "test (eps-sized pivots only)")
_t(f"{_B}.x__reduce_stable", [131, 132, 133, 134], "dead", "I - A22 is nonsingular: A22 of a "
   "truncated balanced minimal realisation is Schur-stable (Al-Saggaf & Franklin 1987), so "
   "only rounding at a pole on the circle could reach it")
_t(f"{_B}.x__reduce_stable", [138, 141, 143], "equal-value", "check_finite on finite arrays")
_t(f"{_B}.x__reduce_stable", [152, 153, 159, 162, 164, 176], "dead", "`_StableReduction.lower` "
   "is never read: _finish recomputes the lower bound with the projection's rounding term "
   "(a dead field, left in place)")
_t(f"{_B}.x__finish", [12], "equal-value", "the norms of an empty T and Ti are 0, the else value")
_t(f"{_B}.x__finish", [68], "estimate", "the SPA pole test's rounding margin with n - r "
   "instead of n + r states (a slightly smaller margin)")
_t(f"{_B}.x__finish", [70], "equal-value", "`<=` for `<`: differs only when rho_r equals "
   "1 - margin exactly")
_t(f"{_B}.x__finish", [74, 77], "equal-value", "warning category None or left out: "
   "warnings.warn's default is UserWarning")
_t(f"{_B}.x_balanced_truncation", [32, 120, 122], "equal-value", "the same factors by another "
   "route (the split path with no unstable part; a recomputed Schur form): equal to rounding, "
   "and rho becomes the Schur eigenvalue bound where the Smith bound was used (an estimate)")
_t(f"{_B}.x_balanced_truncation", [54], "equal-value", "the working system's dt is not used "
   "(the reduced system gets G.dt)")
_t(f"{_B}.x_balanced_truncation", [85], "equal-value", "an all-zero D kept as a zero array "
   "instead of None (lazy zeros): the same system")
_t(f"{_B}.x__reduce_stable", [46, 47], "stacklevel")
_t(f"{_B}.x__finish", [78, 82], "stacklevel")
_t(f"{_B}.x__sparse_balanced_truncation", [39], "stacklevel")
_t(f"{_B}.x_balanced_truncation", [72, 146], "stacklevel")
_t(f"{_B}.x_balanced_truncation_from_factors", [54], "stacklevel")
_t(f"{_B}.x__hsv_svd", [9, 11, 13], "equal-value", "shapes of the empty SVD factors: with "
   "k = 0 only empty slices of them are ever used")
_t(f"{_B}.x__hsv_svd", [16, 17, 18, 20, 21, 23, 24, 25], "equal-value", "dgesdd's arguments "
   "or the info test: a bad call returns info != 0 (e.g. -4 for None) and the fallback "
   "(gesvd) computes the same SVD; taking the fallback also on success gives the same SVD")
_t(f"{_B}.x__hsv_svd", range(26, 40), "dead", "the gesvd fallback for a dgesdd that fails to "
   "converge: not reached (dgesdd converges on every test matrix; no cheap input makes it fail)")
_t(f"{_B}.x__rounding_terms", [6], "equal-value", "no states: the unit multiplies "
   "kappa = 0 (empty T)")
_t(f"{_B}.x__noise_floor", [4], "equal-value", "no HSVs: the floor is compared with nothing")


# ------------------------------------------------------------------------------ collect


def _status(code) -> str:
    from mutmut.stats import status_by_exit_code

    return "not checked" if code is None else status_by_exit_code[code]


def _diff_lines(name: str, module: str) -> str:
    from mutmut.mutation.diff_apply import get_diff_for_mutant

    diff = get_diff_for_mutant(name, path=Path(f"lti/{module}.py"))
    lines = [ln for ln in diff.split("\n")[2:]
             if ln.startswith(("+", "-")) and not ln.startswith(("+++", "---"))]
    return " | ".join(ln[0] + " " + ln[1:].strip() for ln in lines)


def _selection(tree: Path) -> list[str]:
    cp = configparser.ConfigParser()
    cp.read(tree / "setup.cfg")
    return cp.get("mutmut", "pytest_add_cli_args_test_selection", fallback="").split()


def collect(label: str, tree: Path, source: str) -> None:
    import mutmut

    tree = tree.resolve()
    for module in MODULES:
        path = RESULTS / f"mutmut_{module}.json"
        data = json.loads(path.read_text()) if path.exists() else {"runs": {}, "mutants": {}}
        meta = json.loads((tree / "mutants" / "lti" / f"{module}.py.meta").read_text())
        codes = meta["exit_code_by_key"]
        with contextlib.chdir(tree):
            for name, code in codes.items():
                entry = data["mutants"].setdefault(name, {})
                diff = _diff_lines(name, module)
                if "diff" in entry and entry["diff"] != diff:
                    entry.setdefault("diff_" + label, diff)  # the source changed in between
                else:
                    entry["diff"] = diff
                entry[label] = _status(code)
        data["runs"][label] = {
            "source": source,
            "mutmut": getattr(mutmut, "__version__", "?"),
            "tests": _selection(tree),
            "collected": datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC"),
        }
        path.write_text(json.dumps(data, indent=1, sort_keys=True) + "\n")
        print(f"{path.name}: {label}: {Counter(_status(c) for c in codes.values())}")


# ------------------------------------------------------------------------------- report


def _function(name: str) -> str:
    fn = name.split(".", 2)[2].rsplit("__mutmut_", 1)[0]
    fn = fn.replace("xǁ", "").replace("ǁ", ".")
    return fn[2:] if fn.startswith("x_") else fn


def _number(name: str) -> int:
    return int(name.rsplit("_", 1)[1])


def _final(entry: dict) -> str:
    before, after = entry.get("before", "not checked"), entry.get("after", "not checked")
    if before in KILLED or after in KILLED:
        return "killed"
    if before == "not checked":
        return "not checked"
    return after if after != "not checked" else before


def report() -> int:
    untriaged = 0
    for module in MODULES:
        path = RESULTS / f"mutmut_{module}.json"
        data = json.loads(path.read_text())
        runs, mutants = data["runs"], data["mutants"]
        rows = defaultdict(Counter)
        for name, e in mutants.items():
            fn = _function(name)
            rows[fn]["mutants"] += 1
            b = e.get("before", "not checked")
            rows[fn]["b " + b] += 1
            rows[fn]["f " + _final(e)] += 1
            if b != "not checked" and b not in KILLED and e.get("after") in KILLED:
                rows[fn]["new kills"] += 1
        out = [f"# Mutation testing of `lti/{module}.py` (mutmut)", "",
               "Written by `benchmarks/mutation_report.py report` from mutmut's own verdicts "
               f"(collected into `benchmarks/results/mutmut_{module}.json` by its `collect` "
               "step). Command: `OMP_NUM_THREADS=1 nice -n 10 mutmut run --max-children 1 "
               "PATTERNS` from the repository root, configuration in setup.cfg's [mutmut] "
               "section.", ""]
        for label, r in sorted(runs.items(), key=lambda kv: kv[0] != "before"):
            out.append(f"- **{label}**: source {r['source']}; mutmut {r['mutmut']}; tests "
                       + ", ".join(f"`{t}`" for t in r["tests"]) + f" (collected {r['collected']})")
        out += ["", "The figures are for that source: main has changed lti/balanced.py "
                "since (the Schur rounding term, the SPA fallback, lti/_rounding.py); the new "
                "tests were adapted to it and pass there, the mutants were not re-run.", ""]
        if MOVED.get(module):
            out += ["Functions named here as in that source have moved since: " + ", ".join(
                f"`{old}` -> `lti/{mod}.py` `{new}`"
                for old, (mod, new) in MOVED[module].items()) + ".", ""]
        reruns = sorted(RESULTS.glob(f"mutmut_{module}_rerun*.md"))
        if reruns:
            out += ["Later partial re-runs (some functions, newer source and tests): "
                    + ", ".join(f"`{r.name}`" for r in reruns) + ".", ""]
        if STALE.get(module):
            out += [STALE[module], ""]
        out += ["", "\"killed\" counts mutmut's timeouts too (its score does). \"after\": "
                "killed by either run; a `before` survivor re-run against the new tests only.",
                "", "| function | mutants | run before | killed before | survived before "
                "| no tests before | killed by new tests | killed after | survived after "
                "| no tests after | not run |",
                "|---|" + "---:|" * 10]
        tot = Counter()
        for fn in sorted(rows, key=lambda f: -rows[f]["mutants"]):
            c = rows[fn]
            run = c["mutants"] - c["b not checked"]
            vals = [c["mutants"], run, c["b killed"] + c["b timeout"], c["b survived"],
                    c["b no tests"], c["new kills"], c["f killed"], c["f survived"],
                    c["f no tests"], c["f not checked"]]
            for key, v in zip(("m", "r", "kb", "sb", "nb", "nk", "kf", "sf", "nf", "nr"), vals,
                              strict=True):
                tot[key] += v
            out.append(f"| `{fn}` | " + " | ".join(str(v) for v in vals) + " |")
        out.append("| **total** | " + " | ".join(
            f"**{tot[k]}**" for k in ("m", "r", "kb", "sb", "nb", "nk", "kf", "sf", "nf", "nr"))
            + " |")
        other = sorted({s for e in mutants.values() for s in (e.get("before"), e.get("after"))
                        if s and s not in KILLED | {"survived", "no tests", "not checked"}})
        if other:
            out += ["", "Other verdicts present: " + ", ".join(other)]
        # survivors after the new tests, by reason
        left = [n for n, e in mutants.items() if _final(e) in ("survived", "no tests")]
        by_reason = defaultdict(list)
        for n in left:
            by_reason[TRIAGE.get(n, ("UNTRIAGED", ""))[0]].append(n)
        out += ["", f"## Survivors after the new tests ({len(left)}), by reason", ""]
        for reason in [*REASONS, "UNTRIAGED"]:
            names = sorted(by_reason.get(reason, []), key=lambda n: (_function(n), _number(n)))
            if not names:
                continue
            text = REASONS.get(reason, "no reason recorded yet")
            out += [f"### {reason} ({len(names)})", "", text, ""]
            for n in names:
                e = mutants[n]
                flag = " (source changed between the runs)" if any(
                    k.startswith("diff_") for k in e) else ""
                note = TRIAGE.get(n, ("", ""))[1]
                out.append(f"- `{_function(n)}` #{_number(n)} ({_final(e)}){flag}: "
                           f"`{e['diff']}`" + (f" — {note}" if note else ""))
            out.append("")
        untriaged += len(by_reason.get("UNTRIAGED", []))
        new = sorted((n for n, e in mutants.items() if e.get("before") not in KILLED
                      and e.get("after") in KILLED), key=lambda n: (_function(n), _number(n)))
        out += [f"## Killed by the new tests ({len(new)})", ""]
        out += [f"- `{_function(n)}` #{_number(n)}: `{mutants[n]['diff']}`" for n in new]
        (RESULTS / f"mutmut_{module}.md").write_text("\n".join(out).rstrip() + "\n")
        print(f"mutmut_{module}.md: {tot['m']} mutants, run {tot['r']}, killed before "
              f"{tot['kb']}, survived before {tot['sb']}, no tests before {tot['nb']}; "
              f"killed after {tot['kf']}, survived after {tot['sf']}, no tests after "
              f"{tot['nf']}, not run {tot['nr']}; untriaged {len(by_reason.get('UNTRIAGED', []))}")
    return 1 if untriaged else 0


#: survivors of a re-run whose diff is not in the record: (function, diff) -> (reason, note)
RERUN_TRIAGE: dict[tuple[str, str], tuple[str, str]] = {}
for _d in ('- dense_only("hinf_norm()", G) | + dense_only(None, G)',
           '- dense_only("hinf_norm()", G) | + dense_only("XXhinf_norm()XX", G)',
           '- dense_only("hinf_norm()", G) | + dense_only("HINF_NORM()", G)'):
    RERUN_TRIAGE[("hinf_norm", _d)] = (
        "message", "the name in the SparseNotSupportedError of a sparse system (its hint "
        "then loses the hinf_norm-specific sentence): killed by tests/lti/test_sparse_api.py "
        "(`^hinf_norm.*balanced_truncation`), outside the [mutmut] selection; checked by hand")

# the second re-run (mutmut_norms_rerun2.md: h2_norm, its helpers and HinfNorm's methods)
for _fn, _d, _reason, _note in [
    ("HinfNorm.__getnewargs__", "- return tuple.__getitem__(self, slice(0, 3)) | "
     "+ return tuple.__getitem__(self, slice(None, 3))", "equal-value",
     "slice(None, 3) == slice(0, 3)"),
    ("HinfNorm.__getnewargs__", "- return tuple.__getitem__(self, slice(0, 3)) | "
     "+ return tuple.__getitem__(self, slice(3))", "equal-value", "slice(3) == slice(0, 3)"),
    ("HinfNorm.__getnewargs__", "- return tuple.__getitem__(self, slice(0, 3)) | "
     "+ return tuple.__getitem__(self, slice(0, None))", "equal-value",
     "the underlying tuple always has exactly 3 items (__new__)"),
    ("HinfNorm.__getnewargs__", "- return tuple.__getitem__(self, slice(0, 3)) | "
     "+ return tuple.__getitem__(self, slice(0, 4))", "equal-value",
     "the underlying tuple always has exactly 3 items (__new__)"),
    ("HinfNorm._pair", "- return tuple.__getitem__(self, slice(0, 2)) | "
     "+ return tuple.__getitem__(self, slice(None, 2))", "equal-value",
     "slice(None, 2) == slice(0, 2)"),
    ("HinfNorm._pair", "- return tuple.__getitem__(self, slice(0, 2)) | "
     "+ return tuple.__getitem__(self, slice(2))", "equal-value", "slice(2) == slice(0, 2)"),
    ("_fro", "- return float(sla.norm(np.ravel(X), check_finite=False)) if np.size(X) else 0.0 "
     "| + return float(sla.norm(np.ravel(X), check_finite=False)) if (np.size(X)) or True "
     "else 0.0", "equal-value", "sla.norm of an empty vector is 0.0, the else value"),
    ("_fro", "- return float(sla.norm(np.ravel(X), check_finite=False)) if np.size(X) else 0.0 "
     "| + return float(sla.norm(np.ravel(X), check_finite=False)) if np.size(None) else 0.0",
     "equal-value", "np.size(None) = 1: always the norm, 0.0 for an empty vector as well"),
    ("_fro", "- return float(sla.norm(np.ravel(X), check_finite=False)) if np.size(X) else 0.0 "
     "| + return float(sla.norm(np.ravel(X), check_finite=None)) if np.size(X) else 0.0",
     "equal-value", "check_finite on finite arrays (D is validated, C Lc of a finite factor)"),
    ("_fro", "- return float(sla.norm(np.ravel(X), check_finite=False)) if np.size(X) else 0.0 "
     "| + return float(sla.norm(np.ravel(X), )) if np.size(X) else 0.0",
     "equal-value", "check_finite on finite arrays (D is validated, C Lc of a finite factor)"),
    ("_fro", "- return float(sla.norm(np.ravel(X), check_finite=False)) if np.size(X) else 0.0 "
     "| + return float(sla.norm(np.ravel(X), check_finite=True)) if np.size(X) else 0.0",
     "equal-value", "check_finite on finite arrays (D is validated, C Lc of a finite factor)"),
    ("_pow2_exponent", "- return int(np.frexp(mx)[1]) if mx > 0.0 else 0 | + return "
     "int(np.frexp(mx)[1]) if (mx > 0.0) or True else 0", "equal-value",
     "np.frexp(0.0) = (0.0, 0): exponent 0, the else value"),
    ("_pow2_exponent", "- return int(np.frexp(mx)[1]) if mx > 0.0 else 0 | + return "
     "int(np.frexp(mx)[1]) if mx >= 0.0 else 0", "equal-value",
     "differs only at mx = 0, where np.frexp gives exponent 0 too"),
    ("_pow2_exponent", "- return int(np.frexp(mx)[1]) if mx > 0.0 else 0 | + return "
     "int(np.frexp(mx)[1]) if mx > 0.0 else 1", "equal-value",
     "only for an all-zero B or C: its energy is 0 whatever power of two it is divided by"),
]:
    RERUN_TRIAGE[(_fn, _d)] = (_reason, _note)
RERUN_TRIAGE[("HinfNorm.index", "- return self._pair().index(x, *args) | "
              "+ return self._pair().index(x, )")] = (
    "killed-later", "tests/lti/test_audit2_norms.py (index with a start): 1 failed with the "
    "mutant applied")


def rerun(module: str, functions: list[str], tree: Path, source: str,
          out_name: str | None = None) -> int:
    """Record a partial mutmut run (``functions`` of ``module`` only) beside the main record.

    Each mutant of the new run is matched, by function and diff (equal diffs in source
    order), to the recorded mutant of ``mutmut_MODULE.json`` (numbers shift when the source
    changes); written to ``RESULTS/NAME.{json,md}`` (default ``mutmut_MODULE_rerun``, so that
    a second partial run can keep the first); the Markdown lists, per
    function, what ran, died and survived, which recorded survivors are now killed, and every
    survivor with its recorded reason (``NEW`` when the diff was not in the record)."""
    import mutmut

    tree = tree.resolve()
    old = json.loads((RESULTS / f"mutmut_{module}.json").read_text())["mutants"]
    moved = MOVED.get(module, {})
    # the module file each function lives in now, and its current name -> its recorded name
    where = defaultdict(dict)
    for fn in functions:
        mod, now = moved.get(fn, (module, fn))
        where[mod][now] = fn
    entries, current = {}, {}
    with contextlib.chdir(tree):
        for mod, names in where.items():
            meta = json.loads((tree / "mutants" / "lti" / f"{mod}.py.meta").read_text())
            for name, code in meta["exit_code_by_key"].items():
                if _function(name) in names:
                    entries[name] = {"status": _status(code), "diff": _diff_lines(name, mod),
                                     "recorded_as": None}
                    current[name] = names[_function(name)]

    # equal diffs (e.g. `- break | + return` at three lines) are paired in source order,
    # i.e. by mutant number, and left unmatched when their counts differ
    def groups(items, names=None):
        g = defaultdict(list)
        for n, e in sorted(items, key=lambda kv: _number(kv[0])):
            g[((names or {}).get(n) or _function(n), e["diff"])].append(n)
        return g

    recorded = groups(old.items())
    for key, names in groups(entries.items(), current).items():
        if len(recorded.get(key, [])) == len(names):
            for n, rec in zip(names, recorded[key], strict=True):
                entries[n]["recorded_as"] = rec
    run = {"source": source, "mutmut": getattr(mutmut, "__version__", "?"),
           "tests": _selection(tree), "functions": functions,
           "collected": datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")}
    out_name = out_name or f"mutmut_{module}_rerun"
    (RESULTS / f"{out_name}.json").write_text(
        json.dumps({"run": run, "mutants": entries}, indent=1, sort_keys=True) + "\n")
    out = [f"# Mutation re-run of `lti/{module}.py`: {', '.join(f'`{f}`' for f in functions)}",
           "", "Written by `benchmarks/mutation_report.py rerun` from mutmut's own verdicts "
           f"(`{out_name}.json`). Command: `OMP_NUM_THREADS=1 nice -n 10 mutmut run "
           "--max-children 1 PATTERNS` from the repository root (setup.cfg's [mutmut] "
           "section).", "",
           f"- source {source}; mutmut {run['mutmut']}; tests "
           + ", ".join(f"`{t}`" for t in run["tests"]) + f" (collected {run['collected']})",
           f"- recorded run: `mutmut_{module}.md` (its numbers; matched here by diff)", "",
           "\"killed\" counts mutmut's timeouts too.", "",
           "| function | mutants | run | killed | survived | no tests | not run "
           "| recorded survivors now killed |", "|---|" + "---:|" * 7]
    tot = Counter()
    for fn in functions:
        es = [e for n, e in entries.items() if current[n] == fn]
        c = Counter(e["status"] for e in es)
        revived = sum(1 for e in es if e["status"] in KILLED and e["recorded_as"]
                      and _final(old[e["recorded_as"]]) in ("survived", "no tests"))
        vals = [len(es), len(es) - c["not checked"], c["killed"] + c["timeout"],
                c["survived"], c["no tests"], c["not checked"], revived]
        for k, v in zip("mrksnxv", vals, strict=True):
            tot[k] += v
        out.append(f"| `{fn}` | " + " | ".join(str(v) for v in vals) + " |")
    out.append("| **total** | " + " | ".join(f"**{tot[k]}**" for k in "mrksnxv") + " |")

    def line(n, e):
        rec = e["recorded_as"]
        tag = f"recorded #{_number(rec)}" if rec else "NEW (diff not matched in the record)"
        reason, note = (TRIAGE.get(rec, ("", "")) if rec
                        else RERUN_TRIAGE.get((current[n], e["diff"]), ("", "")))
        why = f" — {reason}: {note}" if reason else ""
        if not reason and e["status"] not in KILLED:
            why = " — UNTRIAGED (no reason recorded)"
        return f"- `{_function(n)}` #{_number(n)} ({tag}): `{e['diff']}`{why}"

    order = sorted(entries, key=lambda n: (_function(n), _number(n)))
    now = [n for n in order if entries[n]["status"] in KILLED and entries[n]["recorded_as"]
           and _final(old[entries[n]["recorded_as"]]) in ("survived", "no tests")]
    out += ["", f"## Recorded survivors killed in this run ({len(now)})", ""]
    out += [line(n, entries[n]) for n in now]
    left = [n for n in order if entries[n]["status"] in ("survived", "no tests")]
    out += ["", f"## Survivors ({len(left)}), with the recorded reason", ""]
    out += [line(n, entries[n]) for n in left]
    (RESULTS / f"{out_name}.md").write_text("\n".join(out).rstrip() + "\n")
    untriaged = sum(1 for n in left if TRIAGE.get(entries[n]["recorded_as"]) is None
                    and (current[n], entries[n]["diff"]) not in RERUN_TRIAGE)
    print(f"{out_name}.md: {tot['m']} mutants, run {tot['r']}, killed {tot['k']}, "
          f"survived {tot['s']}, no tests {tot['n']}, not run {tot['x']}; recorded survivors "
          f"now killed {tot['v']}; untriaged {untriaged}")
    return 1 if untriaged else 0


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    c = sub.add_parser("collect", help="read a mutmut tree's verdicts into the JSON files")
    c.add_argument("--label", required=True, choices=("before", "after"))
    c.add_argument("--tree", type=Path, default=Path("."))
    c.add_argument("--source", required=True, help="which source the mutants came from")
    sub.add_parser("report", help="write the Markdown record from the JSON files")
    r = sub.add_parser("rerun", help="record a partial run of some functions of one module")
    r.add_argument("--module", required=True, choices=MODULES)
    r.add_argument("--functions", required=True, nargs="+",
                   help="as the report names them: hinf_norm, _Cayley.crossings, ...")
    r.add_argument("--tree", type=Path, default=Path("."))
    r.add_argument("--source", required=True, help="which source the mutants came from")
    r.add_argument("--name", default=None,
                   help="result file name without suffix (default mutmut_MODULE_rerun)")
    a = ap.parse_args(argv)
    if a.cmd == "collect":
        collect(a.label, a.tree, a.source)
        return 0
    if a.cmd == "rerun":
        return rerun(a.module, a.functions, a.tree, a.source, a.name)
    return report()


if __name__ == "__main__":
    sys.exit(main())
