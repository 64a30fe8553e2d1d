r"""The gated SSM branch placed beside a frozen MLP: :class:`HRMAdapter`.

Shapes: B batch, L length, H model width (``d_model``), N number of modes (``d_state``).

``y = gate · ssm(u)`` with a :class:`adapters.ssm.DiagonalSSM` and one scalar gate; with gate 0
(the default) the branch is an exact no-op, as LoRA's zero-initialised ``B``.
:mod:`adapters.injection` attaches one to each target module.
"""

from __future__ import annotations

import math

import torch
from torch import nn

from adapters.exceptions import AdapterConfigError, AdapterShapeError
from adapters.scan import autocast_on
from adapters.ssm import DiagonalSSM

__all__ = ["HRMAdapter", "READS"]

READS = ("mlp_input", "mlp_output")
"""Streams an adapter can read: the MLP's input or its output."""
_LOW = (torch.float16, torch.bfloat16)


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

    Dtype policy: the adapter's tensors stay float32 or float64 (``HRMConfig.dtype``). A cast
    of the model to float16/bfloat16 (``model.to(torch.bfloat16)``, ``model.half()``) moves
    them to the new device but keeps their dtype, because the poles ``ā = exp(-Δλ)`` of slow
    modes round to 1 in bfloat16 (0.999 -> 1.0); casts to float32/float64 apply as usual.

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
        if reads not in READS:
            raise AdapterConfigError(f"`reads` must be one of {READS}; got {reads!r}")
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

    def _apply(self, fn, recurse=True):
        """``nn.Module._apply`` that never lowers a tensor below float32 (see Notes)."""

        def keep_precision(t):
            out = fn(t)
            if t.is_floating_point() and t.dtype not in _LOW and out.dtype in _LOW:
                return t.to(device=out.device)
            return out

        return super()._apply(keep_precision, recurse)

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

    def readout(self, s):
        """Gated output ``gate · ssm.readout(s)`` of states ``s``.

        Parameters
        ----------
        s : torch.Tensor, shape (..., N)
            States, e.g. :meth:`DiagonalSSM.trajectory`.

        Returns
        -------
        torch.Tensor, shape (..., H)
            In the parameters' dtype.
        """
        y = self.ssm.readout(s)
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
        ssm = self.ssm
        if state is None or not self.decodes_fast(x_t):
            y, state = ssm.step(x_t, state)
            return self.gate.to(y.dtype) * y, state
        ssm._check_input(x_t, 2)
        if state.shape != (x_t.shape[0], ssm.d_state):
            ssm._split_state(state, x_t.shape[0])  # raises the shape error
        y, state = self.decode_step(x_t, state)
        return y.to(x_t.dtype), state

    def decodes_fast(self, x_t):
        """Whether :meth:`decode_step` applies: real modes, no autograd, no autocast.

        Parameters
        ----------
        x_t : torch.Tensor
            The step's input (its device decides the autocast check).

        Returns
        -------
        bool
        """
        return not (self.ssm.n_complex or torch.is_grad_enabled()
                    or autocast_on(x_t.device.type))

    def decode_step(self, x_t, state, kernel=None):
        """Unchecked decoding step ``s = ā s + B̄ x_t``, ``y = (gate C) s`` (three kernels).

        For callers that checked the shapes and :meth:`decodes_fast` (cached generation).

        Parameters
        ----------
        x_t : torch.Tensor, shape (B, H)
        state : torch.Tensor, shape (B, N)
        kernel : tuple, optional
            :meth:`decode_kernel`, when the caller keeps it (computed here otherwise).

        Returns
        -------
        y_t : torch.Tensor, shape (B, H)
            In the adapter's dtype.
        state : torch.Tensor, shape (B, N)
        """
        a, W_in_t, W_out_t = self.decode_kernel() if kernel is None else kernel
        if x_t.dtype != W_in_t.dtype:
            x_t = x_t.to(W_in_t.dtype)
        s = torch.addcmul(torch.mm(x_t, W_in_t), a, state)  # (B, N)
        return torch.mm(s, W_out_t), s

    def decode_kernel(self):
        """``(ā, B̄ᵀ, (gate · C)ᵀ)`` of a real-mode SSM, contiguous, for :meth:`decode_step`.

        Returns
        -------
        a : torch.Tensor, shape (N,)
        W_in_t : torch.Tensor, shape (H, N)
        W_out_t : torch.Tensor, shape (N, H)
            With the gate folded in.
        """
        a, _, W_in, W_out = self.ssm._projections()
        W_out = self.gate.to(W_out.dtype) * W_out
        return a, W_in.t().contiguous(), W_out.t().contiguous()
