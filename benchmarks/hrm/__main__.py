"""Command line: ``python -m benchmarks.hrm [run] [options]`` runs the main job, prints its table.

The default (no arguments) is the README's main job with the ``quick`` preset: pretrain (once,
then cached) the frozen character GPT-2, train an iso-parameter peft LoRA and an HRM adapter
(N = 32) on in-context DFA execution, calibrate, reduce by balanced truncation
(sigma_i / sigma_1 >= 0.01), evaluate the reduced adapter zero-shot and after phase-2
fine-tuning, and write ``results.md``, ``results.json`` and ``hsv.png`` to ``--out``.
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
from collections.abc import Sequence

__all__ = ["build_parser", "main"]


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of ``python -m benchmarks.hrm`` (preset names read at call time)."""
    from benchmarks.hrm.experiment import BACKBONES, TASKS
    from benchmarks.hrm.presets import PRESETS

    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.hrm",
        description="Train HRM and iso-parameter LoRA adapters on a frozen backbone, reduce "
                    "HRM by balanced truncation, fine-tune it, and print the results table.",
    )
    parser.add_argument("command", nargs="?", default="run", choices=["run"],
                        help="what to do (only 'run', the default)")
    parser.add_argument("--preset", default="quick", choices=sorted(PRESETS),
                        help="experiment size (default: quick, a few minutes on 2 CPU cores)")
    parser.add_argument("--task", default=None, choices=TASKS,
                        help="task (default: the preset's, DFA)")
    parser.add_argument("--T", type=int, default=None, dest="T",
                        help="input length: bits for dfa/parity, window characters for text")
    parser.add_argument("--k", type=int, default=None, help="DFA states (default: the preset's)")
    parser.add_argument("--seed", type=int, default=None, help="training seed")
    parser.add_argument("--out", default=None,
                        help="output folder (default: runs/<preset>-<task>-T<T>-seed<seed>)")
    rule = parser.add_mutually_exclusive_group()
    rule.add_argument("--rel-tol", type=float, default=None,
                      help="keep sigma_i/sigma_1 >= REL_TOL (the paper's rule; default 0.01)")
    rule.add_argument("--tol", type=float, default=None,
                      help="absolute tolerance on each layer's certified error bound instead")
    parser.add_argument("--gramian", default="data", choices=["data", "exact"],
                        help="controllability Gramian: calibrated state covariance (default) "
                             "or exact")
    parser.add_argument("--backbone", default="tiny", choices=BACKBONES,
                        help="frozen backbone: the project's pretrained character GPT-2 "
                             "(default) or SmolLM2-135M (slow on CPU)")
    parser.add_argument("--encoding", default="chars", choices=["chars", "ids"],
                        help="how task samples reach the tiny backbone: as characters "
                             "(default) or with the reserved task ids its pretraining never "
                             "tells apart (a negative control)")
    parser.add_argument("--threads", type=int, default=1,
                        help="torch intra-op threads (default 1: the models are small, and "
                             "more threads on a busy machine can be many times slower)")
    parser.add_argument("--no-progress", action="store_true", help="no progress bars or logs")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the exit status.

    Parameters
    ----------
    argv : sequence of str or None
        Arguments without the program name (None: ``sys.argv[1:]``).

    Returns
    -------
    status : int
        0 on success, 2 on a configuration error (message on stderr).
    """
    args = build_parser().parse_args(argv)
    if args.threads < 1:
        print(f"error: `--threads` must be >= 1; got {args.threads}", file=sys.stderr)
        return 2
    import torch

    threads_before = torch.get_num_threads()
    torch.set_num_threads(args.threads)
    try:
        return _run(args)
    finally:
        torch.set_num_threads(threads_before)


def _run(args: argparse.Namespace) -> int:
    from adapters.exceptions import AdapterConfigError
    from benchmarks.hrm.experiment import format_results, run_experiment
    from benchmarks.hrm.presets import get_preset

    progress = not args.no_progress
    if progress:
        logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s",
                            datefmt="%H:%M:%S", stream=sys.stderr)
    preset = get_preset(args.preset)
    task = args.task or preset.task
    length = args.T if args.T is not None else (
        preset.backbone.n_positions if task == "text" else preset.length)
    seed = preset.seed if args.seed is None else args.seed
    out = args.out or os.path.join("runs", f"{preset.name}-{task}-T{length}-seed{seed}")
    try:
        results = run_experiment(
            preset, task=task, T=length, k=args.k, seed=seed, out_dir=out,
            progress=progress, backbone=args.backbone, rel_tol=args.rel_tol, tol=args.tol,
            gramian=args.gramian, encoding=args.encoding,
        )
    except AdapterConfigError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    print(format_results(results))
    files = results["files"]
    print(f"\nwrote {files['table']}, {files['json']} and {files['plot']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
