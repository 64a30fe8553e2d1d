"""Choose the adapters' learning rate and schedule on a validation split, never on a test set.

The task grid (``bench_tasks.py``) trains every method once per cell with fixed settings and
scores it once on the paired test set. Those settings are chosen here, beforehand, on one
cheap selection cell (DFA with k = 2, T = 16 by default) with a validation set drawn from its
own seed (``--val-seed``, disjoint from the grid's test seed 10 000 and from every training
stream): each method (HRM N = 32, iso-parameter peft LoRA) is trained with every peak
learning rate in ``--lrs`` and both schedules (cosine to 0.1 of the peak, or constant, each
after a 10 % warm-up), with the grid's batch size and step budget, and scored on the
validation set. Each method gets its own best setting: highest validation accuracy, ties
(equal to 3 decimals) broken by the lower validation loss, then by the smaller rate.

Usage::

    python benchmarks/select_lr.py                       # writes results/select_lr.md and .json
    python benchmarks/select_lr.py --methods hrm --lrs 1e-2

Threads are pinned (``--threads``, default 1) and printed.
"""

from __future__ import annotations

import argparse
import copy
import dataclasses
import json
import math
import shlex
import sys
import time
from pathlib import Path

import torch
from threadpoolctl import threadpool_limits

# Run as a script: the harness package ``benchmarks.hrm`` and the grid's preset are imported
# from the repository root, which is not installed.
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.bench_tasks import GRID_PRESET  # noqa: E402
from benchmarks.hrm.presets import TEST_SEED  # noqa: E402

SCHEDULES = {"cosine": 0.1, "constant": 1.0}  # name -> min_lr_ratio


def run(args) -> list[dict]:
    from adapters import HRMConfig, inject
    from benchmarks.hrm.experiment import RemappedBatches, load_backbone, task_data
    from benchmarks.hrm.lora import iso_parameter_lora_rank, make_lora_model
    from benchmarks.hrm.train import evaluate_accuracy, evaluate_bpc, train

    preset = dataclasses.replace(GRID_PRESET, steps=args.steps, batch_size=args.batch_size)
    base, _, table = load_backbone(preset, "tiny", False, args.encoding)
    data = task_data(args.task, k=args.k, length=args.T, n_test=args.n_val,
                      test_seed=args.val_seed)
    val = data.test if table is None else list(RemappedBatches(data.test, table))
    candidates = (data.candidates if table is None
                  else tuple(int(table[c]) for c in data.candidates))
    config = HRMConfig(d_state=preset.state_size)
    rank = iso_parameter_lora_rank(base, config)
    rows = []
    for method in args.methods:
        for lr in args.lrs:
            for schedule in args.schedules:
                torch.manual_seed(args.seed)
                model = (inject(copy.deepcopy(base), config) if method == "hrm"
                         else make_lora_model(copy.deepcopy(base), rank, config=config))
                stream = data.stream(args.batch_size, args.seed)
                if table is not None:
                    stream = iter(RemappedBatches(stream, table))
                tick = time.process_time()
                h = train(model, stream, steps=args.steps, lr=lr,
                          warmup_steps=max(1, args.steps // 10),
                          min_lr_ratio=SCHEDULES[schedule], seed=args.seed, progress=False)
                row = {"method": method, "lr": lr, "schedule": schedule,
                       "val_accuracy": evaluate_accuracy(model, val, candidates=candidates),
                       # mean cross-entropy in nats over the answers (bpc is the same in bits)
                       "val_loss": evaluate_bpc(model, val) * math.log(2),
                       "last_train_loss": sum(h.losses[-20:]) / 20,
                       "cpu_seconds": time.process_time() - tick}
                rows.append(row)
                print(f"{method:4s} lr={lr:<7g} {schedule:8s} val acc {row['val_accuracy']:.3f} "
                      f"val loss {row['val_loss']:.4f} ({row['cpu_seconds']:.0f} s CPU)",
                      flush=True)
    return rows, data.baselines


def choose(rows: list[dict]) -> dict[str, dict]:
    best = {}
    for method in sorted({r["method"] for r in rows}):
        mine = [r for r in rows if r["method"] == method]
        best[method] = min(mine, key=lambda r: (-round(r["val_accuracy"], 3), r["val_loss"],
                                                r["lr"]))
    return best


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--task", choices=("dfa", "parity"), default="dfa")
    parser.add_argument("--k", type=int, default=2)
    parser.add_argument("--T", type=int, default=16, dest="T")
    parser.add_argument("--methods", nargs="+", choices=("hrm", "lora"), default=["hrm", "lora"])
    parser.add_argument("--lrs", nargs="+", type=float, default=[3e-3, 1e-2, 3e-2])
    parser.add_argument("--schedules", nargs="+", choices=sorted(SCHEDULES),
                        default=["cosine", "constant"])
    parser.add_argument("--steps", type=int, default=GRID_PRESET.steps)
    parser.add_argument("--batch-size", type=int, default=GRID_PRESET.batch_size)
    parser.add_argument("--encoding", choices=("chars", "ids"), default="chars")
    parser.add_argument("--n-val", type=int, default=1000)
    parser.add_argument("--val-seed", type=int, default=20_000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--out", default=str(Path(__file__).parent / "results"))
    parser.add_argument("--merge", nargs="+", default=None, metavar="JSON",
                        help="write the table from select_lr.json files of runs on disjoint "
                             "--methods (e.g. run in parallel processes) instead of training")
    args = parser.parse_args(argv)
    if args.val_seed == TEST_SEED:
        parser.error(f"--val-seed must differ from the grid's test seed {TEST_SEED}")

    if args.merge:
        parts = [json.loads(Path(f).read_text()) for f in args.merge]
        rows = [r for p in parts for r in p["rows"]]
        baselines = parts[0]["baselines"]
        for name in ("task", "k", "T", "steps", "batch_size", "encoding", "n_val", "val_seed",
                     "seed", "threads"):
            values = {p["args"][name] for p in parts}
            if len(values) > 1:
                parser.error(f"--merge: the runs differ in {name}: {sorted(values)}")
            setattr(args, name, values.pop())
        methods = [m for p in parts for m in p["args"]["methods"]]
        command = ("python benchmarks/select_lr.py --methods " + " ".join(methods)
                   + "  (run as one process per method, then --merge)")
    else:
        torch.set_num_threads(args.threads)
        print(f"threads: torch {torch.get_num_threads()}, BLAS {args.threads} (threadpoolctl)")
        with threadpool_limits(limits=args.threads):
            rows, baselines = run(args)
        command = "python benchmarks/select_lr.py " + shlex.join(argv or sys.argv[1:])
    best = choose(rows)
    lines = [
        "# Learning-rate selection on a validation split",
        "",
        f"Selection cell: {args.task}"
        + (f" k={args.k}" if args.task == "dfa" else "")
        + f", T={args.T}; {args.steps} steps of batch {args.batch_size}"
        + (" (the grid's budget)" if (args.steps, args.batch_size)
           == (GRID_PRESET.steps, GRID_PRESET.batch_size) else " (NOT the grid's budget)")
        + "; "
        f"task encoding `{args.encoding}`; validation set of {args.n_val} samples, seed "
        f"{args.val_seed} (the grid's test sets use seed {TEST_SEED}); training seed "
        f"{args.seed}; majority class {baselines['majority']:.3f}, chance "
        f"{baselines['chance']:.3f}. Torch/BLAS threads {args.threads}.",
        "",
        f"Command: `OMP_NUM_THREADS=1 {command.strip()}`",
        "",
        "| method | peak lr | schedule | val accuracy | val loss (nats) | CPU s |",
        "|---|---:|---|---:|---:|---:|",
    ]
    for r in rows:
        mark = " **chosen**" if r is best[r["method"]] else ""
        lines.append(f"| {r['method']}{mark} | {r['lr']:g} | {r['schedule']} | "
                     f"{r['val_accuracy']:.3f} | {r['val_loss']:.4f} | {r['cpu_seconds']:.0f} |")
    lines += ["", "Chosen (highest validation accuracy, ties by validation loss): "
              + "; ".join(f"{m}: lr {b['lr']:g}, {b['schedule']}" for m, b in best.items())]
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "select_lr.md").write_text("\n".join(lines) + "\n")
    (out / "select_lr.json").write_text(json.dumps(
        {"args": vars(args), "baselines": baselines, "rows": rows,
         "chosen": {m: {"lr": b["lr"], "schedule": b["schedule"]} for m, b in best.items()}},
        indent=1) + "\n")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
