"""The fast one-token decode step of cached generation (used by :mod:`adapters.generation`).

The discretised weights of all adapters of a model, read once per cache
(:class:`DecodeWeights`); per batch size, the poles repeated per row, the weights viewed for
``baddbmm`` and a ring of preallocated state buffers (:class:`StepBatch`); the states of all
adapters after a step in one flat buffer per mode group (:class:`StateStack`); and one decode step
of all adapters (:class:`DecodePlan`): every pole applied by one multiply, then per layer
``s += x B̄ᵀ`` and ``h += s (gate C)ᵀ``, both in place: ``baddbmm_`` on (B, 1, .) views, or for
one row ``addmv_`` on flat views (fewer and cheaper calls, the same bits where ``baddbmm_``
calls the BLAS: :data:`_BLAS_MIN`).
"""

from __future__ import annotations

import torch
from torch import nn

_RING = 3  # state buffers per batch size: the step's, the record's, the record's start
#: torch's ``bmm``/``baddbmm`` compute a product of fewer multiply-adds than this with a loop of
#: their own and larger ones with the BLAS, whose matrix-vector product (``addmv``, always the
#: BLAS) gives the same bits as its matrix product of one row (every size tested); so the one-row
#: step uses ``addmv`` (fewer and cheaper calls) only where ``baddbmm`` would have used the BLAS
_BLAS_MIN = 400


class DecodeWeights:
    """Decode weights of all adapters of one model, read once per cache.

    Layout of the state buffers: all real-mode states in one flat buffer, all complex-mode
    states in another, adapter ``i``'s block of ``B * n_i`` entries contiguous and row-major
    ``(B, n_i)``, so that ``ā ⊙ s`` for every adapter is one multiply per group.
    """

    def __init__(self, names: list[str], weights: list[tuple]) -> None:
        self.names = tuple(names)
        self.index = {name: i for i, name in enumerate(names)}
        self.per_adapter = list(weights)  # HRMAdapter.decode_weights() of each
        self.groups = []  # per adapter: ((W_in, W_out) or None for real, same for complex)
        self.n_real, self.n_cplx = [], []
        poles_r, poles_c = [], []
        for real, cplx in weights:
            self.n_real.append(0 if real is None else real[0].shape[0])
            self.n_cplx.append(0 if cplx is None else cplx[0].shape[0])
            if real is not None:
                poles_r.append(real[0])
            if cplx is not None:
                poles_c.append(cplx[0])
            self.groups.append((None if real is None else real[1:],
                                None if cplx is None else cplx[1:]))
        self.poles_r, self.poles_c = poles_r, poles_c
        first = next(t for g in self.groups for pair in g if pair is not None for t in pair)
        self.dtype, self.device = first.dtype, first.device
        # read once: `device.type` makes a new string per call (~20 us per token in place)
        self.device_type, self.is_cpu = self.device.type, first.is_cpu
        self._batches: dict[int, tuple] = {}

    @classmethod
    def build(cls, adapted: dict[str, nn.Module],
              known: dict[str, tuple] | None = None) -> DecodeWeights | None:
        """From the handles' current adapters (or the weights in ``known``, read already for
        this cache); None unless all share one device and dtype."""
        if not adapted:
            return None
        known = known or {}
        names = list(adapted)
        weights = [known[n] if n in known else adapted[n].adapter.decode_weights()
                   for n in names]
        kinds = {(t.device, t.dtype) for real, cplx in weights for g in (real, cplx)
                 if g is not None for t in g[1:]}
        return cls(names, weights) if len(kinds) == 1 else None

    def for_batch(self, batch: int) -> StepBatch:
        """Poles, weights and a ring of state buffers for ``batch`` rows (made once)."""
        got = self._batches.get(batch)
        if got is None:
            got = self._batches[batch] = StepBatch(self, batch)
        return got


class StepBatch:
    """What a decode step of ``batch`` rows needs: the poles repeated per row, the weights
    viewed for ``baddbmm``, and :data:`_RING` preallocated state buffers with their per-adapter
    views, so that a step allocates nothing and makes no views."""

    def __init__(self, weights: DecodeWeights, batch: int) -> None:
        r, c = weights.poles_r, weights.poles_c
        self.a_r = torch.cat([a.repeat(batch) for a in r]) if r else None  # (B * R,)
        self.a_c = torch.cat([a.repeat(batch) for a in c]) if c else None  # (B * K,)
        self.expanded = [tuple(None if g is None else tuple(W.expand(batch, *W.shape) for W in g)
                               for g in pair) for pair in weights.groups]
        self.weights, self.batch = weights, batch
        self.ring = []
        for _ in range(_RING):
            real = None if self.a_r is None else torch.empty_like(self.a_r)
            cplx = None if self.a_c is None else torch.empty_like(self.a_c)
            stack = StateStack(weights, batch, real, cplx, ring=True)
            self.ring.append((stack, self.slots(stack), self.vector_slots(stack)))

    def slots(self, stack: StateStack) -> dict[str, tuple]:
        """Per adapter name ``(index, stream shape (B, 1, H), flattened (B, H), real block
        (B, 1, n), its W_in and W_out expanded, complex block as (Re, Im) pairs (B, 1, 2n), its
        W_in and W_out)``, views of ``stack``'s buffers (None for an empty group): what
        :meth:`DecodePlan.step` reads, in one tuple."""
        w, B = self.weights, self.batch
        views_r = iter(()) if stack.real is None else iter(
            torch.split(stack.real, [B * n for n in w.n_real if n]))
        views_c = iter(()) if stack.cplx is None else iter(torch.split(
            torch.view_as_real(stack.cplx).view(-1), [2 * B * n for n in w.n_cplx if n]))
        out = {}
        for i, (name, (g_r, g_c), (e_r, e_c)) in enumerate(
                zip(w.names, w.groups, self.expanded, strict=True)):
            v_r = None if g_r is None else next(views_r).view(B, 1, -1)  # (B, 1, n_real)
            v_c = None if g_c is None else next(views_c).view(B, 1, -1)  # (B, 1, 2 n_cplx)
            H = (e_r or e_c)[0].shape[1]  # W_in expanded: (B, H, n)
            out[name] = (i, torch.Size((B, 1, H)), torch.Size((B, H)),
                         v_r, *(e_r or (None, None)), v_c, *(e_c or (None, None)))
        return out

    def vector_slots(self, stack: StateStack) -> dict[str, tuple]:
        """For one row (``batch == 1``), per adapter name whose products are large enough
        (:data:`_BLAS_MIN`) ``(index, dtype, real block (n,), its W_in (n, H) and W_out (H, n),
        complex block as (Re, Im) pairs (2n,), its W_in (2n, H) and W_out (H, 2n))``, views of
        ``stack``'s buffers and the weights themselves (None for an empty group): what
        :meth:`DecodePlan.step` reads for a one-token stream of one row, in one tuple. Empty
        for more rows."""
        w = self.weights
        if self.batch != 1:
            return {}
        views_r = iter(()) if stack.real is None else iter(
            torch.split(stack.real, [n for n in w.n_real if n]))
        views_c = iter(()) if stack.cplx is None else iter(torch.split(
            torch.view_as_real(stack.cplx).view(-1), [2 * n for n in w.n_cplx if n]))
        out = {}
        for i, (name, groups) in enumerate(zip(w.names, w.groups, strict=True)):
            entry = [i, w.dtype]
            large = True
            for g, views in zip(groups, (views_r, views_c), strict=True):
                if g is None:
                    entry += [None, None, None]
                    continue
                W_in, W_out = g  # (H, n), (n, H): transposed views of the projections
                large = large and W_in.shape[0] * W_in.shape[1] >= _BLAS_MIN
                entry += [next(views), W_in.t(), W_out.t()]  # (n,), (n, H), (H, n)
            if large:
                out[name] = tuple(entry)
        return out

    def take(self, busy: tuple) -> tuple[StateStack, dict, dict] | None:
        """A ring buffer that none of ``busy`` (stacks still referenced) is, with its slots
        (:meth:`slots`, :meth:`vector_slots`); None if the ring cannot be written here (made
        under inference mode, now outside it)."""
        for stack, slots, vector in self.ring:
            if stack not in busy:  # (identity: a StateStack has no __eq__)
                t = stack.real if stack.real is not None else stack.cplx
                if (not torch.compiler.is_compiling() and t.is_inference()
                        and not torch.is_inference_mode_enabled()):
                    return None
                return stack, slots, vector
        return None


class StateStack:
    """The states of all adapters after one decode step, in :class:`DecodeWeights`' buffers.

    ``real`` (B * total real modes,) and ``cplx`` (B * total complex modes,) complex; None for
    an empty group.
    """

    def __init__(self, weights: DecodeWeights, batch: int, real, cplx, *,
                 ring: bool = False) -> None:
        self.weights, self.batch, self.real, self.cplx = weights, batch, real, cplx
        self.ring = ring  # a buffer of the ring, rewritten a few steps later

    def blocks(self) -> tuple[list, list]:
        """Per adapter, views of its real block (B, n_real) and complex block (B, n_complex)."""
        w, B = self.weights, self.batch
        real = iter(()) if self.real is None else iter(
            torch.split(self.real, [B * n for n in w.n_real if n]))
        cplx = iter(()) if self.cplx is None else iter(
            torch.split(self.cplx, [B * n for n in w.n_cplx if n]))
        r = [next(real).view(B, n) if n else None for n in w.n_real]
        c = [next(cplx).view(B, n) if n else None for n in w.n_cplx]
        return r, c

    def states(self, *, keep: bool = True) -> dict[str, torch.Tensor]:
        """``{name: (B, N)}`` in each adapter's state layout (real modes first).

        With ``keep``, tensors that stay valid when a ring buffer is rewritten (copies);
        otherwise views valid for the current call.
        """
        r, c = self.blocks()
        out = {}
        for name, s_r, s_c in zip(self.weights.names, r, c, strict=True):
            if s_r is not None and s_c is not None:
                out[name] = torch.cat([s_r.to(s_c.dtype), s_c], dim=-1)
            else:
                s_one = s_r if s_c is None else s_c
                out[name] = s_one.clone() if keep and self.ring else s_one
        return out

    @classmethod
    def gather(cls, weights: DecodeWeights, states: dict[str, torch.Tensor],
               batch: int) -> StateStack | None:
        """The buffers of per-adapter states; None if one is missing or does not fit."""
        parts_r, parts_c = [], []
        for name, n_r, n_c in zip(weights.names, weights.n_real, weights.n_cplx, strict=True):
            s = states.get(name)
            if s is None or s.shape != (batch, n_r + n_c) or s.device != weights.device:
                return None
            if n_r:
                parts_r.append(s[:, :n_r].real.reshape(-1))
            if n_c:
                parts_c.append(s[:, n_r:].reshape(-1))
        real = torch.cat(parts_r).to(weights.dtype) if parts_r else None
        cplx = torch.cat(parts_c).to(_complex_of(weights.dtype)) if parts_c else None
        return cls(weights, batch, real, cplx)


class DecodePlan:
    """One decode step of all adapters: every pole applied at once, then layer by layer
    ``s += x B̄ᵀ`` in place and ``h + s (gate C)ᵀ``."""

    # slots: a compact object; step() runs once per layer and token, after the MLP has
    # streamed its weights through the caches, where every object it touches is a cache miss
    __slots__ = ("weights", "prev", "keep", "batch", "stack", "slots", "vector", "ran", "dtype")

    def __init__(self, weights: DecodeWeights, prev: StateStack, keep: torch.Tensor | None,
                 busy: tuple = ()) -> None:
        B = prev.batch
        batch = weights.for_batch(B)
        taken = batch.take((prev, *busy))
        if taken is None:  # fresh buffers
            real = None if prev.real is None else torch.empty_like(prev.real)
            cplx = None if prev.cplx is None else torch.empty_like(prev.cplx)
            stack = StateStack(weights, B, real, cplx)
            slots, vector = batch.slots(stack), batch.vector_slots(stack)
        else:
            stack, slots, vector = taken
        if prev.real is not None:
            torch.mul(batch.a_r, prev.real, out=stack.real)  # (B * R,): ā ⊙ s, all adapters
        if prev.cplx is not None:
            torch.mul(batch.a_c, prev.cplx, out=stack.cplx)  # (B * K,) complex
        self.weights, self.prev, self.keep, self.batch = weights, prev, keep, B
        self.stack, self.slots, self.dtype = stack, slots, weights.dtype
        # one row and every token real: the matrix-vector step (a mask to apply: the general)
        self.vector = vector if keep is None else {}
        self.ran = [False] * len(weights.names)

    def step(self, name: str, u: torch.Tensor, h: torch.Tensor) -> torch.Tensor | None:
        """``h`` plus adapter ``name``'s branch for stream ``u``; None if the shapes do not fit.

        ``u``, ``h``: (B, 1, H), or (B, H) for a flattened one-token stream.

        One row (:meth:`StepBatch.vector_slots`): ``s += B̄ x`` and ``h += (gate C) s`` as
        matrix-vector products on flat views of ``u`` and ``h``, whose sizes the products
        check (before writing anything: a stream of another width raises at the first, and
        ``h`` has the stream's size, so the readouts cannot fail once the updates ran); any
        other case (more rows, another dtype, a non-contiguous ``h``, a stream that is not
        one position) goes to :meth:`_batched`, which checks the shapes itself.
        """
        slot = self.vector.get(name)
        if slot is not None:
            i, dtype, v_r, in_r, out_r, v_c, in_c, out_c = slot
            if u.dtype is dtype and h.dtype is dtype and h.is_contiguous():
                try:
                    x, out = u.view(-1), h.view(-1)  # (H,): the target's fresh output, in place
                    if x.shape == out.shape:  # every update reads x before a readout writes h
                        if v_r is not None:
                            v_r.addmv_(in_r, x)  # (n,): s = ā ⊙ s_prev + B̄ x
                        if v_c is not None:
                            v_c.addmv_(in_c, x)  # (2n,): (Re, Im) pairs
                        if v_r is not None:
                            out.addmv_(out_r, v_r)  # h + (gate C) s               (H,)
                        if v_c is not None:
                            out.addmv_(out_c, v_c)
                        self.ran[i] = True
                        return h
                except RuntimeError:  # no flat view, or not width H: raised before any write
                    return self._batched(name, u, h)
        return self._batched(name, u, h)

    def _batched(self, name: str, u: torch.Tensor, h: torch.Tensor) -> torch.Tensor | None:
        """:meth:`step` with ``baddbmm_`` on (B, 1, .) views, any batch."""
        slot = self.slots.get(name)
        if slot is None:
            return None
        i, one, flat_shape, v_r, in_r, out_r, v_c, in_c, out_c = slot
        # shapes compared with the slot's (B, 1, H) and (B, H): fewer steps than unpacking
        shape = u.shape
        flat = False
        if shape == one:
            if h.shape != one:
                return None
            x, hh = u, h
        elif shape == flat_shape and h.shape == flat_shape:
            flat = True
            x, hh = u.unsqueeze(1), h.unsqueeze(1)  # (B, 1, H)
        else:
            return None
        dtype = self.dtype
        if x.dtype is not dtype:
            x = x.to(dtype)
        if self.keep is not None:
            x = x * self.keep  # (B, 1, 1): a padded token feeds a zero stream
        # s = ā ⊙ s_prev + x B̄ᵀ, in the buffer: (B, 1, n); complex states as (Re, Im) pairs
        if v_r is not None:
            v_r.baddbmm_(x, in_r)
        if v_c is not None:
            v_c.baddbmm_(x, in_c)
        low = hh.dtype is not dtype
        if low:
            out = hh.to(dtype)  # the sum is rounded once, to the target's dtype
        elif hh.is_contiguous():
            out = hh  # the target's fresh output, read by nothing else here: added in place
        else:
            out = hh.clone(memory_format=torch.contiguous_format)
        if v_r is not None:
            out.baddbmm_(v_r, out_r)  # h + s (gate C)ᵀ                           (B, 1, H)
        if v_c is not None:
            out.baddbmm_(v_c, out_c)
        self.ran[i] = True
        if low:
            out = out.to(h.dtype)
        return out.view(shape) if flat else out


def _complex_of(dtype: torch.dtype) -> torch.dtype:
    return torch.complex128 if dtype == torch.float64 else torch.complex64
