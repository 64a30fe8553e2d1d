"""Discrete-time (Stein) Lyapunov equations ``A X A^T - X + Q = 0`` and their factors.

Solvers
-------
``solve_discrete_lyapunov``
    ``"diagonal"`` closed form, ``"schur"`` recursive blocked Bartels-Stewart on the real
    Schur form (level-3), ``"smith"`` squared Smith (doubling), ``"slycot"`` (SB03MD).
``lyapunov_factor``
    ``L`` with ``L L^T = X`` for ``Q = B B^T`` computed directly by Hammarling's square-root
    method (``"hammarling"``; ``"diagonal"``: the closed form of :mod:`lti.modal`, shared
    with the modal Gramian path; ``"slycot"`` calls SB03OD) or, for small dense ``A``, by
    the factored squared Smith iteration (``"smith"``).
``psd_factor``
    Clipped symmetric eigendecomposition of a given positive semidefinite matrix.
``real_schur``
    ``A = Z T Z^T``, shared by several solves (both Gramian factors of one system).

Where the algorithms live: :mod:`lti._schur` (Schur form), :mod:`lti._stein`
(Bartels-Stewart and Smith for ``X``), :mod:`lti._hammarling` (Hammarling's factor),
:mod:`lti._smith` (factored squared Smith), :mod:`lti._slycot` (SLICOT backend); this
module validates the input, chooses the method and re-exports the Schur form.
"""

from __future__ import annotations

import math
import numbers
import warnings

import numpy as np
import scipy.linalg as sla
from scipy.linalg import blas

from lti._hammarling import compress_rows, hammarling_dense, schur_form_factor
from lti._schur import SchurForm, ct, real_schur
from lti._slycot import factor_slycot, solve_slycot
from lti._smith import SMITH_AUTO_ITER, SMITH_MAX_GROWTH, smith_factor, try_smith
from lti._stein import REFINE_RTOL, fro_norm, smith_solve, solve_schur
from lti._validation import (
    as_float_matrix,
    as_float_vector,
    as_real_array,
    check_square,
    check_stable,
    check_symmetric,
    spectral_radius,
    symmetrize_,
)
from lti.exceptions import InvalidArgumentError, ShapeError, SolverError
from lti.lowrank import dense_only, is_sparse, lowrank_factor
from lti.modal import diagonal_stein_factor

__all__ = [
    "SchurForm",
    "lyapunov_factor",
    "psd_factor",
    "real_schur",
    "solve_discrete_lyapunov",
]


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


def solve_discrete_lyapunov(A, Q, *, method: str = "auto", refine="auto") -> np.ndarray:
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
        ``"schur"`` otherwise, except for real dense ``A`` (n >= 3) with a positive
        semidefinite ``Q`` of rank at most 32 (``Q = F F^T`` by a pivoted Cholesky that
        must reproduce ``Q`` to rounding; the Gramian case ``Q = B B^T``): there
        ``X = L L^T`` with ``L`` from the factored squared Smith iteration, where
        :func:`lyapunov_factor` would try it, accepted when it converges and its relative
        residual is at most ``1e-13`` (else ``"schur"``, which then transforms ``F``
        rather than ``Q`` to Schur coordinates); it depends on the input only, never on
        what is installed.
        ``"slycot"`` (SB03MD) is used only when asked for by name.
    refine : {"auto", True, False}, optional
        The refinement step of ``"schur"`` and ``"smith"`` (Notes; ignored by
        ``"diagonal"``, ``"slycot"`` and the factored Smith path of ``"auto"``, whose
        residual is checked). ``True``: one full step of iterative refinement whenever the
        relative residual exceeds ``1e-13``. ``"auto"`` (default): the same, except that on
        the Schur path, for real ``A`` and ``Q`` with ``n >= 256`` and the compiled
        kernels, the residual is estimated first from 16 fixed probe vectors (O(n^2), the
        n x n residual is not formed), nothing more is done when the estimate is at most
        ``1e-13``, and a correction on the slow modes alone (O(n^2)) replaces the full step
        when the probes show it leaving at most a quarter of the residual. ``False``: none.

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
        Unknown ``method`` or ``refine``, or ``"diagonal"`` with a non-diagonal ``A``.
    SolverError
        ``method="smith"`` overflowed, did not converge, or stayed inaccurate after its
        refinement step (Notes).
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
    recursion). Small leaves are solved by a compiled kernel in ``T``'s own real arithmetic
    (numba, the optional extra ``fast``), else column by column with BLAS calls (the same
    results to rounding). ``X = Z Y Z^T``; with a
    known factor ``Q = F F^T`` (``method="auto"`` above) the right-hand side is
    ``(Z^T F)(Z^T F)^T`` at O(n^2 k) instead of two n^3 products, and with the compiled
    kernels (n >= 64) the first solve is ``X = L L^T``, ``L = Z R^T`` from Hammarling's
    factor ``R`` (as :func:`lyapunov_factor`): two n^3 products after a compiled row loop
    instead of the recursion and the back-transformation.
    The Schur form's own backward error (about ``eps ||A||``), times the large part of
    ``X`` that slowly decaying modes carry, dominates the residual when the spectral radius
    is near 1 (not the recursion or the back-transformation: both done exactly, the
    residual stays). Most of that residual has the form ``G V^T + V G^T``, ``V`` an
    orthonormal basis of the invariant subspace of the slowest eigenvalues. So with
    ``refine="auto"`` (real data, n >= 256, compiled kernels), when the relative residual,
    estimated from 16 fixed Gaussian probe vectors, exceeds ``1e-13``, that part (the
    projection ``R - (I - V V^T) R (I - V V^T)`` of the residual ``R``, for the 8 slowest
    eigenvalues) is removed exactly by ``dX = H V^T + V H^T``, ``A H L^T - H + G = 0``
    (``L = V^T A V``), an n x 8 equation solved on the Schur form: O(n^2) work, the n x n
    residual is never formed. It is kept when the probes show at most a quarter of the
    residual left (the probes' ratio was within about 20 % of the true one, mostly above it,
    in the cases measured; n = 1024, spectral radius 0.9999: about 1/6). Otherwise (the
    residual not on a few slow modes: e.g. many eigenvalues near the unit circle, or
    strongly non-normal ``A``), and always with ``refine=True``, the full step follows: the
    residual formed in full (4 n^3) and, when it exceeds ``1e-13`` relative, one step of
    iterative refinement (correction from the same Schur form), typically lowering it
    ten-fold. For ``n >= 256`` that
    correction's right-hand side ``Z^T R Z`` and recursion run in single precision (it
    needs a few digits) and it is kept when a check with 4 random probe vectors shows it
    removes at least 99 % of the residual: with its back-transform in single precision,
    else with the same correction back-transformed in double, else (ill-conditioned, e.g.
    strongly non-normal ``A``) it is solved again in double, and dropped should the probes
    show it raising the residual (a hopeless equation, relative residual >> 1). So every
    step is kept only when the probes show it lowering the residual.
    ``"smith"`` iterates :math:`X \\leftarrow X + A_k X A_k^T`, :math:`A_k \\leftarrow A_k^2`
    (quadratic convergence in ``rho(A)^(2^k)``), useful as an independent check; the
    same residual-triggered refinement step follows (its rounding errors grow with
    ``||A_k||``, so it helps most for non-normal ``A``), and a result whose backward error
    ``||R||_F / (||A||_F^2 ||X||_F + ||Q||_F)`` is still above ``1e-10`` after it is refused
    with :class:`SolverError` (strongly non-normal ``A``: use ``"schur"``).
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
    if not (isinstance(refine, str) and refine == "auto") and not isinstance(
            refine, bool | np.bool_):
        raise InvalidArgumentError(f'`refine` must be "auto", True or False; got {refine!r}')
    refine = refine if isinstance(refine, str) else bool(refine)
    dense_only("solve_discrete_lyapunov()", A)  # X is n x n: sparse A has the factor path
    M, a = _state_matrix(A)
    n = a.size if M is None else M.shape[0]
    Qm = as_float_matrix("Q", Q, allow_complex=True, copy=False)  # read only below
    if Qm.shape != (n, n):
        raise ShapeError(f"`Q` must have shape (n, n) = {(n, n)} to match `A`; got {Qm.shape}")
    asym = check_symmetric("Q", Qm)
    auto = method == "auto"
    if auto:
        method = "diagonal" if a is not None else "schur"
    if method == "diagonal":
        if a is None:
            raise InvalidArgumentError('method="diagonal" needs a diagonal `A` (or 1-D `a`)')
        check_stable("A", a)
        den = np.multiply.outer(a, np.conj(a) if np.iscomplexobj(a) else a)
        np.subtract(1.0, den, out=den)
        X = np.divide(Qm, den, out=den if den.dtype == np.result_type(Qm, den) else None)
        return symmetrize_(X) if asym > 0 else X
    if M is None:
        M = np.diag(a)
    if method == "schur":
        X, F = _factored_solve(M, Qm) if auto else (None, None)
        return solve_schur(M, Qm, refine=refine, factor=F) if X is None else X
    if method == "smith":
        check_stable("A", M)
        X = symmetrize_(smith_solve(M, Qm))
        if not refine:
            return X
        R = symmetrize_((M @ X) @ ct(M) - X + Qm)  # one refinement step, as for "schur"
        if fro_norm(R) > REFINE_RTOL * fro_norm(Qm):
            X = symmetrize_(X + smith_solve(M, R))
            R = (M @ X) @ ct(M) - X + Qm
            # squaring a non-normal A: rounding grows with ||A^(2^k)||, and one step of
            # refinement is not enough (backward error 2.5e-5 measured, returned as is)
            scale = fro_norm(M) ** 2 * fro_norm(X) + fro_norm(Qm)
            if not fro_norm(R) <= _SMITH_BACKWARD_TOL * scale:
                raise SolverError(
                    f'method="smith" is inaccurate for this `A` (relative residual '
                    f"{fro_norm(R) / scale:.3g} after refinement: the powers of `A` grow "
                    f"before they decay, spectral radius {spectral_radius(M):.6g}); use "
                    'method="schur"'
                )
        return X
    return solve_slycot(M, Qm)



#: method="smith" refuses a result whose backward error ||R|| / (||A||^2 ||X|| + ||Q||)
#: stays above this after its refinement step (the Schur path reaches ~n eps).
_SMITH_BACKWARD_TOL = 1e-10

_LOW_RANK_MAX = 32  # method="auto" solves with Q = F F^T of at most this rank through F


def _psd_low_rank(Q: np.ndarray, kmax: int):
    """``F`` (n, k <= kmax) with ``F F^T = Q`` to rounding (pivoted Cholesky, checked), or
    ``None`` when ``Q`` is not positive semidefinite of rank <= kmax. At most kmax steps of
    O(n k) each, so a full-rank or indefinite ``Q`` is turned down cheaply."""
    n = Q.shape[0]
    d = np.diag(Q).copy()
    dmax = float(np.max(d, initial=0.0))
    if not dmax > 0:
        return None
    eps = np.finfo(np.float64).eps
    tol = n * eps * dmax
    F = np.zeros((n, kmax))
    k = 0
    while True:
        p = int(np.argmax(d))
        if d[p] <= tol:
            break
        if k == kmax:
            return None
        f = (Q[:, p] - F[:, :k] @ F[p, :k]) / np.sqrt(d[p])
        F[:, k] = f
        d -= f * f
        k += 1
    F = F[:, :k]
    # accept only a factor that reproduces Q (an indefinite Q stops early too); by blocks
    # of rows, without n x n temporaries (n = 1024: 1.7 ms instead of 8.3)
    err = 0.0
    for i in range(0, n, _CHECK_ROWS):
        err = math.hypot(err, fro_norm(Q[i : i + _CHECK_ROWS] - F[i : i + _CHECK_ROWS] @ F.T))
    if err > 16 * max(k, 1) * eps * fro_norm(Q):
        return None
    return F


_CHECK_ROWS = 256


def _factored_solve(M: np.ndarray, Q: np.ndarray):
    """``method="auto"`` for real dense ``A`` with a low-rank PSD ``Q = F F^T`` (the
    Gramian case): ``(X, F)`` with ``X = L L^T`` from the factored squared Smith iteration
    where :func:`lti._smith.try_smith` tries it and it converges with a residual of at most
    ``REFINE_RTOL`` relative, else ``(None, F)`` (the Schur path, which then transforms
    ``F`` instead of ``Q``); ``F`` is ``None`` when there is no such factor."""
    n = M.shape[0]
    if n < 3 or np.iscomplexobj(M) or np.iscomplexobj(Q):  # n <= 2: Schur is exact enough
        return None, None
    F = _psd_low_rank(Q, min(_LOW_RANK_MAX, n))
    if F is None or F.shape[1] == 0:
        return None, None
    if not try_smith(n, M, F):
        return None, F
    L = smith_factor(M, F, False, SMITH_AUTO_ITER, SMITH_MAX_GROWTH)
    if L is None:
        return None, F
    X = symmetrize_(L @ L.T)
    R = (M @ X) @ M.T - X + Q
    if not fro_norm(R) <= REFINE_RTOL * fro_norm(Q):
        return None, F
    return X, F


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
    A : array_like, shape (n, n) or (n,), or scipy.sparse matrix
        Schur-stable matrix, or the diagonal ``a`` of a diagonal one (real or complex).
        A sparse ``A`` gives the low-rank ADI factor (n x k, k << n) of
        :func:`lti.lowrank.lowrank_factor` with its defaults (`method`, `schur` ignored).
    B : array_like, shape (n, m)
        Right-hand side factor (a 1-D ``B`` is one column).
    method : {"auto", "diagonal", "hammarling", "smith", "slycot"}, optional
        ``"auto"``: ``"diagonal"`` for diagonal ``A``; for real dense ``A`` with ``n <= 1024``
        (and no `schur` given; above n = 128 only when 32 products ``A^k B`` decay by at least
        0.96 per step, ``lti._smith.smith_promising``, so that a slowly decaying ``A`` does not
        pay for a failed attempt; at any n the attempt stops at squaring 4 to 6 when its sums of
        ``||A^j B||^2`` decay as slowly) ``"smith"`` when it converges within 12 squarings with
        every power ``||A^(2^k)||_F <= 8 sqrt(n)`` (the growth guard ``SMITH_MAX_GROWTH`` of
        :mod:`lti._smith`: spectral radius up to about 0.99 and no transient growth; a dense A
        with decaying powers has ``||A||_F ~ rho sqrt(n)``), ``"hammarling"`` otherwise
        (decided by the input only).
        ``"smith"``: factored squared Smith iteration (real data only; a factor whose
        backward error exceeds ``1e-10`` is refused with :class:`SolverError`, as happens
        for strongly non-normal ``A``). ``"slycot"`` (SB03OD) only when asked for by name.
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
    if is_sparse(A):  # low-rank ADI (lti.lowrank)
        B2 = as_real_array("B", B)  # typed: complex, masked, sparse, non-numeric
        return np.asarray(lowrank_factor(A, B2[:, None] if B2.ndim == 1 else B2,
                                         transpose=transpose).Z)
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
        if (method == "hammarling" and real and schur is None
                and try_smith(n, M.T if transpose else M, Bm)):
            L = smith_factor(M, Bm, transpose, SMITH_AUTO_ITER, SMITH_MAX_GROWTH, screen=True)
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
        with np.errstate(over="ignore", invalid="ignore"):  # an overflow: typed below
            L = smith_factor(M, Bm, transpose, 100, np.inf)
        if L is None or not np.isfinite(L).all():
            raise SolverError(
                f'method="smith" did not converge in 100 doublings (spectral radius '
                f"{spectral_radius(M):.6g}; the powers of `A` may grow before they decay: "
                'use method="hammarling")'
            )
        # the squarings of a non-normal A round with ||A^(2^k)||: backward errors of 4e-5
        # were returned as they were; refuse what the Hammarling path would not give
        Mt = M.T if transpose else M
        X = L @ L.T
        scale = fro_norm(Mt) ** 2 * fro_norm(X) + fro_norm(Bm) ** 2
        res = fro_norm((Mt @ X) @ Mt.T - X + Bm @ Bm.T)
        if not res <= _SMITH_BACKWARD_TOL * scale:
            raise SolverError(
                f'method="smith" is inaccurate for this `A` (relative residual '
                f"{res / scale:.3g}: the powers of `A` grow before they decay, spectral radius "
                f'{spectral_radius(M):.6g}); use method="hammarling"'
            )
        return L
    if method == "diagonal":
        if a is None:
            raise InvalidArgumentError('method="diagonal" needs a diagonal `A` (or 1-D `a`)')
        check_stable("A", a)
        # X - diag(f) X diag(f)^H = B B^H: f = a for A X A^H, conj(a) for A^H X A (lti.modal)
        return diagonal_stein_factor(np.conj(a) if transpose else a, Bm)
    if M is None:
        M = np.diag(a)
    if method == "slycot":
        return factor_slycot(M, Bm, transpose)
    if n == 0:
        return np.zeros((0, 0))
    if schur is None:
        schur = real_schur(M)
    check_stable("A", schur.T, rho=float(np.max(np.abs(schur.eigenvalues()))))
    if real:
        # Hammarling in Schur coordinates (lti._hammarling.schur_form_factor): X = Z R^T R Z^T
        # (transpose) or Z P R^T R P Z^T, P the reversal; L = Zr R^T by one dtrmm
        R, flip = schur_form_factor(schur, schur.Z.T @ Bm, transpose)
        Zr = schur.Z[:, ::-1] if flip else schur.Z
        return blas.dtrmm(1.0, R, Zr, side=1, trans_a=1)  # Zr @ R^T
    Tc, Zc, _, _ = schur.complex_parts()
    Bt = ct(Zc) @ Bm  # (n, m)
    if transpose:
        # Tc^H Y Tc - Y + Bt Bt^H = 0, X = Zc Y Zc^H = Zc U^H U Zc^H
        U = hammarling_dense(Tc, compress_rows(ct(Bt)))
        K = U @ ct(Zc)
    else:
        # Tc Y Tc^H - Y + Bt Bt^H = 0; the reversal P turns it into Hammarling's form with
        # upper triangular P Tc^H P: Y = P U^H U P, X = Zc P U^H U P Zc^H
        U = hammarling_dense(ct(Tc)[::-1, ::-1], compress_rows(ct(Bt[::-1])))
        K = U @ ct(Zc[:, ::-1])
    return ct(sla.qr(K, mode="r", check_finite=False)[0][:n])


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
    eps = np.finfo(np.float64).eps
    if rtol is None:
        rtol = n * eps
    if (isinstance(rtol, bool) or not isinstance(rtol, numbers.Real)
            or not (0 <= rtol < math.inf)):  # (compared as numbers: no bare TypeError)
        raise InvalidArgumentError(f"`rtol` must be a non-negative number; got {rtol!r}")
    rtol = float(rtol) if rtol < 1e300 else math.inf  # (an int beyond the float range)
    if n == 0:
        return np.zeros((0, 0), dtype=Xm.dtype)
    w, V = np.linalg.eigh(symmetrize_(Xm))
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
