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

With the optional compiled kernels (:mod:`lti._jit`) the sampled norms come from a
substitution in the real quasi-triangular ``T`` itself (2x2 blocks solved in closed form,
real coefficients on the real and imaginary parts: half the flops of the complex triangle,
no Python loop per row); otherwise from NumPy on the complex triangle. Both compute the
same norms; they agree to rounding (``tests/lti/test_rounding_kernel.py``).
"""

from __future__ import annotations

import math

import numpy as np

import lti._jit as _jit
from lti._schur import quasi_triangular_eigvals, rotate_columns, to_complex_schur
from lti.lowrank import is_sparse
from lti.system import DiscreteLTI

_EPS = np.finfo(np.float64).eps

#: ``rounding_term`` = 2 (n - r) delta + ROUNDING_FACTOR n eps (||D|| + 2 sum sigma) / (1 - rho^2)
#: (see BalancedTruncation.rounding_term; the measured excess of the error over the HSV
#: bounds on dense, resonant, non-normal, FIR and bidiagonal systems is in the note of
#: issue 14 item 3).
ROUNDING_FACTOR = 4.0


def rounding_terms(G: DiscreteLTI, hsv, floor: float, rho):
    """``(rounding, unit)``: the rounding term of every order k = 0..n of a stable ``G``
    without the projection's conditioning, and ``unit`` to multiply that conditioning
    with (see lti.balanced.BalancedTruncation.rounding_term)."""
    n = hsv.size
    if n == 0:
        return np.zeros(1), 0.0
    if rho is None:
        rho = G.spectral_radius() if not is_sparse(G.A) else 0.0
    d = G.D.ravel(order="K")  # ||D||_F as np.linalg.norm computes it, sqrt(d @ d)
    with np.errstate(over="ignore"):
        dd = float(d.dot(d))
    norm_D = math.sqrt(dd) if dd < math.inf else _scaled_norm(d)  # |d| > 1.3e154: d @ d = inf
    gain = norm_D + 2.0 * float(hsv.sum())  # >= ||G||_inf
    unit = ROUNDING_FACTOR * n * _EPS * gain
    base = unit / max(1.0 - rho * rho, _EPS)
    delta = floor / n  # absolute accuracy of one computed HSV
    return base + 2.0 * delta * np.arange(n, -1.0, -1.0), unit  # n - k for k = 0..n

def _scaled_norm(d: np.ndarray) -> float:
    """``||d||_2`` without overflow of the squares (entries beyond ~1e154)."""
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
    near = np.abs(np.abs(lam) - 1.0).argsort()[:N_POLE_ANGLES]  # nearest the circle
    pole = lam[near]
    theta = np.concatenate((_UNIFORM, np.abs(np.arctan2(pole.imag, pole.real))))  # np.angle
    theta.sort()
    keep = np.empty(theta.size, dtype=bool)
    keep[:1] = True
    np.not_equal(theta[1:], theta[:-1], out=keep[1:])
    return theta[keep]


def _resolvent_norms_py(T, B, zr, zi):
    """``||(z_k I - T)^{-1} B||_F`` for ``z_k = zr[k] + i zi[k]``: ``T`` real upper
    quasi-triangular (C order; a nonzero ``T[i, i-1]`` marks a 2x2 block), ``B`` real (n, m).

    Back substitution for all K points at once, row by row from the bottom: the sums
    ``T[i, i+1:] X[i+1:]`` have real coefficients, so they act on the real and imaginary
    parts alike (``X`` stores them side by side, 2 K m reals per row, four rows per pass;
    both rows of a 2x2 block in the same pass); a 1x1 block divides by ``z - t_ii``, a 2x2
    block ``[[a, b], [c, d]]`` is solved by its adjugate over ``det(zI - block) = (z - l1)
    (z - l2)`` (its eigenvalues: no cancellation near a pole). The complex arithmetic per
    point is written out in reals, operation for operation as numba (and CPython) evaluate
    the complex expressions ``1 / (z - t)``, ``(z - d) / det``, ... (the CPython division
    algorithm): the same bits as the complex code it replaced, in loops over the points.
    Compiled by :mod:`lti._jit`; also runs, slowly, as plain Python.
    """
    n, m = B.shape
    K = zr.shape[0]
    w = 2 * K * m
    X = np.zeros((n, w))
    a1 = np.empty(w)
    a2 = np.empty(w)
    out = np.zeros(K)
    acc = np.empty(K)
    cr = np.empty((4, K))  # real parts of p, q, bb, cc (2x2) / inv (1x1: row 0)
    ci = np.empty((4, K))
    i = n - 1
    while i >= 0:
        two = i > 0 and T[i, i - 1] != 0.0
        top = i - 1 if two else i
        for col in range(w):
            a1[col] = 0.0
            a2[col] = 0.0
        l = i + 1
        while l + 4 <= n:
            t0, t1, t2, t3 = T[i, l], T[i, l + 1], T[i, l + 2], T[i, l + 3]
            x0, x1, x2, x3 = X[l], X[l + 1], X[l + 2], X[l + 3]
            if two:  # both rows of the block in one pass over X[l:l+4]
                s0, s1, s2, s3 = T[top, l], T[top, l + 1], T[top, l + 2], T[top, l + 3]
                for col in range(w):
                    v0, v1, v2, v3 = x0[col], x1[col], x2[col], x3[col]
                    a1[col] += t0 * v0 + t1 * v1 + t2 * v2 + t3 * v3
                    a2[col] += s0 * v0 + s1 * v1 + s2 * v2 + s3 * v3
            else:
                for col in range(w):
                    a1[col] += t0 * x0[col] + t1 * x1[col] + t2 * x2[col] + t3 * x3[col]
            l += 4
        while l < n:
            t0, x0 = T[i, l], X[l]
            if two:
                s0 = T[top, l]
                for col in range(w):
                    v0 = x0[col]
                    a1[col] += t0 * v0
                    a2[col] += s0 * v0
            else:
                for col in range(w):
                    a1[col] += t0 * x0[col]
            l += 1
        for k in range(K):
            acc[k] = 0.0
        if two:
            a, b, c, d = T[top, top], T[top, i], T[i, top], T[i, i]
            h = 0.5 * (a + d)
            disc = np.sqrt(complex(0.25 * (a - d) * (a - d) + b * c))
            l1r, l1i = h + disc.real, 0.0 + disc.imag  # h + disc (float + complex)
            l2r, l2i = h - disc.real, 0.0 - disc.imag
            for k in range(K):
                zrk, zik = zr[k], zi[k]
                ur, ui = zrk - l1r, zik - l1i  # z - l1
                vr, vi = zrk - l2r, zik - l2i
                er, ei = ur * vr - ui * vi, ur * vi + ui * vr  # (z - l1)(z - l2)
                if abs(er) >= abs(ei):
                    ratio = ei / er
                    den = er + ei * ratio
                    ir, ii = (1.0 + 0.0 * ratio) / den, (0.0 - 1.0 * ratio) / den
                else:
                    ratio = er / ei
                    den = er * ratio + ei
                    ir, ii = (1.0 * ratio + 0.0) / den, (0.0 * ratio - 1.0) / den
                sr, si = zrk - d, zik - 0.0  # z - d
                cr[0, k], ci[0, k] = sr * ir - si * ii, sr * ii + si * ir  # p
                sr, si = zrk - a, zik - 0.0
                cr[1, k], ci[1, k] = sr * ir - si * ii, sr * ii + si * ir  # q
                cr[2, k], ci[2, k] = b * ir - 0.0 * ii, b * ii + 0.0 * ir  # bb = b inv
                cr[3, k], ci[3, k] = c * ir - 0.0 * ii, c * ii + 0.0 * ir  # cc
            for j in range(m):
                b1, b2 = B[top, j], B[i, j]
                for k in range(K):
                    col = 2 * (k * m + j)
                    s1r, s1i = b1 + a2[col], a2[col + 1]
                    s2r, s2i = b2 + a1[col], a1[col + 1]
                    pr, pi, qr, qi = cr[0, k], ci[0, k], cr[1, k], ci[1, k]
                    br_, bi_, cr_, ci_ = cr[2, k], ci[2, k], cr[3, k], ci[3, k]
                    y1r = (pr * s1r - pi * s1i) + (br_ * s2r - bi_ * s2i)
                    y1i = (pr * s1i + pi * s1r) + (br_ * s2i + bi_ * s2r)
                    y2r = (cr_ * s1r - ci_ * s1i) + (qr * s2r - qi * s2i)
                    y2i = (cr_ * s1i + ci_ * s1r) + (qr * s2i + qi * s2r)
                    X[top, col], X[top, col + 1] = y1r, y1i
                    X[i, col], X[i, col + 1] = y2r, y2i
                    acc[k] = acc[k] + (y1r * y1r + y1i * y1i) + (y2r * y2r + y2i * y2i)
        else:
            t = T[i, i]
            for k in range(K):
                er, ei = zr[k] - t, zi[k] - 0.0
                if abs(er) >= abs(ei):
                    ratio = ei / er
                    den = er + ei * ratio
                    cr[0, k], ci[0, k] = (1.0 + 0.0 * ratio) / den, (0.0 - 1.0 * ratio) / den
                else:
                    ratio = er / ei
                    den = er * ratio + ei
                    cr[0, k], ci[0, k] = (1.0 * ratio + 0.0) / den, (0.0 * ratio - 1.0) / den
            for j in range(m):
                bj = B[i, j]
                for k in range(K):
                    col = 2 * (k * m + j)
                    sr, si = bj + a1[col], a1[col + 1]
                    ir, ii = cr[0, k], ci[0, k]
                    yr, yi = sr * ir - si * ii, sr * ii + si * ir
                    X[i, col], X[i, col + 1] = yr, yi
                    acc[k] = acc[k] + (yr * yr + yi * yi)
        for k in range(K):
            out[k] += acc[k]
        i = top - 1
    return np.sqrt(out)


_resolvent_norms = _jit.kernel(_resolvent_norms_py)


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
        theta = _angles(quasi_triangular_eigvals(T) if eigenvalues is None else eigenvalues())
        zr, zi = np.cos(theta), np.sin(theta)
        Tr = np.ascontiguousarray(T, dtype=np.float64)
        rb = kern(Tr, np.ascontiguousarray(B, dtype=np.float64), zr, zi)
        # C R = (R^T C^T)^T and P (zI - T^T) P = zI - T' with T' = P T^T P upper
        # quasi-triangular (P the reversal): ||C R||_F = ||(zI - T')^{-1} P C^T||_F
        cr = kern(np.ascontiguousarray(Tr.T[::-1, ::-1]),
                  np.ascontiguousarray(C.T[::-1], dtype=np.float64), zr, zi)
        return float(np.max(rb * cr)), float(np.max(cr)), float(np.max(rb))
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
    B, C = np.ldexp(B, -eb), np.ldexp(C, -ec)
    s, c, b = resolvent_gains(T, B, C, triangle, eigenvalues)
    nb, nc, nt = (math.sqrt(_fro2(X)) for X in (B, C, T))  # = np.linalg.norm(X), bit for bit
    return math.ldexp(factor * n * _EPS * ((1.0 + nt) * s + nb * c + nc * b), eb + ec)


def _fro2(X: np.ndarray) -> float:
    """``||X||_F^2`` as ``np.linalg.norm`` squares it (``x.dot(x)`` of the raveled array)."""
    x = X.ravel(order="K")
    return float(x.dot(x))
