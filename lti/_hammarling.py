"""Hammarling's square-root method: the factor ``U`` (``X = U^H U``) of
``A^H X A - X + C^H C = 0`` for triangular ``A``, without forming ``X`` (diagonal ``A``:
:func:`lti.modal.diagonal_stein_factor`).

Also the structured QR that makes the complex factor of a real problem real. The public
entry point is :func:`lti.lyapunov.lyapunov_factor`.
"""

from __future__ import annotations

import math

import numpy as np
import scipy.linalg as sla
from scipy.linalg import blas, lapack

from lti._hammarling_real import real_hammarling
from lti._jit import kernel
from lti._schur import complex_triangle, ct, rotate_columns, rotate_rows_
from lti.exceptions import SolverError

__all__ = [
    "compress_rows",
    "hammarling_dense",
    "hammarling_lower",
    "real_gram_factor",
    "schur_factor",
    "schur_form_factor",
]

_EPS = float(np.finfo(np.float64).eps)
_PANEL = 64  # steps between re-packing the active block in Hammarling's method
_JIT_ROWS = 512  # compiled kernel: the rows whose active block is at most this size


def _scaled_unit(c: np.ndarray):
    """``(||c||, c / ||c||)`` without under/overflow (``(0, None)`` for ``c = 0``).

    Hammarling's reflection needs ``||[c / nu; alpha]|| = 1`` to working accuracy even
    when ``c`` has decayed to subnormal size; a plain ``sqrt(sum c^2)`` loses all digits
    there and corrupts the remaining right-hand side.
    """
    cmax = float(np.max(np.abs(c), initial=0.0))
    if cmax == 0.0:
        return 0.0, None
    if np.iscomplexobj(c):  # complex / real would form 1 / cmax: overflow for subnormal cmax
        cs = np.empty_like(c)
        cs.real, cs.imag = c.real / cmax, c.imag / cmax
    else:
        cs = c / cmax
    nrm = float(np.sqrt(np.real(np.vdot(cs, cs))))
    return cmax * nrm, cs / nrm


def _hammarling_rows_py(WH, c, m, U, r0, negligible):
    """Hammarling's factor as plain loops (compiled by numba: :data:`_hammarling_rows`);
    the arithmetic of :func:`hammarling_lower`'s BLAS loop step by step, the same
    formulas and branches, the BLAS calls written out as loops.

    ``WH`` (k, k) is the trailing block of ``A^H`` (lower triangular, Fortran order) from
    row ``r0`` on, ``c`` the matching (m, k) right-hand side factor, flattened in Fortran
    order (overwritten); rows ``r0..r0+k-1`` of ``U`` receive ``u`` (not conjugated, as the
    BLAS loop stores it). The flat ``c`` and Fortran-ordered 2-D arrays keep the argument
    types, hence the compilations, to one per dtype.
    """
    n = WH.shape[0]
    tiny = 1e-290
    up = 2.0 ** 600  # exact scaling of a subnormal column (1 / cmax would overflow)
    chat = np.zeros_like(c[:m])
    g = np.zeros_like(WH[:, 0])
    u = np.zeros_like(g)
    y = np.zeros_like(g)
    for j in range(n):
        alpha = np.conj(WH[j, j])
        aa = abs(alpha)
        s = math.sqrt(max(1.0 - aa * aa, 0.0))
        cmax = 0.0
        for i in range(m):
            cmax = max(cmax, abs(c[i + m * j]))
        cn = 0.0
        ss = 1.0
        sc = 1.0
        if cmax > 0.0:  # scaled 2-norm, as BLAS nrm2 (no under/overflow)
            if cmax < tiny:
                sc = up
            r = 1.0 / (cmax * sc)
            ss = 0.0
            for i in range(m):
                t = (c[i + m * j] * sc) * r  # (exact scaling first: sc * r overflows)
                ss += t.real * t.real + t.imag * t.imag
            cn = cmax * math.sqrt(ss)
        if j == n - 1:
            U[r0 + j, r0 + j] = cn / s
            break
        if cn <= negligible:
            continue
        nu = cn / s
        if cn >= tiny:
            for i in range(m):
                chat[i] = c[i + m * j] * (s / cn)  # c / nu
        else:  # the unit vector of c, times s
            r = s / (cmax * sc * math.sqrt(ss))
            for i in range(m):
                chat[i] = (c[i + m * j] * sc) * r
        k = n - j - 1
        o = j + 1
        for q in range(k):  # g = C2^H c / nu
            acc = np.conj(c[m * (o + q)]) * chat[0]
            for i in range(1, m):
                acc += np.conj(c[i + m * (o + q)]) * chat[i]
            g[q] = acc
        if aa > tiny:
            phase = alpha / aa
        else:
            phase = alpha * 0.0 + 1.0
        vm = alpha + phase * math.sqrt(s * s + aa * aa)
        f = 2.0 / (s * s + abs(vm) ** 2)
        trmv = aa < 0.5  # y = nu a + A2^H u needed: by a product (below 0.5, as the BLAS loop)
        if trmv:
            for q in range(k):
                y[q] = 0.0
        if aa < tiny:  # u = g + alpha nu a; y by the lower triangular product, by columns
            for q in range(k):
                u[q] = g[q] + (alpha * nu) * WH[o + q, j]
            for p in range(k):
                t = u[p]
                w, v = WH[o + p :, o + p], y[p:k]
                for q in range(w.shape[0]):
                    v[q] += w[q] * t
        else:  # (A2^H - I / alpha) u = -g / alpha - nu a, forward substitution by columns
            ia = 1.0 / alpha
            for q in range(k):
                u[q] = WH[o + q, j] * (-nu) + (-ia) * g[q]
            for p in range(k):
                t = u[p] / (WH[o + p, o + p] - ia)
                u[p] = t
                w, v = WH[o + p + 1 :, o + p], u[p + 1 : k]  # views: the loops vectorise
                if trmv:  # the product in the same pass (same order of sums as a trmv)
                    yv = y[p + 1 : k]
                    y[p] += WH[o + p, o + p] * t
                    for q in range(w.shape[0]):
                        v[q] -= w[q] * t
                        yv[q] += w[q] * t
                else:
                    for q in range(w.shape[0]):
                        v[q] -= w[q] * t
            if not trmv:  # y = (u - g) / alpha: coef = f (1 - vm / alpha) g + (f vm / alpha) u
                c1 = f * (1.0 - vm / alpha)
                c2 = f * vm / alpha
                for q in range(k):
                    g[q] = g[q] * c1 + c2 * u[q]
                f = 1.0
        if trmv:  # coef = g + vm y, y = nu a + A2^H u
            for q in range(k):
                g[q] = g[q] + vm * (y[q] + nu * WH[o + q, j])
        U[r0 + j, r0 + j] = nu
        for q in range(k):
            U[r0 + j, r0 + o + q] = u[q]
        for q in range(k):  # C2 <- C2 - f chat coef^H, coef in g
            t = f * np.conj(g[q])
            for i in range(m):
                c[i + m * (o + q)] -= chat[i] * t
    return U


_hammarling_rows = kernel(_hammarling_rows_py, error_model="numpy")


def hammarling_dense(A: np.ndarray, C: np.ndarray) -> np.ndarray:
    """Hammarling's method for ``A^H X A - X + C^H C = 0``, ``A`` upper triangular.

    Returns upper triangular ``U`` (n, n) with ``X = U^H U``. Row j of ``U`` is found from
    the 1x1 leading block, a shifted triangular solve with the trailing block of ``A^H``
    and a Householder update that keeps the right-hand side factor at m rows.
    """
    dtype = np.result_type(A, C, np.float64)
    return hammarling_lower(np.asfortranarray(ct(A.astype(dtype, copy=False))),
                            np.array(C, dtype=dtype, order="F", copy=True))


def hammarling_lower(WH: np.ndarray, C: np.ndarray) -> np.ndarray:
    """:func:`hammarling_dense` given ``WH = A^H`` (lower triangular, Fortran order) and a
    Fortran-ordered ``C`` of the same dtype, which is overwritten (the work array).

    One step per row of ``U``: one matrix-vector product ``g = C2^H c`` (shared by the
    right-hand side and the Householder update), one shifted triangular solve (level-2 BLAS
    on a packed copy of the active block, re-packed every ``_PANEL`` steps, in a
    preallocated zero-padded vector) and the Householder update of ``C`` as one BLAS rank-1
    update; the row of ``U`` and the update are formed from ``g`` and ``u`` by in-place
    BLAS calls (about ten calls per step: the loop is bound by their overhead below
    n ~ 500).

    With compiled kernels (numba, :mod:`lti._jit`) the rows whose active block has at
    most ``_JIT_ROWS`` rows run in :func:`_hammarling_rows_py` instead (the same steps as
    loops, no call overhead); above it the BLAS loop does the leading rows (measured per
    factor, complex, one thread: n = 64 0.69 -> 0.08 ms, 256 6.6 -> 2.2, 512 23 -> 15).
    """
    n = WH.shape[0]
    cplx = np.iscomplexobj(WH)
    dtype = WH.dtype
    if C.shape[0] == 0:  # no right-hand side (BLAS nrm2 refuses empty vectors): X = 0
        return np.zeros((n, n), dtype=dtype, order="F")
    kern = _hammarling_rows.compiled()  # None: numba missing or LTI_DISABLE_JIT=1
    # rows whose active block is at most _JIT_ROWS: compiled loop; before them: BLAS
    jstop = n if kern is None or n < 2 else max(n - _JIT_ROWS, 0)
    # a column of the right-hand side factor below this level is dropped: it changes
    # C^H C by less than 1e-3 eps relative, so the residual is unaffected
    negligible = 1e-3 * np.finfo(np.float64).eps * _scaled_unit(C.ravel(order="K"))[0]
    U = np.zeros((n, n), dtype=dtype, order="F")  # column rotations and dtpqrt want F
    if cplx:  # gerc: C2 - v coef^H with coef = conj of the Householder row
        trsv, trmv, gemv, ger, nrm2 = blas.ztrsv, blas.ztrmv, blas.zgemv, blas.zgerc, blas.dznrm2
        axpy, ctrans = blas.zaxpy, 2  # conjugate transpose in gemv
    else:
        trsv, trmv, gemv, ger, nrm2 = blas.dtrsv, blas.dtrmv, blas.dgemv, blas.dger, blas.dnrm2
        axpy, ctrans = blas.daxpy, 1
    alphas = np.conj(np.diagonal(WH)).tolist()  # diagonal of A
    start, W, Wdiag, d0, x, z, dirty = 0, None, None, None, None, None, 0
    tiny = 1e-290
    sqrt = math.sqrt
    multiply, subtract = np.multiply, np.subtract
    for j in range(jstop):
        alpha = alphas[j]
        aa = abs(alpha)
        c = C[:, j]
        cn = nrm2(c)  # BLAS nrm2 is scaled: no under/overflow
        s = sqrt(max(1.0 - aa * aa, 0.0))
        if j == n - 1:
            U[j, j] = cn / s
            break
        if cn <= negligible:
            continue
        nu = cn / s
        if cn >= tiny:
            chat_s = c * (s / cn)  # c / nu
        else:  # subnormal scale: 1 / cn would overflow
            chat_s = _scaled_unit(c)[1] * s
        a = WH[j + 1 :, j]  # conj(A[j, j+1:])
        C2 = C[:, j + 1 :]
        # active block of A^H: rows/cols j+1.. ; re-pack a contiguous copy every _PANEL steps
        if W is None or j + 1 - start >= _PANEL:
            start = j + 1
            W = np.asfortranarray(WH[start:, start:])
            Wdiag = W.reshape(-1, order="F")[:: W.shape[0] + 1]
            d0 = Wdiag.copy()
            x = np.zeros(W.shape[0], dtype=dtype)  # x[:off] zero: trsv keeps it zero
            z = np.zeros(W.shape[0], dtype=dtype)  # the same for trmv (zeroed after use)
            dirty = 0  # x[dirty:] may hold the last solve's u
        off = j + 1 - start
        g = gemv(1.0, C2, chat_s, trans=ctrans)  # C2^H c / nu
        xr = x[off:]
        # Householder H with H w = beta e_last, w = [c / nu; alpha] (unit norm: |chat|^2 =
        # s^2 = 1 - |alpha|^2); the first m rows of H [C2; y^H] are the new right-hand side
        # factor, i.e. C2 <- C2 - chat coef^H (coef^T for real data) with
        # coef = f (C2^H chat + vm y) = f (g + vm y), y = nu a + A2^H u
        phase = alpha / aa if aa > tiny else 1.0
        vm = alpha + phase * sqrt(s * s + aa * aa)
        f = 2.0 / (s * s + abs(vm) ** 2)
        if aa < tiny:  # u = -rhs = g + alpha nu a, A^H u by one trmv
            u = axpy(a, g.copy(), a=alpha * nu)
            Wdiag[:] = d0
            z[off:] = u
            y = trmv(W, z, lower=1, overwrite_x=1)[off:]
            axpy(a, y, a=nu)
            coef = axpy(y, g, a=vm)
            z[off:] = 0.0
        else:
            if dirty < off:
                x[dirty:off] = 0.0
            dirty = off
            multiply(a, -nu, out=xr)  # x[off:] = rhs / alpha = -g / alpha - nu a
            axpy(g, xr, a=-1.0 / alpha)
            subtract(d0, 1.0 / alpha, out=Wdiag)  # (A2^H - I/alpha) u = rhs/alpha
            trsv(W, x, lower=1, overwrite_x=1)
            u = xr
            if aa >= 0.5:  # A2^H u = rhs/alpha + u/alpha, so y = (u - g) / alpha:
                # coef = f (1 - vm / alpha) g + (f vm / alpha) u
                coef = multiply(g, f * (1.0 - vm / alpha), out=g)
                axpy(u, coef, a=f * vm / alpha)
                f = 1.0  # already in coef
            else:  # y = nu a + A2^H u by trmv on the unshifted block (no 1/alpha)
                Wdiag[:] = d0
                z[off:] = u
                y = trmv(W, z, lower=1, overwrite_x=1)[off:]
                axpy(a, y, a=nu)
                coef = axpy(y, g, a=vm)
                z[off:] = 0.0
        U[j, j] = nu
        U[j, j + 1 :] = u  # conjugated at the end
        ger(-f, chat_s, coef, a=C2, overwrite_a=1)  # in place: C2 is a Fortran view of C
    if jstop < n:  # on a packed copy of the trailing block (leading dimension n - jstop)
        kern(np.asfortranarray(WH[jstop:, jstop:]), C[:, jstop:].ravel(order="F"),
             C.shape[0], U, jstop, negligible)
    if cplx:
        np.conjugate(U, out=U)  # rows were stored as u; U[j, j+1:] = conj(u)
    return U


def schur_factor(Tc: np.ndarray, idx: np.ndarray, G: np.ndarray, Bs: np.ndarray,
                 transpose: bool) -> tuple[np.ndarray, bool]:
    """Hammarling's factor in real Schur coordinates, real data: ``(R, flip)``.

    ``A = Z T Z^T`` real, ``(Tc, idx, G)`` the complex triangle of ``T``
    (:func:`lti._schur.complex_triangle`), ``Bs = Z^T B`` real (n, m). The solution of
    ``T Xs T^T - Xs + Bs Bs^T = 0`` (``T^T Xs T - ...`` with `transpose`) is
    ``Xs = R^T R`` (`transpose`) or ``Xs = P R^T R P`` (``flip``, ``P`` the reversal), with
    ``R`` real upper triangular; so ``L = Z R^T`` (``Z[:, ::-1] R^T``) factors ``X``.
    The complex right-hand side ``Zc^H B = Gf^H Bs`` is ``Bs`` with its row pairs rotated;
    the complex Schur vectors are never formed.
    """
    cplx = idx.size > 0
    if cplx:
        Bt = rotate_rows_(Bs.astype(np.complex128), idx, G)
    else:
        Tc, Bt = Tc.real, Bs
    if transpose:  # Tc^H Y Tc - Y + Bt Bt^H = 0: Hammarling's form, A^H = Tc^H
        WH, C = np.asfortranarray(ct(Tc)), compress_rows(ct(Bt))
    else:  # Tc Y Tc^H - Y + Bt Bt^H = 0: reversal P, A = P Tc^H P, A^H = P Tc P
        WH, C = np.asfortranarray(Tc[::-1, ::-1]), compress_rows(ct(Bt[::-1]))
    U = hammarling_lower(WH, np.array(C, dtype=WH.dtype, order="F", copy=True))
    flip = not transpose
    if not cplx:
        return U, flip
    # Zc = Z Gf, so Xs = Gf Up^H Up Gf^H with the quasi-triangular Mp = U Gf^H (transpose)
    # or P (U P Gf^H) P (flip); Mp^H Mp = R^T R is real
    rotate_columns(U[:, ::-1] if flip else U, idx, G, inplace=True)  # U becomes Mp
    return real_gram_factor(U), flip


def schur_form_factor(schur, Bs: np.ndarray, transpose: bool) -> tuple[np.ndarray, bool]:
    """:func:`schur_factor` from a :class:`lti._schur.SchurForm` with real ``T``: the
    compiled real quasi-triangular kernel (:mod:`lti._hammarling_real`, no complex
    triangle) when compiled kernels are enabled, else the complex triangle of ``T``
    (cached in `schur`). Should the real recursion stop at a 2x2 step (not positive
    definite, or a nearly real pair), the trailing problem is finished on the complex
    triangle of its block."""
    T = schur.T
    if T.dtype == np.float64 and Bs.dtype == np.float64:
        if transpose:  # T^T Xs T - Xs + Bs Bs^T = 0: A = T
            WH, C = T.T, compress_rows(Bs.T)
        else:  # T Xs T^T - ...: A = P T^T P upper quasi-triangular, A^T = P T P
            WH, C = T[::-1, ::-1], compress_rows(Bs[::-1].T)
        C = np.array(C, order="F", copy=True)
        c = C.ravel(order="K")
        # ||c|| as _scaled_unit computes it; for the unit-scaled right-hand sides of
        # lti.gramians (largest entry exactly 1) that is sqrt(c . c), bit for bit
        nrm = math.sqrt(float(c.dot(c))) if float(abs(c).max(initial=0.0)) == 1.0 else (
            _scaled_unit(c)[0])
        negligible = 1e-3 * _EPS * nrm
        WH = np.asfortranarray(WH)
        out = real_hammarling(WH, C, negligible)
        if out is not None:
            R, j, C = out
            if j < R.shape[0]:  # the trailing problem from a degenerate 2x2 step on
                A22 = np.ascontiguousarray(WH[j:, j:].T)
                R[j:, j:] = schur_factor(*complex_triangle(A22), C[:, j:].T, True)[0]
            return R, not transpose
    Tc, idx, G = schur.complex_triangle()
    return schur_factor(Tc, idx, G, Bs, transpose)


def compress_rows(C: np.ndarray) -> np.ndarray:
    """Return ``R`` with ``R^H R = C^H C`` and at most n rows."""
    m, n = C.shape
    if m <= n:
        return C
    return sla.qr(C, mode="r", check_finite=False)[0][:n]


def real_gram_factor(M: np.ndarray) -> np.ndarray:
    """Upper triangular real ``R`` with ``R^T R = M^H M`` for complex quasi-upper-triangular
    ``M`` (nonzeros at most one below the diagonal) whose Gram matrix is real.

    ``M^H M = Mr^T Mr + Mi^T Mi``: one Givens rotation per subdiagonal entry makes ``Mr``
    and ``Mi`` triangular (row rotations leave each Gram matrix unchanged), then LAPACK
    ``dtpqrt`` computes the QR factor of the stacked triangles in about ``n^3 / 3`` flops.
    """
    n = M.shape[0]
    parts = []
    for P in (M.real, M.imag):
        P = np.array(P, order="F", copy=True)
        if n > 1:
            k = np.flatnonzero(np.diagonal(P, -1)) + 1
            if k.size:
                x, y = P[k - 1, k - 1], P[k, k - 1]
                r = np.hypot(x, y)
                c, s = x / r, y / r
                r0, r1 = P[k - 1].copy(), P[k].copy()
                P[k - 1] = c[:, None] * r0 + s[:, None] * r1
                P[k] = -s[:, None] * r0 + c[:, None] * r1
                P[k, k - 1] = 0.0  # annihilated (what is left there is rounding)
        parts.append(P)  # upper triangular: only the first subdiagonal was nonzero
    if not np.any(parts[1]):
        return parts[0]
    # dtpqrt leaves the (zero) strictly lower part of A untouched: R is upper triangular
    nb = min(n, 16 if n <= 256 else 32)  # block size (measured: n = 256 0.77 ms vs 1.09 for 64)
    R, _, _, info = lapack.dtpqrt(n, nb, parts[0], parts[1], overwrite_a=1, overwrite_b=1)
    if info != 0:  # pragma: no cover - LAPACK argument errors only
        raise SolverError(f"LAPACK dtpqrt failed with info={info}")
    return R
