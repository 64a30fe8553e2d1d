"""System norms of stable discrete-time LTI systems: H2, Hankel and (exact) H-infinity.

For a Schur-stable ``G(z) = C (zI - A)^{-1} B + D`` with Gramian factors
``P = Lc Lc^T`` (controllability) and ``Q = Lo Lo^T`` (observability):

* ``h2_norm``: :math:`\\|G\\|_2^2 = \\|D\\|_F^2 + \\sum_{k\\ge0} \\|C A^k B\\|_F^2
  = \\|D\\|_F^2 + \\|C L_c\\|_F^2` (the impulse-response energy, ``D`` included);
* ``hankel_norm``: :math:`\\|G\\|_H = \\sigma_1 = \\|L_o^T L_c\\|_2`, the largest Hankel
  singular value (it does not depend on ``D``);
* ``hinf_norm``: :math:`\\|G\\|_\\infty = \\max_{\\theta \\in [0, \\pi]}
  \\sigma_{\\max}(G(e^{j\\theta}))`, computed to a relative tolerance by a level-set
  (Boyd--Balakrishnan / Bruinsma--Steinbuch) iteration, together with the peak frequency.

Systems are :class:`~lti.system.DiscreteLTI` objects, discrete-time python-control
``StateSpace`` or ``TransferFunction`` objects (``dt`` True or a positive number) or tuples
``(A, B, C[, D])``, all converted by :func:`lti.system.as_discrete_system`.
"""

from __future__ import annotations

import numbers

import numpy as np
import scipy.linalg as sla
from scipy.optimize import minimize_scalar

from lti._validation import balanced_margin, stability_margin, unstable_message
from lti.balanced import hankel_singular_values
from lti.exceptions import InvalidArgumentError, NonFiniteError, SolverError, UnstableSystemError
from lti.lowrank import dense_only, is_sparse
from lti.lyapunov import lyapunov_factor
from lti.system import DiscreteLTI, as_discrete_system, is_control_system

__all__ = ["HinfNorm", "as_discrete_system", "h2_norm", "hankel_norm", "hinf_norm"]

_EPS = np.finfo(np.float64).eps


def _require_stable(G: DiscreteLTI, what: str) -> None:
    """UnstableSystemError unless ``rho(A) < 1 - margin`` (``lti._validation.stability_margin``):
    a pole within rounding of the unit circle makes the norm infinite as far as floating
    point can tell (python-control's sampled undamped oscillator, rho = 1 - 3e-16)."""
    rho = G.spectral_radius()
    A = G.A.toarray() if is_sparse(G.A) else G.A
    margin = stability_margin(G.n, _fro(A))
    if not rho < 1.0 - margin:  # a badly scaled A: the margin of its balanced form
        rho, margin = balanced_margin(A, margin, rho)
    if not rho < 1.0 - margin:
        raise UnstableSystemError(
            f"the {what} is defined for Schur-stable systems only: "
            + unstable_message("`sys.A`", rho, margin)
        )


def _fro(X) -> float:
    """Frobenius norm without under/overflow of the squares: BLAS ``nrm2`` on the flat
    array (scaled sum of squares), where ``np.linalg.norm`` squares the entries and
    returns inf at 1e160 and 0 at 1e-170."""
    return float(sla.norm(np.ravel(X), check_finite=False)) if np.size(X) else 0.0


def _pow2_exponent(X) -> int:
    """``e`` with ``max|X| = f 2^e``, ``0.5 <= f < 1`` (0 for a zero or empty X): dividing
    by ``2^e`` (``np.ldexp(X, -e)``) is exact and brings the largest entry to [0.5, 1)."""
    mx = float(np.max(np.abs(X), initial=0.0))
    return int(np.frexp(mx)[1]) if mx > 0.0 else 0


# ------------------------------------------------------------------------ H2, Hankel


def h2_norm(sys) -> float:
    """H2 norm of a stable discrete-time system.

    Parameters
    ----------
    sys : DiscreteLTI, python-control system or tuple
        Schur-stable system with n states, m inputs, p outputs.

    Returns
    -------
    float
        :math:`\\|G\\|_2`. For a sparse ``A``: from the low-rank ADI factor
        (:mod:`lti.lowrank`), a lower bound accurate to about its residual (``Pk <= P``).

    Raises
    ------
    UnstableSystemError
        Spectral radius of ``A`` >= 1 (the norm is infinite).
    InvalidArgumentError
        `sys` is not a discrete-time system.
    NonFiniteError
        The norm is beyond the float64 range (as :func:`hankel_norm`, :func:`hinf_norm`).

    Notes
    -----
    .. math::

        \\|G\\|_2^2 = \\|D\\|_F^2 + \\sum_{k \\ge 0} \\|C A^k B\\|_F^2
                   = \\|D\\|_F^2 + \\operatorname{tr}(C P C^T)
                   = \\|D\\|_F^2 + \\|C L_c\\|_F^2,

    with ``P = Lc Lc^T`` the controllability Gramian, whose factor comes from
    :func:`lti.lyapunov.lyapunov_factor` (the Gramian itself is never formed). Scale-safe:
    the factor is computed for ``B`` and the energy for ``C`` divided by powers of two (exact),
    the Frobenius norms by scaled sums of squares (BLAS ``nrm2``) and ``D``'s part joined by
    ``hypot``: no under/overflow unless the norm itself is not representable.

    Examples
    --------
    >>> import numpy as np
    >>> from lti import DiscreteLTI, h2_norm
    >>> G = DiscreteLTI([[0.5]], [[1.0]], [[1.0]], [[0.5]])   # 0.5 + 1/(z - 0.5)
    >>> exact = np.sqrt(0.25 + 1.0 / (1.0 - 0.25))             # D^2 + sum 0.25^k
    >>> bool(abs(h2_norm(G) - exact) < 1e-14)
    True
    """
    G = as_discrete_system(sys)
    if not is_sparse(G.A):  # sparse: the ADI checks its Ritz values instead
        _require_stable(G, "H2 norm")
    d = _fro(G.D)
    if not G.n:  # (B = 0 or C = 0 still goes through the solver: its stability check)
        return d
    # scale-invariant: the Stein equation is solved for B / 2^eb and the output energy
    # taken of C / 2^ec (both exact), the norms by scaled sums of squares, and the powers
    # of two put back at the end: no under/overflow unless the norm itself is not
    # representable (B * 1e-170 gave 0 and B * 1e160 inf by squaring the entries)
    eb, ec = _pow2_exponent(G.B), _pow2_exponent(G.C)
    Lc = lyapunov_factor(G.A, np.ldexp(G.B, -eb))
    e = _fro(np.ldexp(G.C, -ec) @ Lc)
    with np.errstate(over="ignore"):
        value = float(np.hypot(d, np.ldexp(e, eb + ec)))
    if not value < np.inf:  # as hinf_norm and hankel_norm: typed, not inf with a warning
        raise NonFiniteError(
            f"the H2 norm of `sys` overflows float64 (max|B| = {np.max(np.abs(G.B)):.3g}, "
            f"max|C| = {np.max(np.abs(G.C)):.3g}, ||D||_F = {d:.3g}): it is beyond the float "
            "range; scale B, C (and D) down and the norm up")
    return value


def hankel_norm(sys) -> float:
    """Hankel norm of a stable discrete-time system: its largest Hankel singular value.

    Parameters
    ----------
    sys : DiscreteLTI, python-control system or tuple
        Schur-stable system.

    Returns
    -------
    float
        :math:`\\sigma_1 = \\|L_o^T L_c\\|_2` (0 for a system without states).

    Raises
    ------
    UnstableSystemError
        Spectral radius of ``A`` >= 1.
    NonFiniteError
        The norm is beyond the float64 range.

    Notes
    -----
    The Hankel operator maps past inputs to future outputs; its norm is
    :math:`\\sigma_1 = \\sqrt{\\lambda_{\\max}(PQ)}`, computed as the largest singular value
    of the product of the Gramian factors (see :func:`lti.hankel_singular_values`).
    Always :math:`\\sigma_1 \\le \\|G - D\\|_\\infty`.

    Examples
    --------
    >>> from lti import DiscreteLTI, hankel_norm
    >>> G = DiscreteLTI([[0.5]], [[1.0]], [[1.0]])            # P = Q = 1/(1 - 0.25)
    >>> bool(abs(hankel_norm(G) - 1.0 / 0.75) < 1e-14)
    True
    """
    hsv = hankel_singular_values(sys)
    s1 = float(hsv[0]) if hsv.size else 0.0
    if not np.isfinite(s1):  # (hankel_singular_values gives inf there)
        raise NonFiniteError("the Hankel norm of `sys` overflows float64 (the product of the "
                             "Gramian factors is beyond the float range); scale B or C down")
    return s1


# ----------------------------------------------------------------------------- Hinf


class HinfNorm(tuple):
    """Result of :func:`hinf_norm`; unpacks as ``value, omega = hinf_norm(G)``.

    Attributes
    ----------
    value : float
        :math:`\\|G\\|_\\infty`.
    omega : float
        Peak frequency. For a :class:`~lti.system.DiscreteLTI` (or a tuple) in rad/sample, in
        ``[0, pi]``: ``sigma_max(G(exp(1j * omega))) == value``, whatever ``dt``. For a
        python-control system, as ``control.linfnorm`` reports it: in rad/s,
        ``omega_rad_per_sample / dt`` (``dt = True`` counts as 1), in ``[0, pi / dt]``.
    accuracy : float
        Estimated relative accuracy of ``value``: ``2 tol`` (the level-set certificate)
        plus ``8 n eps ||zI - A||_F ||(zI - A)^{-1}||_2`` at the peak ``z`` (the rounding
        of evaluating the gain there by an LU solve, after equilibration). ``nan`` when not
        computed. An estimate, not a proof (see :func:`hinf_norm`, Notes).
    """

    __slots__ = ()

    def __new__(cls, value, omega, accuracy=float("nan")):
        return super().__new__(cls, (float(value), float(omega), float(accuracy)))

    def __iter__(self):  # two items, as the named tuple it replaces
        return iter(tuple.__getitem__(self, slice(0, 2)))

    def __len__(self) -> int:
        return 2

    def __getitem__(self, k):
        return tuple.__getitem__(self, slice(0, 2))[k]

    def __eq__(self, other):
        return tuple(self) == tuple(other) if isinstance(other, tuple) else NotImplemented

    def __hash__(self):
        return hash(tuple(self))

    # the rest of the tuple protocol on the pair too (tuple's own methods see the hidden
    # third item): copy / deepcopy / pickle rebuild all three fields through __new__
    def __getnewargs__(self):
        return tuple.__getitem__(self, slice(0, 3))

    def _pair(self) -> tuple:
        return tuple.__getitem__(self, slice(0, 2))

    def __add__(self, other):
        return self._pair() + other

    def __radd__(self, other):
        return other + self._pair()

    def __mul__(self, k):
        return self._pair() * k

    __rmul__ = __mul__

    def __contains__(self, x) -> bool:
        return x in self._pair()

    def count(self, x) -> int:
        return self._pair().count(x)

    def index(self, x, *args) -> int:
        return self._pair().index(x, *args)

    def __lt__(self, other):
        return self._pair() < other

    def __le__(self, other):
        return self._pair() <= other

    def __gt__(self, other):
        return self._pair() > other

    def __ge__(self, other):
        return self._pair() >= other

    @property
    def value(self) -> float:
        return tuple.__getitem__(self, 0)

    @property
    def omega(self) -> float:
        return tuple.__getitem__(self, 1)

    @property
    def accuracy(self) -> float:
        return tuple.__getitem__(self, 2)

    def __repr__(self) -> str:
        return f"HinfNorm(value={self.value!r}, omega={self.omega!r}, accuracy={self.accuracy:.2g})"


def _check_tol(tol) -> float:
    if isinstance(tol, bool) or not isinstance(tol, numbers.Real) or not (
        0.0 < tol < 1e-2  # (compared first: a Fraction or a huge int, no np.isfinite)
    ):
        raise InvalidArgumentError(f"`tol` must be a number in (0, 0.01); got {tol!r}")
    return max(float(tol), 10.0 * _EPS)


def _sigma_max(G: DiscreteLTI, theta) -> np.ndarray:
    """Largest singular value of G(e^{j theta}), vectorised over theta (shape (k,))."""
    H = G._frequency_response(np.atleast_1d(theta), refine=False)  # (k, p, m)
    return np.linalg.svd(H, compute_uv=False)[:, 0]


def _wrap_fold(theta: np.ndarray) -> np.ndarray:
    """Map angles to [0, pi] using sigma_max(G(e^{-j t})) == sigma_max(G(e^{j t}))."""
    return np.abs(np.angle(np.exp(1j * theta)))


class _Cayley:
    """Bilinear map of the unit circle onto the imaginary axis, centred at z_c.

    With ``rho = -z_c`` and ``G~(z) = G(rho z)`` (``A~ = conj(rho) A``,
    ``C~ = conj(rho) C``), the continuous-time system
    ``Ac = M (A~ - I)``, ``Bc = sqrt(2) M B``, ``Cc = sqrt(2) C~ M``, ``Dc = D - C~ M B``
    with ``M = (I + A~)^{-1}`` satisfies ``Gc(j w) = G(rho e^{j 2 atan(w)})``; the point
    ``z_c`` itself goes to ``s = infinity`` (so ``Dc = G(z_c)``).
    """

    def __init__(self, G: DiscreteLTI, theta_c: float):
        if abs(np.sin(theta_c)) < 1e-12:
            rho = float(np.sign(-np.cos(theta_c)))  # real: z_c = -1 -> rho = 1, +1 -> -1
        else:
            rho = -np.exp(1j * theta_c)
        self.arg_rho = float(np.angle(rho))
        n = G.n
        At = np.conj(rho) * G.A
        Ct = np.conj(rho) * G.C
        lu = sla.lu_factor(np.eye(n) + At, check_finite=False)
        MB = sla.lu_solve(lu, G.B, check_finite=False)
        # C~ M = (M^T C~^T)^T; lu_solve with trans=1 solves (I + A~)^T X = C~^T
        CtM = sla.lu_solve(lu, Ct.T, trans=1, check_finite=False).T
        self.Ac = sla.lu_solve(lu, At - np.eye(n), check_finite=False)
        self.Bc = np.sqrt(2.0) * MB
        self.Cc = np.sqrt(2.0) * CtM
        self.Dc = G.D - Ct @ MB

    def crossings(self, gamma: float, im_tol: float) -> np.ndarray:
        """Angles in [0, pi] where some singular value of G(e^{j theta}) equals gamma.

        They are the imaginary eigenvalues ``j w`` of the Hamiltonian matrix of the
        Cayley-transformed system at level gamma (requires gamma > sigma_max(Dc)).
        """
        Ac, Bc, Cc, Dc = self.Ac, self.Bc, self.Cc, self.Dc
        m, p = Bc.shape[1], Cc.shape[0]
        R = Dc.conj().T @ Dc - gamma**2 * np.eye(m)  # (m, m), negative definite
        S = Dc @ Dc.conj().T - gamma**2 * np.eye(p)  # (p, p), negative definite
        RiDC = np.linalg.solve(R, Dc.conj().T @ Cc)  # R^{-1} Dc^H Cc, (m, n)
        RiBh = np.linalg.solve(R, Bc.conj().T)  # R^{-1} Bc^H, (m, n)
        SiC = np.linalg.solve(S, Cc)  # S^{-1} Cc, (p, n)
        F = Ac - Bc @ RiDC
        H = np.block([[F, -gamma * Bc @ RiBh], [gamma * Cc.conj().T @ SiC, -F.conj().T]])
        if not np.all(np.isfinite(H)):
            raise SolverError(f"Hamiltonian at level gamma = {gamma:.6g} is not finite")
        lam = sla.eigvals(H, overwrite_a=True, check_finite=False)
        scale = max(1.0, float(np.max(np.abs(lam))))
        on_axis = np.abs(lam.real) <= im_tol * np.maximum(1.0, np.abs(lam)) + 1e3 * _EPS * scale
        w = lam.imag[on_axis]
        theta = 2.0 * np.arctan(w) + self.arg_rho
        return np.sort(_wrap_fold(theta))


def _choose_cayley_point(G: DiscreteLTI, theta_grid, f_grid, gamma_lb) -> float:
    """Centre of the Cayley map: a unit-circle point far from the poles where the gain
    is well below the current lower bound (so that the Hamiltonian stays well scaled).
    Real points (z = -1, z = +1) are preferred: they keep the eigenproblem real."""
    poles = G.poles()
    z = np.exp(1j * theta_grid)
    dist = np.min(np.abs(z[:, None] - poles[None, :]), axis=1)  # (k,)
    low = f_grid <= 0.9 * gamma_lb
    ok = low & (dist >= 1e-3)
    for theta_real in (np.pi, 0.0):
        i = int(np.argmin(np.abs(theta_grid - theta_real)))
        if abs(theta_grid[i] - theta_real) < 1e-14 and ok[i]:
            return theta_real
    if np.any(ok):
        cand = np.flatnonzero(ok)
        return float(theta_grid[cand[np.argmax(dist[cand])]])
    # flat gain (e.g. all-pass): favour the farthest point from the poles
    return float(theta_grid[np.argmax(dist - 1e3 * np.maximum(f_grid - 0.9 * gamma_lb, 0))])


def _polish(G: DiscreteLTI, lo: float, hi: float, theta0: float, f0: float):
    """Local maximisation of sigma_max on [lo, hi] (Brent); never returns less than f0."""
    if hi - lo <= 1e-14:
        return theta0, f0
    res = minimize_scalar(
        lambda t: -_sigma_max(G, t)[0],
        bounds=(lo, hi),
        method="bounded",
        options={"xatol": 1e-13 * max(1.0, abs(theta0)), "maxiter": 200},
    )
    if np.isfinite(res.fun) and -res.fun > f0:
        return float(res.x), float(-res.fun)
    return theta0, f0


def _compress_io(G: DiscreteLTI) -> DiscreteLTI:
    """Same singular values of ``G(z)`` at every z with fewer inputs/outputs when possible.

    ``G(z) = [C (zI - A)^{-1}, I] [B; D]``; an orthogonal factor on the right of
    ``[B; D]`` (QR of ``[B; D]^T``) changes no singular value, so ``[B; D]`` is replaced by
    its square triangular factor: ``n + p`` inputs, or ``n`` when ``D = 0`` (only ``B``
    is factored). Dually ``[C, D]`` on the output side.
    """
    n, m, p = G.n, G.m, G.p
    zero_d = not np.any(G.D)
    k = n if zero_d else n + p  # rank bound of [B; D]
    if m > k:
        M = G.B if zero_d else np.vstack([G.B, G.D])
        R = sla.qr(M.T, mode="r", check_finite=False)[0][:k]  # M^T = Q R, M = R^T Q^T
        G = DiscreteLTI(G.A, R[:, :n].T, G.C, np.zeros((p, k)) if zero_d else R[:, n:].T,
                        G.dt)
        m = k
    k = n if zero_d else n + m  # rank bound of [C, D]
    if p > k:
        M = G.C if zero_d else np.hstack([G.C, G.D])
        R = sla.qr(M, mode="r", check_finite=False)[0][:k]  # M = Q R
        G = DiscreteLTI(G.A, G.B, R[:, :n], np.zeros((k, m)) if zero_d else R[:, n:], G.dt)
    return G


def hinf_norm(sys, *, tol: float = 1e-10) -> HinfNorm:
    """Exact H-infinity norm of a stable discrete-time system and its peak frequency.

    Parameters
    ----------
    sys : DiscreteLTI, python-control system or tuple
        Schur-stable system with n states, m inputs, p outputs (``D`` included).
    tol : float, optional
        Relative tolerance of the level-set iteration, in (0, 0.01). The returned value is
        the gain at an actual frequency, evaluated in floating point; it is within
        ``accuracy`` (relative, reported on the result: ``2 tol`` plus the rounding of that
        evaluation) of the true norm, and may lie slightly above it by that rounding.

    Returns
    -------
    HinfNorm
        Unpacks as ``(value, omega)``: :math:`\\|G\\|_\\infty` and the peak frequency
        ``omega`` in ``[0, pi]`` rad/sample; in rad/s (``omega / dt``) when `sys` is a
        python-control system, as ``control.linfnorm`` reports it (see :class:`HinfNorm`);
        ``.accuracy`` is the estimated relative accuracy of ``value``.

    Raises
    ------
    UnstableSystemError
        Spectral radius of ``A`` >= 1, or within the rounding margin of the unit circle
        (the norm is infinite as far as floating point can tell).
    InvalidArgumentError
        Bad `tol`, or `sys` not a discrete-time system.
    SolverError
        The Hamiltonian could not be formed (non-finite entries).

    Notes
    -----
    :math:`\\|G\\|_\\infty = \\max_{\\theta} \\sigma_{\\max}(G(e^{j\\theta}))`. A level
    ``gamma`` is crossed at frequency ``theta`` exactly when ``gamma`` is a singular value of
    ``G(e^{j theta})``. The unit circle is mapped to the imaginary axis by the Cayley
    (bilinear) transform ``z = z_c (1 + s) / (s - 1)`` centred at a point ``z_c`` of the
    circle chosen far from the poles and where the gain is low (``z_c = -1`` or ``+1``
    when possible, so the eigenproblem stays real); then ``gamma`` is a singular value of
    ``G`` at ``theta`` iff ``j w`` (``theta = arg z``) is an eigenvalue of the
    Hamiltonian matrix of the transformed system ``(Ac, Bc, Cc, Dc)``

    .. math::

        H(\\gamma) = \\begin{bmatrix} A_c - B_c R^{-1} D_c^H C_c & -\\gamma B_c R^{-1} B_c^H \\\\
        \\gamma C_c^H S^{-1} C_c & -(A_c - B_c R^{-1} D_c^H C_c)^H \\end{bmatrix},
        \\quad R = D_c^H D_c - \\gamma^2 I,\\ S = D_c D_c^H - \\gamma^2 I.

    ``R`` and ``S`` must be negative definite: ``gamma > sigma_max(D_c)`` where
    ``D_c = G(z_c)`` is the gain at the Cayley centre, not the ``D`` of ``G`` (that is
    the continuous-time condition, at ``s = infinity``); the centre is chosen where the
    gain is at most ``0.9 gamma_lb``, so every level tried qualifies.

    Two-step algorithm (Bruinsma & Steinbuch 1990; Boyd & Balakrishnan 1990): a lower
    bound ``gamma_lb`` from the gain at ``0``, ``pi``, the pole angles and a coarse grid,
    refined locally; then repeatedly take ``gamma = (1 + 2 tol) gamma_lb``, find the
    crossing frequencies, evaluate the gain at the midpoints of consecutive crossings and
    raise ``gamma_lb`` (again refined locally). When there is no crossing at
    ``gamma``, :math:`\\gamma_{lb} \\le \\|G\\|_\\infty < (1 + 2\\,tol)\\gamma_{lb}` in exact
    arithmetic. In floating point this holds up to (a) the rounding of each gain
    evaluation, about ``n eps`` times the condition ``||zI - A|| ||(zI - A)^{-1}||`` at that
    frequency (large for lightly damped poles), and (b) the test for imaginary
    eigenvalues of the Hamiltonian (relative tolerance 1e-8 on their real parts), which
    can miss a crossing of a very narrow peak; ``accuracy`` estimates (a) at the
    returned peak, (b) is not quantified. Each step costs one eigenvalue problem of size
    2n; the gains are evaluated on the original (equilibrated) system, never on the
    transformed one: during the search by :meth:`DiscreteLTI.frequency_response`, and the
    returned value by one LU solve of ``(zI - A) X = B`` at the peak. Before anything,
    ``A`` is equilibrated by a diagonal similarity with powers of 2 (LAPACK ``gebal``,
    no permutation), which changes no transfer function and keeps the rounding of badly
    scaled realisations relative.
    Systems with more inputs than ``n + p`` (outputs than ``n + m``; ``n`` for ``D = 0``)
    are first compressed: :math:`G(z) = [C (zI - A)^{-1}, I] [B; D]` and an orthogonal
    factor on the right of ``[B; D]`` (from its QR decomposition, transposed) changes no
    singular value, so ``[B; D]`` is replaced by its square triangular factor (dually
    ``[C, D]`` on the left).

    References: S. Boyd, V. Balakrishnan, Systems & Control Letters 15 (1990) 1-7;
    N. A. Bruinsma, M. Steinbuch, Systems & Control Letters 14 (1990) 287-293.

    Examples
    --------
    >>> import numpy as np
    >>> from lti import DiscreteLTI, hinf_norm
    >>> G = DiscreteLTI([[0.5]], [[1.0]], [[1.0]])     # 1 / (z - 0.5): peak 2 at z = 1
    >>> value, omega = hinf_norm(G)
    >>> bool(abs(value - 2.0) < 1e-13 and omega == 0.0)
    True
    """
    tol = _check_tol(tol)
    G = as_discrete_system(sys)
    dense_only("hinf_norm()", G)
    if is_control_system(sys):  # python-control's convention (control.linfnorm): rad/s
        res = hinf_norm(G, tol=tol)
        return HinfNorm(res.value, res.omega / (1.0 if G.dt is True else G.dt), res.accuracy)
    _require_stable(G, "H-infinity norm")
    if G.n == 0 or G.m == 0 or G.p == 0:
        d = float(np.linalg.norm(G.D, 2)) if G.D.size else 0.0
        return HinfNorm(d, 0.0, 4.0 * _EPS)
    G = _compress_io(G)  # wide or tall: at most n + p inputs and n + m outputs
    G = _equilibrate(G)  # diagonal similarity by powers of 2: same G(z), better rounding
    # ---- step 1: lower bound from a coarse grid, pole angles, 0 and pi
    poles = G.poles()
    near = np.argsort(-np.abs(poles))[:64]  # poles closest to the circle
    theta = np.unique(
        np.concatenate([np.linspace(0.0, np.pi, 65), _wrap_fold(np.angle(poles[near]))])
    )
    with np.errstate(over="ignore", invalid="ignore"):
        H0 = G._frequency_response(theta, refine=False)  # (k, p, m)
    if not np.all(np.isfinite(H0)):  # (not a NaN lower bound passed on as `C / gamma`)
        raise NonFiniteError(
            "the frequency response of `sys` overflows float64 (max|B| = "
            f"{np.max(np.abs(G.B)):.3g}, max|C| = {np.max(np.abs(G.C)):.3g}): the H-infinity "
            "norm is at or beyond the float range; scale B or C down and the norm up"
        )
    f = np.linalg.svd(H0, compute_uv=False)[:, 0]  # _sigma_max(G, theta)
    i = int(np.argmax(f))
    lo, hi = theta[max(i - 1, 0)], theta[min(i + 1, theta.size - 1)]
    theta_pk, gamma_lb = _polish(G, lo, hi, float(theta[i]), float(f[i]))
    if gamma_lb == 0.0:
        return HinfNorm(0.0, 0.0, 0.0)
    # the level sets of G / gamma_lb, with B and C balanced in size: well scaled whatever
    # the magnitude of the data (the gains themselves are always evaluated on G)
    bn, cn = float(np.max(np.abs(G.B))), float(np.max(np.abs(G.C))) / gamma_lb
    beta = np.sqrt(cn) / np.sqrt(bn) if bn > 0 and cn > 0 else 1.0
    Gn = DiscreteLTI(G.A, G.B * beta, (G.C / gamma_lb) / beta, G.D / gamma_lb, G.dt)
    cayley = _Cayley(Gn, _choose_cayley_point(G, theta, f, gamma_lb))
    # ---- step 2: level-set iterations
    im_tol, scale = 1e-8, gamma_lb
    for _ in range(100):
        gamma = (1.0 + 2.0 * tol) * gamma_lb
        cross = cayley.crossings(gamma / scale, im_tol)
        if cross.size == 0:
            break
        pts = np.unique(np.concatenate([[0.0], cross, [np.pi]]))
        mids = 0.5 * (pts[:-1] + pts[1:])
        fm = _sigma_max(G, mids)
        j = int(np.argmax(fm))
        if not fm[j] > gamma_lb:
            break  # no interval above the level: the crossings were numerical noise
        theta_new, gamma_new = _polish(G, pts[j], pts[j + 1], float(mids[j]), float(fm[j]))
        if gamma_new <= gamma_lb:
            break
        theta_pk, gamma_lb = theta_new, gamma_new
    else:  # pragma: no cover - the iteration converges quadratically
        raise SolverError(f"hinf_norm: level-set iteration did not converge (tol={tol:g})")
    # the value: the gain at the peak by one LU solve of (zI - A), more accurate than the
    # Schur-form evaluation used in the search (1.3e-9 -> 4e-11 relative on AB13DD's
    # lightly damped example after Tustin, dt = 0.1)
    value, kappa = _gain_lu(G, theta_pk)
    if not np.isfinite(value):  # pragma: no cover - z on a pole: stability was checked
        value, kappa = gamma_lb, np.inf
    accuracy = 2.0 * tol + 8.0 * G.n * _EPS * kappa
    return HinfNorm(float(value), float(theta_pk), float(accuracy))


def _equilibrate(G: DiscreteLTI) -> DiscreteLTI:
    """``(S^{-1} A S, S^{-1} B, C S, D)`` with LAPACK's diagonal balancing ``S`` of ``A``
    (powers of 2, so exact): the same transfer function, rows and columns of ``A`` of
    comparable size, which keeps the rounding of the frequency response relative."""
    _, (scale, _) = sla.matrix_balance(G.A, permute=False, separate=True)
    if np.all(scale == 1.0):
        return G
    A = G.A * (1.0 / scale)[:, None] * scale[None, :]
    return DiscreteLTI(A, G.B / scale[:, None], G.C * scale[None, :], G.D, G.dt)


def _gain_lu(G: DiscreteLTI, theta: float):
    """``(sigma_max(G(e^{j theta})), ||zI - A||_F ||(zI - A)^{-1}||_2)`` by an LU solve."""
    z = np.exp(1j * theta)
    M = z * np.eye(G.n) - G.A
    try:
        X = sla.solve(M, G.B, check_finite=False)
    except (np.linalg.LinAlgError, ValueError):  # pragma: no cover
        return np.inf, np.inf
    H = G.C @ X + G.D
    s = np.linalg.svd(M, compute_uv=False)
    kappa = float(np.linalg.norm(M) / s[-1]) if s[-1] > 0 else np.inf
    return float(np.linalg.svd(H, compute_uv=False)[0]), kappa
