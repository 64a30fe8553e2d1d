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

from adapters._optimizer_state import note_rebuilt, watch_optimizers
from adapters._packing import restarted
from adapters.exceptions import AdapterConfigError, AdapterShapeError
from adapters.ssm import DiagonalSSM

__all__ = ["HRMAdapter", "READS", "ssm_of_structure", "stored_structure"]

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
    In a half-precision model the branch reads the half-precision stream, runs its state,
    scans and cached decoding steps in its own float32 (or float64), and its output is added
    to the target's output in that precision and rounded once to the model's dtype; so the
    branch adds only float32 rounding of its own (``tests/adapters/test_dtype.py``), and
    cached generation differs from a full forward by what the base model's half-precision
    differences, carried by the state, make of it.

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
        # shape (1,), not 0-dim: DeepSpeed's engine views every parameter as bytes, which a
        # 0-dim tensor cannot be (checkpoints with a 0-dim gate load: _load_from_state_dict)
        self.gate = nn.Parameter(torch.full((1,), float(gate_init), dtype=p.dtype,
                                            device=p.device))
        self.reads = reads
        watch_optimizers()  # an optimizer state saved with a 0-dim gate steps (1,) moments

    def _load_from_state_dict(self, state_dict, prefix, *args, **kwargs):
        """``nn.Module._load_from_state_dict`` that reads a 0-dim gate (checkpoints written
        before the gate had shape (1,), e.g. a Trainer's ``model.safetensors``) as shape (1,),
        and takes the stored SSM's structure (real/complex mode counts, e.g. after
        :func:`adapters.reduce`) when it differs from this adapter's, as
        :func:`adapters.load_adapter` does; a plain ``Trainer`` resuming a checkpoint of
        reduced adapters into freshly injected ones needs that."""
        gate = state_dict.get(prefix + "gate")
        if isinstance(gate, torch.Tensor) and gate.dim() == 0:
            state_dict[prefix + "gate"] = gate.reshape(1)
        stored = stored_structure(state_dict, prefix + "ssm.", self.d_model)
        ssm = self.ssm
        if stored is not None and stored != (ssm.n_real, ssm.n_complex):
            p = next(ssm.parameters())
            self.take_structure(ssm_of_structure(self.d_model, *stored, scan=ssm.scan,
                                                 dtype=p.dtype, device=p.device),
                                where=prefix.rstrip(".") or "an adapter")
        super()._load_from_state_dict(state_dict, prefix, *args, **kwargs)

    def take_structure(self, new: DiagonalSSM, *, where: str = "an adapter") -> None:
        """Install ``new`` (a placeholder of another mode structure, values to be loaded) as
        this adapter's SSM, keeping the Parameter objects both structures have (resized in
        place), so that an optimizer built before keeps training them; parameters only
        ``new`` has are recorded (an optimizer that misses them is warned at its step)."""
        ssm, added = self.ssm, []
        for name, fresh in list(new._parameters.items()):
            old = ssm._parameters.get(name)
            if old is not None and fresh is not None:
                old.data = fresh.data
                new._parameters[name] = old
            elif fresh is not None:
                added.append(fresh)
        self.ssm = new
        if added:
            note_rebuilt(list(ssm.parameters()), added, where)

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

    def forward(self, u, state=None, *, return_state=False, starts=None):
        """Gated output ``gate · ssm(u)`` over a sequence.

        Parameters
        ----------
        u : torch.Tensor, shape (B, L, H)
            Input sequence (the stream the adapter reads).
        state : torch.Tensor, shape (B, N), optional
            State before the first step; zeros when None (see :meth:`DiagonalSSM.forward`).
        return_state : bool, optional
            Also return the final state.
        starts : torch.Tensor, shape (B, L), optional
            For a packed (padding-free) row of several sequences: the first position of each
            position's sequence (:func:`adapters._packing.packed_starts`); each sequence then
            runs from the zero state (not with ``state`` / ``return_state``).

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
        if starts is not None:
            if state is not None or return_state:
                raise AdapterShapeError("`starts` (a packed row) takes no `state` and returns "
                                        "none")
            return self.readout(restarted(self.ssm, self.ssm.trajectory(u), starts))
        if return_state:
            y, state = self.ssm(u, state, return_state=True)
            return _cast(self.gate, y.dtype) * y, state
        y = self.ssm(u, state)
        return _cast(self.gate, y.dtype) * y

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
        return _cast(self.gate, y.dtype) * y

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
        return _cast(self.gate, y.dtype) * y, state

    def decode_weights(self, projections=None):
        r"""The discrete system in the layout of cached decoding, gate folded into the readout.

        Real modes and complex modes form two groups; each group's state advances as
        ``s = ā ⊙ s + x W_in`` and is read out as ``y = s W_out``, where a complex group's
        state is seen through ``view_as_real`` (interleaved (Re, Im) pairs), so that its
        ``W_out`` rows hold ``2 Re C`` and ``-2 Im C`` (``y = 2 Re(C s)``).
        :class:`adapters.generation.AdapterRuntime` reads these once per generation.

        Parameters
        ----------
        projections : tuple, optional
            The SSM's discretised projections when the caller has them (computed otherwise).

        Returns
        -------
        real : tuple or None
            ``(ā (n_real,), W_in (H, n_real), W_out (n_real, H))`` (transposed views of the
            discretised projections); None without real modes.
        cplx : tuple or None
            ``(ā (n_complex,) complex, W_in (H, 2 n_complex), W_out (2 n_complex, H))``;
            None without complex modes.

        Examples
        --------
        >>> adapter = HRMAdapter(8, 4, gate_init=0.5)
        >>> (a, W_in, W_out), cplx = adapter.decode_weights()
        >>> x, s = torch.randn(1, 8), torch.randn(1, 4)
        >>> y, s1 = adapter.step(x, s)
        >>> bool(torch.allclose(a * s + x @ W_in, s1)), cplx is None
        (True, True)
        """
        ssm = self.ssm
        with torch.no_grad():
            if projections is None:
                projections = ssm._projections()
            a_r, a_c, W_in, W_out = projections  # (W, H), (H, 2 n_complex + n_real)
            W_out = _cast(self.gate, W_out.dtype) * W_out
            n2, n_r = 2 * ssm.n_complex, ssm.n_real
            real = cplx = None
            # transposed views, no copies (BLAS reads them as transposed operands)
            if a_c is not None:
                cplx = (a_c, _rows(W_in, 0, n2).t(), _rows(W_out.t(), 0, n2))
            if a_r is not None:
                real = (a_r, _rows(W_in, n2, n2 + n_r).t(), _rows(W_out.t(), n2, n2 + n_r))
        return real, cplx

    def scan_decoding(self, u, state=None, projections=None):
        """A chunk of cached generation (e.g. the prompt): output, states and decode weights
        from one discretisation.

        Parameters
        ----------
        u : torch.Tensor, shape (B, L, H)
            The stream.
        state : torch.Tensor, shape (B, N), optional
            State before the chunk; zeros when None.
        projections : tuple, optional
            The SSM's discretisation (``ssm._projections()``) when the caller has it
            (:func:`adapters._prefill.projections`); computed otherwise.

        Returns
        -------
        y : torch.Tensor, shape (B, L, H)
            Gated output, bit for bit :meth:`forward`'s.
        states : torch.Tensor, shape (B, L, N)
            The state after every position (:meth:`DiagonalSSM.trajectory`'s).
        weights : tuple
            :meth:`decode_weights` of the same discretisation.

        Examples
        --------
        >>> adapter = HRMAdapter(8, 4, gate_init=0.5, mode="complex")
        >>> u = torch.randn(2, 6, 8)
        >>> with torch.no_grad():
        ...     y, states, _ = adapter.scan_decoding(u)
        ...     torch.equal(y, adapter(u)), torch.equal(states, adapter.ssm.trajectory(u))
        (True, True)
        """
        ssm = self.ssm
        ssm._check_input(u, 3)
        if projections is None:
            projections = ssm._projections()
        s_c, s_r, _, _, W_out = ssm._scan(u, state, projections)
        y = ssm._readout(s_c, s_r, W_out)  # (B, L, H), as forward
        return (_cast(self.gate, y.dtype) * y, ssm._join_state(s_r, s_c),
                self.decode_weights(projections))


def stored_structure(state_dict, prefix: str, d_model: int) -> tuple[int, int] | None:
    """``(n_real, n_complex)`` of the DiagonalSSM whose tensors ``state_dict`` holds under
    ``prefix``, or None when they are missing or do not form one of width ``d_model``."""
    def rows(key, *tail):
        t = state_dict.get(prefix + key)
        if t is None:
            return 0
        if not isinstance(t, torch.Tensor) or t.dim() != 1 + len(tail) or (
                tuple(t.shape[1:]) != tail):
            return None
        return int(t.shape[0])

    n_real, n_cplx = rows("B", d_model), rows("B_cplx", d_model, 2)
    if n_real is None or n_cplx is None or n_real + n_cplx == 0:
        return None
    return n_real, n_cplx


def ssm_of_structure(d_model: int, n_real: int, n_complex: int, *, scan: str = "auto",
                     dtype=None, device=None) -> DiagonalSSM:
    """A stable DiagonalSSM with ``n_real`` real and ``n_complex`` complex modes, a placeholder
    whose values are to be overwritten (by a checkpoint).

    Examples
    --------
    >>> ssm = ssm_of_structure(8, 2, 3)
    >>> ssm.d_model, ssm.n_real, ssm.n_complex
    (8, 2, 3)
    """
    n = n_real + n_complex
    a = torch.full((n,), 0.5, dtype=torch.complex128)
    a[n_real:] += 0.25j
    b = torch.ones(n, d_model, dtype=torch.complex128)  # B̄ (N, H)
    b[n_real:] += 1j
    c = torch.ones(d_model, n, dtype=torch.complex128)  # C (H, N)
    c[:, n_real:] += 1j
    real = torch.arange(n) < n_real
    return DiagonalSSM.from_discrete(a, b, c, real_modes=real.numpy(), scan=scan,
                                     device=device, dtype=dtype)


def _cast(t, dtype):
    """``t.to(dtype)`` without the call (its argument parsing) when ``t`` has that dtype."""
    return t if t.dtype is dtype else t.to(dtype)


def _rows(w, start, stop):
    """Rows ``start:stop`` of ``w`` (``w`` itself when that is all of them: no view to make)."""
    return w if start == 0 and stop == w.shape[0] else w[start:stop]
