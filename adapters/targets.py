"""Which modules of a model get an adapter, and whether they can take one (checked up front).

One matching rule, used by :func:`adapters.inject`, :func:`find_target_modules` and the LoRA
baseline: ``None`` finds the feed-forward of every decoder block; a string is a regular
expression matched against the whole dotted module name (:func:`re.fullmatch`); a list matches
names exactly or as a dotted suffix.

A target is where the branch *writes* (its output gets ``+ gate * ssm(stream)``) and where it
*reads* the stream (the input of that module, or of its partner in a feed-forward pair). Two
layouts are recognised:

* a feed-forward module mapping the stream width H to H (``mlp`` of GPT-2, Llama, Mistral,
  Qwen2, ...; also attention modules such as ``self_attn`` or ``attn``, or T5's
  ``DenseReluDense``, when named explicitly);
* a **pair** of modules inside one block, the first reading H features, the second returning
  H (OPT's ``fc1``/``fc2``, BERT's ``intermediate``/``output.dense``, ALBERT's
  ``ffn``/``ffn_output``; :data:`PAIRS`): the branch reads the first one's input and is added
  to the second one's output; the target is named by the second. OPT flattens the stream to
  (B·L, H); the adapter restores (B, L, H) from the model call's batch size.

Encoder-decoder models (T5, BART, ...) are refused: the call's ``attention_mask`` and KV cache
belong to different streams there, so the decoder adapters' state could not be kept right.
Their encoder-only classes (``T5EncoderModel``, ``UMT5EncoderModel``) are encoders like BERT.

:func:`resolve_targets` checks, before the model is touched, that each target's input and
output widths are H (from its linear layers, or a dry run on the meta device when it has
none, e.g. the mixture-of-experts block of Mixtral, whose experts are 3-D parameters; a block
whose routing needs host values, JetMoE's, runs once on a zero input instead) and
that its forward takes the stream as its first argument, and raises
:class:`~adapters.exceptions.AdapterShapeError` or
:class:`~adapters.exceptions.TargetModulesNotFoundError` naming the modules that would work.
"""

from __future__ import annotations

import inspect
import re
from collections.abc import Sequence
from dataclasses import dataclass

import torch
from torch import nn

from adapters.exceptions import AdapterConfigError, AdapterShapeError, TargetModulesNotFoundError

__all__ = [
    "Target",
    "matches_target",
    "find_target_modules",
    "resolve_targets",
    "linear_dims",
    "infer_width",
    "select_layers",
    "block_index",
    "ADAPTERS_ATTR",
]

ADAPTERS_ATTR = "hrm_adapters"
"""Name of the container under which :func:`adapters.inject` registers the adapters: the base
model's own parameter names never change, the adapters' are ``hrm_adapters.<target>.*``."""

FEED_FORWARD_NAMES = ("mlp", "feed_forward", "ffn", "block_sparse_moe", "DenseReluDense")
"""Names of a decoder block's feed-forward module found by ``target_modules=None``, in order
of preference: a block takes the first one it has (``mlp`` of GPT-2, Llama, Qwen2, ...;
``feed_forward`` of Llama 4, LFM2, Falcon-H1; ``ffn`` of MPT, CTRL; ``block_sparse_moe`` of
GraniteMoE; ``DenseReluDense`` of the T5 family's encoders, ``T5EncoderModel`` and
``UMT5EncoderModel``, in the ``layer`` list of each block)."""
PAIRS = (("fc1", "fc2"), ("intermediate", "output.dense"), ("ffn", "ffn_output"))
"""Feed-forward pairs ``(reads, writes)``, paths inside one block (OPT's ``fc1``/``fc2``,
BERT's ``intermediate``/``output.dense``, ALBERT's ``ffn``/``ffn_output``), recognised as one
target named by ``writes``."""

_CANDIDATE_WORDS = ("mlp", "ffn", "feed_forward", "feedforward", "ffwd", "densereludense",
                    "attn", "attention")
_MAX_CANDIDATES = 40


@dataclass(frozen=True)
class Target:
    """One adapter site.

    Attributes
    ----------
    name : str
        Dotted name of the module whose output gets the branch (the adapter's name).
    source : str
        Dotted name of the module whose input is the ``mlp_input`` stream (``name`` itself,
        or ``fc1`` of a pair).
    input_name : str or None
        Name of the source's first forward parameter (the stream when passed by keyword).
    width : int
        Stream width H.
    """

    name: str
    source: str
    input_name: str | None
    width: int


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


def linear_dims(module: nn.Module) -> tuple[int, int] | None:
    """``(in_features, out_features)`` of an ``nn.Linear`` or transformers' ``Conv1D``, else None.

    Parameters
    ----------
    module : nn.Module

    Returns
    -------
    (int, int) or None

    Examples
    --------
    >>> linear_dims(nn.Linear(3, 5)), linear_dims(nn.ReLU())
    ((3, 5), None)
    """
    if isinstance(module, nn.Linear):
        return module.in_features, module.out_features
    weight = getattr(module, "weight", None)
    if type(module).__name__ == "Conv1D" and isinstance(weight, torch.Tensor) and weight.dim() == 2:
        return int(weight.shape[0]), int(weight.shape[1])  # transformers' GPT-2 Conv1D (nx, nf)
    return None


def _is_container(module: nn.Module) -> bool:
    return type(module).__name__ == "AdapterTree"


def _walk(model: nn.Module):
    """``named_modules`` without the adapters' own container (never a target)."""
    skip: list[str] = []
    for name, module in model.named_modules():
        if not name or any(name.startswith(p) for p in skip):
            continue
        if _is_container(module):
            skip.append(name + ".")
            continue
        yield name, module


def _parent(model: nn.Module, name: str) -> tuple[nn.Module | None, str]:
    parent_name, _, child = name.rpartition(".")
    return (model.get_submodule(parent_name) if parent_name else model), child


def _is_block(model: nn.Module, name: str) -> bool:
    """Whether ``name`` is an element ``<ModuleList>.<i>`` (a block)."""
    parent_name, _, index = name.rpartition(".")
    return bool(parent_name) and index.isdigit() and isinstance(
        model.get_submodule(parent_name), nn.ModuleList)


def _submodule(model: nn.Module, name: str) -> nn.Module | None:
    try:
        return model.get_submodule(name)
    except AttributeError:
        return None


def _pair_of(model: nn.Module, name: str) -> tuple[str, str] | None:
    """``(source, writes)`` names when ``name`` is one half of a feed-forward pair."""
    for read, write in PAIRS:
        for half in (read, write):
            if name != half and not name.endswith("." + half):
                continue
            prefix = name[: len(name) - len(half)]
            src, dst = _submodule(model, prefix + read), _submodule(model, prefix + write)
            if src is None or dst is None:
                continue
            (w_in, w_mid), (w_mid2, w_out) = _widths(src), _widths(dst)
            if None not in (w_in, w_out) and w_in == w_out and w_mid == w_mid2:
                return prefix + read, prefix + write
    return None


def _block_feed_forward(block: nn.Module) -> str | None:
    """The block's child named by :data:`FEED_FORWARD_NAMES` (the first it has), not counting
    the first half of a :data:`PAIRS` pair (ALBERT's ``ffn`` beside ``ffn_output``) nor a
    container, which is never called (MobileBERT's ``ffn``, a ModuleList of feed-forward
    layers: those are blocks of their own), or None."""
    def first_half(f: str) -> bool:
        return any(read == f and _submodule(block, write) is not None for read, write in PAIRS)

    return next((f for f in FEED_FORWARD_NAMES
                 if f in block._modules and not first_half(f)
                 and not isinstance(block._modules[f], (nn.ModuleList, nn.ModuleDict))), None)


def _default_hit(model: nn.Module, name: str) -> bool:
    block, _, child = name.rpartition(".")
    if child in FEED_FORWARD_NAMES and _is_block(model, block):
        return _block_feed_forward(model.get_submodule(block)) == child
    for _, write in PAIRS:
        if name.endswith("." + write):
            block = name[: -len(write) - 1]
            return (_is_block(model, block)
                    and _block_feed_forward(model.get_submodule(block)) is None
                    and _pair_of(model, name) is not None)
    return False


def _check_selector(target_modules) -> None:
    if target_modules is not None and not isinstance(target_modules, str):
        if not isinstance(target_modules, Sequence) or not all(
            isinstance(t, str) for t in target_modules
        ):
            raise AdapterConfigError(
                "`target_modules` must be None, a regex string or a list of names; got "
                f"{target_modules!r}"
            )


def find_target_modules(model: nn.Module, target_modules: str | Sequence[str] | None = None,
                        ) -> list[str]:
    """Names of the modules selected by ``target_modules``, in module order.

    Parameters
    ----------
    model : nn.Module
    target_modules : str or sequence of str or None
        See :func:`matches_target`; ``None`` selects, in every block of an ``nn.ModuleList``
        (``"transformer.h.3"``, ``"model.layers.3"``), its feed-forward: the first of
        :data:`FEED_FORWARD_NAMES` (``mlp``, ``feed_forward``, ``ffn``, ``block_sparse_moe``,
        ``DenseReluDense``) it has (not a container such as MobileBERT's ``ffn`` list) and, in
        blocks without one, the second module of a :data:`PAIRS` pair (OPT's ``fc2``, BERT's
        ``output.dense``); in a model with a vision tower beside its language
        model (a separate text config: LLaVA, Qwen2-VL, Gemma 3), the language model's blocks
        only (its ``get_decoder()``).

    Returns
    -------
    list of str
        Possibly empty. The adapters' own modules are never listed.

    Raises
    ------
    AdapterConfigError
        ``target_modules`` is neither None, a string nor a sequence of strings.
    """
    _check_selector(target_modules)
    if target_modules is None:
        inside = _text_decoder(model)
        return [name for name, _ in _walk(model)
                if name.startswith(inside) and _default_hit(model, name)]
    return [name for name, _ in _walk(model) if matches_target(name, target_modules)]


def _text_decoder(model: nn.Module) -> str:
    """``"<name>."`` of the text decoder of a model with a separate text config (LLaVA,
    Qwen2-VL, Gemma 3: a vision tower beside the language model), else ``""``.

    The default targets are that decoder's blocks: the call's attention mask and KV cache are
    the text stream's, and a vision encoder's blocks (often of another width) see image patches.
    """
    hf_config = getattr(model, "config", None)
    get_text = getattr(hf_config, "get_text_config", None)
    get_decoder = getattr(model, "get_decoder", None)
    if not callable(get_text) or not callable(get_decoder):
        return ""
    try:
        if get_text() is hf_config:
            return ""
        decoder = get_decoder()
    except Exception:  # noqa: BLE001 - no decoder to tell: all blocks, as for any model
        return ""
    if decoder is model or not isinstance(decoder, nn.Module):
        return ""
    return next((name + "." for name, m in model.named_modules() if m is decoder and name), "")


def block_index(name: str) -> int | None:
    """The last purely numeric component of a dotted name (``"h.3.mlp"`` -> 3), or None.

    Parameters
    ----------
    name : str

    Returns
    -------
    int or None
    """
    for part in reversed(name.split(".")):
        if part.isdigit():
            return int(part)
    return None


def select_layers(names: list[str], config) -> list[str]:
    """``names`` without the blocks listed in ``config.layers_to_skip``.

    Parameters
    ----------
    names : list of str
        Matched target names.
    config : HRMConfig

    Returns
    -------
    list of str

    Raises
    ------
    AdapterConfigError
        An index matches no block, or no name has a block index.
    """
    if not config.layers_to_skip:
        return names
    indices = sorted({i for i in (block_index(n) for n in names) if i is not None})
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
    return [n for n in names if block_index(n) not in skip]


def infer_width(model: nn.Module, name: str, module: nn.Module, config) -> int:
    """Stream width H: ``config.d_model``, the model's ``hidden_size``, or the module's linears.

    Parameters
    ----------
    model : nn.Module
    name : str
        Dotted name of ``module`` (for the message).
    module : nn.Module
        The target.
    config : HRMConfig

    Returns
    -------
    int

    Raises
    ------
    AdapterConfigError
        No way to infer it.
    """
    if config.d_model is not None:
        return config.d_model
    width = _model_width(model)
    if width is not None:
        return width
    dims = [d for d in (linear_dims(m) for m in module.modules()) if d is not None]
    if not dims:
        raise AdapterConfigError(
            f"cannot infer the stream width H of {name!r} (no config.hidden_size and no linear "
            "layer inside); set `HRMConfig(d_model=...)`"
        )
    return dims[0][0] if config.reads == "mlp_input" else dims[-1][1]


def _first_parameter(module: nn.Module) -> tuple[bool, str | None]:
    """(takes a first argument, its name) of ``module.forward``."""
    try:
        params = list(inspect.signature(module.forward).parameters.values())
    except (TypeError, ValueError):
        return True, None
    for p in params:
        if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD):
            return True, p.name
        if p.kind == p.VAR_POSITIONAL:
            return True, None
    return False, None


def _widths(module: nn.Module) -> tuple[int | None, int | None]:
    """Input width of the first and output width of the last linear layer inside."""
    dims = [d for d in (linear_dims(m) for m in module.modules()) if d is not None]
    return (dims[0][0], dims[-1][1]) if dims else (None, None)


def _dry_run_width(module: nn.Module, width: int) -> int | None:
    """Output width of ``module`` on a (1, 2, H) input, or None when it cannot be run.

    First on the meta device: the module runs with meta stand-ins for its parameters and
    buffers (nothing is copied, nothing computed), in float32 and, failing that, in bfloat16
    (some meta kernels accept only bfloat16: the grouped matmul of mixture-of-experts blocks
    such as Mixtral's). A block whose routing needs host values (JetMoE's experts split the
    tokens by ``expert_size.tolist()``) cannot run on meta tensors; when its weights are
    resident it runs once on a zero input of its own device and dtype instead, under
    ``no_grad`` and with the random number generators restored afterwards, so nothing it
    computes or draws is kept (its ``forward`` is called directly: its own hooks do not run).
    """
    from torch.func import functional_call

    tensors = dict((*module.named_parameters(), *module.named_buffers()))
    for dtype in (torch.float32, torch.bfloat16):
        try:
            stand_ins = {n: torch.empty_like(t, device="meta",
                                             dtype=dtype if t.is_floating_point() else t.dtype)
                         for n, t in tensors.items()}
            out = functional_call(module, stand_ins,
                                  (torch.empty(1, 2, width, device="meta", dtype=dtype),))
        except Exception:  # noqa: BLE001 - any failure means "cannot tell"; reported by caller
            continue
        return _out_width(out)
    if not tensors or any(t.is_meta for t in tensors.values()):
        return None
    floats = [t for t in tensors.values() if t.is_floating_point()]
    like = floats[0] if floats else next(iter(tensors.values()))
    device = like.device
    x = torch.zeros(1, 2, width, device=device,
                    dtype=like.dtype if like.is_floating_point() else torch.float32)
    gpus = [device.index or 0] if device.type == "cuda" else []
    try:
        with torch.no_grad(), torch.random.fork_rng(devices=gpus):
            out = type(module).forward(module, x)
    except Exception:  # noqa: BLE001 - as above
        return None
    return _out_width(out)


def _out_width(out) -> int | None:
    out = out[0] if isinstance(out, tuple) else out
    return int(out.shape[-1]) if isinstance(out, torch.Tensor) and out.dim() == 3 else None


def _problem(model: nn.Module, name: str, source: str, width: int, reads: str) -> str | None:
    """Why the target cannot take an adapter of width ``width``, or None."""
    module, src = model.get_submodule(name), model.get_submodule(source)
    if isinstance(module, (nn.ModuleList, nn.ModuleDict)):
        return f"{name!r} is a {type(module).__name__}, which is never called"
    takes, _ = _first_parameter(src)
    if not takes:
        return f"{source!r}.forward takes no positional stream argument"
    if any(isinstance(m, nn.Embedding) for m in (*module.modules(), *src.modules())):
        return f"{name!r} holds an embedding: it is called with token ids, not the stream"
    w_in, _ = _widths(src)
    _, w_out = _widths(module)
    how = ""
    if w_in is None and w_out is None:
        if next(module.parameters(), None) is None:  # an activation, dropout, identity ...
            return (f"{name!r} has no parameters, so the width of what it is called with "
                    "cannot be checked before the first forward")
        w_out = _dry_run_width(module, width)
        if w_out is None:
            return (f"{name!r} has no linear layer and could not be run on a (1, 2, {width}) "
                    "input to check its widths")
        w_in = width
    elif source == name and (w_in not in (None, width) or w_out not in (None, width)):
        # The first and last linear layers in module order need not be the block's input and
        # output: a mixture-of-experts block registers its router (H -> E) or a shared
        # expert's gate (H -> 1) after the experts (Qwen2-MoE, PhiMoE, JetMoE). Its own
        # call (on a meta tensor, or on a zero input) decides.
        ran = _dry_run_width(module, width)
        if ran == width:
            return None
        if ran is None and linear_dims(module) is None and w_in in (None, width):
            # a block, not a linear layer itself, whose input fits: its output is in doubt
            how = (" (by its first and last linear layers; it could not be run on a (1, 2, "
                   f"{width}) input to check)")
    if reads == "mlp_input" and w_in is not None and w_in != width:
        return f"{source!r} reads {w_in} features, not the stream width H = {width}{how}"
    if w_out is not None and w_out != width:
        return (f"{name!r} returns {w_out} features{how}; the branch (width H = {width}) can "
                "only be added to an output of width H")
    return None


def _valid_candidates(model: nn.Module, width: int | None, reads: str) -> list[str]:
    """Modules that would take an adapter (of each one's own width when ``width`` is None)."""
    out = []
    for name, module in _walk(model):
        if width is None:
            w_in, w_out = _widths(module)
            if w_in is None or w_in != w_out:
                continue
            if _problem(model, name, name, w_in, reads) is None and _looks_like_ffn(model, name):
                out.append(name)
            continue
        pair = _pair_of(model, name)
        if pair is not None:
            if name == pair[1] and _problem(model, name, pair[0], width, reads) is None:
                out.append(f"{name} (reads {pair[0].rsplit('.', 1)[-1]}'s input)")
            continue
        if _looks_like_ffn(model, name) and _problem(model, name, name, width, reads) is None:
            out.append(name)
    return out


def _looks_like_ffn(model: nn.Module, name: str) -> bool:
    """A module with linear layers inside (not one itself), named like a feed-forward or an
    attention, or with two linear children."""
    module = model.get_submodule(name)
    if linear_dims(module) is not None or _widths(module) == (None, None):
        return False
    last = name.rsplit(".", 1)[-1].lower()
    n_linear = sum(linear_dims(c) is not None for c in module.children())
    return any(w in last for w in _CANDIDATE_WORDS) or n_linear >= 2


def _shown(names: list[str]) -> str:
    more = " ..." if len(names) > _MAX_CANDIDATES else ""
    return "[" + (", ".join(names[:_MAX_CANDIDATES]) + more or "none found") + "]"


def resolve_targets(model: nn.Module, config) -> list[Target]:
    """The adapter sites ``config`` selects in ``model``, each checked; nothing is modified.

    Parameters
    ----------
    model : nn.Module
    config : HRMConfig

    Returns
    -------
    list of Target
        In module order; a pair matched by both halves appears once.

    Raises
    ------
    TargetModulesNotFoundError
        Nothing matches; the message lists the modules that would take an adapter.
    AdapterShapeError
        A matched module's widths or call signature do not fit (e.g. ``gate_proj``, which maps
        H to the intermediate width); the message lists the valid candidates.
    AdapterConfigError
        Nested targets, a bad ``layers_to_skip`` entry, or no way to infer the width.
    """
    hf_config = getattr(model, "config", None)
    if getattr(hf_config, "is_encoder_decoder", False) and _has_decoder_stack(model):
        raise AdapterConfigError(
            f"{type(model).__name__} is an encoder-decoder model: its `attention_mask` and KV "
            "cache belong to different streams, so the adapters' state cannot be kept right; "
            "decoder-only and encoder-only models are supported"
        )
    names = find_target_modules(model, config.target_modules)
    if not names:
        width = config.d_model or _model_width(model)
        cands = _valid_candidates(model, width, config.reads)
        hint = ""
        if isinstance(config.target_modules, str) and find_target_modules(
                model, (config.target_modules,)):
            hint = (f" (a string is a regular expression matched against the whole dotted "
                    f"name; the list [{config.target_modules!r}] matches it as a name suffix)")
        raise TargetModulesNotFoundError(
            f"`target_modules`={config.target_modules!r} matches no module of "
            f"{type(model).__name__}{hint}; candidates: {_shown(cands)}"
        )
    sites: dict[str, str] = {}
    for name in names:
        pair = _pair_of(model, name)
        write, source = (pair[1], pair[0]) if pair is not None else (name, name)
        sites.setdefault(write, source)
    for a in sites:
        for b in sites:
            if b.startswith(a + "."):
                raise AdapterConfigError(
                    f"`target_modules` selects nested modules {a!r} and {b!r}; select one level"
                )
    kept = select_layers(list(sites), config)
    if not kept:
        raise AdapterConfigError("`layers_to_skip` removes every matched module; nothing to adapt")
    targets = []
    for name in kept:
        source = sites[name]
        width = infer_width(model, name, model.get_submodule(name), config)
        problem = _problem(model, name, source, width, config.reads)
        if problem is not None:
            raise AdapterShapeError(
                f"cannot attach an adapter at {name!r}: {problem}. Modules that take one "
                f"(reads={config.reads!r}): {_shown(_valid_candidates(model, width, config.reads))}"
            )
        targets.append(Target(name, source, _first_parameter(model.get_submodule(source))[1],
                              width))
    return targets


def _has_decoder_stack(model: nn.Module) -> bool:
    """Whether ``model`` holds a decoder stack (a module with children named ``decoder``):
    the encoder-only classes of encoder-decoder families (``UMT5EncoderModel``) keep the
    family's ``is_encoder_decoder=True`` but have none."""
    return any(name.rpartition(".")[2] == "decoder" and next(m.children(), None) is not None
               for name, m in model.named_modules())


def _model_width(model: nn.Module) -> int | None:
    hf_config = getattr(model, "config", None)
    text = hf_config.get_text_config() if hasattr(hf_config, "get_text_config") else hf_config
    for key in ("hidden_size", "n_embd", "d_model"):
        width = getattr(text, key, None)
        if isinstance(width, int) and not isinstance(width, bool):
            return width
    return None
