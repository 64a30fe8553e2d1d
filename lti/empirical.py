"""Empirical Gramians of black-box discrete-time systems from simulated trajectories.

The system is given either as a :class:`~lti.system.DiscreteLTI` or as a batched step
function ``step(X, U) -> (X_next, Y)`` of

.. math:: x_{k+1} = f(x_k, u_k), \\qquad y_k = g(x_k, u_k),

with ``X`` of shape (K, n), ``U`` of shape (K, m) and ``Y`` of shape (K, p): K
trajectories advance together, so one call per time step drives every perturbation
experiment at once. The Gramians follow Lall, Marsden and Glavaski (2002) and the emgr
framework (Himpe 2018): impulse responses over a set of input scales and directions for
controllability, initial-state perturbations for observability, and the product of both
for the cross Gramian of square systems. Trajectories are centred on the *nominal*
trajectory (the unperturbed run from ``(x0, u0)``), which makes the result exact for
linear and affine systems at any scale.
"""

from __future__ import annotations

import numbers
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from lti._validation import (
    as_float_matrix,
    as_float_vector,
    check_square,
    check_stable,
    spectral_radius,
    stability_margin,
    unstable_message,
)
from lti.exceptions import (
    InvalidArgumentError,
    NonFiniteError,
    ShapeError,
    SolverError,
    UnstableSystemError,
)
from lti.lowrank import dense_only
from lti.system import DiscreteLTI, as_discrete_system, is_control_system

__all__ = ["EmpiricalGramians", "empirical_gramians", "lti_horizon"]

_KINDS = ("controllability", "observability", "cross")
_SIGNS = {"signed": (1.0, -1.0), "positive": (1.0,)}


@dataclass(frozen=True, eq=False)
class EmpiricalGramians:
    """Result of :func:`empirical_gramians`.

    Attributes
    ----------
    controllability : ndarray, shape (n, n) or None
        Empirical controllability Gramian (``None`` when not requested).
    observability : ndarray, shape (n, n) or None
        Empirical observability Gramian (``None`` when not requested).
    cross : ndarray, shape (n, n) or None
        Empirical cross Gramian (``None`` when not requested or when m != p).
    horizon : int
        Number of time steps simulated (the k-sums run over k = 0, ..., horizon - 1).
    converged : bool
        For an infinite-horizon request (``horizon=None``): whether the stopping test was
        met (always True for a finite horizon and for a DiscreteLTI).
    scales : ndarray, shape (s,)
        Input perturbation scales used.
    state_scales : ndarray, shape (s,)
        Initial-state perturbation scales used.
    signs : tuple of float
        Perturbation signs (``(1, -1)`` for ``directions="signed"``).
    trajectories : int
        Number of trajectories simulated, the nominal one included.
    """

    controllability: np.ndarray | None
    observability: np.ndarray | None
    cross: np.ndarray | None
    horizon: int
    converged: bool
    scales: np.ndarray
    state_scales: np.ndarray
    signs: tuple
    trajectories: int


def lti_horizon(A, *, rtol: float = 1e-13, max_horizon: int = 10_000_000) -> int:
    """Smallest horizon ``T`` with ``||A^T||_2^2 <= rtol`` (relative Gramian tail below rtol).

    Parameters
    ----------
    A : array_like, shape (n, n)
        Schur-stable state matrix.
    rtol : float, optional
        Relative tolerance on the truncated tail, in (0, 1).
    max_horizon : int, optional
        Give up (``SolverError``) beyond this many steps.

    Returns
    -------
    int
        The horizon T (at least 1).

    Notes
    -----
    The finite-horizon Gramians :math:`P_T = \\sum_{k<T} A^k B B^T A^{kT}` satisfy
    :math:`P - P_T = A^T P (A^T)^T`, so
    :math:`\\|P - P_T\\|_2 \\le \\|A^T\\|_2^2 \\|P\\|_2`; the same holds for the
    observability and the cross Gramian. The test uses the computed norm of
    :math:`A^T`, not the spectral radius alone, so transient growth of non-normal
    matrices is accounted for.

    Examples
    --------
    >>> import numpy as np
    >>> A = np.array([[0.9, 5.0], [0.0, 0.5]])
    >>> T = lti_horizon(A, rtol=1e-12)
    >>> bool(np.linalg.norm(np.linalg.matrix_power(A, T), 2) ** 2 <= 1e-12)
    True
    """
    A = as_float_matrix("A", A)  # typed errors: sparse, non-finite, complex, not 2-D
    rtol = _check_rtol(rtol)
    n = check_square("A", A)
    if n == 0:
        return 1
    # the solvers' rounding margin: 1 - 1e-16 is a pole on the circle, not a slow decay
    rho = check_stable("A", A, rho=spectral_radius(A))

    def ok(T: int) -> bool:
        return np.linalg.norm(np.linalg.matrix_power(A, T), 2) ** 2 <= rtol

    if rho == 0.0:  # nilpotent: A^n = 0
        T = 1
        while not ok(T):
            T += 1
        return T
    too_slow = SolverError(
        f"`A` decays too slowly: ||A^T||^2 > rtol={rtol:.3g} for T up to "
        f"max_horizon={max_horizon} (spectral radius {rho:.15g})"
    )
    T = max(1, int(np.ceil(np.log(rtol) / (2.0 * np.log(rho)))))
    if T > max_horizon:
        raise too_slow
    hi = T
    while not ok(hi):
        hi = int(np.ceil(hi * 1.25)) + 1
        if hi > max_horizon:
            raise too_slow
    lo = 0 if hi == T else max(T, int(hi / 1.25) - 1)
    while hi - lo > 1:  # smallest T in (lo, hi] that passes
        mid = (lo + hi) // 2
        if ok(mid):
            hi = mid
        else:
            lo = mid
    return hi


def _check_rtol(rtol) -> float:
    if isinstance(rtol, bool) or not isinstance(rtol, numbers.Real) or not 0.0 < rtol < 1.0:
        raise InvalidArgumentError(f"`rtol` must be a number in (0, 1); got {rtol!r}")
    return float(rtol)


def _check_count(name: str, value, *, minimum: int = 1) -> int:
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < minimum:
        raise InvalidArgumentError(f"`{name}` must be an integer >= {minimum}; got {value!r}")
    return int(value)


def _check_scales(name: str, scales) -> np.ndarray:
    s = np.atleast_1d(np.asarray(scales, dtype=np.float64))
    if s.ndim != 1 or s.size == 0:
        raise ShapeError(f"`{name}` must be a non-empty 1-D sequence; got shape {s.shape}")
    if not np.all(np.isfinite(s)) or np.any(s <= 0):
        raise InvalidArgumentError(f"`{name}` must be positive and finite; got {s.tolist()}")
    return s


def _lti_step(sys: DiscreteLTI) -> Callable:
    AT, BT, CT, DT = sys.A.T, sys.B.T, sys.C.T, sys.D.T

    def step(X, U):
        return X @ AT + U @ BT, X @ CT + U @ DT

    return step


def empirical_gramians(
    system,
    *,
    horizon: int | None = None,
    scales=(1.0,),
    state_scales=None,
    directions: str = "signed",
    which: Sequence[str] = _KINDS,
    x0=None,
    u0=None,
    n: int | None = None,
    m: int | None = None,
    rtol: float = 1e-13,
    chunk: int = 256,
    max_horizon: int = 1_000_000,
) -> EmpiricalGramians:
    """Empirical controllability, observability and cross Gramians from trajectories.

    Parameters
    ----------
    system : DiscreteLTI, python-control or scipy.signal system, tuple, or callable
        A :class:`~lti.system.DiscreteLTI` (or a discrete python-control or scipy.signal
        system, or a tuple ``(A, B, C[, D])``, converted by
        :func:`lti.system.as_discrete_system`), or a batched step function
        ``step(X, U) -> (X_next, Y)`` with ``X`` shape (K, n), ``U`` shape (K, m),
        ``X_next`` shape (K, n) and ``Y`` shape (K, p), ``Y`` being the output at the
        *current* state ``X`` (``y_k = g(x_k, u_k)``). It must not modify its arguments:
        they are passed read-only, and an in-place write raises InvalidArgumentError.
    horizon : int, optional
        Number of steps T; the Gramians are the finite-horizon sums over k = 0..T-1.
        ``None`` asks for the infinite horizon: for a DiscreteLTI, T is chosen by
        :func:`lti_horizon` so that the truncated tail is below `rtol` relative; for a
        step function, trajectories are extended by `chunk` steps until the energy of the
        last chunk is below `rtol` times the accumulated energy.
    scales : sequence of float, shape (s,), optional
        Positive input-impulse scales ``c``.
    state_scales : sequence of float, shape (s,), optional
        Positive initial-state perturbation scales ``d``; defaults to `scales`. Must have
        the same length as `scales` (the cross Gramian pairs them).
    directions : {"signed", "positive"}, optional
        Perturb along ``+e_i`` and ``-e_i`` (cancels even-order nonlinear terms) or
        ``+e_i`` only.
    which : sequence of str, optional
        Subset of ``("controllability", "observability", "cross")``.
    x0 : array_like, shape (n,), optional
        Operating-point state (default zeros).
    u0 : array_like, shape (m,), optional
        Operating-point input, held constant (default zeros).
    n, m : int, optional
        State and input dimensions; required for a step function, ignored otherwise.
    rtol : float, optional
        Relative tail tolerance of the infinite horizon.
    chunk : int, optional
        Steps per extension for an infinite-horizon step function.
    max_horizon : int, optional
        Longest simulation allowed for the infinite horizon.

    Returns
    -------
    EmpiricalGramians
        The requested Gramians (n x n), the horizon used and the perturbation settings.

    Raises
    ------
    InvalidArgumentError
        Bad option values, `n`/`m` missing for a step function, or a step function that
        writes into its arguments ``X``, ``U`` (the deviations would be wrong).
    ShapeError
        Outputs of `system` or `x0`/`u0` of the wrong shape.
    NonFiniteError
        Non-finite trajectories.
    UnstableSystemError
        Infinite horizon for an unstable DiscreteLTI.
    SolverError
        Infinite horizon not reached within `max_horizon` steps.

    Notes
    -----
    Let :math:`\\bar x_k, \\bar y_k` be the nominal trajectory from :math:`(x_0, u_0)`,
    :math:`\\mathcal S` the pairs (scale index l, sign s). Controllability experiments
    apply :math:`u_0 + s c_l e_i` at k = 0 only; observability experiments start from
    :math:`x_0 + s d_l e_j`. With the normalised deviations
    :math:`\\xi^{li s}_k = (x^{lis}_{k+1} - \\bar x_{k+1}) / (s c_l)` (columns of
    :math:`X^{ls}_k \\in \\mathbb R^{n\\times m}`) and
    :math:`\\eta^{ljs}_k = (y^{ljs}_k - \\bar y_k) / (s d_l)` (columns of
    :math:`Y^{ls}_k \\in \\mathbb R^{p\\times n}`),

    .. math::

        W_c = \\frac{1}{|\\mathcal S|} \\sum_{(l,s)} \\sum_{k<T} X^{ls}_k X^{ls\\,T}_k,\\quad
        W_o = \\frac{1}{|\\mathcal S|} \\sum_{(l,s)} \\sum_{k<T} Y^{ls\\,T}_k Y^{ls}_k,\\quad
        W_x = \\frac{1}{|\\mathcal S|} \\sum_{(l,s)} \\sum_{k<T} X^{ls}_k Y^{ls}_k.

    For a linear (or affine) system :math:`X^{ls}_k = A^k B` and
    :math:`Y^{ls}_k = C A^k`, so these equal the exact finite-horizon Gramians
    :math:`\\sum_{k<T} A^k B B^T A^{kT}`, :math:`\\sum_{k<T} A^{kT} C^T C A^k` and
    :math:`\\sum_{k<T} A^k B C A^k` for every scale, up to rounding. This is the
    discrete-time form of Lall, Marsden and Glavaski (2002) with the orthogonal direction
    set :math:`\\{I, -I\\}` and centring on the nominal trajectory (emgr's choice of a
    steady state generalised to any operating point).

    References
    ----------
    S. Lall, J. E. Marsden, S. Glavaski, "A subspace approach to balanced truncation
    for model reduction of nonlinear control systems", Int. J. Robust Nonlinear Control
    12 (2002). C. Himpe, "emgr -- the Empirical Gramian Framework", Algorithms 11 (2018).

    Examples
    --------
    >>> import numpy as np, scipy.linalg as sla
    >>> from lti import DiscreteLTI
    >>> G = DiscreteLTI([[0.5, 0.2], [0.0, -0.4]], [[1.0], [0.5]], [[1.0, -1.0]])
    >>> E = empirical_gramians(G, scales=(0.01, 10.0))
    >>> P = sla.solve_discrete_lyapunov(G.A, G.B @ G.B.T)
    >>> bool(np.linalg.norm(E.controllability - P) <= 1e-12 * np.linalg.norm(P))
    True
    """
    kinds = _check_which(which)
    signs = _SIGNS.get(directions) if isinstance(directions, str) else None
    if signs is None:
        raise InvalidArgumentError(
            f"`directions` must be 'signed' or 'positive'; got {directions!r}"
        )
    c = _check_scales("scales", scales)
    d = c if state_scales is None else _check_scales("state_scales", state_scales)
    if d.size != c.size:
        raise ShapeError(
            f"`state_scales` must have the same length as `scales` ({c.size}); got {d.size}"
        )
    rtol = _check_rtol(rtol)
    chunk = _check_count("chunk", chunk)
    max_horizon = _check_count("max_horizon", max_horizon)
    if horizon is not None:
        horizon = _check_count("horizon", horizon)

    if (is_control_system(system)  # callable (it evaluates G(s)): not a step function
            or isinstance(system, tuple) or type(system).__module__.startswith("scipy.signal")):
        system = as_discrete_system(system, "system")  # the rule of every entry point
    if isinstance(system, DiscreteLTI):
        n, m = system.n, system.m
        step = _lti_step(system)
        if horizon is None:
            dense_only("empirical_gramians() without `horizon`", system)
            rho = system.spectral_radius()
            margin = stability_margin(n, float(np.linalg.norm(system.A)))
            if not rho < 1.0 - margin:
                raise UnstableSystemError(
                    "the infinite-horizon Gramians need a Schur-stable `system`: "
                    + unstable_message("`system.A`", rho, margin)
                )
            horizon = lti_horizon(system.A, rtol=rtol, max_horizon=max_horizon)
    elif callable(system):
        if n is None or m is None:
            raise InvalidArgumentError(
                f"`n` and `m` are required when `system` is a step function; got n={n!r}, "
                f"m={m!r}"
            )
        n = _check_count("n", n, minimum=0)
        m = _check_count("m", m, minimum=0)
        step = system
    else:
        raise InvalidArgumentError(
            f"`system` must be a DiscreteLTI or a callable step(X, U) (or a python-control or "
            f"scipy.signal system, a tuple (A, B, C[, D])); got "
            f"{type(system).__name__}"
        )
    x0 = np.zeros(n) if x0 is None else as_float_vector("x0", x0)
    u0 = np.zeros(m) if u0 is None else as_float_vector("u0", u0)
    if x0.shape != (n,):
        raise ShapeError(f"`x0` must have shape (n,) = ({n},); got {x0.shape}")
    if u0.shape != (m,):
        raise ShapeError(f"`u0` must have shape (m,) = ({m},); got {u0.shape}")

    S, R = c.size, len(signs)
    # signed scales of the S*R experiments, ordered (scale, sign)
    sc = np.array([s * cl for cl in c for s in signs])  # (S*R,)
    sd = np.array([s * dl for dl in d for s in signs])  # (S*R,)
    Kc, Ko = S * R * m, S * R * n
    K = 1 + Kc + Ko
    X = np.tile(x0, (K, 1))  # (K, n): row 0 nominal, then controllability, then observability
    X[1 + Kc :] += (sd[:, None, None] * np.eye(n)[None]).reshape(Ko, n)
    U0 = np.tile(u0, (K, 1))  # (K, m)
    U_first = U0.copy()
    U_first[1 : 1 + Kc] += (sc[:, None, None] * np.eye(m)[None]).reshape(Kc, m)
    inv_c = np.repeat(1.0 / sc, m)[:, None]  # (Kc, 1)
    inv_d = (1.0 / sd)[:, None, None]  # (S*R, 1, 1)

    Wc = np.zeros((n, n))
    Wo = np.zeros((n, n))
    p = None
    Wx = None
    want_c, want_o = "controllability" in kinds, "observability" in kinds
    want_x = "cross" in kinds
    T_done, converged = 0, horizon is not None
    energy_c = energy_o = 0.0
    while True:
        steps = horizon - T_done if horizon is not None else chunk
        chunk_c = np.zeros((n, n))
        chunk_o = np.zeros((n, n))
        for k in range(steps):
            Xn, Y = _step_output(_call(step, X, U_first if T_done + k == 0 else U0), K, n, p)
            if p is None:
                p = Y.shape[1]
                if want_x and p == m:
                    Wx = np.zeros((n, n))
            dX = (Xn[1 : 1 + Kc] - Xn[0]) * inv_c  # (Kc, n), row (l, s, i)
            dY = (Y[1 + Kc :] - Y[0]).reshape(S * R, n, p) * inv_d  # (SR, n_j, p)
            if want_c or want_x:
                chunk_c += dX.T @ dX
            if want_o or want_x:
                chunk_o += np.einsum("ajq,akq->jk", dY, dY)
            if Wx is not None:
                # W_x[a, j] += sum_(ls) sum_i X[a, i] Y[i, j]
                Wx += np.einsum("sia,sji->aj", dX.reshape(S * R, m, n), dY)
            X = Xn
        T_done += steps
        Wc += chunk_c
        Wo += chunk_o
        if horizon is not None:
            break
        ec, eo = np.trace(chunk_c), np.trace(chunk_o)
        energy_c, energy_o = energy_c + ec, energy_o + eo
        if not (np.isfinite(energy_c) and np.isfinite(energy_o)):
            break
        if ec <= rtol * energy_c and eo <= rtol * energy_o:
            converged = True
            break
        if T_done + chunk > max_horizon:
            raise SolverError(
                f"the empirical Gramians did not converge within max_horizon={max_horizon} "
                f"steps (last-chunk energy ratios {ec / max(energy_c, 1e-300):.3g}, "
                f"{eo / max(energy_o, 1e-300):.3g} > rtol={rtol:.3g}); pass `horizon=` or "
                "a larger `max_horizon`"
            )
    scale = 1.0 / (S * R)
    out = {}
    for name, W, wanted in (
        ("controllability", Wc, want_c),
        ("observability", Wo, want_o),
        ("cross", Wx, want_x),
    ):
        if not wanted or W is None:
            out[name] = None
            continue
        W = W * scale
        if name != "cross":
            W = 0.5 * (W + W.T)
        if not np.all(np.isfinite(W)):
            raise NonFiniteError(
                f"the trajectories of `system` became non-finite; the empirical {name} "
                "Gramian has NaN or inf entries (unstable system or too large `scales`?)"
            )
        out[name] = W
    return EmpiricalGramians(
        controllability=out["controllability"],
        observability=out["observability"],
        cross=out["cross"],
        horizon=T_done,
        converged=converged,
        scales=c,
        state_scales=d,
        signs=tuple(signs),
        trajectories=K,
    )


def _check_which(which) -> tuple:
    if isinstance(which, str):
        which = (which,)
    kinds = tuple(which)
    bad = [k for k in kinds if k not in _KINDS]
    if bad or not kinds:
        raise InvalidArgumentError(
            f"`which` must be a non-empty subset of {_KINDS}; got {tuple(which)!r}"
        )
    return kinds


def _call(step: Callable, X: np.ndarray, U: np.ndarray):
    """``step(X, U)`` on read-only views: a step function writing into its arguments
    would change the trajectories the deviations are taken from (a wrong Gramian)."""
    Xv, Uv = X.view(), U.view()
    Xv.flags.writeable = Uv.flags.writeable = False
    try:
        return step(Xv, Uv)
    except ValueError as exc:
        if "read-only" not in str(exc):
            raise
        raise InvalidArgumentError(
            f"`system` (a step function) raised {exc!r}: X and U are passed read-only, "
            "since a step function that modifies them in place gives a wrong Gramian; "
            "return new arrays (e.g. X_next = X @ A.T + U @ B.T)"
        ) from exc


def _step_output(out, K: int, n: int, p: int | None):
    """``(X_next, Y)`` of one call of a step function, as float64, with typed errors (every
    call: a later step with another shape would otherwise broadcast or raise raw errors)."""
    try:
        Xn, Y = out
    except (TypeError, ValueError):
        got = type(out).__name__ + (f" of length {len(out)}" if hasattr(out, "__len__") else "")
        raise ShapeError(f"`system` must return a pair (X_next, Y); got {got}") from None
    Xn, Y = np.asarray(Xn), np.asarray(Y)
    for name, arr in (("X_next", Xn), ("Y", Y)):
        if np.iscomplexobj(arr) or not (np.issubdtype(arr.dtype, np.number)
                                        or arr.dtype == np.bool_):
            raise ShapeError(f"`system` must return real numeric {name}; got dtype {arr.dtype}")
    Xn, Y = Xn.astype(np.float64, copy=False), Y.astype(np.float64, copy=False)
    if Xn.shape != (K, n):
        raise ShapeError(
            f"`system` must return X_next of shape (K, n) = ({K}, {n}); got {Xn.shape}"
        )
    if Y.ndim != 2 or Y.shape[0] != K or (p is not None and Y.shape[1] != p):
        want = f"(K, p) = ({K}, {p})" if p is not None else f"(K, p) with K = {K}"
        raise ShapeError(f"`system` must return Y of shape {want}; got {Y.shape}")
    return Xn, Y
