"""Hypothesis strategies for stable discrete-time LTI systems, for property tests.

Every strategy draws a Schur-stable :class:`~lti.system.DiscreteLTI` whose spectral radius
never exceeds the `max_radius` knob. The families (`kind`) cover what breaks reduction
codes:

``"dense"``
    Random dense ``A`` rescaled to a drawn spectral radius.
``"diagonal"``
    Real diagonal ``A`` (the adapters' real modes).
``"complex_diagonal"``
    Complex-conjugate pole pairs in real 2x2 block form (``DiscreteLTI.from_diagonal``).
``"near_unit_circle"``
    Lightly damped poles with ``1 - |lambda|`` down to `min_distance` (large gains, sharp
    resonances), in a random orthogonal basis.
``"non_normal"``
    ``A = Q (Lambda + N) Q^T`` with a strictly upper triangular ``N`` of size up to
    `nonnormality` times the spectral radius: the spectrum is fixed, the transient
    growth is not.
``"hsv_decades"``
    Modal systems whose inputs and outputs are scaled geometrically so that the Hankel
    singular values spread over about `decades` decades, in a random orthogonal basis.

Entries are drawn by hypothesis itself (not from a seeded generator), so failing examples
shrink to small, readable systems (zero rows of ``B``, zero columns of ``C`` and so on:
non-minimal systems are part of the search space).

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

from lti.exceptions import InvalidArgumentError, MissingDependencyError
from lti.system import DiscreteLTI

try:
    from hypothesis import strategies as st
    from hypothesis.extra import numpy as hnp
except ImportError as exc:  # pragma: no cover - depends on the environment
    raise MissingDependencyError(
        'lti.testing.strategies needs hypothesis; install it with pip install "lti-adapters[test]"'
    ) from exc

__all__ = ["KINDS", "stable_systems", "systems_and_orders"]

#: The system families :func:`stable_systems` can draw from.
KINDS = (
    "dense",
    "diagonal",
    "complex_diagonal",
    "near_unit_circle",
    "non_normal",
    "hsv_decades",
)


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


def _floats(lo: float, hi: float):
    return st.floats(lo, hi, allow_nan=False, allow_infinity=False)


def _matrix(draw, shape, lo=-1.0, hi=1.0, tiny=0.0) -> np.ndarray:
    X = draw(hnp.arrays(np.float64, shape, elements=_floats(lo, hi)))
    X[np.abs(X) < tiny] = 0.0  # exact zeros stay (structure); no absurd magnitudes
    return X


def _orthogonal(draw, n: int) -> np.ndarray:
    """A random orthogonal matrix (QR of a drawn matrix; identity when degenerate)."""
    if n == 0:
        return np.eye(0)
    M = _matrix(draw, (n, n), tiny=1e-6) + 2.0 * np.eye(n)  # shifted: never singular
    Q, R = np.linalg.qr(M)
    Q = Q * np.sign(np.where(np.diag(R) == 0, 1.0, np.diag(R)))
    Q[np.abs(Q) < 1e-150] = 0.0  # no subnormal entries from exact-zero rotations
    return Q


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
    nonnormality: float = 10.0,
    decades: float = 12.0,
    feedthrough: bool = True,
    min_magnitude: float = 1e-6,
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
        Largest spectral radius for the "dense", "diagonal", "complex_diagonal",
        "non_normal" and "hsv_decades" families, in (0, 1).
    min_distance : float, optional
        Smallest ``1 - |lambda|`` of the "near_unit_circle" family, in (0, 0.01].
    nonnormality : float, optional
        Largest entry of the strictly upper triangular part of the "non_normal" family,
        relative to the spectral radius (>= 0).
    decades : float, optional
        Approximate spread, in decades, of the HSVs of the "hsv_decades" family (> 0).
    feedthrough : bool, optional
        Draw a non-zero ``D`` as well (otherwise ``D = 0``).
    min_magnitude : float, optional
        Drawn entries (of ``B``, ``C``, ``D``, of the dense / non-normal parts of ``A``,
        and eigenvalues or pole radii) below this magnitude are set to exactly 0 (>= 0).
        Zeros (non-minimal systems) remain in the search space, entries like 1e-300 next
        to 1 do not; pass 0 to allow them.
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
    if not 0.0 < max_radius < 1.0:
        raise InvalidArgumentError(f"`max_radius` must be in (0, 1); got {max_radius!r}")
    if not 0.0 < min_distance <= 0.01:
        raise InvalidArgumentError(f"`min_distance` must be in (0, 0.01]; got {min_distance!r}")
    if not 0.0 <= min_magnitude < 1.0:
        raise InvalidArgumentError(f"`min_magnitude` must be in [0, 1); got {min_magnitude!r}")
    tiny = float(min_magnitude)
    n_lo, n_hi = _as_range("n", n, 0)
    m_lo, m_hi = _as_range("m", m, 1)
    p_lo, p_hi = _as_range("p", p, 1)
    fam = draw(st.sampled_from(kinds))
    n = draw(st.integers(n_lo, n_hi))
    m = draw(st.integers(m_lo, m_hi))
    p = draw(st.integers(p_lo, p_hi))
    B = _matrix(draw, (n, m), tiny=tiny)
    C = _matrix(draw, (p, n), tiny=tiny)
    D = _matrix(draw, (p, m), tiny=tiny) if feedthrough else None
    if fam == "dense":
        M = _matrix(draw, (n, n), tiny=tiny)
        rho = draw(_floats(0.0, max_radius))
        rho = rho if rho >= tiny else 0.0
        r0 = float(np.max(np.abs(np.linalg.eigvals(M)))) if n else 0.0
        A = M * (rho / r0) if r0 > 1e-8 else M * 0.0
    elif fam == "diagonal":
        a = draw(hnp.arrays(np.float64, (n,), elements=_floats(-max_radius, max_radius)))
        A = np.diag(np.where(np.abs(a) < tiny, 0.0, a))
    elif fam in ("complex_diagonal", "near_unit_circle", "hsv_decades"):
        if fam == "near_unit_circle":
            lg = draw(hnp.arrays(np.float64, (n,), elements=_floats(np.log10(min_distance), -2.0)))
            radii = 1.0 - 10.0**lg
        else:
            radii = draw(hnp.arrays(np.float64, (n,), elements=_floats(0.0, max_radius)))
        radii[radii < tiny] = 0.0
        angles = draw(hnp.arrays(np.float64, (n,), elements=_floats(0.0, np.pi)))
        if fam == "complex_diagonal":
            angles = np.clip(angles, 1e-3, np.pi - 1e-3)  # genuine pairs (plus a real one)
        A = _modal(radii, angles, n)
        if fam == "hsv_decades" and n:
            w = 10.0 ** (-0.5 * float(decades) * np.arange(n) / max(n - 1, 1))
            B = B * w[:, None] + w[:, None] * 1e-3  # no exactly zero rows: spread, not drop
            C = C * w[None, :] + w[None, :] * 1e-3
        if fam != "complex_diagonal":
            Q = _orthogonal(draw, n)
            A, B, C = Q @ A @ Q.T, Q @ B, C @ Q.T
    else:  # non_normal
        lam = draw(hnp.arrays(np.float64, (n,), elements=_floats(-max_radius, max_radius)))
        lam[np.abs(lam) < tiny] = 0.0
        N = np.triu(_matrix(draw, (n, n), -nonnormality, nonnormality, tiny), 1)
        scale = max(float(np.max(np.abs(lam), initial=0.0)), 0.1)
        Q = _orthogonal(draw, n)
        A = Q @ (np.diag(lam) + scale * N) @ Q.T
    for X in (A, B, C):
        X[np.abs(X) < 1e-150] = 0.0  # no subnormal round-off from the basis changes
    return DiscreteLTI(A, B, C, D, dt)


@st.composite
def systems_and_orders(draw, *, orders="any", **kwargs):
    """Strategy for pairs ``(G, r)``: a stable system and a reduction order ``0 <= r <= n``.

    Parameters
    ----------
    orders : {"any", "proper"}, optional
        ``"proper"`` restricts to ``0 < r < n`` (needs ``n >= 2``).
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
    if orders not in ("any", "proper"):
        raise InvalidArgumentError(f"`orders` must be 'any' or 'proper'; got {orders!r}")
    if orders == "proper":
        lo, hi = _as_range("n", kwargs.get("n", (2, 8)), 0)
        if hi < 2:
            raise InvalidArgumentError(
                f'orders="proper" needs systems with n >= 2 states; got n = {kwargs["n"]!r}'
            )
        kwargs["n"] = (max(lo, 2), hi)
    G = draw(stable_systems(**kwargs))
    if orders == "proper":
        return G, draw(st.integers(1, G.n - 1))
    return G, draw(st.integers(0, G.n))
