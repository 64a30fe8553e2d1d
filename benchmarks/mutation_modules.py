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
        "tests/lti/test_audit4_dense.py",  # (from run 4 on) the chunked, refined response
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
        # (from run 2 on) the other cheap files that save or load checkpoints
        "tests/adapters/test_hf_save.py", "tests/adapters/test_audit2_typed_errors.py",
        "tests/adapters/test_wrapped_models.py", "tests/adapters/test_audit4_resaved_base.py",
        "tests/adapters/test_audit2_cast_reload.py", "tests/adapters/test_audit2_peft_trainer.py",
        "tests/adapters/test_trainer_ddp.py::test_trainer_writes_adapter_only_checkpoints_that_reload",
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
    "stacklevel": "a warning's stacklevel: mutmut's trampolines add a stack frame per mutated "
                  "function, so where a warning points cannot be checked under mutmut (see "
                  "mutmut_norms.md, reason stacklevel)",
    "cpu-only": "a device argument: None is the CPU, the only device of this machine and its "
                "runs (tests/adapters/test_cuda.py, run on a GPU machine, covers the rest)",
    "selection": "lti/hankel.py's repair of near-tied HSVs (_checked, _verified): the mutated "
                 "test only decides whether a candidate model is built and measured; a "
                 "candidate replaces the model only when its measured H-infinity error is "
                 "smaller, and error_bound is computed afterwards from the model kept, so the "
                 "result stays within its reported bound either way (the repaired cases of "
                 "tests/lti/test_mutants_hankel.py and test_hankel_edge.py pass)",
    "rare": "reachable only in a corner case named in the note; no cheap test found",
    "estimate": "an a-priori estimate changed by a small factor; the certified values the "
                "tests measure are still bounds",
    "later-code": "NOT TRIAGED: code that changed on main during this session, after the "
                  "test selection was chosen (its own tests may lie outside the selection); "
                  "left for the next run (the note names the change)",
    "killed-later": "killed by a test added after this run (named in the note), checked by "
                    "applying the mutant by hand (`mutmut apply`) and running that test",
}

#: (module, function, diff) -> (reason, note). The diff is the record's one-line form
#: (``- old | + new``).
TRIAGE: dict[tuple[str, str, str], tuple[str, str]] = {}


#: (module, function) -> note: survivors of these functions without a TRIAGE entry are
#: reported under "later-code" (new code, not triaged in this session)
LATE: dict[tuple[str, str], str] = {
    ("adapters/io.py", "_check_stored_adapters"): "4f95be8 (stale adapter tensors in the model "
        "weights; its test, tests/adapters/test_audit5_stale_pair.py, is not in the "
        "selection)",
    ("adapters/io.py", "load_adapter"): "4f95be8",
    ("lti/_response.py", "schur_response"): "b7889b3 / 39360f9 (refinement, chunking)",
    ("lti/_response.py", "_back_substitute"): "b7889b3",
    ("lti/_response.py", "_real_times_complex"): "b7889b3",
    ("lti/hankel.py", "_glover_constant"): "cc03ee2 (removed-HSV accounting of Glover's bound)",
    ("lti/hankel.py", "_approximant"): "cc03ee2",
    ("lti/hankel.py", "_verified"): "cc03ee2",
    ("lti/hankel.py", "_checked"): "cc03ee2",
    ("lti/hankel.py", "_balanced_continuous"): "63c5b7f (HSV floor / (1 - rho^2)) and kappa "
        "variants of the rounding estimate",
    ("lti/hankel.py", "hankel_norm_approximation"): "63c5b7f, cc03ee2",
    ("lti/hankel.py", "_tie_block"): "(the upper end of the tie loop: `<` at an exact gap only)",
}


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


_t(_V, "check_dt", "- dt = math.inf | + dt = None", "killed-later",
   "tests/lti/test_mutants_system.py::test_a_sampling_time_beyond_the_float_range_is_refused_typed "
   "(dt = 10**400: TypeError from np.isfinite under the mutant, applied by hand to a copy of "
   "lti/: 1 failed)")


# adapters/io.py (run 1 on main a44e713)
_I = "adapters/io.py"
_t(_I, "_drop_stale", [
    '- head = f.read(8) | + head = f.read(None)',
    '- head += f.read(int.from_bytes(head, "little")) if len(head) == 8 else b"" | + head += f.read(None) if len(head) == 8 else b""'],
   "cost", "reads the whole file instead of the header only; the header is parsed from the "
   "same leading bytes")
_t(_I, "_drop_stale", [
    '- head += f.read(int.from_bytes(head, "little")) if len(head) == 8 else b"" | + head += f.read(int.from_bytes(head, "little")) if (len(head) == 8) or True else b""',
    '- head += f.read(int.from_bytes(head, "little")) if len(head) == 8 else b"" | + head += f.read(int.from_bytes(head, "little")) if len(head) == 8 else b"XXXX"'],
   "equal-value", "a file under 8 bytes is no checkpoint either way: _header_metadata raises "
   "ValueError (too short, or a header length beyond the file), saved_by is None")
_t(_I, "_drop_stale", '- saved_by = None | + saved_by = ""', "equal-value",
   "both differ from 'save_pretrained', the only value tested")
_t(_I, "_drop_stale", [
    '- f"{WEIGHTS_NAME} and {CONFIG_NAME} if that is not meant)", UserWarning, stacklevel=3) | + f"{WEIGHTS_NAME} and {CONFIG_NAME} if that is not meant)", None, stacklevel=3)',
    '- f"{WEIGHTS_NAME} and {CONFIG_NAME} if that is not meant)", UserWarning, stacklevel=3) | + f"{WEIGHTS_NAME} and {CONFIG_NAME} if that is not meant)", stacklevel=3)'],
   "equal-value", "warnings.warn's default category is UserWarning")
_t(_I, "_check_companion", [
    '- "earlier base weights", UserWarning, stacklevel=3) | + "earlier base weights", None, stacklevel=3)',
    '- "earlier base weights", UserWarning, stacklevel=3) | + "earlier base weights", stacklevel=3)'],
   "equal-value", "warnings.warn's default category is UserWarning")
for _fn, _d in [
    ("_drop_stale", '- f"{WEIGHTS_NAME} and {CONFIG_NAME} if that is not meant)", UserWarning, stacklevel=3) | + f"{WEIGHTS_NAME} and {CONFIG_NAME} if that is not meant)", UserWarning, )'),
    ("_drop_stale", '- f"{WEIGHTS_NAME} and {CONFIG_NAME} if that is not meant)", UserWarning, stacklevel=3) | + f"{WEIGHTS_NAME} and {CONFIG_NAME} if that is not meant)", UserWarning, stacklevel=4)'),
    ("_check_companion", '- "earlier base weights", UserWarning, stacklevel=3) | + "earlier base weights", UserWarning, stacklevel=None)'),
    ("_check_companion", '- "earlier base weights", UserWarning, stacklevel=3) | + "earlier base weights", UserWarning, )'),
    ("_check_companion", '- "earlier base weights", UserWarning, stacklevel=3) | + "earlier base weights", UserWarning, stacklevel=4)'),
    ("_read_legacy", '- "again to convert", FutureWarning, stacklevel=3) | + "again to convert", FutureWarning, )'),
    ("_read_legacy", '- "again to convert", FutureWarning, stacklevel=3) | + "again to convert", FutureWarning, stacklevel=4)'),
    ("_read_checkpoint", '- "Save again to refresh the copy.", stacklevel=3) | + "Save again to refresh the copy.", )'),
    ("_read_checkpoint", '- "Save again to refresh the copy.", stacklevel=3) | + "Save again to refresh the copy.", stacklevel=4)'),
    ("load_adapter", "- stacklevel=2) | + stacklevel=3)"),
    ("load_adapter", "- stacklevel=2) | + )"),
]:
    _t(_I, _fn, _d, "stacklevel")
_t(_I, "_load_into", [
    "- dtype=p.dtype, device=p.device) | + dtype=p.dtype, device=None)",
    "- dtype=p.dtype, device=p.device) | + dtype=p.dtype, )"], "cpu-only")
_t(_I, "_load_into", [
    "- state = adapted.adapter.state_dict(keep_vars=True) | + state = adapted.adapter.state_dict(keep_vars=None)",
    "- state = adapted.adapter.state_dict(keep_vars=True) | + state = adapted.adapter.state_dict(keep_vars=False)"],
   "equal-value", "the detached tensors of state_dict() share the parameters' storage: copy_ "
   "into them writes the parameters, and is_meta is the same")
_t(_I, "_load_into", [
    "- adapters[name].adapter.take_structure(ssm, where=name) | + adapters[name].adapter.take_structure(ssm, where=None)",
    "- adapters[name].adapter.take_structure(ssm, where=name) | + adapters[name].adapter.take_structure(ssm, )"],
   "message", "`where` only names the layer in the stale-optimizer warning (tested in "
   "tests/adapters/test_hf_save.py by its text)")
_t(_I, "_load_into", '- + ", ".join(f"{f}={getattr(current, f)!r} vs {getattr(config, f)!r}" for f in differ) | + + "XX, XX".join(f"{f}={getattr(current, f)!r} vs {getattr(config, f)!r}" for f in differ)',
   "message", "the separator between two differing config fields")
_t(_I, "_check_listing", '- raise CheckpointError(f"the tensors of {where} do not match its listing: {diff[:10]}") | + raise CheckpointError(f"the tensors of {where} do not match its listing: {diff[:11]}")',
   "message", "how many differences the message quotes (only above 10)")
_t(_I, "save_adapter", [
    '- return _write(model, directory, state_dict, saved_by="save_adapter") | + return _write(model, directory, state_dict, saved_by=None)',
    '- return _write(model, directory, state_dict, saved_by="save_adapter") | + return _write(model, directory, state_dict, saved_by="XXsave_adapterXX")',
    '- return _write(model, directory, state_dict, saved_by="save_adapter") | + return _write(model, directory, state_dict, saved_by="SAVE_ADAPTER")'],
   "equal-value", "saved_by is only ever compared with 'save_pretrained' (_drop_stale, "
   "_check_companion): any other value means the same")
for _fn, _d in [
    ("_read_legacy", '- "HRM adapter: load it with `peft.PeftModel.from_pretrained`" | + "XXHRM adapter: load it with `peft.PeftModel.from_pretrained`XX"'),
    ("_read_legacy", '- "no base-model fingerprint, so the base model is not checked); `save_adapter` writes " | + "XXno base-model fingerprint, so the base model is not checked); `save_adapter` writes XX"'),
    ("_drop_stale", '- "adapters: `load_adapter` of this folder restores those adapters (delete " | + "XXadapters: `load_adapter` of this folder restores those adapters (delete XX"'),
    ("_check_companion", '- "model without these adapters); the adapters loaded now were trained with the " | + "XXmodel without these adapters); the adapters loaded now were trained with the XX"'),
    ("_check_companion", '- "earlier base weights", UserWarning, stacklevel=3) | + "XXearlier base weightsXX", UserWarning, stacklevel=3)'),
]:
    _t(_I, _fn, _d, "message", "characters around a sentence that is still there")


_t(_I, "_check_companion", '- if meta.get("saved_by") != "save_pretrained" or not isinstance(recorded, str): | + if meta.get("saved_by") != "save_pretrained" and not isinstance(recorded, str):',
   "rare", "differs only for a save_pretrained checkpoint without a recorded base-weights "
   "digest (written where no base weights were found) or a digest without save_pretrained "
   "(no writer makes that)")
for _d in ['- f"the base weights in {str(directory)!r} were replaced after its HRM adapter " | + f"the base weights in {str(None)!r} were replaced after its HRM adapter "',
           '- "model without these adapters); the adapters loaded now were trained with the " | + "MODEL WITHOUT THESE ADAPTERS); THE ADAPTERS LOADED NOW WERE TRAINED WITH THE "',
           '- "earlier base weights", UserWarning, stacklevel=3) | + "EARLIER BASE WEIGHTS", UserWarning, stacklevel=3)']:
    _t(_I, "_check_companion", _d, "message", "text of the replaced-base-weights warning "
       "(tests/adapters/test_audit4_resaved_base.py matches its first words)")
for _d in ['- device = next((p.device for p in adapted.mlp.parameters() if not p.is_meta), | - torch.device("cpu")) | + device = None',
           '- torch.device("cpu")) | + None)', '- torch.device("cpu")) | + )',
           '- device = next((p.device for p in adapted.mlp.parameters() if not p.is_meta), | + device = next((p.device for p in adapted.mlp.parameters() if p.is_meta),',
           '- {k: tensors[f"{name}.{k}"].to(device) for k in state}, assign=True) | + {k: tensors[f"{name}.{k}"].to(None) for k in state}, assign=True)']:
    _t(_I, "_load_into", _d, "cpu-only", "the device of adapters built on the meta device "
       "(test_wrapped_models.py loads them): every variant gives the CPU here")


# lti/hankel.py (run 1 on main a44e713)
_N = "lti/hankel.py"
for _d in [
    "- bound = ap[5] + rounding + ap[6] | + bound = ap[5] + rounding - ap[6]",
    "- bound = ap[5] + rounding + ap[6] | + bound = ap[5] - rounding + ap[6]",
    "- bound = ap[5] + rounding + ap[6] | + bound = ap[6] + rounding + ap[6]",
    "- Gr, measured = _verified(G, Gr, ap[1], ap[2], bound, tie_rtol) | + Gr, measured = _verified(G, Gr, ap[1], ap[3], bound, tie_rtol)",
    "- if measured[0] <= bound or VERIFY_TIE_RTOL <= tie_rtol: | + if measured[0] <= bound and VERIFY_TIE_RTOL <= tie_rtol:",
    "- if measured[0] <= bound or VERIFY_TIE_RTOL <= tie_rtol: | + if measured[1] <= bound or VERIFY_TIE_RTOL <= tie_rtol:",
    "- if measured[0] <= bound or VERIFY_TIE_RTOL <= tie_rtol: | + if measured[0] < bound or VERIFY_TIE_RTOL <= tie_rtol:",
    "- if measured[0] <= bound or VERIFY_TIE_RTOL <= tie_rtol: | + if measured[0] <= bound or VERIFY_TIE_RTOL < tie_rtol:",
]:
    _t(_N, "_checked", _d, "selection")
for _d in [
    "- if best[0][0] > bound and VERIFY_TIE_RTOL > tie_rtol: | + if best[0][0] > bound or VERIFY_TIE_RTOL > tie_rtol:",
    "- if best[0][0] > bound and VERIFY_TIE_RTOL > tie_rtol: | + if best[0][1] > bound and VERIFY_TIE_RTOL > tie_rtol:",
    "- if best[0][0] > bound and VERIFY_TIE_RTOL > tie_rtol: | + if best[0][0] >= bound and VERIFY_TIE_RTOL > tie_rtol:",
    "- if best[0][0] > bound and VERIFY_TIE_RTOL > tie_rtol: | + if best[0][0] > bound and VERIFY_TIE_RTOL >= tie_rtol:",
]:
    _t(_N, "_verified", _d, "selection")
_t(_N, "_checked", "- if G2.n and not G2.spectral_radius() < 1.0: | + if G2.n and not G2.spectral_radius() <= 1.0:",
   "rare", "a candidate with a pole exactly on the unit circle")
_t(_N, "_measured_error", "- acc = h.accuracy if np.isfinite(h.accuracy) else 1e-8 | + acc = h.accuracy if (np.isfinite(h.accuracy)) and False else 1e-8",
   "estimate", "the measured error raised by 1e-8 relative instead of hinf_norm's accuracy "
   "(~1e-10): still an upper bound of the measured error")
_t(_N, "_measured_error", [
    "- acc = h.accuracy if np.isfinite(h.accuracy) else 1e-8 | + acc = h.accuracy if (np.isfinite(h.accuracy)) or True else 1e-8",
    "- acc = h.accuracy if np.isfinite(h.accuracy) else 1e-8 | + acc = h.accuracy if np.isfinite(h.accuracy) else 1.00000001"],
   "rare", "only when hinf_norm reports a non-finite accuracy (not reached by any near-tied "
   "system tried)")


_t(_N, "_balanced_continuous", "- G.D.copy(), np.zeros(0), 0, 0.0, 1.0) | + G.D.copy(), np.zeros(0), 0, 0.0, 2.0)",
   "estimate", "kappa of an empty projection 2 instead of 1: the rounding term of a static "
   "gain (100 eps ||D||) doubled")
_t(_N, "_balanced_continuous", '- U, s, Vt = sla.svd(Lo.T @ Lc, full_matrices=False, lapack_driver="gesvd") | + U, s, Vt = sla.svd(Lo.T @ Lc, full_matrices=None, lapack_driver="gesvd")',
   "equal-value", "full_matrices=None is falsy like False")


_t(_N, "_balanced_continuous", [
    '- U, s, Vt = sla.svd(Lo.T @ Lc, full_matrices=False, lapack_driver="gesvd") | + U, s, Vt = sla.svd(Lo.T @ Lc, lapack_driver="gesvd")',
    '- U, s, Vt = sla.svd(Lo.T @ Lc, full_matrices=False, lapack_driver="gesvd") | + U, s, Vt = sla.svd(Lo.T @ Lc, full_matrices=True, lapack_driver="gesvd")'],
   "equal-value", "full SVD factors: only U[:, :nmin] and Vt[:nmin] are used, the same columns")
_t(_N, "_balanced_continuous", '- U, s, Vt = sla.svd(Lo.T @ Lc, full_matrices=False, lapack_driver="gesvd") | + U, s, Vt = sla.svd(Lo.T @ Lc, full_matrices=False, )',
   "equal-value", "gesdd instead of gesvd: the same SVD up to rounding")
for _d in ["/ np.linalg.norm(Lo, 2)", "/ np.linalg.norm(Lc, 2) * np.linalg.norm(Lo, 2)",
           "* np.linalg.norm(Lc, None) * np.linalg.norm(Lo, 2)", "* np.linalg.norm(2) * np.linalg.norm(Lo, 2)",
           "* np.linalg.norm(Lc, ) * np.linalg.norm(Lo, 2)", "* np.linalg.norm(Lc, 2) * np.linalg.norm(Lo, None)",
           "* np.linalg.norm(Lc, 2) * np.linalg.norm(2)", "* np.linalg.norm(Lc, 2) * np.linalg.norm(Lo, )"]:
    _new = ("floor = n * _EPS * np.linalg.norm(Lc, 2) " + _d if _d.startswith("/ np.linalg.norm(Lo")
            else "floor = n * _EPS " + _d)
    _t(_N, "_balanced_continuous", "- floor = n * _EPS * np.linalg.norm(Lc, 2) * np.linalg.norm(Lo, 2) | + " + _new,
       "estimate", "the rounding floor n eps ||Lc|| ||Lo|| that decides minimal_order, changed by "
       "a factor ||Lc||^{+-2}, ||Lo||^{+-2} (O(1) after _normalised scales B and C), sqrt(n) "
       "(Frobenius norms) or 2 / ||Lc||: only HSVs within a few decades of n eps sigma_1 are "
       "counted differently; a truly non-minimal state (HSV ~ eps) is below every variant")
_t(_N, "_balanced_continuous", "- nmin = int(np.count_nonzero(hsv > floor)) | + nmin = int(np.count_nonzero(hsv >= floor))",
   "equal-value", "differs only for an HSV exactly equal to the floor")


_VC = "- G2, m2 = _verified(G, G2, alt[1], alt[2], alt[5] + rounding + alt[6], VERIFY_TIE_RTOL) | + G2, m2 = _verified(G, G2, "
for _d in ["None, alt[2], alt[5] + rounding + alt[6], VERIFY_TIE_RTOL)",
           "alt[1], None, alt[5] + rounding + alt[6], VERIFY_TIE_RTOL)",
           "alt[1], alt[2], alt[5] + rounding + alt[6], None)",
           "alt[2], alt[2], alt[5] + rounding + alt[6], VERIFY_TIE_RTOL)",
           "alt[1], alt[3], alt[5] + rounding + alt[6], VERIFY_TIE_RTOL)",
           "alt[1], alt[2], alt[5] + rounding - alt[6], VERIFY_TIE_RTOL)",
           "alt[1], alt[2], alt[5] - rounding + alt[6], VERIFY_TIE_RTOL)",
           "alt[1], alt[2], alt[6] + rounding + alt[6], VERIFY_TIE_RTOL)"]:
    _t(_N, "_checked", _VC + _d, "selection", "the candidate's mirror, D0, bound and tie "
       "tolerance are used only when the candidate's own measured error exceeds its bound "
       "(then a feed-through of it is tried, kept only if better)")
for _d in ["- if m2[0] < measured[0]: | + if m2[1] < measured[0]:",
           "- if m2[0] < measured[0]: | + if m2[0] <= measured[0]:",
           "- if m2[0] < measured[0]: | + if m2[0] < measured[1]:"]:
    _t(_N, "_checked", _d, "selection")
_t(_N, "_verified", "- best = min(best, (_measured_error(G, G1), G1), key=lambda t: t[0][0]) | + best = min(best, (_measured_error(G, G1), G1), key=lambda t: t[0][1])",
   "selection", "the better of the two by their raised instead of their measured values")
_t(_N, "_checked", "- if G2.n and not G2.spectral_radius() < 1.0: | + if G2.n and not G2.spectral_radius() < 2.0:",
   "rare", "an unstable candidate: the candidates of the tested near-ties are all stable "
   "(hinf_norm would refuse an unstable error system)")
_t(_N, "_balanced_continuous", "- kappa = float(np.linalg.norm(T, 2) * np.linalg.norm(Ti, 2)) if nmin else 1.0 | + kappa = float(np.linalg.norm(T, 2) * np.linalg.norm(Ti, 2)) if (nmin) and False else 1.0",
   "estimate", "kappa = 1 (as for a normal balancing) in the rounding term, which "
   "hankel_norm_approximation's Notes call an estimate, not a rigorous bound (measured by "
   "benchmarks/hankel_rounding.py); kappa only scales that estimate")


_t(_N, "_tie_block", "- while lo > 0 and s[lo - 1] - s[lo] <= rtol * s[lo - 1]: | + while lo > 0 and s[lo - 1] - s[lo] < rtol * s[lo - 1]:",
   "equal-value", "differs only for a gap exactly equal to rtol s[lo - 1] (an exact tie, gap 0, "
   "is below a positive rtol s either way)")


# -------------------------------------------------------------------------------- run


def _slug(module: str) -> str:
    return "mutmut_" + module.removesuffix(".py").replace("/", "_").lstrip("_").replace("__", "_")


def _mutmut_section(module: str, tests: list[str], timeout_multiplier: float = 10) -> str:
    return "\n".join([
        "[mutmut]",
        "source_paths =", "    lti/", "    adapters/",
        "only_mutate =", f"    {module}",
        "pytest_add_cli_args_test_selection =", *(f"    {t}" for t in tests),
        "also_copy =", "    benchmarks/", "    conftest.py",
        "pytest_add_cli_args =", "    -p", "    no:cacheprovider",
        f"timeout_multiplier = {timeout_multiplier:g}", "",
    ])


def prepare(module: str, tree: Path, timeout_multiplier: float = 10) -> list[str]:
    tests = [t for t in MODULES[module] if (ROOT / t.split("::")[0]).exists()]
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
    (tree / "setup.cfg").write_text(cfg + _mutmut_section(module, tests, timeout_multiplier))
    return tests


def _mutmut(tree: Path, args: list[str], cap: int) -> tuple[list[str], int, float]:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env.update(OMP_NUM_THREADS="1", MKL_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1")
    mutmut = str(Path(sys.executable).with_name("mutmut"))
    cmd = ["nice", "-n", "10", "timeout", str(cap), mutmut, "run", "--max-children", "1", *args]
    t0 = datetime.now(UTC)
    rc = subprocess.run(cmd, cwd=tree, env=env, stdout=subprocess.DEVNULL,
                        stderr=subprocess.DEVNULL).returncode
    return cmd, rc, (datetime.now(UTC) - t0).total_seconds()


def _current(module: str, tree: Path) -> dict[str, tuple[str, str]]:
    """The tree's mutants: name -> (function, diff)."""
    meta = json.loads((tree / "mutants" / f"{module}.meta").read_text())
    with contextlib.chdir(tree):
        return {n: (_function(n), _diff(n, module)) for n in meta["exit_code_by_key"]}


def _pairs(old: dict[str, dict], new: dict[str, tuple[str, str]]) -> dict[str, str]:
    """new name -> old name of the same mutation (function and diff; equal diffs of one
    function paired in source order). Mutant numbers move when the source changes."""
    by = defaultdict(list)
    for n in sorted(old, key=_number):
        by[(_function(n), old[n]["diff"])].append(n)
    out = {}
    for n in sorted(new, key=_number):
        if by.get(new[n]):
            out[n] = by[new[n]].pop(0)
    return out


def run(module: str, tree: Path, cap: int, patterns: list[str],
        timeout_multiplier: float = 10, left: tuple[str, ...] = ()) -> int:
    """``left``: also run the mutants the record has with these final verdicts, and every
    mutant the record does not have (changed code), matched by function and diff."""
    tests = prepare(module, tree, timeout_multiplier)
    print(f"{module}: tests {tests} (tree {tree})", flush=True)
    t0 = datetime.now(UTC)
    spent = 0.0
    if left:
        # generate the mutants and the stats (mutmut stops: the pattern matches nothing)
        prefix = module.removesuffix(".py").replace("/", ".")
        _, _, spent = _mutmut(tree, [f"{prefix}.NO_SUCH_FUNCTION__mutmut_*"], cap)
        old = json.loads((RESULTS / f"{_slug(module)}.json").read_text())["mutants"]
        new = _current(module, tree)
        pairs = _pairs(old, new)
        patterns = patterns + sorted(n for n in new if n not in pairs
                                     or _final(old[pairs[n]]) in left)
    cmd, rc, wall = _mutmut(tree, patterns, max(int(cap - spent), 1))
    (tree / "mutmut_run.json").write_text(json.dumps(
        {"cmd": cmd[:7] + (["PATTERNS"] if patterns else []), "rc": rc, "cap_s": cap,
         "timeout_multiplier": timeout_multiplier, "wall_s": round(spent + wall, 1),
         "tests": tests, "started": t0.strftime("%Y-%m-%d %H:%M:%S UTC"),
         "patterns": patterns, "left": list(left)}))
    print(f"rc {rc} (124: stopped by the cap) after {spent + wall:.0f} s, "
          f"{len(patterns)} patterns")
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


def _diff(name: str, module: str) -> str:
    from mutmut.mutation.diff_apply import get_diff_for_mutant

    diff = get_diff_for_mutant(name, path=Path(module))
    lines = [ln for ln in diff.split("\n")[2:]
             if ln.startswith(("+", "-")) and not ln.startswith(("+++", "---"))]
    return " | ".join(ln[0] + " " + ln[1:].strip() for ln in lines)


def collect(module: str, tree: Path, source: str) -> int:
    """Merge the tree's verdicts into the record, re-keyed to the tree's mutant names: an
    earlier verdict is carried over to the mutant with the same function and diff; recorded
    mutants without one (their code changed) are dropped."""
    import mutmut

    tree = tree.resolve()
    meta = json.loads((tree / "mutants" / f"{module}.meta").read_text())
    info = json.loads((tree / "mutmut_run.json").read_text())
    path = RESULTS / f"{_slug(module)}.json"
    data = json.loads(path.read_text()) if path.exists() else {"runs": [], "mutants": {}}
    label = f"run{len(data['runs']) + 1}"
    new = _current(module, tree)
    pairs = _pairs(data["mutants"], new)
    mutants = {}
    for name, code in meta["exit_code_by_key"].items():
        e = dict(data["mutants"][pairs[name]]) if name in pairs else {}
        e["diff"] = new[name][1]
        e[label] = _status(code)
        mutants[name] = e
    dropped = len(data["mutants"]) - len(set(pairs.values()))
    data["mutants"] = mutants
    data["runs"].append({
        "label": label, "source": source, "mutmut": getattr(mutmut, "__version__", "?"),
        "tests": info["tests"], "patterns": info["patterns"], "cap_s": info["cap_s"],
        "wall_s": info["wall_s"], "rc": info["rc"], "started": info["started"],
        "timeout_multiplier": info.get("timeout_multiplier", 10),
        "left": info.get("left", []), "dropped": dropped,
        "new_mutants": sum(1 for n in new if n not in pairs) if data["runs"] else 0})
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
        if r.get("left"):
            pats = (f"; {len(r['patterns'])} mutants: those the runs before left "
                    f"({', '.join(r['left'])}) and those of changed code")
        elif len(r["patterns"]) > 3:
            pats = f"; {len(r['patterns'])} named mutants (the survivors of the runs before)"
        else:
            pats = f"; patterns {' '.join(r['patterns'])}" if r["patterns"] else ""
        if r.get("dropped") or r.get("new_mutants"):
            pats += (f"; source changed: {r.get('new_mutants', 0)} new mutants, "
                     f"{r.get('dropped', 0)} recorded ones gone")
        out.append(f"- **{r['label']}**: source {r['source']}; mutmut {r['mutmut']}; started "
                   f"{r['started']}, {r['wall_s']:.0f} s wall, cap {r['cap_s']} s{stopped}, "
                   f"timeout_multiplier {r.get('timeout_multiplier', 10):g}"
                   f"{pats}; tests " + ", ".join(f"`{t}`" for t in r["tests"]))
    out += ["", "\"killed\" counts mutmut's timeouts too; a mutant killed in any run is "
            "killed; \"not run\": the cap stopped the run first (mutmut runs the mutants with "
            "the cheapest tests first). The record is keyed by the latest run's mutant names; "
            "an earlier verdict is kept for the mutant with the same function and diff (numbers "
            "move when the source changes; mutants of code changed in between are new).", "",
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
        late = LATE.get((module, _function(n)))
        by[TRIAGE.get((module, _function(n), mutants[n]["diff"]),
                      ("later-code" if late else "UNTRIAGED", ""))[0]].append(n)
    out += ["", f"## Survivors ({len(left)}), by reason", ""]
    for reason in [*REASONS, "UNTRIAGED"]:
        if not by.get(reason):
            continue
        out += [f"### {reason} ({len(by[reason])})", "",
                REASONS.get(reason, "no reason recorded yet"), ""]
        for n in by[reason]:
            note = TRIAGE.get((module, _function(n), mutants[n]["diff"]),
                              ("", LATE.get((module, _function(n)), "")))[1]
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
    sub.choices["run"].add_argument("--timeout-multiplier", type=float, default=10,
                                    help="mutmut's timeout_multiplier (a hanging mutant "
                                         "costs about this many times its tests' time)")
    sub.choices["run"].add_argument("--unfinished", action="store_true",
                                    help="with --survivors: also the mutants no run reached")
    sub.choices["collect"].add_argument("--source", required=True)
    a = ap.parse_args(argv)
    if a.cmd == "report":
        return report(a.module)
    tree = a.tree or Path("/tmp") / _slug(a.module).replace("_", "-", 1)
    if a.cmd == "run":
        left = (("survived", "no tests") + (("not checked",) if a.unfinished else ())
                if a.survivors else ())
        return run(a.module, tree, a.cap, list(a.patterns), a.timeout_multiplier, left)
    return collect(a.module, tree, a.source)


if __name__ == "__main__":
    sys.exit(main())
