"""Hammarling's method on the real quasi-triangular Schur form (compiled kernel).

``A^T X A - X + C^T C = 0`` for real upper quasi-triangular ``A`` (1x1 and 2x2 diagonal
blocks), ``X = U^T U`` with real upper triangular ``U``, in real arithmetic: one step per
diagonal block of ``A``, as SLICOT's SB03OT does, instead of the complex triangle of
:mod:`lti._hammarling` (which needs the complex form of ``T``, complex arithmetic and a
structured QR at the end). Used through :func:`lti._hammarling.schur_form_factor` when compiled
kernels are enabled (:mod:`lti._jit`); the complex path is the fallback and the reference.

A step with the leading block ``A11`` (p x p), ``a12``, ``A22`` and ``C = [c1, C2]``:

1. ``U11``: ``A11^T U11^T U11 A11 - U11^T U11 + c1^T c1 = 0`` (p = 1: ``||c1|| / sqrt(1 -
   a^2)``; p = 2: the 3x3 linear system for ``X11``, then its Cholesky factor; ``c1`` scaled
   by a power of 2 first).
2. ``[U11 A11; c1] = Q [U11; 0]`` (p = 1: ``Q e1 = [a; c1 / U11]``; p = 2: two Householder
   reflections), ``Q11, Q21`` the blocks of its first p columns.
3. ``U12 - Q11^T U12 A22 = Q11^T U11 a12 + Q21^T C2``, by columns of ``A22`` (right-looking:
   a p x q system per diagonal block of ``A22``, ``q`` = 1 or 2); ``V = U12 A22`` is
   accumulated on the way.
4. ``C2 <- `` the last m rows of ``Q^T [U11 a12 + V; C2]``.
"""

from __future__ import annotations

import math

import numpy as np

from lti._jit import kernel

__all__ = ["real_hammarling"]

# a 2x2 step whose two reflections give an R that differs from the Cholesky U11 by more
# than _MISMATCH (relative) is ill-determined in real arithmetic (near-real pairs, nearly
# singular U11: the second reflection comes from a vector much shorter than its column)
# and is left, with the rest, to the complex path. Measured: the residual of such steps
# grew to 1e-13 .. 7e-10 (near-real blocks, mismatch 1.8e-13 .. 2e-6); the bench family
# (rho 0.95 / 0.9999, n = 64 / 128, both transposes) has mismatch <= 8.7e-15; with the
# check, 748 random near-real factors (/tmp sweep) stayed at residual <= 1.5e-15
# (complex path: 1.6e-15)
_MISMATCH = 1e-13
# ... unless the step is far below the factor's scale (u00 < _RELEVANT * the largest
# diagonal entry of U so far): there (fast decay, late steps) the mismatch was 1e-13 ..
# 1e-12 at u00 / max <= 5.3e-7 with residuals equal to the complex path's, while the
# near-real steps that lost accuracy had u00 / max >= 1.3e-4
_RELEVANT = 1e-5


def _real_rows_py(WH, c, m, U, negligible):
    """The steps above as loops (compiled by numba). ``WH = A^T`` (n, n) in Fortran order,
    ``c`` the (m, n) right-hand side factor flattened in Fortran order (overwritten), ``U``
    (n, n) zeros, filled. Returns n, or the first row ``j`` of a 2x2 step it did not
    take (``X11`` not numerically positive definite, or ill-determined: ``_MISMATCH``): rows
    ``< j`` of ``U`` are done and ``c[:, j:]`` is the right-hand side of the trailing
    problem (see :func:`real_hammarling`)."""

    def _householder(x, h, i0, L):
        """Reflection ``H = I - tau h h^T`` (``h[i0] = 1``, ``h[:i0] = 0``) with ``H x =
        beta e_i0`` on the entries ``i0..L-1`` of ``x`` (LAPACK dlarfg); returns (beta, tau)."""
        alpha = x[i0]
        xmax = 0.0
        for i in range(i0 + 1, L):
            xmax = max(xmax, abs(x[i]))
        for i in range(L):
            h[i] = 0.0
        h[i0] = 1.0
        if xmax == 0.0:
            return alpha, 0.0
        scale = max(xmax, abs(alpha))
        ss = 0.0
        for i in range(i0, L):
            t = x[i] / scale
            ss += t * t
        beta = -math.copysign(scale * math.sqrt(ss), alpha)
        tau = (beta - alpha) / beta
        f = 1.0 / (alpha - beta)
        for i in range(i0 + 1, L):
            h[i] = x[i] * f
        return beta, tau


    def _solve2(a, b, c, d, f0, f1):
        """``[[a, b], [c, d]] x = [f0, f1]`` with partial pivoting."""
        if abs(c) > abs(a):
            a, b, c, d, f0, f1 = c, d, a, b, f1, f0
        m = c / a
        x1 = (f1 - m * f0) / (d - m * b)
        return (f0 - b * x1) / a, x1

    def _small_solve(K, F, nk):
        """``F <- K[:nk, :nk]^-1 F[:nk]`` by Gaussian elimination with partial pivoting (K
        overwritten); nk <= 4."""
        for col in range(nk):
            piv = col
            big = abs(K[col, col])
            for r in range(col + 1, nk):
                if abs(K[r, col]) > big:
                    big = abs(K[r, col])
                    piv = r
            if piv != col:
                for cc in range(nk):
                    K[col, cc], K[piv, cc] = K[piv, cc], K[col, cc]
                F[col], F[piv] = F[piv], F[col]
            for r in range(col + 1, nk):
                f = K[r, col] / K[col, col]
                for cc in range(col + 1, nk):
                    K[r, cc] -= f * K[col, cc]
                F[r] -= f * F[col]
        for r in range(nk - 1, -1, -1):
            t = F[r]
            for cc in range(r + 1, nk):
                t -= K[r, cc] * F[cc]
            F[r] = t / K[r, r]

    n = WH.shape[0]
    tiny = 1e-290
    up = 2.0 ** 600
    acc0 = np.zeros(n)
    acc1 = np.zeros(n)
    r0 = np.zeros(n)
    r1 = np.zeros(n)
    v0 = np.zeros(n)
    v1 = np.zeros(n)
    dq = np.zeros(n)  # step 4, per column: the reflections' dot products
    z1 = np.zeros(n)
    zc = np.zeros((m, n))
    q0 = np.zeros(m + 2)
    q1 = np.zeros(m + 2)
    h1 = np.zeros(m + 2)
    h2 = np.zeros(m + 2)
    z = np.zeros(m + 2)
    K = np.zeros((4, 4))
    F = np.zeros(4)
    Q11 = np.zeros((2, 2))
    U11 = np.zeros((2, 2))
    P = np.zeros((2, 2))
    dmax = 0.0  # largest diagonal entry of U so far
    j = 0
    while j < n:
        p = 2 if (j + 1 < n and WH[j, j + 1] != 0.0) else 1
        o = j + p
        k = n - o
        cmax = 0.0
        for t in range(p):
            for i in range(m):
                cmax = max(cmax, abs(c[i + m * (j + t)]))
        # ---------------------------------------------------------------- 1. and 2.
        if p == 1:
            alpha = WH[j, j]
            s = math.sqrt(max(1.0 - alpha * alpha, 0.0))
            cn = 0.0
            ss = 1.0
            sc = 1.0
            if cmax > 0.0:  # scaled 2-norm
                if cmax < tiny:
                    sc = up
                rr = 1.0 / (cmax * sc)
                ss = 0.0
                for i in range(m):
                    t = (c[i + m * j] * sc) * rr
                    ss += t * t
                cn = cmax * math.sqrt(ss)
            if k == 0:
                U[j, j] = cn / s
                break
            if cn <= negligible:
                j += 1
                continue
            nu = cn / s
            U11[0, 0] = nu
            # Q e1 = [alpha; c1 / nu] (unit norm: alpha^2 + s^2 = 1)
            q0[0] = alpha
            if cn >= tiny:
                for i in range(m):
                    q0[1 + i] = c[i + m * j] * (s / cn)
            else:
                rr = s / (cmax * sc * math.sqrt(ss))
                for i in range(m):
                    q0[1 + i] = (c[i + m * j] * sc) * rr
            Q11[0, 0] = alpha
            # reflection H with H [alpha; chat] = -sign(alpha) e1: h = w + sign(alpha) e1
            sg = 1.0 if alpha >= 0.0 else -1.0
            h1[0] = alpha + sg
            for i in range(m):
                h1[1 + i] = q0[1 + i]
            tau1 = 1.0 / (1.0 + abs(alpha))  # 2 / (h^T h)
            P[0, 0] = alpha * nu
        else:
            a, b = WH[j, j], WH[j + 1, j]  # A11 = [[a, b], [g, d]]
            g, d = WH[j, j + 1], WH[j + 1, j + 1]
            if cmax == 0.0:
                if k == 0:
                    break
                j += 2
                continue
            # c1 * 2^e (exact) with its largest entry in [0.5, 1)
            e = -math.frexp(cmax)[1]
            e1 = min(e, 1000)
            s1 = math.ldexp(1.0, e1)
            s2 = math.ldexp(1.0, e - e1)
            inv = math.ldexp(1.0, -e1) * math.ldexp(1.0, e1 - e)  # 2^-e
            g00 = 0.0
            g01 = 0.0
            g11 = 0.0
            for i in range(m):
                x0 = (c[i + m * j] * s1) * s2
                x1 = (c[i + m * (j + 1)] * s1) * s2
                g00 += x0 * x0
                g01 += x0 * x1
                g11 += x1 * x1
            if math.sqrt(g00 + g11) * inv <= negligible:
                if k == 0:
                    break
                j += 2
                continue
            # (I - K) [X00, X01, X11] = [g00, g01, g11], K from A11^T X A11
            K[0, 0], K[0, 1], K[0, 2] = 1.0 - a * a, -2.0 * a * g, -g * g
            K[1, 0], K[1, 1], K[1, 2] = -a * b, 1.0 - (a * d + b * g), -g * d
            K[2, 0], K[2, 1], K[2, 2] = -b * b, -2.0 * b * d, 1.0 - d * d
            F[0], F[1], F[2] = g00, g01, g11
            _small_solve(K, F, 3)
            x00, x01, x11 = F[0], F[1], F[2]
            if not x00 > 0.0:
                return j
            u00 = math.sqrt(x00)
            u01 = x01 / u00
            t = x11 - u01 * u01
            if not t > 0.0:
                return j
            u11 = math.sqrt(t)
            # [U11s A11; c1s] (scaled) = H1 H2 [R; 0]
            z[0] = u00 * a + u01 * g
            z[1] = u11 * g
            q1[0] = u00 * b + u01 * d
            q1[1] = u11 * d
            for i in range(m):
                z[2 + i] = (c[i + m * j] * s1) * s2
                q1[2 + i] = (c[i + m * (j + 1)] * s1) * s2
            beta1, tau1 = _householder(z, h1, 0, m + 2)
            if beta1 == 0.0:
                return j
            dot = 0.0
            for i in range(m + 2):
                dot += h1[i] * q1[i]
            for i in range(m + 2):
                q1[i] -= tau1 * dot * h1[i]
            beta2, tau2 = _householder(q1, h2, 1, m + 2)
            if beta2 == 0.0:
                return j
            # the reflections' R must reproduce U11 (its small equation): see _MISMATCH
            if ((abs(abs(beta1) - u00) > _MISMATCH * u00
                 or abs(abs(beta2) - u11) > _MISMATCH * u11)
                    and u00 * inv >= _RELEVANT * dmax):
                return j
            # first two columns of Q = H1 H2, signs so that Q^T [U11 A11; c1] = U11
            for i in range(m + 2):
                q0[i] = -tau1 * h1[i]
            q0[0] += 1.0
            for i in range(m + 2):
                z[i] = -tau2 * h2[i] if i >= 1 else 0.0
            z[1] += 1.0
            dot = 0.0
            for i in range(m + 2):
                dot += h1[i] * z[i]
            for i in range(m + 2):
                q1[i] = z[i] - tau1 * dot * h1[i]
            d0 = 1.0 if beta1 > 0.0 else -1.0
            d1 = 1.0 if beta2 > 0.0 else -1.0
            for i in range(m + 2):
                q0[i] *= d0
                q1[i] *= d1
            U11[0, 0], U11[0, 1] = u00 * inv, u01 * inv
            U11[1, 0], U11[1, 1] = 0.0, u11 * inv
            Q11[0, 0], Q11[0, 1] = q0[0], q1[0]
            Q11[1, 0], Q11[1, 1] = q0[1], q1[1]
            for r in range(2):
                for rp in range(2):
                    P[r, rp] = Q11[0, r] * U11[0, rp] + Q11[1, r] * U11[1, rp]
        for r in range(p):
            for rp in range(r, p):
                U[j + r, j + rp] = U11[r, rp]
            dmax = max(dmax, abs(U11[r, r]))
        if k == 0:
            break
        # ---------------------------------------------------------------- 3.
        # right-hand side Q11^T U11 a12 + Q21^T C2, a12[r, q] = A[j + r, o + q] (the
        # columns side by side, as in step 4)
        if p == 1:
            p00 = P[0, 0]
            for q in range(k):
                r0[q] = p00 * WH[o + q, j]
            for i in range(m):
                qi = q0[1 + i]
                for q in range(k):
                    r0[q] += qi * c[i + m * (o + q)]
        else:
            p00, p01, p10, p11 = P[0, 0], P[0, 1], P[1, 0], P[1, 1]
            for q in range(k):
                x0 = WH[o + q, j]
                x1 = WH[o + q, j + 1]
                r0[q] = p00 * x0 + p01 * x1
                r1[q] = p10 * x0 + p11 * x1
            for i in range(m):
                qi, qi1 = q0[2 + i], q1[2 + i]
                for q in range(k):
                    ci = c[i + m * (o + q)]
                    r0[q] += qi * ci
                    r1[q] += qi1 * ci
        for q in range(k):
            acc0[q] = 0.0
            acc1[q] = 0.0
        q00, q01, q10, q11 = Q11[0, 0], Q11[0, 1], Q11[1, 0], Q11[1, 1]
        qq = 0
        while qq < k:
            w = 2 if (qq + 1 < k and WH[o + qq, o + qq + 1] != 0.0) else 1
            # B = A22[qq:qq+w, qq:qq+w]; X = U12[:, qq:qq+w] solves X - Q11^T X B = F,
            # F = R + Q11^T acc: a p*w system (I - B^T kron Q11^T) vec X = vec F
            iq = o + qq
            b00 = WH[iq, iq]
            if p == 1:
                f0 = r0[qq] + q00 * acc0[qq]
                if w == 1:
                    x00 = f0 / (1.0 - b00 * q00)
                    v0[qq] = acc0[qq] + x00 * b00
                    r0[qq] = x00
                else:  # X (I - q00 B) = F: the transposed 2x2 system
                    b01, b10, b11 = WH[iq + 1, iq], WH[iq, iq + 1], WH[iq + 1, iq + 1]
                    f1 = r0[qq + 1] + q00 * acc0[qq + 1]
                    x00, x01 = _solve2(1.0 - q00 * b00, -q00 * b10, -q00 * b01,
                                       1.0 - q00 * b11, f0, f1)
                    v0[qq] = acc0[qq] + x00 * b00 + x01 * b10
                    v0[qq + 1] = acc0[qq + 1] + x00 * b01 + x01 * b11
                    r0[qq], r0[qq + 1] = x00, x01
            else:
                f0 = r0[qq] + q00 * acc0[qq] + q10 * acc1[qq]
                f1 = r1[qq] + q01 * acc0[qq] + q11 * acc1[qq]
                if w == 1:  # (I - b00 Q11^T) x = f
                    x00, x10 = _solve2(1.0 - b00 * q00, -b00 * q10, -b00 * q01,
                                       1.0 - b00 * q11, f0, f1)
                    v0[qq] = acc0[qq] + x00 * b00
                    v1[qq] = acc1[qq] + x10 * b00
                    r0[qq], r1[qq] = x00, x10
                else:  # the 4x4 system, vec X = [x00, x10, x01, x11]
                    b01, b10, b11 = WH[iq + 1, iq], WH[iq, iq + 1], WH[iq + 1, iq + 1]
                    F[0], F[1] = f0, f1
                    F[2] = r0[qq + 1] + q00 * acc0[qq + 1] + q10 * acc1[qq + 1]
                    F[3] = r1[qq + 1] + q01 * acc0[qq + 1] + q11 * acc1[qq + 1]
                    # K[(r, c), (r', c')] = delta - B[c', c] Q11[r', r]
                    for cc in range(2):
                        for cp in range(2):
                            bb = (b00 if cc == 0 else b01) if cp == 0 else (b10 if cc == 0 else b11)
                            K[2 * cc, 2 * cp] = -bb * q00
                            K[2 * cc, 2 * cp + 1] = -bb * q10
                            K[2 * cc + 1, 2 * cp] = -bb * q01
                            K[2 * cc + 1, 2 * cp + 1] = -bb * q11
                    for i in range(4):
                        K[i, i] += 1.0
                    _small_solve(K, F, 4)
                    x00, x10, x01, x11 = F[0], F[1], F[2], F[3]
                    v0[qq] = acc0[qq] + x00 * b00 + x01 * b10
                    v1[qq] = acc1[qq] + x10 * b00 + x11 * b10
                    v0[qq + 1] = acc0[qq + 1] + x00 * b01 + x01 * b11
                    v1[qq + 1] = acc1[qq + 1] + x10 * b01 + x11 * b11
                    r0[qq], r1[qq], r0[qq + 1], r1[qq + 1] = x00, x10, x01, x11
            # acc[:, q] += X A22[qq:qq+w, q] for the later columns (fused, vectorised; indices,
            # not slices: a view per block pair costs its reference counting, ~6 us at n = 64)
            lo = qq + w
            if w == 1:
                if p == 1:
                    for q in range(lo, k):
                        acc0[q] += x00 * WH[o + q, iq]
                else:
                    for q in range(lo, k):
                        t = WH[o + q, iq]
                        acc0[q] += x00 * t
                        acc1[q] += x10 * t
            else:
                if p == 1:
                    for q in range(lo, k):
                        acc0[q] += x00 * WH[o + q, iq] + x01 * WH[o + q, iq + 1]
                else:
                    for q in range(lo, k):
                        t, t1 = WH[o + q, iq], WH[o + q, iq + 1]
                        acc0[q] += x00 * t + x01 * t1
                        acc1[q] += x10 * t + x11 * t1
            qq += w
        # ---------------------------------------------------------------- 4.
        # C2 <- rows of Q^T [U11 a12 + V; C2], each column q as before but the columns side
        # by side (q innermost: the same operations per column, vectorised; ~12 us less)
        if p == 1:
            u00 = U11[0, 0]
            for q in range(k):
                dq[q] = h1[0] * (u00 * WH[o + q, j] + v0[q])
            for i in range(m):
                hi = h1[1 + i]
                for q in range(k):
                    dq[q] += hi * c[i + m * (o + q)]
            for q in range(k):
                dq[q] *= tau1
            for i in range(m):
                hi = h1[1 + i]
                for q in range(k):
                    c[i + m * (o + q)] -= dq[q] * hi
        else:
            u00, u01, u11 = U11[0, 0], U11[0, 1], U11[1, 1]
            for q in range(k):
                x1 = WH[o + q, j + 1]
                z0q = u00 * WH[o + q, j] + u01 * x1 + v0[q]
                z1q = u11 * x1 + v1[q]
                t = 0.0
                t += h1[0] * z0q
                t += h1[1] * z1q
                dq[q] = t
                z1[q] = z1q
            for i in range(m):
                hi = h1[2 + i]
                for q in range(k):
                    dq[q] += hi * c[i + m * (o + q)]
            for q in range(k):
                dq[q] *= tau1
                z1[q] -= dq[q] * h1[1]
            for i in range(m):
                hi = h1[2 + i]
                for q in range(k):
                    zc[i, q] = c[i + m * (o + q)] - dq[q] * hi
            for q in range(k):
                t = 0.0
                t += h2[1] * z1[q]
                dq[q] = t
            for i in range(m):
                hi = h2[2 + i]
                for q in range(k):
                    dq[q] += hi * zc[i, q]
            for q in range(k):
                dq[q] *= tau2
            for i in range(m):
                hi = h2[2 + i]
                for q in range(k):
                    c[i + m * (o + q)] = zc[i, q] - dq[q] * hi
        for q in range(k):
            U[j, o + q] = r0[q]
            if p == 2:
                U[j + 1, o + q] = r1[q]
        j += p
    return n


_real_rows = kernel(_real_rows_py, error_model="numpy")


def real_hammarling(WH: np.ndarray, C: np.ndarray, negligible: float):
    """``(U, j, C)``: rows ``< j`` of the upper triangular real ``U`` with ``A^T U^T U A -
    U^T U + C^T C = 0`` (``WH = A^T`` in Fortran order, ``A`` upper quasi-triangular; ``C``
    (m, n) Fortran order, overwritten and returned); ``j = n`` when all steps were taken,
    else ``C[:, j:]`` is the right-hand side of the trailing problem with ``A[j:, j:]``
    (a 2x2 step at row ``j`` the real recursion does not take accurately: the caller
    finishes it on the complex triangle). None when compiled kernels are off."""
    n = WH.shape[0]
    kern = _real_rows.compiled() if n >= 2 else None  # (n = 1: nothing to gain)
    if kern is None:
        return None
    U = np.zeros((n, n), order="F")
    c = C.reshape(-1, order="F")  # a view: C is Fortran-contiguous
    j = kern(WH, c, C.shape[0], U, negligible)
    return U, j, c.reshape(C.shape, order="F")
