"""Hankel-norm approximation: measured error against Glover's bound, and the rounding term.

For drawn stable systems of four families (dense; strongly non-normal
``Q (triu(2 randn, 1) + diag(U(-0.95, 0.95))) Q^T``; resonant complex pairs with
``|lambda| = 1 - 10^U(-4, -1)``; real diagonal with poles in (-0.99, 0.99)), n in 2..20,
m, p in 1..3 and a random order r below the minimal order, run
``lti.hankel_norm_approximation`` and measure, independently of lti's norms, the
H-infinity error with SLICOT AB13DD and the Hankel error from lti's Gramian factors of the
error system. Reports per family: the largest ``(err - tail) / rounding_term`` (the
bound holds while this is <= 1), the smallest ``(err - sigma_{r+1}) / sigma_{r+1}``
(>= -1e-12: the lower bound), the largest ``|Hankel error - sigma_{r+1}| / sigma_1`` and
the number of systems with ``err`` outside ``[lower_bound, error_bound]``. Writes
``benchmarks/results/hankel_rounding.{md,json}``.

Usage: ``python benchmarks/hankel_rounding.py [--seeds 1 2 3] [--count 60]``.
"""

from __future__ import annotations

import argparse
import json
import pathlib
import warnings

import numpy as np

from lti import DiscreteLTI, gramian_factors, hankel_norm_approximation

FAMILIES = ("dense", "nonnormal", "resonant", "diagonal")


def draw(rng, kind: str) -> DiscreteLTI:
    n, m, p = int(rng.integers(2, 21)), int(rng.integers(1, 4)), int(rng.integers(1, 4))
    if kind == "resonant":
        k = max(n // 2, 1)
        lam = (1 - 10 ** rng.uniform(-4, -1, k)) * np.exp(1j * rng.uniform(0.05, 3.0, k))
        b = rng.standard_normal((k, m)) + 1j * rng.standard_normal((k, m))
        c = rng.standard_normal((p, k)) + 1j * rng.standard_normal((p, k))
        return DiscreteLTI.from_diagonal(np.r_[lam, lam.conj()], np.vstack([b, b.conj()]),
                                         np.hstack([c, c.conj()]) / 2,
                                         rng.standard_normal((p, m)))
    if kind == "dense":
        A = rng.standard_normal((n, n))
        A *= rng.uniform(0.3, 0.999) / max(abs(np.linalg.eigvals(A)))
    elif kind == "nonnormal":
        T = np.triu(2 * rng.standard_normal((n, n)), 1) + np.diag(rng.uniform(-0.95, 0.95, n))
        Q = np.linalg.qr(rng.standard_normal((n, n)))[0]
        A = Q @ T @ Q.T
    else:
        A = np.diag(rng.uniform(-0.99, 0.99, n))
    return DiscreteLTI(A, rng.standard_normal((n, m)), rng.standard_normal((p, n)),
                       rng.standard_normal((p, m)))


def hinf_ab13dd(E: DiscreteLTI) -> float:
    import slycot

    if E.n == 0:
        return float(np.linalg.norm(E.D, 2))
    g, _ = slycot.ab13dd("D", "I", "N", "D", E.n, E.m, E.p, E.A.copy(), np.eye(E.n),
                         E.B.copy(), E.C.copy(), E.D.copy(), tol=1e-12)
    return float(g)


def run(seeds, count):
    rows = []
    for kind in FAMILIES:
        excess, low, hank, viol, total = -np.inf, np.inf, 0.0, 0, 0
        for seed in seeds:
            rng = np.random.default_rng([seed, FAMILIES.index(kind)])
            for _ in range(count):
                G = draw(rng, kind)
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    full = hankel_norm_approximation(G, order=G.n)
                    r = int(rng.integers(0, max(full.minimal_order, 1)))
                    res = hankel_norm_approximation(G, order=r)
                E = G - res.reduced
                err = hinf_ab13dd(E)
                Lc, Lo = gramian_factors(E)
                h = float(np.linalg.svd(Lo.T @ Lc, compute_uv=False)[0])
                total += 1
                excess = max(excess, (err - res.tail) / res.rounding_term)
                low = min(low, (err - res.hankel_error) / res.hankel_error)
                hank = max(hank, abs(h - res.hankel_error) / res.hsv[0])
                viol += int(not res.lower_bound <= err <= res.error_bound)
        rows.append(dict(family=kind, systems=total, max_excess_over_rounding=excess,
                         min_rel_above_lower=low, max_hankel_dev_over_sigma1=hank,
                         violations=viol))
    return rows


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, nargs="+", default=[1, 2, 3])
    ap.add_argument("--count", type=int, default=60)
    ap.add_argument("--out", default=str(pathlib.Path(__file__).parent / "results"))
    args = ap.parse_args()
    from threadpoolctl import threadpool_limits

    with threadpool_limits(limits=1):
        rows = run(args.seeds, args.count)
    cmd = (f"python benchmarks/hankel_rounding.py --seeds {' '.join(map(str, args.seeds))} "
           f"--count {args.count}")
    lines = [
        f"`{cmd}` (BLAS threads: 1, threadpoolctl)", "",
        "| family | systems | max (err - tail) / rounding_term | min (err - sigma_r+1) / "
        "sigma_r+1 | max abs(Hankel err - sigma_r+1) / sigma_1 "
        "| outside [lower_bound, error_bound] |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for x in rows:
        lines.append(f"| {x['family']} | {x['systems']} | {x['max_excess_over_rounding']:.3g} | "
                     f"{x['min_rel_above_lower']:.2e} | {x['max_hankel_dev_over_sigma1']:.1e} | "
                     f"{x['violations']} |")
    text = "\n".join(lines) + "\n"
    print(text)
    out = pathlib.Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "hankel_rounding.md").write_text(text)
    (out / "hankel_rounding.json").write_text(json.dumps(dict(command=cmd, rows=rows), indent=1))


if __name__ == "__main__":
    main()
