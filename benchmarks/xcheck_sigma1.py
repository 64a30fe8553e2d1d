"""sigma_1 of bench_balanced's slow system (n = 64, rho = 0.9999): lti, SLICOT AB09AD and
the SB03OD factors against an mpmath reference, and sigma_1's sensitivity to a backward
error of size eps in A.

The reference solves A X A^T - X + B B^T = 0 for the stored (A, B) (B B^T formed in 40
digits): a double solve, then refinement steps whose residual is computed in 40 digits
(mpmath) and whose correction is solved in double, until the residual is ~1e-40 relative;
the same for Q. sigma_1^2 = lambda_max(P Q) by power steps from double precision's
eigenvector and the Rayleigh quotient in the Q inner product (PQ is self-adjoint there),
in 40 digits.

Usage: ``python benchmarks/xcheck_sigma1.py [--sizes 64] [--rho 0.9999]`` (about a minute
at n = 64, one core) writes ``benchmarks/results/xcheck_sigma1.md``. BLAS runs on one
thread (threadpoolctl).
"""

from __future__ import annotations

import argparse
import pathlib
import sys
import time
import warnings

import mpmath
import numpy as np
import scipy.linalg as sla
import slycot
from threadpoolctl import threadpool_limits

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent))
import lti  # noqa: E402
from benchmarks._provenance import git_revision  # noqa: E402
from benchmarks.bench_balanced import random_system  # noqa: E402
from lti._slycot import factor_slycot  # noqa: E402

mpmath.mp.dps = 40
_mpf = np.vectorize(mpmath.mpf, otypes=[object])
_float = np.vectorize(float, otypes=[float])


def refined_gramian(A, B, steps=4):
    Am, Bm = _mpf(A), _mpf(B)
    Qm = Bm.dot(Bm.T)
    X = _mpf(sla.solve_discrete_lyapunov(A, _float(Qm)))
    res = []
    for _ in range(steps):
        R = _float(Am.dot(X).dot(Am.T) - X + Qm)
        res.append(np.abs(R).max() / np.abs(_float(X)).max())
        X = X + _mpf(sla.solve_discrete_lyapunov(A, R))  # the full R (X0 is not symmetric)
    R = _float(Am.dot(X).dot(Am.T) - X + Qm)
    res.append(np.abs(R).max() / np.abs(_float(X)).max())
    return X, res


def reference_sigma1(G):
    P, rp = refined_gramian(G.A, G.B)
    Q, rq = refined_gramian(G.A.T, G.C.T)
    ev, V = np.linalg.eig(_float(P) @ _float(Q))
    v = _mpf(V[:, np.argmax(ev.real)].real)
    M = P.dot(Q)
    quotients = []
    for i in range(60):
        w = M.dot(v)
        v = w / mpmath.sqrt(w.dot(w))
        if i % 20 == 19:
            Qv = Q.dot(v)
            quotients.append(mpmath.sqrt(Qv.dot(P.dot(Qv)) / v.dot(Qv)))
    return quotients[-1], quotients, rp[-1], rq[-1]


def ab09ad_sigma1(A, B, C):
    n = A.shape[0]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return float(slycot.ab09ad("D", "B", "N", n, B.shape[1], C.shape[0], A.copy(), B.copy(),
                                   C.copy(), nr=n)[-1][0])


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[64])
    ap.add_argument("--rho", type=float, default=0.9999)
    ap.add_argument("--perturbations", type=int, default=6)
    ap.add_argument("--out", default=str(pathlib.Path(__file__).parent / "results"))
    args = ap.parse_args(argv)
    t0 = time.perf_counter()
    lines = ["# sigma_1 against a 40-digit reference", "",
             "Command: `python benchmarks/xcheck_sigma1.py --sizes "
             f"{' '.join(map(str, args.sizes))} "
             f"--rho {args.rho}`; {git_revision()}; slycot {slycot.__version__}, mpmath "
             f"{mpmath.__version__}; BLAS pinned to one thread (threadpoolctl).", ""]
    with threadpool_limits(1):
        for n in args.sizes:
            G = random_system(n, seed=n, rho=args.rho)  # bench_balanced's system
            s_ref, quotients, rp, rq = reference_sigma1(G)
            Lc = np.asarray(factor_slycot(G.A, G.B, False))
            Lo = np.asarray(factor_slycot(G.A, G.C.T, True))
            s_od = float(np.linalg.svd(Lo.T @ Lc, compute_uv=False)[0])
            rows = [("lti.hankel_singular_values", float(lti.hankel_singular_values(G)[0])),
                    ("SLICOT AB09AD", ab09ad_sigma1(G.A, G.B, G.C)),
                    ("SLICOT SB03OD factors, svd(Lo^T Lc)", s_od)]
            lines += [f"## n = {n}, rho = {args.rho} (bench_balanced.random_system(n, seed=n))", "",
                      f"Reference sigma_1 = {mpmath.nstr(s_ref, 25)} (last Rayleigh quotients "
                      f"{', '.join(mpmath.nstr(q, 20) for q in quotients)}; final relative "
                      f"residuals P {rp:.1e}, Q {rq:.1e}).", "",
                      "| sigma_1 from | value | relative error |", "|---|---|---|"]
            for name, s in rows:
                err = float(abs(mpmath.mpf(s) - s_ref) / s_ref)
                lines.append(f"| {name} | {s!r} | {err:.2e} |")
            rng = np.random.default_rng(0)
            moves = []
            for _ in range(args.perturbations):
                E = rng.standard_normal(G.A.shape)
                E *= np.finfo(float).eps * np.linalg.norm(G.A, 2) / np.linalg.norm(E, 2)
                s = ab09ad_sigma1(G.A + E, G.B, G.C)
                moves.append(float((mpmath.mpf(s) - s_ref) / s_ref))
            lines += ["", f"AB09AD's sigma_1 of A + E, random E with ||E||_2 = eps ||A||_2 "
                      f"({args.perturbations} draws), relative to the reference: "
                      + ", ".join(f"{x:+.2e}" for x in moves) + "."]
            # what a Schur-based method starts from: A = Z T Z^T up to dgees' backward error
            T, Z = sla.schur(G.A, output="real")
            Ap = _float(_mpf(Z).dot(_mpf(T)).dot(_mpf(Z).T))
            s_schur = reference_sigma1(lti.DiscreteLTI(Ap, G.B, G.C))[0]
            lines += ["", "Real Schur form of A (scipy dgees): ||fl(Z T Z^T) - A||_F / ||A||_F = "
                      f"{np.linalg.norm(Ap - G.A) / np.linalg.norm(G.A):.2e}, ||Z^T Z - I||_F = "
                      f"{np.linalg.norm(Z.T @ Z - np.eye(n)):.2e}; the exact (40-digit) sigma_1 of "
                      "fl(Z T Z^T) is off the reference by "
                      f"{float((s_schur - s_ref) / s_ref):+.2e} relative.", ""]
    lines.append(f"{time.perf_counter() - t0:.0f} s.")
    path = pathlib.Path(args.out) / "xcheck_sigma1.md"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(lines) + "\n")
    print(path.read_text())


if __name__ == "__main__":
    main()
