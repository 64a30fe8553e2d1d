"""Accuracy of ``DiscreteLTI.frequency_response`` against 40-digit references.

For three families (random ``A`` with spectral radius 0.98; a strictly upper triangular part
of unit size plus eigenvalues in (-0.9, 0.9), rotated by a random orthogonal matrix; an
upper bidiagonal ``A`` with superdiagonal 1.5 and eigenvalues in (0.5, 0.95), rotated), n = 8
and 24, seeds 0..2, m = p = 2, at 5 frequencies in [0.03, 3.1]: the relative error
``||G - G_ref||_F / ||G_ref||_F`` of

* ``lti``: :meth:`lti.DiscreteLTI.frequency_response` (complex Schur form, back
  substitution, one refinement step with the residual formed with ``A``);
* ``lti, unrefined``: the same without the refinement step (``refine=False``, what the
  H-infinity search uses);
* ``TB05AD``: SLICOT's Hessenberg evaluation through slycot (``job="NG"``; what
  python-control's ``slycot_laub`` calls);
* ``dense LU``: ``C (zI - A)^{-1} B`` by one LAPACK solve per frequency (O(n^3) each).

The reference is the same expression in 40-digit arithmetic (mpmath) for the stored
double-precision ``A, B, C``. Reported: geometric mean and maximum over the 15 points.

Usage: ``python benchmarks/freq_accuracy.py`` (about a minute, one core) writes
``benchmarks/results/freq_accuracy.md``. BLAS runs on one thread (threadpoolctl).
"""

from __future__ import annotations

import pathlib
import sys

import mpmath
import numpy as np
import slycot
from threadpoolctl import threadpool_limits

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent))
import lti  # noqa: E402
from benchmarks._provenance import git_revision  # noqa: E402

OUT = pathlib.Path(__file__).resolve().parent / "results" / "freq_accuracy.md"
FAMILIES = ("random rho=0.98", "non-normal triangular, rotated", "bidiagonal 1.5, rotated")


def family(kind: str, n: int, seed: int):
    rng = np.random.default_rng(seed)
    if kind == FAMILIES[0]:
        A = rng.standard_normal((n, n))
        A *= 0.98 / np.max(np.abs(np.linalg.eigvals(A)))
        return A, rng.standard_normal((n, 2)), rng.standard_normal((2, n))
    if kind == FAMILIES[1]:
        T = np.triu(rng.standard_normal((n, n)), 1) + np.diag(rng.uniform(-0.9, 0.9, n))
    else:
        T = np.diag(rng.uniform(0.5, 0.95, n)) + np.diag(np.full(n - 1, 1.5), 1)
    Q = np.linalg.qr(rng.standard_normal((n, n)))[0]
    return Q @ T @ Q.T, rng.standard_normal((n, 2)), rng.standard_normal((2, n))


def exact(A, B, C, z) -> np.ndarray:
    with mpmath.workdps(40):
        M = mpmath.mpc(z) * mpmath.eye(A.shape[0]) - mpmath.matrix(A.tolist())
        Y = mpmath.matrix(C.tolist()) * (mpmath.inverse(M) * mpmath.matrix(B.tolist()))
        return np.array([[complex(Y[i, j]) for j in range(Y.cols)] for i in range(Y.rows)])


def tb05ad(A, B, C, z) -> np.ndarray:
    n, m, p = A.shape[0], B.shape[1], C.shape[0]
    out = slycot.tb05ad(n, m, p, z, A.copy(), B.copy(), C.copy(), job="NG")
    return next(x for x in out if isinstance(x, np.ndarray) and x.shape == (p, m)
                and np.iscomplexobj(x))


def main() -> None:
    w = np.linspace(0.03, 3.1, 5)
    rows = []
    with threadpool_limits(1):
        for kind in FAMILIES:
            for n in (8, 24):
                err = {k: [] for k in ("lti", "lti, unrefined", "TB05AD", "dense LU")}
                for seed in range(3):
                    A, B, C = family(kind, n, seed)
                    G = lti.DiscreteLTI(A, B, C)
                    ours = G.frequency_response(w)
                    raw = G._frequency_response(w, refine=False)
                    for k, wk in enumerate(w):
                        z = np.exp(1j * wk)
                        ref = exact(A, B, C, z)
                        scale = np.linalg.norm(ref)
                        for name, val in (("lti", ours[k]), ("lti, unrefined", raw[k]),
                                          ("TB05AD", tb05ad(A, B, C, z)),
                                          ("dense LU", C @ np.linalg.solve(z * np.eye(n) - A, B))):
                            err[name].append(float(np.linalg.norm(val - ref) / scale))
                cells = [f"{np.exp(np.mean(np.log(e))):.1e} / {max(e):.1e}" for e in err.values()]
                rows.append(f"| {kind} | {n} | " + " | ".join(cells) + " |")
                print(rows[-1], flush=True)
    text = "\n".join([
        "# Frequency-response accuracy against 40-digit references",
        "",
        f"`python benchmarks/freq_accuracy.py`; {git_revision()}; slycot {slycot.__version__}, "
        f"numpy {np.__version__}, mpmath {mpmath.__version__}; one BLAS thread.",
        "",
        "Relative error ||G - G_ref||_F / ||G_ref||_F, geometric mean / maximum over 3 seeds x "
        "5 frequencies in [0.03, 3.1], m = p = 2.",
        "",
        "| family | n | lti | lti, unrefined | TB05AD (slycot) | dense LU |",
        "|---|---|---|---|---|---|",
        *rows,
        "",
    ])
    OUT.write_text(text)
    print(f"wrote {OUT}")


if __name__ == "__main__":
    main()
