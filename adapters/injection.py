"""Attach gated SSM adapters beside the frozen modules of a model, and take them out again.

Nothing of the base model is renamed or replaced. For each target (see :mod:`adapters.targets`)
:func:`inject` wraps the target module's ``forward`` (an attribute of that instance; its class,
parameters and buffers are untouched) so that the branch is added to its output,

    h = mlp(x);  h + adapter(stream),  stream = x (default) or h,

so a transformer block ``x = x + mlp(ln(x))`` becomes ``x = x + mlp(ln(x)) + gate * ssm(ln(x))``
without editing the model's code, and the adapters themselves live in one container,
``model.hrm_adapters``, mirroring the targets' names: the base parameters keep their names
(``model.layers.0.mlp.gate_proj.weight``) and the adapters' are
``hrm_adapters.model.layers.0.mlp.adapter.ssm.B``. Consequences:

* ``model.save_pretrained(d)`` writes the base weights under their own names plus the adapter
  tensors, and :func:`adapters.save_adapter`'s checkpoint beside them;
  ``AutoModelForCausalLM.from_pretrained(d)`` restores the base model bit for bit and reports
  the ``hrm_adapters.*`` keys as unexpected (:func:`adapters.load_adapter` reads them back);
* a plain ``transformers.Trainer`` therefore writes checkpoints :func:`adapters.load_adapter`
  reads, and ``resume_from_checkpoint`` restores base and adapters from its full state dict.

:func:`disable_adapter` switches the branches off for a ``with`` block. Shapes: B batch,
L length, H model width.
"""

from __future__ import annotations

import contextlib
import functools
import types
from collections.abc import Iterator

import torch
from torch import nn

from adapters._checkpointing import bind_checkpoints, unbind_checkpoints
from adapters._counts import get_nb_trainable_parameters, print_trainable_parameters
from adapters._hooks import (
    load_adapter_with_adapters,
    register_checkpoint_writer,
    save_pretrained_with_adapters,
    save_pretrained_without_adapters,
)
from adapters._wrappers import unwrap_model
from adapters.config import HRMConfig
from adapters.exceptions import AdapterConfigError, AdapterError, AdapterShapeError
from adapters.targets import (
    ADAPTERS_ATTR,
    find_target_modules,
    matches_target,
    resolve_targets,
)

__all__ = [
    "AdaptedMLP",
    "AdapterTree",
    "inject",
    "remove",
    "unload",
    "disable_adapter",
    "find_adapters",
    "iter_adapters",
    "find_target_modules",
    "matches_target",
    "get_adapter_config",
    "set_adapter_config",
    "get_nb_trainable_parameters",
    "print_trainable_parameters",
    "register_checkpoint_writer",
]

_RUNTIME_ATTR = "_hrm_runtime"
_SAVE_ATTR = "save_pretrained"
_PEFT_ATTRS = (_SAVE_ATTR, "load_adapter")  # set on a PEFT wrapper adapted inside
_PAGED_ATTR = "init_continuous_batching"  # transformers' continuous batching (paged KV cache)


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
        self._pending: torch.Tensor | None = None  # stream captured from a pair's `fc1`

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
        self._pending = None
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
        for key in ("_inner", "_saved_forward"):
            f = state.get(key)
            if isinstance(f, types.MethodType) and f.__self__ is self._mlp:
                state[key] = _Unbound(f.__func__)
        return state

    def __setstate__(self, state):
        for key in ("_inner", "_saved_forward"):
            if isinstance(state.get(key), _Unbound):
                state[key] = types.MethodType(state[key].func, state["_mlp"])
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
            plan = runtime.plan
            if plan is None:
                if runtime.disabled and self._pending is None:
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
        self._pending = self._first_argument(args, kwargs)

    def _add_branch(self, args: tuple, kwargs: dict, output):
        runtime = self._runtime
        plan = None
        if runtime is not None:
            if runtime.disabled:
                if self._pending is not None:  # (nn.Module.__setattr__ is slow: only if set)
                    self._pending = None
                return output
            plan = runtime.plan  # a one-token continuation on the fast path
        h = output[0] if isinstance(output, tuple) else output
        if self.reads == "mlp_output":
            stream = h
        elif self._source is self._mlp:
            stream = args[0] if args else self._first_argument(args, kwargs)
        else:
            stream, self._pending = self._pending, None
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
            The stream is neither 3-D nor a flattened (B·L, H) inside a model call.
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


class _Unbound:
    """A target's forward function while an :class:`AdaptedMLP` is pickled."""

    def __init__(self, func):
        self.func = func


def _module_device(module: nn.Module) -> torch.device:
    for t in (*module.parameters(), *module.buffers()):
        return t.device
    return torch.device("cpu")


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




def _runtime(model: nn.Module):
    """The adapters' runtime of ``model`` or of the model inside its wrappers (or None)."""
    return getattr(unwrap_model(model), _RUNTIME_ATTR, None)


def _tree_insert(tree: AdapterTree, name: str, adapted: AdaptedMLP) -> None:
    node = tree
    *path, leaf = name.split(".")
    for part in path:
        if part not in node:
            node[part] = AdapterTree()
        node = node[part]
    node[leaf] = adapted


def inject(model: nn.Module, config: HRMConfig | None = None) -> nn.Module:
    """Attach a gated SSM adapter to each target module; freeze the rest (in place).

    Parameters
    ----------
    model : nn.Module
        A transformers model (GPT-2, Llama, Mistral, Qwen2, OPT, ...: blocks with a
        feed-forward, :func:`adapters.targets.find_target_modules`) or a plain module with
        ``config.target_modules`` set.
    config : HRMConfig or None
        ``None`` uses ``HRMConfig()``.

    Returns
    -------
    nn.Module
        ``model`` itself: every base parameter frozen (``requires_grad=False``) and named as
        before, the adapters registered under ``model.hrm_adapters`` and trainable. A model
        inside ``torch.compile`` / DDP / DataParallel / PEFT wrappers is adapted inside them
        (:func:`adapters._wrappers.unwrap_model`), so its adapters are named as in the bare
        model and its checkpoints load into one; the wrapper is returned.

    Raises
    ------
    AdapterConfigError
        Bad config, model already adapted, nested targets, unknown skip index, unknown width,
        or a root module that iterates its children (``nn.Sequential``).
    TargetModulesNotFoundError
        Nothing matches; the message lists the modules that would take an adapter.
    AdapterShapeError
        A target's widths or call signature do not fit (see :mod:`adapters.targets`).

    Notes
    -----
    Everything is validated and every adapter is built before the model is touched. With
    ``gate_init=0`` the adapted model's outputs equal the base model's exactly. Plain forward
    calls without a KV cache start every sequence from the zero state; see
    :mod:`adapters.generation` for cached generation.
    """
    from adapters.generation import AdapterRuntime

    if config is None:
        config = HRMConfig()
    if not isinstance(config, HRMConfig):
        raise AdapterConfigError(f"`config` must be an HRMConfig; got {type(config).__name__}")
    if not isinstance(model, nn.Module):
        raise AdapterConfigError(f"`model` must be an nn.Module; got {type(model).__name__}")
    if _runtime(model) is not None or any(isinstance(m, AdaptedMLP) for m in model.modules()):
        raise AdapterConfigError("`model` already has HRM adapters; call `remove(model)` first")
    given, model = model, unwrap_model(model)  # names as in the bare model (checkpoints)
    if isinstance(model, (nn.Sequential, nn.ModuleList)) or hasattr(model, ADAPTERS_ATTR):
        raise AdapterConfigError(
            f"cannot register `{ADAPTERS_ATTR}` on a {type(model).__name__} (it iterates its "
            "children or already has that attribute); wrap it in a module"
        )
    targets = resolve_targets(model, config)
    tree = AdapterTree()
    wrapped = {}
    for t in targets:
        module = model.get_submodule(t.name)
        adapter = build_adapter(t.width, config, device=_module_device(module))
        wrapped[t.name] = AdaptedMLP(module, adapter, reads=config.reads, name=t.name,
                                     source=model.get_submodule(t.source),
                                     input_name=t.input_name)
        _tree_insert(tree, t.name, wrapped[t.name])

    # --- the model is touched only from here on ---
    runtime = AdapterRuntime(config)
    runtime.saved_requires_grad = [(p, p.requires_grad) for p in model.parameters()]
    for p in model.parameters():
        p.requires_grad_(False)
    model.add_module(ADAPTERS_ATTR, tree.train(model.training))  # in the model's mode
    for adapted in wrapped.values():
        adapted._runtime = runtime
        adapted.attach()
        for p in adapted.adapter.parameters():
            p.requires_grad_(True)
    runtime.adapted = dict(wrapped)
    runtime.attach(model)
    blocks = [m for m in model.modules() if hasattr(m, "gradient_checkpointing")]
    runtime.checkpoint_handle = None if not blocks else model.register_forward_pre_hook(
        bind_checkpoints(runtime, blocks))
    object.__setattr__(model, _RUNTIME_ATTR, runtime)
    if callable(getattr(type(model), _SAVE_ATTR, None)):
        object.__setattr__(model, _SAVE_ATTR,
                           functools.partial(save_pretrained_with_adapters, model))
    if callable(getattr(type(model), _PAGED_ATTR, None)):  # generate_batch, "paged" cache
        object.__setattr__(model, _PAGED_ATTR, functools.partial(_no_continuous_batching, model))
    if given is not model and type(given).__module__.startswith("peft."):
        # a Trainer saves / resumes / loads the best PeftModel through these two, not the model's
        for attr, func in zip(_PEFT_ATTRS, (save_pretrained_with_adapters,
                                            load_adapter_with_adapters), strict=True):
            if callable(getattr(type(given), attr, None)):
                object.__setattr__(given, attr, functools.partial(func, given))
        runtime.wrapper = given
    return given


def _no_continuous_batching(model: nn.Module, *args, **kwargs):
    """An adapted model's ``init_continuous_batching`` (so also ``generate_batch`` and
    ``generate(cache_implementation="paged")``): refused, at the call."""
    raise AdapterError(
        "continuous batching (generate_batch, init_continuous_batching, "
        "generate(cache_implementation='paged')) is not supported with HRM adapters: its paged "
        "KV cache packs the tokens of many requests into one stream, while each adapter carries "
        "one SSM state per sequence; use model.generate (a batch of left-padded prompts), or "
        "adapters.remove(model) first"
    )


def remove(model: nn.Module) -> nn.Module:
    """Take the adapters out and restore the original model exactly (in place).

    The wrapped ``forward`` methods, the hooks and the ``hrm_adapters`` container go, the
    ``requires_grad`` flags are those before :func:`inject`. ``save_pretrained`` (the
    model's, and a PEFT wrapper's) is the class's method followed by one step: it deletes from
    the folder the adapter checkpoint an earlier ``save_pretrained`` of the adapted model wrote
    there, so that a later :func:`adapters.load_adapter` of the folder does not bring back the
    removed adapters (a checkpoint written by :func:`adapters.save_adapter` is kept, with a
    ``UserWarning``).

    Parameters
    ----------
    model : nn.Module
        A model adapted by :func:`inject`.

    Returns
    -------
    nn.Module
        ``model`` itself.

    Raises
    ------
    AdapterError
        ``model`` has no adapters.
    """
    runtime = _runtime(model)
    if runtime is None:
        raise AdapterError("`model` has no HRM adapters to remove")
    model = unwrap_model(model)
    for adapted in find_adapters(model).values():
        adapted.detach()
        adapted._runtime = None
    if ADAPTERS_ATTR in model._modules:
        del model._modules[ADAPTERS_ATTR]
    for p, flag in runtime.saved_requires_grad:
        p.requires_grad_(flag)
    runtime.detach()
    if getattr(runtime, "checkpoint_handle", None) is not None:
        runtime.checkpoint_handle.remove()
    unbind_checkpoints(model)
    object.__delattr__(model, _RUNTIME_ATTR)
    if _PAGED_ATTR in model.__dict__:
        object.__delattr__(model, _PAGED_ATTR)
    wrapper = getattr(runtime, "wrapper", None)
    for owner in (model,) if wrapper is None else (model, wrapper):
        for attr in (_SAVE_ATTR,) if owner is model else _PEFT_ATTRS:  # the ones inject set
            if attr in owner.__dict__:
                object.__delattr__(owner, attr)
        if callable(getattr(type(owner), _SAVE_ATTR, None)):  # drops a stale checkpoint
            object.__setattr__(owner, _SAVE_ATTR,
                               functools.partial(save_pretrained_without_adapters, owner))
    return model


#: PEFT's name for :func:`remove` (unload without merging: adapters cannot be merged).
unload = remove


@contextlib.contextmanager
def disable_adapter(model: nn.Module) -> Iterator[nn.Module]:
    """Run the base model inside a ``with`` block: every branch is off, then on again.

    Inside, the model's outputs are the base model's bit for bit (no branch is computed and
    no SSM state is stored); on leaving — also through an exception — the adapters are active
    again. Nested uses are fine. A stateful branch cannot be folded into the base weights
    (there is no ``merge``): see :doc:`/method` for why and what it costs.

    Parameters
    ----------
    model : nn.Module
        A model adapted by :func:`inject`.

    Yields
    ------
    nn.Module
        ``model``.

    Raises
    ------
    AdapterError
        ``model`` has no adapters.

    Examples
    --------
    >>> model = inject(nn.ModuleDict({"mlp": nn.Linear(8, 8)}),
    ...                HRMConfig(d_state=4, target_modules=["mlp"], gate_init=0.5))
    >>> x = torch.randn(2, 5, 8)
    >>> with disable_adapter(model):
    ...     base = model["mlp"](x)
    >>> torch.equal(base, nn.functional.linear(x, model["mlp"].weight, model["mlp"].bias))
    True
    >>> torch.equal(model["mlp"](x), base)
    False
    """
    runtime = _runtime(model)
    if runtime is None:
        raise AdapterError("`model` has no HRM adapters; call `inject(model, config)` first")
    before = runtime.disabled
    runtime.disabled = True
    try:
        yield model
    finally:
        runtime.disabled = before


def get_adapter_config(model: nn.Module) -> HRMConfig:
    """The :class:`HRMConfig` the model was adapted with; :class:`AdapterError` if none.

    Parameters
    ----------
    model : nn.Module
        A model returned by :func:`inject`.

    Returns
    -------
    HRMConfig
        The object :func:`inject` used (``HRMConfig()`` when it was given None), with the
        ``dtype`` the adapters' parameters have now: after ``model.double()`` it reads
        ``"float64"`` (what a reload needs; :func:`adapters.save_adapter` records the same).

    Raises
    ------
    AdapterError
        ``model`` has no HRM adapters.

    Examples
    --------
    >>> model = inject(nn.ModuleDict({"mlp": nn.Linear(8, 8)}),
    ...                HRMConfig(d_state=4, target_modules=["mlp"]))
    >>> get_adapter_config(model).d_state
    4
    """
    runtime = _runtime(model)
    if runtime is None:
        raise AdapterError("`model` has no HRM adapters; call `inject(model, config)` first")
    config = runtime.config
    dtypes = {str(p.dtype).removeprefix("torch.") for a in find_adapters(model).values()
              for p in a.adapter.parameters() if p.is_floating_point()}
    if len(dtypes) == 1 and dtypes != {config.dtype} and dtypes <= {"float32", "float64"}:
        config = config.replace(dtype=dtypes.pop())  # cast after inject (model.double())
    return config


def set_adapter_config(model: nn.Module, config: HRMConfig) -> None:
    """Record `config` as the configuration of the model's adapters.

    For code that changes the adapters in place, so that :func:`get_adapter_config` (and the
    checkpoint :func:`adapters.save_adapter` writes) stays true; :func:`adapters.reduce`
    records the reduced state size this way.

    Parameters
    ----------
    model : nn.Module
        A model returned by :func:`inject`.
    config : HRMConfig
        The new configuration.

    Raises
    ------
    AdapterError
        ``model`` has no HRM adapters.
    AdapterConfigError
        `config` is not an :class:`HRMConfig`.
    """
    runtime = _runtime(model)
    if runtime is None:
        raise AdapterError("`model` has no HRM adapters; call `inject(model, config)` first")
    if not isinstance(config, HRMConfig):
        raise AdapterConfigError(f"`config` must be an HRMConfig; got {type(config).__name__}")
    runtime.config = config


def iter_adapters(model: nn.Module) -> Iterator[tuple[str, AdaptedMLP]]:
    """Yield ``(target name, AdaptedMLP)`` for every adapter of ``model``, in module order.

    Parameters
    ----------
    model : nn.Module
        Any module (an adapted model, or a module holding one); one without adapters yields
        nothing.

    Yields
    ------
    name : str
        Dotted name of the target relative to ``model`` (to the model inside it, for a
        ``torch.compile`` / DDP / PEFT wrapper), e.g. ``"model.layers.0.mlp"``.
    adapted : AdaptedMLP

    Examples
    --------
    >>> model = inject(nn.ModuleDict({"mlp": nn.Linear(8, 8)}),
    ...                HRMConfig(d_state=4, target_modules=["mlp"]))
    >>> [name for name, _ in iter_adapters(model)]
    ['mlp']
    >>> [name for name, _ in model.named_parameters()][:2]
    ['mlp.weight', 'mlp.bias']
    """
    marker = ADAPTERS_ATTR + "."
    for path, module in unwrap_model(model).named_modules():
        if isinstance(module, AdaptedMLP):
            prefix = path[: path.index(marker)] if marker in path else ""
            yield prefix + module.adapter_name, module


def find_adapters(model: nn.Module) -> dict[str, AdaptedMLP]:
    """``{target name: AdaptedMLP}`` for every adapter of ``model``, in module order.

    Parameters
    ----------
    model : nn.Module
        Any module.

    Returns
    -------
    dict of str to AdaptedMLP
        Empty when ``model`` has no adapters.

    Examples
    --------
    >>> model = inject(nn.ModuleDict({"mlp": nn.Linear(8, 8)}),
    ...                HRMConfig(d_state=4, target_modules=["mlp"]))
    >>> list(find_adapters(model)), find_adapters(nn.Linear(8, 8))
    (['mlp'], {})
    """
    return dict(iter_adapters(model))
