"""Acceptance check of the certified balanced-truncation bounds (issue 14).

For three families of discrete-time systems

* ``nonnormal``: ``T = triu(2 randn(n, n), 1) + diag(uniform(-0.95, 0.95, n))``,
  ``A = Q T Q^T`` (``Q`` random orthogonal), n = 20..30, m, p in {1, 2};
* ``resonant``: lightly damped complex pole pairs (``1 - |lambda|`` log-uniform in
  [1e-4, 1e-1]) plus a few real poles, in a random orthogonal basis, n = 10..30,
  m, p in {1, 2};
* ``fir``: FIR filters from ``scipy.signal.firwin`` (orders 8..64, i.e. 9..65 taps) in
  shift-register form ``A = diag(ones(n - 1), -1)``, ``B = e_1``, ``C = h[1:]``, ``D = h[0]``;

every method (``sr``, ``bfsr``, ``auto``, each with and without ``match_dc``) is asked for
order r (nonnormal, resonant: one r per system drawn uniformly in ``1..n_min``; fir: every
r in ``1..n``) and checked for

* ``order == r`` (no collapse below the requested order when ``r <= n_min``),
* ``lower_bound <= err <= error_bound`` with ``err = ||G - G_r||_inf`` measured
  independently of ``lti.hinf_norm``: SLICOT AB13DD (slycot) on the error system built
  here from the matrices, or, without slycot, a dense frequency sweep with local refinement
  (which is a lower bound of the true norm, so a reported violation of the upper bound is
  real). ``MEAS_RTOL`` below is the relative accuracy allowed to that measurement,
* ``Ti T = I`` to 1e-8 relative: ``||Ti T - I||_2 <= 1e-8 max(||Ti||_2 ||T||_2, 1)`` (the
  rounding scale of the product; the absolute ``||Ti T - I||_2`` is reported as well).

``n_min`` is computed here too, independently of ``lti``: HSVs from scipy's
``solve_discrete_lyapunov`` Gramians, counted above ``1e-9 sigma_1`` (well above their
rounding level for these well-scaled families, so that every r <= n_min is a genuine
reduction). The bound ``error_bound`` is taken as the result reports it (after issue 14 it
includes the stated ``rounding_term``).

Prints a markdown table (violations per family and method, worst err / bound and
lower / err ratios, worst ``||Ti T - I||``) and writes it to
``benchmarks/results/check_bounds_<label>.md`` and ``.json``.

Usage: ``python benchmarks/check_bounds.py [--label main] [--systems 100] [--fir-orders 8 16
32 64] [--seed 0]``. ``run_cases`` is also used by a cheap default test
(``tests/lti/test_check_bounds.py``).
"""

from __future__ import annotations

import argparse
import json
import pathlib
import platform
import subprocess
import time
import warnings

import numpy as np
import scipy.linalg as sla
import scipy.signal
from scipy.optimize import minimize_scalar
from threadpoolctl import threadpool_limits

import lti
from lti import DiscreteLTI, balanced_truncation

try:
    import slycot
except ImportError:  # pragma: no cover - depends on the environment
    slycot = None

METHODS = [(m, dc) for m in ("sr", "bfsr", "auto") for dc in (False, True)]
MEAS_RTOL = 1e-9  # relative accuracy allowed to the independent H-infinity measurement
TI_T_TOL = 1e-8
RESULTS = pathlib.Path(__file__).resolve().parent / "results"


# ----------------------------------------------------------------------- families


def _orth(rng, n):
    Q, R = np.linalg.qr(rng.standard_normal((n, n)))
    return Q * np.sign(np.diag(R))


def nonnormal_system(seed: int) -> DiscreteLTI:
    """The non-normal family of issue 14 (its defect 1)."""
    rng = np.random.default_rng(seed)
    n = int(rng.integers(20, 31))
    m, p = int(rng.integers(1, 3)), int(rng.integers(1, 3))
    T = np.triu(2.0 * rng.standard_normal((n, n)), 1) + np.diag(rng.uniform(-0.95, 0.95, n))
    Q = _orth(rng, n)
    return DiscreteLTI(Q @ T @ Q.T, rng.standard_normal((n, m)), rng.standard_normal((p, n)),
                       rng.standard_normal((p, m)))


def resonant_system(seed: int) -> DiscreteLTI:
    """Lightly damped pole pairs, 1 - |lambda| in [1e-4, 1e-1], in a random basis."""
    rng = np.random.default_rng(10_000 + seed)
    n = int(rng.integers(10, 31))
    m, p = int(rng.integers(1, 3)), int(rng.integers(1, 3))
    A = np.zeros((n, n))
    k = 0
    while k + 2 <= n - 2:  # pairs, then two or three real poles
        rad = 1.0 - 10.0 ** rng.uniform(-4.0, -1.0)
        th = rng.uniform(0.01, np.pi - 0.01)
        c, s = rad * np.cos(th), rad * np.sin(th)
        A[k:k + 2, k:k + 2] = [[c, s], [-s, c]]
        k += 2
    while k < n:
        A[k, k] = rng.uniform(-0.95, 0.95)
        k += 1
    Q = _orth(rng, n)
    return DiscreteLTI(Q @ A @ Q.T, Q @ rng.standard_normal((n, m)),
                       rng.standard_normal((p, n)) @ Q.T, rng.standard_normal((p, m)))


def fir_system(order: int, seed: int = 0) -> DiscreteLTI:
    """A firwin low/band-pass filter with `order` + 1 taps in shift-register form."""
    rng = np.random.default_rng(20_000 + order + 1000 * seed)
    if seed % 2 == 0:
        h = scipy.signal.firwin(order + 1, rng.uniform(0.1, 0.6))
    else:
        lo = rng.uniform(0.1, 0.4)
        h = scipy.signal.firwin(order + 1, [lo, lo + 0.3], pass_zero=False)
    n = order
    A = np.diag(np.ones(n - 1), -1)
    B = np.zeros((n, 1))
    B[0, 0] = 1.0
    return DiscreteLTI(A, B, h[1:][None, :], [[h[0]]])


# ------------------------------------------------------ independent measurements


def independent_hsv(G: DiscreteLTI) -> np.ndarray:
    """HSVs from scipy's Bartels-Stewart Gramians (not lti's solvers)."""
    P = sla.solve_discrete_lyapunov(G.A, G.B @ G.B.T)
    Q = sla.solve_discrete_lyapunov(G.A.T, G.C.T @ G.C)
    ev = np.linalg.eigvals((P + P.T) @ (Q + Q.T) / 4.0).real
    return np.sqrt(np.sort(np.maximum(ev, 0.0))[::-1])


def error_system(G: DiscreteLTI, Gr: DiscreteLTI):
    """(A, B, C, D) of G - Gr, assembled here from the matrices."""
    A = sla.block_diag(np.asarray(G.A), np.asarray(Gr.A))
    B = np.vstack([G.B, Gr.B])
    C = np.hstack([G.C, -np.asarray(Gr.C)])
    return A, B, C, np.asarray(G.D) - np.asarray(Gr.D)


def _sigma_max(A, B, C, D, theta):
    n = A.shape[0]
    out = np.empty(np.size(theta))
    for k, t in enumerate(np.atleast_1d(theta)):
        H = D + C @ np.linalg.solve(np.exp(1j * t) * np.eye(n) - A, B)
        out[k] = np.linalg.norm(H, 2)
    return out


def sweep_hinf(A, B, C, D, n_grid: int = 4000) -> float:
    """Dense sweep on [0, pi] (plus pole angles) with Brent refinement of the 8 best local
    maxima: the gain at actual frequencies, hence a lower bound of ||G||_inf."""
    if A.shape[0] == 0:
        return float(np.linalg.norm(D, 2))
    poles = np.linalg.eigvals(A)
    th = np.unique(np.concatenate([np.linspace(0, np.pi, n_grid), np.abs(np.angle(poles))]))
    f = _sigma_max(A, B, C, D, th)
    loc = [i for i in range(th.size)
           if f[i] >= f[max(i - 1, 0)] and f[i] >= f[min(i + 1, th.size - 1)]]
    best = float(np.max(f))
    for i in sorted(loc, key=lambda i: -f[i])[:8]:
        lo, hi = th[max(i - 1, 0)], th[min(i + 1, th.size - 1)]
        if hi > lo:
            res = minimize_scalar(lambda t: -_sigma_max(A, B, C, D, t)[0], bounds=(lo, hi),
                                  method="bounded", options={"xatol": 1e-14})
            best = max(best, -float(res.fun))
    return best


def independent_hinf(A, B, C, D) -> tuple[float, str]:
    """||C (zI - A)^{-1} B + D||_inf by AB13DD (slycot) or, without it, a dense sweep."""
    n, m = B.shape
    p = C.shape[0]
    if n == 0:
        return float(np.linalg.norm(D, 2)), "D"
    if slycot is not None:
        g, _ = slycot.ab13dd("D", "I", "N", "D", n, m, p, A, np.eye(n), B, C, D, tol=1e-12)
        return float(g), "AB13DD"
    return sweep_hinf(A, B, C, D), "sweep"


# ----------------------------------------------------------------------- checking


def check_one(G: DiscreteLTI, r: int, method: str, match_dc: bool) -> dict:
    """Reduce G to order r and measure everything the acceptance asks for."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        res = balanced_truncation(G, order=r, method=method, match_dc=match_dc)
    err, how = independent_hinf(*error_system(G, res.reduced))
    ub, lb = float(res.error_bound), float(res.lower_bound)
    T, Ti = np.asarray(res.T), np.asarray(res.Ti)
    dev = float(np.linalg.norm(Ti @ T - np.eye(T.shape[1]), 2)) if T.size else 0.0
    rel = dev / max(float(np.linalg.norm(Ti, 2) * np.linalg.norm(T, 2)), 1.0) if T.size else 0.0
    upper_bad = not err <= ub * (1 + MEAS_RTOL)
    if upper_bad and how == "AB13DD" and np.isfinite(err):
        # confirm with the sweep (a lower bound of the norm); an infinite AB13DD value (a
        # reduced pole on the unit circle) is a violation as it stands
        sw = sweep_hinf(*error_system(G, res.reduced))
        upper_bad = not sw <= ub * (1 + MEAS_RTOL)
        err = max(err, sw)
    return {
        "n": G.n, "m": G.m, "p": G.p, "r": r, "method": method, "match_dc": match_dc,
        "order": int(res.order), "err": err, "error_bound": ub, "lower_bound": lb,
        "rounding_term": float(getattr(res, "rounding_term", 0.0)), "ti_t_dev": dev,
        "ti_t_rel": rel,
        "hinf_by": how,
        "collapse": int(res.order) != r,
        "upper": upper_bad,
        "lower": not lb <= err * (1 + MEAS_RTOL),
        "ti_t": not rel <= TI_T_TOL,
    }


def cases(n_systems: int, fir_orders, seed: int = 0):
    """(family, system, r) triples: one r per system in 1..n_min, every r for FIR."""
    rng = np.random.default_rng(seed)
    for fam, make in (("nonnormal", nonnormal_system), ("resonant", resonant_system)):
        for k in range(n_systems):
            G = make(seed * 100_000 + k)
            h = independent_hsv(G)
            nmin = int(np.count_nonzero(h > 1e-9 * h[0]))
            yield fam, G, int(rng.integers(1, max(nmin, 1) + 1))
    for j, order in enumerate(fir_orders):
        G = fir_system(order, seed=j)
        for r in range(1, G.n + 1):
            yield "fir", G, r


def run_cases(n_systems: int = 100, fir_orders=(8, 16, 24, 32, 48, 64), seed: int = 0):
    rows = []
    for fam, G, r in cases(n_systems, fir_orders, seed):
        for method, dc in METHODS:
            row = check_one(G, r, method, dc)
            row["family"] = fam
            rows.append(row)
    return rows


def summarise(rows) -> list[dict]:
    out = []
    for fam in dict.fromkeys(r["family"] for r in rows):
        for method, dc in METHODS:
            sel = [r for r in rows if r["family"] == fam and r["method"] == method
                   and r["match_dc"] == dc]
            ratio = [r["err"] / r["error_bound"] if r["error_bound"] > 0 else
                     (np.inf if r["err"] > 0 else 0.0) for r in sel]
            low = [r["lower_bound"] / r["err"] if r["err"] > 0 else
                   (np.inf if r["lower_bound"] > 0 else 0.0) for r in sel]
            out.append({
                "family": fam, "method": method, "match_dc": dc, "cases": len(sel),
                "collapse": sum(r["collapse"] for r in sel),
                "upper": sum(r["upper"] for r in sel),
                "lower": sum(r["lower"] for r in sel),
                "ti_t": sum(r["ti_t"] for r in sel),
                "worst_err_over_bound": float(np.max(ratio)),
                "worst_lower_over_err": float(np.max(low)),
                "worst_ti_t_dev": float(max(r["ti_t_dev"] for r in sel)),
                "worst_ti_t_rel": float(max(r["ti_t_rel"] for r in sel)),
            })
    return out


def markdown(summary, header: str) -> str:
    lines = [header, "",
             "| family | method | match_dc | cases | order != r | err > bound | err < lower "
             "| TiT != I | worst err/bound | worst lower/err | worst rel. ||TiT - I|| "
             "| worst ||TiT - I|| |",
             "|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for s in summary:
        lines.append(
            f"| {s['family']} | {s['method']} | {s['match_dc']} | {s['cases']} | "
            f"{s['collapse']} | {s['upper']} | {s['lower']} | {s['ti_t']} | "
            f"{s['worst_err_over_bound']:.3g} | {s['worst_lower_over_err']:.3g} | "
            f"{s['worst_ti_t_rel']:.2g} | {s['worst_ti_t_dev']:.2g} |")
    return "\n".join(lines) + "\n"


def _commit() -> str:
    try:
        return subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True,
                              text=True, cwd=pathlib.Path(__file__).parent).stdout.strip()
    except OSError:  # pragma: no cover
        return "unknown"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--label", default="main")
    ap.add_argument("--systems", type=int, default=100)
    ap.add_argument("--fir-orders", type=int, nargs="+", default=[8, 16, 24, 32, 48, 64])
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    t0 = time.perf_counter()
    with threadpool_limits(limits=1):  # BLAS pinned to one thread (results do not depend on it)
        rows = run_cases(args.systems, args.fir_orders, args.seed)
    summary = summarise(rows)
    header = (f"## check_bounds ({args.label}): lti at commit {_commit()}, "
              f"{args.systems} nonnormal + {args.systems} resonant systems (one r each), "
              f"FIR orders {args.fir_orders} (every r); err by "
              f"{'AB13DD (slycot ' + slycot.__version__ + ')' if slycot else 'dense sweep'}, "
              f"measurement rtol {MEAS_RTOL:g}; {time.perf_counter() - t0:.0f} s (BLAS pinned to 1 "
              "thread by threadpoolctl), "
              f"numpy {np.__version__}, scipy {scipy.__version__}, {platform.machine()}")
    md = markdown(summary, header)
    print(md)
    bad = [r for r in rows if r["collapse"] or r["upper"] or r["lower"] or r["ti_t"]]
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / f"check_bounds_{args.label}.md").write_text(md)
    (RESULTS / f"check_bounds_{args.label}.json").write_text(json.dumps(
        {"label": args.label, "commit": _commit(), "lti": lti.__file__, "summary": summary,
         "violations": bad[:200], "n_violations": len(bad), "n_checks": len(rows)},
        indent=1, default=float))
    print(f"{len(bad)} of {len(rows)} checks violated")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
