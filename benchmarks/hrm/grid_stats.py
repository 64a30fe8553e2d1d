"""Re-read the committed tiny-backbone task grid with the right references and statistics.

Reads the cell files of the latest grid (``benchmarks/results/cells/<version>/``, written by
``benchmarks/bench_tasks.py``; nothing is re-run) and the exact Bayes ladder
(``benchmarks/results/dfa_bayes.json``, :mod:`benchmarks.hrm.dfa_bayes`), and writes
``benchmarks/results/grid_stats.md`` / ``.json``: per cell the mean test accuracy of each
method, HRM - LoRA with a paired t-test over the seeds (``scipy.stats.ttest_rel``; with 3 seeds
a difference is "significant" only when p < 0.05), and where the methods stand against the
majority class and the Bayes ladder (table only, m = 0; table + last bit, m = 1).
"""

from __future__ import annotations

import argparse
import json
from collections import defaultdict
from pathlib import Path

import numpy as np

RESULTS = Path(__file__).resolve().parents[1] / "results"
GRID_VERSION = "7404b76193a4"  # the full 33-cell grid cited by the README


def collect(cells: Path) -> dict:
    groups: dict = defaultdict(list)
    for p in sorted(cells.glob("*.json")):
        c = json.loads(p.read_text())
        key = (c["task"], c.get("k"), c["T"])
        groups[key].append(c)
    return groups


def summarise(groups: dict, bayes: list[dict]) -> list[dict]:
    from scipy.stats import ttest_rel

    ladder = {(r["k"], r["T"]): r for r in bayes}
    rows = []
    for (task, k, T), cells in sorted(groups.items(), key=lambda kv: (kv[0][0], kv[0][1] or 0,
                                                                       kv[0][2])):
        cells = sorted(cells, key=lambda c: c["seed"])
        sc = {m: np.array([c["scores"][m] for c in cells]) for m in ("lora", "hrm", "hrm_bt")}
        maj = float(np.mean([c["baselines"]["majority"] for c in cells]))
        diff = sc["hrm"] - sc["lora"]
        if np.allclose(diff, diff[0]):
            p = float("nan")  # no variation (all at the majority class, say)
        else:
            p = float(ttest_rel(sc["hrm"], sc["lora"]).pvalue)
        row = {"task": task, "k": k, "T": T, "seeds": len(cells), "majority": maj,
               "lora": float(sc["lora"].mean()), "hrm": float(sc["hrm"].mean()),
               "hrm_bt": float(sc["hrm_bt"].mean()),
               "hrm_minus_lora": float(diff.mean()), "paired_t_p": p,
               "below_majority": {m: bool(sc[m].mean() < maj - 1e-9) for m in sc}}
        if task == "dfa" and (k, T) in ladder:
            row["bayes_m0"] = ladder[(k, T)]["m=0"]
            row["bayes_m1"] = ladder[(k, T)]["m=1"]
        rows.append(row)
    return rows


def markdown(rows: list[dict]) -> str:
    lines = ["# The tiny-backbone task grid, re-read (no re-run)", "",
             "Written by `python -m benchmarks.hrm.grid_stats` from the committed cells "
             f"`benchmarks/results/cells/{GRID_VERSION}/` and the exact Bayes ladder "
             "`benchmarks/results/dfa_bayes.json`. Mean test accuracy over the seeds; p: paired "
             "t-test of HRM vs LoRA over the seeds; Bayes m = 0: knows the table, ignores the "
             "bits; m = 1: table + last bit (expected values, exact; the test sets have 1,000 "
             "samples, so ±0.013 sampling error).", "",
             "| task | T | seeds | majority | Bayes m=0 | Bayes m=1 | LoRA | HRM | HRM-BT | "
             "HRM - LoRA | p |", "|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        name = f"DFA k={r['k']}" if r["task"] == "dfa" else r["task"]
        b0 = f"{r['bayes_m0']:.3f}" if "bayes_m0" in r else "–"
        b1 = f"{r['bayes_m1']:.3f}" if "bayes_m1" in r else "–"
        p = "–" if r["paired_t_p"] != r["paired_t_p"] else f"{r['paired_t_p']:.2f}"
        lines.append(f"| {name} | {r['T']} | {r['seeds']} | {r['majority']:.3f} | {b0} | {b1} | "
                     f"{r['lora']:.3f} | {r['hrm']:.3f} | {r['hrm_bt']:.3f} | "
                     f"{r['hrm_minus_lora']:+.3f} | {p} |")
    below = [f"{r['task']} T={r['T']}" for r in rows
             if r["task"] == "parity" and any(r["below_majority"].values())]
    sig = [r for r in rows if r["paired_t_p"] == r["paired_t_p"] and r["paired_t_p"] < 0.05]
    sig_names = ", ".join(f"{x['task']} k={x['k']} T={x['T']}" for x in sig) or "none"
    lines += ["", f"- Cells where HRM - LoRA is significant at p < 0.05 (paired t, 3 seeds): "
              f"{sig_names}.",
              f"- Parity cells where a method is below the majority class: "
              f"{', '.join(below) or 'none'}."]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--cells", type=Path, default=RESULTS / "cells" / GRID_VERSION)
    p.add_argument("--out", type=Path, default=RESULTS)
    args = p.parse_args(argv)
    bayes = json.loads((RESULTS / "dfa_bayes.json").read_text())
    rows = summarise(collect(args.cells), bayes)
    (args.out / "grid_stats.json").write_text(json.dumps(rows, indent=1))
    text = markdown(rows)
    (args.out / "grid_stats.md").write_text(text)
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
