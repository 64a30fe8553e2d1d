"""Randomized cross-check of lti's public results against independent references.

References: slycot (SB03MD Gramians, AB09AD / AB09BD reduced models and HSVs, AB13DD
H-infinity norm, AB13BD H2 norm), scipy (solve_discrete_lyapunov, dlsim), python-control
(evaluation of the transfer function, forced_response) and brute force (doubling sums of
``A^k B B^T A^kT``, dense frequency grids with local refinement, Hankel matrices of Markov
parameters). Every quantity is recorded as the worst relative disagreement per family;
every certified inequality (``lower_bound <= ||G - G_r||_inf <= error_bound``, Glover's
Hankel error and H-infinity bound) as a count of violations.

Usage::

    python benchmarks/xcheck_lti.py                 # cheap default (a few minutes, one core)
    python benchmarks/xcheck_lti.py --cases 25 --name xcheck_lti_25   # more draws per family

writes ``benchmarks/results/xcheck_lti.md`` (``--out``, ``--name``). BLAS runs on one thread
(threadpoolctl).
"""

from __future__ import annotations

import argparse
import math
import pathlib
import sys
import time
import warnings
from collections import defaultdict

import numpy as np
import scipy.linalg as sla
import scipy.signal as ssig
import scipy.sparse as sp
from threadpoolctl import threadpool_limits

import lti
from lti import DiscreteLTI

try:
    from benchmarks._provenance import git_revision
except ImportError:  # run as a script from benchmarks/
    sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent))
    from benchmarks._provenance import git_revision

import control
import slycot

# ----------------------------------------------------------------------------- references


def ref_gramian(A, B):
    """SB03MD: A X A^T - X = -B B^T."""
    n = A.shape[0]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        out = slycot.sb03md57(A.copy(), C=-(B @ B.T), dico="D", job="X", fact="N", trana="T")
    X, scale = out[2], out[3]
    X = X / scale
    return (X + X.T) / 2 if n else X


def brute_gramian(A, B, max_doublings=60):
    """Doubling sum P_{2k} = P_k + A^k P_k A^kT from P_1 = B B^T, to convergence."""
    P = B @ B.T
    Ak = A.copy()
    for _ in range(max_doublings):
        inc = Ak @ P @ Ak.T
        P = P + inc
        if np.linalg.norm(inc) <= 1e-18 * np.linalg.norm(P):
            break
        Ak = Ak @ Ak
    return P


def ab09_hsv(G):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        out = slycot.ab09ad("D", "B", "N", G.n, G.m, G.p, G.A.copy(), G.B.copy(), G.C.copy(),
                            nr=G.n, tol=0.0)
    return np.asarray(out[-1])


def ab09_reduce(G, r, method, match_dc):
    """AB09AD (truncation) or AB09BD (SPA), job 'B' (sr) or 'N' (balancing-free)."""
    job = "B" if method == "sr" else "N"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        # AB09BD (SPA) through slycot 0.7.1 corrupted the heap here (free(): invalid next
        # size, on the second or third call): its balanced realization from AB09AD
        # (nr = n) and the discrete SPA formulas instead
        nr, Ar, Br, Cr, _ = slycot.ab09ad("D", "B" if match_dc else job, "N", G.n, G.m, G.p,
                                          G.A.copy(),
                                          G.B.copy(), G.C.copy(),
                                          nr=G.n if match_dc else r, tol=0.0)
        Dr = G.D.copy()
        if match_dc:
            Ar, Br, Cr = Ar[:nr, :nr], Br[:nr], Cr[:, :nr]
            if nr < r:
                return nr, None
            k = np.arange(r)
            j = np.arange(r, nr)
            W = np.linalg.solve(np.eye(nr - r) - Ar[np.ix_(j, j)],
                                np.hstack([Ar[np.ix_(j, k)], Br[j]]))
            Ar, Br, Cr, Dr = (Ar[np.ix_(k, k)] + Ar[np.ix_(k, j)] @ W[:, :r],
                              Br[k] + Ar[np.ix_(k, j)] @ W[:, r:],
                              Cr[:, k] + Cr[:, j] @ W[:, :r], Dr + Cr[:, j] @ W[:, r:])
            nr = r
    return nr, (Ar[:nr, :nr], Br[:nr], Cr[:, :nr], Dr)


def ab13dd(A, B, C, D):
    n = A.shape[0]
    if n == 0:
        return float(np.linalg.norm(D, 2))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        g, _ = slycot.ab13dd("D", "I", "N", "D", n, B.shape[1], C.shape[0], A.copy(), np.eye(n),
                             B.copy(), C.copy(), D.copy(), tol=1e-13)
    return float(g[0]) if np.ndim(g) else float(g)


def ab13bd(G):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return float(slycot.ab13bd("D", "H", G.n, G.m, G.p, G.A.copy(), G.B.copy(), G.C.copy(),
                                   G.D.copy()))


def dense_response(A, B, C, D, w):
    z = np.exp(1j * np.asarray(w))
    n = A.shape[0]
    return np.stack([C @ np.linalg.solve(zk * np.eye(n) - A, B) + D for zk in z])


def grid_hinf(A, B, C, D, n_grid=2048):
    """Dense grid on [0, pi] plus golden-section refinement around the 5 best points."""
    w = np.linspace(0.0, np.pi, n_grid)
    s = np.array([np.linalg.norm(G, 2) for G in dense_response(A, B, C, D, w)])
    best = float(s.max())
    h = w[1] - w[0]

    def f(x):
        return np.linalg.norm(dense_response(A, B, C, D, [x])[0], 2)

    for i in np.argsort(s)[-5:]:
        lo, hi = max(w[i] - h, 0.0), min(w[i] + h, np.pi)
        g = (math.sqrt(5) - 1) / 2
        a, b = lo, hi
        for _ in range(60):
            c, d = b - g * (b - a), a + g * (b - a)
            if f(c) >= f(d):
                b = d
            else:
                a = c
        best = max(best, f((a + b) / 2), f(lo), f(hi))
    return best


def err_sys(G, Gr):
    """G - Gr as (A, B, C, D)."""
    r = Gr.n
    A = sla.block_diag(G.A, Gr.A) if r else G.A
    B = np.vstack([G.B, Gr.B]) if r else G.B
    C = np.hstack([G.C, -Gr.C]) if r else G.C
    return A, B, C, G.D - Gr.D


# ------------------------------------------------------------------------------ families


def _orth(rng, n):
    Q, R = np.linalg.qr(rng.standard_normal((n, n)))
    return Q * np.sign(np.diag(R))


def _bcd(rng, n, m=2, p=2, d=False):
    B = rng.standard_normal((n, m))
    C = rng.standard_normal((p, n))
    D = rng.standard_normal((p, m)) if d else np.zeros((p, m))
    return B, C, D


def fam_dense(rho):
    def make(rng, n):
        M = rng.standard_normal((n, n))
        A = rho * M / np.max(np.abs(np.linalg.eigvals(M)))
        return DiscreteLTI(A, *_bcd(rng, n))
    return make


def fam_jordan(rng, n):
    rho = rng.choice([0.5, 0.9])
    c = rng.choice([0.3, 1.0])
    A = rho * (np.eye(n) + c * np.eye(n, k=1))
    return DiscreteLTI(A, *_bcd(rng, n))


def fam_jordan_strong(rng, n):
    rho = rng.choice([0.5, 0.9])
    c = rng.choice([2.0, 3.0])
    A = rho * (np.eye(n) + c * np.eye(n, k=1))
    return DiscreteLTI(A, *_bcd(rng, n))


def fam_diagonal(rng, n):
    a = rng.uniform(-0.98, 0.98, n)
    return DiscreteLTI(np.diag(a), *_bcd(rng, n, d=True))


def fam_complex_modal(rng, n):
    n2 = max(n // 2, 1)
    blocks = []
    for _ in range(n2):
        r, t = rng.uniform(0.3, 0.99), rng.uniform(0.05, np.pi - 0.05)
        blocks.append(r * np.array([[np.cos(t), -np.sin(t)], [np.sin(t), np.cos(t)]]))
    A = sla.block_diag(*blocks)
    return DiscreteLTI(A, *_bcd(rng, 2 * n2))


def fam_fir(rng, n):
    A = np.eye(n, k=-1)  # nilpotent shift: x_{k+1} = (u_k, x_1, ..., x_{n-1})
    B = np.zeros((n, 1))
    B[0, 0] = 1.0
    C = rng.standard_normal((1, n))
    return DiscreteLTI(A, B, C, rng.standard_normal((1, 1)))


def fam_clustered(rng, n):
    base = rng.uniform(-0.9, 0.9, max(n // 3, 1))
    a = np.concatenate([base + rng.choice([0.0, 1e-9, 1e-6], base.size) * k for k in range(3)])
    a = a[:n] if a.size >= n else np.concatenate([a, rng.uniform(-0.9, 0.9, n - a.size)])
    Q = _orth(rng, n)
    return DiscreteLTI(Q @ np.diag(a) @ Q.T, *_bcd(rng, n))


def _two_copies(rng, n, own_ports):
    """Two copies of one random system (h = n // 2 states), the second's output scaled by
    1 + delta: sharing the input and summing the outputs (nearly non-minimal) or each with
    its own input and output (HSVs s_i and (1 + delta) s_i: near-tied pairs, minimal)."""
    h = max(n // 2, 1)
    M = rng.standard_normal((h, h))
    A1 = 0.8 * M / np.max(np.abs(np.linalg.eigvals(M)))
    B1, C1, _ = _bcd(rng, h, 1, 1)
    delta = rng.choice([1e-9, 1e-7, 1e-5])
    A = sla.block_diag(A1, A1)
    if own_ports:
        B, C = sla.block_diag(B1, B1), sla.block_diag(C1, (1 + delta) * C1)
    else:
        B, C = np.vstack([B1, B1]), np.hstack([C1, (1 + delta) * C1])
    Q = _orth(rng, 2 * h)
    return DiscreteLTI(Q @ A @ Q.T, Q @ B, C @ Q.T)


def fam_tied(rng, n):
    return _two_copies(rng, n, own_ports=False)


def fam_tied_union(rng, n):
    """Two copies with their own input and output: the HSVs are the union of s_i and
    (1 + delta) s_i (near-tied pairs, minimal)."""
    return _two_copies(rng, n, own_ports=True)


def fam_mimo(rng, n):
    M = rng.standard_normal((n, n))
    A = 0.9 * M / np.max(np.abs(np.linalg.eigvals(M)))
    m, p = (3, 1) if rng.random() < 0.5 else (1, 4)
    return DiscreteLTI(A, *_bcd(rng, n, m, p, d=True))


def fam_siso_d(rng, n):
    M = rng.standard_normal((n, n))
    A = 0.9 * M / np.max(np.abs(np.linalg.eigvals(M)))
    return DiscreteLTI(A, *_bcd(rng, n, 1, 1, d=True))


FAMILIES = {
    "dense rho=0.5": (fam_dense(0.5), (4, 12)),
    "dense rho=0.95": (fam_dense(0.95), (4, 12)),
    "dense rho=0.999": (fam_dense(0.999), (4, 12)),
    "dense rho=0.9999": (fam_dense(0.9999), (4, 12)),
    "Jordan-like rho(I+c shift)": (fam_jordan, (3, 10)),
    "Jordan-like, strong (c = 2, 3)": (fam_jordan_strong, (3, 8)),
    "diagonal, D != 0": (fam_diagonal, (3, 12)),
    "complex-pair modal": (fam_complex_modal, (4, 12)),
    "FIR / shift (nilpotent)": (fam_fir, (2, 10)),
    "clustered eigenvalues": (fam_clustered, (4, 12)),
    "nearly non-minimal (G1 + (1 + delta) G1)": (fam_tied, (4, 12)),
    "near-tied HSVs (G1 (+) (1 + delta) G1)": (fam_tied_union, (4, 12)),
    "MIMO m != p, D != 0": (fam_mimo, (3, 10)),
    "SISO, D != 0": (fam_siso_d, (3, 10)),
    "edge n = 1, 2, 3": (fam_dense(0.9), (1, 3)),
}
SCALES = [(1e-150, 1.0), (1.0, 1e150), (1e-150, 1e-150), (1e150, 1e150), (1e150, 1e-150)]

# ------------------------------------------------------------------------------ checks


class Record:
    def __init__(self):
        self.worst = defaultdict(lambda: defaultdict(float))  # family -> quantity -> worst
        self.count = defaultdict(lambda: defaultdict(int))
        self.viol = defaultdict(lambda: defaultdict(int))
        self.examples = []

    def put(self, fam, q, val):
        self.count[fam][q] += 1
        v = float(val)
        if not np.isfinite(v):
            v = np.inf
        self.worst[fam][q] = max(self.worst[fam][q], v)

    def check(self, fam, q, ok, info=""):
        self.count[fam][q] += 1
        if not ok:
            self.viol[fam][q] += 1
            if len(self.examples) < 30:
                self.examples.append(f"{fam}: {q}: {info}")


def rel(a, b):
    a, b = np.asarray(a), np.asarray(b)
    den = np.linalg.norm(b)
    return float(np.linalg.norm(a - b) / den) if den else float(np.linalg.norm(a))


def pick_order(hsv):
    """An order r with sigma_{r+1} > 1e-9 sigma_1 and a clear gap (relative >= 1e-3)."""
    n = hsv.size
    for r in range(max(n // 2, 1), 0, -1):
        if r < n and hsv[r] > 1e-9 * hsv[0] and hsv[r - 1] - hsv[r] > 1e-3 * hsv[r - 1]:
            return r
    return None


def check_system(rec, fam, G, rng, sB=1.0, sC=1.0):
    """All checks on G (scaled by sB on B, sC on C); references on the unscaled G."""
    Gs = DiscreteLTI(G.A, G.B * sB, G.C * sC, G.D * (sB * sC))
    sH = sB * sC
    # Gramians
    P = lti.controllability_gramian(Gs)
    Pref = ref_gramian(G.A, G.B)
    rec.put(fam, "P vs SB03MD", rel(P / sB**2, Pref))
    if G.spectral_radius() <= 0.999 or sH == 1.0 and G.spectral_radius() <= 0.9999:
        rec.put(fam, "P vs doubling sum", rel(P / sB**2, brute_gramian(G.A, G.B)))
    if sB == 1.0:
        rec.put(fam, "P vs scipy", rel(P, sla.solve_discrete_lyapunov(G.A, G.B @ G.B.T)))
        Bs = G.B
        res = np.linalg.norm(G.A @ P @ G.A.T - P + Bs @ Bs.T) / (
            np.linalg.norm(G.A) ** 2 * np.linalg.norm(P) + np.linalg.norm(Bs) ** 2)
        rec.put(fam, "P residual", res)
    L = lti.gramian_factors(Gs)
    Lc = np.asarray(L[0]) / sB
    rec.put(fam, "factor Lc Lc^T vs SB03MD", rel(Lc @ Lc.T, Pref))
    # HSVs, Hankel norm
    hsv = lti.hankel_singular_values(Gs) / sH
    ref = ab09_hsv(G)
    k = min(ref.size, hsv.size)
    big = ref[:k] >= 1e-8 * ref[0] if ref.size else np.zeros(0, bool)
    if k:
        rec.put(fam, "HSV vs AB09AD (|d|/sigma_1)",
                np.max(np.abs(hsv[:k][big] - ref[:k][big])) / ref[0])
        rec.put(fam, "hankel_norm vs AB09AD", abs(lti.hankel_norm(Gs) / sH - ref[0]) / ref[0])
    # Hankel matrix of Markov parameters (fast decay only)
    if G.spectral_radius() < 0.9 and G.n <= 12:
        K = 200
        Mk = [G.C @ np.linalg.matrix_power(G.A, i) @ G.B for i in range(2 * K)]
        H = np.block([[Mk[i + j] for j in range(K)] for i in range(K)])
        sv = np.linalg.svd(H, compute_uv=False)[: hsv.size]
        rec.put(fam, "HSV vs Hankel matrix (|d|/sigma_1)",
                np.max(np.abs(sv[big.size and slice(0, k)][big] - hsv[:k][big])) / sv[0])
    # norms
    hn = lti.hinf_norm(Gs, tol=1e-12).value
    href = ab13dd(G.A, G.B, G.C, G.D)
    rec.put(fam, "hinf vs AB13DD", abs(hn / sH - href) / href)
    if G.n <= 12 and G.spectral_radius() < 0.999:
        hg = grid_hinf(G.A, G.B, G.C, G.D)
        rec.check(fam, "hinf >= grid max (1-1e-9)", hn / sH >= hg * (1 - 1e-9),
                  f"hinf {hn / sH!r} grid {hg!r}")
    h2 = lti.h2_norm(Gs) / sH
    h2ref = ab13bd(G)
    h2b = math.sqrt(np.trace(G.C @ Pref @ G.C.T) + np.sum(G.D**2))
    rec.put(fam, "h2 vs AB13BD", abs(h2 - h2ref) / h2ref)
    rec.put(fam, "h2 vs trace(C P C^T + D D^T)", abs(h2 - h2b) / h2b)
    # frequency response, simulation (unscaled only)
    if sH == 1.0 and sB == 1.0:
        w = np.concatenate([rng.uniform(0, np.pi, 20), [0.0, np.pi]])
        Gw = G.frequency_response(w)
        Gc = control.ss(G.A, G.B, G.C, G.D, True)
        ref_w = np.moveaxis(np.asarray(Gc(np.exp(1j * w), squeeze=False)), -1, 0)
        rec.put(fam, "freq response vs control", rel(Gw, ref_w))
        rec.put(fam, "freq response vs dense solve", rel(Gw, dense_response(G.A, G.B, G.C, G.D, w)))
        T = 60
        u = rng.standard_normal((T, G.m))
        x0 = rng.standard_normal(G.n)
        y = np.asarray(G.simulate(u, x0))
        resp = control.forced_response(Gc, U=u.T, X0=x0)
        rec.put(fam, "simulate vs control", rel(y, np.asarray(resp.outputs).reshape(G.p, T).T))
        _, yd, _ = ssig.dlsim((G.A, G.B, G.C, G.D, 1.0), u, x0=x0)
        rec.put(fam, "simulate vs scipy dlsim", rel(y, yd))
    # balanced truncation
    r = pick_order(ref)
    if r is None:
        return
    for method in ("sr", "bfsr"):
        for match_dc in (False, True):
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                bt = lti.balanced_truncation(Gs, order=r, method=method, match_dc=match_dc)
            tag = f"BT {method}{' match_dc' if bt.match_dc else ''}"
            Gr = bt.reduced
            Gru = DiscreteLTI(Gr.A, Gr.B / sB, Gr.C / sC, Gr.D / sH) if Gr.n else Gr
            rec.check(fam, f"{tag}: reduced stable", Gr.n == 0 or Gr.spectral_radius() < 1,
                      f"rho {Gr.spectral_radius()}")
            e = ab13dd(*err_sys(G, Gru))
            rec.check(fam, f"{tag}: err <= error_bound", e <= bt.error_bound / sH * (1 + 1e-9),
                      f"err {e!r} bound {bt.error_bound / sH!r} n={G.n} r={r}")
            rec.check(fam, f"{tag}: lower_bound <= err", bt.lower_bound / sH <= e * (1 + 1e-9),
                      f"lower {bt.lower_bound / sH!r} err {e!r} n={G.n} r={r}")
            rec.check(fam, f"{tag}: sigma_(r+1) - rounding <= err",
                      ref[r] - bt.rounding_term / sH <= e * (1 + 1e-8),
                      f"sigma {ref[r]!r} err {e!r}")
            nr, Rref = ab09_reduce(G, r, method, bt.match_dc)
            if nr == r:
                wg = np.linspace(0, np.pi, 64)
                d = dense_response(*err_sys(DiscreteLTI(*Rref), Gru), wg)
                rec.put(fam, f"{tag}: reduced vs AB09{'B' if bt.match_dc else 'A'}D "
                        "(max|dG|/sigma_(r+1))",
                        max(np.linalg.norm(x, 2) for x in d) / ref[r])
    # an order that splits the closest HSV pair (ties included): the certified
    # inequalities must hold there too (no transfer-function comparison: ill-posed)
    gaps = (ref[:-1] - ref[1:]) / ref[:-1]
    rt = int(np.argmin(gaps)) + 1 if ref.size > 1 else None
    if rt is not None and rt != r and ref[rt] > 1e-9 * ref[0]:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            bt = lti.balanced_truncation(Gs, order=rt)
            ha = lti.hankel_norm_approximation(Gs, order=rt)
        for tag, res in (("BT", bt), ("HNA", ha)):
            Gr = res.reduced
            Gru = DiscreteLTI(Gr.A, Gr.B / sB, Gr.C / sC, Gr.D / sH) if Gr.n else Gr
            e = ab13dd(*err_sys(G, Gru))
            rec.check(fam, f"{tag} at the closest gap: err <= error_bound",
                      e <= res.error_bound / sH * (1 + 1e-9),
                      f"err {e!r} bound {res.error_bound / sH!r} n={G.n} r={rt} "
                      f"gap {gaps[rt - 1]:.1e}")
            rec.check(fam, f"{tag} at the closest gap: lower_bound <= err",
                      res.lower_bound / sH <= e * (1 + 1e-9),
                      f"lower {res.lower_bound / sH!r} err {e!r} n={G.n} r={rt}")
    # tol= selection: the chosen order is the smallest whose bound meets tol
    tol = 2.5 * ref[r] * (1 + 1e-6)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        bt = lti.balanced_truncation(Gs, tol=tol * sH)
    e = ab13dd(*err_sys(G, DiscreteLTI(bt.reduced.A, bt.reduced.B / sB, bt.reduced.C / sC,
                                       bt.reduced.D / sH) if bt.reduced.n else bt.reduced))
    rec.check(fam, "BT tol=: err <= tol", e <= tol * (1 + 1e-9), f"err {e!r} tol {tol!r}")
    # Hankel-norm approximation
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ha = lti.hankel_norm_approximation(Gs, order=r)
    Gh = ha.reduced
    Ghu = DiscreteLTI(Gh.A, Gh.B / sB, Gh.C / sC, Gh.D / sH) if Gh.n else Gh
    Ae, Be, Ce, De = err_sys(G, Ghu)
    E = DiscreteLTI(Ae, Be, Ce, De)
    eh = ab09_hsv(E)[0] if E.spectral_radius() < 1 else np.inf
    rec.put(fam, "HNA: Hankel error vs sigma_(r+1)", abs(eh - ref[r]) / ref[r])
    e = ab13dd(Ae, Be, Ce, De)
    rec.check(fam, "HNA: err <= error_bound", e <= ha.error_bound / sH * (1 + 1e-9),
              f"err {e!r} bound {ha.error_bound / sH!r}")
    rec.check(fam, "HNA: sigma_(r+1) <= err", ref[r] <= e * (1 + 1e-8), f"{ref[r]!r} {e!r}")


def check_complex(rec, rng, n):
    fam = "complex A (Lyapunov API)"
    M = rng.standard_normal((n, n)) + 1j * rng.standard_normal((n, n))
    A = 0.95 * M / np.max(np.abs(np.linalg.eigvals(M)))
    B = rng.standard_normal((n, 2)) + 1j * rng.standard_normal((n, 2))
    Q = B @ B.conj().T
    X = lti.solve_discrete_lyapunov(A, Q)
    rec.put(fam, "X vs scipy", rel(X, sla.solve_discrete_lyapunov(A, Q)))
    Xb = Q.copy()
    Ak = A.copy()
    for _ in range(60):
        inc = Ak @ Xb @ Ak.conj().T
        Xb = Xb + inc
        if np.linalg.norm(inc) <= 1e-18 * np.linalg.norm(Xb):
            break
        Ak = Ak @ Ak
    rec.put(fam, "X vs doubling sum", rel(X, Xb))
    F = lti.lyapunov_factor(A, B)
    rec.put(fam, "factor F F^H vs doubling sum", rel(F @ F.conj().T, Xb))


def check_sparse(rec, rng, n):
    fam = "sparse (small n) vs dense path"
    a = rng.uniform(-0.9, 0.9, n)
    M = sp.diags(a) + sp.random(n, n, density=0.15, random_state=rng.integers(1 << 30)) * 0.05
    Ad = M.toarray()
    rho = np.max(np.abs(np.linalg.eigvals(Ad)))
    if rho >= 0.95:
        M = M * (0.9 / rho)
        Ad = M.toarray()
    B = rng.standard_normal((n, 2))
    C = rng.standard_normal((2, n))
    Gs, Gd = DiscreteLTI(sp.csr_matrix(M), B, C), DiscreteLTI(Ad, B, C)
    hs, hd = lti.hankel_singular_values(Gs), ab09_hsv(Gd)
    k = min(hs.size, hd.size, 6)
    rec.put(fam, "leading 6 HSVs vs AB09AD (|d|/sigma_1)",
            np.max(np.abs(hs[:k] - hd[:k])) / hd[0])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        bt = lti.balanced_truncation(Gs, order=3)
    e = ab13dd(*err_sys(Gd, bt.reduced))
    rec.check(fam, "BT sparse: err <= error_bound", e <= bt.error_bound * (1 + 1e-9),
              f"err {e!r} bound {bt.error_bound!r}")
    rec.check(fam, "BT sparse: lower_bound <= err", bt.lower_bound <= e * (1 + 1e-9),
              f"lower {bt.lower_bound!r} err {e!r}")


# ------------------------------------------------------------------------------ driver


def run(cases: int, seed: int):
    rec = Record()
    rng = np.random.default_rng(seed)
    for fam, (make, (nlo, nhi)) in FAMILIES.items():
        for i in range(cases):
            n = int(rng.integers(nlo, nhi + 1))
            if fam.startswith("edge"):
                n = 1 + i % 3
            G = make(rng, n)
            try:
                check_system(rec, fam, G, rng)
            except Exception as exc:  # a raise is a disagreement: record it, go on
                rec.check(fam, "raised", False, f"{type(exc).__name__}: {exc} (n={n})")
    for i in range(cases):
        G = fam_dense(0.9)(rng, int(rng.integers(3, 9)))
        sB, sC = SCALES[i % len(SCALES)]
        fam = "scaled B, C (1e-150..1e150)"
        try:
            check_system(rec, fam, G, rng, sB, sC)
        except Exception as exc:
            rec.check(fam, "raised", False, f"{type(exc).__name__}: {exc} (sB={sB}, sC={sC})")
    for _ in range(cases):
        for fn, fam in ((check_complex, "complex A (Lyapunov API)"),
                        (check_sparse, "sparse (small n) vs dense path")):
            try:
                fn(rec, rng, int(rng.integers(3, 12)) if fn is check_complex else
                   int(rng.integers(10, 30)))
            except Exception as exc:
                rec.check(fam, "raised", False, f"{type(exc).__name__}: {exc}")
    return rec


def write(rec, path, args, seconds):
    lines = [
        "# Randomized cross-check of lti against independent references",
        "",
        f"Command: `python benchmarks/xcheck_lti.py --cases {args.cases} --seed {args.seed}`; "
        f"{git_revision()}; slycot {slycot.__version__}, python-control {control.__version__}, "
        f"scipy {sla.__name__ and __import__('scipy').__version__}, numpy {np.__version__}; "
        f"BLAS pinned to one thread (threadpoolctl); {seconds:.0f} s.",
        "",
        "Values are the worst relative disagreement over the family's cases (see the script for "
        "each normalisation); inequality checks give violations / cases.",
        "",
        "| family | quantity | cases | worst / violations |",
        "|---|---|---|---|",
    ]
    fams = list(rec.count)
    for fam in fams:
        for q, c in rec.count[fam].items():
            if q in rec.worst[fam]:
                lines.append(f"| {fam} | {q} | {c} | {rec.worst[fam][q]:.2e} |")
            else:
                lines.append(f"| {fam} | {q} | {c} | {rec.viol[fam][q]} / {c} |")
    total = sum(sum(v.values()) for v in rec.viol.values())
    lines += ["", f"Inequality violations in all: {total}."]
    if rec.examples:
        lines += ["", "First violations:", ""] + [f"- {e}" for e in rec.examples]
    path.write_text("\n".join(lines) + "\n")
    return total


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--cases", type=int, default=8, help="draws per family (default 8)")
    ap.add_argument("--seed", type=int, default=20261201)
    ap.add_argument("--out", default=str(pathlib.Path(__file__).parent / "results"))
    ap.add_argument("--name", default="xcheck_lti")
    args = ap.parse_args(argv)
    t0 = time.perf_counter()
    with threadpool_limits(1):
        rec = run(args.cases, args.seed)
    path = pathlib.Path(args.out) / f"{args.name}.md"
    path.parent.mkdir(parents=True, exist_ok=True)
    total = write(rec, path, args, time.perf_counter() - t0)
    print(path.read_text())
    return 0 if total == 0 else 1


if __name__ == "__main__":
    raise SystemExit(main())
