"""Large sparse Stein equations and balanced truncation: low-rank ADI (lti.lowrank).

2-D heat equation on the unit square (N x N interior grid, h = 1/(N+1), five-point
Laplacian L), explicit Euler with dt = 0.2 h^2: ``A = I + dt L`` (sparse, symmetric,
spectral radius 1 - O(h^2) -> 1 as n grows); one input patch ``[0.2, 0.4]^2``, two output
patches ``[0.6, 0.8] x [0.6, 0.8]`` and ``[0.6, 0.8] x [0.2, 0.4]`` (outputs weighted by h^2).
For n = N^2 in ``--sizes`` (default 900, 1e4, 1e5):

- ``lti P``       :func:`lti.lowrank.lowrank_factor` of ``A P A^T - P + B B^T = 0`` alone
- ``lti P,Q``     :func:`lti.lowrank.lowrank_gramian_factors` (both factors, shared LUs;
  default HSV rule ``hsv_rtol=1e-9``: ADI continues past the residual tolerance until the
  leading HSVs are estimated accurate to 1e-9)
- ``lti BT``      :func:`lti.balanced_truncation` of the sparse system (``order=--order``;
  rank column: HSVs resolved)
- ``pyMOR ADI``   pyMOR's low-rank ADI (``ADILyapunovSolver``, projection shifts) applied to
  the same Stein equation in its Cayley form ``(A - I) X (A + I)^T + (A + I) X (A - I)^T
  + 2 B B^T = 0`` (pyMOR's LR-ADI is for continuous-time equations only; its discrete-time
  low-rank solver falls back to a dense one, timed at the smallest n as ``pyMOR dense``).

Residual: ``||A Z Z^T A^T - Z Z^T + B B^T||_2 / ||B^T B||_2`` of the returned factor,
computed in low-rank form (:func:`lti.lowrank.lowrank_stein_residual`) for every
candidate. At the smallest n the 10 leading HSVs (those of the default path and those of
a residual-only stop, ``hsv_rtol=None``) are compared with the dense path
(:func:`lti.hankel_singular_values` of the dense system). Time: wall clock, BLAS threads
pinned with threadpoolctl (``--threads``, default 1) and printed; the process CPU time is
shown beside the wall time (with one thread they agree unless the machine is shared).

Run: ``python benchmarks/bench_sparse.py [--threads 1] [--sizes 900 10000 100000]``;
writes ``benchmarks/results/sparse.md`` and ``sparse.json`` (``--out``).
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

import numpy as np
import scipy
import scipy.sparse as sp
from threadpoolctl import threadpool_info, threadpool_limits

import lti
from lti import DiscreteLTI, balanced_truncation, hankel_singular_values
from lti.lowrank import lowrank_factor, lowrank_gramian_factors, lowrank_stein_residual
from lti.testing.systems import heat_2d

#: Largest n compared with the dense path (an n x n float64 matrix and its Schur form).
DENSE_MAX_N = 4000


def heat(N: int):
    """The issue's 2-D heat equation (lti.testing.systems.heat_2d)."""
    return heat_2d(N)


_CPU: list[float] = []  # process CPU time of the last timed() call


def lti_tree() -> str:
    """Git tree hash of ``lti/`` (survives rebases), marked when ``lti/`` has uncommitted
    changes ("unknown" outside git)."""
    import subprocess

    here = Path(__file__).parent
    try:
        out = subprocess.run(["git", "rev-parse", "--short", "HEAD:lti"], capture_output=True,
                             text=True, cwd=here, check=True).stdout.strip()
        dirty = subprocess.run(["git", "diff", "--quiet", "HEAD", "--", "lti"],
                               cwd=here.parent).returncode != 0
    except (OSError, subprocess.CalledProcessError):
        return "unknown"
    return f"lti/ tree {out}" + (" plus uncommitted changes" if dirty else "") + (
        " (git rev-parse --short HEAD:lti)")


def timed(f, *args, **kwargs):
    """``(result, wall seconds)``; the process CPU seconds go to ``_CPU[-1]``."""
    t, c = time.perf_counter(), time.process_time()
    out = f(*args, **kwargs)
    _CPU.append(time.process_time() - c)
    return out, time.perf_counter() - t


def _quiet_pymor():
    from pymor.core.logger import set_log_levels

    set_log_levels({"pymor": "WARN"})


def pymor_adi(A, B, tol):
    """pyMOR LR-ADI on the Cayley form of the Stein equation; returns Z (n x k) or None."""
    try:
        from pymor.operators.numpy import NumpyMatrixOperator
        from pymor.solvers.matrix_equations.adi import ADILyapunovSolver
        from pymor.solvers.matrix_equations.equations import LyapunovEquation
    except ImportError:
        return None
    _quiet_pymor()
    n = A.shape[0]
    I = sp.eye(n, format="csc")
    Ah = NumpyMatrixOperator((A - I).tocsc())
    Eh = NumpyMatrixOperator((A + I).tocsc())
    Bv = Ah.source.from_numpy(math.sqrt(2.0) * B)  # pyMOR >= 2025: vectors are columns
    eq = LyapunovEquation(Ah, Eh, Bv, trans=False, cont_time=True)
    Z = ADILyapunovSolver(adi_tol=tol).solve(eq)
    return Z.to_numpy()


def pymor_dense_disc(A, B):
    try:
        from pymor.operators.numpy import NumpyMatrixOperator
        from pymor.solvers.matrix_equations.equations import LyapunovEquation
    except ImportError:
        return None
    _quiet_pymor()
    Ao = NumpyMatrixOperator(A.toarray())
    eq = LyapunovEquation(Ao, None, Ao.source.from_numpy(B), trans=False, cont_time=False)
    return eq.solve_lr().to_numpy()


def rel_res(A, Z, B, transpose=False):
    return lowrank_stein_residual(A, Z, B, transpose=transpose) / np.linalg.norm(B.T @ B, 2)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--sizes", type=int, nargs="+", default=[900, 10000, 100000])
    parser.add_argument("--tol", type=float, default=1e-10)
    parser.add_argument("--order", type=int, default=10)
    parser.add_argument("--no-pymor", action="store_true")
    parser.add_argument("--pymor-max-n", type=int, default=100000,
                        help="largest n for pyMOR's ADI (one LU per projection shift)")
    parser.add_argument("--out", default=str(Path(__file__).parent / "results" / "sparse"))
    args = parser.parse_args()
    rows, notes = [], []
    with threadpool_limits(limits=args.threads):
        pools = ", ".join(f"{p['internal_api']}={p['num_threads']}" for p in threadpool_info())
        head = [
            "$ python " + " ".join(["benchmarks/bench_sparse.py", *sys.argv[1:]]),
            f"# bench_sparse: 2-D heat equation, explicit Euler dt = 0.2 h^2, 1 input, 2 outputs; "
            f"ADI tol {args.tol:g}",
            f"# lti {lti.__version__} ({lti_tree()}), numpy {np.__version__}, "
            f"scipy {scipy.__version__}, {platform.machine()}, python {platform.python_version()}",
            f"# BLAS threads (threadpoolctl): {pools}; clocks: wall and process CPU",
            "# load average at start (1, 5, 15 min): "
            + ", ".join(f"{x:.2f}" for x in os.getloadavg())
            + f" on {os.cpu_count()} CPUs (a shared machine: wall > CPU when loaded)",
        ]
        print("\n".join(head), flush=True)
        for n_req in args.sizes:
            N = int(round(math.sqrt(n_req)))
            A, B, C = heat(N)
            n = A.shape[0]
            rho = 1.0 - 0.2 * 8 * math.sin(math.pi / (2 * (N + 1))) ** 2  # largest eigenvalue
            F, t = timed(lowrank_factor, A, B, tol=args.tol)
            rows.append(dict(n=n, method="lti P", time_s=t, cpu_s=_CPU[-1], rank=F.rank,
                             iterations=F.iterations,
                             lus=len(F.shifts), residual=F.rel_residual, rho=rho))
            print(rows[-1], flush=True)
            (Fc, Fo), t = timed(lowrank_gramian_factors, A, B, C, tol=args.tol)
            rows.append(dict(n=n, method="lti P,Q", time_s=t, cpu_s=_CPU[-1],
                             rank=f"{Fc.rank}, {Fo.rank}",
                             iterations=Fc.iterations + Fo.iterations, lus=len(Fc.shifts),
                             residual=max(Fc.rel_residual, Fo.rel_residual), rho=rho,
                             hsv_rel_error_estimate=Fc.hsv_rel_error))
            print(rows[-1], flush=True)
            G = DiscreteLTI(A, B, C)
            res, t = timed(balanced_truncation, G, order=args.order)
            rows.append(dict(n=n, method=f"lti BT r={args.order}", time_s=t, cpu_s=_CPU[-1],
                             rank=res.hsv.size, iterations=None, lus=None,
                             residual=max(res.factor_residuals), rho=rho,
                             error_bound=res.error_bound, lower_bound=res.lower_bound))
            print(rows[-1], flush=True)
            if not args.no_pymor and n <= args.pymor_max_n:
                Z, t = timed(pymor_adi, A, B, args.tol)
                if Z is not None:
                    rows.append(dict(n=n, method="pyMOR ADI (Cayley)", time_s=t, cpu_s=_CPU[-1],
                                     rank=Z.shape[1], iterations=None, lus=None,
                                     residual=rel_res(A, Z, B), rho=rho))
                    print(rows[-1], flush=True)
            smallest = min(N_ * N_ for N_ in (int(round(math.sqrt(s))) for s in args.sizes))
            if n == smallest and n <= DENSE_MAX_N:  # the dense comparison needs n x n memory
                if not args.no_pymor:
                    Z, t = timed(pymor_dense_disc, A, B)
                    if Z is not None:
                        rows.append(dict(n=n, method="pyMOR dense (discrete)", time_s=t,
                                         cpu_s=_CPU[-1],
                                         rank=Z.shape[1], iterations=None, lus=None,
                                         residual=rel_res(A, Z, B), rho=rho))
                        print(rows[-1], flush=True)
                Gd = DiscreteLTI(A.toarray(), B, C)
                hd, td = timed(hankel_singular_values, Gd)
                k = 10
                variants = [("default (tol 1e-10, hsv_rtol 1e-9)", {}),
                            ("residual stop only (tol 1e-10, hsv_rtol=None)",
                             dict(hsv_rtol=None))]
                for label, kw in variants:
                    (Fc, Fo), t = timed(lowrank_gramian_factors, A, B, C, tol=args.tol, **kw)
                    hs = np.linalg.svd(Fo.Z.T @ Fc.Z, compute_uv=False)
                    dev = float(np.max(np.abs(hs[:k] - hd[:k]) / hd[:k]))
                    dev1 = float(np.max(np.abs(hs[:k] - hd[:k])) / hd[0])
                    est = "" if Fc.hsv_rel_error is None else (
                        f", estimated {Fc.hsv_rel_error:.1e}")
                    notes.append(
                        f"n = {n}, lowrank_gramian_factors {label}: leading {k} HSVs vs dense "
                        f"(lti.hankel_singular_values, {td:.2f} s): "
                        f"max_i |s_i - sigma_i| / sigma_i = {dev:.2e}{est}, "
                        f"max_i |s_i - sigma_i| / sigma_1 = {dev1:.2e} "
                        f"(sigma_1 = {hd[0]:.4e}, sigma_{k} = {hd[k - 1]:.3e}; "
                        f"{Fc.iterations} + {Fo.iterations} ADI steps, ranks {Fc.rank}, "
                        f"{Fo.rank}, {_CPU[-1]:.2f} s CPU)"
                    )
                    print(notes[-1], flush=True)
                    rows.append(dict(n=n, method=f"dense HSVs vs {label}",
                                     time_s=td, cpu_s=None,
                                     rank=None, iterations=None, lus=None, residual=None,
                                     rho=rho, hsv_max_rel_dev=dev, hsv_max_dev_sigma1=dev1,
                                     hsv_rel_error_estimate=Fc.hsv_rel_error))
    lines = ["```text", *head, "```", "",
             "| n | 1 - rho(A) | method | wall s | CPU s | rank k | ADI steps | LUs | "
             "rel. residual |", "|---:|---:|---|---:|---:|---:|---:|---:|---:|"]
    for r in rows:
        if r["method"].startswith("dense HSVs"):
            continue
        res_s = "" if r["residual"] is None else f"{r['residual']:.1e}"
        lines.append(
            f"| {r['n']} | {1 - r['rho']:.1e} | {r['method']} | {r['time_s']:.2f} | "
            f"{r['cpu_s']:.2f} | "
            f"{'' if r['rank'] is None else r['rank']} | "
            f"{'' if r['iterations'] is None else r['iterations']} | "
            f"{'' if r['lus'] is None else r['lus']} | {res_s} |"
        )
    bts = [r for r in rows if r["method"].startswith("lti BT")]
    lines += ["", "Balanced truncation of the sparse system (dense reduced model):", ""]
    for r in bts:
        lines.append(f"- n = {r['n']}: order {args.order}, lower bound sigma_(r+1) "
                     f"{r['lower_bound']:.3e}, error bound {r['error_bound']:.3e} "
                     f"(factor residuals <= {r['residual']:.1e} beside it)")
    for r in rows:
        if r["method"].startswith("pyMOR ADI"):
            mine = next(x for x in rows if x["n"] == r["n"] and x["method"] == "lti P")
            lines.append(f"- n = {r['n']}: pyMOR ADI / lti P wall time = "
                         f"{r['time_s'] / mine['time_s']:.1f}x "
                         f"(CPU {r['cpu_s'] / mine['cpu_s']:.1f}x)")
    for r in rows:
        if r["method"] == "lti P,Q":
            lines.append(f"- n = {r['n']}: lti P,Q (default hsv_rtol 1e-9) estimated relative "
                         f"error of the leading HSVs (>= 1e-6 sigma_1) "
                         f"{r['hsv_rel_error_estimate']:.1e}")
    lines += [""] + [f"- {s}" for s in notes]
    big = [r for r in rows if r["method"] == "lti P" and r["n"] >= 90000]
    for r in big:
        ok = r["residual"] <= 1e-10 and r["cpu_s"] <= 15.0
        lines.append(f"- goal at n = {r['n']} (one thread: residual <= 1e-10 in <= 15 s, judged "
                     f"on the process CPU time, which with one thread is the single-core time): "
                     f"residual {r['residual']:.1e} in {r['cpu_s']:.2f} s CPU "
                     f"({r['time_s']:.2f} s wall on this machine) -> "
                     f"{'met' if ok else 'NOT met'}")
    lines.append("- load average at the end (1, 5, 15 min): "
                 + ", ".join(f"{x:.2f}" for x in os.getloadavg()))
    text = "\n".join(lines) + "\n"
    print(text)
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.with_suffix(".md").write_text(text)
    out.with_suffix(".json").write_text(json.dumps(
        {"setting": head, "args": vars(args), "rows": rows, "notes": notes}, indent=1,
        default=str))


if __name__ == "__main__":
    main()
