"""The module of one adapted target: :class:`AdaptedMLP` adds the gated branch to its output.

:func:`adapters.injection.inject` builds one :class:`AdaptedMLP` per target module (with
:func:`build_adapter`) and registers them in an :class:`AdapterTree`, ``model.hrm_adapters``;
this module holds the per-target wrapper, the injection module what is done to the model as a
whole. Shapes: B batch, L length, H model width.
"""

from __future__ import annotations

import threading
import types

import torch
from torch import nn

from adapters.config import HRMConfig
from adapters.exceptions import AdapterConfigError, AdapterShapeError

__all__ = ["AdaptedMLP", "AdapterTree", "build_adapter", "target_device"]


class AdapterTree(nn.ModuleDict):
    """Container of the adapters, ``model.hrm_adapters``, nested like the targets' names.

    Never called; never a target. ``model.hrm_adapters.model.layers["0"].mlp`` is the
    :class:`AdaptedMLP` of ``model.layers.0.mlp``.
    """


class AdaptedMLP(nn.Module):
    """The adapter of one target module and the wrapper that adds its branch there.

    Registered under ``model.hrm_adapters.<name>``; the target itself (``mlp``) is referenced,
    not owned, so its parameters keep their names and appear once in the state dict.

    Parameters
    ----------
    mlp : nn.Module
        The target module, whose output gets the branch. Its output is (B, L, H) — or (B·L, H)
        in models that flatten the stream (OPT) — or a tuple whose first element is.
    adapter : nn.Module
        An :class:`adapters.layer.HRMAdapter`; maps a stream (B, L, H) to (B, L, H).
    reads : {"mlp_input", "mlp_output"}
        The stream: the input of ``source`` or the output of ``mlp``.
    name : str
        Dotted name of the target in the model (the key of its SSM state in generation).
    source : nn.Module, optional
        The module whose first argument is the ``mlp_input`` stream (``mlp`` itself, or
        ``fc1`` of an ``fc1``/``fc2`` pair).
    input_name : str, optional
        Name of ``source``'s first forward parameter, for calls that pass the stream by keyword
        (Llama's ``self_attn(hidden_states=...)``).

    Notes
    -----
    The branch runs in the adapter's parameter dtype (float32 by default); in a half-precision
    model the sum of the target's output and the branch is formed in that dtype and rounded
    once to the target's output dtype. With gate 0 the result equals the base output bit for bit.
    During a model call, :mod:`adapters.generation` supplies the attention mask (padded
    positions drive no state), the batch size (for flattened streams) and, with a KV cache, the
    SSM state carried across calls; under transformers' gradient checkpointing the block's
    recomputation in the backward pass runs in the same context
    (:mod:`adapters._checkpointing`), so its gradients equal those without checkpointing.
    """

    def __init__(self, mlp: nn.Module, adapter: nn.Module, *, reads: str = "mlp_input",
                 name: str = "", source: nn.Module | None = None,
                 input_name: str | None = None) -> None:
        super().__init__()
        from adapters.layer import READS

        if reads not in READS:
            raise AdapterConfigError(f"`reads` must be one of {READS}; got {reads!r}")
        self.adapter = adapter
        # referenced, not registered: the base parameters stay where they are
        object.__setattr__(self, "_mlp", mlp)
        object.__setattr__(self, "_source", mlp if source is None else source)
        self.reads = reads
        self._reads_input = reads == "mlp_input"
        # the stream is the target's first positional argument or its output (no pair hook)
        self._direct = source is None or source is mlp or not self._reads_input
        self.adapter_name = name
        self.input_name = input_name
        self._runtime = None  # an adapters.generation.AdapterRuntime once injected
        self._hooks: list = []
        self._inner = None  # the target's forward while attached
        self._saved_forward = None
        self._pair_input = _PairInput()  # the stream captured from a pair's `fc1`, per thread

    @property
    def mlp(self) -> nn.Module:
        """The target module (not a submodule of this one)."""
        return self._mlp

    def attach(self) -> None:
        """Wrap the target's ``forward`` (and hook the pair's ``fc1`` for its input).

        The wrapper is an attribute of the target instance (its class and its parameters are
        untouched), the cheapest attachment: a module call with forward hooks takes torch's
        slower general path, one per layer and token in decoding.
        """
        if self._inner is not None:
            return
        if self._source is not self._mlp and self.reads == "mlp_input":
            self._hooks.append(self._source.register_forward_pre_hook(
                self._capture, with_kwargs=True))
        mlp = self._mlp
        self._saved_forward = mlp.__dict__.get("forward")  # an instance forward, e.g. accelerate's
        self._inner = mlp.forward
        mlp.forward = self._adapted_forward

    def detach(self) -> None:
        """Undo :meth:`attach` (the target behaves as before)."""
        for handle in self._hooks:
            handle.remove()
        self._hooks = []
        self._pair_input.value = None
        if self._inner is None:
            return
        mlp = self._mlp
        if mlp.__dict__.get("forward") == self._adapted_forward:
            if self._saved_forward is None:
                del mlp.__dict__["forward"]
            else:
                mlp.forward = self._saved_forward
        self._inner = self._saved_forward = None

    def __getstate__(self):
        # pickle stores a bound method as getattr(obj, name), which on loading would give the
        # target's instance ``forward`` (this wrapper itself): keep the function, bind it again
        state = super().__getstate__()
        state["_pair_input"] = None  # a threading.local (cannot be pickled); made again
        for key in ("_inner", "_saved_forward"):
            f = state.get(key)
            if isinstance(f, types.MethodType) and f.__self__ is self._mlp:
                state[key] = _Unbound(f.__func__)
        return state

    def __setstate__(self, state):
        for key in ("_inner", "_saved_forward"):
            if isinstance(state.get(key), _Unbound):
                state[key] = types.MethodType(state[key].func, state["_mlp"])
        state["_pair_input"] = _PairInput()
        super().__setstate__(state)

    def _adapted_forward(self, *args, **kwargs):
        """The target's ``forward`` with the branch added to its output.

        A decode step of a target called with its stream first and returning one tensor (the
        common case) goes straight to the runtime's fast step, a call inside
        :func:`disable_adapter` returns the target's output; the rest goes to
        :meth:`_add_branch`.
        """
        output = self._inner(*args, **kwargs)
        runtime = self._runtime
        if runtime is not None:
            plan = runtime.calls.plan
            if plan is None:
                if runtime.disabled and self._pair_input.value is None:
                    return output  # inside disable_adapter: the target's output as it is
            elif (self._direct and args and type(output) is torch.Tensor
                  and not runtime.disabled):
                out = plan.step(self.adapter_name, args[0] if self._reads_input else output,
                                output)
                if out is not None:
                    return out
        return self._add_branch(args, kwargs, output)

    def _first_argument(self, args: tuple, kwargs: dict) -> torch.Tensor:
        if args:
            return args[0]
        if self.input_name is not None and self.input_name in kwargs:
            return kwargs[self.input_name]
        raise AdapterShapeError(
            f"the adapter at {self.adapter_name!r} reads the first argument of its module, but "
            f"the module was called without one (keywords: {sorted(kwargs)})"
        )

    def _capture(self, module: nn.Module, args: tuple, kwargs: dict) -> None:
        self._pair_input.value = self._first_argument(args, kwargs)

    def _add_branch(self, args: tuple, kwargs: dict, output):
        runtime = self._runtime
        plan = None
        if runtime is not None:
            if runtime.disabled:
                self._pair_input.value = None
                return output
            plan = runtime.calls.plan  # a one-token continuation on the fast path
        h = output[0] if isinstance(output, tuple) else output
        if self.reads == "mlp_output":
            stream = h
        elif self._source is self._mlp:
            stream = args[0] if args else self._first_argument(args, kwargs)
        else:
            pair = self._pair_input
            stream, pair.value = pair.value, None
            if stream is None:
                raise AdapterShapeError(
                    f"the adapter at {self.adapter_name!r} reads the input of its pair's first "
                    "layer, which did not run before the second"
                )
        out = None if plan is None else plan.step(self.adapter_name, stream, h)
        if out is None:
            y = self.branch(stream)
            if y.shape != h.shape:
                y = y.reshape(h.shape)
            # one rounding to the target's dtype (a float32 branch beside a bf16/fp16 model)
            out = h + y if y.dtype == h.dtype else (h.to(y.dtype) + y).to(h.dtype)
        return (out, *output[1:]) if isinstance(output, tuple) else out

    def branch(self, stream: torch.Tensor) -> torch.Tensor:
        """The adapter's output for a stream, inside or outside a model call.

        Parameters
        ----------
        stream : torch.Tensor, shape (B, L, H) or (B·L, H)
            A flattened stream is viewed as (B, L, H) with the batch size of the current
            model call.

        Returns
        -------
        torch.Tensor
            Same shape as ``stream``, in the adapter's dtype.

        Raises
        ------
        AdapterShapeError
            The stream is neither 3-D nor a flattened (B·L, H) inside a model call, or it is
            time-major, (L, B, H) inside a call of batch B (XLNet; with L = B this cannot be
            told apart from (B, L, H)).
        """
        runtime = self._runtime
        shape = stream.shape
        if stream.dim() == 2:
            batch = None if runtime is None else runtime.batch_size()
            if batch is None or shape[0] % batch:
                raise AdapterShapeError(
                    f"the adapter at {self.adapter_name!r} got a flattened stream of shape "
                    f"{tuple(shape)}; it can be viewed as (B, L, H) only inside a call of the "
                    "adapted model (which tells the batch size)"
                )
            stream = stream.reshape(batch, shape[0] // batch, shape[1])
        elif stream.dim() != 3:
            raise AdapterShapeError(
                f"the adapter at {self.adapter_name!r} needs a (B, L, H) stream; got shape "
                f"{tuple(shape)}"
            )
        elif runtime is not None:
            batch = runtime.batch_size()
            if batch is not None and shape[0] != batch and shape[1] == batch:
                # time-major (L, B, H), e.g. XLNet's: the scan would run across the batch
                raise AdapterShapeError(
                    f"the adapter at {self.adapter_name!r} got a stream of shape {tuple(shape)} "
                    f"in a call with batch {batch}: it looks time-major (L, B, H), while the "
                    "adapter scans dimension 1 of a batch-first (B, L, H) stream, so its state "
                    "would run across the batch; time-major models are not supported"
                )
        dtype = self.adapter.gate.dtype
        u = stream if stream.dtype == dtype else stream.to(dtype)  # (B, L, H)
        y = runtime.branch(self, u) if runtime is not None else self.adapter(u)
        return y if y.shape == shape else y.reshape(shape)

    def forward(self, x: torch.Tensor, *args, **kwargs):
        """Call the target (its wrapped ``forward`` adds the branch once attached).

        Parameters
        ----------
        x : torch.Tensor, shape (B, L, H)
            Input of the target.
        *args, **kwargs
            Passed on to the target unchanged.

        Returns
        -------
        torch.Tensor or tuple
            The target's output with the branch added.

        Examples
        --------
        >>> from adapters.injection import find_adapters, inject
        >>> model = inject(nn.ModuleDict({"mlp": nn.Linear(8, 8)}),
        ...                HRMConfig(d_state=4, target_modules=["mlp"]))  # gate 0
        >>> adapted = find_adapters(model)["mlp"]
        >>> x = torch.randn(2, 5, 8)
        >>> torch.equal(adapted(x), model["mlp"](x)), adapted.mlp is model["mlp"]
        (True, True)
        """
        return self._mlp(x, *args, **kwargs)

    def extra_repr(self) -> str:
        """The target and the stream shown by ``repr(module)``.

        Returns
        -------
        str
        """
        return f"target={self.adapter_name!r}, reads={self.reads!r}"


class _PairInput(threading.local):
    """The stream a pair's first layer was called with, until its second adds the branch; one
    per thread, so that threads running the model at once do not take each other's."""

    value: torch.Tensor | None = None


class _Unbound:
    """A target's forward function while an :class:`AdaptedMLP` is pickled."""

    def __init__(self, func):
        self.func = func


def target_device(module: nn.Module) -> torch.device:
    """The device an adapter of ``module`` is built on: where the module computes.

    That is the device of its first parameter or buffer (CPU if it has none), except for a
    module whose weights accelerate has offloaded (big-model inference, ``from_pretrained(...,
    device_map=...)`` with layers on ``"cpu"`` beside a GPU, or on ``"disk"``): those weights
    are meta tensors loaded for each call, and the module's ``AlignDevicesHook`` (on it or on
    its submodules) names the ``execution_device`` where the call, and so the stream, runs.
    The adapter stays resident there (it is small and trained). A meta module without such a
    hook (built under ``init_empty_weights``, or ``model.to("meta")``) gives ``meta``.

    Parameters
    ----------
    module : nn.Module
        A target module.

    Returns
    -------
    torch.device

    Examples
    --------
    >>> target_device(nn.Linear(2, 2)), target_device(nn.Linear(2, 2, device="meta"))
    (device(type='cpu'), device(type='meta'))
    """
    tensors = [*module.parameters(), *module.buffers()]
    if not tensors:
        return torch.device("cpu")
    if any(t.is_meta for t in tensors):
        for sub in module.modules():
            device = getattr(getattr(sub, "_hf_hook", None), "execution_device", None)
            if device is not None:
                return torch.device(device)
    return tensors[0].device


def build_adapter(width: int, config: HRMConfig, *, device: torch.device | str = "cpu",
                  d_state: int | None = None) -> nn.Module:
    """One :class:`adapters.layer.HRMAdapter` as ``config`` describes, on ``device``.

    Parameters
    ----------
    width : int
        Stream width H.
    config : HRMConfig
    device : torch.device or str
    d_state : int or None
        State size N; ``None`` takes ``config.d_state``.

    Returns
    -------
    nn.Module
    """
    from adapters.layer import HRMAdapter

    n = config.d_state if d_state is None else d_state
    return HRMAdapter(width, n, gate_init=config.gate_init, reads=config.reads, device=device,
                      dtype=getattr(torch, config.dtype), **config.ssm_kwargs())
