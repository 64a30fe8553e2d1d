"""Real Schur form ``A = Z T Z^T`` shared by the Lyapunov solvers, and its complex form.

One job: the decomposition (:class:`SchurForm`, :func:`real_schur`), the real-to-complex
rotation of its 2x2 blocks and the eigenvalues read off ``T``. Re-exported by
:mod:`lti.lyapunov`, the public face.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import scipy.linalg as sla
from scipy.linalg import lapack

from lti._jit import kernel
from lti._validation import as_float_matrix, check_square

__all__ = [
    "SchurForm",
    "complex_triangle",
    "ct",
    "quasi_triangular_eigvals",
    "real_schur",
    "rotate_columns",
    "rotate_rows_",
    "system_schur",
    "to_complex_schur",
]


def ct(M: np.ndarray) -> np.ndarray:
    """Conjugate transpose (a plain transpose, no copy, for real ``M``)."""
    return M.conj().T if np.iscomplexobj(M) else M.T


@dataclass(frozen=True, eq=False)
class SchurForm:
    """Real Schur decomposition ``A = Z T Z^T`` (``T`` upper quasi-triangular, ``Z``
    orthogonal), computed once and shared by several Lyapunov solves.

    Attributes
    ----------
    T : ndarray, shape (n, n)
        Upper quasi-triangular factor (1x1 and 2x2 diagonal blocks, standard form).
    Z : ndarray, shape (n, n)
        Orthogonal factor.
    """

    T: np.ndarray
    Z: np.ndarray

    @property
    def n(self) -> int:
        """Order of the matrix."""
        return self.T.shape[0]

    def eigenvalues(self) -> np.ndarray:
        """Eigenvalues read off the diagonal blocks of ``T``, shape (n,), complex (computed
        once and cached; each call returns a fresh copy)."""
        ev = self.__dict__.get("_eigvals_cache")
        if ev is None:
            ev = quasi_triangular_eigvals(self.T)
            object.__setattr__(self, "_eigvals_cache", ev)
        return ev.copy()

    def complex_form(self):
        """Complex Schur form ``(Tc, Zc)`` with ``A = Zc Tc Zc^H``, ``Tc`` triangular (cached)."""
        Tc, Zc, _, _ = self.complex_parts()
        return Tc, Zc

    def complex_triangle(self):
        """``(Tc, idx, G)`` of :func:`complex_triangle` (cached): ``Tc = Gf^H T Gf``
        without forming the complex Schur vectors."""
        cached = self.__dict__.get("_complex_cache") or self.__dict__.get("_triangle_cache")
        if cached is not None:
            return cached[0], cached[-2], cached[-1]
        if np.iscomplexobj(self.T):
            tri = (self.T, np.zeros(0, dtype=int), np.zeros((0, 2, 2)))
        else:
            tri = complex_triangle(self.T)
        object.__setattr__(self, "_triangle_cache", tri)
        return tri

    def complex_parts(self):
        """``(Tc, Zc, idx, G)`` (cached): ``Zc = Z blockdiag(G_k^H)`` on the index pairs
        ``(idx_k - 1, idx_k)``, as returned by :func:`to_complex_schur`."""
        cached = self.__dict__.get("_complex_cache")
        if cached is None:
            if np.iscomplexobj(self.T):
                cached = (self.T, self.Z, np.zeros(0, dtype=int), np.zeros((0, 2, 2)))
            else:
                cached = to_complex_schur(self.T, self.Z)
            object.__setattr__(self, "_complex_cache", cached)
        return cached


def complex_triangle(T: np.ndarray):
    """Complex triangular form of a real quasi-triangular ``T``: ``(Tc, idx, G)`` with
    ``Tc = Gf^H T Gf``, ``Gf`` block diagonal with blocks ``G_k^H`` on rows/columns
    ``(idx_k - 1, idx_k)`` (one unitary rotation per 2x2 block, as ``rsf2csf``).

    The blocks sit on disjoint index pairs, so the rotations commute and are applied all
    at once.
    """
    n = T.shape[0]
    idx = np.flatnonzero(np.diag(T, -1)) + 1 if n > 1 else np.zeros(0, dtype=int)
    Tc = T.astype(np.complex128)
    if idx.size == 0:
        return Tc, idx, np.zeros((0, 2, 2), dtype=np.complex128)
    a, b = T[idx - 1, idx - 1], T[idx - 1, idx]
    c, d = T[idx, idx - 1], T[idx, idx]
    scale = np.max(np.abs([a, b, c, d]), axis=0)  # rotations are scale invariant
    a, b, c, d = a / scale, b / scale, c / scale, d / scale
    lam = 0.5 * (a + d) + np.sqrt((0.25 * (a - d) ** 2 + b * c).astype(np.complex128))
    mu = lam - d
    r = np.hypot(np.abs(mu), np.abs(c))
    cs, sn = mu / r, c / r
    G = np.empty((idx.size, 2, 2), dtype=np.complex128)
    G[:, 0, 0], G[:, 0, 1], G[:, 1, 0], G[:, 1, 1] = np.conj(cs), sn, -sn, cs
    rotate_rows_(Tc, idx, G)  # T <- G T
    rotate_columns(Tc, idx, np.conj(np.swapaxes(G, 1, 2)), inplace=True)  # T <- T G^H
    # the pairs touch nothing below the diagonal but their own subdiagonal entry, which
    # the rotation annihilates (what is left there is rounding)
    Tc[idx, idx - 1] = 0.0
    return Tc, idx, G


def rotate_rows_(M: np.ndarray, idx: np.ndarray, G: np.ndarray) -> np.ndarray:
    """In place: row pairs ``(idx_k - 1, idx_k)`` of ``M`` multiplied by the 2x2 ``G_k``."""
    if idx.size:
        pairs = np.stack([idx - 1, idx], axis=1)  # (k, 2)
        M[pairs] = np.matmul(G, M[pairs])  # (k, 2, 2) @ (k, 2, ...) batched
    return M


def to_complex_schur(T: np.ndarray, Z: np.ndarray):
    """Real -> complex Schur form by one unitary rotation per 2x2 block (as ``rsf2csf``).

    Returns ``(Tc, Zc, idx, G)`` with ``Tc = Gf^H T Gf``, ``Zc = Z Gf`` where ``Gf`` is
    block diagonal with blocks ``G_k^H`` on rows/columns ``(idx_k - 1, idx_k)``
    (:func:`complex_triangle`).
    """
    Tc, idx, G = complex_triangle(T)
    Zc = Z.astype(np.complex128)
    if idx.size:
        Zc = rotate_columns(Zc, idx, np.conj(np.swapaxes(G, 1, 2)))  # Z <- Z G^H
    return Tc, Zc, idx, G


def rotate_columns(M: np.ndarray, idx: np.ndarray, H: np.ndarray, *,
                   inplace: bool = False) -> np.ndarray:
    """Return ``M`` with column pairs ``(idx_k - 1, idx_k)`` multiplied by the 2x2 ``H_k``
    (a copy, or ``M`` itself with `inplace`, which needs the result dtype already)."""
    if not inplace:
        M = M.astype(np.result_type(M, H), copy=True)
    if idx.size == 0:
        return M
    pairs = np.stack([idx - 1, idx], axis=1)  # (k, 2)
    P = M[:, pairs]  # (n, k, 2)
    M[:, pairs] = np.matmul(P.transpose(1, 0, 2), H).transpose(1, 0, 2)  # batched 2x2
    return M


def real_schur(A) -> SchurForm:
    """Real Schur decomposition of a square matrix, for reuse across solves.

    Parameters
    ----------
    A : array_like, shape (n, n)
        Real square matrix (complex input gives the complex Schur form).

    Returns
    -------
    SchurForm
        ``A = Z T Z^T`` (``Z T Z^H`` for complex input).

    Examples
    --------
    >>> import numpy as np
    >>> from lti import real_schur
    >>> A = np.array([[0.5, 1.0], [-0.4, 0.2]])
    >>> S = real_schur(A)
    >>> bool(np.linalg.norm(S.Z @ S.T @ S.Z.T - A) < 1e-14)
    True
    """
    A = as_float_matrix("A", A, allow_complex=True)
    check_square("A", A)
    if np.iscomplexobj(A):
        T, Z = sla.schur(A, output="complex", check_finite=False)
    elif A.dtype == np.float64 and A.shape[0] > 0:
        T, Z = _dgees(A)
    else:
        T, Z = sla.schur(A, output="real", check_finite=False)
    return SchurForm(T, Z)


def system_schur(A: np.ndarray) -> SchurForm:
    """:func:`real_schur` of a validated system's ``A`` (float64, square, finite, n >= 1:
    a :class:`lti.DiscreteLTI`'s): the same decomposition without the second validation
    and copy of ``A`` (dgees works on its own Fortran-order copy)."""
    return SchurForm(*_dgees(A))


_GEES_LWORK: dict[int, int] = {}  # n -> LAPACK's optimal workspace for dgees


def _no_sort(x, y=None):
    return None


def _dgees(A: np.ndarray):
    """``scipy.linalg.schur(A, output="real")`` for float64 ``A`` (the same LAPACK call and
    workspace, bit for bit) without its per-call workspace query and second copy of ``A``:
    ~35 us of 1.0 ms at n = 64, ~90 us of 7 ms at n = 128."""
    n = A.shape[0]
    lwork = _GEES_LWORK.get(n)
    if lwork is None:
        lwork = int(lapack.dgees(_no_sort, A, lwork=-1)[-2][0].real)
        if len(_GEES_LWORK) > 256:
            _GEES_LWORK.clear()
        _GEES_LWORK[n] = lwork
    T, _, _, _, Z, _, info = lapack.dgees(_no_sort, np.array(A, order="F"), lwork=lwork,
                                          overwrite_a=1)
    if info < 0:  # pragma: no cover - argument errors only
        raise ValueError(f"illegal value in {-info}-th argument of internal gees")
    if info > 0:  # as scipy.linalg.schur
        raise np.linalg.LinAlgError("Schur form not found. Possibly ill-conditioned.")
    return T, Z


def _eigvals_py(d, sup, sub, ev):
    """:func:`quasi_triangular_eigvals` of a real ``T`` as a loop: ``d``, ``sup``, ``sub``
    its diagonal, super- and subdiagonal, ``ev`` (n, 2) the real and imaginary parts out.
    The NumPy code's operations one by one (``(a - d)^2`` as a product, ``h + disc`` and
    the scale ``* 1.0`` as complex operations, the complex square root of a real number
    exact); False, with ``ev`` incomplete, when a block's ``b c`` needs the NumPy code's
    rescaling. Compiled by :mod:`lti._jit` (n = 64: ~2 us instead of ~20-50)."""
    n = d.shape[0]
    for i in range(n):
        ev[i, 0] = d[i]
        ev[i, 1] = 0.0
    for i in range(n - 1):
        if sub[i] != 0.0:
            a, b, c, dd = d[i], sup[i], sub[i], d[i + 1]
            bc = b * c
            t = abs(bc)
            if t < 2.0 ** -960 or not t < 2.0 ** 960:
                return False
            h = 0.5 * (a + dd)
            e = a - dd
            x = 0.25 * (e * e) + bc
            if x > 0.0:
                sr, si = math.sqrt(x), 0.0
            elif x < 0.0:
                sr, si = 0.0, math.sqrt(-x)
            else:
                sr, si = x, 0.0
            r1, i1 = h + sr, 0.0 + si  # half_tr + disc
            r2, i2 = h - sr, 0.0 - si
            ev[i, 0], ev[i, 1] = r1 * 1.0 - i1 * 0.0, r1 * 0.0 + i1 * 1.0  # (...) * sc
            ev[i + 1, 0], ev[i + 1, 1] = r2 * 1.0 - i2 * 0.0, r2 * 0.0 + i2 * 1.0
    return True


_eigvals = kernel(_eigvals_py)


def quasi_triangular_eigvals(T: np.ndarray) -> np.ndarray:
    n = T.shape[0]
    if n >= 2 and T.dtype == np.float64:  # compiled loop (lti._jit), bit for bit the below
        kern = _eigvals.compiled()
        if kern is not None:
            out = np.empty((n, 2))
            if kern(T.diagonal(), T.diagonal(1), T.diagonal(-1), out):
                return out.view(np.complex128).reshape(n)
    ev = np.diag(T).astype(np.complex128)
    if np.iscomplexobj(T) or n < 2:
        return ev
    k = np.flatnonzero(np.diag(T, -1))  # 2x2 blocks at rows (k, k+1), all at once
    if k.size:
        a, b, c, d = T[k, k], T[k, k + 1], T[k + 1, k], T[k + 1, k + 1]
        with np.errstate(over="ignore", under="ignore"):  # detected and rescaled below
            bc = b * c
        t = np.abs(bc)
        if t.min() < 2.0 ** -960 or not t.max() < 2.0 ** 960:  # b c under/overflowed:
            # scale each block by a power of 2 (exact) near its largest entry
            e = np.frexp(np.max(np.abs([a, b, c, d]), axis=0))[1]
            sc = np.ldexp(1.0, e)
            a, b, c, d = a / sc, b / sc, c / sc, d / sc
            bc = b * c
        else:
            sc = 1.0
        half_tr = 0.5 * (a + d)
        disc = np.sqrt((0.25 * (a - d) ** 2 + bc).astype(np.complex128))
        ev[k], ev[k + 1] = (half_tr + disc) * sc, (half_tr - disc) * sc
    return ev
