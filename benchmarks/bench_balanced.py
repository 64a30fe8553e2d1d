"""Balanced truncation: time and accuracy against slycot AB09AD, pyMOR and python-control.

For random stable discrete-time systems (dense A, spectral radius 0.95, m = p = 2) of order
n in {16, 64, 256, 1024}, reduce to r = n / 4 with

* ``lti.balanced_truncation`` (square root, "sr"; also the balancing-free "bfsr"),
* slycot ``ab09ad`` (SLICOT AB09AD, square-root balance & truncate, dico="D"),
* pyMOR ``BTReductor`` (discrete-time LTIModel, its default dense Lyapunov backend),
* python-control ``balred`` (which treats the system as continuous-time; its result is read
  back as the discrete-time model a user would take it for),

and print a markdown table: the best time of ``--repeat`` runs (process CPU time by default,
``--clock wall`` for wall time; a peer's time is its call alone, its result is made a
DiscreteLTI after the timing), the ratio to AB09AD
(measured in this run, BLAS threads pinned with threadpoolctl), the H-infinity error
``||G - G_r||`` measured with ``lti.hinf_norm``, the discrete-time bound ``2 sum_{i>r}
sigma_i`` and error / bound (<= 1 for a correct discrete-time balanced truncation). A
second table compares our Hankel singular values with AB09AD's (relative difference for
``sigma >= 1e-8 sigma_1``). Every time is also given as a ratio to ONE real Schur
decomposition of ``A`` (``scipy.linalg.schur``, the floor of a dense BT), measured in the
same run.

The modal table (``--modal``, on by default) times ``lti.balanced_truncation`` on the
adapter's systems: N states (real diagonal, or N/2 conjugate pairs from
``DiscreteLTI.from_diagonal``), H inputs and outputs, ``D = 0``, r = N/4: the closed-form
modal path (:mod:`lti.modal`) against the general path it replaces (the same call with the
modal dispatch switched off, in the same run), and checks that both give the same HSVs and
reduced transfer function.

``--rho`` sets the spectral radius of the random systems (default 0.95): ``--rho 0.9999``
gives slowly decaying systems, where the squared-Smith path cannot converge and BT goes
through the Schur form and Hammarling's method (``balanced_slow.md``, written with
``--rho 0.9999 --sizes 64 128 256 512 1024 --peers AB09AD --name balanced_slow``;
``--peers`` picks the peers to time, default all three).

Usage: ``python benchmarks/bench_balanced.py [--sizes 16 64 256 1024] [--threads 1]
[--repeat 5] [--hinf-max-n 1024] [--no-modal] [--rho 0.95] [--out benchmarks/results]``;
``--out`` writes ``balanced.md`` (the tables, with the command) and ``balanced.json``.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import pathlib
import platform
import sys
import time
import warnings

import numpy as np
import scipy.linalg as sla

# run as a script: the repository root after PYTHONPATH, so an lti tree given there wins
sys.path.append(str(pathlib.Path(__file__).resolve().parents[1]))
from benchmarks._provenance import git_revision  # noqa: E402
from lti import DiscreteLTI, balanced_truncation, hankel_singular_values, hinf_norm


def random_system(n: int, seed: int, rho: float = 0.95, m: int = 2, p: int = 2) -> DiscreteLTI:
    rng = np.random.default_rng(seed)
    A = rng.standard_normal((n, n))
    A *= rho / np.max(np.abs(np.linalg.eigvals(A)))
    return DiscreteLTI(A, rng.standard_normal((n, m)), rng.standard_normal((p, n)),
                       rng.standard_normal((p, m)))


CLOCK = {"cpu": time.process_time, "wall": time.perf_counter}
_clock = CLOCK["cpu"]


def jit_line() -> str:
    """Whether lti's optional compiled kernels (lti._jit, numba) ran, and numba's version."""
    from lti import _jit

    version = __import__("numba").__version__ if _jit.available() else "not installed"
    return (f"compiled kernels: lti._jit.enabled() = {_jit.enabled()}, numba {version} "
            "(compilation happens in an untimed reduction before each n's timings)")


def best_time(fn, repeat: int):
    """Minimum over `repeat` runs of the process CPU time (``--clock cpu``: robust on a
    shared machine, equal to the wall time with one BLAS thread) or of the wall time."""
    best, out = np.inf, None
    for _ in range(repeat):
        t0 = _clock()
        out = fn()
        best = min(best, _clock() - t0)
    return best, out


# ---------------------------------------------------------------------------- methods


def run_ours(G, r, method):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the cap at the minimal order is reported once
        res = balanced_truncation(G, order=r, method=method)
    return res.reduced


def run_ab09ad(G, r):
    import slycot

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        nr, Ar, Br, Cr, hsv = slycot.ab09ad(
            "D", "B", "N", G.n, G.m, G.p, G.A.copy(), G.B.copy(), G.C.copy(), nr=r
        )
    return Ar[:nr, :nr], Br[:nr], Cr[:, :nr], G.D  # matrices (see _peer_system)


def run_pymor(G, r):
    from pymor.core.logger import set_log_levels
    from pymor.models.iosys import LTIModel
    from pymor.reductors.bt import BTReductor

    set_log_levels({"pymor": "ERROR"})
    model = LTIModel.from_matrices(G.A, G.B, G.C, G.D, sampling_time=1)
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        rom = BTReductor(model).reduce(r)
    mats = rom.to_matrices()  # (A, B, C, D, E)
    A, B, C, D, E = (np.asarray(M.todense() if hasattr(M, "todense") else M)
                     if M is not None else None for M in mats)
    if E is not None:
        A, B = np.linalg.solve(E, A), np.linalg.solve(E, B)
    return A, B, C, G.D if D is None else D


def run_balred(G, r):
    import control

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        red = control.balred(control.ss(G.A, G.B, G.C, G.D, True), r)
    # balred returns a continuous-time system (dt = 0); read it as the discrete model
    return red.A, red.B, red.C, red.D


def _peer_system(out) -> DiscreteLTI:
    """A peer's reduced matrices as a DiscreteLTI, made after its timing: lti's constructor
    is not the peer's work, and inside the timing it made the AB09AD reference depend on the
    lti tree measured (its cost fell from ~25 to ~13 us, 18 % of AB09AD's 138 us at n = 16)."""
    return out if isinstance(out, DiscreteLTI) else DiscreteLTI(*out)


PEERS = {"AB09AD": ("slycot AB09AD", "slycot", run_ab09ad),
         "pyMOR": ("pyMOR BTReductor", "pymor", run_pymor),
         "balred": ("control balred", "control", run_balred)}


def available(peers=tuple(PEERS)):
    methods = {
        "lti sr": lambda G, r: run_ours(G, r, "sr"),
        "lti bfsr": lambda G, r: run_ours(G, r, "bfsr"),
    }
    for name, mod, fn in (PEERS[p] for p in PEERS if p in peers):
        try:
            __import__(mod)
        except ImportError:
            print(f"(skipping {name}: {mod} is not installed)")
            continue
        methods[name] = fn
    return methods


def modal_system(N: int, H: int, kind: str, seed: int) -> DiscreteLTI:
    """An adapter layer's SSM: poles with |a| in (0.5, 0.999), D = 0."""
    rng = np.random.default_rng(seed)
    if kind == "real":
        return DiscreteLTI(np.diag(rng.uniform(0.5, 0.999, N)), rng.standard_normal((N, H)),
                           rng.standard_normal((H, N)))
    k = N // 2
    lam = rng.uniform(0.5, 0.999, k) * np.exp(1j * rng.uniform(0.01, 3.0, k))
    b = rng.standard_normal((k, H)) + 1j * rng.standard_normal((k, H))
    c = rng.standard_normal((H, k)) + 1j * rng.standard_normal((H, k))
    return DiscreteLTI.from_diagonal(np.r_[lam, lam.conj()], np.vstack([b, b.conj()]),
                                     np.hstack([c, c.conj()]) / 2)


def run_modal(repeat: int):
    """Rows (kind, N, H, t_modal, t_general, HSV diff / sigma_1, transfer-function diff)."""
    import lti.gramians as gramians

    rows = []
    modal_form = gramians.modal_form
    for kind in ("real", "complex pairs"):
        for N, H in ((32, 576), (64, 768)):
            G = modal_system(N, H, kind, seed=N)
            r = N // 4
            fast = balanced_truncation(G, order=r)
            assert gramians.stable_gramian_factors(G).path == "modal"
            t_fast, _ = best_time(lambda G=G, r=r: balanced_truncation(G, order=r), repeat)
            gramians.modal_form = lambda A: None  # the general path (diagonal / Smith / Schur)
            try:
                path = gramians.stable_gramian_factors(G).path
                slow = balanced_truncation(G, order=r)
                t_slow, _ = best_time(lambda G=G, r=r: balanced_truncation(G, order=r), repeat)
            finally:
                gramians.modal_form = modal_form
            dh = float(np.max(np.abs(fast.hsv - slow.hsv)) / slow.hsv[0])
            theta = np.linspace(0.0, np.pi, 64)
            Hf, Hs = fast.reduced.frequency_response(theta), slow.reduced.frequency_response(theta)
            dtf = float(np.max(np.abs(Hf - Hs)) / np.max(np.abs(Hs)))
            rows.append(dict(kind=kind, N=N, H=H, r=r, t_modal=t_fast, t_general=t_slow,
                             general_path=path, hsv_diff=dh, tf_diff=dtf))
            print(f"  modal {kind} N={N} H={H}: {t_fast * 1e3:.2f} ms vs {path} "
                  f"{t_slow * 1e3:.2f} ms", flush=True)
    return rows


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[16, 64, 256, 1024])
    parser.add_argument("--threads", type=int, default=1, help="BLAS threads (threadpoolctl)")
    parser.add_argument("--repeat", type=int, default=5, help="runs per timing (best of)")
    parser.add_argument("--hinf-max-n", type=int, default=1024,
                        help="measure the H-infinity error only up to this n")
    parser.add_argument("--no-modal", action="store_true", help="skip the modal table")
    parser.add_argument("--rho", type=float, default=0.95,
                        help="spectral radius of the random systems (default 0.95)")
    parser.add_argument("--peers", nargs="+", choices=tuple(PEERS), default=list(PEERS),
                        help="peers to time (default: all that are installed)")
    parser.add_argument("--clock", choices=tuple(CLOCK), default="cpu",
                        help="process CPU time (default) or wall time")
    parser.add_argument("--out", default=None,
                        help="folder for balanced.md / balanced.json (e.g. benchmarks/results)")
    parser.add_argument("--name", default="balanced",
                        help="stem of the result files in --out (default: balanced)")
    parser.add_argument("--note", default="",
                        help="a line added to the header (e.g. which lti tree is on PYTHONPATH)")
    args = parser.parse_args(argv)
    argv_s = " ".join(sys.argv[1:] if argv is None else argv)
    global _clock
    _clock = CLOCK[args.clock]

    from threadpoolctl import threadpool_info, threadpool_limits

    methods = available(args.peers)
    if "pyMOR BTReductor" in methods:
        from pymor.solvers.matrix_equations.default import _dense_backend

        print(f"pyMOR dense Lyapunov backend: {_dense_backend()}")
    rows, hsv_rows, modal_rows = [], [], []
    with threadpool_limits(limits=args.threads):
        libs = sorted({f"{d['internal_api']} {d.get('version')} ({d['num_threads']} threads)"
                       for d in threadpool_info()})
        header = [
            f"`python benchmarks/bench_balanced.py {argv_s}`",
            "",
            f"BLAS threads pinned to {args.threads} with threadpoolctl: {', '.join(libs)}; "
            f"python {platform.python_version()}, numpy {np.__version__}, "
            f"{platform.processor() or platform.machine()}; clock: {args.clock} time, best of "
            f"--repeat runs; code: {git_revision()}; random systems: spectral radius "
            f"{args.rho}, m = p = 2, r = n / 4",
            "",
            jit_line(),
        ] + (["", args.note] if args.note else [])
        print("\n".join(header) + "\n")
        for n in args.sizes:
            G = random_system(n, seed=n, rho=args.rho)
            r = max(n // 4, 1)
            repeat = max(1, args.repeat if n <= 256 else min(args.repeat, 2))
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # r > minimal order: capped, as AB09AD does
                ref_res = balanced_truncation(G, order=r)
            bound = ref_res.error_bound
            if ref_res.order < r:
                print(f"  n={n}: r = {r} exceeds the minimal order {ref_res.minimal_order} "
                      f"(HSVs > n eps sigma_1); every BT method keeps {ref_res.order} states")
            t_schur, _ = best_time(lambda G=G: sla.schur(G.A, output="real"), repeat)
            results = []
            for name, fn in methods.items():
                try:
                    t, Gr = best_time(lambda fn=fn, G=G, r=r: fn(G, r), repeat)
                    Gr = _peer_system(Gr)
                except Exception as exc:  # report, do not hide, a failing peer
                    results.append(dict(name=name, t=np.nan, err=f"failed: {type(exc).__name__}",
                                        ratio="", stable=""))
                    continue
                stable = Gr.is_stable()
                if not stable:
                    err_s, ratio = "inf (unstable)", "inf"
                elif n <= args.hinf_max_n:
                    err = hinf_norm(G - Gr).value
                    err_s, ratio = f"{err:.4e}", f"{err / bound:.3g}"
                else:
                    err_s, ratio = "not measured", ""
                results.append(dict(name=name, t=t, err=err_s, ratio=ratio,
                                    stable="yes" if stable else "NO"))
                print(f"  n={n:5d} {name:17s} {t:9.4f} s  err {err_s}  err/bound {ratio}",
                      flush=True)
            ref = next((x["t"] for x in results if x["name"] == "slycot AB09AD"), np.nan)
            for x in results:
                rows.append((n, r, x["name"], x["t"], x["t"] / ref, x["t"] / t_schur, x["err"],
                             bound, x["ratio"], x["stable"]))
            rows.append((n, r, "one scipy.linalg.schur(A)", t_schur, t_schur / ref, 1.0, "",
                         bound, "", ""))
            if "slycot AB09AD" in methods:
                import slycot

                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    hs = slycot.ab09ad("D", "B", "N", n, G.m, G.p, G.A.copy(), G.B.copy(),
                                       G.C.copy(), nr=r)[-1]
                ours = hankel_singular_values(G)
                keep = hs >= 1e-8 * hs[0]
                rel = np.max(np.abs(ours[keep] - hs[keep]) / hs[keep])
                hsv_rows.append((n, int(keep.sum()), rel, hs[0], hs[-1]))

        if not args.no_modal:
            modal_rows = run_modal(max(args.repeat, 20))

    lines = ["| n | r | method | time [s] | time / AB09AD | time / Schur | H-inf error "
             "| bound 2·Σσ_{i>r} | error / bound | reduced stable |",
             "|---:|---:|---|---:|---:|---:|---:|---:|---:|:---:|"]
    for n, r, name, t, rel, rel_schur, err_s, bound, ratio, stable in rows:
        rel_s = f"{rel:.2f}" if np.isfinite(rel) else ""
        rs_s = f"{rel_schur:.2f}" if np.isfinite(rel_schur) else ""
        t_s = f"{t:.4f}" if np.isfinite(t) else ""
        lines.append(f"| {n} | {r} | {name} | {t_s} | {rel_s} | {rs_s} | {err_s} | "
                     f"{bound:.4e} | {ratio} | {stable} |")
    if hsv_rows:
        lines += ["", "| n | HSVs compared (σ ≥ 1e-8 σ1) | max rel. diff vs AB09AD | σ1 | σn |",
                  "|---:|---:|---:|---:|---:|"]
        for n, k, rel, s1, sn in hsv_rows:
            lines.append(f"| {n} | {k} | {rel:.2e} | {s1:.4e} | {sn:.2e} |")
    if modal_rows:
        lines += ["", "| modal A | N | H | r | BT modal path [ms] | BT general path [ms] "
                  "| general path | speed-up | HSV diff / σ1 | reduced G diff (rel.) |",
                  "|---|---:|---:|---:|---:|---:|---|---:|---:|---:|"]
        for x in modal_rows:
            lines.append(f"| {x['kind']} | {x['N']} | {x['H']} | {x['r']} | "
                         f"{x['t_modal'] * 1e3:.2f} | {x['t_general'] * 1e3:.2f} | "
                         f"{x['general_path']} | {x['t_general'] / x['t_modal']:.1f}x | "
                         f"{x['hsv_diff']:.1e} | {x['tf_diff']:.1e} |")
    print("\n" + "\n".join(lines))
    if args.out:
        out = pathlib.Path(args.out)
        out.mkdir(parents=True, exist_ok=True)
        (out / f"{args.name}.md").write_text("\n".join(header) + "\n\n" + "\n".join(lines) + "\n")
        keys = ("n", "r", "method", "time_s", "time_over_ab09ad", "time_over_schur",
                "hinf_error", "bound", "error_over_bound", "reduced_stable")
        data = dict(command=header[0], blas=header[2], jit=header[4], rho=args.rho,
                    rows=[dict(zip(keys, row, strict=True)) for row in rows],
                    hsv=[dict(zip(("n", "compared", "max_rel_diff", "sigma1", "sigman"), h,
                                  strict=True)) for h in hsv_rows],
                    modal=modal_rows)
        (out / f"{args.name}.json").write_text(json.dumps(data, indent=1, default=float) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
