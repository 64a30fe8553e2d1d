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

:func:`disable_adapter` switches the branches off for a ``with`` block. The per-target
wrapper, ``AdaptedMLP``, lives in ``adapters.adapted`` (re-exported here). Shapes: B batch,
L length, H model width.
"""

from __future__ import annotations

import contextlib
import functools
from collections.abc import Iterator

import torch  # noqa: F401  (the examples in the docstrings use it)
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
from adapters.adapted import AdaptedMLP, AdapterTree, build_adapter, target_device
from adapters.config import HRMConfig
from adapters.exceptions import AdapterConfigError, AdapterError
from adapters.targets import (
    ADAPTERS_ATTR,
    find_target_modules,
    matches_target,
    resolve_targets,
)

__all__ = [
    "AdaptedMLP",
    "AdapterTree",
    "build_adapter",
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
        adapter = build_adapter(t.width, config, device=target_device(module))
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
