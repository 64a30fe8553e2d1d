"""Stateful adapters under KV-cached generation, without editing transformers.

A diagonal SSM adapter carries memory across positions, so when a model decodes one token at
a time with a KV cache, each adapter must carry its state ``s`` (B, N) from one call to the
next — otherwise (the reference code's bug) every decode step restarts from ``s = 0`` and the
cached logits drift away from the full-sequence forward.

How it works. :func:`adapters.inject` gives the model an :class:`AdapterRuntime` that installs
a forward pre-hook and a forward hook on the top-level model. The pre-hook reads the call's
``cache`` (``past_key_values``) and ``attention_mask``:

* no cache, and ``use_cache`` false or the model in training mode: every sequence starts from
  the zero state; nothing is stored (training stays purely parallel);
* an empty cache (or none, with ``use_cache`` true in eval mode): a new sequence; the adapters
  run their parallel scan and the final states are stored **on the cache object** the call
  returns;
* a non-empty cache: a continuation; each adapter starts from the state stored on that cache
  for exactly ``cache.get_seq_length()`` past tokens (a one-token chunk uses
  ``adapter.step``, a longer one the parallel scan from that state).

Padded positions (``attention_mask == 0``) feed a zero stream, so a left-padded row reaches its
first real token with the zero state, as the unpadded row does. Storing states on the cache
means they follow the cache: the cache's ``reorder_cache`` (beam search),
``batch_select_indices`` and ``batch_repeat_interleave`` are extended (on that instance) to
apply the same permutation to the states, and ``copy.deepcopy(cache)`` copies them. The states
after each of the last :data:`HISTORY_MAX_LEN` tokens of the latest chunk are kept too, so a
``crop`` back into that chunk (assisted decoding rejecting draft tokens) resumes exactly; a
crop further back raises :class:`AdapterError`. Nothing depends on ``cache_position``.

Decode steps. A one-token continuation (greedy or sampled decoding) takes a fast path: the
adapters' discretised weights are read once per cache, at its first continuation step
(:meth:`adapters.layer.HRMAdapter.decode_weights`; a change to the adapters' weights takes
effect with the next cache), and the states of all adapters are held in one flat buffer per
mode group (real, complex), each adapter's ``(B, N)`` block contiguous. Per token, one
multiply applies every adapter's poles (``ā ⊙ s``); per layer, two kernels remain: the input
projection added into the adapter's block in place (``s += x B̄ᵀ``, ``baddbmm_``) and the
readout added in place to the target's output (``h += s (gate C)ᵀ``, ``baddbmm_``: no new
tensor and no copy of ``h``; ``h`` is the tensor the target's forward just returned, so a
forward hook on the target's last inner module that keeps its output sees the sum there, as
it would after an in-place activation; a non-contiguous ``h`` is copied first). With one
row (batch 1) the two kernels are matrix-vector products (``addmv_``) on flat views, the
same bits as ``baddbmm_`` at the sizes where that calls the BLAS (:mod:`adapters._decode`).
Per-adapter state tensors are made from the buffers only when asked for (another chunk,
a crop, :func:`get_adapter_states`, beam reordering). A chunk of several tokens (the prompt)
discretises all adapters at its first adapter, each mode group's zero-order hold in one set
of elementwise kernels for all layers (:mod:`adapters._prefill`, bit for bit the per-layer
values). Nothing else is memoised: a tensor's version counter does not see every update
(``.data`` writes), so plain forward calls always discretise afresh.
"""

from __future__ import annotations

import functools
import inspect
import threading
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import nn

from adapters._decode import DecodePlan as _Plan
from adapters._decode import DecodeWeights as _DecodeWeights
from adapters._decode import StateStack as _Stack
from adapters._masks import token_mask
from adapters._packing import mask_starts, packed_starts
from adapters._prefill import projections as _projections
from adapters.exceptions import AdapterError, AdapterShapeError
from adapters.scan import autocast_on

__all__ = ["AdapterRuntime", "HISTORY_MAX_LEN", "get_adapter_states"]

#: Per-token states are kept for this many final tokens of each chunk, so a cache cropped back
#: by up to this many tokens (assisted decoding) can resume exactly.
HISTORY_MAX_LEN = 64

_CACHE_KWARGS = ("cache", "past_key_values", "cache_params")
"""Names of the KV cache argument and output field: transformers 5.x says ``cache`` and
deprecates the other two (removal announced for 5.40); older versions say ``past_key_values``."""
_STATES_ATTR = "_hrm_adapter_states"
_WRAPPED_ATTR = "_hrm_adapter_wrapped"


class _StateRecord:
    """Adapter states stored on a cache after ``seen`` tokens: name -> (B, N).

    Also the states at the start of the latest chunk (``chunk_start``) and after each of its
    last tokens (``history``), for a crop back into it. After a decode step the states are
    held as a :class:`_Stack` and made into per-adapter tensors when asked for.
    """

    def __init__(self, seen: int, *, states: dict | None = None, stack: _Stack | None = None,
                 chunk_start: int | None = None, start: dict | _Stack | None = None,
                 history: dict[str, torch.Tensor] | None = None,
                 weights: _DecodeWeights | None = None) -> None:
        self.seen, self.chunk_start, self.history = seen, chunk_start, history
        self.weights = weights
        self._states, self.stack, self._start = states, stack, start

    @property
    def states(self) -> dict[str, torch.Tensor]:
        if self._states is None:
            self._states = self.stack.states()  # copies of ring buffers
        return self._states

    @states.setter
    def states(self, value: dict[str, torch.Tensor]) -> None:
        self._states, self.stack = value, None

    @property
    def start_states(self) -> dict[str, torch.Tensor] | None:
        if isinstance(self._start, _Stack):
            self._start = self._start.states()
        return self._start

    def check(self, past: int) -> None:
        if past == self.seen or (self.chunk_start is not None
                                 and self.chunk_start <= past < self.seen):
            return
        known = (f"{self.seen}" if self.chunk_start is None
                 else f"{self.chunk_start}..{self.seen}")
        raise AdapterError(
            f"the KV cache holds {past} tokens but the adapter states are known only after "
            f"{known} tokens (a crop further back than the last continuation chunk, or a cache "
            "advanced by a model without these adapters)"
        )

    def stack_at(self, past: int) -> _Stack | None:
        if past == self.seen:
            return self.stack
        return self._start if past == self.chunk_start and isinstance(self._start, _Stack) else None

    def states_at(self, past: int) -> dict[str, torch.Tensor]:
        self.check(past)
        if past == self.seen:
            return self.states
        if past == self.chunk_start:
            return self.start_states
        return {k: v[:, past - self.chunk_start - 1] for k, v in self.history.items()}

    def apply(self, fn: Callable[[torch.Tensor], torch.Tensor]) -> None:
        states, start = self.states, self.start_states
        self.states = {k: fn(v) for k, v in states.items()}
        if start is not None:
            self._start = {k: fn(v) for k, v in start.items()}
        if self.history is not None:
            self.history = {k: fn(v) for k, v in self.history.items()}  # (B, k, N): dim 0


@dataclass
class _Context:
    """What one top-level model call tells its adapters."""

    stateful: bool
    past: int
    mask: torch.Tensor | None  # (B, past + L) as given (any dtype), nonzero = real token
    cache: Any
    record: _StateRecord | None  # the states to continue from (continuation) or None
    batch: int | None = None  # from input_ids / inputs_embeds (views flattened streams)
    plan: _Plan | None = None  # a one-token continuation on the fast path
    weights: _DecodeWeights | None = None  # carried with the cache
    decode: dict[str, tuple] = field(default_factory=dict)  # decode weights read in this call
    projections: dict[str, tuple] | None = None  # all adapters' discretisations (a chunk)
    # length -> (B, L, 1) padded, or None where no position is (nothing to zero)
    drop: dict[int, torch.Tensor | None] = field(default_factory=dict)
    length: int | None = None
    new_states: dict[str, torch.Tensor] = field(default_factory=dict)
    start_states: dict[str, torch.Tensor] = field(default_factory=dict)
    history: dict[str, torch.Tensor] = field(default_factory=dict)  # (B, k, N) per adapter
    segments: torch.Tensor | None = None  # packed sequences' starts (B, L) (adapters._packing)
    _initial: dict[str, torch.Tensor] | None = None

    def initial(self) -> dict[str, torch.Tensor] | None:
        """States to start from (None for a new sequence), made when first asked for."""
        if self._initial is None and self.record is not None:
            prev = None if self.plan is None else self.plan.prev
            self._initial = (prev.states(keep=False) if prev is not None
                             else self.record.states_at(self.past))
        return self._initial


def _padded(mask: torch.Tensor, device: torch.device) -> torch.Tensor | None:
    """``mask == 0`` on ``device`` (True = a padded position), or None when nothing is padded,
    which is checked only where it costs no device sync (on CPU, not while compiling)."""
    if (mask.device.type == "cpu" and device.type == "cpu"
            and not torch.compiler.is_compiling() and bool(mask.all())):
        return None
    return ~mask.to(device, torch.bool)


def _detached(t: torch.Tensor) -> torch.Tensor:
    """``t`` out of the autograd graph (itself where it is in none: one op fewer)."""
    return t.detach() if t.requires_grad else t


def get_adapter_states(cache: Any) -> dict[str, dict[str, torch.Tensor]]:
    """States stored on a cache: ``{runtime id: {adapter name: (B, N) state}}`` (for inspection).

    Parameters
    ----------
    cache : object
        A transformers ``Cache`` filled by an adapted model (anything else holds no states).

    Returns
    -------
    dict of str to dict of str to torch.Tensor
        Per adapted model (:attr:`AdapterRuntime.uid`), the state after the last cached token
        of each adapter, shape (B, N); new dicts, the tensors themselves are not copied.
        Empty when the cache holds no adapter states.

    Examples
    --------
    >>> get_adapter_states(None)
    {}
    """
    return {k: dict(r.states) for k, r in getattr(cache, _STATES_ATTR, {}).items()}


def _seq_length(cache: Any) -> int:
    if cache is None:
        return 0
    if not hasattr(cache, "get_seq_length"):
        raise AdapterError(
            f"stateful adapters need a transformers `Cache` (with get_seq_length); got "
            f"{type(cache).__name__}"
        )
    return int(cache.get_seq_length())


def _apply_to_states(cache: Any, fn: Callable[[torch.Tensor], torch.Tensor]) -> None:
    for record in getattr(cache, _STATES_ATTR, {}).values():
        record.apply(fn)


def _reorder_cache(self, beam_idx: torch.Tensor) -> None:
    type(self).reorder_cache(self, beam_idx)
    _apply_to_states(self, lambda t: t.index_select(0, beam_idx.to(t.device)))


def _batch_select_indices(self, indices: torch.Tensor) -> None:
    type(self).batch_select_indices(self, indices)
    _apply_to_states(self, lambda t: t[indices.to(t.device)])


def _batch_repeat_interleave(self, repeats: int) -> None:
    type(self).batch_repeat_interleave(self, repeats)
    _apply_to_states(self, lambda t: t.repeat_interleave(repeats, dim=0))


_BATCH_OPS = {
    "reorder_cache": _reorder_cache,
    "batch_select_indices": _batch_select_indices,
    "batch_repeat_interleave": _batch_repeat_interleave,
}


def _store_on_cache(cache: Any, uid: str, record: _StateRecord) -> None:
    if not getattr(cache, _WRAPPED_ATTR, False):
        # Bound to this instance; deepcopy re-binds them to the copy (and copies the states).
        for name, fn in _BATCH_OPS.items():
            if callable(getattr(type(cache), name, None)):
                setattr(cache, name, functools.partial(fn, cache))
        setattr(cache, _WRAPPED_ATTR, True)
    records = getattr(cache, _STATES_ATTR, None)
    if records is None:
        records = {}
        setattr(cache, _STATES_ATTR, records)
    records[uid] = record


def _output_cache(output: Any) -> Any:
    if isinstance(output, dict):  # ModelOutput is an OrderedDict of its non-None fields:
        # read there (dict.get: no copy of the items as ModelOutput.__getitem__ makes, and no
        # renaming of `past_key_values`, whose deprecation warning transformers 5.x logs)
        for key in _CACHE_KWARGS:
            value = dict.get(output, key)
            if value is not None:
                return value
        return None
    if hasattr(output, "keys"):  # another mapping: only the names it holds
        keys = set(output.keys())
        for key in _CACHE_KWARGS:
            if key in keys and output[key] is not None:
                return output[key]
        return None
    if isinstance(output, tuple):
        for item in output:
            if hasattr(item, "get_seq_length") and hasattr(item, "reorder_cache"):
                return item
    return None


class _Calls(threading.local):
    """The model calls under way in one thread: their contexts, innermost last (None for a
    call inside :func:`adapters.disable_adapter`), and the fast decode step of the innermost.

    Per thread, so that several threads may run one adapted model at once (a server calling
    ``generate`` from a thread pool), as they may run the base model; ``disabled`` stays one
    flag per model, as in PEFT, so a ``with disable_adapter(model)`` block also covers a
    ``generate`` it starts in another thread (a streamer's).
    """

    def __init__(self) -> None:
        self.stack: list[_Context | None] = []
        self.plan: _Plan | None = None


class AdapterRuntime:
    """Per-model glue between a model call and its adapters (created by :func:`inject`).

    Parameters
    ----------
    config : HRMConfig
        The configuration the model was adapted with.

    Attributes
    ----------
    config : HRMConfig
    uid : str
        Key of this model's states on a shared cache.
    saved_requires_grad : list of (nn.Parameter, bool)
        Flags before injection, restored by :func:`adapters.remove`.
    calls : threading.local
        This thread's model calls under way (``calls.stack``) and the fast decode step of the
        innermost one (``calls.plan``).
    """

    def __init__(self, config: Any) -> None:
        self.config = config
        self.uid = uuid.uuid4().hex
        self.saved_requires_grad: list[tuple[nn.Parameter, bool]] = []
        self._handles: list[Any] = []
        self._positional: list[str] = []
        self.calls = _Calls()  # per thread: the calls under way and the current fast step
        self.disabled = False  # set by adapters.disable_adapter: no branch, no state
        self.adapted: dict[str, nn.Module] = {}  # name -> AdaptedMLP, set by inject

    def __getstate__(self) -> dict:
        # a threading.local cannot be pickled or deep-copied; no call is under way in a copy
        state = dict(self.__dict__)
        del state["calls"]
        return state

    def __setstate__(self, state: dict) -> None:
        self.__dict__.update(state)
        self.calls = _Calls()

    # --- hooks -------------------------------------------------------------------------
    def attach(self, model: nn.Module) -> None:
        """Register the forward pre-hook and forward hook on the top-level ``model``.

        Parameters
        ----------
        model : nn.Module
            The top-level model whose calls set the context (cache, attention mask) that
            :meth:`branch` reads; its ``forward`` signature maps positional arguments to names.
        """
        try:
            params = inspect.signature(model.forward).parameters.values()
            self._positional = [p.name for p in params if p.kind in (
                inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD)]
        except (TypeError, ValueError):
            self._positional = []
        self._handles = [
            model.register_forward_pre_hook(self._pre_hook, with_kwargs=True),
            model.register_forward_hook(self._post_hook, with_kwargs=True, always_call=True),
        ]

    def detach(self) -> None:
        """Remove the hooks."""
        for handle in self._handles:
            handle.remove()
        self._handles = []
        self.calls = _Calls()

    def batch_size(self) -> int | None:
        """Batch size B of the current top-level model call (None outside one).

        Returns
        -------
        int or None
        """
        stack = self.calls.stack
        ctx = stack[-1] if stack else None
        return None if ctx is None else ctx.batch

    def _pre_hook(self, module: nn.Module, args: tuple, kwargs: dict) -> None:
        calls = self.calls
        if self.disabled:
            calls.stack.append(None)  # the base model's call: no context, no state
            calls.plan = None
            return
        try:
            ctx = self._context(module, args, kwargs)
        except Exception:
            calls.stack.append(None)  # the always-called post-hook pops this placeholder
            calls.plan = None
            raise
        calls.stack.append(ctx)
        calls.plan = ctx.plan

    def _context(self, module: nn.Module, args: tuple, kwargs: dict) -> _Context:
        bound = dict(zip(self._positional, args, strict=False))
        bound.update(kwargs)
        cache = None
        for key in _CACHE_KWARGS:
            cache = bound.get(key)
            if cache is not None:
                break
        use_cache = bound.get("use_cache")
        if use_cache is None:
            use_cache = getattr(getattr(module, "config", None), "use_cache", False)
        # A training forward without a cache stays stateless even if the config says use_cache.
        stateful = cache is not None or (bool(use_cache) and not module.training)
        if stateful and cache is not None and torch.compiler.is_exporting():
            raise AdapterError(
                "torch.export of an adapted model with a KV cache (e.g. transformers' ExecuTorch "
                "recipe TorchExportableModuleForDecoderOnlyLM) is not supported: each adapter "
                "carries its SSM state from one call to the next outside the exported graph, "
                "so an exported decode step could not continue it. Export without a cache "
                "(use_cache=False: one call over the whole sequence), or adapters.remove(model)"
            )
        past = _seq_length(cache) if stateful else 0
        ids = bound.get("input_ids")
        ids = bound.get("inputs_embeds") if ids is None else ids
        batch = ids.shape[0] if isinstance(ids, torch.Tensor) and ids.dim() >= 2 else None
        mask = given = bound.get("attention_mask")
        four_d = isinstance(mask, dict) or (isinstance(mask, torch.Tensor) and mask.dim() == 4)
        if batch is not None and four_d:
            mask = token_mask(mask, past, ids.shape[1], batch)  # static cache: (B, 1, L, K)
        if not (isinstance(mask, torch.Tensor) and mask.dim() == 2):
            mask = None  # other masks: no padding information to use
        record = None
        if stateful and past > 0:
            record = getattr(cache, _STATES_ATTR, {}).get(self.uid)
            if record is None:
                raise AdapterError(
                    f"the KV cache already holds {past} tokens but no adapter state; run the "
                    "prompt through the adapted model (not the base model) to fill the cache"
                )
            record.check(past)
        ctx = _Context(stateful=stateful, past=past, cache=cache, record=record, mask=mask,
                       batch=batch, weights=None if record is None else record.weights)
        if batch is not None and not stateful and given is None:  # padding-free: position_ids
            ctx.segments = packed_starts(bound.get("position_ids"), batch, ids.shape[1])
        elif batch is not None and four_d and past == 0:  # packed by a block-diagonal mask
            ctx.segments = mask_starts(given, ids.shape[1], batch)
            if ctx.segments is not None:  # (the mask keeps them apart with a cache too; no
                ctx.stateful = False  # state is stored: a packed row is no prefix to continue)
        if record is not None and batch is not None and ids.shape[1] == 1:
            ctx.plan = self._plan(ctx)
        return ctx

    def _plan(self, ctx: _Context) -> _Plan | None:
        """The fast path of a one-token continuation, or None where the general path runs
        (autograd, autocast, a padded token on CPU, adapters on several devices)."""
        if torch.is_grad_enabled():
            return None
        weights = ctx.weights
        if weights is None:  # the adapters' weights are read once per cache (one generation)
            weights = ctx.weights = _DecodeWeights.build(self.adapted)
            if weights is None:
                return None
        if autocast_on(weights.device_type):
            return None
        keep = None
        if ctx.mask is not None:
            if ctx.mask.shape[0] != ctx.batch:
                return None  # the general path says what is wrong
            mask = ctx.mask
            if mask.is_cpu and weights.is_cpu and not torch.compiler.is_compiling():
                # the newest column as a list (no device sync on CPU; any dtype): in place
                # ~16 us per token, where its numpy view cost ~40 us and torch's reduction ~57
                if not all(mask[:, -1].tolist()):
                    return None  # the newest token is padded
            else:
                keep = (mask[:, -1:] != 0).to(weights.device, weights.dtype).view(-1, 1, 1)
        prev = ctx.record.stack_at(ctx.past)
        if prev is None or prev.weights is not weights:
            prev = _Stack.gather(weights, ctx.record.states_at(ctx.past), ctx.batch)
        if prev is None or prev.batch != ctx.batch:
            return None
        start = ctx.record._start
        return _Plan(weights, prev, keep, busy=(ctx.record.stack, start)
                     if isinstance(start, _Stack) else (ctx.record.stack,))

    def _post_hook(self, module: nn.Module, args: tuple, *rest: Any) -> None:
        calls = self.calls
        stack = calls.stack
        ctx = stack.pop() if stack else None
        top = stack[-1] if stack else None
        calls.plan = None if top is None else top.plan
        if ctx is None or len(rest) != 2 or not ctx.stateful:
            return None  # (len(rest) != 2: called after an exception in forward)
        plan = ctx.plan
        if plan is not None and not any(plan.ran):
            plan = None
        if plan is None and not ctx.new_states:
            return None
        cache = _output_cache(rest[1])
        cache = ctx.cache if cache is None else cache
        if cache is None:
            return None
        seen = _seq_length(cache)
        if plan is not None:  # one token; adapters that took the general path, if any, too
            if seen != ctx.past + 1:
                return None  # the cache did not take this chunk: keep the states that match it
            if all(plan.ran) and not ctx.new_states:
                record = _StateRecord(seen, stack=plan.stack, chunk_start=seen - 1,
                                      start=plan.prev, weights=ctx.weights)
            else:
                fast = plan.stack.states()
                states = {k: fast[k] for k, ran in zip(plan.weights.names, plan.ran, strict=True)
                          if ran}
                states.update(ctx.new_states)
                record = _StateRecord(seen, states=states, chunk_start=seen - 1,
                                      start=plan.prev.states(), weights=ctx.weights)
            _store_on_cache(cache, self.uid, record)
            return None
        if seen != ctx.past + ctx.length:
            return None  # the cache did not take this chunk: keep the states that match it
        kept = next(iter(ctx.history.values())).shape[1]
        weights = ctx.weights
        if weights is None and ctx.decode and ctx.decode.keys() >= self.adapted.keys():
            weights = _DecodeWeights.build(self.adapted, ctx.decode)  # no second reading
        _store_on_cache(cache, self.uid, _StateRecord(
            seen, states=ctx.new_states, chunk_start=seen - kept,
            start=ctx.start_states, history=ctx.history, weights=weights,
        ))
        return None

    # --- the branch ----------------------------------------------------------------------
    def branch(self, adapted: nn.Module, u: torch.Tensor) -> torch.Tensor:
        """Adapter output (B, L, H) for stream ``u`` (B, L, H) inside the current model call.

        Outside a model call (a block called directly) the adapter runs from the zero state.

        Parameters
        ----------
        adapted : AdaptedMLP
            The handle calling its branch (its ``adapter`` and ``adapter_name`` are used).
        u : torch.Tensor, shape (B, L, H)
            The stream, in the adapter's dtype.

        Returns
        -------
        torch.Tensor, shape (B, L, H)
            The adapter output; padded positions (2-D attention mask) feed zeros to the state,
            and with a cache the scan starts from the state stored for the cached prefix.

        Raises
        ------
        AdapterShapeError
            The attention mask does not cover ``u``, or the stored state's batch differs.
        AdapterError
            The cache holds tokens but no stored state for this adapter.
        """
        stack = self.calls.stack
        ctx = stack[-1] if stack else None
        if ctx is None:
            return adapted.adapter(u)
        batch, length = u.shape[0], u.shape[1]
        if ctx.mask is not None:
            if ctx.mask.shape[0] != batch or ctx.mask.shape[1] < length:
                raise AdapterShapeError(
                    f"`attention_mask` of shape {tuple(ctx.mask.shape)} does not cover the "
                    f"adapter stream of shape {tuple(u.shape)} at {adapted.adapter_name!r}"
                )
            if length not in ctx.drop:  # once per call and length, shared by all adapters
                ctx.drop[length] = _padded(ctx.mask[:, -length:, None], u.device)
            drop = ctx.drop[length]
            if drop is not None:
                u = u.masked_fill(drop, 0.0)  # (B, L, H); padded positions feed a zero stream
        if not ctx.stateful:
            if ctx.segments is not None and ctx.segments.shape == u.shape[:2]:
                return adapted.adapter(u, starts=ctx.segments)  # a padding-free batch
            return adapted.adapter(u)
        key = adapted.adapter_name
        s0 = None
        initial = ctx.initial()
        if initial is not None:
            s0 = initial.get(key)
            if s0 is None:
                raise AdapterError(f"no stored SSM state for adapter {key!r} on this cache")
            if s0.shape[0] != batch:
                raise AdapterShapeError(
                    f"stored SSM state of {key!r} has batch {s0.shape[0]} but the input has "
                    f"batch {batch}; reorder/select the cache with its own methods"
                )
        ctx.length = length
        adapter = adapted.adapter
        k = min(length, HISTORY_MAX_LEN)  # the last k tokens keep per-token states (crop)
        head = length - k
        ys, s = [], s0
        if head > 0:
            y_head, s = adapter(u[:, :head], s, return_state=True)  # parallel scan
            ys.append(y_head)
        start = s if s is not None else adapter.initial_state(batch, u.device)
        if k == 1:
            y_t, s = adapter.step(u[:, head], s)  # one-token decode step
            ys.append(y_t[:, None])
            history = _detached(s).unsqueeze(1)  # (B, 1, N)
        else:  # parallel scan, (B, k, N); one discretisation gives the decode weights too
            proj = None
            if not torch.is_grad_enabled():
                if ctx.projections is None:  # every adapter's, in one set of kernels
                    ctx.projections = _projections(
                        {n: getattr(a.adapter, "ssm", None) for n, a in self.adapted.items()})
                proj = ctx.projections.get(key)
            y, states, weights = adapter.scan_decoding(u[:, head:] if head else u, s, proj)
            if not torch.is_grad_enabled():
                ctx.decode[key] = weights  # the decoding steps' (read once per cache)
            ys.append(y)
            s = states[:, -1]
            history = _detached(states)  # (B, k, N); views made only for a crop
        ctx.new_states[key] = _detached(s)
        ctx.start_states[key] = _detached(start)
        ctx.history[key] = history
        return ys[0] if len(ys) == 1 else torch.cat(ys, dim=1)
