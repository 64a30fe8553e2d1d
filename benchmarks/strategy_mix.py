"""Measure the mix of cases ``lti.testing.strategies.systems_and_orders`` draws.

Draws ``--examples`` pairs ``(G, r)`` from the default strategy (``n=(1, 8)``, every
family, ``orders="mixed"``) with hypothesis (derandomized, so the run is reproducible) and
counts

* real reductions ``0 < r < n_min`` (``n_min`` = ``strategies.minimal_order``, independent
  of lti), r = 0, r = n_min, r = n_min = n and so on, per family;
* what ``lti.balanced_truncation(G, order=r)`` (method "sr") makes of them: the returned
  order equals r and ``0 < order < result.minimal_order`` (a reduction by lti's own count).

Prints a markdown table and writes ``benchmarks/results/strategy_mix.md`` and ``.json``.

Usage: ``python benchmarks/strategy_mix.py [--examples 1000]``.
"""

from __future__ import annotations

import argparse
import collections
import json
import pathlib
import subprocess
import warnings

from hypothesis import HealthCheck, given, settings

from lti import balanced_truncation
from lti.testing import strategies

RESULTS = pathlib.Path(__file__).resolve().parent / "results"


def draw_cases(examples: int, **kwargs) -> list[dict]:
    """Draw `examples` cases of ``systems_and_orders(**kwargs)`` and classify them."""
    rows: list[dict] = []

    @settings(max_examples=examples, deadline=None, derandomize=True, database=None,
              suppress_health_check=list(HealthCheck))
    @given(case=strategies.systems_and_orders(**kwargs))
    def collect(case):
        G, r = case
        nmin = strategies.minimal_order(G)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            res = balanced_truncation(G, order=r, method="sr")
        rows.append({
            "n": G.n, "r": r, "n_min": nmin, "order": int(res.order),
            "lti_minimal_order": int(res.minimal_order),
        })

    collect()
    return rows


def classify(row: dict) -> str:
    n, r, nmin = row["n"], row["r"], row["n_min"]
    if 0 < r < nmin:
        return "0 < r < n_min"
    if r == 0:
        return "r = 0"
    if r == nmin == n:
        return "r = n_min = n"
    if r == nmin:
        return "r = n_min < n"
    return "n_min < r"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--examples", type=int, default=1000)
    ap.add_argument("--per-family", type=int, default=200)
    args = ap.parse_args(argv)
    rows = draw_cases(args.examples, n=(1, 8))
    fam_rows = {k: draw_cases(args.per_family, n=(1, 8), kind=k) for k in strategies.KINDS}
    counts = collections.Counter(classify(r) for r in rows)
    lti_red = sum(0 < r["order"] == r["r"] < r["lti_minimal_order"] for r in rows)
    collapsed = sum(r["order"] < r["r"] and 0 < r["r"] < r["n_min"] for r in rows)
    total = len(rows)
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True,
                            text=True, cwd=pathlib.Path(__file__).parent).stdout.strip()
    lines = [f"## strategy mix: {total} draws of systems_and_orders(n=(1, 8)) "
             f"(defaults, derandomized), lti at {commit}", "",
             "| case | draws | share |", "|---|---:|---:|"]
    for key in ("0 < r < n_min", "r = 0", "r = n_min < n", "r = n_min = n", "n_min < r"):
        lines.append(f"| {key} | {counts[key]} | {100 * counts[key] / total:.1f} % |")
    lines += ["", f"lti (sr) returns order r with 0 < r < its minimal_order: {lti_red} "
              f"({100 * lti_red / total:.1f} %); requested 0 < r < n_min but lti returned a "
              f"lower order: {collapsed}",
              "", f"Per family ({args.per_family} draws of systems_and_orders(n=(1, 8), "
              "kind=...) each):", "",
              "| family | 0 < r < n_min | r = 0 | r = n_min < n | r = n_min = n | n_min < r "
              "| lti order == r, 0 < r < lti minimal_order | lti order < r "
              "(asked 0 < r < n_min) |",
              "|---|---:|---:|---:|---:|---:|---:|---:|"]
    per_family = {}
    for k, fr in fam_rows.items():
        fc = collections.Counter(classify(r) for r in fr)
        red = sum(0 < r["order"] == r["r"] < r["lti_minimal_order"] for r in fr)
        col = sum(r["order"] < r["r"] and 0 < r["r"] < r["n_min"] for r in fr)
        per_family[k] = {"counts": dict(fc), "lti_reductions": red, "collapsed": col}
        lines.append(f"| {k} | " + " | ".join(str(fc[c]) for c in (
            "0 < r < n_min", "r = 0", "r = n_min < n", "r = n_min = n", "n_min < r"))
            + f" | {red} | {col} |")
    lines += ["", "| n | draws |", "|---:|---:|"]
    for k, v in sorted(collections.Counter(r["n"] for r in rows).items()):
        lines.append(f"| {k} | {v} |")
    md = "\n".join(lines) + "\n"
    print(md)
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "strategy_mix.md").write_text(md)
    (RESULTS / "strategy_mix.json").write_text(json.dumps(
        {"commit": commit, "counts": dict(counts), "total": total, "lti_reductions": lti_red,
         "collapsed": collapsed, "per_family": per_family}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
