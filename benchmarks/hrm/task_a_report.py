"""Tables of Task A (:mod:`benchmarks.hrm.task_a`) from its cell files: results.md and .json.

Every number is read from the cell JSON files written by the runs (nothing is trained here);
the bootstrap intervals are recomputed from the per-sample values stored in the cells.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np

LORA_ARMS = ("lora_attn", "lora_mlp")
PROTOCOL_STEPS = 1200  # issue 18: >= 1,200 steps x 16 samples
_DFA_BAYES = Path(__file__).resolve().parents[1] / "results" / "dfa_bayes.json"


def _fmt(x, d: int = 4) -> str:
    return "—" if x is None or (isinstance(x, float) and not math.isfinite(x)) else f"{x:.{d}f}"


def _ci(c: dict) -> str:
    return f"{c['diff']:+.4f} [{c['lo']:+.4f}, {c['hi']:+.4f}]"


def exact_ladder(k: int, T: int) -> dict:  # noqa: N803 - the paper's name
    """The exact Bayes ladder: from the committed ``dfa_bayes.json`` if it has (k, T)."""
    if _DFA_BAYES.exists():
        for row in json.loads(_DFA_BAYES.read_text()):
            if row["k"] == k and row["T"] == T:
                return {**row, "source": "benchmarks/results/dfa_bayes.json"}
    from benchmarks.hrm.dfa_bayes import ladder

    return {"k": k, "T": T, **ladder(k, T), "source": "benchmarks.hrm.dfa_bayes.ladder"}


def _stratum(values: list[float], decided: np.ndarray) -> float:
    v = np.asarray(values, dtype=float)[~decided]
    return float(v.mean()) if v.size else float("nan")


def write(study, gate: dict, chosen: dict, grids: dict, *, seeds: int, arms, env: dict) -> dict:
    """Collect the cells of ``study``, compute the comparisons, write results.md/.json."""
    from benchmarks.hrm.task_a import LADDER, TEST_SEED, paired_ci, parameters

    b = study.budget
    out: dict = {"budget": {k: getattr(b, k) for k in b.__dataclass_fields__},
                 "code": study.version, "env": env, "gate": gate, "verdict": None,
                 "chosen_lr": dict(chosen), "grids": dict(grids)}
    if not gate["passed"]:
        out["verdict"] = "not meaningful: the backbone failed the gate"
        return _save(study, out)

    out["params"] = parameters(study.model, b)
    pilots = {}
    for arm in chosen:
        rows = []
        for lr in grids[arm]:
            p = study.cell_path(study.cell_config(arm, lr, 0, "pilot"))
            if p.exists():
                c = json.loads(p.read_text())
                rows.append({"lr": lr, "val_log_loss": c["val"]["log_loss"],
                             "val_accuracy": c["val"]["accuracy"]})
        pilots[arm] = rows
    out["pilots"] = pilots
    out["lr_at_edge"] = {arm: chosen[arm] in (min(grids[arm]), max(grids[arm]))
                         for arm in chosen}

    bayes = study.bayes()
    decided = np.asarray(bayes["decided_by_8"], dtype=bool)
    out["test"] = {"n": len(decided), "n_not_decided_by_8": int((~decided).sum()),
                   "seed": TEST_SEED}
    out["bayes_exact"] = exact_ladder(b.k, b.T)
    out["bayes_test"] = {f"m={m}": {
        "accuracy": float(np.mean(bayes[f"m={m}"]["correct"])),
        "log_loss": float(np.mean(bayes[f"m={m}"]["nll"])),
        "accuracy_not_decided_by_8": _stratum(bayes[f"m={m}"]["correct"], decided)}
        for m in LADDER}
    answers = np.asarray(study.test.input_ids[:, -1])
    out["bayes_test"]["majority"] = float(np.bincount(answers).max() / len(answers))

    runs = {}
    for arm in chosen:
        for s in range(seeds):
            p = study.cell_path(study.cell_config(arm, chosen[arm], s, "main"))
            if p.exists():
                runs[arm, s] = json.loads(p.read_text())
    per_seed = []
    for s in range(seeds):
        row: dict = {"seed": s}
        for arm in chosen:
            if (arm, s) in runs:
                t = runs[arm, s]["test"]
                row[arm] = {"accuracy": t["accuracy"], "log_loss": t["log_loss"],
                            "accuracy_not_decided_by_8": _stratum(t["correct"], decided),
                            "train_seconds": runs[arm, s]["train"]["seconds"],
                            "final_train_loss": float(np.mean(runs[arm, s]["train"]["losses"]
                                                              [-50:]))}
        if ("hrm", s) in runs:
            h = runs["hrm", s]["test"]
            comps = {}
            for other in chosen:
                if other == "hrm" or (other, s) not in runs:
                    continue
                o = runs[other, s]["test"]
                keep = [i for i, d in enumerate(decided) if not d]
                comps[other] = {
                    "accuracy": paired_ci(h["correct"], o["correct"], seed=s),
                    "log_loss": paired_ci(h["nll"], o["nll"], seed=s),
                    "accuracy_not_decided_by_8": paired_ci(
                        [h["correct"][i] for i in keep], [o["correct"][i] for i in keep],
                        seed=s)}
            row["hrm_minus"] = comps
        per_seed.append(row)
    out["per_seed"] = per_seed
    out["mean_over_seeds"] = {
        arm: {key: float(np.mean([r[arm][key] for r in per_seed if arm in r]))
              for key in ("accuracy", "log_loss", "accuracy_not_decided_by_8")}
        for arm in chosen if any(arm in r for r in per_seed)}

    missing = [f"{a} seed {s}" for a in arms for s in range(seeds) if (a, s) not in runs]
    out["missing"] = missing
    verdict = None
    wins = []
    for row in per_seed:
        c = row.get("hrm_minus", {})
        if all(a in c for a in LORA_ARMS):
            best = max(LORA_ARMS, key=lambda a: row[a]["accuracy"])
            beat_lora = c[best]["accuracy"]["lo"] > 0
            beat_stateless = "stateless" in c and c["stateless"]["accuracy"]["lo"] > 0
            wins.append(beat_lora and beat_stateless)
            if not beat_lora or ("stateless" in c and not beat_stateless):
                verdict = "null"
    if verdict is None and not missing and seeds >= 1:
        verdict = "win" if wins and all(wins) else "null"
    out["verdict"] = verdict
    return _save(study, out)


def _save(study, out: dict) -> dict:
    study.results.mkdir(parents=True, exist_ok=True)
    (study.results / "results.json").write_text(json.dumps(out, indent=1) + "\n")
    (study.results / "results.md").write_text(markdown(out))
    return out


def markdown(r: dict) -> str:
    """The report of :func:`write` as markdown."""
    b, g = r["budget"], r["gate"]
    bb = g["backbone"]
    cfg, pre = bb["config"], bb["pretraining"]
    lines = [
        f"# Task A: in-context DFA (k = {b['k']}, T = {b['T']}) on the tiny frozen character "
        "backbone",
        "",
        f"Written by `{r['env'].get('driver', 'python -m benchmarks.hrm.task_a')}` from the "
        f"cell files in `cells/` (code version `{r['code']}`; {r['env']['threads']} torch "
        f"thread; BLAS: {r['env'].get('blas', 'not pinned')}).",
        "",
        "## Backbone gate",
        "",
        f"Tiny GPT-2 ({cfg['n_layer']} layers, {cfg['n_head']} heads, width {cfg['n_embd']}, "
        f"context {cfg['n_positions']}, {pre['n_params']:,} parameters), pretrained "
        f"{cfg['steps']} steps x {cfg['batch_size']} rows (copying rows: "
        f"{cfg.get('copy_mix', 0):.0%}, task-format rows: {cfg['task_mix']:.0%}, the rest "
        f"text), {pre['seconds']:.0f} s of pretraining. Validation: the whole held-out text "
        f"split ({g['val_characters']:,} predicted characters); induction: "
        f"{g['induction_strings']:,} random {g['induction_length']}-character strings, "
        "repeated once, accuracy on all characters of the second copy (argmax over the whole "
        "vocabulary).",
        "",
        "| model | validation BPC | induction accuracy |",
        "|---|---|---|",
        f"| frozen backbone | {_fmt(g['model']['val_bpc'])} | "
        f"{_fmt(g['model']['induction_accuracy'])} |",
        f"| add-one bigram (training text) | {_fmt(g['bigram']['val_bpc'])} | "
        f"{_fmt(g['bigram']['induction_accuracy'])} |",
        f"| gate | <= {g['thresholds']['val_bpc']} | >= {g['thresholds']['induction_accuracy']} |",
        "",
        f"Gate: **{'passed' if g['passed'] else 'failed'}**.",
    ]
    if not g["passed"]:
        lines += ["", "Task A is not meaningful on this backbone: the DFA study was not run."]
        return "\n".join(lines) + "\n"
    p = r["params"]
    lines += ["", "## Arms, parameters and learning rates", "",
              f"{b['steps']} steps x {b['batch']} samples (pilots: {b['pilot_steps']} steps, "
              f"seed 0, scored on {b['n_val']:,} validation samples by log-loss), warm-up "
              f"{b['warmup_frac']:.0%} + cosine, loss on the answer token only.", "",
              "| arm | trainable parameters | validation log-loss (accuracy) per learning rate | "
              "chosen |", "|---|---|---|---|"]
    if b["steps"] < PROTOCOL_STEPS:
        lines[-2:-2] = [f"Departure from the protocol: {b['steps']} steps per run instead of "
                        f">= {PROTOCOL_STEPS:,} (what fitted the shared CPU for all arms and "
                        "seeds before the deadline), the same for every arm and seed.", ""]
    names = {"hrm": f"HRM N = {b['d_state']}", "stateless": "stateless HRM (a = 0)",
             "lora_attn": "LoRA attn.c_attn", "lora_mlp": "LoRA mlp.c_fc + mlp.c_proj"}
    for arm, rows in r.get("pilots", {}).items():
        grid = ", ".join(f"{x['lr']:g}: {_fmt(x['val_log_loss'])} ({_fmt(x['val_accuracy'], 3)})"
                         for x in rows)
        rank = f" (r = {p[arm + '_rank']})" if arm + "_rank" in p else ""
        edge = " (edge of the grid)" if r["lr_at_edge"][arm] else ""
        lines.append(f"| {names[arm]}{rank} | {p[arm]:,} | {grid} | "
                     f"{r['chosen_lr'][arm]:g}{edge} |")
    if "bayes_test" not in r:
        return "\n".join(lines) + "\n"
    ex, bt, t = r["bayes_exact"], r["bayes_test"], r["test"]
    lines += ["", "## Bayes ladder", "",
              f"Exact (all tables, all bit strings; {ex['source']}) and on this test set "
              f"({t['n']:,} samples; {t['n_not_decided_by_8']:,} not decided by the last 8 "
              "bits).", "",
              "| predictor | exact accuracy | test accuracy | test log-loss | test accuracy, "
              "not decided by the last 8 bits |", "|---|---|---|---|---|",
              f"| majority class | {_fmt(ex['majority'])} | {_fmt(bt['majority'])} | — | — |"]
    for key in (k for k in bt if k.startswith("m=")):
        row = bt[key]
        label = "table only" if key == "m=0" else f"table + last {key[2:]} bits"
        lines.append(f"| Bayes {key} ({label}) | {_fmt(ex[key])} | {_fmt(row['accuracy'])} | "
                     f"{_fmt(row['log_loss'])} | {_fmt(row['accuracy_not_decided_by_8'])} |")
    lines += ["", "## Test results", "",
              "| seed | arm | accuracy | log-loss | accuracy, not decided by the last 8 bits | "
              "training loss, last 50 steps (nats, whole vocabulary) |",
              "|---|---|---|---|---|---|"]
    for row in r["per_seed"]:
        for arm in r["chosen_lr"]:
            if arm in row:
                x = row[arm]
                lines.append(f"| {row['seed']} | {arm} | {_fmt(x['accuracy'])} | "
                             f"{_fmt(x['log_loss'])} | {_fmt(x['accuracy_not_decided_by_8'])} | "
                             f"{_fmt(x['final_train_loss'])} |")
    if r["mean_over_seeds"]:
        lines += ["", "Mean over seeds:", "", "| arm | accuracy | log-loss | accuracy, not "
                  "decided by the last 8 bits |", "|---|---|---|---|"]
        for arm, x in r["mean_over_seeds"].items():
            lines.append(f"| {arm} | {_fmt(x['accuracy'])} | {_fmt(x['log_loss'])} | "
                         f"{_fmt(x['accuracy_not_decided_by_8'])} |")
    if any("hrm_minus" in row for row in r["per_seed"]):
        lines += ["", "## HRM minus other arms (paired bootstrap over test samples, 95 %)", "",
                  "Accuracy: positive = HRM better; log-loss: negative = HRM better.", "",
                  "| seed | vs | accuracy | log-loss | accuracy, not decided by the last 8 bits |",
                  "|---|---|---|---|---|"]
        for row in r["per_seed"]:
            for other, c in row.get("hrm_minus", {}).items():
                lines.append(f"| {row['seed']} | {other} | {_ci(c['accuracy'])} | "
                             f"{_ci(c['log_loss'])} | {_ci(c['accuracy_not_decided_by_8'])} |")
    lines += ["", "## Verdict", "",
              "A win needs HRM's test accuracy above the best LoRA arm's and above stateless "
              "HRM's, with the paired 95 % interval of each difference entirely above 0, on "
              f"every seed. Result: **{r['verdict'] or 'not decided'}**."]
    if r.get("missing"):
        lines += ["", "Not run: " + ", ".join(r["missing"]) + "."]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    """``python -m benchmarks.hrm.task_a_report [results.json]``: rewrite results.md."""
    import sys

    from benchmarks.hrm.task_a import RESULTS

    args = sys.argv[1:] if argv is None else argv
    path = Path(args[0]) if args else RESULTS / "results.json"
    path.with_suffix(".md").write_text(markdown(json.loads(path.read_text())))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
