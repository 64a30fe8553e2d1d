"""Speed and memory of the SSM adapter's scans against a parameter-matched LoRA layer.

Times forward and forward+backward of, on an input (B, L, H) = (4, L, 768) that requires grad
(as inside a network):

- ``DiagonalSSM(768, 32)`` with the FFT scan, the chunked scan, and the step-by-step loop;
- a peft LoRA layer on ``nn.Linear(768, 768)`` with rank r matched to the SSM's parameter count
  (``2 r H ~ 2 N H + 2 N + 1``), as peft runs it (frozen base matmul + LoRA branch), and the
  LoRA branch alone (``lora_B(lora_A(x))``, the adapter's own cost);
- a frozen GPT-2-sized MLP (768 -> 3072 -> 768), the block the adapter sits beside.

Times are the minimum over repeats after a warm-up (the scans alone, a few ms each, over at
least 10 repeats; the step-by-step loop over at least 3, so that no side of a ratio is a single
noisy sample), all measured in ONE run with the BLAS and
torch thread counts printed; ratios are to the peft LoRA layer and to the LoRA branch. Peak
memory is the largest net allocation during one forward+backward (torch profiler,
``profile_memory=True``), excluding the input and the weights. The loop is measured up to
``--recurrent-max`` and extrapolated linearly (marked ``~``) beyond. The accuracy of the float32
scans against a float64 reference is printed too.

The tables are printed and written, with the command line, to ``bench_scan.md`` (and the raw
figures to ``bench_scan.json``) in ``--out`` (default ``benchmarks/results``).

Run: ``python benchmarks/bench_scan.py [--threads 1] [--lengths 256 1024 4096 16384]``.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import platform
import sys
import time
from pathlib import Path

import torch
from threadpoolctl import threadpool_info, threadpool_limits
from torch import nn
from torch.nn import functional as F  # noqa: N812
from torch.profiler import ProfilerActivity, profile

from adapters import DiagonalSSM
from adapters.scan import chunked_scan, fft_scan, recurrent_scan

H, N, BATCH = 768, 32, 4
SCAN_REPEATS = 10
"""Least number of timed repeats of the parallel scans alone (milliseconds each)."""
LOOP_REPEATS = 3
"""Least number of timed repeats of the step-by-step loop (a few hundred ms each)."""


class _Proj(nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = nn.Linear(H, H)

    def forward(self, x):
        return self.proj(x)


def build(seed=0):
    """All candidates as callables x -> y, plus the LoRA rank and parameter counts."""
    from peft import LoraConfig, get_peft_model

    torch.manual_seed(seed)
    ssm_params = 2 * N * H + 2 * N + 1  # DiagonalSSM + gate
    r = max(1, round(ssm_params / (2 * H)))
    lora = get_peft_model(
        _Proj(), LoraConfig(r=r, lora_alpha=r, target_modules=["proj"], lora_dropout=0.0)
    )
    layer = lora.base_model.model.proj
    nn.init.normal_(layer.lora_B["default"].weight, std=0.02)  # trained-state cost, not zeros
    lora_A, lora_B = layer.lora_A["default"], layer.lora_B["default"]
    lora_params = sum(p.numel() for p in lora.parameters() if p.requires_grad)

    fft = DiagonalSSM(H, N, scan="fft")
    chunked = DiagonalSSM(H, N, scan="chunked")
    chunked.load_state_dict(fft.state_dict())

    def recurrent(x):
        a, B, C = fft.discrete()
        s, _ = recurrent_scan(F.linear(x, B), a)
        return F.linear(s, C)

    mlp = nn.Sequential(nn.Linear(H, 4 * H), nn.GELU(), nn.Linear(4 * H, H))
    mlp.requires_grad_(False)
    cands = {
        "SSM fft": fft,
        "SSM chunked": chunked,
        "SSM recurrent": recurrent,
        "LoRA layer (peft)": lora,
        "LoRA branch": lambda x: lora_B(lora_A(x)),
        "GPT-2 MLP (frozen)": mlp,
    }
    return cands, r, fft.num_parameters, lora_params


def time_one(fn, x, g, repeats, clock):
    fwd = fb = math.inf
    for i in range(repeats + 1):
        x.grad = None
        t0 = clock()
        y = fn(x)
        t1 = clock()
        y.backward(g)
        t2 = clock()
        if i:  # the first run is a warm-up
            fwd, fb = min(fwd, t1 - t0), min(fb, t2 - t0)
    return fwd, fb


def scan_only(lengths, recurrent_max, repeats, clock):
    """The scans alone on (B, L, N) = (4, L, 32), input and a requiring grad."""
    rows = {}
    a = (torch.rand(N, generator=torch.Generator().manual_seed(0)) * 0.999).requires_grad_(True)
    fns = {
        "fft": lambda u: fft_scan(u, a)[0],
        "chunked": lambda u: chunked_scan(u, a)[0],  # chunk length auto_chunk(L)
        "recurrent": lambda u: recurrent_scan(u, a)[0],
    }
    for L in lengths:
        u = torch.randn(BATCH, L, N, requires_grad=True)
        g = torch.randn(BATCH, L, N)
        for name, fn in fns.items():
            if name == "recurrent" and L > recurrent_max:
                L0 = max(k for k, _ in rows if k <= recurrent_max)
                f0, b0, _ = rows[(L0, name)]
                rows[(L, name)] = (f0 * L / L0, b0 * L / L0, True)
            else:
                reps = max(repeats, LOOP_REPEATS if name == "recurrent" else SCAN_REPEATS)
                rows[(L, name)] = (*time_one(fn, u, g, reps, clock), False)
    return rows


def peak_memory(fn, x, g):
    x.grad = None
    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        fn(x).backward(g)
    total = peak = 0
    for event in sorted(prof.events(), key=lambda e: e.time_range.start):
        total += event.self_cpu_memory_usage
        peak = max(peak, total)
    return peak / 2**20


def accuracy_table(lengths):
    rows = []
    g = torch.Generator().manual_seed(0)
    a = torch.tensor([0.999, -0.999, 0.99, 0.9, 0.5, 0.0, -0.5, 0.97])
    for L in lengths:
        u = torch.randn(2, L, 8, generator=g)
        u[1] = 1.0
        ref, _ = recurrent_scan(u.double(), a.double())
        scale = ref.abs().max()
        errs = [
            float((fn(u, a)[0].double() - ref).abs().max() / scale)
            for fn in (fft_scan, chunked_scan, recurrent_scan)
        ]
        rows.append((L, *errs))
    return rows


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--threads", type=int, default=1, help="torch and BLAS threads (default 1)")
    p.add_argument("--lengths", type=int, nargs="+", default=[256, 1024, 4096, 16384])
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--recurrent-max", type=int, default=4096)
    p.add_argument(
        "--baseline-max",
        type=int,
        default=4096,
        help="measure the GPT-2 MLP up to this L, extrapolate linearly beyond",
    )
    p.add_argument(
        "--wall", action="store_true", help="wall-clock time instead of process CPU time"
    )
    p.add_argument("--no-memory", action="store_true")
    p.add_argument("--out", type=Path, default=Path(__file__).resolve().parent / "results",
                   help="folder for bench_scan.md and bench_scan.json (created)")
    args = p.parse_args(argv)
    clock = time.perf_counter if args.wall else time.process_time
    lines: list[str] = []


    def emit(text: str = "") -> None:  # printed, and kept for the result file
        lines.append(text)
        print(text, flush=True)

    torch.set_num_threads(args.threads)
    with threadpool_limits(limits=args.threads):
        blas = sorted(
            {f"{i['internal_api']} ({i['num_threads']} threads)" for i in threadpool_info()}
        )
        cands, r, ssm_params, lora_params = build()
        emit(
            f"# bench_scan: B={BATCH}, H={H}, N={N}; torch {torch.__version__}, "
            f"{platform.machine()}, torch threads={torch.get_num_threads()}, "
            f"interop={torch.get_num_interop_threads()}"
        )
        emit(f"# BLAS/OpenMP pools: {', '.join(blas) or 'none found'}")
        emit(f"# params: DiagonalSSM {ssm_params} (+1 gate) vs LoRA r={r}: {lora_params}")
        kind = "wall clock" if args.wall else "process CPU time (robust to other load)"
        emit(
            f"# times: {kind}, min of {args.repeats} after a warm-up (the loop: min of "
            f"{max(args.repeats, LOOP_REPEATS)}); "
            "'~' = extrapolated linearly in L\n"
        )
        emit("| L | method | fwd ms | fwd+bwd ms | / LoRA layer | / LoRA branch | peak MiB |")
        emit("|---:|---|---:|---:|---:|---:|---:|")
        results = {}
        for L in args.lengths:
            x = torch.randn(BATCH, L, H, requires_grad=True)
            g = torch.randn(BATCH, L, H)
            row = {}
            cap = {"SSM recurrent": args.recurrent_max, "GPT-2 MLP (frozen)": args.baseline_max}
            for name, fn in cands.items():
                if L > cap.get(name, L):
                    L0 = max(k for k in results if k <= cap[name])
                    f0, b0, _, _ = results[L0][name]
                    row[name] = (f0 * L / L0, b0 * L / L0, None, True)
                    continue
                reps = max(args.repeats, LOOP_REPEATS) if name == "SSM recurrent" else args.repeats
                fwd, fb = time_one(fn, x, g, reps, clock)
                mem = None if args.no_memory else peak_memory(fn, x, g)
                row[name] = (fwd, fb, mem, False)
            results[L] = row
            lora_fb, branch_fb = row["LoRA layer (peft)"][1], row["LoRA branch"][1]
            for name, (fwd, fb, mem, extrap) in row.items():
                mark = "~" if extrap else ""
                mem_s = "" if mem is None else f"{mem:.0f}"
                emit(
                    f"| {L} | {name} | {mark}{fwd * 1e3:.1f} | {mark}{fb * 1e3:.1f} | "
                    f"{mark}{fb / lora_fb:.2f} | {mark}{fb / branch_fb:.2f} | {mem_s} |"
                )

        emit(
            f"\n# scans alone, (B, L, N) = ({BATCH}, L, {N}): fwd+bwd ms "
            f"(parallel scans: min of {max(args.repeats, SCAN_REPEATS)} repeats; loop: min of "
            f"{max(args.repeats, LOOP_REPEATS)})\n"
        )
        emit("| L | fft | chunked | recurrent | loop / fastest |")
        emit("|---:|---:|---:|---:|---:|")
        scans = scan_only(args.lengths, args.recurrent_max, args.repeats, clock)
        for L in args.lengths:
            f_, c_, r_ = (scans[(L, k)] for k in ("fft", "chunked", "recurrent"))
            mark = "~" if r_[2] else ""
            emit(
                f"| {L} | {f_[1] * 1e3:.1f} | {c_[1] * 1e3:.1f} | {mark}{r_[1] * 1e3:.0f} | "
                f"{mark}{r_[1] / min(f_[1], c_[1]):.0f}x |"
            )

        emit(
            "\n# accuracy, float32 vs float64 loop, max|err| / max|s| "
            "(|a| up to 0.999, random and constant inputs)\n"
        )
        emit("| L | fft | chunked | recurrent (float32 loop) |")
        emit("|---:|---:|---:|---:|")
        for L, e_fft, e_chk, e_rec in accuracy_table(args.lengths):
            emit(f"| {L} | {e_fft:.1e} | {e_chk:.1e} | {e_rec:.1e} |")

        figures = {
            "lengths": args.lengths, "threads": args.threads, "clock": kind,
            "lora_rank": r, "ssm_params": ssm_params, "lora_params": lora_params,
            "modules_ms": {str(L): {name: {"fwd": v[0] * 1e3, "fwd_bwd": v[1] * 1e3,
                                           "peak_mib": v[2], "extrapolated": v[3]}
                                    for name, v in row.items()} for L, row in results.items()},
            "scans_ms": {str(L): {k: {"fwd_bwd": scans[(L, k)][1] * 1e3,
                                      "extrapolated": scans[(L, k)][2]}
                                  for k in ("fft", "chunked", "recurrent")}
                         for L in args.lengths},
        }
        big = 4096 if 4096 in results else max(results)
        at_target = big == 4096  # the targets (PASS/FAIL) are defined at L = 4096

        def mark(ok: bool, word: str = "FAIL") -> str:
            return f"[{'PASS' if ok else word}" if at_target else "[target at L=4096:"

        row = results[big]
        best = min(("SSM fft", "SSM chunked"), key=lambda k: row[k][1])
        fb = row[best][1]
        vs_lora = fb / row["LoRA layer (peft)"][1]
        vs_branch = fb / row["LoRA branch"][1]
        speedup = row["SSM recurrent"][1] / fb
        extrap = " (recurrent extrapolated)" if row["SSM recurrent"][3] else ""
        f_, c_, r_ = (scans[(big, k)] for k in ("fft", "chunked", "recurrent"))
        scan_speedup = r_[1] / min(f_[1], c_[1])
        figures["summary"] = {"L": big, "fastest": best, "fwd_bwd_ms": fb * 1e3,
                              "vs_lora_layer": vs_lora, "vs_lora_branch": vs_branch,
                              "scan_vs_loop": scan_speedup, "module_vs_loop_module": speedup}
        emit(f"\n# L={big} fastest parallel SSM: {best}, fwd+bwd {fb * 1e3:.1f} ms")
        emit(f"#   vs peft LoRA layer: {vs_lora:.2f}x {mark(vs_lora <= 1.2)} <= 1.2x]")
        emit(f"#   vs LoRA branch alone: {vs_branch:.2f}x {mark(vs_branch <= 1.2, 'over')} "
             "<= 1.2x]")
        emit(f"#   scan vs recurrent loop (scans alone): {scan_speedup:.0f}x "
             f"{mark(scan_speedup >= 50)} >= 50x]")
        emit(f"#   whole module vs module with the loop: {speedup:.1f}x{extrap} "
             "(the shared B and C projections bound this ratio)")
    _write(args.out, lines, figures, sys.argv[1:] if argv is None else argv)


def _write(out: Path, lines: list[str], figures: dict, argv: list[str]) -> None:
    """``bench_scan.md`` (command, load, the printed tables) and ``bench_scan.json``."""
    out.mkdir(parents=True, exist_ok=True)
    command = " ".join(["python benchmarks/bench_scan.py", *map(str, argv)])
    load = os.getloadavg() if hasattr(os, "getloadavg") else None
    when = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    head = [f"Written by `{command}` on {when}"
            + (f"; machine load average {load[0]:.1f} at the end (times are process CPU time "
               "unless --wall)." if load else "."), "", "```text"]
    (out / "bench_scan.md").write_text("\n".join([*head, *lines, "```", ""]))
    (out / "bench_scan.json").write_text(json.dumps({**figures, "command": command,
                                                     "load_average": load}, indent=1) + "\n")


if __name__ == "__main__":
    main()
