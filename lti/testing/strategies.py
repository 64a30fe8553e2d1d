"""Hypothesis strategies for stable discrete-time LTI systems, for property tests.

Every strategy draws a Schur-stable :class:`~lti.system.DiscreteLTI`. The families
(`kind`) cover what breaks reduction codes:

``"dense"``
    Random dense ``A`` rescaled to a drawn spectral radius ``<= max_radius``.
``"diagonal"``
    Real diagonal ``A`` (the adapters' real modes).
``"complex_diagonal"``
    Complex-conjugate pole pairs in real 2x2 block form (``DiscreteLTI.from_diagonal``).
``"near_unit_circle"``
    Resonant: lightly damped pole pairs with ``1 - |lambda|`` log-uniform in
    ``[min_distance, 1e-2]`` (default ``min_distance = 1e-4``: sharp resonances, large
    gains), in a random orthogonal basis.
``"non_normal"``
    ``A = Q (Lambda + N) Q^T`` with a strictly upper triangular ``N`` whose Frobenius norm
    (the departure from normality) is log-uniform in ``[0.1, nonnormality]`` (default
    ``1e3``): the spectrum is fixed, the transient growth is not.
``"hsv_decades"``
    Modal systems whose inputs and outputs are scaled geometrically so that the Hankel
    singular values spread over about `decades` decades (default 12: down to ``1e-12
    sigma_1``), in a random orthogonal basis.
``"fir"``
    Nilpotent ``A`` (all poles at 0), the most common discrete-time system: either an FIR
    filter in shift-register form (``A = diag(ones(n - 1), -1)``, ``B = e_1 b^T``, taps
    in ``C``; all HSVs of a pure delay equal 1) or ``A = Q N Q^T`` with ``N`` strictly upper
    triangular.

Hypothesis draws the structure (family, sizes, spectral radius, departure from normality,
number of non-minimal states) and an integer seed; the entries come from
``numpy.random.default_rng(seed)``. Failing examples therefore shrink to small systems
(few states, seed 0, ``D = 0`` ...), and the draws are not dominated by the zeros, ones and
repeated values hypothesis prefers for raw floats (which made most draws degenerate: the
earlier version drew 60 cases of which ~43 reduced to order 0 and ~12 to order n).
Non-minimal systems stay in the search space on purpose: with probability 1/5 one or two
states are uncontrollable or unobservable (a zero block of ``B`` or ``C`` before the basis
change).

:func:`systems_and_orders` pairs a system with a reduction order. By default
(``orders="mixed"``) nine draws in ten ask for a *real* reduction ``0 < r < n_min``, with
``n_min`` = :func:`minimal_order` (numerical minimal order, computed independently of
:mod:`lti`'s own floor); the tenth draws an edge order ``0``, ``n_min`` or ``n``.

Measured mix (``python benchmarks/strategy_mix.py``: 1,000 derandomized draws of the
default ``systems_and_orders(n=(1, 8))``; ``benchmarks/results/strategy_mix.md``):
84.5 % real reductions ``0 < r < n_min``, 6.6 % ``r = 0``, 1.8 % ``r = n_min < n``,
5.2 % ``r = n_min = n``, 1.9 % ``r > n_min``; per family (200 draws each) between 82.5 %
(non_normal, fir) and 91.5 % (dense, diagonal, complex_diagonal, near_unit_circle) real
reductions. The share is checked by
``tests/lti/test_strategies.py::test_default_mix_is_mostly_real_reductions`` (300 draws,
>= 80 %).

Example: a user's property test of the balanced-truncation bounds

.. code-block:: python

    from hypothesis import given, settings
    from lti import balanced_truncation
    from lti.testing import assert_reduction_within_bounds, strategies

    @settings(max_examples=200, deadline=None)
    @given(case=strategies.systems_and_orders(n=(2, 12), kind=("dense", "non_normal")))
    def test_bt_error_within_bounds(case):
        G, r = case
        result = balanced_truncation(G, order=r)
        assert_reduction_within_bounds(G, result)     # sigma_{r+1} <= ||G - Gr|| <= bound

Requires hypothesis (``pip install "lti-adapters[test]"``).
"""

from __future__ import annotations

import numpy as np
import scipy.linalg as sla

from lti.exceptions import InvalidArgumentError, MissingDependencyError
from lti.system import DiscreteLTI, as_discrete_system

try:
    from hypothesis import strategies as st
except ImportError as exc:  # pragma: no cover - depends on the environment
    raise MissingDependencyError(
        'lti.testing.strategies needs hypothesis; install it with pip install "lti-adapters[test]"'
    ) from exc

__all__ = [
    "HANKEL_MAX_BLOCKS",
    "KINDS",
    "MIN_DISTANCE_FLOOR",
    "ORDERS",
    "hankel_lower_bounds",
    "minimal_order",
    "stable_systems",
    "systems_and_orders",
]

#: The system families :func:`stable_systems` can draw from.
KINDS = (
    "dense",
    "diagonal",
    "complex_diagonal",
    "near_unit_circle",
    "non_normal",
    "hsv_decades",
    "fir",
)

#: The order modes of :func:`systems_and_orders`.
ORDERS = ("mixed", "reduction", "proper", "any")

_EPS = np.finfo(np.float64).eps


def _as_range(name: str, value, lo: int) -> tuple[int, int]:
    if isinstance(value, (int, np.integer)) and not isinstance(value, bool):
        value = (int(value), int(value))
    try:
        a, b = (int(v) for v in value)
    except (TypeError, ValueError) as exc:
        raise InvalidArgumentError(
            f"`{name}` must be an int or a (min, max) pair; got {value!r}"
        ) from exc
    if not lo <= a <= b:
        raise InvalidArgumentError(f"`{name}` must satisfy {lo} <= min <= max; got {value!r}")
    return a, b


#: Smallest ``min_distance``: ``1 - |lambda|`` closer than this is within the rounding margin of the
#: unit circle (8 n eps ||A||_F, :func:`lti._validation.stability_margin`) after the random
#: basis change at the sizes drawn, and the solvers refuse it (at 1e-15, 26 of 150 draws).
MIN_DISTANCE_FLOOR = 1e-12


def _real(name: str, value) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)):
        raise InvalidArgumentError(f"`{name}` must be a real number; got {value!r}")
    return float(value)


def _floats(lo: float, hi: float):
    return st.floats(lo, hi, allow_nan=False, allow_infinity=False)


def _orthogonal(rng: np.random.Generator, n: int) -> np.ndarray:
    """A Haar-random orthogonal matrix."""
    if n == 0:
        return np.eye(0)
    Q, R = np.linalg.qr(rng.standard_normal((n, n)))
    return Q * np.sign(np.where(np.diag(R) == 0, 1.0, np.diag(R)))


def _modal(radii: np.ndarray, angles: np.ndarray, n: int) -> np.ndarray:
    """Real block-diagonal A of size n: pairs r e^{+-j angle} as 2x2 blocks, then reals."""
    A = np.zeros((n, n))
    k = 0
    for r, th in zip(radii, angles, strict=False):
        if k + 2 <= n and 0.0 < th < np.pi:
            c, s = r * np.cos(th), r * np.sin(th)
            A[k : k + 2, k : k + 2] = [[c, s], [-s, c]]
            k += 2
        elif k < n:
            A[k, k] = r * (1.0 if th < np.pi / 2 else -1.0)
            k += 1
    return A


def _radius(A: np.ndarray) -> float:
    return float(np.max(np.abs(np.linalg.eigvals(A)))) if A.size else 0.0


def _robust_radius(A: np.ndarray, max_radius: float) -> np.ndarray:
    """A scaled down (by 0.9 at a time) until three computations of its spectral radius
    (dgeev on A and on A^T, the unbalanced real Schur form) are all <= max_radius: the
    eigenvalues of a strongly non-normal matrix are so sensitive that one computation can
    read 0.95 where another reads above 1 (a "stable" draw that lti then calls unstable)."""
    for _ in range(64):
        if not A.size or max(_radius(A), _radius(A.T),
                             _radius(sla.schur(A)[0])) <= max_radius:
            break
        A = A * 0.9
    return A


def _non_normal(rng, lam: np.ndarray, departure: float, max_radius: float) -> np.ndarray:
    """Q (diag(lam) + N) Q^T with ||N||_F = departure, halved until the computed spectral
    radius respects max_radius (eigenvalues of a strongly non-normal matrix are sensitive)."""
    n = lam.size
    N = np.triu(rng.standard_normal((n, n)), 1)
    nf = float(np.linalg.norm(N))
    N = N / nf if nf > 0 else N
    Q = _orthogonal(rng, n)
    while True:
        A = Q @ (np.diag(lam) + departure * N) @ Q.T
        if _radius(A) <= max_radius or departure < 1e-3:
            return A
        departure *= 0.5


def _family(draw, fam, n, m, p, rng, max_radius, min_distance, nonnormality, decades):
    """(A, B, C) of family `fam`, entries from rng, knobs drawn by hypothesis."""
    B = rng.standard_normal((n, m))
    C = rng.standard_normal((p, n))
    if fam == "dense":
        M = rng.standard_normal((n, n))
        rho = rng.uniform(0.0, max_radius)  # (hypothesis' favourite 0.0 gave A = 0 too often)
        r0 = _radius(M)
        A = M * (rho / r0) if r0 > 1e-8 else M * 0.0
        A = A * min(1.0, max_radius / max(_radius(A), 1e-300))  # rounding of the rescale
    elif fam == "diagonal":
        A = np.diag(rng.uniform(-max_radius, max_radius, n))
    elif fam in ("complex_diagonal", "near_unit_circle", "hsv_decades"):
        if fam == "near_unit_circle":
            radii = 1.0 - 10.0 ** rng.uniform(np.log10(min_distance), -2.0, n)
            angles = rng.uniform(0.0, np.pi, n)
        else:
            radii = rng.uniform(0.0, max_radius, n)
            angles = rng.uniform(1e-3, np.pi - 1e-3, n)  # genuine pairs (plus a real one)
        A = _modal(radii, angles, n)
        if fam == "hsv_decades" and n:
            w = 10.0 ** (-0.5 * float(decades) * np.arange(n) / max(n - 1, 1))
            B = B * w[:, None] + w[:, None] * 1e-3  # no exactly zero rows: spread, not drop
            C = C * w[None, :] + w[None, :] * 1e-3
        if fam != "complex_diagonal":
            Q = _orthogonal(rng, n)
            A, B, C = Q @ A @ Q.T, Q @ B, C @ Q.T
    elif fam == "non_normal":
        lg = draw(_floats(-1.0, np.log10(nonnormality))) if nonnormality > 0.1 else None
        departure = 10.0**lg if lg is not None else float(nonnormality)
        lam = rng.uniform(-max_radius, max_radius, n)
        A = _non_normal(rng, lam, departure, max_radius)
    else:  # fir / nilpotent
        if draw(st.booleans()):  # shift register: z^{-1} chain, taps in C
            A = np.diag(np.ones(n - 1), -1) if n else np.zeros((0, 0))  # (diag([], -1): 1x1)
            B = np.zeros((n, m))
            if n:
                B[0] = rng.standard_normal(m)
            C = C * np.exp(-rng.uniform(0.0, 0.5) * np.arange(n))[None, :]  # decaying taps
        else:
            lg = draw(_floats(-1.0, 1.0))
            A = _non_normal(rng, np.zeros(n), 10.0**lg * np.sqrt(max(n, 1)), max_radius)
    return A, B, C


@st.composite
def stable_systems(
    draw,
    *,
    n=(1, 8),
    m=(1, 3),
    p=(1, 3),
    kind=KINDS,
    max_radius: float = 0.95,
    min_distance: float = 1e-4,
    nonnormality: float = 1e3,
    decades: float = 12.0,
    feedthrough: bool = True,
    min_magnitude: float = 1e-6,
    nonminimal: bool = True,
    dt=True,
) -> DiscreteLTI:
    """Strategy for Schur-stable discrete-time systems.

    Parameters
    ----------
    n, m, p : int or (int, int), optional
        Number of states (>= 0), inputs and outputs (>= 1), fixed or a closed range.
    kind : str or sequence of str, optional
        One or several of :data:`KINDS` (see the module docstring); drawn uniformly.
    max_radius : float, optional
        Largest spectral radius of every family but "near_unit_circle", in (0, 1).
    min_distance : float, optional
        Smallest ``1 - |lambda|`` of the "near_unit_circle" family, in
        ``[MIN_DISTANCE_FLOOR, 0.01]`` = ``[1e-12, 0.01]`` (closer, the poles are within the
        solvers' rounding margin of the circle and the system is not stable for them).
    nonnormality : float, optional
        Largest departure from normality ``||N||_F`` of the "non_normal" family (>= 0;
        drawn log-uniformly from 0.1 up to it). It is halved while the computed spectral
        radius exceeds `max_radius`.
    decades : float, optional
        Approximate spread, in decades, of the HSVs of the "hsv_decades" family (> 0).
    feedthrough : bool, optional
        Draw a non-zero ``D`` as well (otherwise ``D = 0``).
    min_magnitude : float, optional
        Entries of ``B``, ``C``, ``D`` below this magnitude are set to exactly 0, in [0, 1).
    nonminimal : bool, optional
        Allow draws with one or two uncontrollable or unobservable states (probability 1/5).
    dt : True or float, optional
        Sampling time of the drawn systems.

    Returns
    -------
    hypothesis.strategies.SearchStrategy
        Draws :class:`~lti.system.DiscreteLTI` with spectral radius < 1.

    Examples
    --------
    >>> from hypothesis import given, settings
    >>> from lti.testing import strategies
    >>> @settings(max_examples=20, deadline=None)
    ... @given(G=strategies.stable_systems(n=(1, 6), kind="non_normal", max_radius=0.9))
    ... def test_stable(G):
    ...     assert G.spectral_radius() <= 0.9 + 1e-12
    >>> test_stable() is None                              # 20 examples, no counterexample
    True
    """
    kinds = (kind,) if isinstance(kind, str) else tuple(kind)
    bad = [k for k in kinds if k not in KINDS]
    if bad or not kinds:
        raise InvalidArgumentError(f"`kind` must be among {KINDS}; got {kind!r}")
    max_radius, min_distance, min_magnitude, nonnormality, decades = (
        _real(k, v) for k, v in (("max_radius", max_radius), ("min_distance", min_distance),
                                 ("min_magnitude", min_magnitude),
                                 ("nonnormality", nonnormality), ("decades", decades)))
    if not 0.0 < max_radius < 1.0:
        raise InvalidArgumentError(f"`max_radius` must be in (0, 1); got {max_radius!r}")
    if not MIN_DISTANCE_FLOOR <= min_distance <= 0.01:
        raise InvalidArgumentError(
            f"`min_distance` must be in [{MIN_DISTANCE_FLOOR:g}, 0.01] (closer to the unit "
            f"circle the poles are within the solvers' rounding margin); got {min_distance!r}"
        )
    if not 0.0 <= min_magnitude < 1.0:
        raise InvalidArgumentError(f"`min_magnitude` must be in [0, 1); got {min_magnitude!r}")
    if not (np.isfinite(nonnormality) and nonnormality >= 0.0):
        raise InvalidArgumentError(f"`nonnormality` must be >= 0; got {nonnormality!r}")
    if not (np.isfinite(decades) and decades > 0.0):
        raise InvalidArgumentError(f"`decades` must be > 0; got {decades!r}")
    n_lo, n_hi = _as_range("n", n, 0)
    m_lo, m_hi = _as_range("m", m, 1)
    p_lo, p_hi = _as_range("p", p, 1)
    fam = draw(st.sampled_from(kinds))
    n = draw(st.integers(n_lo, n_hi))
    m = draw(st.integers(m_lo, m_hi))
    p = draw(st.integers(p_lo, p_hi))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    extra = 0
    if nonminimal and n >= 2 and draw(st.integers(0, 4)) == 4:
        extra = draw(st.integers(1, min(2, n - 1)))
    A, B, C = _family(draw, fam, n - extra, m, p, rng, max_radius, min_distance,
                      nonnormality, decades)
    if extra:  # uncontrollable (B2 = 0) or unobservable (C2 = 0) extra states
        if fam == "near_unit_circle":
            a2 = 1.0 - 10.0 ** rng.uniform(np.log10(min_distance), -2.0, extra)
            A2 = np.diag(a2 * rng.choice([-1.0, 1.0], extra))
        elif fam == "fir":
            A2 = np.zeros((extra, extra))
        else:
            A2 = np.diag(rng.uniform(-max_radius, max_radius, extra))
        unobservable = draw(st.booleans())
        B2 = rng.standard_normal((extra, m)) if unobservable else np.zeros((extra, m))
        C2 = np.zeros((p, extra)) if unobservable else rng.standard_normal((p, extra))
        A, B, C = sla.block_diag(A, A2), np.vstack([B, B2]), np.hstack([C, C2])
        if fam not in ("diagonal", "complex_diagonal"):
            Q = _orthogonal(rng, n)
            A, B, C = Q @ A @ Q.T, Q @ B, C @ Q.T
    if fam in ("non_normal", "fir"):
        A = _robust_radius(A, max_radius)
    D = rng.standard_normal((p, m)) if feedthrough and draw(st.booleans()) else np.zeros((p, m))
    for X in (B, C, D):
        X[np.abs(X) < min_magnitude] = 0.0
    for X in (A, B, C):
        X[np.abs(X) < 1e-150] = 0.0  # no subnormal round-off from the basis changes
    return DiscreteLTI(A, B, C, D, dt)


def _gramian(A: np.ndarray, Q: np.ndarray) -> np.ndarray:
    """scipy's Stein solver by its bilinear (Schur-based) method: unlike its Kronecker
    ("direct") method it stays accurate for strongly non-normal A."""
    return sla.solve_discrete_lyapunov(A, Q, method="bilinear")


#: Largest number of block rows/columns of the Hankel matrix in :func:`minimal_order`.
HANKEL_MAX_BLOCKS = 4096


def _krylov(A: np.ndarray, B: np.ndarray, n_min: int, n_max: int) -> np.ndarray:
    """``[B, A B, ..., A^{N-1} B]`` (n, N m) by repeated products, ``N`` the first
    ``k >= n_min`` at which ``||A^k B||_F <= 1e-8 max_j ||A^j B||_F`` (or ``n_max``)."""
    cols, x, top = [], B, 0.0
    for k in range(n_max):
        nx = float(np.linalg.norm(x))
        top = max(top, nx)
        if k >= n_min and nx <= 1e-8 * top:
            break
        cols.append(x)
        x = A @ x
    return np.hstack(cols) if cols else np.zeros((A.shape[0], 0))


def hankel_lower_bounds(G: DiscreteLTI, P=None, Q=None) -> tuple[np.ndarray, float]:
    """Certified lower bounds of the Hankel singular values and their rounding level.

    The singular values of the finite block Hankel matrix ``H_N = [C A^{i+j} B]_{i,j<N}``
    (computed as those of ``R_o R_c^T`` from QR factorisations of the Krylov matrices
    ``[B, A B, ...]^T`` and ``[C^T, A^T C^T, ...]^T``), independently of any Stein or
    Lyapunov solver. ``H_N`` is a submatrix of the infinite Hankel matrix, whose singular
    values are the HSVs, so in exact arithmetic ``sigma_i(H_N) <= sigma_i(G)`` for every i
    and every N (interlacing); unlike square roots of eigenvalues of a product of formed
    Gramians (accurate only to ``sqrt(eps) sigma_1``) they are computed to an absolute
    accuracy of order eps, so that a (numerically) non-minimal part gives values at that
    level and not at ``1e-8 sigma_1``.

    Parameters
    ----------
    G : DiscreteLTI, python-control system or tuple
        Stable system.
    P, Q : ndarray, optional
        Its Gramians, if already computed (only their traces enter ``err``).

    Returns
    -------
    (ndarray, float)
        ``(s, err)``: the singular values of ``H_N``, shape (min(n, N m, N p),),
        descending, and a first-order bound ``err`` of the rounding in them: the Krylov
        vectors' products ``fl(A x) = A x + e`` with ``|e| <= gamma_n |A| |x|`` perturb
        ``H_N`` by at most ``N gamma_n ||A||_F (||X||_F ||Y_inf||_F + ||Y||_F ||X_inf||_F)``
        in Frobenius norm (``X_inf``, ``Y_inf`` the infinite Krylov matrices, ``||X_inf||_F^2
        = tr P``), and QR and SVD add ``~ 10 N (m + p) eps ||X||_F ||Y||_F``. N is the
        first power at which both Krylov sequences have decayed by 1e-8, at least n + 1
        and at most :data:`HANKEL_MAX_BLOCKS`.
    """
    G = as_discrete_system(G, "G")
    n = G.n
    if n == 0:
        return np.zeros(0), 0.0
    X = _krylov(G.A, G.B, n + 1, HANKEL_MAX_BLOCKS)
    Y = _krylov(G.A.T, G.C.T, n + 1, HANKEL_MAX_BLOCKS)
    N = max(X.shape[1] // G.m, Y.shape[1] // G.p)
    Rc = np.linalg.qr(X.T, mode="r")  # X X^T = Rc^T Rc
    Ro = np.linalg.qr(Y.T, mode="r")
    s = np.linalg.svd(Ro @ Rc.T, compute_uv=False)  # = nonzero singular values of Y^T X
    if P is None:
        P, Q = _gramian(G.A, G.B @ G.B.T), _gramian(G.A.T, G.C.T @ G.C)
    trp, trq = max(float(np.trace(P)), 0.0), max(float(np.trace(Q)), 0.0)
    nx, ny = float(np.linalg.norm(X)), float(np.linalg.norm(Y))
    gamma = n * _EPS / (1.0 - n * _EPS)
    err = N * gamma * float(np.linalg.norm(G.A)) * (nx * np.sqrt(trq) + ny * np.sqrt(trp))
    err += 10.0 * N * (G.m + G.p) * _EPS * nx * ny
    return s, float(err)


def minimal_order(G: DiscreteLTI) -> int:
    """Numerical minimal order of a stable system, independently of :mod:`lti`'s solvers.

    The number of certified lower bounds of the Hankel singular values
    (:func:`hankel_lower_bounds`, the singular values of a finite block Hankel matrix of
    Markov parameters) above the floor
    ``max(1e-11 s_1, 1e4 n eps sqrt(||P|| ||Q||) / (1 - rho^2), 4 err)``: ``P``, ``Q``
    scipy's Gramians (their norms only), ``rho`` the spectral radius, ``1 / (1 - rho^2)``
    the conditioning of the Stein equations, ``err`` the rounding bound of the lower
    bounds. An HSV counted here exceeds its rounding level by a wide margin, so any
    ``0 < r < minimal_order`` is a genuine reduction that a correct code must not cap.

    (The earlier version took ``sqrt(eig(P Q))`` of the formed Gramians: for a nearly
    non-minimal system those are accurate only to ``sqrt(eps ||P|| ||Q||)``, and a system
    whose true HSVs were ``2.23, 9.6e-18, 6.4e-21`` (60-digit arithmetic) got
    ``3.5e-9`` twice and minimal order 3.)
    """
    G = as_discrete_system(G, "G")
    if G.n == 0:
        return 0
    P, Q = _gramian(G.A, G.B @ G.B.T), _gramian(G.A.T, G.C.T @ G.C)
    if not (np.all(np.isfinite(P)) and np.all(np.isfinite(Q))):
        return 0
    s, err = hankel_lower_bounds(G, P, Q)
    if s.size == 0 or not np.all(np.isfinite(s)) or s[0] == 0.0:
        return 0
    rho = float(np.max(np.abs(np.linalg.eigvals(G.A))))
    scale = np.sqrt(np.linalg.norm(P, 2) * np.linalg.norm(Q, 2)) / max(1.0 - rho**2, _EPS)
    floor = max(1e-11 * s[0], 1e4 * G.n * _EPS * scale, 4.0 * err)
    return int(np.count_nonzero(s > floor))


@st.composite
def systems_and_orders(draw, *, orders="mixed", **kwargs):
    """Strategy for pairs ``(G, r)``: a stable system and a reduction order ``0 <= r <= n``.

    Parameters
    ----------
    orders : {"mixed", "reduction", "proper", "any"}, optional
        ``"mixed"`` (default): nine draws in ten a real reduction ``0 < r < n_min``
        (``n_min`` = :func:`minimal_order`; drawn on systems with ``n >= 2``), the tenth an
        edge order ``0``, ``n_min`` or ``n``. ``"reduction"``: always ``0 < r < n_min``
        (systems with ``n_min < 2`` are rejected, so the range of `n` must allow
        ``n >= 2``). ``"proper"``: ``0 < r < n`` (needs ``n >= 2``). ``"any"``:
        ``0 <= r <= n`` uniformly.
    **kwargs
        Passed to :func:`stable_systems`.

    Returns
    -------
    hypothesis.strategies.SearchStrategy
        Draws ``(DiscreteLTI, int)``.

    Examples
    --------
    >>> from hypothesis import given, settings
    >>> from lti.testing import strategies
    >>> @settings(max_examples=10, deadline=None)
    ... @given(case=strategies.systems_and_orders(n=(2, 5), orders="proper"))
    ... def test_orders(case):
    ...     G, r = case
    ...     assert 0 < r < G.n
    >>> test_orders() is None
    True
    """
    if orders not in ORDERS:
        raise InvalidArgumentError(f"`orders` must be one of {ORDERS}; got {orders!r}")
    lo, hi = _as_range("n", kwargs.get("n", (1, 8)), 0)
    edge = orders == "any" or (orders == "mixed" and draw(st.integers(0, 9)) == 0)
    if not edge:
        if hi < 2:
            raise InvalidArgumentError(
                f"orders={orders!r} needs systems with n >= 2 states; got n = {kwargs['n']!r}"
            )
        kwargs["n"] = (max(lo, 2), hi)
    G = draw(stable_systems(**kwargs))
    if orders == "any":
        return G, draw(st.integers(0, G.n))
    if orders == "proper":
        return G, draw(st.integers(1, G.n - 1))
    nmin = minimal_order(G)
    if edge:
        return G, draw(st.sampled_from(sorted({0, nmin, G.n})))
    if nmin < 2:
        if orders == "reduction":
            from hypothesis import assume

            assume(False)
        return G, draw(st.sampled_from(sorted({0, nmin, G.n})))
    return G, draw(st.integers(1, nmin - 1))
