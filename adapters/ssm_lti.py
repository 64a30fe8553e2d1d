r"""Conversions between a diagonal SSM module's modal form and :mod:`lti` (numpy, float64).

This module owns the two conventions that cross the torch <-> lti boundary:

* the **modal form** of :class:`adapters.ssm.DiagonalSSM`: real modes ``[0, n_real)`` with a real
  pole, row of ``B̄`` and column of ``C``, then complex modes, each ONE representative of a
  conjugate pair whose output is ``2 Re(C s)``;
* the **real coordinates** of the exported :class:`lti.DiscreteLTI` (:func:`modal_to_lti`):
  the real modes first (same order), then the complex modes whose pole is real (two real states
  each: ``Re s``, then ``Im s``, all ``Re`` parts before all ``Im`` parts), then one 2x2 block per
  remaining conjugate pair with states ``(sqrt2 Re s, -sqrt2 Im s)``, the unitary change of
  variables of :meth:`lti.DiscreteLTI.from_diagonal`;
* the **time convention**: the module's state ``s_t`` already contains ``u_t``
  (``y_t = C s_t``), while :class:`lti.DiscreteLTI` reads ``y_t = C x_t`` before
  ``x_{t+1} = A x_t + B u_t``. So the module's output is the exported system's output one step
  later, ``y_module[t] = y_lti[t + 1]``, and the module state ``s_t`` is the exported state
  ``x_{t+1}``: the transfer functions differ by the factor ``z``, which changes neither the
  Gramians, the Hankel singular values, the H-infinity norm, nor the balanced-truncation
  error bounds.

:func:`lti_state_map` says where each exported state comes from in the module's state, so a
state trajectory of the module (:meth:`adapters.ssm.DiagonalSSM.trajectory`) is mapped to the
exported system's coordinates without a second copy of the layout
(:meth:`adapters.ssm.DiagonalSSM.lti_states`). Shapes: N modes, H width, n = n_real +
2 n_complex the order of the real system.

Nothing here imports torch modules of this package; :mod:`adapters.ssm` imports this module.
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass

import numpy as np

from adapters.exceptions import (
    AdapterConfigError,
    AdapterDtypeError,
    AdapterShapeError,
    AdapterStabilityError,
)

__all__ = [
    "ModalSystem",
    "as_numpy",
    "check_modal",
    "modal_to_lti",
    "lti_state_map",
]

_FLAT_TOL = 1e-12
"""A complex pole with ``|Im a| <= 1e-12 max(1, |a|)`` is exported as two real modes."""


def as_numpy(x, name: str) -> np.ndarray:
    """A finite numpy array from an array-like or a (possibly complex) tensor.

    Parameters
    ----------
    x : array_like or torch.Tensor
    name : str
        Used in error messages; ``"a"`` must be float or complex, the others may be integers.

    Returns
    -------
    numpy.ndarray
        float64 for real tensors, complex for complex ones (conjugation resolved).

    Raises
    ------
    AdapterDtypeError
        Not a float or complex array.
    AdapterStabilityError
        Non-finite entries.
    """
    if hasattr(x, "detach") and hasattr(x, "is_complex"):  # a torch.Tensor, without importing torch
        x = x.detach().cpu()
        x = x.resolve_conj().numpy() if x.is_complex() else x.double().numpy()
    x = np.asarray(x)
    if not (np.issubdtype(x.dtype, np.floating) or np.iscomplexobj(x)):
        if np.issubdtype(x.dtype, np.integer) and name != "a":
            x = x.astype(np.float64)
        else:
            raise AdapterDtypeError(f"`{name}` must be a float or complex array; got {x.dtype}")
    if not np.all(np.isfinite(x)):
        raise AdapterStabilityError(f"`{name}` must be finite; got non-finite entries")
    return x


@dataclass(frozen=True)
class ModalSystem:
    """A validated discrete modal system, split into the module's two groups of modes.

    Attributes
    ----------
    a : numpy.ndarray, shape (N,)
        Poles as given.
    B : numpy.ndarray, shape (N, H)
    C : numpy.ndarray, shape (H, N)
    real : numpy.ndarray of int, shape (n_real,)
        Indices of the real modes (their given order).
    complex : numpy.ndarray of int, shape (n_complex,)
        Indices of the complex modes (pair representatives).
    dt : numpy.ndarray, shape (N,)
        Step ``Δ`` per mode.
    log_A : numpy.ndarray, shape (N,)
        ``log(r / Δ)`` of the decay rate ``r = -log|a|`` (clamped to the parameterisation).
    """

    a: np.ndarray
    B: np.ndarray
    C: np.ndarray
    real: np.ndarray
    complex: np.ndarray
    dt: np.ndarray
    log_A: np.ndarray


def check_modal(a, B, C, *, real_modes=None, dt=None, dt_range=(1e-4, 1e-1), rate_min=1e-6,
                log_bound=20.0) -> ModalSystem:
    """Validate ``(a, B̄, C)`` for :meth:`adapters.ssm.DiagonalSSM.from_discrete`.

    Parameters
    ----------
    a : array_like, shape (N,)
        Discrete poles, ``|a| < 1``.
    B : array_like, shape (N, H)
    C : array_like, shape (H, N)
    real_modes : array_like of bool, shape (N,), optional
        Which entries are real modes; by default those with a zero imaginary pole, row of `B`
        and column of `C` (to 1e-12 relative).
    dt : float or array_like of shape (N,), optional
        Step per mode (default 0.01).
    dt_range : (float, float)
        Allowed range of `dt`.
    rate_min, log_bound : float
        Smallest decay rate of the parameterisation (slower poles are clamped, with a
        warning) and the bound of ``|log_A|``.

    Returns
    -------
    ModalSystem

    Raises
    ------
    AdapterShapeError, AdapterStabilityError, AdapterConfigError, AdapterDtypeError
        As documented by :meth:`adapters.ssm.DiagonalSSM.from_discrete`.
    """
    a, B, C = as_numpy(a, "a"), as_numpy(B, "B"), as_numpy(C, "C")
    if a.ndim != 1:
        raise AdapterShapeError(f"`a` must be 1-D (N,); got shape {a.shape}")
    N = a.shape[0]
    if B.ndim != 2 or B.shape[0] != N:
        raise AdapterShapeError(f"`B` must have shape (N, H) with N = {N}; got {B.shape}")
    H = B.shape[1]
    if C.shape != (H, N):
        raise AdapterShapeError(f"`C` must have shape (H, N) = {(H, N)}; got {C.shape}")
    if N == 0 or H == 0:
        raise AdapterShapeError(f"need N >= 1 modes and H >= 1; got N = {N}, H = {H}")
    radius = float(np.abs(a).max())
    if not radius < 1.0:
        raise AdapterStabilityError(
            f"`a` must satisfy |a| < 1 (stable diagonal system); got max |a| = {radius:.6g}"
        )
    lo, hi = dt_range
    dt = np.broadcast_to(np.asarray(0.01 if dt is None else dt, dtype=np.float64), (N,))
    if not (np.all(dt >= lo) and np.all(dt <= hi)):
        raise AdapterConfigError(f"`dt` must lie in [{lo}, {hi}]; got {dt}")
    b_tol = 1e-12 * max(float(np.abs(B).max()), 1e-300)
    c_tol = 1e-12 * max(float(np.abs(C).max()), 1e-300)
    real_b = np.all(np.abs(np.imag(B)) <= b_tol, axis=1)  # (N,)
    real_c = np.all(np.abs(np.imag(C)) <= c_tol, axis=0)  # (N,)
    realizable = (np.imag(a) == 0) & real_b & real_c
    if real_modes is None:
        is_real = realizable
    else:
        is_real = np.asarray(real_modes, dtype=bool)
        if is_real.shape != (N,):
            raise AdapterShapeError(
                f"`real_modes` must have shape (N,) = {(N,)}; got {is_real.shape}"
            )
        bad = np.flatnonzero(is_real & ~realizable)
        if bad.size:
            raise AdapterConfigError(
                f"real modes need a real pole, a real row of `B` and a real column of `C`; "
                f"entries {bad.tolist()} of `real_modes` are not"
            )
    rate = -np.log(np.maximum(np.abs(a), 1e-300))
    if np.any(rate < rate_min):
        warnings.warn(
            f"|a| up to {radius:.9f} exceeds exp(-{rate_min:g}); clamped to the most "
            "persistent mode the parameterisation allows",
            stacklevel=3,
        )
    log_A = np.clip(np.log(np.maximum(rate, rate_min) / dt), -log_bound, log_bound)
    return ModalSystem(a, B, C, np.flatnonzero(is_real), np.flatnonzero(~is_real), dt, log_A)


def _split_complex(ac: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Indices of the complex modes with a real pole (``flat``) and of the true pairs."""
    flat = np.abs(ac.imag) <= _FLAT_TOL * np.maximum(1.0, np.abs(ac))
    return np.flatnonzero(flat), np.flatnonzero(~flat)


def modal_to_lti(real, cplx):
    """The real :class:`lti.DiscreteLTI` of a modal system (``D = 0``), in float64.

    Parameters
    ----------
    real : (a, B, C) of numpy arrays or None
        Real modes: ``a`` (n_real,), ``B`` (n_real, H), ``C`` (H, n_real).
    cplx : (a, B, C) of complex numpy arrays or None
        Complex modes (one representative per conjugate pair, output ``2 Re(C s)``):
        ``a`` (n_complex,), ``B`` (n_complex, H), ``C`` (H, n_complex).

    Returns
    -------
    lti.DiscreteLTI
        Order ``n_real + 2 n_complex``, in the coordinates described in the module docstring
        (:func:`lti_state_map`).
    """
    from lti import DiscreteLTI

    a, B, C = [], [], []
    if real is not None:
        a.append(real[0])
        B.append(real[1])
        C.append(real[2])
    if cplx is not None:
        ac, Bc, Cc = cplx
        # a complex mode with a real pole (e.g. A_im = 0) is two real modes at that pole,
        # driven by Re B and Im B and read by 2 Re C and -2 Im C
        f, p = _split_complex(ac)
        a += [ac[f].real, ac[f].real]
        B += [Bc[f].real, Bc[f].imag]
        C += [2 * Cc[:, f].real, -2 * Cc[:, f].imag]
        a += [ac[p], ac[p].conj()]
        B += [Bc[p], Bc[p].conj()]
        C += [Cc[:, p], Cc[:, p].conj()]  # C s + conj(C s) = 2 Re(C s)
    a = [x.astype(np.complex128) for x in a]
    B = [x.astype(np.complex128) for x in B]
    C = [x.astype(np.complex128) for x in C]
    a, B, C = np.concatenate(a), np.concatenate(B, 0), np.concatenate(C, 1)
    if not np.any(a.imag):
        a, B, C = a.real, B.real, C.real
    return DiscreteLTI.from_diagonal(a, B, C)


def lti_state_map(n_real: int, a_complex) -> tuple[np.ndarray, np.ndarray]:
    r"""Where each state of :func:`modal_to_lti`'s system comes from in the module's state.

    Stack the module's state ``s`` (N,) as the real vector
    ``z = [Re s[:n_real], Re s[n_real:], Im s[n_real:]]`` (n,). Then the exported system's state
    is ``x = scale * z[index]``, i.e. ``x = M z`` with the signed scaled permutation
    ``M[k, index[k]] = scale[k]``.

    Parameters
    ----------
    n_real : int
        Number of real modes.
    a_complex : array_like, shape (n_complex,)
        Poles of the complex modes (which of them are real decides the layout).

    Returns
    -------
    index : numpy.ndarray of int, shape (n,)
    scale : numpy.ndarray of float, shape (n,)
        ``1`` for real states, ``sqrt2`` / ``-sqrt2`` for the two states of a conjugate pair.

    Notes
    -----
    The exported system is the module's real-stacked system in the coordinates ``x = M z``:
    ``A_lti M = M A_z``, ``B_lti = M B_z``, ``C_z = C_lti M`` (checked by the tests for every
    mode family), so ``x_t`` of the module's state trajectory is the exported system's state
    and Gramian statistics of ``x`` are in the coordinates of :meth:`DiagonalSSM.as_lti`.

    Examples
    --------
    >>> index, scale = lti_state_map(1, [0.5 + 0.5j])
    >>> index.tolist(), [round(float(s), 4) for s in scale]
    ([0, 1, 2], [1.0, 1.4142, -1.4142])
    """
    ac = np.asarray(a_complex, dtype=np.complex128).reshape(-1)
    nc = ac.shape[0]
    f, p = _split_complex(ac)
    s2 = math.sqrt(2.0)
    index = [np.arange(n_real), n_real + f, n_real + nc + f]
    scale = [np.ones(n_real), np.ones(f.size), np.ones(f.size)]
    pairs = np.stack([n_real + p, n_real + nc + p], axis=1).reshape(-1)  # (Re, Im) per pair
    index.append(pairs)
    scale.append(np.tile([s2, -s2], p.size))
    return np.concatenate(index).astype(np.int64), np.concatenate(scale)
