"""Controllability and observability Gramians of discrete-time systems.

Infinite horizon (stable ``A``):

.. math:: P = \\sum_{k \\ge 0} A^k B B^T (A^T)^k, \\qquad
          Q = \\sum_{k \\ge 0} (A^T)^k C^T C A^k,

the solutions of ``A P A^T - P + B B^T = 0`` and ``A^T Q A - Q + C^T C = 0``. Finite
horizon T (what an adapter with a context of T tokens sees): the same sums over
``k < T``, defined for any ``A``.
"""

from __future__ import annotations

import numbers
from dataclasses import dataclass

import numpy as np
import scipy.linalg as sla

from lti._hammarling import schur_form_factor
from lti._schur import system_schur
from lti._smith import (
    SMITH_AUTO_ITER,
    SMITH_MAX_GROWTH,
    smith_factors,
    stops_at_early_step,
    try_smith,
)
from lti._validation import balanced_margin, stability_margin, unstable_message
from lti.exceptions import InvalidArgumentError, NonFiniteError, SolverError, UnstableSystemError
from lti.lowrank import dense_only, is_sparse, lowrank_factor, lowrank_gramian_factors
from lti.lyapunov import SchurForm, lyapunov_factor, real_schur, solve_discrete_lyapunov
from lti.modal import modal_form, modal_gramian_factors
from lti.system import DiscreteLTI, as_discrete_system

__all__ = [
    "GramianFactors",
    "controllability_gramian",
    "gramian_factors",
    "observability_gramian",
    "stable_gramian_factors",
]


# ------------------------------------------------------------ infinite horizon factors


@dataclass(frozen=True, eq=False)
class GramianFactors:
    """Infinite-horizon Gramian factors of a stable system, ``P = Lc Lc^T``, ``Q = Lo Lo^T``.

    Attributes
    ----------
    Lc, Lo : ndarray, shape (n, n)
        Controllability and observability factors.
    rho : float
        The spectral radius of ``A`` (Schur or diagonal path) or, on the factored
        squared-Smith path, an upper bound of it read off the powers ``||A^(2^k)||_F``.
    path : str
        ``"modal"`` (diagonal or :meth:`~lti.DiscreteLTI.from_diagonal` form, see
        :mod:`lti.modal`), ``"smith"``, ``"schur"`` or ``"diagonal"``: how the factors were
        computed.
    schur : SchurForm or None
        ``None``: ``Lc``, ``Lo`` are factors of the Gramians of ``(A, B, C)`` itself. The
        real Schur form ``A = Z T Z^T`` (asked for with ``in_schur_basis=True``): they are
        the factors of the Gramians of ``(T, Z^T B, C Z)``, i.e. ``P = Z Lc Lc^T Z^T``;
        these triangular factors keep small singular directions that the product with
        ``Z`` rounds away (balanced truncation of strongly non-normal systems needs them).
    schur_BC : (ndarray, ndarray) or None
        With ``schur``: ``(Z^T B, C Z)``, the Schur-coordinate input and output matrices
        the factors were computed from (``None`` otherwise).
    """

    Lc: np.ndarray
    Lo: np.ndarray
    rho: float
    path: str
    schur: SchurForm | None = None
    schur_BC: tuple | None = None  # (Z^T B, C Z) with `schur` (the products made for the factors)


def stable_gramian_factors(
    G: DiscreteLTI, *, schur: SchurForm | None = None, in_schur_basis: bool = False
) -> GramianFactors:
    """Both infinite-horizon Gramian factors of a stable system, the one place they are made.

    Parameters
    ----------
    G : DiscreteLTI
        The system (n states).
    schur : SchurForm, optional
        Real Schur form of ``G.A`` to use (e.g. ``SchurForm(T, I)`` for a quasi-triangular
        ``A``); skips the squared-Smith attempt.
    in_schur_basis : bool, optional
        On the Schur path, return the factors in Schur coordinates (``schur`` set, see
        :class:`GramianFactors`) instead of multiplying them by the Schur vectors.

    Returns
    -------
    GramianFactors

    Raises
    ------
    UnstableSystemError
        Spectral radius of ``A`` >= 1 (the measured value is in the message).
    SolverError
        The factors are not finite.

    Notes
    -----
    Modal ``A`` (diagonal, or the conjugate-pair 2x2 blocks of
    :meth:`~lti.DiscreteLTI.from_diagonal`): the closed-form Schur algorithm of
    :func:`lti.modal.modal_gramian_factors` on the generators. Dense ``A`` with ``n <=
    SMITH_MAX_N = 1024`` (and no `schur`; above ``SMITH_SCREEN_N = 128`` only when
    :func:`lti._smith.smith_promising` predicts convergence from 32 products ``A^k B``, so that
    a slowly decaying ``A`` does not pay for a failed attempt): one factored squared-Smith pass
    sharing the powers of ``A`` between both factors, accepted only when it converges within
    ``SMITH_AUTO_ITER`` squarings with ``||A^(2^k)||_F <= SMITH_MAX_GROWTH * sqrt(n)`` (its
    convergence certifies stability); it gives up at squaring 4, 5 or 6 when its own sums of
    ``||A^j B||^2`` show the same slow decay (at any n; ``lti._smith.SMITH_EARLY_STEP``);
    with the compiled kernels the stop at squaring 4 is decided before the attempt, from
    the same sums by 31 products ``A^j B`` (:func:`lti._smith.stops_at_early_step`,
    n <= 128: a fifth of the stopped attempt's cost). Otherwise ONE real Schur decomposition
    of ``A`` serves the stability test and both Hammarling solves. ``B`` and ``C`` are scaled
    to unit size inside (the factors scale linearly), so tiny or huge data neither underflow
    nor overflow in the solvers.
    """
    n = G.n
    if n == 0:
        return GramianFactors(np.zeros((0, 0)), np.zeros((0, 0)), 0.0, "diagonal")
    dense_only("stable_gramian_factors()", G)  # (was a bare TypeError from the norm below)
    A0 = G.A if schur is None else schur.T  # (the matrix the margin is measured on)
    margin = stability_margin(n, float(np.linalg.norm(A0)))
    modal = modal_form(G.A) if schur is None else None
    if modal is not None:  # (complex) diagonal: closed form from the generators (lti.modal)
        rho = float(np.max(np.abs(modal[0])))
        if not rho < 1.0 - margin:  # (a badly scaled pair block: its balanced margin)
            rho, margin = balanced_margin(A0, margin, rho)
        if not rho < 1.0 - margin:
            raise UnstableSystemError(
                "infinite-horizon Gramians need a Schur-stable system: "
                + unstable_message("`sys.A`", rho, margin)
            )
        Lc, Lo, rho = modal_gramian_factors(G.A, G.B, G.C, modal=modal)
        return GramianFactors(Lc, Lo, rho, "modal")
    diagonal = schur is None and G.is_diagonal
    # (stops_at_early_step: the attempt's own stop at squaring 4 decided before it, cheaper)
    if (schur is None and not diagonal and try_smith(n, G.A, G.B)
            and not stops_at_early_step(G.A, G.B)):
        out = smith_factors(G.A, [G.B, G.C.T], [False, True], max_iter=SMITH_AUTO_ITER,
                            max_growth=SMITH_MAX_GROWTH, screen=True)
        if out is not None:
            (Lc, Lo), rho = out
            if rho < 1.0 - margin:  # the Smith bound certifies rho(A) <= rho
                return GramianFactors(Lc, Lo, float(rho), "smith")
    if diagonal:
        rho = float(np.max(np.abs(np.diag(G.A))))
    else:
        if schur is None:  # (G.A is validated: no second check and copy of it)
            schur = system_schur(G.A) if G.A.dtype == np.float64 else real_schur(G.A)
        rho = float(abs(schur.eigenvalues()).max())  # (the method: np.max's wrapper costs)
    if not rho < 1.0 - margin:  # a badly scaled A: the margin of its balanced form
        rho, margin = balanced_margin(A0, margin, rho)
    if not rho < 1.0 - margin:
        raise UnstableSystemError(
            "infinite-horizon Gramians need a Schur-stable system: "
            + unstable_message("`sys.A`", rho, margin)
        )
    if diagonal:
        A, B, C, Z = G.A, G.B, G.C, None
    else:  # solve in Schur coordinates: (T, Z^T B, C Z)
        Z = schur.Z
        A, B, C = schur.T, Z.T @ G.B, G.C @ Z
    b = float(abs(B).max(initial=0.0))
    c = float(abs(C).max(initial=0.0))
    if Z is None:
        Lc = lyapunov_factor(A, B / b) * b if b > 0 else np.zeros((n, n))
        Lo = lyapunov_factor(A, C.T / c, transpose=True) * c if c > 0 else np.zeros((n, n))
    else:  # Hammarling on T (lti._hammarling.schur_form_factor: real kernel or complex triangle)
        Lc = _schur_coordinate_factor(schur, B, b, False)
        Lo = _schur_coordinate_factor(schur, C.T, c, True)
    # (ndarray methods on the contiguous arrays, not the row-reversed view: cheaper)
    if not (np.isfinite(Lc[::-1] if Lc.strides[0] < 0 else Lc).all() and np.isfinite(Lo).all()):
        raise SolverError(
            "the Gramian factors are not finite (the Lyapunov solver failed for this `A`; "
            "entries near the underflow threshold can cause this)"
        )
    if Z is None:
        return GramianFactors(Lc, Lo, rho, "diagonal")
    if in_schur_basis:
        return GramianFactors(Lc, Lo, rho, "schur", schur=schur, schur_BC=(B, C))
    return GramianFactors(Z @ Lc, Z @ Lo, rho, "schur")


def _schur_coordinate_factor(schur: SchurForm, Bs: np.ndarray, scale: float,
                             transpose: bool) -> np.ndarray:
    """Factor ``Ls`` (``Xs = Ls Ls^T``) of the Stein equation of ``(T, Bs)`` in Schur
    coordinates (``T^T`` with `transpose`), ``Bs`` scaled by ``1 / scale`` inside;
    lower triangular, or row-reversed lower triangular for the controllability form."""
    n = Bs.shape[0]
    if scale == 0:
        return np.zeros((n, n))
    R, flip = schur_form_factor(schur, Bs / scale, transpose)  # real T and Bs
    L = R.T * scale  # Xs = R^T R (transpose) or P R^T R P: Ls = P R^T
    return L[::-1] if flip else L


def _check_horizon(horizon):
    if horizon is None:
        return None
    if isinstance(horizon, bool) or not isinstance(horizon, numbers.Integral) or horizon < 1:
        raise InvalidArgumentError(
            f"`horizon` must be None (infinite) or a positive integer; got {horizon!r}"
        )
    return int(horizon)


def _geometric(z: np.ndarray, T: int) -> np.ndarray:
    """``sum_{k<T} z^k`` elementwise for real ``z``, accurate near ``z = 1``."""
    out = np.empty_like(z)
    one = z == 1.0
    pos = (z > 0) & ~one
    out[one] = T
    zp = z[pos]
    out[pos] = -np.expm1(T * np.log(zp)) / (1.0 - zp)
    rest = ~pos & ~one
    zr = z[rest]
    out[rest] = (1.0 - zr**T) / (1.0 - zr)
    return out


def _compress(L: np.ndarray) -> np.ndarray:
    """Same Gram matrix ``L L^T`` with at most n columns (QR of ``L^T``)."""
    n, c = L.shape
    if c <= n:
        return L
    R = sla.qr(L.T, mode="r", check_finite=False)[0][:n]
    return R.T


_DIRECT_FLOPS = 2e9  # direct Krylov accumulation below this cost, doubling above


def _use_direct(n: int, m: int, T: int) -> bool:
    """Direct accumulation costs ~4 T m n^2 flops; doubling ~6 n^3 log2(T). The direct sum
    is also the more accurate one for non-normal ``A`` (doubling forms ``A^(2^i)``, whose
    rounding errors scale with ``||A||^(2^i)`` rather than ``||A^(2^i)||``)."""
    return 4.0 * T * max(m, 1) * n * n <= max(_DIRECT_FLOPS, 6.0 * n**3 * np.log2(T + 1))


def _krylov_factor(M: np.ndarray, B: np.ndarray, T: int) -> np.ndarray:
    """``[B, M B, ..., M^(T-1) B]``, QR-compressed to at most n columns as it grows."""
    n = M.shape[0]
    blocks, width, L = [], 0, np.zeros((n, 0))
    V = B.copy()
    for _ in range(T):
        blocks.append(V)
        width += V.shape[1]
        if width >= 2 * n and n > 0:
            L = _compress(np.hstack([L, *blocks]))
            blocks, width = [], L.shape[1]
        V = M @ V
    return _compress(np.hstack([L, *blocks])) if blocks else L


def _finite_factors(A: np.ndarray, diag: bool, Bs: list[np.ndarray], T: int, transposes):
    """Factors of ``sum_{k<T} M^k B B^T (M^T)^k`` with ``M = A`` or ``A^T`` per right-hand
    side, by binary doubling ``L_{2k} = [L_k, M^k L_k]`` (exact; valid for unstable ``A``),
    sharing the powers ``A^k``. Columns are compressed by QR beyond n."""
    n = A.shape[0]
    if not diag and all(_use_direct(n, B.shape[1], T) for B in Bs):
        return [_krylov_factor(A.T if t else A, B, T) for B, t in zip(Bs, transposes, strict=True)]
    a = np.diag(A) if diag else None

    def apply(Pk, L, trans):  # M^k L
        if diag:
            return Pk[:, None] * L
        return (Pk.T if trans else Pk) @ L

    Pk = a.copy() if diag else A.copy()  # A^k for the current block length k
    Lk = [B.copy() for B in Bs]  # factors for horizon k
    res = [np.zeros((n, 0)) for _ in Bs]
    Pres = np.ones(n) if diag else np.eye(n)  # A^(horizon accumulated so far)
    bits = bin(T)[2:][::-1]
    for i, bit in enumerate(bits):
        if bit == "1":
            res = [
                _compress(np.hstack([R, apply(Pres, L, t)]))
                for R, L, t in zip(res, Lk, transposes, strict=True)
            ]
            Pres = Pres * Pk if diag else Pres @ Pk
        if i + 1 < len(bits):
            Lk = [
                _compress(np.hstack([L, apply(Pk, L, t)]))
                for L, t in zip(Lk, transposes, strict=True)
            ]
            Pk = Pk * Pk if diag else Pk @ Pk
    return res


def _finite_gramian(A: np.ndarray, diag: bool, B: np.ndarray, T: int, transpose: bool):
    n = A.shape[0]
    if diag:
        a = np.diag(A)
        return (B @ B.T) * _geometric(a[:, None] * a[None, :], T)
    M = A.T if transpose else A
    if _use_direct(n, B.shape[1], T):
        K = _krylov_factor(M, B, T)
        X = K @ K.T
        return 0.5 * (X + X.T)
    Pk, Xk = M.copy(), B @ B.T  # M^k and the horizon-k sum, k = 1
    X, Pres = np.zeros((n, n)), np.eye(n)
    bits = bin(T)[2:][::-1]
    for i, bit in enumerate(bits):
        if bit == "1":
            X = X + Pres @ Xk @ Pres.T
            Pres = Pres @ Pk
        if i + 1 < len(bits):
            Xk = Xk + Pk @ Xk @ Pk.T
            Pk = Pk @ Pk
    return 0.5 * (X + X.T)


def _gramian(G: DiscreteLTI, horizon, factor: bool, transpose: bool):
    horizon = _check_horizon(horizon)
    if not isinstance(factor, bool | np.bool_):
        raise InvalidArgumentError(f"`factor` must be a bool; got {factor!r}")
    B = G.C.T if transpose else G.B
    if is_sparse(G.A):  # low-rank ADI factors only (lti.lowrank)
        if horizon is not None:  # first: its advice covers `factor` too
            dense_only("a finite-horizon Gramian", G)
        if not factor:
            dense_only("an n x n Gramian", G)
        return np.asarray(lowrank_factor(G.A, B, transpose=transpose).Z)
    A_in = np.diag(G.A) if G.is_diagonal else G.A
    if horizon is None:
        if factor:
            return lyapunov_factor(A_in, B, transpose=transpose)
        M = A_in if (G.is_diagonal or not transpose) else G.A.T
        return solve_discrete_lyapunov(M, B @ B.T)
    with np.errstate(over="ignore", invalid="ignore"):  # refused below, typed
        if factor:
            X = _finite_factors(G.A, G.is_diagonal, [B], horizon, [transpose])[0]
        else:
            X = _finite_gramian(G.A, G.is_diagonal, B, horizon, transpose)
    _check_finite_horizon(G, horizon, [X])
    return X


def _check_finite_horizon(G: DiscreteLTI, horizon: int, Xs) -> None:
    """NonFiniteError when a finite-horizon Gramian (factor) overflowed float64: the sums
    ``sum_{k<T} A^k B B^T (A^T)^k`` of an unstable ``A`` grow like ``rho^(2T)`` (they were
    returned as inf, and the factors as NaN from the QR compression of inf)."""
    if all(np.isfinite(X).all() for X in Xs):
        return
    rho = G.spectral_radius()
    raise NonFiniteError(
        f"the finite-horizon Gramian overflows float64 (horizon T = {horizon}, spectral "
        f"radius of `A` {rho:.6g}: its terms grow like rho^(2k)); use a shorter horizon "
        "or scale B and C down"
    )


def controllability_gramian(sys, *, horizon: int | None = None, factor: bool = False):
    """Controllability Gramian ``P = sum_k A^k B B^T (A^T)^k``.

    Parameters
    ----------
    sys : DiscreteLTI, python-control system or tuple
        The system (converted by :func:`lti.system.as_discrete_system`).
    horizon : int, optional
        ``None``: infinite horizon (needs Schur-stable ``A``; solves
        ``A P A^T - P + B B^T = 0``). A positive int T: the sum over ``k < T``, for any
        ``A``.
    factor : bool, optional
        Return a factor ``L`` with ``P = L L^T`` instead of ``P``.

    Returns
    -------
    ndarray, shape (n, n) or (n, k)
        ``P``, or its factor ``L`` (n rows; at most n columns, see
        :func:`lyapunov_factor`; a finite-horizon factor has ``min(T m, n)`` columns).

    Raises
    ------
    UnstableSystemError
        Infinite horizon with spectral radius >= 1 (the value is in the message).
    NonFiniteError
        A finite horizon whose sum overflows float64 (unstable ``A``, long horizon).
    InvalidArgumentError
        Bad ``horizon`` / ``factor`` or not a system.

    Notes
    -----
    Diagonal ``A = diag(a)`` uses closed forms: :math:`P_{ij} = (BB^T)_{ij}/(1 - a_i a_j)`
    and, for horizon T, :math:`P_{ij} = (BB^T)_{ij} (1 - (a_i a_j)^T)/(1 - a_i a_j)`
    (``expm1``/``log`` form near ``a_i a_j = 1``). Dense finite horizons accumulate the
    Krylov factor ``[B, A B, ..., A^(T-1) B]`` directly (QR-compressed to n columns as it
    grows; O(T m n^2), and accurate for non-normal ``A``) unless that costs more than
    binary doubling :math:`P_{2k} = P_k + A^k P_k (A^k)^T` (O(n^3 log T); factors double as
    :math:`L_{2k} = [L_k, A^k L_k]`, compressed by QR, never squared). Doubling's rounding
    errors grow like ``||A||^T`` rather than ``max_k ||A^k||`` for strongly non-normal
    ``A``. Infinite-horizon factors come from Hammarling's method.

    Examples
    --------
    >>> import numpy as np
    >>> from lti import DiscreteLTI, controllability_gramian
    >>> G = DiscreteLTI([[0.5, 0.2], [0.0, -0.4]], [[1.0], [1.0]], [[1.0, 0.0]])
    >>> P = controllability_gramian(G)
    >>> bool(np.linalg.norm(G.A @ P @ G.A.T - P + G.B @ G.B.T) < 1e-14)
    True
    >>> P3 = controllability_gramian(G, horizon=3)
    >>> S = sum(np.linalg.matrix_power(G.A, k) @ G.B @ G.B.T @ np.linalg.matrix_power(G.A, k).T
    ...         for k in range(3))
    >>> bool(np.allclose(P3, S, rtol=1e-14, atol=0))
    True
    """
    return _gramian(as_discrete_system(sys), horizon, factor, transpose=False)


def observability_gramian(sys, *, horizon: int | None = None, factor: bool = False):
    """Observability Gramian ``Q = sum_k (A^T)^k C^T C A^k``.

    Parameters
    ----------
    sys : DiscreteLTI, python-control system or tuple
        The system (converted by :func:`lti.system.as_discrete_system`).
    horizon : int, optional
        ``None``: infinite horizon (solves ``A^T Q A - Q + C^T C = 0``); a positive int T:
        the sum over ``k < T``.
    factor : bool, optional
        Return ``L`` with ``Q = L L^T``.

    Returns
    -------
    ndarray, shape (n, n) or (n, k)
        ``Q`` or its factor.

    Raises
    ------
    UnstableSystemError, InvalidArgumentError
        As for :func:`controllability_gramian`.

    Notes
    -----
    The dual of :func:`controllability_gramian` with ``(A, B) -> (A^T, C^T)``.

    Examples
    --------
    >>> import numpy as np
    >>> from lti import DiscreteLTI, observability_gramian
    >>> G = DiscreteLTI([[0.5, 0.2], [0.0, -0.4]], [[1.0], [1.0]], [[1.0, 0.0]])
    >>> L = observability_gramian(G, factor=True)
    >>> Q = L @ L.T
    >>> bool(np.linalg.norm(G.A.T @ Q @ G.A - Q + G.C.T @ G.C) < 1e-14)
    True
    """
    return _gramian(as_discrete_system(sys), horizon, factor, transpose=True)


def gramian_factors(sys, *, horizon: int | None = None):
    """Factors ``(Lc, Lo)`` of both Gramians, ``P = Lc Lc^T``, ``Q = Lo Lo^T``.

    Parameters
    ----------
    sys : DiscreteLTI, python-control system or tuple
        The system (converted by :func:`lti.system.as_discrete_system`).
    horizon : int, optional
        ``None`` (infinite, stable ``A``) or a positive int T (sums over ``k < T``).

    Returns
    -------
    Lc : ndarray, shape (n, kc)
        Controllability factor.
    Lo : ndarray, shape (n, ko)
        Observability factor.

    Raises
    ------
    UnstableSystemError
        Infinite horizon with spectral radius >= 1.
    NonFiniteError
        A finite horizon whose sums overflow float64 (unstable ``A``, long horizon).

    Notes
    -----
    Dense infinite horizon: up to n = 1024 (above n = 128 only when a cheap screen of the
    decay of ``A^k B`` predicts convergence) one factored squared-Smith pass shares the
    powers of ``A`` between both factors (see :func:`lti.lyapunov.lyapunov_factor`);
    otherwise (or when that iteration does not converge quickly) ONE real Schur
    decomposition of ``A`` is shared by both Hammarling solves. Finite horizon: one doubling
    pass shares the powers ``A^k``. Hankel singular values are the singular values of
    ``Lo^T Lc``. Sparse ``A``: low-rank ADI factors (n x k, k << n) sharing one set of
    shifts and one sparse LU per shift (:func:`lti.lowrank.lowrank_gramian_factors`, whose
    result also carries the residuals); finite horizons raise
    :class:`~lti.exceptions.SparseNotSupportedError`.

    Examples
    --------
    >>> import numpy as np
    >>> from lti import DiscreteLTI, gramian_factors
    >>> rng = np.random.default_rng(0)
    >>> A = rng.standard_normal((20, 20)); A *= 0.9 / max(abs(np.linalg.eigvals(A)))
    >>> G = DiscreteLTI(A, rng.standard_normal((20, 2)), rng.standard_normal((3, 20)))
    >>> Lc, Lo = gramian_factors(G)
    >>> P, Q = Lc @ Lc.T, Lo @ Lo.T
    >>> rc = np.linalg.norm(A @ P @ A.T - P + G.B @ G.B.T) / np.linalg.norm(G.B @ G.B.T)
    >>> ro = np.linalg.norm(A.T @ Q @ A - Q + G.C.T @ G.C) / np.linalg.norm(G.C.T @ G.C)
    >>> bool(max(rc, ro) < 1e-13)
    True
    """
    G = as_discrete_system(sys)
    horizon = _check_horizon(horizon)
    if is_sparse(G.A):  # both low-rank ADI factors with shared shifts and LUs (lti.lowrank)
        if horizon is not None:
            dense_only("a finite-horizon Gramian", G)
        Fc, Fo = lowrank_gramian_factors(G.A, G.B, G.C)
        return np.asarray(Fc.Z), np.asarray(Fo.Z)
    if horizon is not None:
        with np.errstate(over="ignore", invalid="ignore"):  # refused below, typed
            Lc, Lo = _finite_factors(G.A, G.is_diagonal, [G.B, G.C.T], horizon, [False, True])
        _check_finite_horizon(G, horizon, [Lc, Lo])
        return Lc, Lo
    F = stable_gramian_factors(G)
    return F.Lc, F.Lo
