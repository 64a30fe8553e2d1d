"""Optimal Hankel-norm approximation of discrete-time systems (Glover 1984).

For a Schur-stable ``G`` with Hankel singular values (HSVs)
:math:`\\sigma_1 \\ge \\dots \\ge \\sigma_n`, no stable system of order r is closer to ``G``
in the Hankel norm than :math:`\\sigma_{r+1}`, and Glover's construction reaches it:

.. math:: \\|G - G_r\\|_H = \\sigma_{r+1}, \\qquad
          \\sigma_{r+1} \\le \\|G - G_r\\|_\\infty \\le \\sum_{i > r}^{\\text{distinct}} \\sigma_i

(the second with the feed-through ``D_r`` chosen as in Glover's Theorem 9.7, each distinct
HSV of the tail counted once: half the balanced-truncation bound, when the HSVs below
:math:`\\sigma_{r+1}` are simple; a repeated one there may count more than once, see
:func:`hankel_norm_approximation`, Notes). The construction is done
in continuous time on the Cayley (bilinear, Tustin with ``dt = 2``) transform of ``G``,
which preserves the Gramians, the HSVs, the Hankel norm and the H-infinity norm.
"""

from __future__ import annotations

import math
import numbers
import warnings
from dataclasses import dataclass

import numpy as np
import scipy.linalg as sla

from lti._validation import as_float_matrix, check_square, stability_margin, unstable_message
from lti.exceptions import InvalidArgumentError, ShapeError, SolverError, UnstableSystemError
from lti.gramians import gramian_factors
from lti.lowrank import dense_only
from lti.system import DiscreteLTI, as_discrete_system, is_control_system

__all__ = [
    "HankelNormApproximation",
    "cayley_to_continuous",
    "cayley_to_discrete",
    "hankel_norm_approximation",
]

_EPS = np.finfo(np.float64).eps
#: HSVs within this relative distance are one multiple value in Glover's construction
#: (closer values make ``Sigma_1^2 - sigma^2 I`` too ill-conditioned to invert; the
#: grouping's defect enters ``rounding_term``).
TIE_RTOL = 1e-8
#: Tie tolerances tried in turn: when HSVs closer than the next value break the
#: construction (rounding moves poles across the axis), they are grouped as one multiple
#: value, whose defect enters ``rounding_term``.
TIE_RTOLS = (TIE_RTOL, 1e-6, 1e-4)
#: Tie tolerance of the feed-through recursion (Glover's D0), whose HSVs are recomputed
#: from the mirrored antistable part and carry more rounding than those of ``G``.
CONSTANT_TIE_RTOL = 1e-5
#: HSVs closer than this (relative gap) get the H-infinity error of the result measured
#: (:func:`lti.hinf_norm`), see :func:`hankel_norm_approximation`, Notes.
VERIFY_GAP = 1e-4
#: Looser grouping tried for the feed-through when the measured error exceeds the bound.
VERIFY_TIE_RTOL = 1e-3
#: Multiple of ``n eps kappa (||D||_2 + 2 sum sigma_i) / (1 - rho^2)`` added to
#: ``rounding_term`` for the floating-point error of the construction (the Cayley maps,
#: Glover's formulas, the stable/antistable split), see :func:`hankel_norm_approximation`.
ROUNDING_FACTOR = 100.0


@dataclass(frozen=True, eq=False)
class HankelNormApproximation:
    """Result of :func:`hankel_norm_approximation`.

    Attributes
    ----------
    reduced : DiscreteLTI or control.StateSpace
        The Schur-stable reduced system of order ``order`` (a python-control
        ``StateSpace`` with the same ``dt`` when one was passed in).
    hsv : ndarray, shape (n,)
        Hankel singular values of ``G``, descending.
    order : int
        Order r of ``reduced`` (lower than requested when the request split tied HSVs or
        exceeded ``minimal_order``; a warning says so).
    hankel_error : float
        :math:`\\sigma_{r+1}` (0 when ``order == minimal_order``): the Hankel-norm error
        :math:`\\|G - G_r\\|_H` in exact arithmetic, the smallest possible for order r.
    lower_bound : float
        ``max(hankel_error - rounding_term, 0)``: a lower bound of
        :math:`\\|G - G_r\\|_\\infty` for every stable reduced model of order r (as in
        :class:`lti.BalancedTruncation`, the rounding term makes it hold literally).
    tail : float
        :math:`\\sum_{i > r} \\sigma_i` over the *distinct* HSVs of the tail (values within
        ``TIE_RTOL`` counted once).
    rounding_term : float
        Estimate of what rounding adds to the error (see Notes of
        :func:`hankel_norm_approximation`).
    error_bound : float
        The bound of :math:`\\|G - G_r\\|_\\infty`: ``max(tail, glover) + rounding_term``,
        ``glover`` = :math:`\\sigma_{r+1}` plus the distinct HSVs of the antistable mirror
        that the feed-through recursion removed (Glover's Theorem 9.7; at most ``tail``
        when the HSVs below :math:`\\sigma_{r+1}` are simple, possibly above it when one
        of them is repeated: see :func:`hankel_norm_approximation`, Notes).
    multiplicity : int
        Multiplicity k of :math:`\\sigma_{r+1}` (0 when ``order == minimal_order``).
    minimal_order : int
        Number of HSVs above the rounding floor ``n eps ||Lc||_2 ||Lo||_2 / (1 - rho^2)``
        (``rho`` the spectral radius): the order of the minimal balanced realisation the
        construction starts from.
    measured_error : float or None
        :math:`\\|G - G_r\\|_\\infty` measured by :func:`lti.hinf_norm` (raised by its
        estimated accuracy) when HSVs from :math:`\\sigma_r` on are closer than
        ``VERIFY_GAP`` relative, where the construction is ill-conditioned; when the
        measured value exceeds Glover's bound (a warning says so), ``error_bound`` is this
        value. ``None`` when not measured.
    """

    reduced: object
    hsv: np.ndarray
    order: int
    hankel_error: float
    lower_bound: float
    tail: float
    rounding_term: float
    error_bound: float
    multiplicity: int
    minimal_order: int
    measured_error: float | None = None

    @property
    def n_unstable(self) -> int:
        """0: the input is Schur-stable (as in :class:`lti.BalancedTruncation`, so that the
        :mod:`lti.testing` helpers take this result too)."""
        return 0

    def __repr__(self) -> str:
        return (
            f"HankelNormApproximation(order={self.order}, n={self.hsv.size}, "
            f"hankel_error={self.hankel_error:.3g}, error_bound={self.error_bound:.3g})"
        )


# ------------------------------------------------------------------- Cayley maps


def cayley_to_continuous(A, B, C, D):
    """Bilinear (Cayley) map of a discrete-time realisation to continuous time.

    Parameters
    ----------
    A : array_like, shape (n, n)
        Discrete state matrix without eigenvalue -1.
    B : array_like, shape (n, m)
    C : array_like, shape (p, n)
    D : array_like, shape (p, m)

    Returns
    -------
    Ac, Bc, Cc, Dc : ndarray, shapes (n, n), (n, m), (p, n), (p, m)
        ``Ac = (I + A)^{-1} (A - I)``, ``Bc = sqrt(2) (I + A)^{-1} B``,
        ``Cc = sqrt(2) C (I + A)^{-1}``, ``Dc = D - C (I + A)^{-1} B``.

    Raises
    ------
    SolverError
        ``I + A`` is singular (``A`` has the eigenvalue -1).

    Notes
    -----
    ``G_c(s) = G_d(z)`` for ``z = (1 + s) / (1 - s)``: the unit circle maps onto the
    imaginary axis (``e^{j theta} -> j tan(theta / 2)``) and the open unit disc onto the
    open left half-plane, so H-infinity norms and stability are preserved. Because
    ``(I + A) (Ac X + X Ac^T + Bc Bc^T) (I + A)^T = 2 (A X A^T - X + B B^T)``, the
    continuous Gramians *equal* the discrete ones, and so do the HSVs and the Hankel norm;
    a balanced realisation stays balanced. :func:`cayley_to_discrete` is the inverse.

    Examples
    --------
    >>> import numpy as np
    >>> from lti.hankel import cayley_to_continuous, cayley_to_discrete
    >>> A, B, C, D = np.array([[0.5]]), np.array([[1.0]]), np.array([[2.0]]), np.zeros((1, 1))
    >>> Ac, Bc, Cc, Dc = cayley_to_continuous(A, B, C, D)
    >>> z = np.exp(0.3j); s = (z - 1) / (z + 1)
    >>> Gd = (C @ np.linalg.solve(z * np.eye(1) - A, B) + D)[0, 0]
    >>> Gc = (Cc @ np.linalg.solve(s * np.eye(1) - Ac, Bc) + Dc)[0, 0]
    >>> back = cayley_to_discrete(Ac, Bc, Cc, Dc)
    >>> bool(abs(Gd - Gc) < 1e-14 and np.allclose(back[0], A, rtol=0, atol=1e-15))
    True
    """
    A, B, C, D = _realisation(("A", "B", "C", "D"), A, B, C, D)
    n = A.shape[0]
    E = np.eye(n) + A
    X = _solve(E, np.hstack([A - np.eye(n), B]), "I + A")  # E^{-1} [A - I, B]
    Ac, EB = X[:, :n], X[:, n:]
    Cc = np.sqrt(2.0) * _solve(E.T, C.T, "I + A").T
    return Ac, np.sqrt(2.0) * EB, Cc, D - C @ EB


def cayley_to_discrete(Ac, Bc, Cc, Dc):
    """Inverse of :func:`cayley_to_continuous`.

    Parameters
    ----------
    Ac : array_like, shape (n, n)
        Continuous state matrix without eigenvalue 1.
    Bc : array_like, shape (n, m)
    Cc : array_like, shape (p, n)
    Dc : array_like, shape (p, m)

    Returns
    -------
    A, B, C, D : ndarray, shapes (n, n), (n, m), (p, n), (p, m)
        ``A = (I - Ac)^{-1} (I + Ac)``, ``B = sqrt(2) (I - Ac)^{-1} Bc``,
        ``C = sqrt(2) Cc (I - Ac)^{-1}``, ``D = Dc + Cc (I - Ac)^{-1} Bc``.

    Raises
    ------
    SolverError
        ``I - Ac`` is singular.
    """
    Ac, Bc, Cc, Dc = _realisation(("Ac", "Bc", "Cc", "Dc"), Ac, Bc, Cc, Dc)
    n = Ac.shape[0]
    F = np.eye(n) - Ac
    X = _solve(F, np.hstack([np.eye(n) + Ac, Bc]), "I - Ac")
    A, FB = X[:, :n], X[:, n:]
    C = np.sqrt(2.0) * _solve(F.T, Cc.T, "I - Ac").T
    return A, np.sqrt(2.0) * FB, C, Dc + Cc @ FB


def _realisation(names, *mats):
    """Validated float64 ``(A, B, C, D)`` of conforming shapes (typed errors naming them)."""
    A, B, C, D = (as_float_matrix(name, X, copy=False) for name, X in zip(names, mats,
                                                                          strict=True))
    n = check_square(names[0], A)
    m, p = B.shape[1], C.shape[0]
    if B.shape[0] != n or C.shape[1] != n or D.shape != (p, m):
        raise ShapeError(
            f"`{names[1]}`, `{names[2]}`, `{names[3]}` must have shapes (n, m), (p, n), (p, m) "
            f"with n = {n}; got {B.shape}, {C.shape}, {D.shape}"
        )
    return A, B, C, D


def _solve(E: np.ndarray, R: np.ndarray, name: str) -> np.ndarray:
    if E.shape[0] == 0:
        return np.zeros((0, R.shape[1]))
    lu, piv = sla.lu_factor(E, check_finite=False)
    if np.min(np.abs(np.diag(lu))) <= _EPS * max(1.0, float(np.max(np.abs(E)))):
        raise SolverError(f"the Cayley transform needs a nonsingular `{name}`")
    return sla.lu_solve((lu, piv), R, check_finite=False)


# --------------------------------------------------------------- building blocks


@dataclass(frozen=True)
class _Balanced:
    """Minimal continuous-time balanced realisation (Gramians ``diag(s)``) of a stable
    discrete system, through the Cayley map. ``hsv`` are all n HSVs, ``s = hsv[:nmin]``."""

    A: np.ndarray
    B: np.ndarray
    C: np.ndarray
    D: np.ndarray
    hsv: np.ndarray
    nmin: int
    dropped: float  # 2 * sum of the HSVs below the floor (BT bound of what was dropped)
    kappa: float  # ||T||_2 ||Ti||_2 of the balancing projection (>= 1)


def _balanced_continuous(G: DiscreteLTI, rho: float = 0.0) -> _Balanced:
    """Minimal balanced realisation of ``G`` (square-root method on its Gramian factors),
    then its Cayley map (balancing first keeps the map's rounding relative to a balanced,
    well-scaled realisation; non-normal ``A`` would amplify it otherwise). HSVs at or below
    ``n eps ||Lc|| ||Lo|| / (1 - rho^2)`` (`rho` the spectral radius: the conditioning of
    the Stein equations, as in balanced truncation's floor) are dropped."""
    n = G.n
    if n == 0:
        return _Balanced(np.zeros((0, 0)), np.zeros((0, G.m)), np.zeros((G.p, 0)),
                         G.D.copy(), np.zeros(0), 0, 0.0, 1.0)
    Lc, Lo = gramian_factors(G)
    U, s, Vt = sla.svd(Lo.T @ Lc, full_matrices=False, lapack_driver="gesvd")
    hsv = np.zeros(n)
    hsv[: min(s.size, n)] = s[:n]
    floor = n * _EPS * np.linalg.norm(Lc, 2) * np.linalg.norm(Lo, 2)
    floor /= max(1.0 - rho * rho, _EPS)
    nmin = int(np.count_nonzero(hsv > floor))
    d = 1.0 / np.sqrt(s[:nmin])
    T = (Lc @ Vt[:nmin].T) * d  # (n, nmin)
    Ti = (d[:, None] * U[:, :nmin].T) @ Lo.T  # (nmin, n)
    kappa = float(np.linalg.norm(T, 2) * np.linalg.norm(Ti, 2)) if nmin else 1.0
    Ac, Bc, Cc, Dc = cayley_to_continuous(Ti @ G.A @ T, Ti @ G.B, G.C @ T, G.D)
    return _Balanced(Ac, Bc, Cc, Dc, hsv, nmin, 2.0 * float(np.sum(hsv[nmin:])), kappa)


def _tie_block(s: np.ndarray, r: int, rtol: float = TIE_RTOL) -> tuple[int, int]:
    """Indices ``lo <= r < hi`` of the HSVs tied with ``s[r]`` (relative gap `rtol`,
    chained)."""
    lo, hi = r, r + 1
    while lo > 0 and s[lo - 1] - s[lo] <= rtol * s[lo - 1]:
        lo -= 1
    while hi < s.size and s[hi - 1] - s[hi] <= rtol * s[hi - 1]:
        hi += 1
    return lo, hi


def _glover(bal: _Balanced, lo: int, hi: int):
    """Glover's all-pass construction on a balanced continuous realisation.

    With ``sigma`` the tied HSVs ``s[lo:hi]`` moved last, returns ``(Ah, Bh, Ch, Dh)`` of
    order ``nmin - (hi - lo)`` with ``G - Gh`` all-pass, ``(G - Gh)~ (G - Gh) = sigma^2 I``
    (square case), ``lo`` stable and ``nmin - hi`` antistable eigenvalues, and the defect
    ``||B2 + C2^T U||_2`` of the multiplicity relation (0 in exact arithmetic).
    """
    s = bal.hsv[: bal.nmin]
    keep = np.r_[0:lo, hi:s.size]
    sigma = float(np.mean(s[lo:hi]))
    A11 = bal.A[np.ix_(keep, keep)]
    B1, B2 = bal.B[keep], bal.B[lo:hi]
    C1, C2 = bal.C[:, keep], bal.C[:, lo:hi]
    S1 = s[keep]
    p, m = bal.D.shape
    # B2 = -C2^T U with U (p, m) of orthonormal columns (m <= p) or rows (m >= p): from
    # C2 B2 = V S^2 Y^T (B2 B2^T = C2^T C2 in balanced coordinates), U = -V_t Y_t^T
    V, _, Yt = sla.svd(C2 @ B2, full_matrices=True, lapack_driver="gesvd")
    t = min(p, m)
    Uu = -V[:, :t] @ Yt[:t]
    defect = float(np.linalg.norm(B2 + C2.T @ Uu, 2)) if B2.size else 0.0
    gam = S1**2 - sigma**2  # Gamma = Sigma_1^2 - sigma^2 I, diagonal, no zero entry
    CU = C1.T @ Uu  # (n1, m)
    # Glover's realisation is (Gamma^{-1} N, Gamma^{-1} M, Ch); its rows scale like
    # 1 / (sigma_i^2 - sigma^2), which would ruin every later orthogonal step. The similarity
    # |Gamma|^{1/2} gives the same transfer function with entries N_ij / sqrt|Gamma_i Gamma_j|
    # (Gramians +-Sigma_1: balanced up to signs).
    N = sigma**2 * A11.T + S1[:, None] * A11 * S1[None, :] - sigma * CU @ B1.T
    M = S1[:, None] * B1 + sigma * CU
    Ch = C1 * S1[None, :] + sigma * Uu @ B1.T
    h = 1.0 / np.sqrt(np.abs(gam))
    sg = np.sign(gam)
    Ah = (sg * h)[:, None] * N * h[None, :]
    Bh = (sg * h)[:, None] * M
    Dh = bal.D - sigma * Uu
    return Ah, Bh, Ch * h[None, :], Dh, defect


def _split_stable(A, B, C, ns_expected: int):
    """Additive split ``(A, B, C) = stable + antistable`` (continuous time)."""
    n = A.shape[0]
    if n == 0:
        z = np.zeros((0, 0))
        return (z, np.zeros((0, B.shape[1])), np.zeros((C.shape[0], 0)),
                z, np.zeros((0, B.shape[1])), np.zeros((C.shape[0], 0)))
    T, Z, ns = sla.schur(A, output="real", sort="lhp")
    if ns != ns_expected:
        raise SolverError(
            f"Glover's approximant should have {ns_expected} stable and {n - ns_expected} "
            f"antistable poles; rounding moved some across the imaginary axis (got {ns} "
            "stable): the HSVs are too close for this order"
        )
    T11, T12, T22 = T[:ns, :ns], T[:ns, ns:], T[ns:, ns:]
    X = sla.solve_sylvester(T11, -T22, -T12)  # T11 X - X T22 = -T12
    if not np.all(np.isfinite(X)):
        raise SolverError("could not separate the stable and antistable parts")
    Z1, Z2 = Z[:, :ns], Z[:, ns:]
    Bs, Cs = (Z1.T - X @ Z2.T) @ B, C @ Z1
    Bu, Cu = Z2.T @ B, C @ (Z1 @ X + Z2)
    return T11, Bs, Cs, T22, Bu, Cu


def _glover_constant(A, B, C, D, tie_rtol: float = TIE_RTOL):
    """Glover's feed-through for a stable continuous ``H = (A, B, C, D)``: a constant
    ``D0`` with ``||H - D0||_inf <= sum of the distinct HSVs of H``, by removing the
    smallest distinct HSV at a time (each step's error is all-pass with that HSV; HSVs
    within `tie_rtol` are one). Returns ``(D0, dropped + defects, removed)``: the first
    two for the rounding term, ``removed`` the sum of the HSVs removed (one per step, the
    bound ``||H - D0||_inf <= removed`` in exact arithmetic)."""
    extra = removed = 0.0
    while A.shape[0] > 0:
        Gd = DiscreteLTI(*cayley_to_discrete(A, B, C, D))
        bal = _balanced_continuous(Gd)
        extra += bal.dropped
        if bal.nmin == 0:
            return bal.D, extra, removed
        lo, hi = _tie_block(bal.hsv[: bal.nmin], bal.nmin - 1, tie_rtol)
        removed += float(np.mean(bal.hsv[lo:hi]))  # the step's all-pass error (_glover's)
        A, B, C, D, defect = _glover(bal, lo, hi)
        extra += 2.0 * defect * np.sqrt(bal.hsv[0] / max(bal.hsv[bal.nmin - 1], _EPS))
    return D, extra, removed


def _approximant(bal: _Balanced, r_req: int, tie_rtol: float):
    """Glover's optimal approximant of order ``lo <= r_req`` with HSVs within `tie_rtol`
    grouped: ``(A, B, C, D) discrete, mirror, D0, lo, hi, tail, rounding, glover``
    (``s[lo:hi]`` the tie block of ``sigma_{r_req + 1}``; `tail` the distinct tail of
    ``G``; `rounding` the defects and dropped parts; `glover` Glover's bound ``sigma_{r+1}
    + sum of the distinct HSVs of the mirror`` that the feed-through recursion removed).
    Raises SolverError or UnstableSystemError when rounding moved poles across the axis
    (HSVs too close for `tie_rtol`)."""
    s = bal.hsv[: bal.nmin]
    lo, hi = _tie_block(s, r_req, tie_rtol)
    Ah, Bh, Ch, Dh, defect = _glover(bal, lo, hi)
    As, Bs, Cs, Au, Bu, Cu = _split_stable(Ah, Bh, Ch, lo)
    mirror = (-Au, Bu, -Cu, Dh)
    D0, extra, removed = _glover_constant(*mirror, max(tie_rtol, CONSTANT_TIE_RTOL))
    mats = cayley_to_discrete(As, Bs, Cs, D0)
    # distinct values of the tail: the first of each tie block
    starts = [hi]
    while starts[-1] < bal.nmin:
        starts.append(_tie_block(s, starts[-1], tie_rtol)[1])
    tail = float(s[lo]) + float(sum(s[j] for j in starts[:-1]))
    return (mats, mirror, D0, lo, hi, tail, extra + 2.0 * defect * np.sqrt(s[0] / s[lo]),
            float(s[lo]) + removed)


def _near_tied(s: np.ndarray, lo: int) -> float:
    """Smallest relative gap between consecutive HSVs from ``s[lo - 1]`` on (inf if none)."""
    t = s[max(lo - 1, 0):]
    if t.size < 2:
        return float("inf")
    return float(np.min((t[:-1] - t[1:]) / t[:-1]))


def _measured_error(G: DiscreteLTI, Gr: DiscreteLTI) -> tuple[float, float]:
    """``||G - Gr||_inf`` by :func:`lti.hinf_norm`: the value, and the value raised by its
    estimated accuracy."""
    from lti.norms import hinf_norm  # lti.norms imports lti.balanced, which is heavier

    h = hinf_norm(G - Gr)
    acc = h.accuracy if np.isfinite(h.accuracy) else 1e-8
    return float(h.value), float(h.value) * (1.0 + max(acc, 1e-12))


def _checked(G, Gr, bal, r_req, ap, tie_rtol, rounding):
    """The H-infinity error of the approximant ``ap`` (HSVs near-tied: measured). Above
    the distinct-tail bound, the construction with the near-ties grouped
    (``VERIFY_TIE_RTOL``; lower order when `r_req` splits them) replaces it when its
    measured error is smaller. Returns ``(Gr, measured, ap, tie_rtol)`` (``ap[7]``, Glover's
    bound, that of the feed-through kept)."""
    bound = ap[5] + rounding + ap[6]
    Gr, measured, glover = _verified(G, Gr, ap, bal, bound, tie_rtol)
    ap = (*ap[:7], glover)
    if measured[0] <= bound or VERIFY_TIE_RTOL <= tie_rtol:
        return Gr, measured, ap, tie_rtol
    try:
        alt = _approximant(bal, r_req, VERIFY_TIE_RTOL)
    except (SolverError, UnstableSystemError):
        return Gr, measured, ap, tie_rtol
    G2 = DiscreteLTI(*alt[0], dt=G.dt)
    if G2.n and not G2.spectral_radius() < 1.0:
        return Gr, measured, ap, tie_rtol
    G2, m2, glover2 = _verified(G, G2, alt, bal, alt[5] + rounding + alt[6], VERIFY_TIE_RTOL)
    if m2[0] < measured[0]:
        return G2, m2, (*alt[:7], glover2), VERIFY_TIE_RTOL
    return Gr, measured, ap, tie_rtol


def _verified(G: DiscreteLTI, Gr: DiscreteLTI, ap, bal: _Balanced, bound: float,
              tie_rtol: float):
    """Near-tied HSVs make the feed-through recursion ill-conditioned: measure the
    H-infinity error, and when it exceeds `bound` try the feed-through of a looser
    grouping (``VERIFY_TIE_RTOL``); return ``(Gr, measured error, Glover's bound)`` of the
    better one (``ap`` as :func:`_approximant` returns it)."""
    mirror, D0, sigma = ap[1], ap[2], float(bal.hsv[ap[3]])
    best = (_measured_error(G, Gr), Gr, ap[7])
    if best[0][0] > bound and VERIFY_TIE_RTOL > tie_rtol:
        D1, _, removed = _glover_constant(*mirror, VERIFY_TIE_RTOL)
        G1 = DiscreteLTI(Gr.A, Gr.B, Gr.C, Gr.D + (D1 - D0), Gr.dt)
        best = min(best, (_measured_error(G, G1), G1, sigma + removed), key=lambda t: t[0][0])
    return best[1], best[0], best[2]


def _pow2(X: np.ndarray) -> float:
    m = float(np.max(np.abs(X), initial=0.0))
    return math.ldexp(1.0, math.frexp(m)[1]) if m > 0.0 else 1.0


def _normalised(G: DiscreteLTI):
    """``(A, B / sb, C / sc, D / (sb sc))`` with powers of two ``sb ~ max|B|``,
    ``sc ~ max|C|`` (exact): Gramians and HSVs of order one whatever the scale of ``G``
    (they under- or overflow beyond about 1e+-154 otherwise; ``sb sc`` itself may overflow,
    ``D`` is then divided in two steps). ``G`` itself when the scaled ``D`` would not be
    finite."""
    sb, sc = _pow2(G.B), _pow2(G.C)
    if sb == 1.0 and sc == 1.0:
        return G, (1.0, 1.0)
    with np.errstate(over="ignore"):  # sb sc overflows for B, C beyond ~1e154 each
        D = G.D / (sb * sc) if np.isfinite(sb * sc) else G.D / sb / sc
    if not np.all(np.isfinite(D)):
        return G, (1.0, 1.0)
    return DiscreteLTI(G.A, G.B / sb, G.C / sc, D, G.dt), (sb, sc)


def _check_order(order, n: int) -> int:
    if isinstance(order, bool) or not isinstance(order, numbers.Integral):
        raise InvalidArgumentError(f"`order` must be an integer in [0, n={n}]; got {order!r}")
    if not 0 <= order <= n:
        raise InvalidArgumentError(f"`order` must be an integer in [0, n={n}]; got {int(order)}")
    return int(order)


# ------------------------------------------------------------------------ public


def hankel_norm_approximation(sys, *, order) -> HankelNormApproximation:
    """Optimal Hankel-norm approximation of a stable discrete-time system (Glover).

    Parameters
    ----------
    sys : DiscreteLTI or control.StateSpace
        Schur-stable system with n states, m inputs, p outputs (MIMO, any m and p); a
        python-control system must be discrete. A non-minimal realisation is fine: the
        construction starts from a minimal balanced one.
    order : int
        Requested order r, ``0 <= r <= n``.

    Returns
    -------
    HankelNormApproximation
        ``reduced`` (same type as `sys`, order r, Schur-stable), ``hsv`` (shape (n,)),
        ``order``, ``hankel_error`` = :math:`\\sigma_{r+1}`, ``lower_bound`` (the same less
        ``rounding_term``), ``tail``, ``rounding_term``, ``error_bound``, ``multiplicity``,
        ``minimal_order``.

    Raises
    ------
    UnstableSystemError
        ``A`` has spectral radius >= 1 (the value is in the message).
    InvalidArgumentError
        `order` not an integer in ``[0, n]``; `sys` not a discrete-time system.
    NonFiniteError
        NaN or inf in the system.
    SolverError
        A step of the construction failed numerically (see Notes).
    SparseNotSupportedError
        A sparse ``A``: reduce it first by :func:`lti.balanced_truncation` (dense result).

    Warns
    -----
    UserWarning
        When `order` splits tied HSVs (the optimal approximant of order r then has the
        order ``lo`` of the first tied value: returned), or exceeds the number of HSVs above
        the rounding floor (the minimal balanced realisation is returned).

    Notes
    -----
    *Bilinear transform.* ``G_d(z) = G_c(s)`` with ``z = (1 + s)/(1 - s)``
    (:func:`cayley_to_continuous`): the unit circle maps onto the imaginary axis, so
    :math:`\\|\\cdot\\|_\\infty` and stability carry over, and the Gramians are *equal*, so
    the HSVs and the Hankel norm do too. The construction below is Glover's continuous-time
    one; the result is mapped back by :func:`cayley_to_discrete`.

    *Glover's construction* (Glover 1984, Theorem 6.3; Zhou, Doyle & Glover 1996, §8.3).
    Start from a minimal balanced realisation with Gramians
    :math:`\\Sigma = \\operatorname{diag}(\\Sigma_1, \\sigma I_k)`, :math:`\\sigma =
    \\sigma_{r+1}` of multiplicity k moved last, and :math:`U` with
    :math:`B_2 = -C_2^{\\mathsf T} U`, :math:`U^{\\mathsf T} U = I` or
    :math:`U U^{\\mathsf T} = I`. With :math:`\\Gamma = \\Sigma_1^2 - \\sigma^2 I`,

    .. math::

        \\hat A = \\Gamma^{-1}(\\sigma^2 A_{11}^{\\mathsf T} + \\Sigma_1 A_{11} \\Sigma_1
                  - \\sigma C_1^{\\mathsf T} U B_1^{\\mathsf T}),\\quad
        \\hat B = \\Gamma^{-1}(\\Sigma_1 B_1 + \\sigma C_1^{\\mathsf T} U),\\quad
        \\hat C = C_1 \\Sigma_1 + \\sigma U B_1^{\\mathsf T},\\quad
        \\hat D = D - \\sigma U.

    :math:`G - \\hat G` is :math:`\\sigma` times an all-pass (inner) function, and
    :math:`\\hat A` has r stable and :math:`n - r - k` antistable eigenvalues. The stable
    part :math:`G_r` of :math:`\\hat G = G_r + F` (ordered Schur form and a Sylvester
    equation) is the optimal Hankel-norm approximant: :math:`\\|G - G_r\\|_H = \\sigma`.
    Its feed-through is Glover's :math:`D_0` (Theorem 9.7): the constant left after
    removing the distinct HSVs of the stable mirror :math:`F(-s)` one at a time by the
    same all-pass step, so that :math:`\\|F - D_0\\|_\\infty \\le
    \\sum_{\\text{distinct}} \\sigma_i(F(-s))` and :math:`\\|G - G_r\\|_\\infty \\le \\sigma +
    \\|F - D_0\\|_\\infty`: Glover's bound, ``error_bound`` (less ``rounding_term``) where
    it exceeds ``tail``. Since :math:`\\sigma_i(F(-s)) \\le \\sigma_{i+r+k}` it is at most
    :math:`\\sigma + \\sum_{i > r + k} \\sigma_i` *with* multiplicities, and at most the
    distinct tail ``tail`` when the HSVs below :math:`\\sigma` are simple. A repeated one
    there need not stay repeated in the mirror (MIMO): for ``diag(G1, G1)`` with random
    ``G1`` of 4 states, 2 or 3 inputs and outputs (rho = 0.6) the H-infinity error
    exceeds the distinct tail of ``G`` by up to 7 %, within Glover's bound
    (``tests/lti/test_hankel_multiplicity.py``).
    ``order = 0`` gives the constant :math:`D_0` (``G_r`` has no states).

    *Rounding.* HSVs at or below ``n eps ||Lc||_2 ||Lo||_2 / (1 - rho^2)`` are treated as
    zero (``rho`` the spectral radius: the conditioning of the Stein equations, as in
    :func:`lti.balanced_truncation`'s floor; without it a 2-state system with poles at
    -0.99976 and -0.99012 and HSVs 64.8 and 5.1e-11 made Glover's construction fail at order
    0); their states are dropped before the construction (twice their sum, the
    balanced-truncation bound of what was dropped, enters ``rounding_term``); HSVs within
    ``TIE_RTOL`` relative are one multiple value (the defect
    :math:`\\|B_2 + C_2^{\\mathsf T} U\\|_2` enters ``rounding_term``, scaled by
    :math:`2\\sqrt{\\sigma_1/\\sigma}`). A further
    ``ROUNDING_FACTOR * n * eps * (||D||_2 + 2 sum sigma_i)`` (a bound of
    :math:`\\|G\\|_\\infty` times the usual backward-error size) is added for the
    floating-point error of the maps and formulas, multiplied by the condition number
    :math:`\\kappa = \\|T\\|_2 \\|T_i\\|_2` of the balancing projection and by
    :math:`1 / (1 - \\rho^2)` (``rho`` the spectral radius: the conditioning of the Stein
    equations and of evaluating a lightly damped ``G``). ``rounding_term`` is an estimate,
    not a rigorous bound: ``benchmarks/hankel_rounding.py`` measures it on dense, non-normal,
    resonant and diagonal systems (table in the theory page on Hankel-norm approximation).

    *Near-tied HSVs.* Glover's formulas divide by :math:`\\sigma_i^2 - \\sigma^2`; HSVs
    that are distinct but close (relative gaps of about 1e-9 to 1e-6) make the
    construction ill-conditioned: unhandled, the H-infinity error can exceed Glover's
    bound silently, or a step fails. Therefore (1) the feed-through
    recursion groups the recomputed HSVs of the mirrored part within ``CONSTANT_TIE_RTOL``;
    (2) a construction that fails (poles across the axis) is retried with the looser tie
    tolerances ``TIE_RTOLS``; (3) when HSVs from :math:`\\sigma_r` on are closer than
    ``VERIFY_GAP``, the H-infinity error is measured with :func:`lti.hinf_norm`
    (``measured_error``), and above Glover's bound the construction with the near-ties
    grouped (``VERIFY_TIE_RTOL``) is tried, the better model kept (of the lower order of the
    tie's start when `order` splits the near-tie: a warning says so); should the measured
    error still exceed the bound, ``error_bound`` is the measured error, with a warning.

    References
    ----------
    K. Glover, "All optimal Hankel-norm approximations of linear multivariable systems
    and their L-infinity error bounds", Int. J. Control 39(6):1115-1193, 1984.
    K. Zhou, J. C. Doyle, K. Glover, *Robust and Optimal Control*, Prentice Hall, 1996,
    ch. 8.

    Examples
    --------
    >>> import numpy as np
    >>> from lti import DiscreteLTI, hankel_norm_approximation, hankel_singular_values
    >>> rng = np.random.default_rng(0)
    >>> G = DiscreteLTI(np.diag(0.9 ** np.arange(1, 9)), rng.standard_normal((8, 1)),
    ...                 rng.standard_normal((1, 8)))
    >>> res = hankel_norm_approximation(G, order=3)
    >>> E = G - res.reduced                                  # stable error system
    >>> hankel_err = hankel_singular_values(E)[0]
    >>> bool(abs(hankel_err - res.hsv[3]) <= 1e-9 * res.hsv[0] and res.reduced.n == 3)
    True
    >>> w = np.linspace(0, np.pi, 2001)                       # H-infinity error on a grid
    >>> peak = np.abs(E.frequency_response(w)[:, 0, 0]).max()
    >>> bool(res.lower_bound <= peak * (1 + 1e-9) and peak <= res.error_bound)
    True
    """
    was_control = is_control_system(sys)
    G = as_discrete_system(sys)
    dense_only("hankel_norm_approximation()", G)
    r_req = _check_order(order, G.n)
    rho = G.spectral_radius()
    margin = stability_margin(G.n, float(np.linalg.norm(G.A)))
    if not rho < 1.0 - margin:  # the margin of the Gramian solvers (lti._validation)
        raise UnstableSystemError(
            "Hankel-norm approximation needs a Schur-stable system: "
            + unstable_message("`sys.A`", rho, margin)
        )
    G, (sb, sc) = _normalised(G)  # G / (sb sc): the construction is homogeneous in G
    bal = _balanced_continuous(G, rho)
    hsv, nmin = bal.hsv, bal.nmin
    s = hsv[:nmin]
    scale = float(np.linalg.norm(G.D, 2)) if G.D.size else 0.0
    scale += 2.0 * float(np.sum(hsv))
    cond = bal.kappa / max(1.0 - rho * rho, _EPS)  # balancing and Stein conditioning
    rounding = bal.dropped + ROUNDING_FACTOR * max(G.n, 1) * _EPS * cond * scale
    if r_req >= nmin:
        if r_req > nmin:
            warnings.warn(
                f"requested order {r_req} but only {nmin} Hankel singular values exceed the "
                f"rounding floor; returning the minimal balanced realisation of order {nmin}",
                UserWarning,
                stacklevel=2,
            )
        mats = cayley_to_discrete(bal.A, bal.B, bal.C, bal.D)
        r, sigma, tail, k = nmin, 0.0, 0.0, 0
        bound_tail = 0.0
    else:
        for i, tie_rtol in enumerate(TIE_RTOLS):  # looser grouping when near-ties break it
            try:
                ap = _approximant(bal, r_req, tie_rtol)
                break
            except (SolverError, UnstableSystemError) as exc:
                if i + 1 == len(TIE_RTOLS):
                    raise SolverError(
                        f"Glover's construction failed at order {r_req} even with Hankel "
                        f"singular values within {tie_rtol:g} relative grouped as one "
                        f"multiple value ({exc}); HSVs: {np.array2string(s, precision=8)}"
                    ) from exc
        mats, lo = ap[0], ap[3]
    Gr = DiscreteLTI(*mats, dt=G.dt)
    if Gr.n and not Gr.spectral_radius() < 1.0:
        raise SolverError(
            f"the reduced model came out unstable (spectral radius {Gr.spectral_radius():.6g})"
        )
    measured = None
    if r_req < nmin and _near_tied(s, lo) < VERIFY_GAP:
        Gr, measured, ap, tie_rtol = _checked(G, Gr, bal, r_req, ap, tie_rtol, rounding)
    if r_req < nmin:
        _, _, _, lo, hi, tail, extra, glover = ap
        r, k, sigma = lo, hi - lo, float(s[lo])
        bound_tail = max(tail, glover)
        rounding += extra
        if lo < r_req:
            warnings.warn(
                f"order {r_req} splits tied Hankel singular values (sigma_{lo + 1} ... "
                f"sigma_{hi} = {s[r_req]:.6g}, within {tie_rtol:g} relative): the optimal "
                f"approximant of order {r_req} has order {lo} and the same Hankel error "
                f"up to the tie; returning order {lo}",
                UserWarning,
                stacklevel=2,
            )
    bound = float(bound_tail + rounding)
    if measured is not None and measured[0] > bound:
        warnings.warn(
            f"near-tied Hankel singular values (smallest relative gap "
            f"{_near_tied(s, r):.2g}) make Glover's construction ill-conditioned in "
            f"floating point: the H-infinity error, measured by lti.hinf_norm, is "
            f"{measured[0]:.6g}, above Glover's bound {bound:.6g}; error_bound is the "
            "measured error (raised by its estimated accuracy)",
            UserWarning,
            stacklevel=2,
        )
        bound = measured[1]
    measured = None if measured is None else measured[1]
    def g(x):  # back to the caller's scale (powers of two: exact)
        return x * (sb * sc) if np.isfinite(sb * sc) else x * sb * sc  # (sb sc may overflow)

    if (sb, sc) != (1.0, 1.0):
        Gr = DiscreteLTI(Gr.A, Gr.B * sb, Gr.C * sc, g(Gr.D), Gr.dt)
    if was_control:
        Gr = Gr.to_control()
    hsv = g(hsv)
    hsv.setflags(write=False)
    return HankelNormApproximation(
        reduced=Gr,
        hsv=hsv,
        order=r,
        hankel_error=g(sigma),
        lower_bound=g(max(sigma - float(rounding), 0.0)),
        tail=g(tail),
        rounding_term=g(float(rounding)),
        error_bound=g(bound),
        multiplicity=k,
        minimal_order=nmin,
        measured_error=None if measured is None else g(measured),
    )
