"""Rounding terms of balanced truncation: the a-priori model of lti.balanced (rounding_terms)
and what the real Schur decomposition can add to the error of a reduced model (issue 14).

Balanced truncation on the Schur path reduces ``(T, Z^T B, C Z)`` with ``A = Z T Z^T``. The
decomposition is backward stable: the computed ``T`` and ``Z`` are exact for ``A + E`` with
``||E||_F <= c n eps ||A||_F``, and forming ``Z^T B``, ``C Z`` adds ``n eps ||B||_F``,
``n eps ||C||_F``. To first order the transfer function of the system actually reduced
differs from ``G`` by

.. math::

    \\delta G(z) = C R(z) E R(z) B + \\delta C R(z) B + C R(z) \\delta B,
    \\qquad R(z) = (zI - A)^{-1},

so ``||delta G||_inf <= n eps ((1 + ||A||_F) s + ||B||_F c + ||C||_F b)`` (up to the
constant c of the decomposition), with ``s = sup ||C R|| ||R B||``, ``c = sup ||C R||``,
``b = sup ||R B||`` on the unit circle. For normal ``A`` this is of the size of the other
rounding terms; for strongly non-normal ``A`` the resolvent is large where the transfer
function is not, and this term is what floating point adds to the error (measured up to
181x the bound without it, issue 14). The same first-order quantity is the rounding of any
float evaluation of ``G - G_r`` (e.g. an H-infinity norm of the error computed in float).

The suprema are *sampled*: on 32 angles of ``[0, pi]`` and the angles of the (up to 32)
eigenvalues nearest the unit circle, where resonant peaks sit, by back substitution with
the complex Schur form, all frequencies at once. That makes the term an estimate, not
a bound; the first-order norm bound itself overestimates the measured rounding by 17x or
more on every system measured (see BalancedTruncation.rounding_term).

With the optional compiled kernels (:mod:`lti._jit`) the sampled norms come from one
compiled call that substitutes in the real quasi-triangular ``T`` itself, for both sides
(2x2 blocks solved in closed form, their inverses per point shared by the two sides, real
coefficients on the real and imaginary parts: half the flops of the complex triangle, no
Python loop per row); otherwise from NumPy on the complex triangle. Both compute the same
norms; they agree to rounding (``tests/lti/test_rounding_kernel.py``).
"""

from __future__ import annotations

import math

import numpy as np

import lti._jit as _jit
from lti._schur import quasi_triangular_eigvals, rotate_columns, to_complex_schur
from lti.lowrank import is_sparse
from lti.system import DiscreteLTI

_EPS = np.finfo(np.float64).eps

#: ``rounding_term`` = 2 (n - r) delta + ROUNDING_FACTOR n eps 2 sum(sigma) / (1 - rho^2)
#: (see BalancedTruncation.rounding_term; the measured excess of the error over the HSV
#: bounds on dense, resonant, non-normal, FIR and bidiagonal systems is in the note of
#: issue 14 item 3).
ROUNDING_FACTOR = 4.0


#: With ``match_dc`` the returned ``D_r = D + C_2 (I - A_22)^{-1} B_2`` is a computed sum: its
#: rounding, at most ``eps (|D| + |correction|)`` entrywise, adds ``D_ROUNDING ||D||_F`` (the
#: correction's share is in the gain term). Truncation returns ``D_r = D`` bit for bit: ``D``
#: cancels exactly in ``G - G_r`` and adds nothing.
D_ROUNDING = _EPS


def rounding_terms(G: DiscreteLTI, hsv, floor: float, rho, match_dc: bool = False):
    """``(rounding, unit)``: the rounding term of every order k = 0..n of a stable ``G``
    without the projection's conditioning, and ``unit`` to multiply that conditioning
    with (see lti.balanced.BalancedTruncation.rounding_term). The gain is
    ``2 sum sigma >= ||G - D||_inf``: ``D`` is not in it (``D_r = D`` exactly, so the
    error system's feedthrough is exactly 0; with ``||D||_F`` in the gain the bound of a
    system with ``||D|| >> sigma_1`` was all rounding term); with `match_dc`,
    ``D_ROUNDING ||D||_F`` is added for the computed ``D_r``."""
    n = hsv.size
    if n == 0:
        return np.zeros(1), 0.0
    if rho is None:
        rho = G.spectral_radius() if not is_sparse(G.A) else 0.0
    gain = 2.0 * float(hsv.sum())  # >= ||G - D||_inf = ||G - G_0||_inf
    unit = ROUNDING_FACTOR * n * _EPS * gain
    base = unit / max(1.0 - rho * rho, _EPS)
    if match_dc:
        base += D_ROUNDING * fro_norm_safe(G.D)
    delta = floor / n  # absolute accuracy of one computed HSV
    return base + 2.0 * delta * np.arange(n, -1.0, -1.0), unit  # n - k for k = 0..n


def fro_norm_safe(X: np.ndarray) -> float:
    """``||X||_F`` as ``np.linalg.norm`` computes it, ``sqrt(x @ x)``, and without overflow
    of the squares (entries beyond ~1e154) from a scaled copy."""
    d = X.ravel(order="K")
    with np.errstate(over="ignore"):
        dd = float(d.dot(d))
    if dd < math.inf:
        return math.sqrt(dd)
    big = float(np.max(np.abs(d)))
    return big * math.sqrt(float((d / big) @ (d / big)))


#: Uniform angles of the sampled resolvent norms, and the most pole angles added to them.
N_ANGLES = 32
N_POLE_ANGLES = 32


_UNIFORM = np.linspace(0.0, np.pi, N_ANGLES)
_UNIFORM.setflags(write=False)


def _angles(lam: np.ndarray) -> np.ndarray:
    """The sampled angles: ``N_ANGLES`` uniform ones on ``[0, pi]`` and those of the (up to
    ``N_POLE_ANGLES``) eigenvalues ``lam`` nearest the unit circle, sorted, without repeats
    (``np.unique`` of the two, with its sort and mask written out: ~15 us less at n = 64)."""
    near = np.abs(np.abs(lam) - 1.0).argsort(kind="stable")[:N_POLE_ANGLES]  # (ties: first)
    pole = lam[near]
    theta = np.concatenate((_UNIFORM, np.abs(np.arctan2(pole.imag, pole.real))))  # np.angle
    theta.sort()
    keep = np.empty(theta.size, dtype=bool)
    keep[:1] = True
    np.not_equal(theta[1:], theta[:-1], out=keep[1:])
    return theta[keep]


def _resolvent_norms_py(T, B, Ct, lam, uniform):
    """``(rb, cr, s, c, b)``: ``rb[k] = ||(z_k I - T)^{-1} B||_F``, ``cr[k] = ||C (z_k I -
    T)^{-1}||_F = ||(z_k I - T^T)^{-1} C^T||_F`` and their maxima ``s = max rb cr``,
    ``c = max cr``, ``b = max rb`` over the sampled ``z_k = e^{i theta_k}``, the angles of
    :func:`_angles` from the eigenvalues ``lam`` of ``T`` and the ``uniform`` grid (computed
    here the same way); ``T`` (n, n) real upper quasi-triangular (a nonzero ``T[i + 1, i]``
    starts a 2x2 block), ``B`` (n, m) and ``Ct = C^T`` (n, p) real.

    Both sides in one call. First, per diagonal block and point, the entries of
    ``(z I - block)^{-1}`` (``T`` and ``T^T`` have the same blocks up to transposition, so
    both sweeps share them): a 1x1 block at row i, ``D[i] = 1 / (z - t_ii)``; a 2x2 block
    ``[[a, b], [c, d]]`` at rows i, i + 1, ``D[i] = (z - d) / det``, ``D[i + 1] = (z - a) /
    det``, ``O[i] = b / det``, ``O[i + 1] = c / det`` with ``det = (z - l1)(z - l2)`` from
    its eigenvalues (no cancellation near a pole); inverses as ``conj(e) / |e|^2``, one
    division per point (``|e| >= 1 - |lambda|`` on the unit circle for a stable ``T``: no
    over- or underflow). Then a back substitution with ``T`` for ``B`` and a forward one
    with ``T^T`` (read from ``T``: no transposed copy) for ``C^T``, all K points at once.
    The sums ``sum_l t_il X[l]`` have real coefficients, so they act on the real and
    imaginary parts alike: ``X`` holds, per row, the real parts of column j at
    ``2 K j + k`` and the imaginary parts at ``2 K j + K + k``. Rows are solved in groups
    of up to four (whole blocks): the sums over the rows already solved run for the four
    rows of a group in one pass over ``X`` (four rows of it at a time: sixteen products per
    four loads), then the group's own rows one block after the other. Compiled by
    :mod:`lti._jit`; also runs, slowly, as plain Python.
    """
    n = T.shape[0]
    # the angles (as _angles): the uniform ones and those of the eigenvalues nearest the
    # unit circle (a stable sort: ties by position), sorted, without repeats
    near = np.argsort(np.abs(np.abs(lam) - 1.0), kind="mergesort")[:N_POLE_ANGLES]
    nu = uniform.shape[0]
    theta = np.empty(nu + near.shape[0])
    theta[:nu] = uniform
    for q in range(near.shape[0]):
        theta[nu + q] = abs(np.arctan2(lam[near[q]].imag, lam[near[q]].real))
    theta.sort()
    K = 1
    for q in range(1, theta.shape[0]):
        if theta[q] != theta[K - 1]:
            theta[K] = theta[q]
            K += 1
    zr = np.cos(theta[:K])
    zi = np.sin(theta[:K])
    start = np.empty(n, dtype=np.int64)  # diagonal blocks: first row and size, ascending
    size = np.empty(n, dtype=np.int64)
    nb = 0
    i = 0
    while i < n:
        start[nb] = i
        size[nb] = 2 if i < n - 1 and T[i + 1, i] != 0.0 else 1
        i += size[nb]
        nb += 1
    Dr = np.empty((n, K))
    Di = np.empty((n, K))
    Or = np.zeros((n, K))
    Oi = np.zeros((n, K))
    for kb in range(nb):
        i = start[kb]
        if size[kb] == 2:
            a, b, c, d = T[i, i], T[i, i + 1], T[i + 1, i], T[i + 1, i + 1]
            h = 0.5 * (a + d)
            disc = np.sqrt(complex(0.25 * (a - d) * (a - d) + b * c))
            l1r, l1i = h + disc.real, disc.imag
            l2r, l2i = h - disc.real, -disc.imag
            o1r, o1i, o2r, o2i = Or[i], Oi[i], Or[i + 1], Oi[i + 1]
            for k in range(K):
                ur, ui = zr[k] - l1r, zi[k] - l1i
                vr, vi = zr[k] - l2r, zi[k] - l2i
                er, ei = ur * vr - ui * vi, ur * vi + ui * vr  # det
                g = 1.0 / (er * er + ei * ei)
                o1r[k], o1i[k] = er * g, -ei * g  # 1 / det (scaled by b, c below)
            d1r, d1i, d2r, d2i = Dr[i], Di[i], Dr[i + 1], Di[i + 1]
            for k in range(K):
                ir, ii = o1r[k], o1i[k]
                sr = zr[k] - d
                d1r[k], d1i[k] = sr * ir - zi[k] * ii, sr * ii + zi[k] * ir
                sr = zr[k] - a
                d2r[k], d2i[k] = sr * ir - zi[k] * ii, sr * ii + zi[k] * ir
            for k in range(K):
                ir, ii = o1r[k], o1i[k]
                o2r[k], o2i[k] = c * ir, c * ii
                o1r[k], o1i[k] = b * ir, b * ii
        else:
            t = T[i, i]
            for k in range(K):
                er, ei = zr[k] - t, zi[k]
                g = 1.0 / (er * er + ei * ei)
                Dr[i, k], Di[i, k] = er * g, -ei * g
    rb = np.zeros(K)
    cr = np.zeros(K)
    cf = np.zeros((4, 4))
    for side in range(2):
        forward = side == 1  # C side: (zI - T^T) Y = C^T, from the top; T^T[i, l] = T[l, i]
        F = Ct if forward else B
        acc = cr if forward else rb
        q = F.shape[1]
        w = 2 * K * q
        X = np.empty((n, w))
        A = np.empty((4, w))
        done = 0  # blocks solved
        while done < nb:
            # the next group: whole blocks in sweep order, at most four rows g0..g1
            kb = done if forward else nb - 1 - done
            g0, g1 = start[kb], start[kb] + size[kb] - 1
            cnt = 1
            while done + cnt < nb:
                nxt = kb + cnt if forward else kb - cnt
                lo_, hi_ = (g0, start[nxt] + size[nxt] - 1) if forward else (start[nxt], g1)
                if hi_ - lo_ + 1 > 4:
                    break
                g0, g1 = lo_, hi_
                cnt += 1
            G = g1 - g0 + 1
            lo, hi = (0, g0) if forward else (g1 + 1, n)  # rows solved before the group
            for r in range(4):
                for col in range(w):
                    A[r, col] = 0.0
            l = lo
            while l < hi:
                nl = min(4, hi - l)
                for r in range(4):
                    for c4 in range(4):
                        if r < G and c4 < nl:
                            cf[r, c4] = T[l + c4, g0 + r] if forward else T[g0 + r, l + c4]
                        else:
                            cf[r, c4] = 0.0
                c00, c01, c02, c03 = cf[0, 0], cf[0, 1], cf[0, 2], cf[0, 3]
                c10, c11, c12, c13 = cf[1, 0], cf[1, 1], cf[1, 2], cf[1, 3]
                c20, c21, c22, c23 = cf[2, 0], cf[2, 1], cf[2, 2], cf[2, 3]
                c30, c31, c32, c33 = cf[3, 0], cf[3, 1], cf[3, 2], cf[3, 3]
                if nl == 4:
                    x0, x1, x2, x3 = X[l], X[l + 1], X[l + 2], X[l + 3]
                    A0, A1, A2, A3 = A[0], A[1], A[2], A[3]
                    for col in range(w):
                        v0, v1, v2, v3 = x0[col], x1[col], x2[col], x3[col]
                        A0[col] += c00 * v0 + c01 * v1 + c02 * v2 + c03 * v3
                        A1[col] += c10 * v0 + c11 * v1 + c12 * v2 + c13 * v3
                        A2[col] += c20 * v0 + c21 * v1 + c22 * v2 + c23 * v3
                        A3[col] += c30 * v0 + c31 * v1 + c32 * v2 + c33 * v3
                else:
                    for c4 in range(nl):
                        x0 = X[l + c4]
                        for r in range(G):
                            cc = cf[r, c4]
                            Ar = A[r]
                            for col in range(w):
                                Ar[col] += cc * x0[col]
                l += nl
            for step in range(cnt):  # the group's blocks, one after the other
                kb2 = kb + step if forward else kb - step
                top, bot = start[kb2], start[kb2] + size[kb2] - 1
                # sums over the rows of the group solved already
                glo, ghi = (g0, top) if forward else (bot + 1, g1 + 1)
                for l2 in range(glo, ghi):
                    x0 = X[l2]
                    for r in range(top, bot + 1):
                        cc = T[l2, r] if forward else T[r, l2]
                        Ar = A[r - g0]
                        for col in range(w):
                            Ar[col] += cc * x0[col]
                if bot > top:
                    # back: y1 = D[top] s1 + O[top] s2, y2 = O[bot] s1 + D[bot] s2; forward
                    # (T^T's block [[a, c], [b, d]]): the two off-diagonal coefficients swap
                    o1, o2 = (bot, top) if forward else (top, bot)
                    a1, a2 = A[bot - g0], A[top - g0]
                    x1, x2 = X[top], X[bot]
                    for j in range(q):
                        f1, f2 = F[top, j], F[bot, j]
                        re, im = 2 * K * j, 2 * K * j + K
                        for k in range(K):
                            s1r, s1i = f1 + a2[re + k], a2[im + k]
                            s2r, s2i = f2 + a1[re + k], a1[im + k]
                            pr, pi, qr, qi = Dr[top, k], Di[top, k], Dr[bot, k], Di[bot, k]
                            br, bi, gr, gi = Or[o1, k], Oi[o1, k], Or[o2, k], Oi[o2, k]
                            x1[re + k] = (pr * s1r - pi * s1i) + (br * s2r - bi * s2i)
                            x1[im + k] = (pr * s1i + pi * s1r) + (br * s2i + bi * s2r)
                            x2[re + k] = (gr * s1r - gi * s1i) + (qr * s2r - qi * s2i)
                            x2[im + k] = (gr * s1i + gi * s1r) + (qr * s2i + qi * s2r)
                        for k in range(K):
                            acc[k] += ((x1[re + k] * x1[re + k] + x1[im + k] * x1[im + k])
                                       + (x2[re + k] * x2[re + k] + x2[im + k] * x2[im + k]))
                else:
                    a1 = A[top - g0]
                    dr, di, xt = Dr[top], Di[top], X[top]
                    for j in range(q):
                        fj = F[top, j]
                        re, im = 2 * K * j, 2 * K * j + K
                        for k in range(K):
                            sr, si = fj + a1[re + k], a1[im + k]
                            xt[re + k] = sr * dr[k] - si * di[k]
                            xt[im + k] = sr * di[k] + si * dr[k]
                        for k in range(K):
                            acc[k] += xt[re + k] * xt[re + k] + xt[im + k] * xt[im + k]
            done += cnt
    rb = np.sqrt(rb)
    cr = np.sqrt(cr)
    return rb, cr, np.max(rb * cr), np.max(cr), np.max(rb)


# (contract: fused multiply-adds, n = 64: 67 instead of 78 us; the same norms to rounding)
_resolvent_norms = _jit.kernel(_resolvent_norms_py, fastmath={"contract"})


def resolvent_gains(T: np.ndarray, B: np.ndarray, C: np.ndarray, triangle=None,
                    eigenvalues=None):
    """Sampled ``(s, c, b)``: the largest ``||C R||_F ||R B||_F``, ``||C R||_F`` and
    ``||R B||_F`` over the sampled points ``z = e^{j theta}``, ``R = (zI - T)^{-1}``, for a
    real upper quasi-triangular (Schur) ``T``; Frobenius norms, which bound the 2-norms.
    ``triangle``: ``complex_triangle(T)`` when the caller has it (``SchurForm`` caches it),
    or a callable returning it (e.g. ``SchurForm.complex_triangle``), called only on the
    NumPy path: the compiled kernel works on the real ``T`` and needs no triangle.
    ``eigenvalues``: a callable returning ``quasi_triangular_eigvals(T)`` (e.g.
    ``SchurForm.eigenvalues``), for the pole angles of the compiled path."""
    n, m, p = T.shape[0], B.shape[1], C.shape[0]
    if n == 0:
        return 0.0, 0.0, 0.0
    # Frobenius norms are invariant under orthogonal factors on the outside:
    # ||R B||_F = ||R L||_F for B = L Q (L = R_b^T from a QR of B^T), likewise for C, so a
    # wide B or a tall C (adapter layers: n = 32..64 states, 576..768 channels) costs n, not m.
    if m > n:
        B = np.linalg.qr(B.T, mode="r").T
    if p > n:
        C = np.linalg.qr(C, mode="r")
    m, p = B.shape[1], C.shape[0]
    real = not (np.iscomplexobj(T) or np.iscomplexobj(B) or np.iscomplexobj(C))
    kern = _resolvent_norms.compiled() if real else None
    if kern is not None:  # on the real quasi-triangular T (the triangle is not needed)
        lam = quasi_triangular_eigvals(T) if eigenvalues is None else eigenvalues()
        # both sides in one call (the angles too): ||R B||_F by back substitution with T,
        # ||C R||_F = ||(zI - T^T)^{-1} C^T||_F by forward substitution with T^T (from T)
        Tk = T if T.dtype == np.float64 and (T.flags.c_contiguous or T.flags.f_contiguous) else (
            np.ascontiguousarray(T, dtype=np.float64))  # (LAPACK's Fortran-order T: no copy)
        out = kern(Tk,
                   np.ascontiguousarray(B, dtype=np.float64),
                   np.ascontiguousarray(C.T, dtype=np.float64),
                   np.ascontiguousarray(lam, dtype=np.complex128), _UNIFORM)
        return out[2], out[3], out[4]
    # complex Schur form T = U Tc U^H (U: one rotation per 2x2 block), applied to C and B^T
    if triangle is None:
        Tc, W, _, _ = to_complex_schur(T, np.vstack([C, B.T]))  # W = [C U; B^T U]
    else:  # what to_complex_schur does, with its complex_triangle(T) given
        Tc, idx, G = triangle() if callable(triangle) else triangle
        W = rotate_columns(np.vstack([C, B.T]), idx, np.conj(np.swapaxes(G, 1, 2)))
    Cc, Bc = W[:p], W[p:].conj().T  # C U and U^H B (B real)
    z = np.exp(1j * _angles(np.diag(Tc)))  # (K,)
    K = z.size
    inv = 1.0 / (z[None, :] - np.diag(Tc)[:, None])  # (n, K): 1 / (z - t_ii)
    X = np.empty((n, K, m), dtype=np.complex128)  # X[:, k] = (z_k I - Tc)^{-1} Bc
    Xf = X.reshape(n, K * m)
    for i in range(n - 1, -1, -1):  # back substitution, every frequency at once
        row = Bc[i] + (Tc[i, i + 1:] @ Xf[i + 1:]).reshape(K, m)
        X[i] = row * inv[i][:, None]
    Y = np.empty((n, K, p), dtype=np.complex128)  # Y[:, k]^T = Cc (z_k I - Tc)^{-1}
    Yf = Y.reshape(n, K * p)
    for j in range(n):  # forward substitution on the transpose
        row = Cc[:, j] + (Tc[:j, j] @ Yf[:j]).reshape(K, p)
        Y[j] = row * inv[j][:, None]
    rb = np.sqrt(np.einsum("ikj,ikj->k", X, X.conj()).real)  # (K,)
    cr = np.sqrt(np.einsum("ikj,ikj->k", Y, Y.conj()).real)
    return float(np.max(rb * cr)), float(np.max(cr)), float(np.max(rb))


def schur_rounding(T: np.ndarray, B: np.ndarray, C: np.ndarray, factor: float,
                   triangle=None, eigenvalues=None) -> float:
    """``factor n eps ((1 + ||T||_F) s + ||B||_F c + ||C||_F b)`` with the sampled gains
    of :func:`resolvent_gains` (see the module docstring; ``triangle``, ``eigenvalues`` as
    there)."""
    n = T.shape[0]
    if n == 0:
        return 0.0
    # B and C scaled by powers of 2 near their largest entries (exact: the same bits in range;
    # the term is bilinear in (B, C)): B * 1e200 with C * 1e-200 squared to inf and 0 and gave
    # inf * 0 = NaN, the bound of every order with it
    eb, ec = (math.frexp(float(abs(X).max(initial=0.0)))[1] for X in (B, C))
    if abs(eb) <= 100 and abs(ec) <= 100:  # in range the scaling changes no bit: skip it
        eb = ec = 0
    else:
        B, C = np.ldexp(B, -eb), np.ldexp(C, -ec)
    s, c, b = resolvent_gains(T, B, C, triangle, eigenvalues)
    nb, nc, nt = (math.sqrt(_fro2(X)) for X in (B, C, T))  # = np.linalg.norm(X), bit for bit
    return math.ldexp(factor * n * _EPS * ((1.0 + nt) * s + nb * c + nc * b), eb + ec)


def _fro2(X: np.ndarray) -> float:
    """``||X||_F^2`` as ``np.linalg.norm`` squares it (``x.dot(x)`` of the raveled array)."""
    x = X.ravel(order="K")
    return float(x.dot(x))
