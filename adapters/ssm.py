r"""Diagonal state-space modules: :class:`DiagonalSSM` and the gated :class:`HRMAdapter`.

Shapes: B batch, L length, H model width (``d_model``), N number of modes (``d_state``).

A :class:`DiagonalSSM` holds a continuous diagonal system, discretised by zero-order hold with
a learnable step per mode, and runs it over a sequence with a parallel scan
(:mod:`adapters.scan`):

.. math::

    s_t = \bar a \odot s_{t-1} + \bar B u_t, \qquad y_t = C s_t .

Modes come in two groups. *Real modes* ``[0, n_real)`` have real ``ā``, ``B̄``, ``C``.
*Complex modes* ``[n_real, N)`` are one representative of a conjugate pair each: their state is
complex and their output is ``2 Re(C s)``, so a complex mode is a real system of order 2 and a
module with ``n_complex`` complex modes is a real system of order ``n_real + 2 n_complex``. In
full, with ``r = n_real``,

.. math::

    y_t = C_{:, :r}\, s_{t, :r} + 2\,\Re\big(C_{:, r:}\, s_{t, r:}\big).

``mode="real"`` has only real modes (the paper's S4D-real adapter), ``mode="complex"`` only
complex ones (S4D-Lin); ``"mixed"`` modules come from :meth:`DiagonalSSM.from_discrete`, which
is how a reduced (modal) system returns from :mod:`lti`.
"""

from __future__ import annotations

import functools
import math
import warnings

import numpy as np
import torch
from torch import nn
from torch.nn import functional as F  # noqa: N812

from adapters.exceptions import (
    AdapterConfigError,
    AdapterDtypeError,
    AdapterShapeError,
    AdapterStabilityError,
)
from adapters.scan import _autocast_on, _chunked_core, _fft_core, _run

__all__ = ["DiagonalSSM", "HRMAdapter"]

DT_MIN = 1e-4
"""Smallest step ``Δ`` (the clamp of the paper)."""
DT_MAX = 1e-1
"""Largest step ``Δ``."""
RATE_MIN = 1e-6
"""Smallest decay rate ``Δ·|Re a|``, so ``|ā| <= exp(-1e-6)`` whatever the parameters hold."""
LOG_A_BOUND = 20.0
"""``log_A`` is clamped to ``[-20, 20]`` before ``exp`` (finite values, finite gradients)."""

_MODES = ("real", "complex")
_SCANS = ("auto", "fft", "chunked")
_READS = ("mlp_input", "mlp_output")


def _zoh_real(log_A, log_dt, sign):
    """Real modes: ``ā = sign · exp(-r)``, ZOH factor ``Δ (1 - e^{-r}) / r``, float64."""
    dt = torch.exp(log_dt.double()).clamp(DT_MIN, DT_MAX)  # (n,)
    lam = torch.exp(log_A.double().clamp(-LOG_A_BOUND, LOG_A_BOUND))  # (n,)
    r = (dt * lam).clamp(min=RATE_MIN)  # (n,), decay rate
    a = torch.where(sign < 0, -1.0, 1.0).double() * torch.exp(-r)  # (n,)
    f = dt * (-torch.expm1(-r)) / r  # (n,), (ā - 1) / a_c
    return a, f


def _zoh_complex(log_A_re, A_im, log_dt):
    """Complex modes: ``ā = exp(z)``, ``z = Δ(-λ + iω)``, ZOH factor ``Δ (e^z - 1) / z``."""
    dt = torch.exp(log_dt.double()).clamp(DT_MIN, DT_MAX)  # (n,)
    lam = torch.exp(log_A_re.double().clamp(-LOG_A_BOUND, LOG_A_BOUND))  # (n,)
    r = (dt * lam).clamp(min=RATE_MIN)  # (n,)
    z = torch.complex(-r, dt * A_im.double())  # (n,)
    a = torch.exp(z)
    f = dt * torch.expm1(z) / z  # (n,)
    return a, f


def _as_numpy(x, name):
    if isinstance(x, torch.Tensor):
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


class DiagonalSSM(nn.Module):
    r"""Diagonal linear state-space layer with ZOH discretisation and a parallel scan.

    Parameters
    ----------
    d_model : int
        Width ``H`` of the input and output.
    d_state : int, optional
        Number of modes ``N`` (default 32).
    mode : {"real", "complex"}, optional
        ``"real"``: ``N`` real modes, S4D-real init ``a_n = -(n + 1)``. ``"complex"``: ``N``
        complex modes (a real system of order ``2N``), S4D-Lin init ``a_n = -1/2 + i π n``.
    dt_min, dt_max : float, optional
        Range of the log-uniform initialisation of the steps ``Δ`` (within ``[1e-4, 0.1]``).
    scan : {"auto", "fft", "chunked"}, optional
        Parallel scan used by :meth:`forward`. ``"auto"`` is the chunked scan with its chunk
        length chosen from ``L`` (:func:`adapters.scan.auto_chunk`): faster than the FFT scan
        on CPU in ``benchmarks/bench_scan.py`` and more accurate per mode in float32 (no
        ``eps ||u|| ||K||`` error term).
    init : {"s4d"}, optional
        Initialisation family.
    device, dtype : optional
        Factory arguments for the parameters (real dtype; complex tensors use its complex type).

    Attributes
    ----------
    log_A, log_dt : nn.Parameter, shape (n_real,)
        Real modes: ``a_c = -exp(log_A)``, ``Δ = clamp(exp(log_dt), 1e-4, 0.1)``.
    B : nn.Parameter, shape (n_real, H)
        Real modes' continuous input matrix, ``B ~ N(0, 1/H)``.
    C : nn.Parameter, shape (H, n_real)
        Real modes' output matrix, ``C ~ N(0, 1/N)``.
    sign : buffer, shape (n_real,)
        ``+1`` (or ``-1`` for a negative real ``ā`` given to :meth:`from_discrete`).
    log_A_re, A_im, log_dt_cplx : nn.Parameter, shape (n_complex,)
        Complex modes: ``a_c = -exp(log_A_re) + i A_im``.
    B_cplx : nn.Parameter, shape (n_complex, H, 2)
        Complex modes' input matrix as (real, imaginary) pairs.
    C_cplx : nn.Parameter, shape (H, n_complex, 2)
        Complex modes' output matrix as (real, imaginary) pairs.

    Notes
    -----
    Zero-order hold with step :math:`\Delta_n` per mode:

    .. math::

        \bar a_n = e^{\Delta_n a_n}, \qquad
        \bar B_n = \frac{\bar a_n - 1}{a_n} B_n .

    Stability is part of the parameterisation: the decay rate :math:`-\Delta_n \Re a_n` is
    clamped to at least ``1e-6``, so :math:`|\bar a_n| \le e^{-10^{-6}} < 1` for any finite
    parameter values, also after ``load_state_dict``. The discretisation is evaluated in float64
    and rounded once. Parameters per module: ``2 N H + 2 N`` in real mode (the paper's count
    without the gate), ``4 N H + 3 N`` in complex mode.

    Numerics: the scan runs in float32 or better (see :mod:`adapters.scan`). Under autocast the
    two projections follow autocast (like ``nn.Linear``); without autocast the input is cast to
    the parameters' dtype and the output back to the input's dtype. States are kept in the
    parameters' precision (complex unless ``mode == "real"``).

    Examples
    --------
    >>> import torch
    >>> from adapters import DiagonalSSM
    >>> ssm = DiagonalSSM(16, 8)
    >>> u = torch.randn(2, 50, 16)
    >>> y, state = ssm(u, return_state=True)
    >>> y1, s1 = ssm(u[:, :30], return_state=True)
    >>> y2, s2 = ssm(u[:, 30:], s1, return_state=True)
    >>> bool(torch.allclose(torch.cat([y1, y2], 1), y, atol=1e-5))
    True
    """

    def __init__(
        self,
        d_model,
        d_state=32,
        *,
        mode="real",
        dt_min=1e-3,
        dt_max=1e-1,
        scan="auto",
        init="s4d",
        device=None,
        dtype=None,
    ):
        super().__init__()
        for name, value in (("d_model", d_model), ("d_state", d_state)):
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise AdapterConfigError(f"`{name}` must be a positive int; got {value!r}")
        if mode not in _MODES:
            raise AdapterConfigError(f"`mode` must be one of {_MODES}; got {mode!r}")
        if init != "s4d":
            raise AdapterConfigError(f"`init` must be 's4d'; got {init!r}")
        if not (DT_MIN <= dt_min <= dt_max <= DT_MAX):
            raise AdapterConfigError(
                f"`dt_min`, `dt_max` must satisfy {DT_MIN} <= dt_min <= dt_max <= {DT_MAX}; "
                f"got dt_min={dt_min!r}, dt_max={dt_max!r}"
            )
        n_real, n_cplx = (d_state, 0) if mode == "real" else (0, d_state)
        self._build(d_model, n_real, n_cplx, scan, device, dtype)
        self._init_s4d(dt_min, dt_max)

    # ------------------------------------------------------------------ construction

    def _build(self, d_model, n_real, n_cplx, scan, device, dtype):
        if scan not in _SCANS:
            raise AdapterConfigError(f"`scan` must be one of {_SCANS}; got {scan!r}")
        kw = {"device": device, "dtype": dtype or torch.get_default_dtype()}
        self.d_model = d_model
        self.n_real = n_real
        self.n_complex = n_cplx
        self.scan = scan
        if n_real:
            self.log_A = nn.Parameter(torch.empty(n_real, **kw))
            self.log_dt = nn.Parameter(torch.empty(n_real, **kw))
            self.B = nn.Parameter(torch.empty(n_real, d_model, **kw))
            self.C = nn.Parameter(torch.empty(d_model, n_real, **kw))
            self.register_buffer("sign", torch.ones(n_real, **kw))
        if n_cplx:
            self.log_A_re = nn.Parameter(torch.empty(n_cplx, **kw))
            self.A_im = nn.Parameter(torch.empty(n_cplx, **kw))
            self.log_dt_cplx = nn.Parameter(torch.empty(n_cplx, **kw))
            self.B_cplx = nn.Parameter(torch.empty(n_cplx, d_model, 2, **kw))
            self.C_cplx = nn.Parameter(torch.empty(d_model, n_cplx, 2, **kw))

    @torch.no_grad()
    def _init_s4d(self, dt_min, dt_max):
        H, N = self.d_model, self.d_state
        lo, hi = math.log(dt_min), math.log(dt_max)
        if self.n_real:
            n = self.n_real
            self.log_A.copy_(torch.log(torch.arange(1, n + 1, dtype=torch.float64)))
            self.log_dt.uniform_(lo, hi)
            self.B.normal_(0.0, 1.0 / math.sqrt(H))
            self.C.normal_(0.0, 1.0 / math.sqrt(N))
        if self.n_complex:
            n = self.n_complex
            self.log_A_re.fill_(math.log(0.5))
            self.A_im.copy_(math.pi * torch.arange(n, dtype=torch.float64))
            self.log_dt_cplx.uniform_(lo, hi)
            # complex normal: E|B|^2 = 1/H, E|C|^2 = 1/N
            self.B_cplx.normal_(0.0, 1.0 / math.sqrt(2 * H))
            self.C_cplx.normal_(0.0, 1.0 / math.sqrt(2 * N))

    @classmethod
    def from_discrete(
        cls, a, B, C, *, real_modes=None, scan="auto", dt=None, device=None, dtype=None
    ):
        r"""Build a module whose discrete system is exactly ``(a, B, C)``.

        Parameters
        ----------
        a : array_like or torch.Tensor, shape (N,)
            Discrete poles, real or complex, ``|a| < 1``. Real modes are the entries with a
            zero imaginary part whose row of `B` and column of `C` are real (to 1e-12
            relative); every other entry is ONE representative of a conjugate pair (its
            partner is implicit). `real_modes` overrides this rule.
        B : array_like or torch.Tensor, shape (N, H)
            Discrete input matrix ``B̄`` (complex rows for complex modes; rows of real modes must
            be real).
        C : array_like or torch.Tensor, shape (H, N)
            Output matrix, with the convention ``y = C_real s_real + 2 Re(C_cplx s_cplx)``.
        real_modes : array_like of bool, shape (N,), optional
            Which entries are real modes (each needs a real pole, row and column).
        scan : {"auto", "fft", "chunked"}, optional
            Scan of the new module.
        dt : float or array_like of shape (N,), optional
            Step ``Δ`` to store per mode (default 0.01); any value in ``[1e-4, 0.1]`` gives the
            same discrete system, it only sets the scale of the trainable parameters.
        device, dtype : optional
            Factory arguments (default dtype: torch's default float dtype).

        Returns
        -------
        DiagonalSSM
            ``mode`` ``"real"``, ``"complex"`` or ``"mixed"``; real modes come first (in their
            given order), then complex ones, so :meth:`discrete` returns the modes permuted
            that way. The parameters are trainable ``nn.Parameter`` s.

        Raises
        ------
        AdapterShapeError
            Non-conforming shapes.
        AdapterStabilityError
            ``|a| >= 1`` or non-finite entries.
        AdapterConfigError
            A real mode with a complex row of `B` / column of `C`, or `dt` outside
            ``[1e-4, 0.1]``.

        Notes
        -----
        Per mode, ``Δ`` is `dt`, the decay rate is ``r = -log|a|`` (stored as
        ``log_A = log(r/Δ)``), the angle ``θ = arg a`` (stored as ``A_im = θ/Δ``), and the
        continuous ``B = B̄ / f`` with the ZOH factor ``f`` computed from the *stored* (rounded)
        parameters, so ``B̄`` is reproduced to the rounding of ``B``. Negative real poles, which
        no real ZOH pole gives, are kept as real modes with ``sign = -1``. Poles with
        ``|a| > exp(-1e-6)`` are clamped there (with a warning); ``a = 0`` maps to an ``ā`` that
        underflows to exactly 0.

        Examples
        --------
        >>> import numpy as np
        >>> from adapters import DiagonalSSM
        >>> a = np.array([0.9, -0.3, 0.5 + 0.4j])
        >>> B = np.array([[1.0, 2.0], [0.5, 0.0], [1 - 1j, 2j]])
        >>> C = np.array([[1.0, 0.0, 0.5 + 0.5j], [0.0, 1.0, -1j]])
        >>> ssm = DiagonalSSM.from_discrete(a, B, C, dtype=torch.float64)
        >>> a2, B2, C2 = (t.detach().numpy() for t in ssm.discrete())
        >>> bool(np.abs(a2 - a).max() < 1e-14 and np.abs(B2 - B).max() < 1e-14)
        True
        """
        a = _as_numpy(a, "a")
        B = _as_numpy(B, "B")
        C = _as_numpy(C, "C")
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
        dt = np.broadcast_to(np.asarray(0.01 if dt is None else dt, dtype=np.float64), (N,))
        if not (np.all(dt >= DT_MIN) and np.all(dt <= DT_MAX)):
            raise AdapterConfigError(f"`dt` must lie in [{DT_MIN}, {DT_MAX}]; got {dt}")
        b_tol = 1e-12 * max(float(np.abs(B).max()), 1e-300)
        c_tol = 1e-12 * max(float(np.abs(C).max()), 1e-300)
        real_b = np.all(np.abs(np.imag(B)) <= b_tol, axis=1)  # (N,)
        real_c = np.all(np.abs(np.imag(C)) <= c_tol, axis=0)  # (N,)
        if real_modes is None:
            is_real = (np.imag(a) == 0) & real_b & real_c
        else:
            is_real = np.asarray(real_modes, dtype=bool)
            if is_real.shape != (N,):
                raise AdapterShapeError(
                    f"`real_modes` must have shape (N,) = {(N,)}; got {is_real.shape}"
                )
            bad = np.flatnonzero(is_real & ~((np.imag(a) == 0) & real_b & real_c))
            if bad.size:
                raise AdapterConfigError(
                    f"real modes need a real pole, a real row of `B` and a real column of `C`; "
                    f"entries {bad.tolist()} of `real_modes` are not"
                )
        ri, ci = np.flatnonzero(is_real), np.flatnonzero(~is_real)
        rate = -np.log(np.maximum(np.abs(a), 1e-300))
        if np.any(rate < RATE_MIN):
            warnings.warn(
                f"|a| up to {radius:.9f} exceeds exp(-{RATE_MIN:g}); clamped to the most "
                "persistent mode the parameterisation allows",
                stacklevel=2,
            )
        log_A = np.clip(np.log(np.maximum(rate, RATE_MIN) / dt), -LOG_A_BOUND, LOG_A_BOUND)

        self = cls.__new__(cls)
        nn.Module.__init__(self)
        self._build(H, len(ri), len(ci), scan, device, dtype)
        with torch.no_grad():
            if len(ri):
                self.log_A.copy_(torch.from_numpy(log_A[ri]))
                self.log_dt.copy_(torch.from_numpy(np.log(dt[ri])))
                self.sign.copy_(torch.from_numpy(np.where(np.real(a[ri]) < 0, -1.0, 1.0)))
                _, f = _zoh_real(self.log_A, self.log_dt, self.sign)  # from stored values
                Br = torch.from_numpy(np.ascontiguousarray(np.real(B[ri])))
                self.B.copy_(Br / f.cpu()[:, None])
                self.C.copy_(torch.from_numpy(np.ascontiguousarray(np.real(C[:, ri]))))
            if len(ci):
                self.log_A_re.copy_(torch.from_numpy(log_A[ci]))
                self.A_im.copy_(torch.from_numpy(np.angle(a[ci]) / dt[ci]))
                self.log_dt_cplx.copy_(torch.from_numpy(np.log(dt[ci])))
                _, f = _zoh_complex(self.log_A_re, self.A_im, self.log_dt_cplx)
                Bc = torch.from_numpy(np.ascontiguousarray(B[ci].astype(np.complex128)))
                self.B_cplx.copy_(torch.view_as_real(Bc / f.cpu()[:, None]))
                Cc = torch.from_numpy(np.ascontiguousarray(C[:, ci].astype(np.complex128)))
                self.C_cplx.copy_(torch.view_as_real(Cc))
        return self

    # ------------------------------------------------------------------ properties

    @property
    def d_state(self) -> int:
        """Number of modes ``N = n_real + n_complex`` (the length of the state vector)."""
        return self.n_real + self.n_complex

    @property
    def mode(self) -> str:
        """``"real"``, ``"complex"`` or ``"mixed"``."""
        if self.n_complex == 0:
            return "real"
        return "complex" if self.n_real == 0 else "mixed"

    @property
    def order(self) -> int:
        """Order of the equivalent real system, ``n_real + 2 n_complex``."""
        return self.n_real + 2 * self.n_complex

    @property
    def num_parameters(self) -> int:
        """Number of trainable scalars (``2 N H + 2 N`` in real mode)."""
        return sum(p.numel() for p in self.parameters())

    @property
    def state_dtype(self) -> torch.dtype:
        """Dtype of the state: the parameters' dtype, complex unless ``mode == "real"``."""
        dtype = self._param_dtype()
        return dtype if self.n_complex == 0 else _complex_of(dtype)

    def _param_dtype(self):
        return next(self.parameters()).dtype

    def initial_state(self, batch_size, device=None):
        """Zero state, shape ``(batch_size, N)``, of :attr:`state_dtype`.

        Parameters
        ----------
        batch_size : int
            Number of sequences ``B``.
        device : torch.device or str, optional
            Device of the state; that of the parameters when None.

        Returns
        -------
        torch.Tensor, shape (B, N)
            Zeros of :attr:`state_dtype` (complex unless ``mode == "real"``).

        Examples
        --------
        >>> ssm = DiagonalSSM(8, 4)
        >>> ssm.initial_state(3).shape
        torch.Size([3, 4])
        """
        device = device if device is not None else next(self.parameters()).device
        return torch.zeros(batch_size, self.d_state, dtype=self.state_dtype, device=device)

    def extra_repr(self) -> str:
        """Sizes, mode and scan shown by ``repr(module)``.

        Returns
        -------
        str
            ``"d_model=..., d_state=..., mode=..., n_real=..., n_complex=..., scan=..."``.
        """
        return (
            f"d_model={self.d_model}, d_state={self.d_state}, mode={self.mode!r}, "
            f"n_real={self.n_real}, n_complex={self.n_complex}, scan={self.scan!r}"
        )

    # ------------------------------------------------------------------ discrete system

    def _groups(self, wide=False):
        """Discrete (a, B̄, C) per group; float64 when ``wide``, else the parameters' dtype."""
        real = cplx = None
        if self.n_real:
            a, f = _zoh_real(self.log_A, self.log_dt, self.sign)
            dtype = torch.float64 if wide else self.B.dtype
            B = f.to(dtype)[:, None] * self.B.to(dtype)  # (n_real, H)
            real = (a.to(dtype), B, self.C.to(dtype))
        if self.n_complex:
            a, f = _zoh_complex(self.log_A_re, self.A_im, self.log_dt_cplx)
            dtype = torch.complex128 if wide else _complex_of(self.B_cplx.dtype)
            Bc = torch.view_as_complex(self.B_cplx.to(_real_of(dtype)))  # (n_complex, H)
            B = f.to(dtype)[:, None] * Bc
            C = torch.view_as_complex(self.C_cplx.to(_real_of(dtype)))  # (H, n_complex)
            cplx = (a.to(dtype), B, C)
        return real, cplx

    def discrete(self):
        """Discrete system ``(a, B̄, C)`` in the parameters' precision.

        Returns
        -------
        a : torch.Tensor, shape (N,)
            Discrete poles ``ā`` (real tensor in real mode, complex otherwise).
        B : torch.Tensor, shape (N, H)
            ``B̄`` after ZOH.
        C : torch.Tensor, shape (H, N)
            Output matrix; ``y = C[:, :n_real] s[:, :n_real] + 2 Re(C[:, n_real:] s[:, n_real:])``.
        """
        real, cplx = self._groups()
        if cplx is None:
            return real
        if real is None:
            return cplx
        dtype = cplx[0].dtype
        return (
            torch.cat([real[0].to(dtype), cplx[0]]),
            torch.cat([real[1].to(dtype), cplx[1]], dim=0),
            torch.cat([real[2].to(dtype), cplx[2]], dim=1),
        )

    def as_lti(self):
        """Export as a real float64 :class:`lti.DiscreteLTI` of order :attr:`order`.

        Complex modes are expanded into conjugate pairs and turned into real 2x2 blocks by
        :meth:`lti.DiscreteLTI.from_diagonal` (a complex mode whose pole is real becomes two
        real modes); ``D = 0``.

        Time convention: the module's state ``s_t`` already contains ``u_t``
        (``y_t = C s_t``), while :class:`lti.DiscreteLTI` reads ``y_t = C x_t`` before
        ``x_{t+1} = A x_t + B u_t``. So the module's output is the exported system's output
        one step later, ``y_module[t] = y_lti[t + 1]``: the transfer functions differ by the
        factor ``z``, which changes neither the Gramians, the Hankel singular values, the
        H-infinity norm, nor the balanced-truncation error bounds.

        Returns
        -------
        lti.DiscreteLTI
            ``A`` (order, order), ``B`` (order, H), ``C`` (H, order).
        """
        from lti import DiscreteLTI

        with torch.no_grad():
            real, cplx = self._groups(wide=True)
        a, B, C = [], [], []
        if real is not None:
            a.append(real[0].detach().cpu().numpy())
            B.append(real[1].detach().cpu().numpy())
            C.append(real[2].detach().cpu().numpy())
        if cplx is not None:
            ac, Bc, Cc = (t.detach().cpu().resolve_conj().numpy() for t in cplx)
            # a complex mode with a real pole (e.g. A_im = 0) is two real modes at that pole,
            # driven by Re B and Im B and read by 2 Re C and -2 Im C
            flat = np.abs(ac.imag) <= 1e-12 * np.maximum(1.0, np.abs(ac))
            f, p = np.flatnonzero(flat), np.flatnonzero(~flat)
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

    # ------------------------------------------------------------------ running

    def _check_input(self, u, dims):
        if not isinstance(u, torch.Tensor):
            raise AdapterDtypeError(f"`u` must be a torch.Tensor; got {type(u).__name__}")
        if not u.is_floating_point():
            raise AdapterDtypeError(f"`u` must be a floating-point tensor; got dtype {u.dtype}")
        if u.dim() != dims or u.shape[-1] != self.d_model:
            want = "(B, L, H)" if dims == 3 else "(B, H)"
            raise AdapterShapeError(
                f"`u` must have shape {want} with H = d_model = {self.d_model}; "
                f"got {tuple(u.shape)}"
            )

    def _split_state(self, state, batch):
        if state is None:
            return None, None
        if not isinstance(state, torch.Tensor) or state.shape != (batch, self.d_state):
            got = tuple(state.shape) if isinstance(state, torch.Tensor) else type(state).__name__
            raise AdapterShapeError(
                f"`state` must have shape (B, N) = {(batch, self.d_state)}; got {got}"
            )
        s_r = state[:, : self.n_real].real if self.n_real else None
        s_c = state[:, self.n_real :] if self.n_complex else None
        return s_r, s_c

    def _join_state(self, s_r, s_c):
        dtype = self.state_dtype
        parts = [s.to(dtype) for s in (s_r, s_c) if s is not None]
        return parts[0] if len(parts) == 1 else torch.cat(parts, dim=-1)

    def _core(self):
        if self.scan == "fft":
            return _fft_core
        return functools.partial(_chunked_core, T=None)  # chunk length by L (auto_chunk)

    def _projections(self):
        """Poles and the ONE input and ONE output projection of all modes together.

        Returns ``(a_r, a_c, W_in, W_out)``. ``v = x W_in^T`` holds the complex modes' inputs
        first, as interleaved (Re, Im) pairs so that they view as a complex tensor without a
        copy, then the real modes' inputs (plus one zero row when there are complex modes and
        an odd number of real ones, which keeps that view aligned); ``y = z W_out^T`` reads
        ``z = [view_as_real(s_c), s_r]``, with ``2 Re(C s) = 2 Re C Re s - 2 Im C Im s``.
        One matmul each way instead of one per group: with a few modes the small matmuls
        cost more than the scans.
        """
        real, cplx = self._groups()
        H = self.d_model
        rows, cols, a_r, a_c = [], [], None, None
        if cplx is not None:
            a_c, B, C = cplx
            n = self.n_complex
            rows.append(torch.view_as_real(B).transpose(1, 2).reshape(2 * n, H))  # (2n, H)
            cols.append(torch.view_as_real(2 * C.conj()).reshape(H, 2 * n))  # (H, 2n)
        if real is not None:
            a_r, B, C = real
            rows.append(B)  # (n_real, H)
            cols.append(C)  # (H, n_real)
            if cplx is not None and self.n_real % 2:
                rows.append(B.new_zeros(1, H))
        W_in = rows[0] if len(rows) == 1 else torch.cat(rows, dim=0)  # (W, H)
        W_out = cols[0] if len(cols) == 1 else torch.cat(cols, dim=1)  # (H, n_real + 2n)
        return a_r, a_c, W_in, W_out

    def _split_inputs(self, v, a_r, a_c):
        """Views of ``v = x W_in^T`` (..., W) as the complex and the real modes' inputs."""
        n2 = 2 * self.n_complex
        v_c = v_r = None
        if a_c is not None:
            v_c = v[..., :n2].to(_real_of(a_c.dtype)).unflatten(-1, (self.n_complex, 2))
            v_c = torch.view_as_complex(v_c)  # (..., n_complex)
        if a_r is not None:
            v_r = v[..., n2 : n2 + self.n_real].to(a_r.dtype)  # (..., n_real)
        return v_c, v_r

    def _readout(self, s_c, s_r, W_out):
        """``y = C_r s_r + 2 Re(C_c s_c)`` as one matmul."""
        parts = [torch.view_as_real(s_c).flatten(-2)] if s_c is not None else []  # (..., 2n)
        if s_r is not None:
            parts.append(s_r)  # (..., n_real)
        z = parts[0] if len(parts) == 1 else torch.cat(parts, dim=-1)
        return F.linear(z, W_out)  # (..., H)

    def forward(self, u, state=None, *, return_state=False):
        """Run the system over a sequence.

        Parameters
        ----------
        u : torch.Tensor, shape (B, L, H)
            Input sequence (any ``L >= 0``).
        state : torch.Tensor, shape (B, N), optional
            State before the first step (e.g. the `state` returned for the previous piece);
            zeros by default. In complex/mixed mode it is complex and the entries of the real
            modes (the first ``n_real``) are real (their imaginary parts are ignored).
        return_state : bool, optional
            Also return the final state.

        Returns
        -------
        y : torch.Tensor, shape (B, L, H)
            Output; the input's dtype without autocast, autocast's dtype under it.
        state : torch.Tensor, shape (B, N)
            Final state (only with ``return_state=True``), of :attr:`state_dtype`.
        """
        self._check_input(u, 3)
        s_r0, s_c0 = self._split_state(state, u.shape[0])
        autocast = _autocast_on(u.device.type)
        x = u if autocast else u.to(self._param_dtype())
        a_r, a_c, W_in, W_out = self._projections()
        core = self._core()
        # one projection for all modes; the scans run in their precision (autocast-proof)
        v_c, v_r = self._split_inputs(F.linear(x, W_in), a_r, a_c)  # (B, L, n_*)
        s_c = s_r = last_c = last_r = None
        if v_c is not None:
            s_c, last_c = _run(v_c, a_c, s_c0, core, check=False)  # (B, L, n_complex)
        if v_r is not None:
            s_r, last_r = _run(v_r, a_r, s_r0, core, check=False)  # (B, L, n_real)
        y = self._readout(s_c, s_r, W_out)  # (B, L, H)
        if not autocast:
            y = y.to(u.dtype)
        if return_state:
            return y, self._join_state(last_r, last_c)
        return y

    def step(self, x_t, state=None):
        """Advance one token (decoding): ``s = ā s + B̄ x_t``, ``y = C s``.

        Parameters
        ----------
        x_t : torch.Tensor, shape (B, H)
            Input at the current position.
        state : torch.Tensor, shape (B, N), optional
            State after the previous position; zeros when None.

        Returns
        -------
        y_t : torch.Tensor, shape (B, H)
            Output at the current position (same dtype rules as :meth:`forward`).
        state : torch.Tensor, shape (B, N)
            New state, of :attr:`state_dtype`.
        """
        self._check_input(x_t, 2)
        s_r0, s_c0 = self._split_state(state, x_t.shape[0])
        autocast = _autocast_on(x_t.device.type)
        x = x_t if autocast else x_t.to(self._param_dtype())
        a_r, a_c, W_in, W_out = self._projections()
        v_c, v_r = self._split_inputs(F.linear(x, W_in), a_r, a_c)  # (B, n_*)
        s_c = s_r = None
        if v_c is not None:
            s_c = v_c.clone() if s_c0 is None else a_c * s_c0.to(a_c.dtype) + v_c  # (B, n)
        if v_r is not None:
            s_r = v_r.clone() if s_r0 is None else a_r * s_r0.to(a_r.dtype) + v_r  # (B, n)
        y = self._readout(s_c, s_r, W_out)  # (B, H)
        if not autocast:
            y = y.to(x_t.dtype)
        return y, self._join_state(s_r, s_c)


def _complex_of(dtype):
    return torch.complex128 if dtype == torch.float64 else torch.complex64


def _real_of(dtype):
    return torch.float64 if dtype in (torch.complex128, torch.float64) else torch.float32


class HRMAdapter(nn.Module):
    r"""Gated residual SSM branch: ``y = gate · ssm(u)``, placed beside a frozen MLP.

    Parameters
    ----------
    d_model : int
        Width ``H``.
    d_state : int, optional
        Modes ``N`` of a new :class:`DiagonalSSM` (ignored when `ssm` is given).
    gate_init : float, optional
        Initial gate; 0 (default) makes the branch an exact no-op at the start, like LoRA's
        zero-initialised ``B``. A small non-zero value (e.g. 1e-2) lets gradients reach the
        SSM from step one.
    ssm : DiagonalSSM, optional
        An existing SSM to wrap (e.g. a reduced one from :meth:`DiagonalSSM.from_discrete`).
    reads : {"mlp_input", "mlp_output"}, optional
        Which stream drives the SSM: ``"mlp_input"`` (default), the MLP's normalised input
        ``LN(h)`` as in the reference experiments; ``"mlp_output"``, the MLP's output as in the
        paper's equation. Stored here and honoured by :func:`adapters.inject`.
    **ssm_kwargs
        Passed to :class:`DiagonalSSM` (``mode``, ``dt_min``, ``dt_max``, ``scan``, ...).

    Notes
    -----
    The block becomes :math:`h_{out} = h + \mathrm{MLP}(\mathrm{LN}(h)) + \alpha\, y`,
    :math:`y = \mathrm{SSM}(\text{stream})`, with the scalar gate :math:`\alpha`. Parameters:
    ``2 N H + 2 N + 1`` in real mode.

    Examples
    --------
    >>> import torch
    >>> from adapters import HRMAdapter
    >>> adapter = HRMAdapter(16, 4)
    >>> bool((adapter(torch.randn(2, 10, 16)) == 0).all())
    True
    """

    def __init__(
        self, d_model, d_state=32, *, gate_init=0.0, ssm=None, reads="mlp_input", **ssm_kwargs
    ):
        super().__init__()
        if reads not in _READS:
            raise AdapterConfigError(f"`reads` must be one of {_READS}; got {reads!r}")
        if ssm is None:
            ssm = DiagonalSSM(d_model, d_state, **ssm_kwargs)
        else:
            if not isinstance(ssm, DiagonalSSM):
                raise AdapterConfigError(f"`ssm` must be a DiagonalSSM; got {type(ssm).__name__}")
            if ssm_kwargs:
                raise AdapterConfigError(
                    "pass either `ssm` or SSM keyword arguments, not both; "
                    f"got {sorted(ssm_kwargs)}"
                )
            if ssm.d_model != d_model:
                raise AdapterShapeError(
                    f"`ssm.d_model` = {ssm.d_model} does not match `d_model` = {d_model}"
                )
        if not math.isfinite(float(gate_init)):
            raise AdapterConfigError(f"`gate_init` must be finite; got {gate_init!r}")
        p = next(ssm.parameters())
        self.ssm = ssm
        self.gate = nn.Parameter(torch.tensor(float(gate_init), dtype=p.dtype, device=p.device))
        self.reads = reads

    @property
    def d_model(self) -> int:
        """Width ``H``."""
        return self.ssm.d_model

    @property
    def d_state(self) -> int:
        """Modes ``N`` of the wrapped SSM."""
        return self.ssm.d_state

    @property
    def num_parameters(self) -> int:
        """Trainable scalars (``2 N H + 2 N + 1`` in real mode)."""
        return sum(p.numel() for p in self.parameters())

    def initial_state(self, batch_size, device=None):
        """Zero state of the wrapped SSM, shape ``(batch_size, N)``.

        Parameters
        ----------
        batch_size : int
            Number of sequences ``B``.
        device : torch.device or str, optional
            Device of the state; that of the parameters when None.

        Returns
        -------
        torch.Tensor, shape (B, N)
            Zeros of the SSM's :attr:`DiagonalSSM.state_dtype`.
        """
        return self.ssm.initial_state(batch_size, device)

    def extra_repr(self) -> str:
        """Stream and gate value shown by ``repr(module)``.

        Returns
        -------
        str
            ``"reads=..., gate=..."``.
        """
        return f"reads={self.reads!r}, gate={float(self.gate.detach()):.4g}"

    def forward(self, u, state=None, *, return_state=False):
        """Gated output ``gate · ssm(u)`` over a sequence.

        Parameters
        ----------
        u : torch.Tensor, shape (B, L, H)
            Input sequence (the stream the adapter reads).
        state : torch.Tensor, shape (B, N), optional
            State before the first step; zeros when None (see :meth:`DiagonalSSM.forward`).
        return_state : bool, optional
            Also return the final state.

        Returns
        -------
        y : torch.Tensor, shape (B, L, H)
            ``gate`` times the SSM output (dtype as :meth:`DiagonalSSM.forward`).
        state : torch.Tensor, shape (B, N)
            Final state (only with ``return_state=True``); not scaled by the gate.

        Raises
        ------
        AdapterDtypeError
            If ``u`` is not a floating-point tensor.
        AdapterShapeError
            If ``u`` is not (B, L, H) with ``H = d_model``, or ``state`` is not (B, N).

        Examples
        --------
        >>> adapter = HRMAdapter(8, 4, gate_init=0.5)
        >>> y, s = adapter(torch.randn(2, 5, 8), return_state=True)
        >>> tuple(y.shape), tuple(s.shape)
        ((2, 5, 8), (2, 4))
        """
        if return_state:
            y, state = self.ssm(u, state, return_state=True)
            return self.gate.to(y.dtype) * y, state
        y = self.ssm(u, state)
        return self.gate.to(y.dtype) * y

    def step(self, x_t, state=None):
        """One decoding step: ``gate · y_t`` with ``y_t, state = ssm.step(x_t, state)``.

        Parameters
        ----------
        x_t : torch.Tensor, shape (B, H)
            Input at the current position.
        state : torch.Tensor, shape (B, N), optional
            State after the previous position; zeros when None.

        Returns
        -------
        y_t : torch.Tensor, shape (B, H)
            Gated output at the current position.
        state : torch.Tensor, shape (B, N)
            New state (not scaled by the gate).

        Raises
        ------
        AdapterDtypeError
            If ``x_t`` is not a floating-point tensor.
        AdapterShapeError
            If ``x_t`` is not (B, H) with ``H = d_model``, or ``state`` is not (B, N).

        Examples
        --------
        One step equals the last position of :meth:`forward` on the same prefix:

        >>> adapter = HRMAdapter(8, 4, gate_init=0.5)
        >>> u = torch.randn(2, 3, 8)
        >>> _, s = adapter(u[:, :2], return_state=True)
        >>> y_t, _ = adapter.step(u[:, 2], s)
        >>> torch.allclose(y_t, adapter(u)[:, 2], atol=1e-5)
        True
        """
        y, state = self.ssm.step(x_t, state)
        return self.gate.to(y.dtype) * y, state
