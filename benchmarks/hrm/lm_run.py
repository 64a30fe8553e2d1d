"""Run the SmolLM2 study (:mod:`benchmarks.hrm.lm_study`) in the order that decides it first.

Same protocol, cells and tables as ``python -m benchmarks.hrm.lm_study``; only the order
differs, so that a run cut short by the clock still answers the question: learning-rate
pilots of HRM and the two LoRA arms, their main runs seed by seed, then the stateless arm
(pilots on a grid centred on HRM's chosen rate, then its main runs). The tables are
rewritten after every main run from the cells on disk.

Run: ``python -m benchmarks.hrm.lm_run``.
"""

from __future__ import annotations

import argparse
import platform

import torch

from . import lm_report, lm_study, smollm

FIRST = ("hrm", "lora_qv", "lora_mlp")
LATER = ("stateless",)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--seeds", type=int, default=2)
    p.add_argument("--max-extend", type=int, default=2)
    args = p.parse_args(argv)
    torch.set_num_threads(1)
    budget = lm_study.Budget()
    study = lm_study.Study(budget, progress=False, max_windows={
        "train": budget.train_windows, "dev": budget.dev_windows})
    check = smollm.check_cache_exact(study.model, study.win["test"].ids[:2], study.first)
    frozen = study.frozen()
    params = {"hrm": lm_study.hrm_parameters(study.model, budget),
              "stateless": lm_study.hrm_parameters(study.model, budget)}
    for arm in ("lora_qv", "lora_mlp"):
        params[arm + "_rank"], params[arm] = lm_study.iso_rank(study.model, budget, arm)
    chosen: dict = {}
    env = {"python": platform.python_version(), "torch": torch.__version__,
           "threads": torch.get_num_threads(), "setup_seconds": study.setup_seconds,
           "driver": "python -m benchmarks.hrm.lm_run"}

    def report():
        lm_report.write(study, frozen, chosen, check, seeds=args.seeds, env=env, params=params,
                        paired_ci=lm_study.paired_ci)

    for group in (FIRST, LATER):
        if group is LATER and "hrm" in chosen:
            # the stateless arm is the HRM module with a = 0: its grid is centred on HRM's
            # choice (factor 3 either side), still extended if the best lands on an edge
            lr = chosen["hrm"]
            lm_study.LR_GRIDS["stateless"] = (lr / 3, lr, lr * 3)
        for arm in group:
            chosen[arm] = study.choose_lr(arm, args.max_extend)[0]
            print(f"{arm}: lr {chosen[arm]:g}", flush=True)
        for seed in range(args.seeds):
            for arm in group:
                cell = study.run(arm, chosen[arm], seed)
                print(f"{arm} seed {seed}: test BPC {cell['test']['bpc']:.4f}", flush=True)
                report()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
