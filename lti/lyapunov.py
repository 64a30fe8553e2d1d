"""Discrete-time (Stein) Lyapunov equations ``A X A^T - X + Q = 0`` and their factors.

Solvers
-------
``solve_discrete_lyapunov``
    ``"diagonal"`` closed form, ``"schur"`` recursive blocked Bartels-Stewart on the real
    Schur form (level-3), ``"smith"`` squared Smith (doubling), ``"slycot"`` (SB03MD).
``lyapunov_factor``
    ``L`` with ``L L^T = X`` for ``Q = B B^T`` computed directly by Hammarling's square-root
    method (``"hammarling"``; ``"diagonal"`` is the same recursion for diagonal ``A``,
    ``"slycot"`` calls SB03OD) or, for small dense ``A``, by the factored squared Smith
    iteration (``"smith"``).
``psd_factor``
    Clipped symmetric eigendecomposition of a given positive semidefinite matrix.
``real_schur``
    ``A = Z T Z^T``, shared by several solves (both Gramian factors of one system).
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass

import numpy as np
import scipy.linalg as sla
from scipy.linalg import blas, lapack

from lti._validation import (
    as_float_matrix,
    as_float_vector,
    check_square,
    check_stable,
    check_symmetric,
    spectral_radius,
    symmetrize_,
)
from lti.exceptions import (
    InvalidArgumentError,
    MissingDependencyError,
    ShapeError,
    SolverError,
)

__all__ = [
    "SchurForm",
    "lyapunov_factor",
    "psd_factor",
    "real_schur",
    "solve_discrete_lyapunov",
]

_LEAF = 48  # leaf size of the recursive Stein solvers
_PANEL = 64  # steps between re-packing the active block in Hammarling's method


# ---------------------------------------------------------------------------- Schur form
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
        """Eigenvalues read off the diagonal blocks of ``T``, shape (n,), complex."""
        return _quasi_triangular_eigvals(self.T)

    def complex_form(self):
        """Complex Schur form ``(Tc, Zc)`` with ``A = Zc Tc Zc^H``, ``Tc`` triangular (cached)."""
        Tc, Zc, _, _ = self._complex()
        return Tc, Zc

    def _complex(self):
        """``(Tc, Zc, idx, G)``: ``Zc = Z blockdiag(G_k^H)`` on the pairs ``(idx_k - 1, idx_k)``."""
        cached = self.__dict__.get("_complex_cache")
        if cached is None:
            if np.iscomplexobj(self.T):
                cached = (self.T, self.Z, np.zeros(0, dtype=int), np.zeros((0, 2, 2)))
            else:
                cached = _to_complex_schur(self.T, self.Z)
            object.__setattr__(self, "_complex_cache", cached)
        return cached


def _to_complex_schur(T: np.ndarray, Z: np.ndarray):
    """Real -> complex Schur form by one unitary rotation per 2x2 block (as ``rsf2csf``).

    The blocks sit on disjoint index pairs, so the rotations commute and are applied all
    at once. Returns ``(Tc, Zc, idx, G)`` with ``Tc = Gf^H T Gf``, ``Zc = Z Gf`` where
    ``Gf`` is block diagonal with blocks ``G_k^H`` on rows/columns ``(idx_k - 1, idx_k)``.
    """
    n = T.shape[0]
    idx = np.flatnonzero(np.diag(T, -1)) + 1 if n > 1 else np.zeros(0, dtype=int)
    Tc = T.astype(np.complex128)
    Zc = Z.astype(np.complex128)
    if idx.size == 0:
        return Tc, Zc, idx, np.zeros((0, 2, 2), dtype=np.complex128)
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
    i0, i1 = idx - 1, idx
    r0, r1 = Tc[i0].copy(), Tc[i1].copy()  # rows: T <- G T
    Tc[i0] = G[:, 0, 0, None] * r0 + G[:, 0, 1, None] * r1
    Tc[i1] = G[:, 1, 0, None] * r0 + G[:, 1, 1, None] * r1
    Tc = _rotate_columns(Tc, idx, np.conj(np.swapaxes(G, 1, 2)))  # T <- T G^H
    Zc = _rotate_columns(Zc, idx, np.conj(np.swapaxes(G, 1, 2)))  # Z <- Z G^H
    Tc[i1, i0] = 0.0
    return np.triu(Tc), Zc, idx, G


def _rotate_columns(M: np.ndarray, idx: np.ndarray, H: np.ndarray) -> np.ndarray:
    """Return ``M`` with column pairs ``(idx_k - 1, idx_k)`` multiplied by the 2x2 ``H_k``."""
    M = M.astype(np.result_type(M, H), copy=True)
    if idx.size == 0:
        return M
    c0, c1 = M[:, idx - 1].copy(), M[:, idx].copy()
    M[:, idx - 1] = c0 * H[None, :, 0, 0] + c1 * H[None, :, 1, 0]
    M[:, idx] = c0 * H[None, :, 0, 1] + c1 * H[None, :, 1, 1]
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
    else:
        T, Z = sla.schur(A, output="real", check_finite=False)
    return SchurForm(T, Z)


def _quasi_triangular_eigvals(T: np.ndarray) -> np.ndarray:
    n = T.shape[0]
    ev = np.diag(T).astype(np.complex128)
    if np.iscomplexobj(T) or n < 2:
        return ev
    sub = np.flatnonzero(np.diag(T, -1))
    for k in sub:  # 2x2 block at rows (k, k+1)
        a, b, c, d = T[k, k], T[k, k + 1], T[k + 1, k], T[k + 1, k + 1]
        half_tr = 0.5 * (a + d)
        disc = np.sqrt(complex(0.25 * (a - d) ** 2 + b * c))
        ev[k], ev[k + 1] = half_tr + disc, half_tr - disc
    return ev


# --------------------------------------------------------------------- validation
_SOLVE_METHODS = ("auto", "diagonal", "schur", "smith", "slycot")
_FACTOR_METHODS = ("auto", "diagonal", "hammarling", "smith", "slycot")


def _check_method(method, allowed) -> str:
    if method not in allowed:
        raise InvalidArgumentError(f"`method` must be one of {allowed}; got {method!r}")
    return method


def _state_matrix(A):
    """Validated copy of ``A``: (matrix, diagonal or None)."""
    arr = np.asarray(A)
    if arr.ndim == 1:
        a = as_float_vector("A", arr, allow_complex=True)
        return None, a
    M = as_float_matrix("A", arr, allow_complex=True)
    check_square("A", M)
    d = np.diag(M).copy()
    if np.count_nonzero(M) == np.count_nonzero(d):  # no off-diagonal entries
        return M, d
    return M, None


def _import_slycot():
    try:
        import slycot
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise MissingDependencyError(
            'method="slycot" needs slycot; install it with pip install "lti-adapters[control]"'
        ) from exc
    return slycot


# -------------------------------------------------------------- recursive Stein solvers
def _ct(M: np.ndarray) -> np.ndarray:
    return M.conj().T if np.iscomplexobj(M) else M.T


class _SteinRecursion:
    """Recursive blocked solver for ``T X T^H - X + Q = 0`` on a (quasi-)triangular ``T``.

    Index ranges ``[lo, hi)`` of ``T`` are bisected without cutting 2x2 blocks; couplings
    between halves are matrix products (level-3). At the leaves (at most ``_LEAF``
    states) the small diagonal blocks are brought to complex triangular form once
    (cached; unitary, so backward stable) and the leaf equation is solved column by
    column with triangular solves.
    """

    def __init__(self, T: np.ndarray):
        self.T = T
        self.real = not np.iscomplexobj(T)
        self._leaf_forms: dict[tuple[int, int], tuple[np.ndarray, np.ndarray | None]] = {}

    def _split(self, lo: int, hi: int) -> int:
        h = lo + (hi - lo) // 2
        if self.T[h, h - 1] != 0:
            h += 1
        return h

    def _leaf_form(self, lo: int, hi: int):
        key = (lo, hi)
        form = self._leaf_forms.get(key)
        if form is None:
            Tb = self.T[lo:hi, lo:hi]
            if self.real and np.any(np.diag(Tb, -1)):
                Tc, G = _to_complex_schur(Tb, np.eye(hi - lo))[:2]
            else:
                Tc, G = Tb.astype(np.complex128), None
            form = (np.asfortranarray(Tc), G)
            self._leaf_forms[key] = form
        return form

    def leaf(self, r1: tuple[int, int], r2: tuple[int, int], R: np.ndarray) -> np.ndarray:
        """``T1 Y T2^H - Y + R = 0`` with ``T1 = T[r1, r1]``, ``T2 = T[r2, r2]`` small."""
        T1, G1 = self._leaf_form(*r1)
        T2, G2 = self._leaf_form(*r2)
        k1, k2 = R.shape
        Rt = R.astype(np.complex128)
        if G1 is not None:
            Rt = _ct(G1) @ Rt
        if G2 is not None:
            Rt = Rt @ G2
        Y = np.empty((k1, k2), dtype=np.complex128, order="F")
        trsv = blas.ztrsv
        T2c = T2.conj()
        for j in range(k2 - 1, -1, -1):
            rhs = -Rt[:, j]
            if j + 1 < k2:
                rhs = rhs - T1 @ (Y[:, j + 1 :] @ T2c[j, j + 1 :])
            M = T2c[j, j] * T1  # F-ordered copy
            M.reshape(-1, order="F")[:: k1 + 1] -= 1.0
            Y[:, j] = trsv(M, rhs, overwrite_x=1)
        if G1 is not None:
            Y = G1 @ Y
        if G2 is not None:
            Y = Y @ _ct(G2)
        return Y.real if self.real else Y

    def sylvester(self, r1: tuple[int, int], r2: tuple[int, int], R: np.ndarray) -> np.ndarray:
        """``T1 Y T2^H - Y + R = 0`` on the ranges ``r1``, ``r2`` of ``T``."""
        (lo1, hi1), (lo2, hi2) = r1, r2
        k1, k2 = hi1 - lo1, hi2 - lo2
        T = self.T
        if k1 <= _LEAF and k2 <= _LEAF:
            return self.leaf(r1, r2, R)
        if k1 >= k2:
            h = self._split(lo1, hi1)
            Y2 = self.sylvester((h, hi1), r2, R[h - lo1 :])
            R1 = R[: h - lo1] + T[lo1:h, h:hi1] @ (Y2 @ _ct(T[lo2:hi2, lo2:hi2]))
            Y1 = self.sylvester((lo1, h), r2, R1)
            return np.vstack([Y1, Y2])
        h = self._split(lo2, hi2)
        Y2 = self.sylvester(r1, (h, hi2), R[:, h - lo2 :])
        R1 = R[:, : h - lo2] + (T[lo1:hi1, lo1:hi1] @ Y2) @ _ct(T[lo2:h, h:hi2])
        Y1 = self.sylvester(r1, (lo2, h), R1)
        return np.hstack([Y1, Y2])

    def symmetric(self, r: tuple[int, int], Q: np.ndarray) -> np.ndarray:
        """``T_r X T_r^H - X + Q = 0`` for Hermitian ``Q`` on the range ``r`` of ``T``."""
        lo, hi = r
        if hi - lo <= _LEAF:
            X = self.leaf(r, r, Q)
            return 0.5 * (X + _ct(X))
        h = self._split(lo, hi)
        k = h - lo
        T11, T12, T22 = self.T[lo:h, lo:h], self.T[lo:h, h:hi], self.T[h:hi, h:hi]
        X22 = self.symmetric((h, hi), Q[k:, k:])
        W = T12 @ X22
        X12 = self.sylvester((lo, h), (h, hi), Q[:k, k:] + W @ _ct(T22))
        V = (T11 @ X12) @ _ct(T12)
        Q11 = Q[:k, :k] + V + _ct(V) + W @ _ct(T12)
        X11 = self.symmetric((lo, h), 0.5 * (Q11 + _ct(Q11)))
        X = np.empty((hi - lo, hi - lo), dtype=X22.dtype)
        X[:k, :k], X[:k, k:], X[k:, :k], X[k:, k:] = X11, X12, _ct(X12), X22
        return X


# ------------------------------------------------------------------------ X solvers
def solve_discrete_lyapunov(A, Q, *, method: str = "auto") -> np.ndarray:
    """Solve the discrete Lyapunov (Stein) equation ``A X A^T - X + Q = 0``.

    Parameters
    ----------
    A : array_like, shape (n, n) or (n,)
        Schur-stable matrix (spectral radius < 1), or the diagonal ``a`` of a diagonal
        one (real or complex).
    Q : array_like, shape (n, n)
        Symmetric (Hermitian) right-hand side.
    method : {"auto", "diagonal", "schur", "smith", "slycot"}, optional
        ``"auto"`` picks ``"diagonal"`` for diagonal ``A`` (2-D diagonal or 1-D) and
        ``"schur"`` otherwise; it depends on the input only, never on what is installed.
        ``"slycot"`` (SB03MD) is used only when asked for by name.

    Returns
    -------
    X : ndarray, shape (n, n)
        The symmetric (Hermitian) solution, float64 (complex128 for complex input).

    Raises
    ------
    ShapeError
        Non-square ``A`` or non-conforming ``Q``.
    NonFiniteError
        NaN or inf in ``A`` or ``Q``.
    NotSymmetricError
        ``Q`` not symmetric relative to its scale.
    UnstableSystemError
        Spectral radius of ``A`` >= 1 (the measured value is in the message).
    InvalidArgumentError
        Unknown ``method``, or ``"diagonal"`` with a non-diagonal ``A``.
    MissingDependencyError
        ``method="slycot"`` without slycot installed.

    Notes
    -----
    For complex ``A`` the equation is :math:`A X A^H - X + Q = 0` (conjugate transpose),
    so that ``X`` is Hermitian; for a complex diagonal ``a`` this gives the closed form

    .. math:: X_{ij} = \\frac{Q_{ij}}{1 - a_i \\overline{a_j}}.

    ``"schur"`` reduces ``A = Z T Z^T`` to real Schur form and solves
    :math:`T Y T^T - Y + Z^T Q Z = 0` with a recursive blocked Bartels-Stewart (Kitagawa)
    algorithm: the quasi-triangular problem is split in halves, the off-diagonal block is
    a Stein-Sylvester equation split recursively as well, and all coupling updates are
    matrix-matrix products, so nearly all flops are level-3 (Jonsson & Kagstrom's RECSY
    recursion). Small leaves are solved column by column. ``X = Z Y Z^T``.
    The back-transformation ``Z Y Z^T`` rounds at the level
    ``eps ||X||``, which dominates the residual when ``X`` is large (spectral radius near
    1); so when the relative residual exceeds ``1e-13`` one step of iterative refinement
    (residual in the original coordinates, correction from the same Schur form) follows,
    typically lowering it ten-fold for a third more time.
    ``"smith"`` iterates :math:`X \\leftarrow X + A_k X A_k^T`, :math:`A_k \\leftarrow A_k^2`
    (quadratic convergence in ``rho(A)^(2^k)``), useful as an independent check; the
    same residual-triggered refinement step follows (its rounding errors grow with
    ``||A_k||``, so it helps most for non-normal ``A``).
    The result is symmetrised.

    References
    ----------
    .. [1] G. Kitagawa, "An algorithm for solving the matrix equation X = F X F' + S",
       Int. J. Control 25 (1977).
    .. [2] I. Jonsson and B. Kagstrom, "Recursive blocked algorithms for solving triangular
       systems - Part I/II", ACM TOMS 28 (2002).

    Examples
    --------
    >>> import numpy as np
    >>> from lti import solve_discrete_lyapunov
    >>> rng = np.random.default_rng(0)
    >>> A = rng.standard_normal((100, 100))
    >>> A *= 0.9 / np.max(np.abs(np.linalg.eigvals(A)))
    >>> Q = np.eye(100)
    >>> X = solve_discrete_lyapunov(A, Q)
    >>> residual = np.linalg.norm(A @ X @ A.T - X + Q) / np.linalg.norm(Q)
    >>> bool(residual < 1e-13)
    True
    """
    method = _check_method(method, _SOLVE_METHODS)
    M, a = _state_matrix(A)
    n = a.size if M is None else M.shape[0]
    Qm = as_float_matrix("Q", Q, allow_complex=True, copy=False)  # read only below
    if Qm.shape != (n, n):
        raise ShapeError(f"`Q` must have shape (n, n) = {(n, n)} to match `A`; got {Qm.shape}")
    asym = check_symmetric("Q", Qm)
    if method == "auto":
        method = "diagonal" if a is not None else "schur"
    if method == "diagonal":
        if a is None:
            raise InvalidArgumentError('method="diagonal" needs a diagonal `A` (or 1-D `a`)')
        check_stable("A", a)
        den = np.multiply.outer(a, np.conj(a) if np.iscomplexobj(a) else a)
        np.subtract(1.0, den, out=den)
        X = np.divide(Qm, den, out=den if den.dtype == np.result_type(Qm, den) else None)
        return _symmetrise(X) if asym > 0 else X
    if M is None:
        M = np.diag(a)
    if method == "schur":
        return _solve_schur(M, Qm, refine=True)
    if method == "smith":
        check_stable("A", M)
        X = _symmetrise(_smith(M, Qm))
        R = _symmetrise((M @ X) @ _ct(M) - X + Qm)  # one refinement step, as for "schur"
        if np.linalg.norm(R) > _REFINE_RTOL * np.linalg.norm(Qm):
            X = _symmetrise(X + _smith(M, R))
        return X
    return _solve_slycot(M, Qm)


def _symmetrise(X: np.ndarray) -> np.ndarray:
    """``(X + X^H) / 2`` computed in place: only for freshly computed ``X``."""
    return symmetrize_(X)


_REFINE_RTOL = 1e-13  # one refinement step when ||A X A^H - X + Q||_F exceeds this * ||Q||_F


def _solve_schur(
    M: np.ndarray, Q: np.ndarray, schur: SchurForm | None = None, *, refine: bool = False
) -> np.ndarray:
    n = M.shape[0]
    if n == 0:
        return np.zeros((0, 0), dtype=np.result_type(M, Q))
    if schur is None:
        schur = real_schur(M)
    check_stable("A", None, rho=float(np.max(np.abs(schur.eigenvalues()))))
    T, Z = schur.T, schur.Z
    if np.iscomplexobj(Q) and not np.iscomplexobj(T):
        T, Z = schur.complex_form()
    recursion = _SteinRecursion(T)

    def solve(R):
        Y = recursion.symmetric((0, n), _symmetrise(_ct(Z) @ R @ Z))
        return _symmetrise(Z @ Y @ _ct(Z))

    X = solve(Q)
    if refine:
        R = _symmetrise((M @ X) @ _ct(M) - X + Q)
        if np.linalg.norm(R) > _REFINE_RTOL * np.linalg.norm(Q):
            X = _symmetrise(X + solve(R))
    return X


def _smith(M: np.ndarray, Q: np.ndarray, *, max_iter: int = 100) -> np.ndarray:
    X = Q.copy()
    Ak = M.copy()
    eps = np.finfo(np.float64).eps
    for _ in range(max_iter):
        dX = Ak @ X @ _ct(Ak)
        X = X + dX
        if not np.all(np.isfinite(X)):
            raise SolverError(
                'method="smith" overflowed (the powers of `A` grow before they decay: '
                f"spectral radius {spectral_radius(M):.6g}); use method=\"schur\""
            )
        if np.linalg.norm(dX) <= eps * np.linalg.norm(X):
            return X
        Ak = Ak @ Ak
    raise SolverError(
        f'method="smith" did not converge in {max_iter} doublings (spectral radius '
        f"{spectral_radius(M):.6g})"
    )


def _solve_slycot(M: np.ndarray, Q: np.ndarray) -> np.ndarray:
    slycot = _import_slycot()
    if np.iscomplexobj(M) or np.iscomplexobj(Q):
        raise InvalidArgumentError('method="slycot" needs real `A` and `Q`')
    n = M.shape[0]
    if n == 0:
        return np.zeros((0, 0))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        _, _, X, scale, _, _, w = slycot.sb03md57(
            M.copy(), C=-Q.copy(), dico="D", job="X", fact="N", trana="T"
        )
    check_stable("A", None, rho=float(np.max(np.abs(w))))
    return _symmetrise(X / scale)


# ------------------------------------------------------------------ Hammarling factor
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


def _hammarling_dense(A: np.ndarray, C: np.ndarray) -> np.ndarray:
    """Hammarling's method for ``A^H X A - X + C^H C = 0``, ``A`` upper triangular.

    Returns upper triangular ``U`` (n, n) with ``X = U^H U``. Row j of ``U`` is found from
    the 1x1 leading block, a shifted triangular solve with the trailing block of ``A^H``
    and a Householder update that keeps the right-hand side factor at m rows.
    """
    n = A.shape[0]
    m = C.shape[0]
    dtype = np.result_type(A, C, np.float64)
    A = A.astype(dtype, copy=False)
    C = np.array(C, dtype=dtype, order="F", copy=True)
    # a column of the right-hand side factor below this level is dropped: it changes
    # C^H C by less than 1e-3 eps relative, so the residual is unaffected
    negligible = 1e-3 * np.finfo(np.float64).eps * _scaled_unit(C.ravel())[0]
    WH = np.asfortranarray(_ct(A))  # lower triangular A^H
    U = np.zeros((n, n), dtype=dtype)
    trsv, trmv = (blas.ztrsv, blas.ztrmv) if np.iscomplexobj(A) else (blas.dtrsv, blas.dtrmv)
    start, W, Wdiag = 0, None, None
    tiny = 1e-290
    for j in range(n):
        alpha = A[j, j]
        c = C[:, j]
        cn, chat = _scaled_unit(c)
        s = np.sqrt(max(1.0 - abs(alpha) ** 2, 0.0))
        if j == n - 1:
            U[j, j] = cn / s
            break
        if cn <= negligible:
            continue
        nu = cn / s
        chat_s = chat * s  # c / nu
        a = np.conj(A[j, j + 1 :])
        C2 = C[:, j + 1 :]
        rhs = -(_ct(C2) @ chat_s) - (alpha * nu) * a
        # active block of A^H: rows/cols j+1.. ; re-pack a contiguous copy every _PANEL steps
        if W is None or j + 1 - start >= _PANEL:
            start = j + 1
            W = np.asfortranarray(WH[start:, start:])
            Wdiag = W.reshape(-1, order="F")[:: W.shape[0] + 1]
        off = j + 1 - start
        K = W.shape[0]
        if abs(alpha) < tiny:
            u = -rhs
            AHu = None
        else:
            x = np.zeros(K, dtype=dtype)
            x[off:] = rhs / alpha
            d0 = Wdiag.copy()
            Wdiag -= 1.0 / alpha  # (A2^H - I/alpha) u = rhs/alpha
            x = trsv(W, x, lower=1, overwrite_x=1)
            Wdiag[:] = d0
            u = x[off:]
            AHu = (rhs + u) / alpha if abs(alpha) >= 0.5 else None
        if AHu is None:
            x = np.zeros(K, dtype=dtype)
            x[off:] = u
            AHu = trmv(W, x, lower=1, overwrite_x=1)[off:]
        U[j, j] = nu
        U[j, j + 1 :] = np.conj(u)
        y = nu * a + AHu
        # Householder H with H w = beta e_last, w = [c / nu; alpha] (unit norm);
        # the first m rows of H [C2; y^H] are the new right-hand side factor.
        w = np.empty(m + 1, dtype=dtype)
        w[:m], w[m] = chat_s, alpha
        phase = alpha / abs(alpha) if abs(alpha) > tiny else 1.0
        v = w.copy()
        v[m] += phase * np.linalg.norm(w)
        vv = np.real(np.vdot(v, v))
        coef = (2.0 / vv) * (np.conj(v[:m]) @ C2 + np.conj(v[m]) * np.conj(y))  # v^H M
        C[:, j + 1 :] = C2 - np.outer(v[:m], coef)
    return U


def _hammarling_diagonal(d: np.ndarray, C: np.ndarray) -> np.ndarray:
    """Hammarling's method for diagonal ``A = diag(d)``: ``A^H X A - X + C^H C = 0``.

    Same recursion as :func:`_hammarling_dense` with elementwise solves; returns upper
    triangular ``U`` with ``X = U^H U``, real when ``d`` and ``C`` are real.
    """
    n = d.size
    m = C.shape[0]
    dtype = np.result_type(d, C, np.float64)
    C = np.array(C, dtype=dtype, order="F", copy=True)
    # a column of the right-hand side factor below this level is dropped: it changes
    # C^H C by less than 1e-3 eps relative, so the residual is unaffected
    negligible = 1e-3 * np.finfo(np.float64).eps * _scaled_unit(C.ravel())[0]
    U = np.zeros((n, n), dtype=dtype)
    dc = np.conj(d)
    tiny = 1e-290
    for j in range(n):
        alpha = d[j]
        c = C[:, j]
        cn, chat = _scaled_unit(c)
        s = np.sqrt(max(1.0 - abs(alpha) ** 2, 0.0))
        if j == n - 1:
            U[j, j] = cn / s
            break
        if cn <= negligible:
            continue
        nu = cn / s
        chat_s = chat * s
        C2 = C[:, j + 1 :]
        rhs = -(_ct(C2) @ chat_s)
        u = rhs / (alpha * dc[j + 1 :] - 1.0)
        y = dc[j + 1 :] * u
        U[j, j] = nu
        U[j, j + 1 :] = np.conj(u)
        w = np.empty(m + 1, dtype=dtype)
        w[:m], w[m] = chat_s, alpha
        phase = alpha / abs(alpha) if abs(alpha) > tiny else 1.0
        v = w.copy()
        v[m] += phase * np.linalg.norm(w)
        vv = np.real(np.vdot(v, v))
        coef = (2.0 / vv) * (np.conj(v[:m]) @ C2 + np.conj(v[m]) * np.conj(y))
        C[:, j + 1 :] = C2 - np.outer(v[:m], coef)
    return U


# ----------------------------------------------------------- factored squared Smith
_SMITH_MAX_N = 128  # method="auto" tries the factored Smith iteration up to this order
_SMITH_AUTO_ITER = 12  # ... with at most this many squarings (rho^4096 <= eps: rho < ~0.99)
# ... and while ||A^(2^k)||_F <= this * sqrt(n): benign dense A (||A||_F ~ rho sqrt(n), powers
# decaying) pass, transient growth does not -- Smith's rounding scales with max_k ||A^(2^k)||, so
# strongly non-normal A (growth 1e2..1e4 seen: residuals up to 1000x SB03OD's) go to Hammarling.
_SMITH_MAX_GROWTH = 8.0


def _smith_factors(M: np.ndarray, Bs, transposes, *, max_iter: int, max_growth: float):
    """Factors of ``sum_k M^k B B^T (M^T)^k`` (``M^T`` for ``transpose``) by squared Smith.

    ``L_{k+1} = [L_k, A_k L_k]`` compressed to its triangular QR factor (a sum of PSD
    terms, no subtraction), ``A_{k+1} = A_k^2`` shared by all right-hand sides; stops when
    every ``||A_k L_k||_F <= eps ||L_k||_F`` and ``||A_k||_F < 1`` (which certifies
    ``rho(M) < 1``). Returns ``(factors, rho_bound)`` with ``rho_bound = min_k
    ||A_k||_F^(2^-k) >= rho(M)``, or ``None`` when that does not happen within
    ``max_iter`` squarings, ``||A_k||_F`` exceeds ``max_growth * sqrt(n)`` or a factor is not
    finite.
    """
    n = M.shape[0]
    eps = np.finfo(np.float64).eps
    nb = min(n, 16)  # block size of the structured QR (fastest for small n)
    # Rt[i] = L_i^T: (w, n) while narrow, then (n, n) upper triangular (Fortran order)
    # each right-hand side scaled to max|B| = 1 (the factor scales linearly), so that tiny
    # or huge data neither underflow nor overflow in the norms of the stopping test
    scales = [float(np.max(np.abs(B), initial=0.0)) for B in Bs]
    Bs = [B / b if b > 0 else B for B, b in zip(Bs, scales, strict=True)]
    Rt = [_qr_triangle(B.T, n) if B.shape[1] >= n else np.array(B.T, order="F") for B in Bs]
    r2 = [_fro2(R) for R in Rt]  # ||L_k||_F^2: QR keeps it, each step adds ||A_k L_k||_F^2
    todo = list(range(len(Bs)))
    Ak = np.asfortranarray(M)  # A_k = M^(2^k); Ak.T is a C-ordered view
    rho_bound, root = np.inf, 1.0
    for _ in range(max_iter):
        a = float(np.sqrt(_fro2(Ak)))  # ||A_k||_F >= ||A_k||_2
        if not a <= max_growth * np.sqrt(n):  # also catches NaN
            return None
        if a > 0:
            rho_bound = min(rho_bound, a**root)
        if a <= eps:  # ||A_k L||_F <= ||A_k||_2 ||L||_F: every factor has converged
            todo = []
        for i in list(todo):
            R = Rt[i]
            w = R.shape[0]
            op = Ak if transposes[i] else Ak.T  # (A_k L)^T = L^T op
            Wt = blas.dtrmm(1.0, R, op) if w == n else R @ op  # R triangular when w == n
            w2 = _fro2(Wt)
            if w2 <= eps * eps * r2[i]:
                todo.remove(i)
                continue
            r2[i] += w2
            if w == n:  # [R; Wt]: triangle over a dense block, structured QR
                R, _, _, info = lapack.dtpqrt(0, nb, R, Wt, overwrite_a=1, overwrite_b=1)
            elif 2 * w < n:
                Rt[i] = np.vstack([R, Wt])
                continue
            else:
                R, info = _qr_triangle(np.vstack([R, Wt]), n), 0
            if info != 0:  # pragma: no cover - LAPACK argument errors only
                raise SolverError(f"LAPACK dtpqrt failed with info={info}")
            Rt[i] = R
        if not todo and a < 1.0:
            Ls = [_square_factor(R, n) * (b if b > 0 else 1.0)
                  for R, b in zip(Rt, scales, strict=True)]
            if not all(np.isfinite(np.sum(L)) for L in Ls):
                return None
            return Ls, rho_bound
        Ak = Ak @ Ak
        root *= 0.5
    return None


def _fro2(X: np.ndarray) -> float:
    """Squared Frobenius norm of a contiguous (C or Fortran) array, without a copy."""
    v = X.ravel(order="K")
    return float(v @ v)


def _smith_scaled(M, B, transpose, max_iter, max_growth):
    """The factor of one right-hand side by :func:`_smith_factors` (``None`` as there)."""
    out = _smith_factors(M, [B], [transpose], max_iter=max_iter, max_growth=max_growth)
    return None if out is None else out[0][0]


def _qr_triangle(S: np.ndarray, n: int) -> np.ndarray:
    """Upper triangular (n, n) ``R`` (Fortran order) with ``R^T R = S^T S``, ``S`` (k >= n, n)."""
    R, _, _, info = lapack.dgeqrf(S, overwrite_a=1)
    if info != 0:  # pragma: no cover - LAPACK argument errors only
        raise SolverError(f"LAPACK dgeqrf failed with info={info}")
    return np.asfortranarray(np.triu(R[:n]))


def _square_factor(Rt: np.ndarray, n: int) -> np.ndarray:
    """``L = Rt^T`` padded with zero columns to (n, n)."""
    w = Rt.shape[0]
    if w == n:
        return Rt.T
    L = np.zeros((n, n))
    L[:, :w] = Rt.T
    return L


def _compress_rows(C: np.ndarray) -> np.ndarray:
    """Return ``R`` with ``R^H R = C^H C`` and at most n rows."""
    m, n = C.shape
    if m <= n:
        return C
    return sla.qr(C, mode="r", check_finite=False)[0][:n]


def _real_gram_factor(M: np.ndarray) -> np.ndarray:
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
            k = np.flatnonzero(np.diag(P, -1)) + 1
            if k.size:
                x, y = P[k - 1, k - 1], P[k, k - 1]
                r = np.hypot(x, y)
                c, s = x / r, y / r
                r0, r1 = P[k - 1].copy(), P[k].copy()
                P[k - 1] = c[:, None] * r0 + s[:, None] * r1
                P[k] = -s[:, None] * r0 + c[:, None] * r1
        parts.append(np.triu(P))
    if not np.any(parts[1]):
        return parts[0]
    R, _, _, info = lapack.dtpqrt(n, min(64, n), parts[0], parts[1], overwrite_a=1, overwrite_b=1)
    if info != 0:  # pragma: no cover - LAPACK argument errors only
        raise SolverError(f"LAPACK dtpqrt failed with info={info}")
    return np.triu(R)


def lyapunov_factor(
    A,
    B,
    *,
    method: str = "auto",
    transpose: bool = False,
    schur: SchurForm | None = None,
) -> np.ndarray:
    """Factor ``L`` (``X = L L^T``) of the solution of ``A X A^T - X + B B^T = 0``.

    Parameters
    ----------
    A : array_like, shape (n, n) or (n,)
        Schur-stable matrix, or the diagonal ``a`` of a diagonal one (real or complex).
    B : array_like, shape (n, m)
        Right-hand side factor (a 1-D ``B`` is one column).
    method : {"auto", "diagonal", "hammarling", "smith", "slycot"}, optional
        ``"auto"``: ``"diagonal"`` for diagonal ``A``; for real dense ``A`` with
        ``n <= 128`` (and no `schur` given) ``"smith"`` when it converges within 12
        squarings with ``||A^(2^k)||_F <= 1e4`` (spectral radius up to about 0.99, mild
        non-normality), ``"hammarling"`` otherwise (decided by the input only).
        ``"smith"``: factored squared Smith iteration (real data only). ``"slycot"``
        (SB03OD) only when asked for by name.
    transpose : bool, optional
        Solve ``A^T X A - X + B B^T = 0`` instead (the observability equation with
        ``B = C^T``).
    schur : SchurForm, optional
        Precomputed :func:`real_schur` of ``A`` (dense methods), so that both Gramian
        factors of a system share one decomposition.

    Returns
    -------
    L : ndarray, shape (n, n)
        Square factor with ``L @ L.T = X`` (``L @ L.conj().T`` for complex input), also
        when ``X`` is rank deficient (some columns are then (nearly) zero; trim with an
        SVD where fewer columns are needed). Its form depends on the method:
        ``"hammarling"`` with dense real ``A`` gives ``L = Z R^T`` (``Z`` the Schur
        vectors, ``R`` upper triangular, so ``L`` itself is not triangular); ``"smith"``
        gives a lower triangular ``L`` once ``X`` has rank n in the iteration (else the
        Krylov block ``[B, A B, ...]``, zero-padded); diagonal ``A`` gives a lower
        triangular ``L``; ``method="slycot"`` returns SB03OD's triangular factor.

    Raises
    ------
    ShapeError, NonFiniteError, UnstableSystemError, InvalidArgumentError,
    MissingDependencyError
        As for :func:`solve_discrete_lyapunov`.

    Notes
    -----
    Hammarling's method [1]_ computes the Cholesky factor directly, without forming
    ``X``, so it stays accurate when ``X`` is nearly singular (the factor's small singular
    values are computed to high relative accuracy where forming ``X`` and factoring it
    would square the condition number). With the complex Schur form
    ``A = Zc Tc Zc^H``, the triangular equation ``Tc^H Y Tc - Y + C^H C = 0`` is solved
    one row of ``U`` (``Y = U^H U``) at a time: a scalar for the diagonal, one shifted
    triangular solve (level-2 BLAS on a packed copy of the active block) for the row, and
    a Householder reflection that keeps the updated right-hand side factor at m rows.
    The controllability form uses the reversal permutation to bring
    ``T X T^H`` to that shape. For real data the complex factor ``U`` is made real
    without forming ``X``: ``Zc = Z G`` where ``G`` holds one 2x2 rotation per complex
    pair, so ``X = Z M^H M Z^T`` with the quasi-triangular ``M = U G^H``, and
    ``M^H M = Re(M)^T Re(M) + Im(M)^T Im(M) = R^T R`` by one structured QR of the two
    stacked triangles (LAPACK ``dtpqrt``); ``L = Z R^T``. Everything except the Schur
    form and the row loop is level-3.

    The factored squared Smith iteration [2]_ (``"smith"``) needs no Schur form:
    :math:`L_{k+1} = [L_k, A_k L_k]`, :math:`A_{k+1} = A_k^2` (``A_k = A^{2^k}``), with
    ``L_{k+1}`` replaced by the triangular factor of a QR decomposition of its transpose
    once it has more than n columns (LAPACK ``dtpqrt`` on a triangle over a dense block).
    ``L L^T`` is a sum of positive semidefinite terms (no subtraction), so the factor
    stays accurate; the iteration stops when :math:`\\|A_k L_k\\|_F \\le \\epsilon
    \\|L_k\\|_F` and :math:`\\|A_k\\|_F < 1` (which certifies stability). It costs about
    ``8 n^3`` flops per squaring for both factors of a system and wins for small n, where
    Hammarling's row loop is dominated by interpreter overhead. For complex ``A`` the
    equations are
    :math:`A X A^H - X + B B^H = 0` and, with ``transpose=True``,
    :math:`A^H X A - X + B B^H = 0`.

    References
    ----------
    .. [1] S. J. Hammarling, "Numerical solution of the stable, non-negative definite
       Lyapunov equation", IMA J. Numer. Anal. 2 (1982).
    .. [2] T. Penzl, "A cyclic low-rank Smith method for large sparse Lyapunov
       equations", SIAM J. Sci. Comput. 21 (2000).

    Examples
    --------
    >>> import numpy as np
    >>> from lti import lyapunov_factor, solve_discrete_lyapunov
    >>> rng = np.random.default_rng(1)
    >>> A = rng.standard_normal((60, 60))
    >>> A *= 0.9 / np.max(np.abs(np.linalg.eigvals(A)))
    >>> B = rng.standard_normal((60, 2))
    >>> L = lyapunov_factor(A, B)
    >>> X = L @ L.T
    >>> residual = np.linalg.norm(A @ X @ A.T - X + B @ B.T) / np.linalg.norm(B @ B.T)
    >>> bool(residual < 1e-13)
    True
    """
    method = _check_method(method, _FACTOR_METHODS)
    M, a = _state_matrix(A)
    n = a.size if M is None else M.shape[0]
    B_arr = np.asarray(B)
    Bm = (
        as_float_vector("B", B_arr, allow_complex=True)[:, None]
        if B_arr.ndim == 1
        else as_float_matrix("B", B_arr, allow_complex=True)
    )
    if Bm.shape[0] != n:
        raise ShapeError(f"`B` must have n = {n} rows to match `A`; got shape {Bm.shape}")
    if schur is not None:
        if not isinstance(schur, SchurForm) or schur.T.shape != (n, n):
            raise InvalidArgumentError(
                f"`schur` must be the SchurForm of `A` (n = {n}); got {schur!r}"
            )
    real = not (np.iscomplexobj(M) or np.iscomplexobj(a) or np.iscomplexobj(Bm))
    if method == "auto":
        method = "diagonal" if a is not None else "hammarling"
        if method == "hammarling" and real and schur is None and 0 < n <= _SMITH_MAX_N:
            L = _smith_scaled(M, Bm, transpose, _SMITH_AUTO_ITER, _SMITH_MAX_GROWTH)
            if L is not None:
                return L
    if method == "smith":
        if M is None:
            M = np.diag(a)
        if not real:
            raise InvalidArgumentError('method="smith" needs real `A` and `B`')
        if n == 0:
            return np.zeros((0, 0))
        check_stable("A", M)
        L = _smith_scaled(M, Bm, transpose, 100, np.inf)
        if L is None:
            raise SolverError(
                f'method="smith" did not converge in 100 doublings (spectral radius '
                f"{spectral_radius(M):.6g})"
            )
        return L
    if method == "diagonal":
        if a is None:
            raise InvalidArgumentError('method="diagonal" needs a diagonal `A` (or 1-D `a`)')
        check_stable("A", a)
        # A X A^H (transpose=False) is Hammarling's form with diag(conj a); A^H X A with a.
        d = a if transpose else np.conj(a)
        U = _hammarling_diagonal(d, _compress_rows(_ct(Bm)))
        return _ct(U)
    if M is None:
        M = np.diag(a)
    if method == "slycot":
        return _factor_slycot(M, Bm, transpose)
    if n == 0:
        return np.zeros((0, 0))
    if schur is None:
        schur = real_schur(M)
    check_stable("A", None, rho=float(np.max(np.abs(schur.eigenvalues()))))
    Tc, Zc, idx, G = schur._complex()
    Bt = _ct(Zc) @ Bm  # (n, m)
    if real and idx.size == 0:  # real eigenvalues only: stay in real arithmetic
        Tc, Bt = Tc.real, Bt.real
    if transpose:
        # Tc^H Y Tc - Y + Bt Bt^H = 0, X = Zc Y Zc^H = Zc U^H U Zc^H
        U = _hammarling_dense(Tc, _compress_rows(_ct(Bt)))
        flip = False
    else:
        # Tc Y Tc^H - Y + Bt Bt^H = 0; the reversal P turns it into Hammarling's form with
        # upper triangular P Tc^H P: Y = P U^H U P, X = Zc P U^H U P Zc^H
        U = _hammarling_dense(_ct(Tc)[::-1, ::-1], _compress_rows(_ct(Bt[::-1])))
        flip = True
    if not real:
        K = U @ _ct(Zc[:, ::-1] if flip else Zc)
        return _ct(sla.qr(K, mode="r", check_finite=False)[0][:n])
    # Zc = Z Gf (Gf: 2x2 rotations), so X = Z Mp^H Mp Z^T with the quasi-triangular
    # Mp = U Gf^H (transpose) or P (U P Gf^H) P (flip); Mp^H Mp = R^T R is real.
    Gh = G  # blocks of Gf^H
    if flip:
        Mp = _rotate_columns(U[:, ::-1], idx, Gh)[:, ::-1]
        Zr = schur.Z[:, ::-1]
    else:
        Mp = _rotate_columns(U, idx, Gh)
        Zr = schur.Z
    R = _real_gram_factor(Mp) if np.iscomplexobj(Mp) else np.triu(Mp)
    return blas.dtrmm(1.0, R, Zr, side=1, trans_a=1)  # Zr @ R^T


def _factor_slycot(M: np.ndarray, Bm: np.ndarray, transpose: bool) -> np.ndarray:
    slycot = _import_slycot()
    if np.iscomplexobj(M) or np.iscomplexobj(Bm):
        raise InvalidArgumentError('method="slycot" needs real `A` and `B`')
    n, m = Bm.shape
    if n == 0:
        return np.zeros((0, 0))
    ld = max(n, m)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if transpose:
            # op(A) = A: A^T X A - X = -scale^2 B B^T with op(B) = B^T (m x n), X = U^T U
            Bp = np.zeros((ld, n))
            Bp[:m] = Bm.T
            U, scale, w = slycot.sb03od(n, m, M.copy(), np.zeros((n, n)), Bp, "D", trans="N")
            L = U.T
        else:
            # op(A) = A^T: A X A^T - X = -scale^2 B B^T with op(B) = B (n x m), X = U U^T
            Bp = np.zeros((n, ld))
            Bp[:, :m] = Bm
            U, scale, w = slycot.sb03od(n, m, M.copy(), np.zeros((n, n)), Bp, "D", trans="T")
            L = U
    check_stable("A", None, rho=float(np.max(np.abs(w))))
    return L[:n, :n] / scale


def psd_factor(X, *, rtol: float | None = None) -> np.ndarray:
    """Factor ``L`` (``X = L L^T``) of a symmetric positive semidefinite matrix.

    Parameters
    ----------
    X : array_like, shape (n, n)
        Symmetric (Hermitian) positive semidefinite matrix, e.g. a Gramian that was
        computed without a factor.
    rtol : float, optional
        Eigenvalues below ``rtol * max(eig)`` (including small negative ones from
        rounding) are dropped; default ``n * eps``.

    Returns
    -------
    L : ndarray, shape (n, r)
        ``L = V_r sqrt(Lambda_r)`` with the r kept eigenpairs, largest first.

    Raises
    ------
    ShapeError, NonFiniteError, NotSymmetricError
        Bad input.

    Warns
    -----
    RuntimeWarning
        If ``X`` has a negative eigenvalue below ``-sqrt(eps) * max(eig)`` (``X`` is not
        semidefinite beyond rounding; the negative part is discarded).

    Notes
    -----
    This is the robust fallback for a given ``X``: a bare Cholesky fails (or is
    inaccurate) for semidefinite ``X``. It cannot recover small eigenvalues lost when
    ``X`` was formed; use :func:`lyapunov_factor` to get the factor directly.

    Examples
    --------
    >>> import numpy as np
    >>> from lti import psd_factor
    >>> G = np.random.default_rng(0).standard_normal((5, 2))
    >>> L = psd_factor(G @ G.T)
    >>> L.shape, bool(np.linalg.norm(L @ L.T - G @ G.T) < 1e-13)
    ((5, 2), True)
    """
    Xm = as_float_matrix("X", X, allow_complex=True)
    n = check_square("X", Xm)
    check_symmetric("X", Xm)
    if n == 0:
        return np.zeros((0, 0), dtype=Xm.dtype)
    eps = np.finfo(np.float64).eps
    if rtol is None:
        rtol = n * eps
    if not (np.isfinite(rtol) and rtol >= 0):
        raise InvalidArgumentError(f"`rtol` must be a non-negative number; got {rtol!r}")
    w, V = np.linalg.eigh(_symmetrise(Xm))
    top = max(float(w[-1]), 0.0)
    if w[0] < -np.sqrt(eps) * top:
        warnings.warn(
            f"`X` is not positive semidefinite: smallest eigenvalue {w[0]:.3g} vs largest "
            f"{top:.3g}; the negative part is discarded",
            RuntimeWarning,
            stacklevel=2,
        )
    keep = w > rtol * top
    w, V = w[keep][::-1], V[:, keep][:, ::-1]
    return V * np.sqrt(w)[None, :]
