"""Hankel singular values and balanced truncation of discrete-time systems, with bounds.

For a Schur-stable ``G = (A, B, C, D)`` with Gramian factors ``P = Lc Lc^T``
(``A P A^T - P + B B^T = 0``) and ``Q = Lo Lo^T`` (``A^T Q A - Q + C^T C = 0``), the Hankel
singular values (HSVs) are the singular values of ``Lo^T Lc``. Truncating the balanced
realisation to its r dominant states gives a stable ``Gr`` with the certified bounds

.. math:: \\sigma_{r+1} \\le \\|G - G_r\\|_\\infty \\le 2 \\sum_{i > r} \\sigma_i .

Unstable systems are split into a stable and an unstable part (:math:`|\\lambda| \\ge 1`); the
unstable part is kept exactly and only the stable part is reduced, so the bounds, the HSVs
and the error refer to the stable part (as in SLICOT AB09MD and MATLAB ``balred``).
"""

from __future__ import annotations

import numbers
import warnings
from dataclasses import dataclass, replace

import numpy as np
import scipy.linalg as sla

from lti._bt_core import Realisation, StableReduction, fro_product, hsv_svd, reduce_stable
from lti._bt_scale import rescaled, scale_exponent, scaled_system
from lti._order import TIE_RTOL, check_rule  # noqa: F401 - TIE_RTOL re-exported
from lti._rounding import ROUNDING_FACTOR, schur_rounding
from lti._validation import as_float_matrix
from lti.exceptions import InvalidArgumentError, ShapeError, UnstableSystemError
from lti.gramians import stable_gramian_factors
from lti.lowrank import is_sparse, lowrank_gramian_factors
from lti.lyapunov import SchurForm
from lti.stability import StableSplit, split_unstable
from lti.system import DiscreteLTI, as_discrete_system, is_control_system

__all__ = [
    "BT_METHODS",
    "BalancedTruncation",
    "StableSplit",
    "balanced_truncation",
    "balanced_truncation_from_factors",
    "hankel_singular_values",
    "split_unstable",
]

#: Projection methods of :func:`balanced_truncation` (its ``method`` argument).
BT_METHODS = ("auto", "sr", "bfsr")


@dataclass(frozen=True, eq=False)
class BalancedTruncation:
    """Result of :func:`balanced_truncation` (and :func:`balanced_truncation_from_factors`).

    Attributes
    ----------
    reduced : DiscreteLTI or control.StateSpace
        The reduced system of order ``order`` (a python-control ``StateSpace`` with the same
        ``dt`` when one was passed in). Its states are the kept stable states followed by
        the ``n_unstable`` unstable states.
    hsv : ndarray, shape (n_s,)
        Hankel singular values of the stable part (n_s = n - n_unstable states), descending.
    order : int
        Order r of the reduced system, unstable states included.
    error_bound : float
        :math:`2 \\sum_{i > r_s} \\sigma_i` + ``rounding_term`` (``r_s = order - n_unstable``
        stable states kept): the certified upper bound of :math:`\\|G - G_r\\|_\\infty` for
        the returned model, also at full order.
    lower_bound : float
        ``max(sigma_{r_s + 1} - rounding_term, 0)`` (0 when every stable state is kept), a
        lower bound of :math:`\\|G - G_r\\|_\\infty` for *every* reduced model of that order.
    rounding_term : float
        What floating point can add to the error of the returned model:
        ``2 (n_s - r_s) delta + 4 n_s eps g (1 / (1 - rho^2) + ||T||_F ||Ti||_F)`` with
        ``delta = eps max(sigma_1, ||Lc||_2 ||Lo||_2 / (1 - rho^2))`` the absolute accuracy
        of each computed HSV (n_s times it is the floor of ``minimal_order``),
        ``g = 2 sum_i sigma_i >= ||G - D||_inf`` (``D`` is not in it: ``D_r = D`` bit for
        bit, so it cancels exactly in ``G - G_r``; with ``match_dc`` the computed
        ``D_r = D + C_2 (I - A_22)^{-1} B_2`` adds ``eps ||D||_F``), ``rho`` the spectral
        radius of the stable part (or its bound from the Smith iteration) and
        ``||T||_F ||Ti||_F`` (in place of ``||T||_2 ||Ti||_2``, which it bounds) the
        conditioning of the projection;
        plus, after a real Schur decomposition, its backward error's first-order effect
        ``4 n_s eps ((1 + ||A||_F) s + ||B||_F c + ||C||_F b)``, ``s``, ``c``, ``b`` the
        sampled suprema of ``||C R|| ||R B||``, ``||C R||``, ``||R B||`` with
        ``R = (zI - A)^{-1}`` on the unit circle (:mod:`lti._rounding`; large for
        strongly non-normal ``A``: errors up to 181x the bound without it, issue 14);
        all times the conditioning ``||W||_F ||W^{-1}||_F / n`` of the stable/unstable
        decoupling when there is one. An a-priori model of the rounding errors checked
        against measurements (``benchmarks/bt_rounding_term.py``), not a proof; with it
        ``lower_bound <= ||G - G_r||_inf <= error_bound`` held literally on every system
        measured (SPA models with a pole within rounding of the unit circle, e.g. of FIR
        low-pass filters at odd r, are replaced by truncation: see ``match_dc``).
    error_bounds : ndarray, shape (n + 1,)
        ``error_bounds[k]`` is the upper bound for total order k, rounding term of that order
        included (``inf`` for ``k < n_unstable``); ``error_bounds[order] == error_bound``.
    T : ndarray, shape (n, r)
        Right projection: the kept states ``x_r`` correspond to ``x ~ T x_r``.
    Ti : ndarray, shape (r, n)
        Left projection, ``Ti @ T = I``. Without ``match_dc``, ``reduced`` is
        ``(Ti A T, Ti B, C T, D)``; with ``match_dc`` these are the projections onto the
        kept coordinates and the reduced matrices add the singular-perturbation correction.
    method : str
        The method used: ``"sr"`` (square root: ``T``, ``Ti`` come from a balancing
        transformation) or ``"bfsr"`` (balancing-free square root, orthonormal ``T``).
    match_dc : bool
        Whether the singular-perturbation approximation was used (``G_r(1) = G(1)``).
    n_unstable : int
        Number of unstable states (:math:`|\\lambda| \\ge 1`) kept unchanged.
    minimal_order : int
        Number of HSVs of the stable part above the noise floor
        ``n_s eps max(sigma_1, ||Lc|| ||Lo|| / (1 - rho^2))`` (``n_s eps sigma_1 /
        (1 - rho^2)`` when the Schur form is exact, a triangular ``A``; see
        :func:`balanced_truncation`): the numerical order of a minimal realisation.
    factor_residuals : (float, float) or None
        Sparse ``A`` only (``None`` otherwise): the relative residuals of the low-rank
        controllability and observability factors used (:mod:`lti.lowrank`), reported beside
        the bounds; ``hsv`` then has shape (k,) and ``error_bounds`` (k + 1,), k the rank
        they resolve (see :func:`balanced_truncation`, Notes, for what is certified).
    """

    reduced: object
    hsv: np.ndarray
    order: int
    error_bound: float
    lower_bound: float
    error_bounds: np.ndarray
    T: np.ndarray
    Ti: np.ndarray
    method: str
    match_dc: bool
    n_unstable: int
    minimal_order: int
    factor_residuals: tuple | None = None
    rounding_term: float = 0.0

    def __repr__(self) -> str:
        return (
            f"BalancedTruncation(order={self.order}, n={self.T.shape[0]}, "
            f"n_unstable={self.n_unstable}, method={self.method!r}, match_dc={self.match_dc}, "
            f"lower_bound={self.lower_bound:.3g}, error_bound={self.error_bound:.3g})"
        )


# ------------------------------------------------------------------------ validation


def _check_method(method) -> str:
    if method not in BT_METHODS:
        raise InvalidArgumentError(f"`method` must be one of {BT_METHODS}; got {method!r}")
    return method


def _check_match_dc(match_dc) -> bool:
    if not isinstance(match_dc, bool | np.bool_):  # ("yes" or 1 read as True before)
        raise InvalidArgumentError(f"`match_dc` must be a bool; got {match_dc!r}")
    return bool(match_dc)


def _check_factor(name: str, L, n: int) -> np.ndarray:
    L = as_float_matrix(name, L)
    if L.shape[0] != n:
        raise ShapeError(f"`{name}` must have n = {n} rows; got shape {L.shape}")
    return L


# ------------------------------------------------------------------------------ HSVs

def hankel_singular_values(sys) -> np.ndarray:
    """Hankel singular values of a stable discrete-time system.

    Parameters
    ----------
    sys : DiscreteLTI, python-control system or tuple
        Schur-stable system with n states (see :func:`lti.system.as_discrete_system`).

    Returns
    -------
    ndarray, shape (n,)
        :math:`\\sigma_1 \\ge \\dots \\ge \\sigma_n \\ge 0`. For a sparse ``A``
        only the leading k = min(rank of the two low-rank factors) values, shape (k,),
        each a lower bound of the true one (see :func:`balanced_truncation`, Notes).

    Raises
    ------
    UnstableSystemError
        Spectral radius of ``A`` >= 1 (use :func:`balanced_truncation`, which separates
        the unstable part, and read ``result.hsv``).
    InvalidArgumentError
        `sys` is not a discrete-time system.

    Notes
    -----
    :math:`\\sigma_i = \\sqrt{\\lambda_i(PQ)}` are computed as the singular values of
    ``Lo^T Lc`` with ``P = Lc Lc^T``, ``Q = Lo Lo^T`` (both factors from one factored
    squared-Smith pass for small dense ``A``, else both Hammarling factors from one
    Schur decomposition of ``A``, :func:`lti.lyapunov.lyapunov_factor`), never as
    ``sqrt(eig(P Q))``: the small ones keep their absolute accuracy ``~ eps * sigma_1``
    instead of ``~ sqrt(eps) * sigma_1``. They are invariant under state transformations.

    Examples
    --------
    >>> import numpy as np
    >>> from lti import DiscreteLTI, hankel_singular_values
    >>> G = DiscreteLTI(np.diag([0.5, -0.2]), [[1.0], [1.0]], [[1.0, 0.0]])
    >>> hsv = hankel_singular_values(G)           # second state unobservable: sigma_2 = 0
    >>> bool(abs(hsv[0] - 1.0 / 0.75) < 1e-14 and hsv[1] < 1e-15)
    True
    """
    G = as_discrete_system(sys)
    if is_sparse(G.A):  # leading HSVs from low-rank ADI factors (lti.lowrank)
        Fc, Fo = _sparse_factors(G)
        return hsv_svd(Fc.Z, Fo.Z, min(Fc.rank, Fo.rank))[0]
    k = scale_exponent(G)  # max|B| max|C| beyond 2^+-300: exactly rescaled (lti._bt_scale)
    if k:
        with np.errstate(over="ignore", under="ignore"):  # beyond the float range: inf, 0
            return np.ldexp(hankel_singular_values(scaled_system(G, k)), 2 * k)
    try:
        F = stable_gramian_factors(G, in_schur_basis=True)  # same HSVs, better accuracy
    except UnstableSystemError as exc:
        raise UnstableSystemError(
            f"Hankel singular values: {exc} (balanced_truncation keeps the unstable part "
            "and reports the stable part's HSVs)"
        ) from None
    return hsv_svd(F.Lc, F.Lo, G.n)[0]


def _finish(G: DiscreteLTI, red: StableReduction, reduced: DiscreteLTI, T, Ti, nu: int,
            match_dc: bool, was_control: bool, cond: float = 1.0,
            extra: float = 0.0) -> BalancedTruncation:
    """The result object: ``red`` describes the stable part, ``reduced``/``T``/``Ti`` the
    whole reduced model (``nu`` unstable states appended; ``cond`` the conditioning of the
    stable/unstable decoupling, which scales the rounding term; ``extra`` what the Schur
    decomposition adds, lti._rounding)."""
    # the conditioning of the projection: rounding in Ti A T, Ti B, C T is amplified by it
    kappa = red.kappa if T is red.T and Ti is red.Ti else (  # red's: from projections
        fro_product(T, Ti) if T.size else 0.0)
    rounding = (red.rounding + red.gain_unit * kappa + extra) * cond
    error_bounds = red.bounds - red.rounding + rounding  # (n - nu + 1,): inf below nu
    if nu:
        error_bounds = np.concatenate([np.full(nu, np.inf), error_bounds])
    lower = 0.0 if red.order >= red.hsv.size else max(
        float(red.hsv[red.order]) - float(rounding[red.order]), 0.0)
    Gr = reduced.to_control() if was_control else reduced
    hsv = red.hsv
    for X in (hsv, error_bounds, T, Ti):
        X.setflags(write=False)  # a frozen result holds read-only arrays
    order = red.order + nu
    error_bound, rt = float(error_bounds[order]), float(rounding[red.order])
    return BalancedTruncation(
        reduced=Gr,
        hsv=hsv,
        order=order,
        error_bound=error_bound,
        lower_bound=lower,
        error_bounds=error_bounds,
        T=T,
        Ti=Ti,
        method=red.method,
        match_dc=bool(match_dc) and not red.spa_fallback,
        n_unstable=nu,
        minimal_order=red.minimal_order,
        rounding_term=rt,
    )


# ------------------------------------------- sparse A: low-rank factors (lti.lowrank)


def _sparse_factors(G: DiscreteLTI):
    return lowrank_gramian_factors(G.A, G.B, G.C)


def _sparse_balanced_truncation(G, order, tol, rel_tol, method, match_dc):
    """Square-root BT of a sparse ``G`` with its low-rank ADI factors (dense result)."""
    Fc, Fo = _sparse_factors(G)
    k = min(Fc.rank, Fo.rank)
    if isinstance(order, numbers.Integral) and not isinstance(order, bool) and order > k:
        raise InvalidArgumentError(
            f"`order` must be at most the rank resolved by the low-rank Gramian factors, "
            f"min(rank_c, rank_o) = {k}; got {order} (lti.lowrank.lowrank_gramian_factors "
            "with a smaller `tol` resolves more)"
        )
    rule = check_rule(order, tol, rel_tol, k)
    # the conditioning 1 / (1 - rho^2) of the noise floor and the rounding term from the
    # Ritz values of A (rho = 0 would let orders below the floor through, bounds broken)
    red = reduce_stable(G, Fc.Z, Fo.Z, rule, method, match_dc, stacklevel=4,
                        rho=Fc.radius_estimate, n_hsv=k)
    reduced = DiscreteLTI(red.A, red.B, red.C, red.D, G.dt)
    res = _finish(G, red, reduced, red.T, red.Ti, 0, match_dc, False)
    bounds = res.error_bounds[: k + 1]
    rho_r = reduced.spectral_radius() if reduced.n else 0.0
    if not rho_r < 1.0:  # G is stable, G - G_r is not: no finite bound holds
        warnings.warn(
            f"the reduced model is not Schur-stable (spectral radius {rho_r!r}): the low-rank "
            f"Gramian factors are too inaccurate (relative residuals {Fc.rel_residual:.3g}, "
            f"{Fo.rel_residual:.3g}); error_bound is inf (pass shifts or raise max_iter in "
            "lti.lowrank.lowrank_gramian_factors)", UserWarning, stacklevel=3)
        bounds = bounds.copy()
        bounds[res.order] = np.inf
        bounds.setflags(write=False)
    return replace(res, hsv=res.hsv[:k], error_bounds=bounds,
                   error_bound=float(bounds[res.order]),
                   minimal_order=min(res.minimal_order, k),
                   factor_residuals=(Fc.rel_residual, Fo.rel_residual))


def balanced_truncation(
    sys, *, order=None, tol=None, rel_tol=None, method: str = "auto", match_dc: bool = False
) -> BalancedTruncation:
    """Balanced truncation of a discrete-time system with certified error bounds.

    Parameters
    ----------
    sys : DiscreteLTI, control.StateSpace, control.TransferFunction or tuple
        System with n states, m inputs, p outputs (see
        :func:`lti.system.as_discrete_system`); a python-control system must be
        discrete (``dt`` True or a positive number). Unstable parts are kept (see Notes).
    order : int, optional
        Order r of the reduced model, ``n_unstable <= r <= n``. Exactly one of `order`,
        `tol` and `rel_tol` must be given.
    tol : float, optional
        Absolute error tolerance > 0: the smallest order whose bound
        ``2 sum_{i>r} sigma_i`` is ``<= tol`` is chosen.
    rel_tol : float, optional
        Relative HSV threshold in ``(0, 1]``: keep the stable states with
        ``sigma_i / sigma_1 >= rel_tol`` (moved up to the end of a tie, capped at
        ``minimal_order``); unstable states are always kept. The zero system keeps none.
    method : {"auto", "sr", "bfsr"}, optional
        ``"sr"``: square-root method, ``T`` and ``Ti`` are the leading columns and rows
        of a balancing transformation (the full-order result and the ``match_dc`` result
        are balanced, with both Gramians ``diag(hsv[:r])``; a truncated discrete-time
        balanced realisation is not exactly balanced itself, since
        ``A11 S1 A11^T - S1 + B1 B1^T = -A12 S2 A12^T``). ``"bfsr"``: Varga's
        balancing-free square-root method: the same two dominant subspaces, but
        ``T`` has orthonormal columns and ``Ti = (W^T T)^{-1} W^T`` (``W`` orthonormal):
        the reduced model is similar to the square-root one (same transfer function,
        same bounds) in coordinates that are not balanced; use it when a well-conditioned
        ``T`` is wanted. It is not more accurate than ``"sr"`` on the systems we measured
        (see Notes). ``"auto"`` is ``"sr"``.
    match_dc : bool, optional
        Singular-perturbation approximation instead of truncation: the discarded balanced
        states are frozen at their steady state, so ``G_r(1) = G(1)`` exactly; same bounds.
        An SPA model with a pole within rounding of the unit circle (no bound holds for it)
        is replaced by the truncated one, with a warning and ``result.match_dc = False``.

    Returns
    -------
    BalancedTruncation
        For a sparse ``A`` the reduced system is dense, ``hsv`` holds the k leading HSVs
        and ``factor_residuals`` the residuals of the low-rank factors (see Notes).
        ``reduced`` (same type as `sys`), ``hsv``, ``order``, ``error_bound``,
        ``lower_bound``, ``error_bounds`` (every order), projections ``T``, ``Ti``,
        ``method``, ``match_dc``, ``n_unstable``, ``minimal_order``.

    Raises
    ------
    InvalidArgumentError
        Not exactly one of `order`, `tol`, `rel_tol`; `order` not an integer in
        ``[n_unstable, n]``; `tol` not a positive finite number; `rel_tol` not in
        ``(0, 1]``; unknown `method`; a continuous-time python-control system.
    NonFiniteError
        NaN or inf in the system matrices.
    SolverError
        The stable/unstable decoupling failed, or ``I - A22`` is numerically singular
        (the singular-perturbation model is then undefined).

    Warns
    -----
    UserWarning
        When an explicit `order` splits tied HSVs (relative gap <= 1e-10); when the order
        had to be lowered to the minimal order (HSVs below the noise floor, see Notes, are
        zero in floating point: those states cannot be balanced and contribute nothing);
        when `tol` is met only by the full order; when `rel_tol` lies below the noise
        floor; when the SPA model was replaced by the truncated one (see `match_dc`).

    Notes
    -----
    With ``P = Lc Lc^T``, ``Q = Lo Lo^T`` (both factors from one Schur decomposition, or
    for a stable dense system with ``n <= 1024`` from one factored squared-Smith pass
    sharing the powers of ``A``, whose convergence also certifies stability) and
    ``Lo^T Lc = U Sigma V^T``, the square-root projections onto the r dominant states are

    .. math::

        T = L_c V_1 \\Sigma_1^{-1/2}, \\qquad T_i = \\Sigma_1^{-1/2} U_1^T L_o^T,
        \\qquad A_r = T_i A T,\\ B_r = T_i B,\\ C_r = C T,\\ D_r = D,

    and the bounds (Enns; Al-Saggaf & Franklin for discrete time) are

    .. math:: \\sigma_{r+1} \\le \\|G - G_r\\|_\\infty \\le 2 \\sum_{i=r+1}^{n} \\sigma_i .

    The balancing-free variant (A. Varga, "Efficient minimal realization procedure based
    on balancing", IMACS Symp. MCTS, Lille 1991) uses orthonormal bases ``Z = orth(Lc V1)``
    and ``W = orth(Lo U1)`` of the same dominant subspaces, ``T = Z``,
    ``Ti = (W^T Z)^{-1} W^T`` (one LU solve with the r x r matrix ``W^T Z``), so that
    ``T Ti`` is an oblique projector to working accuracy: ``||Ti T - I|| <= c eps ||Ti||
    ||T||``. The projections are formed in the real Schur coordinates of ``A`` (where
    the Hammarling factors are triangular) and mapped back with the Schur vectors:
    for strongly non-normal ``A`` the product of the factors with the Schur vectors
    rounds the directions of the small HSVs away, and the badly conditioned coordinates
    of BFSR then gave models with errors up to 41x the bound (issue 14); in Schur
    coordinates both methods stay inside it. With
    ``match_dc=True`` the discarded minimal coordinates ``x2`` obey
    ``x2 = A21 x1 + A22 x2 + B2 u``, giving
    ``A_r = A11 + A12 (I - A22)^{-1} A21`` and so on (discrete singular perturbation).

    Order selection: with `rel_tol`, the number of HSVs with ``sigma_i >= rel_tol
    sigma_1`` (ties and the noise floor handled as for `tol`); with `tol`, the smallest r
    with ``2 sum_{i>r} sigma_i <= tol``; the
    full order n always qualifies (bound 0), so this never fails, and a warning says so when
    only the full order does. A cut that would split tied HSVs (relative gap <= 1e-10) is
    moved up to the end of the tie (the bound only gets smaller); an explicit `order` is
    kept and a warning is given, because the kept subspace is then not unique. (In discrete
    time a split tie does not endanger stability: with ``A11 S1 A11^T - S1 =
    -B1 B1^T - A12 S2 A12^T``, an eigenvector ``A11^T x = lambda x`` with ``|lambda| = 1``
    would need ``B1^T x = 0`` and ``A12^T x = 0`` (``S2 > 0`` on the minimal part), making
    ``[x; 0]`` an uncontrollable eigenvector of the stable ``A`` with ``|lambda| = 1``; so a
    truncated minimal balanced realisation is always asymptotically stable, Al-Saggaf &
    Franklin 1987. The tie caveat of continuous time, Pernebo & Silverman 1982, does not
    carry over.) The computed HSVs are those of a nearby system; their absolute error is
    bounded by about ``eps ||Lc|| ||Lo||``, amplified by the conditioning
    ``1 / (1 - rho^2)`` of the Stein equations (``rho`` the spectral radius of the stable
    part, or its bound from the Smith iteration), and often much smaller (for a triangular
    ``A`` they can be correct to ``eps sigma_1``). HSVs at or below the certified floor
    ``n_s eps max(sigma_1, ||Lc||_2 ||Lo||_2 / (1 - rho^2))`` are treated as zero: they
    belong to a (numerically) non-minimal part that cannot be balanced reliably, and the
    order is capped at the number of larger ones (``minimal_order``). This is not SLICOT
    AB09AD's rule ``n_s eps sigma_1``; the two agree when ``||Lc|| ||Lo||`` is close to
    ``sigma_1`` and ``rho`` is not close to 1, and ours is larger (it drops HSVs AB09AD
    keeps) for strongly non-normal ``A``, where the smaller HSVs are not accurate: the
    issue-14 family broke the bound by 3e6x with AB09AD's floor. For an upper
    quasi-triangular ``A`` in standard form, or a lower triangular one (Jordan chains,
    bidiagonal and triangular systems), the Schur form is exact (``Z`` a signed
    permutation), with no decomposition error: there the floor is
    ``n_s eps sigma_1 / (1 - rho^2)`` and the Schur part of ``rounding_term`` is 0 (a chain
    of 8 lags ``1 / (z - 0.99)`` with unit coupling had ``||Lc|| ||Lo|| > 1e13 sigma_1``
    and kept no state at any order asked; measured: ``benchmarks/results/triangular_floor.md``).

    Sparse ``A`` (``scipy.sparse``, n up to ~1e5 and beyond): the factors are the low-rank
    ADI factors ``Zc``, ``Zo`` of :func:`lti.lowrank.lowrank_gramian_factors` (default
    tolerance 1e-10, then ADI cycles until the HSVs >= 1e-6 sigma_1 are estimated accurate
    to 1e-9; one sparse LU per shift, shared), the same projections give a dense
    reduced system, and ``hsv`` holds the k = min(rank_c, rank_o) values resolved. The
    noise floor and the rounding term take the conditioning ``1 / (1 - rho^2)`` from the
    largest Ritz value of ``A`` computed for the ADI shifts
    (``lti.lowrank.LowRankFactor.radius_estimate``), as the dense path takes it from
    the Schur form. What is certified: the ADI residuals are positive semidefinite
    (``A Pk A^T - Pk + B B^T = W W^T``), so ``Pk = Zc Zc^T <= P``, ``Qk <= Q`` and every
    computed HSV is a lower bound of the true one; hence ``lower_bound`` (``s_{r+1} <=
    sigma_{r+1}``) is certified for every reduced model of order r. ``error_bound``
    (``2 sum_{r<i<=k} s_i``) is the Enns bound evaluated on the computed HSVs: exact only
    for zero residuals, it misses the unresolved tail (HSVs beyond k and the gaps
    ``sigma_i - s_i``), which the Gramian errors ``P - Pk`` (the Gramian of ``(A, W)``, at
    most ``||W^T W|| sum_j ||A^j||^2``, i.e. ``||W^T W|| / (1 - rho^2)`` for normal ``A``)
    and ``Q - Qk`` control; the two relative residuals are therefore reported beside it in
    ``factor_residuals``. Check the error of the reduced model when a guarantee is needed.
    Factors far from converged (a warning says so) can even give a reduced model with a pole
    on or outside the unit circle; ``G - G_r`` is then unstable and ``error_bound`` is
    ``inf``, with a warning.

    Unstable systems: the real Schur form is reordered so that the eigenvalues with
    ``|lambda| < 1`` come first and a Sylvester equation decouples
    ``A ~ diag(A_s, A_u)``. The unstable part ``(A_u, B_u, C_u)`` is kept exactly and only
    the stable part is reduced, so ``hsv``, ``error_bound``, ``lower_bound`` and
    ``error_bounds`` describe the stable part; the error ``G - G_r`` equals the stable
    part's error and is therefore stable, with the same bounds.

    Examples
    --------
    >>> import numpy as np
    >>> from lti import DiscreteLTI, balanced_truncation, hinf_norm
    >>> rng = np.random.default_rng(0)
    >>> A = np.diag(0.9 ** np.arange(1, 9))          # n = 8, stable
    >>> G = DiscreteLTI(A, rng.standard_normal((8, 1)), rng.standard_normal((1, 8)))
    >>> res = balanced_truncation(G, order=3)
    >>> err = hinf_norm(G - res.reduced).value
    >>> bool(res.lower_bound <= err <= res.error_bound and res.reduced.n == 3)
    True
    """
    method = _check_method(method)
    match_dc = _check_match_dc(match_dc)
    was_control = is_control_system(sys)
    G = as_discrete_system(sys)
    if is_sparse(G.A):  # through low-rank ADI factors, dense reduced system
        return _sparse_balanced_truncation(G, order, tol, rel_tol, method, match_dc)
    rule = check_rule(order, tol, rel_tol, G.n)
    k = scale_exponent(G)  # max|B| max|C| beyond 2^+-300: exactly rescaled (lti._bt_scale)
    if k:
        return rescaled(G, k, lambda Gs, tol_s: balanced_truncation(
            Gs, order=order, tol=tol_s, rel_tol=rel_tol, method=method, match_dc=match_dc),
            rule.tol, was_control)
    try:  # stable: one Smith pass (small dense A) or one Schur form gives both factors
        F = stable_gramian_factors(G, in_schur_basis=True)
    except UnstableSystemError:
        F = None
    if F is not None:
        # on the Schur path the projections are formed in Schur coordinates
        # (T, Z^T B, C Z), where the factors are triangular, and mapped back with Z
        S = F.schur
        Gw = G if S is None else Realisation(S.T, *F.schur_BC, G.D)  # (Z^T B, C Z: F's)
        exact = S is not None and _exact_schur(S, G.A)  # Z a permutation: no Schur rounding
        red = reduce_stable(Gw, F.Lc, F.Lo, rule, method, match_dc, stacklevel=3, rho=F.rho,
                            exact_schur=exact)
        # red's fresh A, B, C taken over (no copies or second validation of them); D_r = D
        # is G's own read-only D, shared (an adapter's p x m zeros: no copy, no scan)
        reduced = DiscreteLTI._owned(red.A, red.B, red.C, red.D, G.dt,
                                     shared_D=red.D is G.D)
        T, Ti = (red.T, red.Ti) if S is None else (S.Z @ red.T, red.Ti @ S.Z.T)
        # what the Schur decomposition adds (lti._rounding; none on the Smith/modal paths,
        # nor when it is exact: a (permuted) quasi-triangular A, Z a signed permutation)
        extra = 0.0 if S is None or exact else schur_rounding(
            S.T, Gw.B, Gw.C, ROUNDING_FACTOR, S.complex_triangle, S.eigenvalues)  # (lazy)
        return _finish(G, red, reduced, T, Ti, 0, match_dc, was_control, extra=extra)
    split = split_unstable(G)
    nu = G.n - split.ns
    if rule.order is not None and rule.order < nu:
        raise InvalidArgumentError(
            f"`order` must be at least the number of unstable states ({nu}), which are kept; "
            f"got {rule.order}"
        )
    Gs = split.stable_part(G)
    Ss = SchurForm(split.As, np.eye(split.ns))  # (its triangle: rounding's NumPy path)
    Fs = stable_gramian_factors(Gs, schur=Ss)
    red = reduce_stable(Gs, Fs.Lc, Fs.Lo, rule.shifted(nu), method, match_dc, stacklevel=3,
                         rho=Fs.rho)
    Bu, Cu = split.V2 @ G.B, G.C @ split.W2
    reduced = DiscreteLTI(sla.block_diag(red.A, split.Au), np.vstack([red.B, Bu]),
                          np.hstack([red.C, Cu]), red.D, G.dt)
    T = np.hstack([split.W1 @ red.T, split.W2])
    Ti = np.vstack([red.Ti @ split.V1, split.V2])
    W = np.hstack([split.W1, split.W2])
    V = np.vstack([split.V1, split.V2])
    cond = max(1.0, float(np.linalg.norm(W) * np.linalg.norm(V)) / G.n)  # >= ||W|| ||W^-1|| / n
    extra = schur_rounding(Gs.A, Gs.B, Gs.C, ROUNDING_FACTOR, Ss.complex_triangle,
                           Ss.eigenvalues)
    return _finish(G, red, reduced, T, Ti, nu, match_dc, was_control, cond=cond, extra=extra)


def _exact_schur(S: SchurForm, A: np.ndarray) -> bool:
    """Whether the real Schur form is exact: ``Z`` a signed permutation and ``Z T Z^T = A``
    bit for bit (LAPACK returns an upper quasi-triangular ``A`` in standard form unchanged and
    reorders a lower triangular one: Jordan chains, bidiagonal and triangular systems in
    either state order). Products with such a ``Z`` are exact, so the decomposition has no
    backward error and ``Z^T B``, ``C Z`` are exact too. (A dense ``Z`` answers no from its
    first column.)"""
    n = A.shape[0]
    Z = S.Z
    if n == 0 or np.count_nonzero(Z[:, 0]) != 1:
        return n == 0
    nz = Z[Z != 0.0]
    if nz.size != n or not (np.abs(nz) == 1.0).all():
        return False
    return bool(np.array_equal((Z @ S.T) @ Z.T, A))


def balanced_truncation_from_factors(
    sys, Lc, Lo, *, order=None, tol=None, rel_tol=None, method: str = "auto",
    match_dc: bool = False,
) -> BalancedTruncation:
    """Balanced truncation with given Gramian factors (e.g. data-driven or empirical).

    Parameters
    ----------
    sys : DiscreteLTI, python-control system or tuple
        System with n states.
    Lc : array_like, shape (n, kc)
        Factor of the controllability Gramian used, ``P = Lc Lc^T`` (e.g. of an
        input-weighted, data-driven state covariance).
    Lo : array_like, shape (n, ko)
        Factor of the observability Gramian, ``Q = Lo Lo^T``.
    order, tol, rel_tol, method, match_dc
        As in :func:`balanced_truncation`.

    Returns
    -------
    BalancedTruncation
        As in :func:`balanced_truncation`, with ``n_unstable = 0``; ``hsv`` are the
        singular values of ``Lo^T Lc`` (padded with zeros to length n).

    Raises
    ------
    ShapeError
        A factor without n rows.
    NonFiniteError
        NaN or inf in a factor or in the system.
    InvalidArgumentError
        As in :func:`balanced_truncation`.

    Notes
    -----
    The same square-root / balancing-free / singular-perturbation algorithms as
    :func:`balanced_truncation`, with no stable/unstable split; the noise floor for zero
    HSVs is ``n eps max(sigma_1, ||Lc||_2 ||Lo||_2)`` (the factors are taken as given). The bounds
    ``error_bound`` and ``lower_bound`` are certified H-infinity bounds only when `Lc`
    and `Lo` factor the exact infinite-horizon Gramians of a stable `sys`; with other
    Gramians (input-weighted, finite-horizon, empirical) they are the same formulas
    applied to the generalised HSVs: they rank the states but bound nothing in general,
    neither the H-infinity error nor the error "in the corresponding weighted sense" (a
    finite-horizon reduction's T-step gain can exceed them). For certified weighted bounds
    use :func:`lti.weighted_balanced_truncation`, whose bounds concern its surrogate
    system.

    Examples
    --------
    >>> import numpy as np
    >>> from lti import DiscreteLTI, balanced_truncation, balanced_truncation_from_factors
    >>> G = DiscreteLTI(np.diag([0.9, 0.5, 0.1]), np.ones((3, 1)), np.ones((1, 3)))
    >>> from lti.lyapunov import lyapunov_factor
    >>> Lc = lyapunov_factor(G.A, G.B)                            # P = Lc Lc^T
    >>> Lo = lyapunov_factor(G.A, G.C.T, transpose=True)          # Q = Lo Lo^T
    >>> a = balanced_truncation_from_factors(G, Lc, Lo, order=1)
    >>> b = balanced_truncation(G, order=1)
    >>> bool(np.allclose(a.hsv, b.hsv, rtol=1e-12)
    ...      and abs(a.error_bound - b.error_bound) <= 1e-12 * b.error_bound)
    True
    """
    method = _check_method(method)
    match_dc = _check_match_dc(match_dc)
    was_control = is_control_system(sys)
    G = as_discrete_system(sys)
    Lc = _check_factor("Lc", Lc, G.n)
    Lo = _check_factor("Lo", Lo, G.n)
    rule = check_rule(order, tol, rel_tol, G.n)
    red = reduce_stable(G, Lc, Lo, rule, method, match_dc, stacklevel=3)
    reduced = DiscreteLTI(red.A, red.B, red.C, red.D, G.dt)
    return _finish(G, red, reduced, red.T, red.Ti, 0, match_dc, was_control)
