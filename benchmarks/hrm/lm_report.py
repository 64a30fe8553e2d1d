"""Tables of the SmolLM2 study (``lm_study``) from its cell files: results.md and results.json.

Every number in the tables is read from the cell JSON files written by the runs; the
bootstrap intervals are recomputed from the per-window NLL sums stored there.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

LORA_ARMS = ("lora_qv", "lora_mlp")


def _fmt(x: float, d: int = 4) -> str:
    return "—" if x is None or (isinstance(x, float) and not math.isfinite(x)) else f"{x:.{d}f}"


def _ci(c: dict) -> str:
    return f"{c['diff']:+.4f} [{c['lo']:+.4f}, {c['hi']:+.4f}]"


def write(study, frozen: dict, chosen: dict, check: dict, *, seeds: int, env: dict,
          params: dict, paired_ci) -> dict:
    """Collect the cells of ``study``, compute the comparisons, write results.md/.json.

    ``params`` holds each arm's trainable-parameter count (and LoRA ranks), ``paired_ci`` is
    :func:`benchmarks.hrm.lm_study.paired_ci`.
    """
    budget = study.budget
    arms = list(chosen)
    pilots = {}
    for arm in arms:
        rows = []
        for p in (study.results / "cells").glob(f"pilot-{arm}-lr*-s0-*.json"):
            c = json.loads(p.read_text())
            if c["config"] == study.cell_config(arm, c["config"]["lr"], 0, "pilot"):
                rows.append({"lr": c["config"]["lr"], "dev_bpc": c["dev"]["bpc"]})
        pilots[arm] = sorted(rows, key=lambda r: r["lr"])
    runs = {}  # (arm, seed) -> main cell, for the cells on disk (nothing is trained here)
    for arm in arms:
        for s in range(seeds):
            p = study._cell_path(study.cell_config(arm, chosen[arm], s))
            if p.exists():
                runs[arm, s] = json.loads(p.read_text())
    ft = frozen["test"]
    per_seed = []
    for s in range(seeds):
        row = {"seed": s}
        for arm in arms:
            if (arm, s) in runs:
                t = runs[arm, s]["test"]
                row[arm] = {k: t[k] for k in ("bpc", "bpc_early", "bpc_late")}
        if ("hrm", s) in runs:
            hrm = runs["hrm", s]["test"]
            comps = {}
            for other in arms:
                if other == "hrm" or (other, s) not in runs:
                    continue
                o = runs[other, s]["test"]
                comps[other] = {part: paired_ci(hrm, o, part, seed=s)
                                for part in ("all", "early", "late")}
            comps["frozen"] = {part: paired_ci(hrm, ft, part, seed=s)
                               for part in ("all", "early", "late")}
            row["hrm_minus"] = comps
        per_seed.append(row)

    # A win needs every seed of every arm; a seed on which HRM does not beat the best LoRA arm
    # makes the result null whatever the missing cells would say.
    verdict, missing = None, [f"{a} seed {s}" for a in ("hrm", "stateless", *LORA_ARMS)
                              for s in range(seeds) if (a, s) not in runs]
    wins = []
    for row in per_seed:
        c = row.get("hrm_minus", {})
        loras = [a for a in LORA_ARMS if a in c]
        if len(loras) == len(LORA_ARMS):
            best_lora = min(LORA_ARMS, key=lambda a: row[a]["bpc"])
            beat_lora = c[best_lora]["all"]["hi"] < 0
            wins.append(beat_lora and ("stateless" not in c or c["stateless"]["all"]["hi"] < 0))
            if not beat_lora:
                verdict = "null"
    if verdict is None and not missing and seeds >= 2:
        verdict = "win" if all(wins) else "null"

    reductions = []
    for s in range(seeds):
        cfg = {**study.cell_config("hrm", chosen.get("hrm", 0.0), s), "arm": "hrm_reduced"}
        p = study._cell_path(cfg)
        if "hrm" in arms and p.exists():
            r = json.loads(p.read_text())
            reductions.append({
                "seed": s, "orders": r["orders"], "params_before": r["params_before"],
                "params_after": r["params_after"], "bpc_full": r["test_full"]["bpc"],
                "bpc_reduced": r["test_reduced"]["bpc"], "bpc_phase2": r["test_phase2"]["bpc"],
                "bpc_late_full": r["test_full"]["bpc_late"],
                "bpc_late_phase2": r["test_phase2"]["bpc_late"],
                "bounds": {lay["name"]: [lay["lower_bound"], lay["upper_bound"]]
                           for lay in r["reduction"]["layers"]},
                "seconds": r["calibrate_reduce_seconds"]})

    out = {"budget": {k: getattr(budget, k) for k in budget.__dataclass_fields__},
           "code": study.version, "cache_check": check, "env": env,
           "windows": {k: len(w) for k, w in study.win.items()},
           "chars": {k: int(w.chars[:, 1:].sum()) for k, w in study.win.items()},
           "frozen": {split: {k: frozen[split][k] for k in ("bpc", "bpc_early", "bpc_late")}
                      for split in ("dev", "test")},
           "params": params, "chosen_lr": chosen, "pilots": pilots, "per_seed": per_seed,
           "reductions": reductions, "verdict": verdict, "missing": missing,
           "train_seconds": {f"{a}/seed{s}": r["train"]["seconds"] for (a, s), r in runs.items()}}
    study.results.mkdir(parents=True, exist_ok=True)
    (study.results / "results.json").write_text(json.dumps(out, indent=1))
    (study.results / "results.md").write_text(markdown(out))
    return out


def markdown(r: dict) -> str:
    b = r["budget"]
    lines = [
        "# Task B: HRM vs iso-parameter LoRA on frozen SmolLM2-135M (pydoc text)",
        "",
        f"Written by `{r['env'].get('driver', 'python -m benchmarks.hrm.lm_study')}` from the "
        f"cell files in `cells/` (code version `{r['code']}`).",
        "",
        f"Adapters in the top {b['n_top']} of 30 blocks; {b['steps']} steps x {b['batch']} "
        f"windows of {b['seq_len']} tokens, warm-up {b['warmup_frac']:.0%} + cosine; "
        f"windows train (cached, sampled from)/dev/test = {r['windows']['train']}/"
        f"{r['windows']['dev']}/"
        f"{r['windows']['test']} (test: {r['chars']['test']} predicted characters). "
        f"Learning rates chosen by {b['pilot_steps']}-step pilots (seed 0) on "
        f"{r['windows']['dev']} dev windows; BPC below is on the test split.",
        "",
        f"Hidden-state cache vs full forward (2 test windows): max |Δlogit| = "
        f"{r['cache_check']['max_abs_diff']:.3g} (identical: {r['cache_check']['identical']}).",
        "",
        "## Parameters and learning rates",
        "",
        "| arm | trainable parameters | dev BPC per learning rate (seed 0) | chosen |",
        "|---|---|---|---|",
    ]
    for arm, rows in r["pilots"].items():
        grid = ", ".join(f"{x['lr']:g}: {_fmt(x['dev_bpc'])}" for x in rows)
        name = arm + (f" (r = {r['params'][arm + '_rank']})" if arm + "_rank" in r["params"]
                      else "")
        lines.append(f"| {name} | {r['params'][arm]:,} | {grid} | {r['chosen_lr'][arm]:g} |")
    f = r["frozen"]["test"]
    lines += ["", "## Test BPC", "",
              f"Frozen model: {_fmt(f['bpc'])} (positions < 128: {_fmt(f['bpc_early'])}, "
              f">= 128: {_fmt(f['bpc_late'])}).", "",
              "| seed | arm | BPC | BPC < 128 | BPC >= 128 |", "|---|---|---|---|---|"]
    for row in r["per_seed"]:
        for arm in r["chosen_lr"]:
            if arm not in row:
                continue
            t = row[arm]
            lines.append(f"| {row['seed']} | {arm} | {_fmt(t['bpc'])} | "
                         f"{_fmt(t['bpc_early'])} | {_fmt(t['bpc_late'])} |")
    if any("hrm_minus" in row for row in r["per_seed"]):
        lines += ["", "## HRM minus other arms (paired bootstrap over test windows, 95 %)", "",
                  "Negative = HRM better.", "",
                  "| seed | vs | all positions | < 128 | >= 128 |", "|---|---|---|---|---|"]
        for row in r["per_seed"]:
            for other, c in row.get("hrm_minus", {}).items():
                lines.append(f"| {row['seed']} | {other} | {_ci(c['all'])} | "
                             f"{_ci(c['early'])} | {_ci(c['late'])} |")
    if r["reductions"]:
        lines += ["", f"## HRM: calibrate -> reduce (rel_tol {b['rel_tol']}) -> phase 2 "
                  f"({b['phase2_steps']} steps)", "",
                  "| seed | orders (per layer) | parameters | BPC full | reduced | phase 2 | "
                  "BPC >= 128 full / phase 2 |", "|---|---|---|---|---|---|---|"]
        for x in r["reductions"]:
            orders = ", ".join(str(v[1]) for v in x["orders"].values())
            lines.append(f"| {x['seed']} | {orders} (of 32) | {x['params_before']:,} -> "
                         f"{x['params_after']:,} | {_fmt(x['bpc_full'])} | "
                         f"{_fmt(x['bpc_reduced'])} | {_fmt(x['bpc_phase2'])} | "
                         f"{_fmt(x['bpc_late_full'])} / {_fmt(x['bpc_late_phase2'])} |")
    lines += ["", "## Verdict", "",
              "A win needs HRM below the best LoRA arm (per seed, by test BPC) and below "
              "stateless HRM with the paired 95 % interval of the difference entirely "
              f"below 0 on every seed. Result: **{r['verdict'] or 'not decided'}**."]
    if r["missing"]:
        lines += ["", "Not run (out of time on the shared CPU): " + ", ".join(r["missing"]) + "."]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    """``python -m benchmarks.hrm.lm_report [results.json]``: rewrite results.md from the JSON."""
    import sys

    from .lm_study import RESULTS

    args = sys.argv[1:] if argv is None else argv
    path = Path(args[0]) if args else RESULTS / "results.json"
    path.with_suffix(".md").write_text(markdown(json.loads(path.read_text())))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
