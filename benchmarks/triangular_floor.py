"""Balanced truncation of triangular systems: the HSV noise floor without the
``||Lc|| ||Lo||`` term, checked against the measured error.

When ``A`` is upper quasi-triangular in standard form, its real Schur form is ``A`` itself
(``T = A``, ``Z = I`` bit for bit), and for a lower triangular one LAPACK returns a
permutation as ``Z``: exact either way, so no decomposition error acts on the HSVs and
:func:`lti.balanced_truncation` uses the floor ``n eps sigma_1 / (1 - rho^2)`` instead of
``n eps max(sigma_1, ||Lc|| ||Lo||) / (1 - rho^2)`` (and no Schur rounding term). This
script reduces 100 random such systems (5 families: Jordan chains ``lam I + c N`` with
random input/output, Jordan chains with ``c = 1`` and input at the end / output at the
start, strictly upper triangular parts of size 1..15 over random or repeated eigenvalues)
at about five orders each, in the given state order and reversed (lower triangular),
measures ``||G - G_r||_inf`` with :func:`lti.hinf_norm`, and
counts violations of ``lower_bound <= err <= error_bound`` (relative slack 1e-6 for the
measurement), and how many requests the old floor would have capped below the order asked.

Usage: ``python benchmarks/triangular_floor.py`` (under a minute, one core) writes
``benchmarks/results/triangular_floor.md``. BLAS runs on one thread (threadpoolctl).
"""

from __future__ import annotations

import pathlib
import sys
import warnings

import numpy as np
from threadpoolctl import threadpool_limits

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent))
import lti  # noqa: E402
from benchmarks._provenance import git_revision  # noqa: E402
from lti._bt_core import hsv_svd, noise_floor  # noqa: E402
from lti.gramians import stable_gramian_factors  # noqa: E402

OUT = pathlib.Path(__file__).resolve().parent / "results" / "triangular_floor.md"
KINDS = ("Jordan lam I + c N", "Jordan c = 1, B = e_n, C = e_1", "triangular, scale 0.5..5",
         "triangular, repeated eigenvalue", "triangular, scale 3")


def system(i: int, rng):
    n = int(rng.integers(4, 16))
    kind = i % 5
    m, p = int(rng.integers(1, 3)), int(rng.integers(1, 3))
    if kind == 0:
        A = rng.uniform(0.3, 0.995) * np.eye(n) + rng.uniform(0.3, 3) * np.diag(np.ones(n - 1), 1)
    elif kind == 1:
        A = rng.uniform(0.9, 0.995) * np.eye(n) + np.diag(np.ones(n - 1), 1)
        return kind, A, np.eye(n)[:, -1:], np.eye(n)[:1]
    elif kind == 2:
        A = (np.triu(rng.standard_normal((n, n)) * rng.uniform(0.5, 5), 1)
             + np.diag(rng.uniform(-0.95, 0.95, n)))
    elif kind == 3:
        A = np.triu(rng.standard_normal((n, n)), 1) + rng.uniform(0.5, 0.99) * np.eye(n)
    else:
        A = np.triu(rng.standard_normal((n, n)) * 3, 1) + np.diag(rng.uniform(-0.99, 0.99, n))
    return kind, A, rng.standard_normal((n, m)), rng.standard_normal((p, n))


def _reduce(G, st) -> None:
    n = G.n
    F = stable_gramian_factors(G, in_schur_basis=True)
    hsv = hsv_svd(F.Lc, F.Lo, n)[0]
    old_min = int(np.count_nonzero(hsv > noise_floor(hsv, F.Lc, F.Lo, F.rho)))
    for r in range(0, n + 1, max(1, n // 5)):
        res = lti.balanced_truncation(G, order=r)
        err = lti.hinf_norm(G - res.reduced).value
        st["cases"] += 1
        st["capped_old"] += int(r > old_min and F.path == "schur")
        slack = 1.0 + 1e-6
        if not (res.lower_bound <= err * slack and err <= res.error_bound * slack):
            st["viol"] += 1
        if res.error_bound > 0:
            st["worst"] = max(st["worst"], err / res.error_bound)


def main() -> None:
    rng = np.random.default_rng(1)
    stats = {k: {"cases": 0, "viol": 0, "worst": 0.0, "capped_old": 0} for k in KINDS}
    with threadpool_limits(1), warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for i in range(100):
            kind, A, B, C = system(i, rng)
            for G in (lti.DiscreteLTI(A, B, C),
                      lti.DiscreteLTI(A[::-1, ::-1], B[::-1], C[:, ::-1])):  # reversed
                _reduce(G, stats[KINDS[kind]])
    rows = [f"| {k} | {v['cases']} | {v['viol']} | {v['worst']:.3f} | {v['capped_old']} |"
            for k, v in stats.items()]
    total = sum(v["cases"] for v in stats.values())
    viol = sum(v["viol"] for v in stats.values())
    text = "\n".join([
        "# BT of triangular systems (upper; reversed: lower): floor n eps sigma_1 / (1 - rho^2)",
        "",
        f"`python benchmarks/triangular_floor.py`; {git_revision()}; numpy {np.__version__}; "
        "one BLAS thread.",
        "",
        "err = hinf_norm(G - G_r); violation: not lower_bound <= err <= error_bound (slack 1e-6). "
        "capped (old floor): requests above the number of HSVs over the old floor "
        "n eps max(sigma_1, ||Lc|| ||Lo||) / (1 - rho^2), on the Schur path (the old code "
        "returned a lower order there).",
        "",
        "| family | reductions | violations | max err / error_bound | capped (old floor) |",
        "|---|---|---|---|---|",
        *rows,
        "",
        f"Total: {viol} violations in {total} reductions.",
        "",
    ])
    OUT.write_text(text)
    print(text)


if __name__ == "__main__":
    main()
