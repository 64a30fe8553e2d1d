"""The Bayes ladder of in-context DFA execution, exactly, by enumeration.

The task (``tasks.dfa_task``): a k-state binary DFA with every table entry uniform on the k
states, start state 0, T uniform random bits, answer the final state. The rung ``m`` of the
ladder is the best accuracy of any predictor that sees the table and only the *last* m bits:

    acc_m = E_table E_{last m bits} max_s P(final = s | table, last m bits),

where the state before the last m bits is distributed as ``e_0 M^(T-m)`` with ``M`` the
table's random-walk matrix (each bit 0 or 1 with probability 1/2). ``m = 0`` is the
table-only Bayes rate (knows the table, ignores the bits); ``m = T`` is 1. Computed over all
``k^(2k)`` tables and all ``2^m`` bit strings (no sampling). The majority-class rate (knows
nothing, predicts the most frequent final state) is given too.

Run: ``python -m benchmarks.hrm.dfa_bayes`` writes ``benchmarks/results/dfa_bayes.{md,json}``.
"""

from __future__ import annotations

import argparse
import itertools
import json
from pathlib import Path

import numpy as np

RESULTS = Path(__file__).resolve().parents[1] / "results"


def _tables(k: int) -> np.ndarray:
    """All transition tables, (k^(2k), k, 2): ``t[i, q, b] = delta_i(q, b)``."""
    flat = np.array(list(itertools.product(range(k), repeat=2 * k)), dtype=np.int64)
    return flat.reshape(-1, k, 2)


def _push(p: np.ndarray, nxt: np.ndarray) -> np.ndarray:
    """Distribution after one known bit: ``out[..., s'] = sum_{s: nxt[s] = s'} p[..., s]``.

    ``p`` (n, S, k), ``nxt`` (n, k) next state of each state on that bit (per table).
    """
    n, strings, k = p.shape
    out = np.zeros_like(p)
    idx = np.broadcast_to(nxt[:, None, :], p.shape)
    np.add.at(out, (np.arange(n)[:, None, None], np.arange(strings)[None, :, None], idx), p)
    return out


def ladder(k: int, T: int, ms: tuple[int, ...] = (0, 1, 4, 8), chunk: int = 4096) -> dict:
    """``{"m=0": acc, ...,  "majority": acc}`` for k states and T bits, exactly."""
    tables = _tables(k)
    n = len(tables)
    sums = dict.fromkeys(ms, 0.0)
    final_hist = np.zeros(k)
    for lo in range(0, n, chunk):
        t = tables[lo:lo + chunk]  # (c, k, 2)
        c = len(t)
        walk = np.zeros((c, k, k))
        rows = np.arange(c)[:, None]
        for b in (0, 1):
            np.add.at(walk, (rows, np.arange(k)[None, :], t[:, :, b]), 0.5)
        dists = {}
        p = np.zeros((c, k))
        p[:, 0] = 1.0
        for step in range(T + 1):
            if T - step in ms:
                dists[T - step] = p.copy()
            if step < T:
                p = np.einsum("cs,cst->ct", p, walk)
        final_hist += p.sum(0)
        for m in ms:
            d = dists[m][:, None, :]  # (c, 1, k)
            for _ in range(m):  # strings double: (c, S, k) -> (c, 2S, k), bit appended last
                d = np.concatenate([_push(d, t[:, :, 0]), _push(d, t[:, :, 1])], axis=1)
            sums[m] += d.max(-1).mean(1).sum()
    out = {f"m={m}": sums[m] / n for m in ms}
    out["majority"] = float(final_hist.max() / n)
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--cells", default="2:16,2:32,2:64,2:128,4:16,4:32,4:64,4:128",
                   help="k:T pairs")
    p.add_argument("--out", type=Path, default=RESULTS)
    args = p.parse_args(argv)
    rows = []
    for cell in args.cells.split(","):
        k, T = (int(x) for x in cell.split(":"))
        rows.append({"k": k, "T": T, **ladder(k, T)})
        print(rows[-1], flush=True)
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "dfa_bayes.json").write_text(json.dumps(rows, indent=1))
    lines = ["# Bayes ladder of in-context DFA execution (exact, all tables, all bit strings)",
             "", "Written by `python -m benchmarks.hrm.dfa_bayes`. Rung m: the best accuracy "
             "of a predictor that knows the transition table and only the last m bits; m = 0 "
             "is the table-only Bayes rate; majority: the most frequent final state, table "
             "unseen.", "",
             "| k | T | majority | m = 0 (table only) | m = 1 | m = 4 | m = 8 |",
             "|---|---|---|---|---|---|---|"]
    for r in rows:
        lines.append(f"| {r['k']} | {r['T']} | {r['majority']:.4f} | {r['m=0']:.4f} | "
                     f"{r['m=1']:.4f} | {r['m=4']:.4f} | {r['m=8']:.4f} |")
    (args.out / "dfa_bayes.md").write_text("\n".join(lines) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
