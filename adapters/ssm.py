r"""The diagonal state-space module :class:`DiagonalSSM` (the gated branch: :mod:`adapters.layer`).

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
is how a reduced (modal) system returns from :mod:`lti` (conversions: :mod:`adapters.ssm_lti`).
"""

from __future__ import annotations

import math

import numpy as np
import torch
from torch import nn
from torch.nn import functional as F  # noqa: N812

from adapters.exceptions import (
    AdapterConfigError,
    AdapterDtypeError,
    AdapterShapeError,
)
from adapters.scan import autocast_for, chunked_core, fft_core, run_core
from adapters.ssm_lti import check_modal, lti_state_map, modal_to_lti

__all__ = ["DiagonalSSM", "MODES", "SCANS"]

DT_MIN = 1e-4
"""Smallest step ``Δ`` (the clamp of the paper)."""
DT_MAX = 1e-1
"""Largest step ``Δ``."""
RATE_MIN = 1e-6
"""Smallest decay rate ``Δ·|Re a|``, so ``|ā| <= exp(-1e-6)`` whatever the parameters hold."""
LOG_A_BOUND = 20.0
"""``log_A`` is clamped to ``[-20, 20]`` before ``exp`` (finite values, finite gradients)."""

MODES = ("real", "complex")
"""Values of ``mode`` a new module accepts (``"mixed"`` modules come from :meth:`from_discrete`)."""
SCANS = ("auto", "fft", "chunked")
"""Values of ``scan``."""


def zoh_real(log_A, log_dt, sign):
    """Real modes: ``ā = sign · exp(-r)``, ZOH factor ``Δ (1 - e^{-r}) / r``, float64."""
    dt = torch.exp(log_dt.double()).clamp(DT_MIN, DT_MAX)  # (n,)
    lam = torch.exp(log_A.double().clamp(-LOG_A_BOUND, LOG_A_BOUND))  # (n,)
    nr = (dt * lam).clamp(min=RATE_MIN).neg()  # (n,), minus the decay rate r
    # sign is +1 or -1: copysign is the product sign * e^{-r}, exactly, in one kernel
    a = torch.copysign(torch.exp(nr), sign)  # (n,)
    # (ā - 1) / a_c = dt (1 - e^{-r}) / r, written as dt expm1(-r) / (-r): the same bits,
    # since negation is exact (a few kernels fewer: this runs once per forward)
    f = dt * torch.expm1(nr) / nr  # (n,)
    return a, f


def zoh_complex(log_A_re, A_im, log_dt):
    """Complex modes: ``ā = exp(z)``, ``z = Δ(-λ + iω)``, ZOH factor ``Δ (e^z - 1) / z``."""
    dt = torch.exp(log_dt.double()).clamp(DT_MIN, DT_MAX)  # (n,)
    lam = torch.exp(log_A_re.double().clamp(-LOG_A_BOUND, LOG_A_BOUND))  # (n,)
    nr = (dt * lam).clamp(min=RATE_MIN).neg()  # (n,), minus the decay rate
    z = torch.complex(nr, dt * A_im.double())  # (n,)
    a = torch.exp(z)
    f = dt * torch.expm1(z) / z  # (n,)
    return a, f


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
        if mode not in MODES:
            raise AdapterConfigError(f"`mode` must be one of {MODES}; got {mode!r}")
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
        if scan not in SCANS:
            raise AdapterConfigError(f"`scan` must be one of {SCANS}; got {scan!r}")
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
        system = check_modal(a, B, C, real_modes=real_modes, dt=dt, dt_range=(DT_MIN, DT_MAX),
                             rate_min=RATE_MIN, log_bound=LOG_A_BOUND)
        a, B, C, dt, log_A = system.a, system.B, system.C, system.dt, system.log_A
        H = B.shape[1]
        ri, ci = system.real, system.complex

        self = cls.__new__(cls)
        nn.Module.__init__(self)
        self._build(H, len(ri), len(ci), scan, device, dtype)
        with torch.no_grad():
            if len(ri):
                self.log_A.copy_(torch.from_numpy(log_A[ri]))
                self.log_dt.copy_(torch.from_numpy(np.log(dt[ri])))
                self.sign.copy_(torch.from_numpy(np.where(np.real(a[ri]) < 0, -1.0, 1.0)))
                _, f = zoh_real(self.log_A, self.log_dt, self.sign)  # from stored values
                Br = torch.from_numpy(np.ascontiguousarray(np.real(B[ri])))
                self.B.copy_(Br / f.cpu()[:, None])
                self.C.copy_(torch.from_numpy(np.ascontiguousarray(np.real(C[:, ri]))))
            if len(ci):
                self.log_A_re.copy_(torch.from_numpy(log_A[ci]))
                self.A_im.copy_(torch.from_numpy(np.angle(a[ci]) / dt[ci]))
                self.log_dt_cplx.copy_(torch.from_numpy(np.log(dt[ci])))
                _, f = zoh_complex(self.log_A_re, self.A_im, self.log_dt_cplx)
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
        # the first of its own parameters, which parameters() yields first, without that
        # generator's walk (~20 us in place, several times per layer in a prompt)
        for p in self._parameters.values():
            if p is not None:
                return p.dtype
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

    def _groups(self, wide=False, zoh=(None, None)):
        """Discrete (a, B̄, C) per group; float64 when ``wide``, else the parameters' dtype.
        ``zoh``: each group's ``(ā, factor)`` when computed already (:mod:`adapters._prefill`)."""
        real = cplx = None
        if self.n_real:
            a, f = zoh[0] or zoh_real(self.log_A, self.log_dt, self.sign)
            dtype = torch.float64 if wide else self.B.dtype
            B = f.to(dtype)[:, None] * _cast(self.B, dtype)  # (n_real, H)
            real = (a.to(dtype), B, _cast(self.C, dtype))
        if self.n_complex:
            a, f = zoh[1] or zoh_complex(self.log_A_re, self.A_im, self.log_dt_cplx)
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
        real modes); ``D = 0``. Coordinates and the one-step time shift between the two
        conventions: :mod:`adapters.ssm_lti`.

        Returns
        -------
        lti.DiscreteLTI
            ``A`` (order, order), ``B`` (order, H), ``C`` (H, order).
        """
        with torch.no_grad():
            real, cplx = self._groups(wide=True)
        real = None if real is None else [t.detach().cpu().numpy() for t in real]
        cplx = None if cplx is None else [t.detach().cpu().resolve_conj().numpy() for t in cplx]
        return modal_to_lti(real, cplx)

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
        parts = [_cast(s, dtype) for s in (s_r, s_c) if s is not None]
        return parts[0] if len(parts) == 1 else torch.cat(parts, dim=-1)

    def _core(self):
        if self.scan == "fft":
            return fft_core
        return chunked_core  # T=None: the chunk length by L (auto_chunk)

    def _projections(self, zoh=(None, None)):
        """Poles and the ONE input and ONE output projection of all modes together.

        Returns ``(a_r, a_c, W_in, W_out)``. ``v = x W_in^T`` holds the complex modes' inputs
        first, as interleaved (Re, Im) pairs so that they view as a complex tensor without a
        copy, then the real modes' inputs (plus one zero row when there are complex modes and
        an odd number of real ones, which keeps that view aligned); ``y = z W_out^T`` reads
        ``z = [view_as_real(s_c), s_r]``, with ``2 Re(C s) = 2 Re C Re s - 2 Im C Im s``.
        One matmul each way instead of one per group: with a few modes the small matmuls
        cost more than the scans. ``zoh`` as :meth:`_groups`.
        """
        real, cplx = self._groups(zoh=zoh)
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
            if n2 or v.shape[-1] != self.n_real:  # (no full-range view: one op fewer)
                v = v[..., n2 : n2 + self.n_real]
            v_r = _cast(v, a_r.dtype)  # (..., n_real)
        return v_c, v_r

    def _readout(self, s_c, s_r, W_out):
        """``y = C_r s_r + 2 Re(C_c s_c)`` as one matmul."""
        parts = [torch.view_as_real(s_c).flatten(-2)] if s_c is not None else []  # (..., 2n)
        if s_r is not None:
            parts.append(s_r)  # (..., n_real)
        z = parts[0] if len(parts) == 1 else torch.cat(parts, dim=-1)
        return F.linear(z, W_out)  # (..., H)

    def _scan(self, u, state, projections=None):
        """Both groups' state trajectories from ``state``: ``(s_c, s_r, last_c, last_r, W_out)``.

        ``s_c`` (B, L, n_complex) and ``s_r`` (B, L, n_real), None for an empty group; the
        projection follows autocast, the scans run in the state precision.
        """
        s_r0, s_c0 = self._split_state(state, u.shape[0])
        x = u if autocast_for(u) else _cast(u, self._param_dtype())
        a_r, a_c, W_in, W_out = self._projections() if projections is None else projections
        core = self._core()
        # one projection for all modes; the scans run in their precision (autocast-proof)
        v_c, v_r = self._split_inputs(F.linear(x, W_in), a_r, a_c)  # (B, L, n_*)
        s_c = s_r = last_c = last_r = None
        if v_c is not None:
            s_c, last_c = run_core(v_c, a_c, s_c0, core, check=False)  # (B, L, n_complex)
        if v_r is not None:
            s_r, last_r = run_core(v_r, a_r, s_r0, core, check=False)  # (B, L, n_real)
        return s_c, s_r, last_c, last_r, W_out

    def trajectory(self, u, state=None):
        r"""The state after every position: ``s_t = ā ⊙ s_{t-1} + B̄ u_t`` from ``s_0 = state``.

        The one place the module's state trajectory is computed (:meth:`forward` reads it out;
        cached generation and calibration use it). No host synchronisation.

        Parameters
        ----------
        u : torch.Tensor, shape (B, L, H)
            Input sequence.
        state : torch.Tensor, shape (B, N), optional
            State before the first position; zeros when None.

        Returns
        -------
        torch.Tensor, shape (B, L, N)
            States of :attr:`state_dtype`, modes in the order of :meth:`discrete`
            (real modes first, their entries real). ``trajectory(u)[:, -1]`` is the final
            state :meth:`forward` returns.

        Examples
        --------
        >>> ssm = DiagonalSSM(8, 4)
        >>> u = torch.randn(2, 6, 8)
        >>> s = ssm.trajectory(u)
        >>> y, last = ssm(u, return_state=True)
        >>> bool(torch.equal(s[:, -1], last)), bool(torch.allclose(ssm.readout(s), y))
        (True, True)
        """
        self._check_input(u, 3)
        s_c, s_r, _, _, _ = self._scan(u, state)
        return self._join_state(s_r, s_c)

    def readout(self, s):
        """Output ``y = C_r s_r + 2 Re(C_c s_c)`` of states ``s``.

        Parameters
        ----------
        s : torch.Tensor, shape (..., N)
            States as :meth:`trajectory` returns them.

        Returns
        -------
        torch.Tensor, shape (..., H)
            In the parameters' dtype (autocast's under autocast).
        """
        s_r = s[..., : self.n_real].real if self.n_real else None
        s_c = s[..., self.n_real :] if self.n_complex else None
        _, _, _, W_out = self._projections()
        if s_r is not None:
            s_r = s_r.to(W_out.dtype if s_c is None else _real_of(s_c.dtype))
        return self._readout(s_c, s_r, W_out)

    def lti_states(self, s):
        """States ``s`` of the module in the coordinates of :meth:`as_lti`'s system.

        Parameters
        ----------
        s : torch.Tensor, shape (..., N)
            Module states (e.g. :meth:`trajectory`).

        Returns
        -------
        torch.Tensor, shape (..., order)
            Real; ``x = M [Re s_real, Re s_cplx, Im s_cplx]`` with the signed scaled
            permutation ``M`` of :func:`adapters.ssm_lti.lti_state_map`.

        Examples
        --------
        >>> ssm = DiagonalSSM(4, 3, mode="complex", dtype=torch.float64)
        >>> u = torch.randn(1, 20, 4, dtype=torch.float64)
        >>> x = ssm.lti_states(ssm.trajectory(u))  # (1, 20, 6)
        >>> G = ssm.as_lti()  # x_{t+1} = A x_t + B u_{t+1} in the module's time convention
        >>> A, B = torch.tensor(G.A), torch.tensor(G.B)
        >>> bool(torch.allclose(x[0, 1:], x[0, :-1] @ A.T + u[0, 1:] @ B.T))
        True
        """
        a_c = None
        if self.n_complex:
            with torch.no_grad():
                a_c = self._groups(wide=True)[1][0].cpu().resolve_conj().numpy()
        index, scale = lti_state_map(self.n_real, [] if a_c is None else a_c)
        parts = [s[..., : self.n_real].real] if self.n_real else []
        if self.n_complex:
            parts += [s[..., self.n_real :].real, s[..., self.n_real :].imag]
        z = parts[0] if len(parts) == 1 else torch.cat(parts, dim=-1)  # (..., n)
        index = torch.from_numpy(index).to(z.device)
        return z[..., index] * torch.from_numpy(scale).to(z.device, z.dtype)

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
        s_c, s_r, last_c, last_r, W_out = self._scan(u, state)
        y = self._readout(s_c, s_r, W_out)  # (B, L, H)
        if not autocast_for(u):
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
        autocast = autocast_for(x_t)
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


def _cast(t, dtype):
    """``t.to(dtype)`` without the call (its argument parsing) when ``t`` has that dtype."""
    return t if t.dtype is dtype else t.to(dtype)


def _complex_of(dtype):
    return torch.complex128 if dtype == torch.float64 else torch.complex64


def _real_of(dtype):
    return torch.float64 if dtype in (torch.complex128, torch.float64) else torch.float32
