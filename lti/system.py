"""Discrete-time state-space systems and zero-order-hold discretisation.

A :class:`DiscreteLTI` holds ``(A, B, C, D)`` of

.. math:: x_{t+1} = A x_t + B u_t, \\qquad y_t = C x_t + D u_t,

with n states, m inputs and p outputs, as read-only float64 arrays.
"""

from __future__ import annotations

import numbers
import warnings
from dataclasses import dataclass

import numpy as np
import scipy.linalg as sla

from lti._convert import check_dt, control_matrices, import_control, scipy_matrices
from lti._modal_real import real_modal_realisation
from lti._response import (
    diagonal_response,
    markov_overflow_message,
    overflow_message,
    schur_response,
    simulate_states,
)
from lti._validation import (
    as_float_matrix,
    as_float_vector,
    as_real_array,
    balanced_margin,
    check_square,
    first_nonfinite,
    spectral_radius,
    stability_margin,
)
from lti._zoh import zoh
from lti.exceptions import InvalidArgumentError, NonFiniteError, ShapeError
from lti.lowrank import as_sparse_state_matrix, dense_only, is_sparse

__all__ = ["DiscreteLTI", "as_discrete_system", "discretize_zoh", "is_control_system"]


def _common_dt(dt1, dt2):
    """Sampling time of an interconnection (python-control rule: True matches any)."""
    if dt1 is True:
        return dt2
    if dt2 is True or dt1 == dt2:
        return dt1
    raise InvalidArgumentError(f"systems have different sampling times `dt`: {dt1} and {dt2}")


def _readonly(X: np.ndarray) -> np.ndarray:
    X.setflags(write=False)
    return X


@dataclass(frozen=True, eq=False, repr=False)
class DiscreteLTI:
    """Discrete-time LTI system ``x_{t+1} = A x_t + B u_t``, ``y_t = C x_t + D u_t``.

    Parameters
    ----------
    A : array_like, shape (n, n)
        State matrix; a ``scipy.sparse`` one stays sparse (CSR, see :mod:`lti.lowrank`).
    B : array_like, shape (n, m)
        Input matrix.
    C : array_like, shape (p, n)
        Output matrix.
    D : array_like, shape (p, m), optional
        Feedthrough; ``None`` or the scalar 0 means zeros, a scalar is ``[[D]]`` when
        p = m = 1 (python-control's conventions).
    dt : True or float, optional
        Sampling time, python-control convention: ``True`` means "discrete, unspecified".

    Attributes
    ----------
    A : ndarray, shape (n, n)
        State matrix: a read-only float64 copy of the input (never aliased).
    B : ndarray, shape (n, m)
        Input matrix: a read-only float64 copy.
    C : ndarray, shape (p, n)
        Output matrix: a read-only float64 copy.
    D : ndarray, shape (p, m)
        Feedthrough: a read-only float64 copy, zeros when ``None`` was passed.
    dt : True or float
        Sampling time.

    Raises
    ------
    ShapeError
        Non-2-D or non-conforming matrices.
    NonFiniteError
        NaN or inf entries.
    InvalidArgumentError
        `dt` neither ``True`` nor a positive number.

    Notes
    -----
    The transfer function is :math:`G(z) = C (zI - A)^{-1} B + D`. Arithmetic builds
    interconnections: ``G + H`` (parallel, same input and output), ``G - H`` (the error
    system, block-diagonal ``A``), ``-G``, ``k * G``, ``G.series(H)`` (``H`` after ``G``).

    Examples
    --------
    >>> import numpy as np
    >>> from lti import DiscreteLTI
    >>> G = DiscreteLTI([[0.5, 0.1], [0.0, -0.3]], [[1.0], [1.0]], [[1.0, 2.0]])
    >>> G.n, G.m, G.p, G.is_stable()
    (2, 1, 1, True)
    >>> h = G.markov(3)[:, 0, 0]                      # C A^i B, i = 0, 1, 2
    >>> Gw = G.frequency_response([0.0])[0, 0, 0]     # G(1) = C (I - A)^{-1} B
    >>> bool(abs(Gw - (G.C @ np.linalg.solve(np.eye(2) - G.A, G.B))[0, 0]) < 1e-14)
    True
    """

    A: np.ndarray
    B: np.ndarray
    C: np.ndarray
    D: np.ndarray | None = None
    dt: bool | float = True

    def __post_init__(self):
        sparse = is_sparse(self.A)
        A = as_sparse_state_matrix("A", self.A) if sparse else as_float_matrix("A", self.A)
        n = check_square("A", A)
        B = as_float_matrix("B", self.B)
        C = as_float_matrix("C", self.C)
        if B.shape[0] != n:
            raise ShapeError(f"`B` must have n = {n} rows (A is {n}x{n}); got shape {B.shape}")
        if C.shape[1] != n:
            raise ShapeError(
                f"`C` must have n = {n} columns (A is {n}x{n}); got shape {C.shape}"
            )
        m, p = B.shape[1], C.shape[0]
        if self.D is None:
            D = np.zeros((p, m))
        elif np.ndim(self.D) == 0 and not is_sparse(self.D):  # python-control's scalar D
            D = as_float_matrix("D", [[self.D]])
            if (p, m) != (1, 1):
                if D[0, 0] != 0.0:
                    raise ShapeError(f"`D` must have shape (p, m) = {(p, m)}; got the scalar "
                                     f"{self.D!r} (only 0 stands for zeros of any shape)")
                D = np.zeros((p, m))
        else:
            D = as_float_matrix("D", self.D)
            if D.shape != (p, m):
                raise ShapeError(f"`D` must have shape (p, m) = {(p, m)}; got shape {D.shape}")
        dt = check_dt(self.dt)
        object.__setattr__(self, "A", A if sparse else _readonly(A))
        object.__setattr__(self, "B", _readonly(B))
        object.__setattr__(self, "C", _readonly(C))
        object.__setattr__(self, "D", _readonly(D))
        object.__setattr__(self, "dt", dt)
        object.__setattr__(self, "_is_diagonal", not sparse and (  # no nonzero off it:
            np.count_nonzero(A) == np.count_nonzero(A.diagonal())))  # no (n, n) temporary
        object.__setattr__(self, "_cschur", None)

    def __reduce__(self):
        # pickle, copy and deepcopy rebuild through the constructor: numpy unpickles and
        # deep-copies arrays writeable, and a mutated copy kept the caches (is_diagonal, the
        # Schur form) of the original, so its responses were silently those of another A
        return (type(self), (self.A, self.B, self.C, self.D, self.dt))

    @classmethod
    def _owned(cls, A, B, C, D, dt, *, shared_D: bool = False) -> DiscreteLTI:
        """Internal: ``DiscreteLTI(A, B, C, D, dt)`` without copies or checks for a reduced
        model's fresh A, B, C (made read-only); D (None: zeros) is copied, or with `shared_D`
        (a validated system's read-only D: ``D_r = D``) shared unscanned; `dt` must be valid.
        Anything but finite conforming 2-D float64 arrays goes through the constructor."""
        if not (type(A) is np.ndarray and type(B) is np.ndarray and type(C) is np.ndarray
                and A.dtype == B.dtype == C.dtype == np.float64 and A.ndim == B.ndim == C.ndim
                == 2 and A.shape[0] == A.shape[1] == B.shape[0] == C.shape[1]
                and (D is None or (type(D) is np.ndarray and D.dtype == np.float64
                                   and D.shape == (C.shape[0], B.shape[1])))
                and (not shared_D or (D is not None and not D.flags.writeable))
                and np.isfinite(A).all() and np.isfinite(B).all() and np.isfinite(C).all()
                and (D is None or shared_D or np.isfinite(D).all())):
            return cls(A, B, C, D, dt)
        self = object.__new__(cls)
        D = D if shared_D else np.zeros((C.shape[0], B.shape[1])) if D is None else D.copy()
        for name, X in (("A", A), ("B", B), ("C", C), ("D", D)):
            object.__setattr__(self, name, _readonly(X))
        object.__setattr__(self, "dt", dt)
        object.__setattr__(self, "_is_diagonal",
                           np.count_nonzero(A) == np.count_nonzero(A.diagonal()))
        object.__setattr__(self, "_cschur", None)
        return self

    # ------------------------------------------------------------------ sizes
    @property
    def n(self) -> int:
        """Number of states."""
        return self.A.shape[0]

    @property
    def m(self) -> int:
        """Number of inputs."""
        return self.B.shape[1]

    @property
    def p(self) -> int:
        """Number of outputs."""
        return self.C.shape[0]

    @property
    def is_diagonal(self) -> bool:
        """True when ``A`` is diagonal (cached at construction)."""
        return self._is_diagonal

    def __repr__(self) -> str:
        kind = "diagonal " if self.is_diagonal else "sparse " if is_sparse(self.A) else ""
        return f"DiscreteLTI(n={self.n}, m={self.m}, p={self.p}, {kind}dt={self.dt})"

    # -------------------------------------------------------------- spectrum
    def poles(self) -> np.ndarray:
        """Eigenvalues of ``A``, shape (n,), complex.

        Returns
        -------
        ndarray of complex128, shape (n,)
            The poles, in no particular order (the diagonal's order for a diagonal ``A``).
        """
        dense_only("poles()", self)
        if self.is_diagonal:
            return np.diag(self.A).astype(np.complex128)
        return np.linalg.eigvals(self.A).astype(np.complex128)

    def spectral_radius(self) -> float:
        """``max |lambda_i(A)|`` (0 for n = 0).

        Returns
        -------
        float
            Spectral radius of ``A``; the system is Schur-stable when it is below 1.
        """
        dense_only("spectral_radius()", self)
        if self.is_diagonal:
            return spectral_radius(np.diag(self.A))
        return spectral_radius(self.A)

    def is_stable(self) -> bool:
        """True when ``A`` is Schur-stable, with the rounding margin of the solvers.

        Returns
        -------
        bool
            ``self.spectral_radius() < 1 - margin`` with the margin
            ``8 n eps max(||A||_F, 1)`` of :func:`lti._validation.stability_margin` (of
            the diagonally balanced ``A`` when smaller, :func:`lti._validation.balanced_margin`): an
            eigenvalue that close to the unit circle cannot be told from one on it (a
            rotation's computed radius is often ``1 - 2e-16``), and the Gramian and norm
            functions refuse it, so ``is_stable()`` says False for it (control's
            ``isstable`` compares with 1 itself).
        """
        dense_only("is_stable()", self)
        with np.errstate(over="ignore"):
            norm_A = float(np.linalg.norm(self.A))
        rho, margin = self.spectral_radius(), stability_margin(self.n, norm_A)
        if not rho < 1.0 - margin:  # a badly scaled A: the margin of its balanced form
            rho, margin = balanced_margin(self.A, margin, rho)
        return bool(rho < 1.0 - margin)

    # ------------------------------------------------------------- responses
    def markov(self, k: int) -> np.ndarray:
        """Impulse-response matrices ``C A^i B`` for ``i = 0, ..., k-1``.

        Parameters
        ----------
        k : int
            Number of terms (>= 0).

        Returns
        -------
        ndarray, shape (k, p, m)
            ``H[i] = C A^i B``. ``D`` is *not* included: the impulse response of the system
            is ``D, C B, C A B, ...`` i.e. ``D`` followed by ``H[0], H[1], ...``.

        Raises
        ------
        NonFiniteError
            A term overflows float64 (an unstable system, many terms): the message names
            the first index i.
        """
        k = _check_count("k", k)
        H = np.empty((k, self.p, self.m))
        X = self.B.copy()  # A^i B, shape (n, m)
        a = np.diag(self.A)[:, None] if self.is_diagonal else None
        with np.errstate(over="ignore", invalid="ignore"):  # refused below, typed
            for i in range(k):
                H[i] = self.C @ X
                X = a * X if a is not None else self.A @ X
        if not np.isfinite(H).all():
            raise NonFiniteError(markov_overflow_message(H, self))
        return H

    def _complex_schur(self):
        if self._cschur is None:
            T, Z = sla.schur(self.A, output="complex")
            object.__setattr__(self, "_cschur", (T, Z, Z.conj().T @ self.B, self.C @ Z))
        return self._cschur

    def frequency_response(self, omega) -> np.ndarray:
        """Transfer function on the unit circle, ``G(e^{j omega})``.

        Parameters
        ----------
        omega : array_like, shape (k,)
            Normalised frequencies in rad/sample (for a physical frequency ``w`` in rad/s
            pass ``w * dt``). A scalar is treated as one frequency.

        Returns
        -------
        ndarray, shape (k, p, m), complex
            ``G(e^{j omega}) = C (e^{j omega} I - A)^{-1} B + D``, frequency first; control's
            ``frequency_response(sys, w)`` is (p, m, k) in rad/s: ``moveaxis(G_w, 0, -1)``.
            Where ``e^{j omega}`` equals an eigenvalue of ``A`` exactly (a pole on the
            circle) every entry is ``inf + nan j``, as python-control and
            ``scipy.signal.dfreqresp`` return there.

        Notes
        -----
        Diagonal ``A`` uses the closed form ``sum_i C[:, i] B[i] / (z - a_i)``. Otherwise
        ``A`` is reduced once to complex Schur form ``A = Z T Z^H`` (unitary ``Z``, upper
        triangular ``T``), so that ``G(z) = (C Z) (zI - T)^{-1} (Z^H B) + D``; the
        triangular systems for all k frequencies are then solved together by one
        back-substitution over the n rows, vectorised over frequencies and inputs
        (O(n^3) once plus O(n^2 k m)). Unlike an eigendecomposition this is backward
        stable for non-normal ``A`` (the transformation is unitary), and unlike one dense
        solve per point it costs O(n^2) per frequency. The Schur form's own backward error
        (about ``n eps ||A||`` from the QR iteration) is then removed by one step of
        iterative refinement, the residual ``B - (zI - A) X`` formed with ``A`` itself
        (:func:`lti._response.schur_response`): the error is then that of a dense LU solve
        per frequency, and below SLICOT TB05AD's (Hessenberg) in every family measured
        against 40-digit references (``benchmarks/results/freq_accuracy.md``). Near a pole
        the result is as ill-conditioned as the problem itself.
        """
        return self._frequency_response(omega, refine=True)

    def _frequency_response(self, omega, *, refine: bool) -> np.ndarray:
        """:meth:`frequency_response`; ``refine=False`` skips the refinement step (the
        search of :func:`lti.hinf_norm`, which evaluates its value by an LU solve)."""
        dense_only("frequency_response()", self)
        w = np.atleast_1d(as_real_array("omega", omega))
        if w.ndim != 1:
            raise ShapeError(f"`omega` must be a scalar or 1-D array; got shape {w.shape}")
        if not np.all(np.isfinite(w)):
            raise InvalidArgumentError(f"`omega` must be finite; got {first_nonfinite(w)}")
        z = np.exp(1j * w)  # (k,)
        if self.n == 0:
            return np.broadcast_to(self.D, (w.size, self.p, self.m)).astype(np.complex128)
        if self.is_diagonal:
            return diagonal_response(np.diag(self.A), self.B, self.C, self.D, z)
        T, Z, Bt, Ct = self._complex_schur()
        return schur_response(T, Bt, Ct, self.D, z,
                              refine=(self.A, Z, self.B, self.C) if refine else None)

    def simulate(self, u, x0=None, *, return_states: bool = False):
        """Simulate from ``x_0 = x0`` with inputs ``u_0, ..., u_{T-1}``.

        Parameters
        ----------
        u : array_like, shape (T, m)
            Input sequence (a 1-D ``u`` is accepted when m = 1).
        x0 : array_like, shape (n,), optional
            Initial state; zeros by default.
        return_states : bool, optional
            Also return the states.

        Returns
        -------
        y : ndarray, shape (T, p)
            ``y_t = C x_t + D u_t``, time first (control's ``forced_response`` takes
            ``U`` of shape (m, T) and returns (p, T): ``G.simulate(U.T).T``).
        x : ndarray, shape (T + 1, n)
            Only with ``return_states=True``: ``x_0, ..., x_T`` (the last one is the state
            after the final input, ready to continue a simulation).

        Raises
        ------
        NonFiniteError
            A state or output overflows float64 (an unstable system simulated for long, a
            huge ``x0``): the message names the first step t and the spectral radius.
            scipy's ``dlsim`` and control's ``forced_response`` return ``inf``/``nan`` there
            with a RuntimeWarning; simulate fewer steps to get the finite part.
        """
        U = as_real_array("u", u)
        if U.ndim == 1 and self.m == 1:
            U = U[:, None]
        if U.ndim != 2 or U.shape[1] != self.m:
            hint = ("; python-control's layout (m, T)? pass `u.T`"
                    if U.ndim == 2 and U.shape[0] == self.m else "")
            raise ShapeError(f"`u` must have shape (T, m={self.m}); got shape {U.shape}{hint}")
        if not np.all(np.isfinite(U)):
            raise InvalidArgumentError(f"`u` must be finite; got {first_nonfinite(U)}")
        if x0 is None:
            x = np.zeros(self.n)
        else:
            x = as_float_vector("x0", x0)
            if x.shape != (self.n,):
                raise ShapeError(f"`x0` must have shape (n,) = ({self.n},); got {x.shape}")
        with np.errstate(over="ignore", invalid="ignore"):
            X = simulate_states(self.A, self.is_diagonal, U @ self.B.T, x)  # (T + 1, n)
            Y = X[:-1] @ self.C.T + U @ self.D.T
        if not (np.isfinite(X).all() and np.isfinite(Y).all()):
            raise NonFiniteError(overflow_message(X, Y, self))
        return (Y, X) if return_states else Y

    # --------------------------------------------------------- transformations
    def similarity(self, T) -> DiscreteLTI:
        """State transformation ``x = T z``: returns ``(T^{-1} A T, T^{-1} B, C T, D)``.

        Parameters
        ----------
        T : array_like, shape (n, n)
            Invertible transformation.

        Returns
        -------
        DiscreteLTI
            The same input-output system in the new coordinates.

        Raises
        ------
        InvalidArgumentError
            `T` singular, or numerically singular: reciprocal condition number (1-norm,
            LAPACK ``gecon``) at most ``eps``, where ``T^{-1}`` has no correct digit.
        """
        dense_only("similarity()", self)
        T = as_float_matrix("T", T)
        if T.shape != (self.n, self.n):
            raise ShapeError(f"`T` must have shape (n, n) = {(self.n, self.n)}; got {T.shape}")
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", sla.LinAlgWarning)
                lu = sla.lu_factor(T, check_finite=False)
        except (np.linalg.LinAlgError, ValueError) as exc:
            raise InvalidArgumentError("`T` must be invertible") from exc
        if self.n and np.min(np.abs(np.diag(lu[0]))) == 0.0:
            raise InvalidArgumentError("`T` must be invertible; got a singular matrix")
        if self.n:  # numerically singular: T^{-1} A T would be noise (entries ~ 1/eps)
            rcond, _ = sla.lapack.dgecon(lu[0], float(np.abs(T).sum(axis=0).max()), norm="1")
            if not rcond > np.finfo(np.float64).eps:
                raise InvalidArgumentError(
                    "`T` must be invertible; got a numerically singular matrix (reciprocal "
                    f"condition number {rcond:.3g} <= eps)")
        TiAB = sla.lu_solve(lu, np.hstack([self.A @ T, self.B]), check_finite=False)
        return DiscreteLTI(TiAB[:, : self.n], TiAB[:, self.n :], self.C @ T, self.D, self.dt)

    # ------------------------------------------------------------ arithmetic
    def __neg__(self) -> DiscreteLTI:
        return DiscreteLTI(self.A, self.B, -self.C, -self.D, self.dt)

    def __add__(self, other) -> DiscreteLTI:
        if not isinstance(other, DiscreteLTI):
            return NotImplemented
        if (self.m, self.p) != (other.m, other.p):
            raise ShapeError(
                f"parallel connection needs equal (p, m); got {(self.p, self.m)} and "
                f"{(other.p, other.m)}"
            )
        dense_only("an interconnection (G + H, G - H, series)", self, other)
        dt = _common_dt(self.dt, other.dt)
        A = sla.block_diag(self.A, other.A)
        B = np.vstack([self.B, other.B])
        C = np.hstack([self.C, other.C])
        return DiscreteLTI(A, B, C, self.D + other.D, dt)

    def __sub__(self, other) -> DiscreteLTI:
        if not isinstance(other, DiscreteLTI):
            return NotImplemented
        return self + (-other)

    def __mul__(self, k) -> DiscreteLTI:
        if isinstance(k, bool) or not isinstance(k, numbers.Real):
            return NotImplemented
        return DiscreteLTI(self.A, self.B, float(k) * self.C, float(k) * self.D, self.dt)

    __rmul__ = __mul__

    def series(self, other: DiscreteLTI) -> DiscreteLTI:
        """Series connection ``u -> self -> other -> y`` (``other`` after ``self``).

        Parameters
        ----------
        other : DiscreteLTI
            System with ``other.m == self.p``.

        Returns
        -------
        DiscreteLTI
            Transfer function ``other(z) @ self(z)``; states ``[x_self; x_other]``.
        """
        if not isinstance(other, DiscreteLTI):
            raise InvalidArgumentError(
                f"`other` must be a DiscreteLTI; got {type(other).__name__}"
            )
        if other.m != self.p:
            raise ShapeError(
                f"series connection needs other.m == self.p; got {other.m} and {self.p}"
            )
        dense_only("an interconnection (G + H, G - H, series)", self, other)
        dt = _common_dt(self.dt, other.dt)
        n1, n2 = self.n, other.n
        A = np.zeros((n1 + n2, n1 + n2))
        A[:n1, :n1] = self.A
        A[n1:, :n1] = other.B @ self.C
        A[n1:, n1:] = other.A
        B = np.vstack([self.B, other.B @ self.D])
        C = np.hstack([other.D @ self.C, other.C])
        return DiscreteLTI(A, B, C, other.D @ self.D, dt)

    # --------------------------------------------------------- constructors
    @classmethod
    def from_control(cls, sys) -> DiscreteLTI:
        """Build from a python-control discrete-time system.

        Parameters
        ----------
        sys : control.StateSpace or control.TransferFunction
            Discrete time: ``dt`` is ``True`` or a positive number (``None``, "unspecified",
            is read as ``True``). Transfer functions are converted with ``control.ss``.

        Returns
        -------
        DiscreteLTI

        Raises
        ------
        InvalidArgumentError
            Continuous-time system (``dt == 0``), an object that is not a python-control
            system, or one without a state-space realisation (an improper transfer
            function, frequency-response data).
        MissingDependencyError
            python-control is not installed.
        """
        G = _from_control(sys, "sys")
        return G if cls is DiscreteLTI else cls(G.A, G.B, G.C, G.D, G.dt)

    def to_control(self):
        """Return the equivalent ``control.StateSpace`` (same ``dt``).

        Returns
        -------
        control.StateSpace
            Discrete-time state space with the same ``A, B, C, D`` and ``dt``.

        Raises
        ------
        MissingDependencyError
            python-control is not installed (``pip install "lti-adapters[control]"``).
        InvalidArgumentError
            ``m = 0``: python-control cannot represent a system without inputs.
        """
        control = import_control()
        dense_only("to_control()", self)
        if self.m == 0:  # control.ss reads a (p, 0) D as (0, 0) and refuses it
            raise InvalidArgumentError(
                f"python-control {control.__version__} cannot hold a system without inputs "
                f"(m = 0, p = {self.p}, n = {self.n})"
            )
        return control.ss(self.A, self.B, self.C, self.D, self.dt)

    @classmethod
    def from_diagonal(cls, a, B, C, D=None, dt=True) -> DiscreteLTI:
        """Build from a diagonal state matrix ``diag(a)``, real or complex.

        Parameters
        ----------
        a : array_like, shape (n,)
            Diagonal of ``A``, real or complex.
        B : array_like, shape (n, m)
            Input matrix (complex allowed with complex `a`).
        C : array_like, shape (p, n)
            Output matrix (complex allowed with complex `a`).
        D : array_like, shape (p, m), optional
            Real feedthrough.
        dt : True or float, optional
            Sampling time.

        Returns
        -------
        DiscreteLTI
            Real `a` gives ``A = diag(a)``. Complex entries must come in conjugate pairs
            ``a_j = conj(a_i)`` with ``B[j] = conj(B[i])`` and ``C[:, j] = conj(C[:, i])``
            (the system is then real); each pair becomes a real 2x2 block.

        Raises
        ------
        InvalidArgumentError
            A complex entry without its conjugate partner (with conjugate rows of ``B`` and
            columns of ``C``). To realise ``2 Re(C x)`` from half of the modes, pass both
            halves: ``a`` and ``conj(a)``, ``B`` and ``conj(B)``, ``C / 2`` and
            ``conj(C) / 2``.

        Notes
        -----
        A pair ``(lambda, conj(lambda))`` with ``lambda = a_i`` (the first of the pair) and
        rows ``b = B[i]``, columns ``c = C[:, i]`` is mapped, in place of position i (the
        partner's position is dropped and the real block takes two consecutive states), to

        .. math::

            A_k = \\begin{bmatrix} \\Re\\lambda & \\Im\\lambda \\\\
                                  -\\Im\\lambda & \\Re\\lambda \\end{bmatrix},\\quad
            B_k = \\sqrt{2}\\begin{bmatrix} \\Re b \\\\ -\\Im b \\end{bmatrix},\\quad
            C_k = \\sqrt{2}\\begin{bmatrix} \\Re c & \\Im c \\end{bmatrix}.

        This is the unitary change of variables ``x_i = (xi - j eta)/sqrt(2)``,
        ``x_j = conj(x_i)``, so Gramians (and Hankel singular values) are preserved.
        Real entries keep their order; states appear in order of first occurrence.

        Examples
        --------
        >>> import numpy as np
        >>> from lti import DiscreteLTI
        >>> a = np.array([0.5, 0.6 + 0.3j, 0.6 - 0.3j])
        >>> B = np.array([[1.0], [1.0 + 2.0j], [1.0 - 2.0j]])
        >>> C = np.array([[1.0, 0.5j, -0.5j]])
        >>> G = DiscreteLTI.from_diagonal(a, B, C)
        >>> z = np.exp(0.7j)
        >>> Gc = (C / (z - a)) @ B                         # complex modal form
        >>> bool(abs(G.frequency_response([0.7])[0, 0, 0] - Gc[0, 0]) < 1e-14)
        True
        """
        A, Br, Cr = real_modal_realisation(a, B, C)
        return cls(A, Br, Cr, D, dt)


def is_control_system(sys) -> bool:
    """Whether `sys` is a python-control LTI object (``StateSpace``, ``TransferFunction``).

    Decided from the object's class, without importing python-control.
    """
    return type(sys) is not DiscreteLTI and any(  # (a DiscreteLTI: no class walk)
        klass.__module__.split(".")[0] == "control" and klass.__name__ == "LTI"
        for klass in type(sys).__mro__
    )


def as_discrete_system(sys, name: str = "sys") -> DiscreteLTI:
    """Return `sys` as a :class:`DiscreteLTI`: the one conversion rule of every entry point.

    Parameters
    ----------
    sys : DiscreteLTI, control.StateSpace, control.TransferFunction, scipy.signal.dlti or tuple
        A :class:`DiscreteLTI` is returned as it is; a discrete-time python-control system
        (state space or transfer function, ``dt`` True, None or > 0) goes through
        :meth:`DiscreteLTI.from_control`; a discrete-time ``scipy.signal`` system (state
        space, transfer function, zeros/poles/gain; same ``dt``) through its ``to_ss()``;
        a tuple ``(A, B, C)`` or ``(A, B, C, D)`` is read as ``DiscreteLTI(A, B, C, D)``
        with ``dt=True``.
    name : str, optional
        Argument name for error messages.

    Returns
    -------
    DiscreteLTI

    Raises
    ------
    InvalidArgumentError
        Anything else, including a continuous-time python-control or scipy.signal system
        (``dt == 0`` / ``dt is None``) and a tuple of the wrong length.
    ShapeError, NonFiniteError
        A tuple whose matrices do not conform or are not finite.
    """
    if isinstance(sys, DiscreteLTI):
        return sys
    if isinstance(sys, tuple):
        if len(sys) not in (3, 4):
            raise InvalidArgumentError(
                f"`{name}` as a tuple must be (A, B, C) or (A, B, C, D); got {len(sys)} items"
            )
        try:
            return DiscreteLTI(*sys)
        except (ShapeError, NonFiniteError) as exc:  # name the argument: not the caller's B
            if name == "sys":
                raise
            raise type(exc)(f"`{name}` = (A, B, C[, D]): {exc}") from exc
    if is_control_system(sys):
        return _from_control(sys, name)
    if type(sys).__module__.startswith("scipy.signal") and hasattr(sys, "to_ss"):
        return DiscreteLTI(*scipy_matrices(sys, name))
    raise InvalidArgumentError(
        f"`{name}` must be a DiscreteLTI, a discrete-time python-control StateSpace or "
        f"TransferFunction, a scipy.signal dlti, or a tuple (A, B, C[, D]); got "
        f"{type(sys).__name__}"
    )


def _from_control(sys, name: str) -> DiscreteLTI:
    """:meth:`DiscreteLTI.from_control`, the errors naming the argument `name`."""
    if not is_control_system(sys):
        raise InvalidArgumentError(
            f"`{name}` must be a python-control StateSpace or TransferFunction; got "
            f"{type(sys).__name__} (for a tuple (A, B, C[, D]) use DiscreteLTI(*sys))"
        )
    return DiscreteLTI(*control_matrices(sys, name))


def _check_count(name: str, k) -> int:
    if isinstance(k, bool) or not isinstance(k, numbers.Integral) or k < 0:
        raise InvalidArgumentError(f"`{name}` must be a non-negative integer; got {k!r}")
    return int(k)


def discretize_zoh(A, B, dt: float):
    """Zero-order-hold discretisation of continuous-time ``dx/dt = A x + B u``.

    Parameters
    ----------
    A : array_like, shape (n, n) or (n,)
        Continuous state matrix, or the diagonal ``a`` of a diagonal one (real or complex).
    B : array_like, shape (n, m) or (n,)
        Input matrix.
    dt : float
        Positive sampling time.

    Returns
    -------
    Ad : ndarray, shape like `A`
        ``exp(dt A)`` (a 1-D ``a`` gives the 1-D ``exp(dt a)``).
    Bd : ndarray, shape like `B`
        ``int_0^dt exp(s A) ds B``.

    Raises
    ------
    SolverError
        ``exp(dt A)`` overflows (a mode grows beyond 1e308 within one step).

    Notes
    -----
    General ``A`` uses one matrix exponential of the augmented matrix
    ``[[A, B], [0, 0]] * dt``. Diagonal ``A`` (1-D or a diagonal 2-D array) uses the exact
    shortcut ``Ad = exp(dt a)``, ``Bd = expm1(dt a) / a * B``, with the limit ``dt`` at
    ``a = 0``; ``expm1`` keeps it accurate for tiny ``|dt a|``.

    Examples
    --------
    >>> import numpy as np
    >>> from lti import discretize_zoh
    >>> a = np.array([-1.0, 0.0, -2.0 + 3.0j])
    >>> ad, bd = discretize_zoh(a, np.ones((3, 1)), 0.1)
    >>> Ad, Bd = discretize_zoh(np.diag(a[:2]), np.ones((2, 1)), 0.1)
    >>> bool(np.allclose(Ad, np.diag(ad[:2])) and np.allclose(Bd, bd[:2]) and bd[1, 0] == 0.1)
    True
    """
    return zoh(A, B, check_dt(dt, allow_true=False))
