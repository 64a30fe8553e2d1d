"""The main job (``make demo``): HRM vs iso-parameter LoRA on the real frozen SmolLM2-135M.

One seed, a short budget: cache the hidden states entering the top ``n_top`` blocks of the
frozen SmolLM2-135M on ``pydoc_data.topics`` windows (:mod:`benchmarks.hrm.smollm`); train
HRM (N = 32) and an iso-parameter peft LoRA on q_proj/v_proj of the same blocks for the same
steps; calibrate the HRM adapters, reduce them by balanced truncation (sigma_i / sigma_1 >=
``rel_tol``), evaluate the reduced adapter as it is and after phase-2 fine-tuning; generate a
sample with the reduced, fine-tuned adapters; write ``results.md``, ``results.json`` and
``hsv.png`` to ``--out``.

Test BPC is on the held-out 10 % tail of the text (the same split as the study,
:mod:`benchmarks.hrm.lm_study`); the learning rates are the study's validation-chosen ones
for these arms when its results file exists, else the defaults below. One seed and a short
budget: this is a demonstration of the pipeline, not evidence for either method (the study
is that).

Run: ``python -m benchmarks.hrm.lm_demo`` (``--help`` for options).
"""

from __future__ import annotations

import argparse
import json
import math
import platform
import time
from pathlib import Path

import torch

from . import lm_study

DEFAULT_LR = {"hrm": 1e-2, "lora_qv": 3e-3}
PROMPT = "The `with` statement"


def _rates(path: Path = lm_study.RESULTS / "results.json") -> tuple[dict, str]:
    if path.exists():
        chosen = json.loads(path.read_text()).get("chosen_lr", {})
        if all(a in chosen for a in DEFAULT_LR):
            return {a: chosen[a] for a in DEFAULT_LR}, str(path)
    return dict(DEFAULT_LR), "defaults (no study results file)"


@torch.no_grad()
def _sample(model, tok, prompt: str, n: int) -> str:
    ids = tok(prompt, return_tensors="pt", add_special_tokens=False)
    out = model.generate(**ids, max_new_tokens=n, do_sample=False,
                         pad_token_id=tok.eos_token_id)
    return tok.decode(out[0, ids["input_ids"].shape[1]:], skip_special_tokens=True)


def run(out: Path, *, steps: int = 30, phase2_steps: int = 15, train_windows: int = 60,
        seed: int = 0, rel_tol: float = 0.01, sample_tokens: int = 40,
        test_windows: int | None = None, progress: bool = True) -> dict:
    """The whole job; returns what it writes to ``out/results.json``."""
    t_start = time.perf_counter()
    budget = lm_study.Budget(steps=steps, phase2_steps=phase2_steps, rel_tol=rel_tol,
                             train_windows=train_windows)
    study = lm_study.Study(budget, progress=progress, results=out / "cells",
                           max_windows={"train": train_windows, "test": test_windows},
                           splits=("train", "test"))
    t_setup = time.perf_counter() - t_start
    rates, rate_source = _rates()
    test = study.states["test"], study.win["test"]
    res: dict = {"budget": {k: getattr(budget, k) for k in budget.__dataclass_fields__},
                 "seed": seed, "learning_rates": rates, "learning_rate_source": rate_source,
                 "windows": {k: len(w) for k, w in study.win.items()},
                 "test_characters": int(study.win["test"].chars[:, 1:].sum())}
    res["frozen"] = _bpc(lm_study.evaluate(study.top, *test, progress=progress, late=budget.late,
                                           desc="frozen test"))
    res["sample_frozen"] = _sample(study.model, study.tok, PROMPT, sample_tokens)

    # LoRA on q, v (iso-parameter)
    rank, n_lora = lm_study.iso_rank(study.model, budget, "lora_qv")
    wrapped, detach = lm_study.attach(study.model, "lora_qv", budget, seed)
    top = lm_study.TopView(wrapped, study.first)
    hist = lm_study.train_run(top, study.states["train"], study.win["train"].ids, steps=steps,
                              batch=budget.batch, lr=rates["lora_qv"],
                              warmup_frac=budget.warmup_frac, seed=seed,
                              desc="LoRA q,v", progress=progress)
    res["lora_qv"] = {**_bpc(lm_study.evaluate(top, *test, progress=progress, late=budget.late,
                                               desc="LoRA test")),
                      "rank": rank, "params": n_lora, "train_seconds": hist["seconds"]}
    detach()

    # HRM, then calibrate -> reduce -> phase 2
    from adapters import calibrate, find_adapters, reduce

    wrapped, detach = lm_study.attach(study.model, "hrm", budget, seed)
    top = lm_study.TopView(wrapped, study.first)
    hist = lm_study.train_run(top, study.states["train"], study.win["train"].ids, steps=steps,
                              batch=budget.batch, lr=rates["hrm"],
                              warmup_frac=budget.warmup_frac, seed=seed, desc="HRM",
                              progress=progress)
    n_hrm = sum(p.numel() for a in find_adapters(top).values() for p in a.adapter.parameters())
    res["hrm"] = {**_bpc(lm_study.evaluate(top, *test, progress=progress, late=budget.late,
                                            desc="HRM test")),
                  "params": n_hrm, "train_seconds": hist["seconds"]}
    calib = [study.states["train"][i:i + 4] for i in range(0, budget.calib_windows, 4)]
    stats = calibrate(top, calib, gramian="data", progress=progress)
    report = reduce(top, rel_tol=rel_tol, gramian="data", stats=stats)
    res["hrm_reduced"] = {**_bpc(lm_study.evaluate(top, *test, progress=progress, late=budget.late,
                                                   desc="reduced test")),
                          "params": report.params_after}
    hist = lm_study.train_run(top, study.states["train"], study.win["train"].ids,
                              steps=phase2_steps, batch=budget.batch, lr=rates["hrm"],
                              warmup_frac=budget.warmup_frac, seed=seed + 1000,
                              desc="HRM phase 2", progress=progress)
    res["hrm_phase2"] = {**_bpc(lm_study.evaluate(top, *test, progress=progress, late=budget.late,
                                                  desc="phase-2 test")),
                         "params": report.params_after, "train_seconds": hist["seconds"]}
    res["layers"] = [{"name": lay.name, "order_before": lay.order_before,
                      "order_after": lay.order_after, "gate": lay.gate,
                      "lower_bound": lay.lower_bound, "upper_bound": lay.upper_bound}
                     for lay in report.layers]
    res["reduce_seconds"] = report.seconds
    res["sample_hrm_phase2"] = _sample(study.model, study.tok, PROMPT, sample_tokens)
    res["prompt"] = PROMPT
    out.mkdir(parents=True, exist_ok=True)
    report.plot(out / "hsv.png")
    detach()
    res["seconds"] = {"setup": t_setup, "total": time.perf_counter() - t_start}
    res["env"] = {"python": platform.python_version(), "torch": torch.__version__,
                  "threads": torch.get_num_threads()}
    (out / "results.json").write_text(json.dumps(res, indent=1))
    (out / "results.md").write_text(markdown(res))
    return res


def _bpc(ev: dict) -> dict:
    return {k: ev[k] for k in ("bpc", "bpc_early", "bpc_late")}


def markdown(r: dict) -> str:
    b = r["budget"]
    f = r["frozen"]
    rows = [("frozen SmolLM2-135M", f, 0), (f"LoRA q,v (r = {r['lora_qv']['rank']})",
                                             r["lora_qv"], r["lora_qv"]["params"]),
            ("HRM N = 32", r["hrm"], r["hrm"]["params"]),
            ("HRM reduced (no fine-tuning)", r["hrm_reduced"], r["hrm_reduced"]["params"]),
            (f"HRM reduced + phase 2 ({b['phase2_steps']} steps)", r["hrm_phase2"],
             r["hrm_phase2"]["params"])]
    lines = ["# Main job: HRM vs iso-parameter LoRA on frozen SmolLM2-135M", "",
             f"Top {b['n_top']} of 30 blocks adapted; {b['steps']} steps x {b['batch']} "
             f"windows of {b['seq_len']} tokens from {r['windows']['train']} training windows; "
             f"seed {r['seed']}; learning rates {r['learning_rates']} "
             f"({r['learning_rate_source']}). Test: {r['windows']['test']} windows, "
             f"{r['test_characters']} characters. One seed, short budget: a demonstration of "
             "the pipeline, not a comparison (see benchmarks/results/lm_study/).", "",
             "| model | trainable parameters | test BPC | BPC < 128 | BPC >= 128 |",
             "|---|---|---|---|---|"]
    for name, x, n in rows:
        lines.append(f"| {name} | {n:,} | {x['bpc']:.4f} | {x['bpc_early']:.4f} | "
                     f"{x['bpc_late']:.4f} |")
    lines += ["", f"## Reduction (sigma_i / sigma_1 >= {b['rel_tol']}, data Gramian)", "",
              "| layer | gate | order | lower bound | certified upper bound |",
              "|---|---|---|---|---|"]
    for lay in r["layers"]:
        lines.append(f"| {lay['name']} | {lay['gate']:+.4f} | {lay['order_before']} -> "
                     f"{lay['order_after']} | {lay['lower_bound']:.3g} | "
                     f"{lay['upper_bound']:.3g} |")
    lines += ["", "## Greedy samples", "", f"Prompt: `{r['prompt']}`", "",
              f"- frozen: {json.dumps(r['sample_frozen'])}",
              f"- HRM reduced + phase 2: {json.dumps(r['sample_hrm_phase2'])}", "",
              f"Wall time: {r['seconds']['total']:.0f} s in all, of which set-up (load, "
              f"tokenise, cache) {r['seconds']['setup']:.0f} s; torch threads "
              f"{r['env']['threads']}.", ""]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--out", type=Path, default=Path("runs/demo-smollm2"))
    p.add_argument("--steps", type=int, default=30)
    p.add_argument("--phase2-steps", type=int, default=15)
    p.add_argument("--train-windows", type=int, default=60)
    p.add_argument("--sample-tokens", type=int, default=40)
    p.add_argument("--test-windows", type=int, default=None,
                   help="evaluate on this many evenly spaced test windows (default: all)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--rel-tol", type=float, default=0.01)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--no-progress", action="store_true")
    args = p.parse_args(argv)
    torch.set_num_threads(args.threads)
    res = run(args.out, steps=args.steps, phase2_steps=args.phase2_steps,
              train_windows=args.train_windows, seed=args.seed, rel_tol=args.rel_tol,
              sample_tokens=args.sample_tokens, test_windows=args.test_windows,
              progress=not args.no_progress)
    print((args.out / "results.md").read_text())
    print(f"wrote {args.out}/results.md, results.json and hsv.png "
          f"({res['seconds']['total']:.0f} s)")
    return 0 if math.isfinite(res["hrm_phase2"]["bpc"]) else 1


if __name__ == "__main__":
    raise SystemExit(main())
