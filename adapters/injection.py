"""Inject gated SSM adapters beside the frozen MLPs of a model, and take them out again.

Each matched module ``mlp`` is replaced by ``AdaptedMLP(mlp, adapter)``, whose forward is

    h = mlp(x);  return h + adapter(stream),  stream = x (default) or h,

so a transformer block ``x = x + mlp(ln(x))`` becomes ``x = x + mlp(ln(x)) + gate * ssm(ln(x))``
without editing the model's code. Shapes: B batch, L length, H model width.

Target matching is one rule, used by :func:`inject`, :func:`find_target_modules` and the LoRA
baseline: ``None`` finds the ``mlp`` of every decoder block; a string is a regular expression
matched against the whole dotted module name (:func:`re.fullmatch`); a list matches names
exactly or as a dotted suffix.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence

import torch
from torch import nn

from adapters.config import HRMConfig
from adapters.exceptions import (
    AdapterConfigError,
    AdapterError,
    AdapterShapeError,
    TargetModulesNotFoundError,
)

__all__ = [
    "AdaptedMLP",
    "inject",
    "remove",
    "unload",
    "find_adapters",
    "iter_adapters",
    "find_target_modules",
    "matches_target",
    "get_adapter_config",
    "get_nb_trainable_parameters",
    "print_trainable_parameters",
]

_RUNTIME_ATTR = "_hrm_runtime"
_CANDIDATE_WORDS = ("mlp", "ffn", "feed_forward", "feedforward", "ffwd")
_MAX_CANDIDATES = 40


class AdaptedMLP(nn.Module):
    """A frozen MLP with a gated SSM branch beside it: ``mlp(x) + adapter(stream)``.

    Parameters
    ----------
    mlp : nn.Module
        The original module, kept as is (same object) and restored by :func:`remove`.
        Its input ``x`` is (B, L, H); a tuple output adds the branch to its first element.
    adapter : nn.Module
        An :class:`adapters.layer.HRMAdapter`; maps a stream (B, L, H) to (B, L, H).
    reads : {"mlp_input", "mlp_output"}
        The stream: the MLP's input ``x`` or its output ``mlp(x)``.
    name : str
        Dotted name of the module in the model (the key of its SSM state in generation).

    Notes
    -----
    The branch runs in the adapter's parameter dtype (float32 by default) and is cast back to
    the MLP output dtype. With gate 0 the result equals ``mlp(x)`` bit for bit. During a model
    call, :mod:`adapters.generation` supplies the attention mask (padded positions drive no
    state) and, with a KV cache, the SSM state carried across calls. Under gradient
    checkpointing the block is recomputed outside the model call, where no mask is known; this
    matters only for *left*-padded training batches (train with right padding, the HF default).
    """

    def __init__(self, mlp: nn.Module, adapter: nn.Module, *, reads: str = "mlp_input",
                 name: str = "") -> None:
        super().__init__()
        if reads not in ("mlp_input", "mlp_output"):
            raise AdapterConfigError(f"`reads` must be 'mlp_input' or 'mlp_output'; got {reads!r}")
        self.mlp = mlp
        self.adapter = adapter
        self.reads = reads
        self.adapter_name = name
        self._runtime = None  # an adapters.generation.AdapterRuntime once injected

    def adapter_dtype(self) -> torch.dtype:
        """Real dtype the branch computes in (that of the adapter's real parameters)."""
        for p in self.adapter.parameters():
            if p.is_floating_point():
                return p.dtype
        return torch.float32

    def forward(self, x: torch.Tensor, *args, **kwargs):
        """``mlp(x)`` plus the adapter branch on the stream.

        Parameters
        ----------
        x : torch.Tensor, shape (B, L, H)
            Input of the MLP.
        *args, **kwargs
            Passed on to the wrapped MLP unchanged.

        Returns
        -------
        torch.Tensor, shape (B, L, H), or tuple
            ``mlp(x) + adapter(stream)`` in the MLP output's dtype; when the MLP returns a
            tuple, the same tuple with the branch added to its first element.

        Raises
        ------
        AdapterShapeError
            The stream is not 3-D (B, L, H), or (inside a model call) the attention mask does
            not cover it or the stored SSM state has another batch size.
        AdapterError
            Inside a cached model call, no stored SSM state matches this adapter.

        Examples
        --------
        >>> from adapters import HRMAdapter
        >>> adapted = AdaptedMLP(nn.Linear(8, 8), HRMAdapter(8, 4), name="mlp")  # gate 0
        >>> x = torch.randn(2, 5, 8)
        >>> torch.equal(adapted(x), adapted.mlp(x))
        True
        """
        out = self.mlp(x, *args, **kwargs)
        h = out[0] if isinstance(out, tuple) else out
        stream = x if self.reads == "mlp_input" else h
        if stream.dim() != 3:
            raise AdapterShapeError(
                f"the adapter at {self.adapter_name!r} needs a (B, L, H) stream; got shape "
                f"{tuple(stream.shape)}"
            )
        u = stream.to(self.adapter_dtype())  # (B, L, H)
        if self._runtime is not None:
            y = self._runtime.branch(self, u)
        else:
            y = self.adapter(u)
        h = h + y.to(h.dtype)
        return (h, *out[1:]) if isinstance(out, tuple) else h

    def extra_repr(self) -> str:
        """The stream shown by ``repr(module)``.

        Returns
        -------
        str
            ``"reads='mlp_input'"`` or ``"reads='mlp_output'"``.
        """
        return f"reads={self.reads!r}"


def matches_target(name: str, target_modules: str | Sequence[str]) -> bool:
    """Whether a dotted module name is selected by ``target_modules``.

    Parameters
    ----------
    name : str
        Dotted module name, e.g. ``"model.layers.0.mlp"``.
    target_modules : str or sequence of str
        A string is a regular expression matched against the whole name; a sequence matches
        a name equal to an entry or ending in ``"." + entry``.

    Returns
    -------
    bool

    Examples
    --------
    >>> matches_target("model.layers.0.mlp", ["mlp"]), matches_target("h.0.gate_mlp", ["mlp"])
    (True, False)
    >>> matches_target("transformer.h.1.mlp", r".*\\.h\\.\\d+\\.mlp")
    True
    """
    if isinstance(target_modules, str):
        return re.fullmatch(target_modules, name) is not None
    return any(name == t or name.endswith("." + t) for t in target_modules)


def _is_block_mlp(model: nn.Module, name: str) -> bool:
    parts = name.split(".")
    if len(parts) < 3 or parts[-1] != "mlp" or not parts[-2].isdigit():
        return False
    return isinstance(model.get_submodule(".".join(parts[:-2])), nn.ModuleList)


def _linear_dims(module: nn.Module) -> tuple[int, int] | None:
    if isinstance(module, nn.Linear):
        return module.in_features, module.out_features
    weight = getattr(module, "weight", None)
    if type(module).__name__ == "Conv1D" and isinstance(weight, torch.Tensor) and weight.dim() == 2:
        return int(weight.shape[0]), int(weight.shape[1])  # transformers' GPT-2 Conv1D (nx, nf)
    return None


def _candidates(model: nn.Module) -> list[str]:
    out = []
    for name, module in model.named_modules():
        if not name or isinstance(module, AdaptedMLP):
            continue
        last = name.rsplit(".", 1)[-1].lower()
        n_linear = sum(_linear_dims(c) is not None for c in module.children())
        if any(w in last for w in _CANDIDATE_WORDS) or n_linear >= 2:
            out.append(name)
    return out


def find_target_modules(model: nn.Module, target_modules: str | Sequence[str] | None = None,
                        ) -> list[str]:
    """Names of the modules selected by ``target_modules``, in module order.

    Parameters
    ----------
    model : nn.Module
    target_modules : str or sequence of str or None
        See :func:`matches_target`; ``None`` selects every module named ``mlp`` that sits in a
        block of an ``nn.ModuleList`` (``"transformer.h.3.mlp"``, ``"model.layers.3.mlp"``).

    Returns
    -------
    list of str
        Possibly empty. Modules already wrapped by an adapter are reported by their own name.

    Raises
    ------
    AdapterConfigError
        ``target_modules`` is neither None, a string nor a sequence of strings.
    """
    if target_modules is not None and not isinstance(target_modules, str):
        if not isinstance(target_modules, Sequence) or not all(
            isinstance(t, str) for t in target_modules
        ):
            raise AdapterConfigError(
                "`target_modules` must be None, a regex string or a list of names; got "
                f"{target_modules!r}"
            )
    names: list[str] = []
    adapted_prefixes: list[str] = []
    for name, module in model.named_modules():
        if not name or any(name.startswith(p) for p in adapted_prefixes):
            continue  # the inside of an AdaptedMLP (its mlp and adapter) is never a target
        if isinstance(module, AdaptedMLP):
            adapted_prefixes.append(name + ".")
        hit = (_is_block_mlp(model, name) if target_modules is None
               else matches_target(name, target_modules))
        if hit:
            names.append(name)
    return names


def _block_index(name: str) -> int | None:
    for part in reversed(name.split(".")):
        if part.isdigit():
            return int(part)
    return None


def _infer_width(model: nn.Module, name: str, module: nn.Module, config: HRMConfig) -> int:
    if config.d_model is not None:
        return config.d_model
    hf_config = getattr(model, "config", None)
    width = getattr(hf_config, "hidden_size", None)
    if isinstance(width, int) and not isinstance(width, bool):
        return width
    dims = [d for d in (_linear_dims(m) for m in module.modules()) if d is not None]
    if not dims:
        raise AdapterConfigError(
            f"cannot infer the stream width H of {name!r} (no config.hidden_size and no linear "
            "layer inside); set `HRMConfig(d_model=...)`"
        )
    return dims[0][0] if config.reads == "mlp_input" else dims[-1][1]


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


def _select_layers(names: list[str], config: HRMConfig) -> list[str]:
    if not config.layers_to_skip:
        return names
    indices = sorted({i for i in (_block_index(n) for n in names) if i is not None})
    if not indices:
        raise AdapterConfigError(
            f"`layers_to_skip` is {list(config.layers_to_skip)} but no matched module name has a "
            f"block index; matched {names}"
        )
    skip = set()
    for i in config.layers_to_skip:
        j = indices[i] if -len(indices) <= i < 0 else i
        if j not in indices:
            raise AdapterConfigError(
                f"`layers_to_skip` entry {i} matches no block; matched block indices are {indices}"
            )
        skip.add(j)
    return [n for n in names if _block_index(n) not in skip]


def inject(model: nn.Module, config: HRMConfig | None = None) -> nn.Module:
    """Put a gated SSM adapter beside each target MLP; freeze the rest (in place).

    Parameters
    ----------
    model : nn.Module
        A transformers model (GPT-2, Llama, Mistral, Qwen2, ...: any model whose blocks expose
        an ``mlp``) or a plain module with ``config.target_modules`` set.
    config : HRMConfig or None
        ``None`` uses ``HRMConfig()``.

    Returns
    -------
    nn.Module
        ``model`` itself, with each target replaced by :class:`AdaptedMLP`, every base
        parameter frozen (``requires_grad=False``) and only adapter parameters trainable.

    Raises
    ------
    AdapterConfigError
        Bad config, model already adapted, nested targets, unknown skip index, unknown width.
    TargetModulesNotFoundError
        Nothing matches; the message lists candidate module names.

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
    if getattr(model, _RUNTIME_ATTR, None) is not None or any(
        isinstance(m, AdaptedMLP) for m in model.modules()
    ):
        raise AdapterConfigError("`model` already has HRM adapters; call `remove(model)` first")
    names = find_target_modules(model, config.target_modules)
    if not names:
        cands = _candidates(model)
        more = " ..." if len(cands) > _MAX_CANDIDATES else ""
        shown = ", ".join(cands[:_MAX_CANDIDATES]) + more
        raise TargetModulesNotFoundError(
            f"`target_modules`={config.target_modules!r} matches no module of "
            f"{type(model).__name__}; candidates: [{shown or 'none found'}]"
        )
    for a in names:
        for b in names:
            if b.startswith(a + "."):
                raise AdapterConfigError(
                    f"`target_modules` selects nested modules {a!r} and {b!r}; select one level"
                )
    names = _select_layers(names, config)
    if not names:
        raise AdapterConfigError("`layers_to_skip` removes every matched module; nothing to adapt")

    wrapped = {}
    for name in names:
        module = model.get_submodule(name)
        width = _infer_width(model, name, module, config)
        adapter = build_adapter(width, config, device=_module_device(module))
        wrapped[name] = AdaptedMLP(module, adapter, reads=config.reads, name=name)

    # --- the model is touched only from here on ---
    runtime = AdapterRuntime(config)
    runtime.saved_requires_grad = [(p, p.requires_grad) for p in model.parameters()]
    for p in model.parameters():
        p.requires_grad_(False)
    for name, adapted in wrapped.items():
        parent_name, _, child = name.rpartition(".")
        parent = model.get_submodule(parent_name) if parent_name else model
        setattr(parent, child, adapted)
        adapted._runtime = runtime
        for p in adapted.adapter.parameters():
            p.requires_grad_(True)
    runtime.attach(model)
    object.__setattr__(model, _RUNTIME_ATTR, runtime)
    return model


def remove(model: nn.Module) -> nn.Module:
    """Take the adapters out and restore the original model exactly (in place).

    The original MLP objects go back in their places, the ``requires_grad`` flags are those
    before :func:`inject`, and the generation hooks are removed.

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
    runtime = getattr(model, _RUNTIME_ATTR, None)
    if runtime is None:
        raise AdapterError("`model` has no HRM adapters to remove")
    for name, adapted in list(find_adapters(model).items()):
        parent_name, _, child = name.rpartition(".")
        parent = model.get_submodule(parent_name) if parent_name else model
        setattr(parent, child, adapted.mlp)
        adapted._runtime = None
    for p, flag in runtime.saved_requires_grad:
        p.requires_grad_(flag)
    runtime.detach()
    object.__delattr__(model, _RUNTIME_ATTR)
    return model


#: PEFT's name for :func:`remove` (unload without merging: adapters cannot be merged).
unload = remove


def get_adapter_config(model: nn.Module) -> HRMConfig:
    """The :class:`HRMConfig` the model was adapted with; :class:`AdapterError` if none.

    Parameters
    ----------
    model : nn.Module
        A model returned by :func:`inject`.

    Returns
    -------
    HRMConfig
        The object :func:`inject` used (``HRMConfig()`` when it was given None).

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
    runtime = getattr(model, _RUNTIME_ATTR, None)
    if runtime is None:
        raise AdapterError("`model` has no HRM adapters; call `inject(model, config)` first")
    return runtime.config


def iter_adapters(model: nn.Module) -> Iterator[tuple[str, AdaptedMLP]]:
    """Yield ``(dotted name, AdaptedMLP)`` for every adapter of ``model``, in module order.

    Parameters
    ----------
    model : nn.Module
        Any module; one without adapters yields nothing.

    Yields
    ------
    name : str
        Dotted module name, e.g. ``"model.layers.0.mlp"``.
    adapted : AdaptedMLP
        The wrapper at that name.

    Examples
    --------
    >>> model = inject(nn.ModuleDict({"mlp": nn.Linear(8, 8)}),
    ...                HRMConfig(d_state=4, target_modules=["mlp"]))
    >>> [name for name, _ in iter_adapters(model)]
    ['mlp']
    """
    for name, module in model.named_modules():
        if isinstance(module, AdaptedMLP):
            yield name, module


def find_adapters(model: nn.Module) -> dict[str, AdaptedMLP]:
    """``{dotted name: AdaptedMLP}`` for every adapter of ``model``, in module order.

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


def get_nb_trainable_parameters(model: nn.Module) -> tuple[int, int]:
    """``(trainable, total)`` parameter counts (shared parameters counted once).

    Parameters
    ----------
    model : nn.Module
        Any module.

    Returns
    -------
    trainable : int
        Scalars in parameters with ``requires_grad``.
    total : int
        Scalars in all parameters.

    Examples
    --------
    After :func:`inject` only the adapter trains: ``2 N H + 2 N + 1`` scalars here
    (H = 8, N = 4), beside the frozen ``8 * 8 + 8`` of the linear layer.

    >>> model = inject(nn.ModuleDict({"mlp": nn.Linear(8, 8)}),
    ...                HRMConfig(d_state=4, target_modules=["mlp"]))
    >>> get_nb_trainable_parameters(model)
    (73, 145)
    """
    trainable = total = 0
    for p in model.parameters():
        total += p.numel()
        if p.requires_grad:
            trainable += p.numel()
    return trainable, total


def print_trainable_parameters(model: nn.Module) -> None:
    """Print the counts in PEFT's format.

    ``trainable params: X || all params: Y || trainable%: Z`` — a user-facing report, the
    one place this package prints (as :meth:`peft.PeftModel.print_trainable_parameters`).

    Parameters
    ----------
    model : nn.Module
        Any module; counts as :func:`get_nb_trainable_parameters`.
    """
    trainable, total = get_nb_trainable_parameters(model)
    pct = 100.0 * trainable / total if total else 0.0
    print(  # noqa: T201 - the documented purpose of this function
        f"trainable params: {trainable:,d} || all params: {total:,d} || trainable%: {pct:.4f}"
    )
