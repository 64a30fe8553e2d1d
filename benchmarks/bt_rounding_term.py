"""How much of ``BalancedTruncation.rounding_term`` the measured errors use (issue 14 item 3).

For five families of stable discrete-time systems (dense, resonant with poles up to
1 - 1e-4 from the unit circle, the strongly non-normal family of issue 14, FIR filters
from ``scipy.signal.firwin``, bidiagonal ``a I + s N``), reduce at the minimal order, at
the full order and at a random order, with and without ``match_dc``, and measure the error
independently of ``lti.hinf_norm`` (the larger of SLICOT AB13DD and a 20001-point sweep).
Prints, per family, the number of reductions, how many violate
``lower_bound <= err <= error_bound``, and the largest use of the rounding term
``max(err - (error_bound - rounding_term), (lower_bound + rounding_term) - err, 0) /
rounding_term`` (above 1 is a violation), and the median share of the rounding term in
the bound over the genuine reductions.

Writes the table to ``benchmarks/results/bt_rounding_term.md`` (BLAS pinned to one
thread with threadpoolctl; the header names the ``lti/`` tree measured).

Usage: ``python benchmarks/bt_rounding_term.py [--seeds 25]``.
"""

from __future__ import annotations

import argparse
import datetime
import pathlib
import warnings

import numpy as np
import scipy.linalg as sla
import scipy.signal as ss
from threadpoolctl import threadpool_limits

from lti import DiscreteLTI, balanced_truncation

RESULTS = pathlib.Path(__file__).resolve().parent / "results"


def nonnormal(rng):
    n, m, p = int(rng.integers(20, 31)), int(rng.integers(1, 3)), int(rng.integers(1, 3))
    T = np.triu(2 * rng.standard_normal((n, n)), 1) + np.diag(rng.uniform(-0.95, 0.95, n))
    Q = np.linalg.qr(rng.standard_normal((n, n)))[0]
    return DiscreteLTI(Q @ T @ Q.T, rng.standard_normal((n, m)), rng.standard_normal((p, n)),
                       rng.standard_normal((p, m)))


def resonant(rng):
    k, m, p = int(rng.integers(5, 13)), int(rng.integers(1, 3)), int(rng.integers(1, 3))
    rad, ang = 1 - 10 ** rng.uniform(-4, -0.5, k), rng.uniform(0.01, np.pi - 0.01, k)
    A = sla.block_diag(*[r * np.array([[np.cos(a), -np.sin(a)], [np.sin(a), np.cos(a)]])
                         for r, a in zip(rad, ang, strict=True)])
    Q = np.linalg.qr(rng.standard_normal((2 * k, 2 * k)))[0]
    return DiscreteLTI(Q @ A @ Q.T, rng.standard_normal((2 * k, m)),
                       rng.standard_normal((p, 2 * k)), rng.standard_normal((p, m)))


def dense(rng):
    n, m, p = int(rng.integers(4, 40)), int(rng.integers(1, 3)), int(rng.integers(1, 3))
    A = rng.standard_normal((n, n))
    A *= rng.uniform(0.3, 0.99) / np.max(np.abs(np.linalg.eigvals(A)))
    return DiscreteLTI(A, rng.standard_normal((n, m)), rng.standard_normal((p, n)),
                       rng.standard_normal((p, m)))


def fir(rng):
    N = int(rng.integers(8, 65))
    h = ss.firwin(N + 1, rng.uniform(0.1, 0.9))
    return DiscreteLTI(np.diag(np.ones(N - 1), -1), np.eye(N)[:, :1], h[1:][None, :],
                       h[:1][None, :])


def bidiag(rng):
    n, a, s = int(rng.integers(8, 25)), rng.uniform(0.2, 0.9), rng.uniform(0.3, 2.0)
    return DiscreteLTI(a * np.eye(n) + s * np.diag(np.ones(n - 1), -1), np.eye(n)[:, :1],
                       np.eye(n)[-1:])


FAMILIES = {"dense": dense, "resonant": resonant, "nonnormal": nonnormal, "fir": fir,
            "bidiagonal": bidiag}


def independent_hinf(E: DiscreteLTI) -> float:
    from slycot import ab13dd

    g = ab13dd("D", "I", "N", "D", E.n, E.m, E.p, E.A.copy(), np.eye(E.n), E.B.copy(),
               E.C.copy(), E.D.copy(), tol=1e-12)[0]
    H = E.frequency_response(np.linspace(0.0, np.pi, 20001))
    return max(float(g), float(np.max(np.linalg.svd(H, compute_uv=False)[:, 0])))


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seeds", type=int, default=25)
    args = parser.parse_args(argv)
    from benchmarks._provenance import git_revision

    stamp = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC")
    lines = [f"<!-- produced by: python benchmarks/bt_rounding_term.py --seeds {args.seeds} "
             f"({stamp}, {git_revision()}; BLAS pinned to 1 thread by threadpoolctl) -->",
             "| family | reductions | violations | reported uncertified (bound inf) | "
             "largest use of rounding_term | "
             "rounding_term / error_bound, median over 0 < r < n_min |",
             "|---|---:|---:|---:|---:|---:|"]
    print("\n".join(lines))
    with threadpool_limits(limits=1):
        lines += _rows(args.seeds)
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "bt_rounding_term.md").write_text("\n".join(lines) + "\n")
    return 0


def _rows(seeds: int) -> list[str]:
    rows = []
    for f, (name, make) in enumerate(FAMILIES.items()):
        count, bad, worst, share, unc = 0, 0, 0.0, [], 0
        for seed in range(seeds):
            rng = np.random.default_rng(1000 * f + seed)
            G = make(rng)
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                nmin = balanced_truncation(G, order=G.n).minimal_order
                for r in sorted({nmin, G.n, int(rng.integers(0, nmin + 1))}):
                    for dc in (False, True):
                        res = balanced_truncation(G, order=r, match_dc=dc)
                        count += 1
                        if not res.reduced.is_stable():  # infinite error: a violation
                            bad += 1
                            continue
                        if not np.isfinite(res.error_bound):  # lti says: not certified
                            unc += 1
                            continue
                        err = independent_hinf(G - res.reduced)
                        rt = res.rounding_term
                        use = max(err - (res.error_bound - rt),
                                  (res.lower_bound + rt if res.lower_bound > 0 else 0) - err,
                                  0.0) / rt
                        bad += not (res.lower_bound <= err <= res.error_bound)
                        worst = max(worst, use)
                        if 0 < res.order < nmin:
                            share.append(rt / res.error_bound)
        rows.append(f"| {name} | {count} | {bad} | {unc} | {worst:.3g} | "
                    f"{np.median(share):.2g} |")
        print(rows[-1])
    return rows


if __name__ == "__main__":
    raise SystemExit(main())
