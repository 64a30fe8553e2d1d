"""Input-weighted (data-driven) balanced truncation with what each bound certifies.

The controllability Gramian is a state covariance (:mod:`lti.covariance`: data, or the
expectation under an input model); it is replaced by the nearest exact Lyapunov solution
so that the bounds hold for a surrogate system (see :func:`weighted_balanced_truncation`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from lti._validation import (
    as_float_matrix,
    check_context,
    check_stable,
    check_symmetric,
    sym_sqrt,
)
from lti.balanced import balanced_truncation_from_factors, hankel_singular_values
from lti.covariance import expected_state_covariance
from lti.exceptions import InvalidArgumentError, ShapeError
from lti.gramians import observability_gramian
from lti.lowrank import dense_only
from lti.lyapunov import lyapunov_factor, psd_factor
from lti.norms import hinf_norm
from lti.system import DiscreteLTI, as_discrete_system, is_control_system

__all__ = ["WeightedBalancedTruncation", "weighted_balanced_truncation"]


# ------------------------------------------------ input-weighted balanced truncation


@dataclass(frozen=True, eq=False)
class WeightedBalancedTruncation:
    """Result of :func:`weighted_balanced_truncation`: the reduced model and what is certified.

    Attributes
    ----------
    reduced : DiscreteLTI or control.StateSpace
        ``G_r = (Ti A T, Ti B, C T, D)`` (``D`` adjusted when ``match_dc=True``), r states;
        a python-control ``StateSpace`` (same ``dt``) when one was passed in.
    order : int
        Reduced order r.
    hsv : ndarray, shape (n,)
        Weighted Hankel singular values (those of `weighted_system`), descending.
    rounding_term : float
        The rounding term of the reduction of the surrogate ``weighted_system`` (as
        :attr:`lti.BalancedTruncation.rounding_term`); it is added to
        ``weighted_error_bound`` (and through it to ``shaped_error_bound`` and
        ``error_bound``) and subtracted from ``weighted_lower_bound`` and ``lower_bound``.
    weighted_error_bound : float
        :math:`2 \\sum_{i>r} \\tilde\\sigma_i` + ``rounding_term``. Certifies
        :math:`\\|\\tilde G - \\tilde G_r\\|_\\infty` where :math:`\\tilde G` is
        `weighted_system` and :math:`\\tilde G_r` its reduction by the same projection.
        With ``input_covariance=W`` and ``horizon=None``, :math:`\\tilde G = G W^{1/2}`,
        so this certifies :math:`\\|(G - G_r) W^{1/2}\\|_\\infty`.
    weighted_lower_bound : float
        :math:`\\tilde\\sigma_{r+1}` - ``rounding_term`` (at least 0): no system of order r
        approximates
        :math:`\\tilde G` better in the H-infinity norm.
    shaped_error_bound : float or None
        Certifies :math:`\\|(G - G_r) S\\|_\\infty` for the input model S
        (:math:`W^{1/2}` or the shaping filter F): ``output_gain * ||K S||_inf *
        weighted_error_bound`` with ``B = B~ K``. ``None`` for ``state_covariance``
        (no input model), ``inf`` when ``B`` is not in the range of ``B~``.
    error_bound : float
        Certifies the plain error :math:`\\|G - G_r\\|_\\infty` of *this* reduction:
        ``output_gain * input_gain * weighted_error_bound`` (``inf`` when a gain does not
        exist). Often much larger than the weighted bound: the reduction spends no effort
        on input directions the data never excite.
    lower_bound : float
        :math:`\\sigma_{r+1}(G)`, from the unweighted HSVs: a lower bound on
        :math:`\\|G - G_r\\|_\\infty` for every order-r model, this one included.
    unweighted_hsv : ndarray, shape (n,)
        Hankel singular values of G itself (exact infinite-horizon Gramians).
    unweighted_error_bound : float
        :math:`2 \\sum_{i>r} \\sigma_i(G)`: what *unweighted* balanced truncation to the
        same order would certify for its own reduced model. It does **not** apply to
        `reduced`; it is reported for comparison only.
    input_gain, output_gain : float
        :math:`\\|K\\|_2` with :math:`B = \\tilde B K` and :math:`\\|M\\|_2` with
        :math:`C = M \\tilde C` (1 when no modification is needed on that side).
    input_model : str
        ``"state_covariance"``, ``"input_covariance"`` or ``"shaping_filter"``.
    horizon : int or None
        Context length used for the Gramians (``None``: infinite).
    modified : bool
        Whether a Gramian was replaced by its nearest certified one (see Notes of
        :func:`weighted_balanced_truncation`).
    certified : bool
        False only for ``gramian="enns"`` with an indefinite Lyapunov residual; the
        bounds are then ``nan``.
    weighted_system : DiscreteLTI
        :math:`\\tilde G = (A, \\tilde B, \\tilde C, 0)` whose exact Gramians were balanced.
    controllability_gramian, observability_gramian : ndarray, shape (n, n)
        The Gramians that were balanced.
    T : ndarray, shape (n, r)
        Right projection (reduced state to full state).
    Ti : ndarray, shape (r, n)
        Left projection, ``Ti @ T = I``.
    """

    reduced: DiscreteLTI
    order: int
    hsv: np.ndarray
    weighted_error_bound: float
    weighted_lower_bound: float
    shaped_error_bound: float | None
    error_bound: float
    lower_bound: float
    unweighted_hsv: np.ndarray
    unweighted_error_bound: float
    input_gain: float
    output_gain: float
    input_model: str
    horizon: int | None
    modified: bool
    certified: bool
    rounding_term: float
    weighted_system: DiscreteLTI
    controllability_gramian: np.ndarray
    observability_gramian: np.ndarray
    T: np.ndarray
    Ti: np.ndarray


def _certified_side(A: np.ndarray, X: np.ndarray, M: np.ndarray, gramian: str):
    """Lyapunov-consistent replacement of a candidate Gramian ``X`` (controllability form).

    Returns ``(factor, Bt, K, modified, certified)``: ``Bt`` with ``factor factor^T`` the
    solution of ``A P A^T - P + Bt Bt^T = 0``, ``K`` with ``Bt K = M`` (None if none).
    """
    n = A.shape[0]
    eps = np.finfo(np.float64).eps
    R = X - A @ X @ A.T
    R = 0.5 * (R + R.T)
    lam, V = np.linalg.eigh(R)
    scale = max(float(np.max(np.abs(lam), initial=0.0)), np.finfo(np.float64).tiny)
    indefinite = bool(lam.min(initial=0.0) < -1e3 * n * eps * scale)
    keep = np.abs(lam) > n * eps * scale
    Bt = V[:, keep] * np.sqrt(np.abs(lam[keep]))  # (n, k): Bt Bt^T = |R|
    if gramian == "enns":
        factor = psd_factor(X)
        certified = not indefinite
    else:
        factor = lyapunov_factor(A, Bt) if Bt.shape[1] else np.zeros((n, 0))
        certified = True
    K = (V[:, keep] / np.sqrt(np.abs(lam[keep]))).T @ M  # least squares Bt^+ M
    if np.linalg.norm(Bt @ K - M) > 1e-8 * max(np.linalg.norm(M), np.finfo(np.float64).tiny):
        K = None
    return factor, Bt, K, indefinite and gramian != "enns", certified


def _gain_upper_bound(F: DiscreteLTI) -> float:
    """Certified upper bound of ``||F||_inf`` (level-set H-infinity norm, tolerance added)."""
    tol = 1e-10
    return float(hinf_norm(F, tol=tol).value) * (1.0 + 2.0 * tol)


def weighted_balanced_truncation(
    sys,
    *,
    state_covariance=None,
    input_covariance=None,
    shaping_filter=None,
    horizon=None,
    burn_in=0,
    order=None,
    tol=None,
    rel_tol=None,
    method="auto",
    match_dc=False,
    gramian="certified",
) -> WeightedBalancedTruncation:
    """Balanced truncation with an input-weighted (data-driven) controllability Gramian.

    Parameters
    ----------
    sys : DiscreteLTI, python-control system or tuple
        Schur-stable system G with n states, m inputs, p outputs (a python-control system
        gives a python-control ``reduced`` with the same ``dt``).
    state_covariance : array_like, shape (n, n), optional
        Data-driven Gramian ``E[s s^T]`` (:func:`state_covariance`,
        :class:`StateCovarianceAccumulator`).
    input_covariance : array_like, shape (m, m), optional
        Inputs modelled as white with covariance W.
    shaping_filter : DiscreteLTI, python-control system or tuple, optional
        Inputs modelled as ``u = F w``, w white with unit covariance (F has p = m and the
        sampling time of `sys`, or ``dt=True``).
    horizon : int, optional
        Context length T: finite-horizon Gramians (position-averaged controllability as in
        :func:`expected_state_covariance`, ``sum_{k<T}`` observability). ``None``:
        infinite horizon. With `state_covariance` it selects the observability Gramian.
    burn_in : int, optional
        As in :func:`expected_state_covariance` (model-based inputs, finite horizon).
    order, tol, rel_tol : optional
        Exactly one: the reduced order, an absolute tolerance on the weighted bound
        ``2 sum_{i>r} sigma~_i``, or a relative threshold ``sigma~_i / sigma~_1 >= rel_tol``
        on the weighted HSVs, as in :func:`lti.balanced.balanced_truncation_from_factors`.
    method : str, optional
        Projection method, passed through.
    match_dc : bool, optional
        Singular perturbation (matches the steady-state gain) instead of truncation.
    gramian : {"certified", "enns"}, optional
        ``"certified"`` (default) replaces the candidate Gramian by the nearest one that is
        an exact Lyapunov solution (see Notes) so that every bound holds; ``"enns"`` uses
        it as given (Enns 1984); its bounds are then reported only when that is already
        the case.

    Returns
    -------
    WeightedBalancedTruncation
        Reduced model, weighted and unweighted HSVs, and each bound with what it certifies.

    Raises
    ------
    InvalidArgumentError
        Not exactly one of `state_covariance`, `input_covariance`, `shaping_filter`;
        bad `gramian`; a `state_covariance` that is not positive semidefinite.
    ShapeError, NotSymmetricError, UnstableSystemError
        Bad Gramian or system.

    Notes
    -----
    Let :math:`\\hat P` be the weighted controllability Gramian (data, or
    :func:`expected_state_covariance` of the input model) and :math:`Q` the exact
    observability Gramian. Balanced truncation bounds need Gramians that solve Lyapunov
    equations. Write :math:`R = \\hat P - A \\hat P A^T = V \\Lambda V^T`. If
    :math:`R \\succeq 0`, :math:`\\hat P` is the Gramian of :math:`(A, \\tilde B)` with
    :math:`\\tilde B \\tilde B^T = R`; otherwise (sampling noise, a dynamic shaping filter,
    a finite horizon) it is replaced by the solution :math:`\\bar P` of
    :math:`A \\bar P A^T - \\bar P + V |\\Lambda| V^T = 0` (Wang, Sreeram and Liu 1999),
    and likewise on the observability side for a finite horizon, giving
    :math:`\\tilde C`. With :math:`\\tilde G = (A, \\tilde B, \\tilde C, 0)`,
    :math:`B = \\tilde B K` and :math:`C = M \\tilde C`, the reduction by the same
    projection satisfies :math:`G - G_r = M (\\tilde G - \\tilde G_r) K` (the feedthrough
    cancels, also with ``match_dc``), hence the certified chain

    .. math::

        \\tilde\\sigma_{r+1} \\le \\|\\tilde G - \\tilde G_r\\|_\\infty
            \\le 2 \\sum_{i>r} \\tilde\\sigma_i, \\qquad
        \\|(G - G_r) S\\|_\\infty \\le \\|M\\|_2 \\, \\|K S\\|_\\infty
            \\, 2 \\sum_{i>r} \\tilde\\sigma_i, \\qquad
        \\sigma_{r+1}(G) \\le \\|G - G_r\\|_\\infty \\le \\|M\\|_2 \\|K\\|_2
            \\, 2 \\sum_{i>r} \\tilde\\sigma_i .

    For white inputs with covariance W and an infinite horizon, :math:`R = B W B^T`,
    :math:`\\tilde B = B W^{1/2}`, :math:`\\tilde G = G W^{1/2}`, :math:`K S = I`: the
    weighted bound is the plain balanced-truncation bound of the input-shaped system
    :math:`G W^{1/2}`. What is **not** certified: the unweighted bound
    :math:`2 \\sum_{i>r} \\sigma_i(G)` (reported as `unweighted_error_bound`) belongs to
    unweighted truncation and does not bound this reduction; and no bound speaks of
    inputs outside the model (a weighted reduction may be poor for input directions or
    frequencies the data never excite, which `error_bound` quantifies).

    References
    ----------
    D. Enns, "Model reduction with balanced realizations: an error bound and a frequency
    weighted generalization", CDC 1984. G. Wang, V. Sreeram, W. Q. Liu, "A new
    frequency-weighted balanced truncation method and an error bound", IEEE TAC 44 (1999).

    Examples
    --------
    >>> import numpy as np
    >>> from lti import DiscreteLTI
    >>> G = DiscreteLTI(np.diag([0.9, 0.5, -0.3]), np.eye(3)[:, :2], np.ones((1, 3)))
    >>> W = np.diag([1.0, 1e-4])                    # the second input is nearly silent
    >>> res = weighted_balanced_truncation(G, input_covariance=W, order=1)
    >>> bool(res.weighted_error_bound < res.unweighted_error_bound)
    True
    """
    was_control = is_control_system(sys)  # python-control in -> python-control out
    sys = as_discrete_system(sys)
    dense_only("weighted_balanced_truncation()", sys)
    given = [
        name
        for name, value in (
            ("state_covariance", state_covariance),
            ("input_covariance", input_covariance),
            ("shaping_filter", shaping_filter),
        )
        if value is not None
    ]
    if len(given) != 1:
        raise InvalidArgumentError(
            "give exactly one of `state_covariance`, `input_covariance`, `shaping_filter`; "
            f"got {given or 'none'}"
        )
    if gramian not in ("certified", "enns"):
        raise InvalidArgumentError(f"`gramian` must be 'certified' or 'enns'; got {gramian!r}")
    if shaping_filter is not None:  # the series F -> G needs one sampling time (True: any)
        F_dt = as_discrete_system(shaping_filter, "shaping_filter").dt
        if F_dt is not True and sys.dt is not True and F_dt != sys.dt:
            raise InvalidArgumentError(
                f"`shaping_filter` has sampling time dt = {F_dt}, `sys` dt = {sys.dt}: the "
                "filter must run at the system's rate"
            )
    horizon, burn_in = check_context(horizon, burn_in)
    A, B, C = np.asarray(sys.A), np.asarray(sys.B), np.asarray(sys.C)
    # the Gramian solvers' margin: 1 - 1e-16 is refused here, not inside a solver
    check_stable("sys", A, rho=sys.spectral_radius())
    n = sys.n
    model = given[0]

    # ---- controllability side
    shaping_gain = None  # ||K S||
    if model == "state_covariance":
        P = as_float_matrix("state_covariance", state_covariance)
        if P.shape != (n, n):
            raise ShapeError(f"`state_covariance` must have shape (n, n) = {(n, n)}; got {P.shape}")
        check_symmetric("state_covariance", P, rtol=1e-10)
        P = 0.5 * (P + P.T)
        lam_min = float(np.linalg.eigvalsh(P).min(initial=0.0))
        scale = max(float(np.max(np.abs(P), initial=0.0)), np.finfo(np.float64).tiny)
        if lam_min < -1e3 * n * np.finfo(np.float64).eps * scale:  # sym_sqrt's tolerance
            raise InvalidArgumentError(
                "`state_covariance` must be positive semidefinite (a covariance); got "
                f"eigenvalue {lam_min:.3g} (max|entry| {scale:.3g})"
            )
    else:
        P = expected_state_covariance(
            A, B, horizon=horizon, burn_in=burn_in,
            input_covariance=input_covariance, shaping_filter=shaping_filter,
        )
    if model == "input_covariance" and horizon is None:
        # exact: R = B W B^T, Bt = B W^{1/2}, (G - G_r) W^{1/2} = Gt - Gt_r
        W = as_float_matrix("input_covariance", input_covariance)
        Wh = sym_sqrt("input_covariance", W)
        Bt = B @ Wh
        Lc = lyapunov_factor(A, Bt)
        w = np.linalg.eigvalsh(W)
        input_gain = float(1.0 / np.sqrt(w.min())) if w.min() > 0 else np.inf
        modified_c, certified_c, shaping_gain = False, True, 1.0
    else:
        Lc, Bt, K, modified_c, certified_c = _certified_side(A, P, B, gramian)
        input_gain = float(np.linalg.norm(K, 2)) if K is not None else np.inf
        if model == "input_covariance":
            Wh = sym_sqrt("input_covariance", as_float_matrix("input_covariance",
                                                               input_covariance))
            shaping_gain = float(np.linalg.norm(K @ Wh, 2)) if K is not None else np.inf
        elif model == "shaping_filter":  # (a tuple or control system, as accepted above)
            F = as_discrete_system(shaping_filter, "shaping_filter")
            shaping_gain = (
                _gain_upper_bound(DiscreteLTI(F.A, F.B, K @ F.C, K @ F.D))
                if K is not None else np.inf
            )

    # ---- observability side
    if horizon is None:
        Lo = observability_gramian(sys, factor=True)
        Q = Lo @ Lo.T
        Ct, output_gain, modified_o, certified_o = C, 1.0, False, True
    else:
        Q = observability_gramian(sys, horizon=horizon)
        Lo_t, CtT, Mt, modified_o, certified_o = _certified_side(A.T, Q, C.T, gramian)
        Lo, Ct = Lo_t, CtT.T
        output_gain = float(np.linalg.norm(Mt, 2)) if Mt is not None else np.inf
        Q = Lo @ Lo.T if gramian == "certified" else Q
    Pc = Lc @ Lc.T

    bt = balanced_truncation_from_factors(
        sys, Lc, Lo, order=order, tol=tol, rel_tol=rel_tol, method=method, match_dc=match_dc
    )
    r, hsv = int(bt.order), np.asarray(bt.hsv)
    certified = certified_c and certified_o
    nan = float("nan")
    rt = float(bt.rounding_term)
    weighted = float(2.0 * np.sum(hsv[r:]) + rt) if certified else nan
    weighted_lower = max(float(hsv[r]) - rt, 0.0) if r < hsv.size else 0.0
    if not certified:
        weighted_lower = nan

    plain_hsv = hankel_singular_values(sys)

    def times(*gains):
        if not certified:
            return nan
        if weighted == 0.0:
            return 0.0
        return float(np.prod(gains) * weighted)

    return WeightedBalancedTruncation(
        reduced=bt.reduced.to_control() if was_control else bt.reduced,
        order=r,
        hsv=hsv,
        weighted_error_bound=weighted,
        weighted_lower_bound=weighted_lower,
        shaped_error_bound=None if shaping_gain is None else times(output_gain, shaping_gain),
        error_bound=times(output_gain, input_gain),
        lower_bound=max(float(plain_hsv[r]) - rt, 0.0) if r < n else 0.0,
        rounding_term=rt,
        unweighted_hsv=plain_hsv,
        unweighted_error_bound=float(2.0 * np.sum(plain_hsv[r:])),
        input_gain=input_gain,
        output_gain=output_gain,
        input_model=model,
        horizon=horizon,
        modified=bool(modified_c or modified_o),
        certified=certified,
        weighted_system=DiscreteLTI(A, Bt, Ct, None, sys.dt),
        controllability_gramian=0.5 * (Pc + Pc.T) if gramian == "certified" else P,
        observability_gramian=0.5 * (Q + Q.T),
        T=np.asarray(bt.T),
        Ti=np.asarray(bt.Ti),
    )

