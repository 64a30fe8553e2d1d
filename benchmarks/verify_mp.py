"""Re-check bound violations found by the strategies in 60-digit arithmetic.

Reads reproducer files (JSON lists of ``{A, B, C, D, r, method, match_dc}``, written from
failing draws of ``lti.testing.strategies.systems_and_orders``; those under
``benchmarks/results/strategy_failures_<commit>.json`` were found on main at that commit),
reduces each system with the current ``lti.balanced_truncation``, and evaluates the error
``|G(e^{jt}) - G_r(e^{jt})|`` of the returned float models with mpmath (60 digits) on 60
frequencies of ``[0, pi]`` plus 21 around the float peak. A case whose 60-digit error exceeds
``error_bound`` is a real violation, otherwise the float measurement was rounding noise.

Usage: ``python benchmarks/verify_mp.py benchmarks/results/strategy_failures_*.json``.
"""

from __future__ import annotations

import json
import sys

import mpmath
import numpy as np

from lti import DiscreteLTI, balanced_truncation, hinf_norm

mpmath.mp.dps = 60


def _solve(M, B):
    X = mpmath.matrix(B.rows, B.cols)
    for j in range(B.cols):
        x = mpmath.lu_solve(M, B.column(j))
        for i in range(B.rows):
            X[i, j] = x[i]
    return X


def mp_error(G: DiscreteLTI, Gr: DiscreteLTI, thetas) -> float:
    """max over thetas of sigma_max(G - Gr) in 60-digit arithmetic."""
    mats = [mpmath.matrix(np.asarray(X).tolist()) for X in (G.A, G.B, G.C, G.D)]
    A, B, C, D = mats
    Ar, Br, Cr, Dr = (mpmath.matrix(np.asarray(X).tolist()) for X in (Gr.A, Gr.B, Gr.C, Gr.D))
    best = mpmath.mpf(0)
    for t in thetas:
        z = mpmath.exp(1j * mpmath.mpf(float(t)))
        H = C * _solve(z * mpmath.eye(G.n) - A, B) + D
        Hr = (Cr * _solve(z * mpmath.eye(Gr.n) - Ar, Br) + Dr) if Gr.n else Dr
        best = max(best, max(abs(s) for s in mpmath.svd_c(H - Hr, compute_uv=False)))
    return float(best)


def main(paths) -> int:
    seen = set()
    for path in paths:
        for o in json.load(open(path)):
            G = DiscreteLTI(o["A"], o["B"], o["C"], o["D"])
            key = (G.n, o["r"], o["method"], o["match_dc"], round(G.A[0, 0], 8))
            if key in seen:
                continue
            seen.add(key)
            res = balanced_truncation(G, order=o["r"], method=o["method"], match_dc=o["match_dc"])
            e = hinf_norm(G - res.reduced)
            if e.value <= res.error_bound * (1 + 1e-9):
                print(f"{o['method']:4s} dc={o['match_dc']!s:5s} n={G.n} r={o['r']}: within the "
                      f"bound now (err {e.value:.3e} <= {res.error_bound:.3e})")
                continue
            th = np.concatenate([np.linspace(0, np.pi, 60), e.omega + np.linspace(-1e-3, 1e-3, 21)])
            th = np.unique(th[(th >= 0) & (th <= np.pi)])
            em = mp_error(G, res.reduced, th)
            verdict = "REAL violation" if em > res.error_bound else "float measurement noise"
            print(f"{o['method']:4s} dc={o['match_dc']!s:5s} n={G.n} r={o['r']}: float err "
                  f"{e.value:.3e}, 60-digit err {em:.3e}, bound {res.error_bound:.3e} -> {verdict}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
