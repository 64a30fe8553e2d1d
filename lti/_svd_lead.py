"""All singular values of a square matrix and only its leading singular vectors (internal).

Balanced truncation needs every Hankel singular value (they enter the bounds) but the
singular vectors of only the r kept states. LAPACK's ``dgesdd`` computes all of them: at
n = 64 the vectors cost about as much as the values. Here, with LAPACK through
:mod:`scipy.linalg.cython_lapack` (``dgebrd``, ``dlasq1``, called with raw addresses into
one block) and two compiled kernels (:mod:`lti._jit`):

1. ``M = Q B P^T`` with ``B`` upper bidiagonal (``dgebrd``), all singular values of ``B``
   by dqds (``dlasq1``: high relative accuracy for the bidiagonal, so the values are as
   accurate as ``dgesdd``'s, ``eps ||M||`` absolutely);
2. on request, the k leading singular pairs of ``B`` by inverse iteration on its
   Golub-Kahan form ``[[0, B^T], [B, 0]]`` (permuted to a tridiagonal with zero diagonal),
   shifted by the computed values, with Gram-Schmidt among values closer than
   ``1e-3 ||B||`` (as LAPACK's ``dstein``), the k values side by side;
3. ``U = Q U_B``, ``V^T = V_B^T P^T`` for those k columns only (``dormbr``'s products, one
   reflector at a time on all k columns).

The vectors are accepted only when they pass a check: ``||B v_i - s_i u_i||`` and
``||B^T u_i - s_i v_i|| <= 4 n eps ||B||`` for each pair and ``|U_B^T U_B - I|``,
``|V_B^T V_B - I| <= 4 n eps`` entrywise. Orthonormal pairs with such residuals are exact
singular pairs of some ``B + E`` with ``||E|| <= 8 n eps ||B||`` (backward stable like
``dgesdd``'s), and by Weyl's inequality they belong to its k leading values. Otherwise the
caller falls back to ``dgesdd``. (LAPACK's own ``dbdsvdx`` does step 2 by bisection and is
several times slower than ``dgesdd`` at these sizes.)
"""

from __future__ import annotations

import ctypes

import numpy as np

from lti._jit import kernel

__all__ = ["MAX_VECTORS", "LeadingSVD"]

_EPS = np.finfo(np.float64).eps
#: At most this many leading vectors by inverse iteration (the Gram-Schmidt of a cluster is
#: quadratic in their number); more fall back to dgesdd.
MAX_VECTORS = 64


def _lapack(name: str, nargs: int):
    """A LAPACK routine of scipy's cython_lapack as a ctypes function (pointer arguments)."""
    from scipy.linalg import cython_lapack

    get = ctypes.pythonapi.PyCapsule_GetPointer
    get.restype, get.argtypes = ctypes.c_void_p, [ctypes.py_object, ctypes.c_char_p]
    cname = ctypes.pythonapi.PyCapsule_GetName
    cname.restype, cname.argtypes = ctypes.c_char_p, [ctypes.py_object]
    cap = cython_lapack.__pyx_capi__[name]
    return ctypes.CFUNCTYPE(None, *([ctypes.c_void_p] * nargs))(get(cap, cname(cap)))


_ROUTINES: dict = {}
# the one-letter arguments of dormbr, as NUL-terminated byte strings (kept alive here)
_CHARS = {c: ctypes.c_char_p(c) for c in (b"Q", b"P", b"L", b"R", b"N", b"T")}


def _routines():
    """``(dgebrd, dlasq1, dormbr)``, or None where they cannot be had (then dgesdd)."""
    if "lapack" not in _ROUTINES:
        try:
            _ROUTINES["lapack"] = (_lapack("dgebrd", 11), _lapack("dlasq1", 5),
                                   _lapack("dormbr", 14))
        except (AttributeError, KeyError, TypeError, ValueError, ImportError):
            _ROUTINES["lapack"] = None
    return _ROUTINES["lapack"]


def _block(nfloat: int, nint: int):
    """``(floats, ints, address)``: one fresh float64 block of ``nfloat`` entries followed by
    ``nint`` LAPACK integers (int32), and the block's address. The routines take raw
    addresses (``address + 8 * offset``): one ``ndarray.ctypes`` look-up per block instead
    of a ctypes object per argument (~8 us of Python per LAPACK call at n = 64 before)."""
    buf = np.empty(nfloat + (nint + 1) // 2)
    return buf[:nfloat], buf[nfloat:].view(np.int32)[:nint], buf.ctypes.data


def _tgk_vectors_py(d, e, s, k, Ub, Vb):
    """Inverse iteration for the k leading singular pairs of the upper bidiagonal ``B``
    (diagonal ``d``, superdiagonal ``e``, both scaled so that ``s[0] = ||B|| = 1``), ``s``
    its singular values, descending: ``Ub[:, i]``, ``Vb[:, i]`` with ``B v = s_i u``,
    ``B^T u = s_i v``. Returns the largest residual of the pairs or entry of ``U_B^T U_B
    - I`` and ``V_B^T V_B - I``, whichever is larger (``inf`` on failure).

    The Golub-Kahan matrix permuted to the tridiagonal ``T`` (zero diagonal, off-diagonal
    ``d_1, e_1, d_2, ..., d_n``) has the eigenvectors ``(v_1, u_1, v_2, u_2, ...) / sqrt 2``
    for the eigenvalues ``s_i``. Per value: one LU with partial pivoting of ``T - s_i I``
    (LAPACK ``dgttrf``; zero pivots replaced by ``eps``), two solves (``dgtts2``) from a
    fixed start, each normalised, then Gram-Schmidt (twice) against the vectors of the
    values within ``1e-3`` before it (LAPACK ``dstein``'s cluster rule; each solve already
    damps their components by ``eps / gap``); then u and v are read off and each normalised
    (a mixture with the ``-s_i`` vector ``(v, -u)`` changes neither). The k factorisations
    and solves are independent: they run side by side, one lane per value (rows ``(N, k)``,
    the pivoting as selects: the same operations per lane, no branch, so the compiled loops
    vectorise across the values instead of waiting on each row's division; n = 64, k = 16:
    ~55 us one value after the other); the Gram-Schmidt then runs in the values' order.
    Compiled by :mod:`lti._jit`; also runs, slowly, as plain Python."""
    n = d.shape[0]
    N = 2 * n
    off = np.zeros(N)
    for i in range(n):
        off[2 * i] = d[i]
        if i < n - 1:
            off[2 * i + 1] = e[i]
    dl = np.empty((N, k))
    dd = np.empty((N, k))
    du = np.empty((N, k))
    du2 = np.zeros((N, k))
    sw = np.zeros((N, k))  # 1.0 where row j was swapped with row j + 1 (the pivot)
    x = np.empty((N, k))
    for j in range(N):  # T - s_i I: diagonal -s_i, both off-diagonals off
        oj = off[j]
        for i in range(k):
            dd[j, i] = -s[i]
            dl[j, i] = oj
            du[j, i] = oj
    for j in range(N - 1):  # LAPACK dgttrf, lane by lane (both branches as selects)
        last = j < N - 2
        for i in range(k):
            ddj, dlj, duj, dd1 = dd[j, i], dl[j, i], du[j, i], dd[j + 1, i]
            swap = abs(ddj) < abs(dlj)
            den = dlj if swap else (_EPS if ddj == 0.0 else ddj)
            f = (ddj if swap else dlj) / den
            dd[j, i] = den
            dl[j, i] = f
            dd[j + 1, i] = (duj if swap else dd1) - f * (dd1 if swap else duj)
            du[j, i] = dd1 if swap else duj
            sw[j, i] = 1.0 if swap else 0.0
            if last:
                du1 = du[j + 1, i]
                du2[j, i] = du1 if swap else 0.0
                du[j + 1, i] = -f * du1 if swap else du1
    for j in range(N):
        for i in range(k):
            v = dd[j, i]
            dd[j, i] = 1.0 / (_EPS if v == 0.0 else v)  # (the pivots' reciprocals from here on)
            x[j, i] = 1.0 + ((7 * j + 3 * i) % 11) / 11.0  # a fixed start, no special direction
    big = np.empty(k)
    for _ in range(2):
        for j in range(N - 1):  # solve L U x = b (LAPACK dgtts2)
            for i in range(k):
                xj, x1 = x[j, i], x[j + 1, i]
                swap = sw[j, i] != 0.0
                b = x1 if swap else xj
                x[j, i] = b
                x[j + 1, i] = (xj if swap else x1) - dl[j, i] * b
        for i in range(k):
            x[N - 1, i] *= dd[N - 1, i]
            x[N - 2, i] = (x[N - 2, i] - du[N - 2, i] * x[N - 1, i]) * dd[N - 2, i]
        for j in range(N - 3, -1, -1):
            for i in range(k):
                x[j, i] = (x[j, i] - du[j, i] * x[j + 1, i] - du2[j, i] * x[j + 2, i]) * dd[j, i]
        for i in range(k):
            big[i] = 0.0
        for j in range(N):
            for i in range(k):
                big[i] = max(big[i], abs(x[j, i]))
        for i in range(k):
            if not big[i] < np.inf or big[i] == 0.0:
                return np.inf
            big[i] = 1.0 / big[i]
        for j in range(N):
            for i in range(k):
                x[j, i] *= big[i]
    X = np.zeros((k, N))  # the TGK vectors (for Gram-Schmidt)
    worst = 0.0
    first = 0  # first value of the current cluster
    for i in range(k):
        sig = s[i]
        if i > 0 and s[i - 1] - sig > 1e-3:
            first = i
        xi = X[i]
        for j in range(N):
            xi[j] = x[j, i]
        for _ in range(2):  # Gram-Schmidt within the cluster, twice
            for p in range(first, i):
                xp = X[p]
                t = 0.0
                for j in range(N):
                    t += xp[j] * xi[j]
                for j in range(N):
                    xi[j] -= t * xp[j]
            t = 0.0
            for j in range(N):
                t += xi[j] * xi[j]
            if t == 0.0:
                return np.inf
            t = 1.0 / np.sqrt(t)
            for j in range(N):
                xi[j] *= t
        nv = 0.0
        nu = 0.0
        for j in range(n):
            nv += xi[2 * j] * xi[2 * j]
            nu += xi[2 * j + 1] * xi[2 * j + 1]
        if nv == 0.0 or nu == 0.0:
            return np.inf
        nv, nu = 1.0 / np.sqrt(nv), 1.0 / np.sqrt(nu)
        for j in range(n):
            Vb[j, i] = xi[2 * j] * nv
            Ub[j, i] = xi[2 * j + 1] * nu
        r1 = 0.0  # ||B v - s u||^2, ||B^T u - s v||^2
        r2 = 0.0
        for j in range(n):
            bv = d[j] * Vb[j, i] + (e[j] * Vb[j + 1, i] if j < n - 1 else 0.0)
            btu = d[j] * Ub[j, i] + (e[j - 1] * Ub[j - 1, i] if j > 0 else 0.0)
            r1 += (bv - sig * Ub[j, i]) ** 2
            r2 += (btu - sig * Vb[j, i]) ** 2
        worst = max(worst, np.sqrt(max(r1, r2)))
    for i in range(k):  # and the orthonormality: max |U^T U - I|, |V^T V - I| entrywise
        for p in range(i + 1):
            gu = 0.0
            gv = 0.0
            for j in range(n):
                gu += Ub[j, i] * Ub[j, p]
                gv += Vb[j, i] * Vb[j, p]
            if p == i:
                gu -= 1.0
                gv -= 1.0
            worst = max(worst, abs(gu), abs(gv))
    return worst


_tgk_vectors = kernel(_tgk_vectors_py, fastmath={"reassoc", "contract", "arcp"})  # (checked after)


def _back_transform_py(A, tauq, taup, U, V):
    """``U <- Q U`` and ``V <- P V`` in place, with ``M = Q B P^T`` as ``dgebrd`` leaves it
    in ``A`` (n, n), Fortran order (m = n: the left reflectors ``H_j = I - tauq_j v v^T``,
    ``v = [0 (j); 1; A[j+1:, j]]``, j = 0..n-1, the right ones ``G_j = I - taup_j w w^T``,
    ``w = [0 (j + 1); 1; A[j, j+2:]]``, j = 0..n-3); ``U``, ``V`` (n, k), C order: LAPACK
    ``dormbr``'s products (``Q U`` and ``(V^T P^T)^T``) one reflector at a time, as its
    unblocked ``dorm2r`` applies them, each to the k columns at once (rows of k
    contiguous entries: no short reductions); for the k << n vectors of the leading route
    cheaper than the blocked code and its two calls. Compiled by :mod:`lti._jit`; also
    runs, slowly, as plain Python."""
    n, k = U.shape
    w = np.empty(n)
    t = np.empty(k)
    for side in range(2):
        X = U if side == 0 else V
        for j in range(n - 1 if side == 0 else n - 3, -1, -1):
            # Q U = H_0 (H_1 (... H_{n-1} U)); P V = G_0 (G_1 (... G_{n-3} V))
            tau = tauq[j] if side == 0 else taup[j]
            if tau == 0.0:
                continue
            j0 = j if side == 0 else j + 1  # the reflector's unit entry
            for i in range(j0 + 1, n):
                w[i] = A[i, j] if side == 0 else A[j, i]
            for c in range(k):
                t[c] = X[j0, c]
            for i in range(j0 + 1, n):
                wi = w[i]
                for c in range(k):
                    t[c] += wi * X[i, c]
            for c in range(k):
                t[c] *= tau
                X[j0, c] -= t[c]
            for i in range(j0 + 1, n):
                wi = w[i]
                for c in range(k):
                    X[i, c] -= wi * t[c]


_back_transform = kernel(_back_transform_py, fastmath={"reassoc", "contract"})


class LeadingSVD:
    """The singular values of a square ``M`` (n, n) and, on request, its k leading singular
    vectors (see the module docstring). ``values`` is None when this route is not available
    (no compiled kernels, LAPACK failure, not square): use ``dgesdd`` then."""

    __slots__ = ("_A", "_addr", "_d", "_e", "_tq", "_tp", "n", "values")

    def __init__(self, M: np.ndarray | None, factors: tuple | None = None):
        # ``factors = (Lc, Lo)`` (both (n, n)) in place of M: M = Lo^T Lc formed in the block
        # (as (Lc^T Lo)^T: the same product, bit for bit, without a copy of it)
        self.values = None
        shape = M.shape if factors is None else (factors[0].shape[1], factors[1].shape[1])
        self.n = n = shape[0]
        lib = _routines()
        if lib is None or shape[1] != n or n < 2 or _tgk_vectors.compiled() is None:
            return
        dgebrd, dlasq1, _ = lib
        lwork = 64 * 2 * n
        nw = max(lwork, 4 * n)
        # one block: A (n, n) Fortran order (overwritten by the reflectors), d, e, tq, tp,
        # the values s and es (dlasq1 overwrites its copies), work; integers n, lwork, info
        f, ints, base = _block(n * n + 6 * n + nw, 3)
        A = f[: n * n].reshape((n, n), order="F")
        if factors is None:
            A[...] = M
        else:
            np.matmul(factors[0].T, factors[1], out=A.T)  # A.T: the block in C order
        o = n * n
        d, e, tq, tp, s, es = (f[o + i * n: o + (i + 1) * n] for i in range(6))
        ints[0], ints[1], ints[2] = n, lwork, 0
        pa = base
        pd, pe, ptq, ptp, ps, pes = (base + 8 * (o + i * n) for i in range(6))
        pwork = base + 8 * (o + 6 * n)
        pn = base + 8 * f.size
        plw, pinfo = pn + 4, pn + 8
        dgebrd(pn, pn, pa, pn, pd, pe, ptq, ptp, pwork, plw, pinfo)
        if ints[2] != 0:  # pragma: no cover - argument errors only
            return
        s[:], es[:] = d, e
        dlasq1(pn, ps, pes, pwork, pinfo)
        if ints[2] != 0 or not s[0] > 0.0 or not np.isfinite(s[0]):
            return  # dqds did not converge (or M = 0): dgesdd
        self._A, self._d, self._e, self._tq, self._tp = A, d, e, tq, tp
        self._addr = (pa, ptq, ptp)
        self.values = s.copy()  # (a fresh array: the caller keeps it, not the block)

    def vectors(self, k: int):
        """``(U, Vt)``, shapes (n, k) and (k, n): the k leading singular vectors, or None
        when they do not pass the check (or k > MAX_VECTORS): use ``dgesdd`` then."""
        n, s = self.n, self.values
        if s is None or k > MAX_VECTORS:
            return None
        if k == 0:
            return np.zeros((n, 0)), np.zeros((0, n))
        scale = s[0]
        nk = n * k
        f = np.empty(2 * nk)  # Ub, Vb (n, k), C order (rows of k: _back_transform_py)
        Ub = f[:nk].reshape((n, k))
        Vb = f[nk:].reshape((n, k))
        res = _tgk_vectors.compiled()(self._d / scale, self._e[: n - 1] / scale, s / scale, k,
                                      Ub, Vb)
        if not res <= 4.0 * n * _EPS:  # (the residuals and the orthonormality)
            return None
        _back_transform.compiled()(self._A, self._tq, self._tp, Ub, Vb)  # U = Q U_B, V = P V_B
        return Ub, Vb.T
