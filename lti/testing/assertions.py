"""Assertions for tests of model reduction: certified bounds and balanced realisations.

They raise ``AssertionError`` with the measured figures, so they work in pytest, in
hypothesis property tests and in plain scripts alike.
"""

from __future__ import annotations

import numbers

import numpy as np

from lti.exceptions import InvalidArgumentError
from lti.norms import as_discrete_system, hinf_norm
from lti.system import DiscreteLTI

__all__ = ["assert_balanced", "assert_reduction_within_bounds", "reduction_error"]

_EPS = np.finfo(np.float64).eps


def _check_rtol(name: str, value) -> float:
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or not (
        np.isfinite(value) and value >= 0
    ):
        raise InvalidArgumentError(f"`{name}` must be a finite number >= 0; got {value!r}")
    return float(value)


def _stable_parts(G: DiscreteLTI, Gr: DiscreteLTI, n_unstable: int):
    """The stable parts of G and of Gr (whose unstable states come last)."""
    if n_unstable == 0:
        return G, Gr
    from lti.stability import split_unstable

    split = split_unstable(G)
    if G.n - split.ns != n_unstable:
        raise AssertionError(
            f"`result.n_unstable` = {n_unstable} but the system has {G.n - split.ns} unstable "
            "states"
        )
    rs = Gr.n - n_unstable
    Gs = split.stable_part(G)
    Grs = DiscreteLTI(Gr.A[:rs, :rs], Gr.B[:rs], Gr.C[:, :rs], Gr.D, Gr.dt)
    return Gs, Grs


def reduction_error(sys, result) -> float:
    """H-infinity norm of the error of a reduction, ``||G - G_r||_inf``.

    Parameters
    ----------
    sys : DiscreteLTI or control.StateSpace
        The original system.
    result : BalancedTruncation
        Result of :func:`lti.balanced_truncation` for `sys`.

    Returns
    -------
    float
        The exact error (:func:`lti.hinf_norm`). With an unstable part (kept exactly in
        ``result.reduced``) it is the error of the stable parts, which is the whole error.

    Raises
    ------
    AssertionError
        The (stable part of the) reduced model is not Schur-stable.

    Examples
    --------
    The error lies within the bounds the result carries, ``sigma_{r+1} <= err <= 2 sum tail``:

    >>> import numpy as np
    >>> import lti
    >>> G = lti.DiscreteLTI(np.diag([0.9, 0.5, -0.3, 0.1]), [[1.0], [0.5], [-1.0], [2.0]],
    ...                     [[1.0, -1.0, 0.5, 0.3]])
    >>> res = lti.balanced_truncation(G, order=2)
    >>> err = reduction_error(G, res)
    >>> bool(res.lower_bound <= err <= res.error_bound)
    True
    """
    G = as_discrete_system(sys)
    Gr = as_discrete_system(result.reduced, "result.reduced")
    return _stable_error(*_stable_parts(G, Gr, int(result.n_unstable)))


def _stable_error(Gs: DiscreteLTI, Grs: DiscreteLTI) -> float:
    rho = Grs.spectral_radius()
    if not rho < 1.0:
        raise AssertionError(
            f"reduced model (order {Grs.n} + unstable) is not stable: spectral radius of its "
            "stable "
            f"part is {rho:.17g}"
        )
    return hinf_norm(Gs - Grs).value


def _default_atol(Gs: DiscreteLTI, hsv: np.ndarray) -> float:
    """Rounding level of HSVs, bounds and measured errors for the stable part Gs.

    ``1e-10 n max(sigma_1, ||B|| ||C||)`` plus ``100 n eps ||Lc|| ||Lo|| / (1 - rho^2)``:
    HSVs are accurate to about ``eps ||Lc|| ||Lo||`` absolutely, amplified by the
    conditioning ``~ 1 / (1 - rho^2)`` of the Stein equations when poles approach the unit
    circle -- far above a tiny HSV when the transfer function nearly cancels.
    """
    from lti.lyapunov import lyapunov_factor

    n = max(Gs.n, 1)
    s1 = float(hsv[0]) if hsv.size else 0.0
    atol = 1e-10 * n * max(s1, float(np.linalg.norm(Gs.B) * np.linalg.norm(Gs.C)))
    if Gs.n:
        Lc = lyapunov_factor(Gs.A, Gs.B)
        Lo = lyapunov_factor(Gs.A, Gs.C.T, transpose=True)
        rho = Gs.spectral_radius()
        atol += 100 * n * _EPS * np.linalg.norm(Lc, 2) * np.linalg.norm(Lo, 2) / (1 - rho**2)
    return float(atol)


def assert_reduction_within_bounds(sys, result, *, rtol: float = 1e-6, atol=None) -> float:
    """Assert ``lower_bound <= ||G - G_r||_inf <= error_bound`` for a reduction result.

    Parameters
    ----------
    sys : DiscreteLTI or control.StateSpace
        The original system G.
    result : BalancedTruncation
        Its reduction (anything with ``reduced``, ``lower_bound``, ``error_bound``,
        ``hsv`` and ``n_unstable``).
    rtol : float, optional
        Relative slack on both bounds (rounding in the reduction and the norm).
    atol : float, optional
        Absolute slack. The default is the rounding level of the problem,
        ``1e-10 n max(sigma_1, ||B||_F ||C||_F) + 100 n eps ||Lc|| ||Lo|| / (1 - rho^2)``
        (stable part; ``P = Lc Lc^T``, ``Q = Lo Lo^T``, ``rho`` its spectral radius): HSVs
        and frequency responses are accurate to about ``eps`` relative to those scales,
        not relative to each tiny HSV, and poles near the unit circle amplify that.

    Returns
    -------
    float
        The measured error ``||G - G_r||_inf``.

    Raises
    ------
    AssertionError
        The error lies outside ``[lower_bound (1 - rtol) - atol,
        error_bound (1 + rtol) + atol]``, or the reduced model is not stable.

    Examples
    --------
    >>> import numpy as np
    >>> from lti import DiscreteLTI, balanced_truncation
    >>> from lti.testing import assert_reduction_within_bounds
    >>> G = DiscreteLTI(np.diag([0.9, 0.5, -0.3, 0.1]), np.ones((4, 1)), np.ones((1, 4)))
    >>> res = balanced_truncation(G, order=2)
    >>> err = assert_reduction_within_bounds(G, res)
    >>> bool(res.lower_bound <= err <= res.error_bound)
    True
    """
    rtol = _check_rtol("rtol", rtol)
    G = as_discrete_system(sys)
    Gr = as_discrete_system(result.reduced, "result.reduced")
    Gs, Grs = _stable_parts(G, Gr, int(result.n_unstable))
    if atol is None:
        atol = _default_atol(Gs, np.asarray(result.hsv, dtype=np.float64))
    atol = _check_rtol("atol", atol)
    err = _stable_error(Gs, Grs)
    lo = float(result.lower_bound) * (1.0 - rtol) - atol
    hi = float(result.error_bound) * (1.0 + rtol) + atol
    if not lo <= err <= hi:
        raise AssertionError(
            f"reduction error ||G - Gr||_inf = {err:.17g} (order {result.order} of n = {G.n}) "
            f"outside [lower_bound, error_bound] = [{result.lower_bound:.17g}, "
            f"{result.error_bound:.17g}] (rtol {rtol:g}, atol {atol:.3g})"
        )
    return err


def assert_balanced(sys, hsv, *, rtol: float = 1e-8) -> None:
    """Assert that both Gramians of `sys` equal ``diag(hsv)`` (a balanced realisation).

    Parameters
    ----------
    sys : DiscreteLTI or control.StateSpace
        Stable system with n states.
    hsv : array_like, shape (n,)
        Expected Hankel singular values.
    rtol : float, optional
        Tolerance relative to ``max(hsv)`` on every entry of both Gramians.

    Raises
    ------
    AssertionError
        A Gramian differs from ``diag(hsv)`` by more than ``rtol * max(hsv)``.

    Examples
    --------
    >>> import numpy as np
    >>> from lti import DiscreteLTI, balanced_truncation
    >>> from lti.testing import assert_balanced
    >>> G = DiscreteLTI(np.diag([0.9, 0.5, -0.3]), np.ones((3, 1)), np.ones((1, 3)))
    >>> res = balanced_truncation(G, order=2, method="sr", match_dc=True)  # SPA stays balanced
    >>> assert_balanced(res.reduced, res.hsv[:2]) is None
    True
    """
    from lti.lyapunov import solve_discrete_lyapunov

    rtol = _check_rtol("rtol", rtol)
    G = as_discrete_system(sys)
    s = np.asarray(hsv, dtype=np.float64)
    if s.shape != (G.n,):
        raise AssertionError(f"`hsv` must have shape (n,) = ({G.n},); got {s.shape}")
    if G.n == 0:
        return
    scale = float(np.max(np.abs(s)))
    for name, X in (
        ("controllability", solve_discrete_lyapunov(G.A, G.B @ G.B.T)),
        ("observability", solve_discrete_lyapunov(G.A.T, G.C.T @ G.C)),
    ):
        dev = float(np.max(np.abs(X - np.diag(s))))
        if dev > rtol * scale:
            raise AssertionError(
                f"{name} Gramian differs from diag(hsv) by {dev:.3g} "
                f"(> rtol * max(hsv) = {rtol * scale:.3g})"
            )
