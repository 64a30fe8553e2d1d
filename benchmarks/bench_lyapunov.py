"""Discrete Lyapunov solvers: time and relative residual against scipy, python-control, SLICOT.

Solves ``A X A^T - X + Q = 0`` with ``Q = B B^T`` (B: n x 2) for random stable ``A``:
``dense`` (Gaussian, rescaled to spectral radius rho) and ``diagonal`` (entries uniform in
``(-rho, rho)`` with one at rho), for n in ``--sizes`` and rho in ``--rhos``. Candidates:

- ``lti solve``   ``lti.solve_discrete_lyapunov`` (auto: recursive blocked Schur, or X = L L^T from
  the factored Smith iteration for a PSD Q of rank <= 32 where that is tried; diagonal: closed form)
- ``lti factor``  ``lti.lyapunov_factor`` (auto: factored squared Smith where it is tried and
  converges, else Hammarling; diagonal: closed form), X = L L^T; the ratio table names the path
- ``scipy``       ``scipy.linalg.solve_discrete_lyapunov``
- ``control``     ``control.dlyap``
- ``SB03MD``      ``slycot.sb03md57`` (Schur + Bartels-Stewart, X)
- ``SB03OD``      ``slycot.sb03od`` (Schur + Hammarling, Cholesky factor)

Residual: ``||A X A^T - X + Q||_F / ||Q||_F``. Time: minimum over ``--repeats`` of the
process CPU time (``--clock cpu``, default: robust on a shared machine; with one BLAS thread
it equals the single-core wall time) or of the wall time (``--clock wall``). BLAS threads are
pinned with threadpoolctl (``--threads``, default 1) and printed. All ratios come from this
one run. Then ``lti solve``'s ``refine`` options ("auto", the default; True, the full
refinement step; False) on the dense rho = 0.9999 case at the largest size. Accuracy
sections follow: strongly non-normal ``A`` (ours vs SB03MD/SB03OD); a
nearly singular ``X`` (single input, eigenvalues of X decaying to eps), where the factor is
compared with an accurate closed-form reference; and the residual ratios ours / SLICOT over
``--seeds`` random instances for rho = 0.9999 and non-normal ``A`` (median, min, max).

The ratio table also gives both lti times as multiples of ONE real Schur decomposition of
``A`` (``scipy.linalg.schur``, timed in the same run): the floor of any Schur-based dense
solver (the factored Smith path needs no Schur form and can go below it; the last two
columns name the paths the factor and the solve took: for the solve "schur+F" when Q's low-rank
factor gives the Schur-coordinate right-hand side, "+refine(slow)" when the default
refine="auto" kept its O(n^2) correction of the slowest modes, "+refine" when the full
refinement step ran,
"+refine(single)" when its correction ran in single precision, "+refine(single, bt double)"
when its back-transform had to be redone in double).

The header states whether lti's optional compiled kernels (numba, ``lti._jit``) ran and
numba's version; one untimed warm-up solve and factor (n = 512) precede the timings, so
their compilation or cache load is not timed.

Run: ``python benchmarks/bench_lyapunov.py [--threads 1] [--sizes 16 64 256 1024]
[--out benchmarks/results] [--name lyapunov]`` (``--out`` writes ``NAME.md`` with the command
and ``NAME.json``; ``--name lyapunov_rerun`` keeps a rerun beside the first run).
"""

from __future__ import annotations

import argparse
import json
import pathlib
import platform
import sys
import time
import warnings

import numpy as np
import scipy
import scipy.linalg as sla
from threadpoolctl import threadpool_info, threadpool_limits

# run as a script: the repository root after PYTHONPATH, so an lti tree given there wins
sys.path.append(str(pathlib.Path(__file__).resolve().parents[1]))
import lti
from benchmarks._provenance import git_revision  # noqa: E402
from lti import lyapunov_factor, solve_discrete_lyapunov


def make_case(kind: str, n: int, rho: float, seed: int = 0):
    rng = np.random.default_rng(seed + n)
    if kind == "dense":
        A = rng.standard_normal((n, n))
        A *= rho / np.max(np.abs(np.linalg.eigvals(A)))
    else:
        a = rng.uniform(-rho, rho, n)
        a[0] = rho
        A = np.diag(a)
    B = rng.standard_normal((n, 2))
    return A, B


def residual(A, X, Q):
    return float(np.linalg.norm(A @ X @ A.T - X + Q) / np.linalg.norm(Q))


def candidates():
    """name -> (kind of output, callable (A, B) -> X or L)."""
    import control
    import slycot

    def sb03md(A, B):
        Q = B @ B.T
        _, _, X, scale, _, _, _ = slycot.sb03md57(
            A.copy(), C=-Q, dico="D", job="X", fact="N", trana="T"
        )
        return X / scale

    def sb03od(A, B):
        n, m = B.shape
        Bp = np.zeros((n, max(n, m)))
        Bp[:, :m] = B
        U, scale, _ = slycot.sb03od(n, m, A.copy(), np.zeros((n, n)), Bp, "D", trans="T")
        return U[:n, :n] / scale

    return {
        "lti solve": ("X", lambda A, B: solve_discrete_lyapunov(A, B @ B.T)),
        "lti factor": ("L", lambda A, B: lyapunov_factor(A, B)),
        "scipy": ("X", lambda A, B: sla.solve_discrete_lyapunov(A, B @ B.T)),
        "control": ("X", lambda A, B: np.asarray(control.dlyap(A, B @ B.T))),
        "SB03MD": ("X", sb03md),
        "SB03OD": ("L", sb03od),
    }


def factor_path(kind, A, B) -> str:
    """Which path ``lyapunov_factor(A, B)`` (method "auto") takes, re-derived outside the
    timing: "diagonal", "smith" (tried and converged) or "hammarling"."""
    from lti._smith import SMITH_AUTO_ITER, SMITH_MAX_GROWTH, smith_factor, try_smith

    if kind != "dense":
        return "diagonal"
    n = A.shape[0]
    if try_smith(n, A, B) and smith_factor(A, B, False, SMITH_AUTO_ITER,
                                           SMITH_MAX_GROWTH) is not None:
        return "smith"
    return "hammarling"


def solve_path(kind, A, Q) -> str:
    """Which path ``solve_discrete_lyapunov(A, Q)`` (method "auto") takes, re-derived outside
    the timing: "diagonal", "smith" (X = L L^T, Q of low rank), or "schur" with "+F" when the
    Schur-coordinate right-hand side comes from Q's low-rank factor, "+refine(slow)" when the
    default refine="auto" kept the O(n^2) slow-mode correction, and "+refine" when the full
    residual-triggered refinement step ran ("+refine(single)" when its correction was
    solved in single precision and kept by its probe check, "+refine(single, bt double)"
    when that needed the back-transform in double precision)."""
    from lti import _stein, _stein_slow
    from lti._schur import real_schur
    from lti._validation import symmetrize_
    from lti.lyapunov import _factored_solve

    if kind != "dense":
        return "diagonal"
    X, F = _factored_solve(A, Q)
    if X is not None:
        return "smith"
    S = real_schur(A)
    X0 = _stein.solve_schur(A, Q, S, factor=F)
    path = "schur" + ("+F" if F is not None else "")
    leaf = _stein._leaf_kernel.compiled()
    if A.shape[0] >= _stein._SLOW_MIN and leaf is not None:
        probe = _stein_slow.ResidualProbe(A, X0, Q)  # refine="auto", as solve_schur
        if probe.estimate() <= _stein.REFINE_RTOL * _stein.fro_norm(Q):
            return path
        corr = _stein_slow.slow_correction(A, X0, Q, S, leaf)
        if corr is not None and probe.ratio(*corr) <= _stein_slow.SLOW_TOL:
            return path + "+refine(slow)"
    R = symmetrize_((A @ X0) @ A.T - X0 + Q)  # as solve_schur computes it
    r0 = np.linalg.norm(R) / np.linalg.norm(Q)
    if not r0 > _stein.REFINE_RTOL:
        return path
    bt = None
    if A.shape[0] >= _stein._SINGLE_MIN and r0 <= _stein._SINGLE_MAX_RESIDUAL:
        bt = _stein.single_correction_parts(A, R, S.T, S.Z)[1]
    return path + {None: "+refine", "single": "+refine(single)",
                   "double": "+refine(single, bt double)"}[bt]


def jit_info() -> str:
    """Whether lti's compiled kernels ran (``lti._jit``), and numba's version."""
    from lti import _jit

    if not _jit.available():
        return "lti._jit.enabled() = False (numba not installed)"
    import numba

    return f"lti._jit.enabled() = {_jit.enabled()}, numba {numba.__version__}"


def warm_up():
    """One solve and one factor at n = 512, rho = 0.9999 before any timing: numba's import,
    compilation (first use) or cache load of every kernel these paths use (the slow-mode
    correction of the default refine="auto", and the full step's single precision correction
    through refine=True) stay out of the timed calls."""
    A, B = make_case("dense", 512, 0.9999)
    solve_discrete_lyapunov(A, B @ B.T)
    solve_discrete_lyapunov(A, B @ B.T, refine=True)
    lyapunov_factor(A, B)


def timed(fn, clock, repeats):
    best, out = np.inf, None
    for _ in range(repeats):
        t0 = time.process_time() if clock == "cpu" else time.perf_counter()
        out = fn()
        t1 = time.process_time() if clock == "cpu" else time.perf_counter()
        best = min(best, t1 - t0)
    return best, out


def run_table(args):
    cands = candidates()
    rows, ratios = [], []
    for kind in ("dense", "diagonal"):
        for rho in args.rhos:
            for n in args.sizes:
                A, B = make_case(kind, n, rho)
                Q = B @ B.T
                reps = args.repeats if n <= 256 else 1
                times = {}
                times["schur"], _ = timed(lambda A=A: sla.schur(A, output="real"), args.clock,
                                          reps)
                for name, (out, fn) in cands.items():
                    t, R = timed(lambda fn=fn, A=A, B=B: fn(A, B), args.clock, reps)
                    X = R @ R.T if out == "L" else R
                    times[name] = t
                    rows.append((kind, rho, n, name, t, residual(A, X, Q)))
                ratios.append(
                    (kind, rho, n, times["lti solve"] / times["SB03MD"],
                     times["lti factor"] / times["SB03OD"], times["schur"],
                     times["lti solve"] / times["schur"], times["lti factor"] / times["schur"],
                     factor_path(kind, A, B), solve_path(kind, A, Q))
                )
                print(f"  done {kind} rho={rho} n={n}", flush=True)
    return rows, ratios


def run_refine_modes(args):
    """``solve_discrete_lyapunov``'s ``refine`` options on the dense rho = 0.9999 case at the
    largest size: "auto" (default: the O(n^2) slow-mode correction where its probes allow),
    True (the full refinement step), False (none); time and residual each."""
    n = max(args.sizes)
    A, B = make_case("dense", n, 0.9999)
    Q = B @ B.T
    reps = args.repeats if n <= 256 else 1
    out = []
    for mode in ("auto", True, False):
        t, X = timed(lambda mode=mode: solve_discrete_lyapunov(A, Q, refine=mode), args.clock, reps)
        out.append((n, repr(mode), t, residual(A, X, Q)))
    return out


def run_large_diagonal(args):
    out = []
    for n in args.diag_large:
        A, B = make_case("diagonal", n, 0.9999)
        a = np.diag(A).copy()
        Q = B @ B.T
        t, X = timed(lambda a=a, Q=Q: solve_discrete_lyapunov(a, Q), args.clock, 3)
        R = (a[:, None] * X) * a[None, :] - X + Q
        out.append((n, "lti solve (1-D a)", t, float(np.linalg.norm(R) / np.linalg.norm(Q))))
        t, X = timed(lambda A=A, Q=Q: solve_discrete_lyapunov(A, Q), args.clock, 3)
        R = (a[:, None] * X) * a[None, :] - X + Q
        out.append((n, "lti solve (2-D diag A)", t, float(np.linalg.norm(R) / np.linalg.norm(Q))))
        t, L = timed(lambda a=a, B=B: lyapunov_factor(a, B), args.clock, 1)
        X = L @ L.T
        R = (a[:, None] * X) * a[None, :] - X + Q
        out.append((n, "lti factor (1-D a)", t, float(np.linalg.norm(R) / np.linalg.norm(Q))))
    return out


def run_accuracy(args):
    """Hard cases: strongly non-normal A, and nearly singular X for the factor."""
    cands = candidates()
    rows = []
    for n in args.hard_sizes:
        rng = np.random.default_rng(7 + n)
        Z = np.linalg.qr(rng.standard_normal((n, n)))[0]
        N = (2.4 / np.sqrt(n)) * np.triu(rng.standard_normal((n, n)), 1)  # ||N|| ~ 1.7 sqrt(n)
        A = Z @ (np.diag(rng.uniform(-1, 1, n)) + N) @ Z.T
        A *= 0.95 / np.max(np.abs(np.linalg.eigvals(A)))
        B = rng.standard_normal((n, 2))
        Q = B @ B.T
        for name in ("lti solve", "SB03MD", "lti factor", "SB03OD", "scipy"):
            out, fn = cands[name]
            R = fn(A, B)
            X = R @ R.T if out == "L" else R
            rows.append(("non-normal", n, name, residual(A, X, Q), float(np.linalg.norm(X))))
        # nearly singular X: A = Z diag(a) Z^T, one input; reference from the closed form
        a = rng.uniform(-0.9, 0.9, n)
        A = Z @ np.diag(a) @ Z.T
        b = rng.standard_normal((n, 1))
        B = Z @ b
        Xref = Z @ ((b @ b.T) / (1 - a[:, None] * a[None, :])) @ Z.T
        ev = np.linalg.eigvalsh(Xref)
        for name in ("lti factor", "SB03OD", "lti solve", "SB03MD"):
            out, fn = cands[name]
            R = fn(A, B)
            X = R @ R.T if out == "L" else R
            err = float(np.linalg.norm(X - Xref) / np.linalg.norm(Xref))
            rows.append(("nearly singular", n, name, err, float(ev[0] / ev[-1])))
    return rows


def run_seed_ratios(args):
    """Residual ratio ours / SLICOT over several seeds (one sample is noise-dominated)."""
    cands = candidates()
    out = []
    for label, n in [(c, n) for c in ("rho=0.9999", "non-normal") for n in args.hard_sizes]:
        ratios = {"lti solve / SB03MD": [], "lti factor / SB03OD": []}
        for seed in range(args.seeds):
            rng = np.random.default_rng(1000 * seed + n)
            if label == "rho=0.9999":
                A = rng.standard_normal((n, n))
            else:
                Z = np.linalg.qr(rng.standard_normal((n, n)))[0]
                N = (2.4 / np.sqrt(n)) * np.triu(rng.standard_normal((n, n)), 1)
                A = Z @ (np.diag(rng.uniform(-1, 1, n)) + N) @ Z.T
            A *= (0.9999 if label == "rho=0.9999" else 0.95) / np.max(
                np.abs(np.linalg.eigvals(A))
            )
            B = rng.standard_normal((n, 2))
            Q = B @ B.T
            res = {}
            for name in ("lti solve", "SB03MD", "lti factor", "SB03OD"):
                kind, fn = cands[name]
                R = fn(A, B)
                res[name] = residual(A, R @ R.T if kind == "L" else R, Q)
            ratios["lti solve / SB03MD"].append(res["lti solve"] / res["SB03MD"])
            ratios["lti factor / SB03OD"].append(res["lti factor"] / res["SB03OD"])
        for key, vals in ratios.items():
            v = np.array(vals)
            out.append((label, n, key, float(np.median(v)), float(v.min()), float(v.max())))
    return out


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--sizes", type=int, nargs="*", default=[16, 64, 256, 1024])
    parser.add_argument("--rhos", type=float, nargs="+", default=[0.95, 0.9999])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--clock", choices=["cpu", "wall"], default="cpu")
    parser.add_argument("--diag-large", type=int, nargs="*", default=[4096])
    parser.add_argument("--hard-sizes", type=int, nargs="*", default=[64, 256])
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--out", default=None,
                        help="folder for NAME.md / NAME.json (e.g. benchmarks/results)")
    parser.add_argument("--name", default="lyapunov",
                        help="result file stem (default lyapunov; e.g. lyapunov_rerun for a rerun)")
    args = parser.parse_args()
    warnings.simplefilter("ignore")  # slycot's old-signature DeprecationWarnings
    lines, data = [], {"command": "python benchmarks/bench_lyapunov.py " + " ".join(sys.argv[1:])}

    def emit(line=""):
        print(line, flush=True)
        lines.append(line)

    # import the peers first: a BLAS that is loaded inside threadpool_limits is not limited
    # (slycot's bundled OpenBLAS then ran SB03MD/SB03OD with 2 threads)
    import control
    import slycot

    with threadpool_limits(limits=args.threads):
        pools = ", ".join(f"{p['internal_api']}={p['num_threads']}" for p in threadpool_info())
        emit(f"`{data['command']}` ({platform.processor() or platform.machine()})")
        emit()
        emit(f"python {platform.python_version()}, numpy {np.__version__}, scipy "
             f"{scipy.__version__}, control {control.__version__}, slycot "
             f"{slycot.__version__}, lti {lti.__version__}; BLAS threads (threadpoolctl): "
             f"{pools}; clock: {args.clock} (min of {args.repeats} for n <= 256, 1 run above); "
             f"code: {git_revision()}; compiled kernels: {jit_info()} (warm-up solve and "
             "factor at n = 512 before the timings: compilation / cache load not timed)")
        warm_up()
        rows, ratios = run_table(args) if args.sizes else ([], [])
        data["rows"], data["ratios"] = rows, ratios
        emit("\n| A | rho | n | method | time [s] | rel. residual |")
        emit("|---|---|---|---|---|---|")
        for kind, rho, n, name, t, r in rows:
            emit(f"| {kind} | {rho} | {n} | {name} | {t:.4f} | {r:.2e} |")
        emit("\n| A | rho | n | lti solve / SB03MD | lti factor / SB03OD | one Schur [s] "
             "| lti solve / Schur | lti factor / Schur | lti factor path | lti solve path |")
        emit("|---|---|---|---|---|---|---|---|---|---|")
        for kind, rho, n, rs, rf, ts, rss, rfs, path, spath in ratios:
            emit(f"| {kind} | {rho} | {n} | {rs:.2f}x | {rf:.2f}x | {ts:.4f} | {rss:.2f}x "
                 f"| {rfs:.2f}x | {path} | {spath} |")
        def timing_table(head, rows, label):  # 4 columns: label | n or method | time | residual
            emit("\n" + head)
            emit("|---|---|---|---|")
            for a, b, t, r in rows:
                emit(f"| {label(a, b)} | {t:.4f} | {r:.2e} |")

        if args.sizes:
            data["refine_modes"] = run_refine_modes(args)
            timing_table("| dense A, rho=0.9999: lti solve with refine= | n | time [s] "
                         "| rel. residual |", data["refine_modes"], lambda n, mode: f"{mode} | {n}")
        if args.diag_large:
            data["diag_large"] = run_large_diagonal(args)
            timing_table("| diagonal A, rho=0.9999 | method | time [s] | rel. residual |",
                         data["diag_large"], lambda n, name: f"n={n} | {name}")
        if args.hard_sizes:
            emit(
                "\n| case | n | method | rel. residual (non-normal) / rel. error vs reference "
                "(nearly singular) | ||X|| / min eig / max eig of X |"
            )
            emit("|---|---|---|---|---|")
            data["accuracy"] = run_accuracy(args)
            for case, n, name, r, extra in data["accuracy"]:
                emit(f"| {case} | {n} | {name} | {r:.2e} | {extra:.2e} |")
            emit(f"\n| case | n | residual ratio ({args.seeds} seeds) | median | min | max |")
            emit("|---|---|---|---|---|---|")
            data["seed_ratios"] = run_seed_ratios(args)
            for label, n, key, med, lo, hi in data["seed_ratios"]:
                emit(f"| {label} | {n} | {key} | {med:.2f} | {lo:.2f} | {hi:.2f} |")
    if args.out:
        out = pathlib.Path(args.out)
        out.mkdir(parents=True, exist_ok=True)
        (out / f"{args.name}.md").write_text("\n".join(lines) + "\n")
        (out / f"{args.name}.json").write_text(json.dumps(data, indent=1, default=float) + "\n")


if __name__ == "__main__":
    main()
