"""All singular values of a square matrix and only its leading singular vectors (internal).

Balanced truncation needs every Hankel singular value (they enter the bounds) but the
singular vectors of only the r kept states. LAPACK's ``dgesdd`` computes all of them: at
n = 64 the vectors cost about as much as the values. Here, with LAPACK through
:mod:`scipy.linalg.cython_lapack` (``dgebrd``, ``dlasq1``, ``dormbr``):

1. ``M = Q B P^T`` with ``B`` upper bidiagonal (``dgebrd``), all singular values of ``B``
   by dqds (``dlasq1``: high relative accuracy for the bidiagonal, so the values are as
   accurate as ``dgesdd``'s, ``eps ||M||`` absolutely);
2. on request, the k leading singular pairs of ``B`` by inverse iteration on its
   Golub-Kahan form ``[[0, B^T], [B, 0]]`` (permuted to a tridiagonal with zero diagonal),
   shifted by the computed values, with Gram-Schmidt among values closer than
   ``1e-3 ||B||`` (as LAPACK's ``dstein``), compiled (:mod:`lti._jit`);
3. ``U = Q U_B``, ``V^T = V_B^T P^T`` for those k columns only (``dormbr``).

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


def _routines():
    """``(dgebrd, dlasq1, dormbr)``, or None where they cannot be had (then dgesdd)."""
    if "lapack" not in _ROUTINES:
        try:
            _ROUTINES["lapack"] = (_lapack("dgebrd", 10), _lapack("dlasq1", 5),
                                   _lapack("dormbr", 14))
        except (AttributeError, KeyError, TypeError, ValueError, ImportError):
            _ROUTINES["lapack"] = None
    return _ROUTINES["lapack"]


def _ptr(a: np.ndarray):
    return ctypes.c_void_p(a.ctypes.data)


def _int(v: int):
    return ctypes.byref(ctypes.c_int(v))


def _char(c: bytes):
    return ctypes.c_char_p(c)


def _tgk_vectors_py(d, e, s, k, Ub, Vb):
    """Inverse iteration for the k leading singular pairs of the upper bidiagonal ``B``
    (diagonal ``d``, superdiagonal ``e``, both scaled so that ``s[0] = ||B|| = 1``), ``s``
    its singular values, descending: ``Ub[:, i]``, ``Vb[:, i]`` with ``B v = s_i u``,
    ``B^T u = s_i v``. Returns the largest residual of the pairs (``inf`` on failure).

    The Golub-Kahan matrix permuted to the tridiagonal ``T`` (zero diagonal, off-diagonal
    ``d_1, e_1, d_2, ..., d_n``) has the eigenvectors ``(v_1, u_1, v_2, u_2, ...) / sqrt 2``
    for the eigenvalues ``s_i``. Per value: one LU with partial pivoting of ``T - s_i I``
    (LAPACK ``dgttrf``; zero pivots replaced by ``eps``), two solves (``dgtts2``) from a
    fixed start, each normalised, then Gram-Schmidt (twice) against the vectors of the
    values within ``1e-3`` before it (LAPACK ``dstein``'s cluster rule; each solve already
    damps their components by ``eps / gap``); then u and v are read off and each normalised
    (a mixture with the ``-s_i`` vector ``(v, -u)`` changes neither). Compiled by
    :mod:`lti._jit`; also runs, slowly, as plain Python."""
    n = d.shape[0]
    N = 2 * n
    off = np.zeros(N)
    for i in range(n):
        off[2 * i] = d[i]
        if i < n - 1:
            off[2 * i + 1] = e[i]
    X = np.zeros((k, N))  # the TGK vectors so far (for Gram-Schmidt)
    dl = np.empty(N)
    dd = np.empty(N)
    du = np.empty(N)
    du2 = np.zeros(N)
    piv = np.empty(N, dtype=np.int64)
    worst = 0.0
    first = 0  # first value of the current cluster
    for i in range(k):
        sig = s[i]
        if i > 0 and s[i - 1] - sig > 1e-3:
            first = i
        for j in range(N):  # T - sig I: diagonal -sig, both off-diagonals off
            dd[j] = -sig
            dl[j] = off[j]
            du[j] = off[j]
            du2[j] = 0.0
        for j in range(N - 1):  # LAPACK dgttrf
            if abs(dd[j]) >= abs(dl[j]):
                piv[j] = j
                if dd[j] == 0.0:
                    dd[j] = _EPS
                f = dl[j] / dd[j]
                dl[j] = f
                dd[j + 1] -= f * du[j]
            else:
                piv[j] = j + 1
                f = dd[j] / dl[j]
                dd[j] = dl[j]
                dl[j] = f
                t = du[j]
                du[j] = dd[j + 1]
                dd[j + 1] = t - f * dd[j + 1]
                if j < N - 2:
                    du2[j] = du[j + 1]
                    du[j + 1] = -f * du[j + 1]
        x = X[i]
        for j in range(N):
            if dd[j] == 0.0:
                dd[j] = _EPS
            dd[j] = 1.0 / dd[j]  # (the pivots' reciprocals from here on)
            x[j] = 1.0 + ((7 * j + 3 * i) % 11) / 11.0  # a fixed start, no special direction
        for _ in range(2):
            for j in range(N - 1):  # solve L U x = b (LAPACK dgtts2)
                ip = piv[j]
                t = x[2 * j + 1 - ip] - dl[j] * x[ip]
                x[j] = x[ip]
                x[j + 1] = t
            x[N - 1] *= dd[N - 1]
            x[N - 2] = (x[N - 2] - du[N - 2] * x[N - 1]) * dd[N - 2]
            for j in range(N - 3, -1, -1):
                x[j] = (x[j] - du[j] * x[j + 1] - du2[j] * x[j + 2]) * dd[j]
            big = 0.0
            for j in range(N):
                big = max(big, abs(x[j]))
            if not big < np.inf or big == 0.0:
                return np.inf
            big = 1.0 / big
            for j in range(N):
                x[j] *= big
        for _ in range(2):  # Gram-Schmidt within the cluster, twice
            for p in range(first, i):
                xp = X[p]
                t = 0.0
                for j in range(N):
                    t += xp[j] * x[j]
                for j in range(N):
                    x[j] -= t * xp[j]
            t = 0.0
            for j in range(N):
                t += x[j] * x[j]
            if t == 0.0:
                return np.inf
            t = 1.0 / np.sqrt(t)
            for j in range(N):
                x[j] *= t
        nv = 0.0
        nu = 0.0
        for j in range(n):
            nv += x[2 * j] * x[2 * j]
            nu += x[2 * j + 1] * x[2 * j + 1]
        if nv == 0.0 or nu == 0.0:
            return np.inf
        nv, nu = 1.0 / np.sqrt(nv), 1.0 / np.sqrt(nu)
        for j in range(n):
            Vb[j, i] = x[2 * j] * nv
            Ub[j, i] = x[2 * j + 1] * nu
        r1 = 0.0  # ||B v - s u||^2, ||B^T u - s v||^2
        r2 = 0.0
        for j in range(n):
            bv = d[j] * Vb[j, i] + (e[j] * Vb[j + 1, i] if j < n - 1 else 0.0)
            btu = d[j] * Ub[j, i] + (e[j - 1] * Ub[j - 1, i] if j > 0 else 0.0)
            r1 += (bv - sig * Ub[j, i]) ** 2
            r2 += (btu - sig * Vb[j, i]) ** 2
        worst = max(worst, np.sqrt(max(r1, r2)))
    return worst


_tgk_vectors = kernel(_tgk_vectors_py, fastmath={"reassoc", "contract", "arcp"})  # (checked after)


class LeadingSVD:
    """The singular values of a square ``M`` (n, n) and, on request, its k leading singular
    vectors (see the module docstring). ``values`` is None when this route is not available
    (no compiled kernels, LAPACK failure, not square): use ``dgesdd`` then."""

    __slots__ = ("_A", "_d", "_e", "_tq", "_tp", "n", "values")

    def __init__(self, M: np.ndarray):
        self.values = None
        self.n = n = M.shape[0]
        lib = _routines()
        if lib is None or M.shape[1] != n or n < 2 or _tgk_vectors.compiled() is None:
            return
        dgebrd, dlasq1, _ = lib
        A = np.array(M, order="F", dtype=np.float64)  # overwritten by the reflectors
        d, e, tq, tp = np.empty(n), np.empty(n), np.empty(n), np.empty(n)
        lwork = 64 * 2 * n
        work = np.empty(max(lwork, 4 * n))
        info = ctypes.c_int(0)
        dgebrd(_int(n), _int(n), _ptr(A), _int(n), _ptr(d), _ptr(e), _ptr(tq), _ptr(tp),
               _ptr(work), _int(lwork), ctypes.byref(info))
        if info.value != 0:  # pragma: no cover - argument errors only
            return
        s, es = d.copy(), e.copy()
        dlasq1(_int(n), _ptr(s), _ptr(es), _ptr(work), ctypes.byref(info))
        if info.value != 0 or not s[0] > 0.0 or not np.isfinite(s[0]):
            return  # dqds did not converge (or M = 0): dgesdd
        self._A, self._d, self._e, self._tq, self._tp = A, d, e, tq, tp
        self.values = s

    def vectors(self, k: int):
        """``(U, Vt)``, shapes (n, k) and (k, n): the k leading singular vectors, or None
        when they do not pass the check (or k > MAX_VECTORS): use ``dgesdd`` then."""
        n, s = self.n, self.values
        if s is None or k > MAX_VECTORS:
            return None
        if k == 0:
            return np.zeros((n, 0)), np.zeros((0, n))
        scale = s[0]
        Ub, Vb = np.empty((n, k), order="F"), np.empty((n, k), order="F")
        res = _tgk_vectors.compiled()(self._d / scale, self._e[: n - 1] / scale, s / scale, k,
                                      Ub, Vb)
        tol = 4.0 * n * _EPS
        if not res <= tol:
            return None
        eye = np.eye(k)
        if not (np.abs(Ub.T @ Ub - eye).max() <= tol and np.abs(Vb.T @ Vb - eye).max() <= tol):
            return None
        _, _, dormbr = _routines()
        lwork = 64 * max(n, k) + 65 * 64  # blocked (dlarfb) code needs nb * k + 65 * 64
        work = np.empty(lwork)
        info = ctypes.c_int(0)
        A = self._A
        dormbr(_char(b"Q"), _char(b"L"), _char(b"N"), _int(n), _int(k), _int(n), _ptr(A),
               _int(n), _ptr(self._tq), _ptr(Ub), _int(n), _ptr(work), _int(lwork),
               ctypes.byref(info))
        Vt = np.asfortranarray(Vb.T)  # (k, n): V^T = V_B^T P^T
        dormbr(_char(b"P"), _char(b"R"), _char(b"T"), _int(k), _int(n), _int(n), _ptr(A),
               _int(n), _ptr(self._tp), _ptr(Vt), _int(k), _ptr(work), _int(lwork),
               ctypes.byref(info))
        if info.value != 0:  # pragma: no cover - argument errors only
            return None
        return Ub, Vt
