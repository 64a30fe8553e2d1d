r"""Calibration: stream real data through an adapted model and collect Gramian statistics.

Shapes: B batch, L length, H model width, N modes of a :class:`~adapters.DiagonalSSM`,
n the order of its real system ``ssm.as_lti()`` (``n_real + 2 n_complex``).

:func:`calibrate` runs batches through a model adapted by :func:`adapters.inject` and, for
every adapter, accumulates in float64 the statistics a data-driven Gramian needs:

* ``"data"`` -- the adapter's own state second moment, the input-weighted controllability
  Gramian of the paper's "empirical Hankel Gramians from the representation stream"

  .. math:: \hat P = \frac{1}{T} \sum_{t} x_t x_t^T ,

  with :math:`x_t` the state of the exported system ``ssm.as_lti()`` (real coordinates,
  ``x = M s`` for the module's own complex modal state ``s``, see Notes of
  :func:`calibrate`) driven by the stream the adapter reads;
* ``"input"`` -- the stream's second moment :math:`W = \frac1T \sum_t u_t u_t^T` (H, H);
* ``"both"``.

Only real tokens count: positions where ``attention_mask == 0`` feed a zero stream (as the
adapted model does) and are left out of every sum. Memory is constant in the number of
tokens (O(n^2) or O(H^2) per layer), the sums use the compensated, mergeable
:class:`lti.StateCovarianceAccumulator`, and under :mod:`torch.distributed` the per-rank
sums are all-reduced (float64 sums, int64 counts), so two ranks that split the data give
the statistics of one process that sees all of it.
"""

from __future__ import annotations

import copy
import inspect
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

import torch
from torch import nn

from adapters._masks import token_mask
from adapters._packing import restarted
from adapters._wrappers import unwrap_model
from adapters.exceptions import (
    AdapterConfigError,
    AdapterError,
    AdapterShapeError,
    CalibrationError,
)
from adapters.injection import find_adapters
from adapters.statistics import (
    CALIBRATION_GRAMIANS,
    CalibrationStats,
    LayerStats,
    adapter_fingerprint,
)

__all__ = ["calibrate"]


@dataclass
class _Probe:
    """Per-adapter calibration state while the hooks are installed."""

    ssm: nn.Module  # float64 copy of the adapter's DiagonalSSM
    stats: LayerStats


def _device_of(model: nn.Module) -> torch.device:
    for p in model.parameters():
        return p.device
    return torch.device("cpu")


def _accepts(model: nn.Module, name: str) -> bool:
    try:
        params = inspect.signature(model.forward).parameters
    except (TypeError, ValueError):
        return False
    return name in params


def _prepare_call(model, base, batch, device):
    """``(args, kwargs, mask)`` for one batch; mask (B, L_total) bool or None."""
    no_cache = {"use_cache": False} if _accepts(base, "use_cache") else {}
    if isinstance(batch, torch.Tensor):
        return (batch.to(device),), dict(no_cache), None
    if isinstance(batch, Mapping):
        kwargs = {k: (v.to(device) if isinstance(v, torch.Tensor) else v)
                  for k, v in batch.items() if k != "labels"}
        if "use_cache" not in kwargs and _accepts(base, "use_cache"):
            kwargs["use_cache"] = False  # no KV cache: one parallel scan per adapter
        mask = kwargs.get("attention_mask")
        ids = kwargs.get("input_ids", kwargs.get("inputs_embeds"))
        if (isinstance(mask, Mapping) or (isinstance(mask, torch.Tensor) and mask.dim() == 4)
                ) and isinstance(ids, torch.Tensor) and ids.dim() >= 2:
            # a custom 4-D mask (packing): its diagonal says which positions are real
            mask = token_mask(mask, 0, ids.shape[1], ids.shape[0])
        return (), kwargs, mask
    if isinstance(batch, (tuple, list)) and batch and isinstance(batch[0], torch.Tensor):
        mask = getattr(batch, "attention_mask", None)
        kwargs = dict(no_cache)  # no KV cache: one parallel scan per adapter
        if mask is not None:
            kwargs["attention_mask"] = mask.to(device)
        return (batch[0].to(device),), kwargs, kwargs.get("attention_mask")
    raise AdapterConfigError(
        "each batch must be a tensor of input ids, a mapping of model inputs (input_ids, "
        f"attention_mask, ...) or a tuple whose first item is input ids; got {type(batch).__name__}"
    )


def _make_hook(probe: _Probe, current: dict):
    def hook(module, args, kwargs):
        u = args[0] if args else kwargs.get("u")
        state = args[1] if len(args) > 1 else kwargs.get("state")
        if state is not None:
            raise AdapterError(
                f"adapter {probe.stats.name!r} was called with a carried state during "
                "calibration; calibrate without a KV cache"
            )
        if not isinstance(u, torch.Tensor) or u.dim() != 3:
            raise AdapterShapeError(
                f"adapter {probe.stats.name!r} got a stream that is not (B, L, H): "
                f"{type(u).__name__} {tuple(getattr(u, 'shape', ()))}"
            )
        with torch.no_grad():
            x = u.detach().to(torch.float64)  # (B, L, H)
            batch, length = x.shape[0], x.shape[1]
            mask = current.get("mask")
            if mask is not None:
                if mask.shape[0] != batch or mask.shape[1] < length:
                    raise AdapterShapeError(
                        f"`attention_mask` of shape {tuple(mask.shape)} does not cover the "
                        f"stream of shape {tuple(x.shape)} at {probe.stats.name!r}"
                    )
                keep = mask[:, -length:].to(x.device).bool()  # (B, L)
                x = x.masked_fill(~keep[..., None], 0.0)
            else:
                keep = torch.ones(batch, length, dtype=torch.bool, device=x.device)
            if not bool(torch.isfinite(x).all()):  # (padded positions are zero by now)
                rows = sorted({int(b) for b in (~torch.isfinite(x)).any(-1).nonzero()[:, 0]})
                raise CalibrationError(
                    f"the stream of adapter {probe.stats.name!r} holds NaN or inf at counted "
                    f"positions (batch {current.get('index')}, rows {rows}): the model's "
                    "activations overflowed or the inputs are not finite; calibrate on finite "
                    "data (or mask those positions out)")
            st = probe.stats
            if st.state is not None:
                s = probe.ssm.trajectory(x)  # (B, L, N)
                if kwargs.get("starts") is not None:  # a packed row: each sequence alone
                    s = restarted(probe.ssm, s, kwargs["starts"])
                s = probe.ssm.lti_states(s)  # (B, L, n), as_lti() coords
                v = s[keep]  # (T, n)
                st.accumulate("state", v.shape[0], v.sum(0).cpu().numpy(),
                              (v.T @ v).cpu().numpy())
            if st.inputs is not None:
                v = x[keep]  # (T, H)
                st.accumulate("inputs", v.shape[0], v.sum(0).cpu().numpy(),
                              (v.T @ v).cpu().numpy())
        return None

    return hook




def calibrate(
    model: nn.Module,
    batches: Iterable,
    *,
    gramian: str = "data",
    progress: bool = True,
    max_batches: int | None = None,
    sync: bool = True,
) -> CalibrationStats:
    r"""Run data through an adapted model and collect per-adapter Gramian statistics.

    Parameters
    ----------
    model : nn.Module
        A model adapted by :func:`adapters.inject` (possibly wrapped in
        ``DistributedDataParallel``, ``torch.compile``, ``DataParallel`` or a DeepSpeed
        engine). It is run in eval mode under ``torch.no_grad()``; the
        training flags are restored afterwards.
    batches : iterable
        Each item: a LongTensor of input ids (B, L); a mapping of model inputs
        (``input_ids``, ``attention_mask`` (B, L), ...; ``labels`` are dropped and
        ``use_cache=False`` is added when the model accepts it); or a tuple whose first item
        is the input ids (e.g. an ``(input_ids, labels)`` named tuple).
    gramian : {"data", "input", "both"}, optional
        ``"data"``: the adapter's state second moment (for
        ``reduce(gramian="data")``); ``"input"``: the stream's second moment (H, H) (for
        ``reduce(gramian="input")``); ``"both"``.
    progress : bool, optional
        Show a tqdm progress bar (rank 0 only).
    max_batches : int, optional
        Stop after this many batches (per rank).
    sync : bool, optional
        When a :mod:`torch.distributed` process group is initialised, all-reduce the
        statistics so that every rank holds the sums over all ranks (default True).

    Returns
    -------
    CalibrationStats
        Per adapter: token count, sums and sums of outer products (float64).

    Raises
    ------
    AdapterError
        ``model`` has no adapters, or no token was counted (over all ranks).
    AdapterConfigError
        Bad `gramian`, `max_batches` or batch type.
    CalibrationError
        A stream an adapter reads holds NaN or inf at a counted position (named with the
        batch index and rows; before, lti's accumulator refused ``state['sum']``).

    Notes
    -----
    For each adapter the stream ``u`` (B, L, H) it reads is captured by a forward pre-hook,
    padded positions are zeroed (as the adapted model's own forward does) and the float64
    states of its discrete system are computed with a parallel scan from the zero state at
    the start of every sequence:

    .. math:: s_t = \bar a \odot s_{t-1} + \bar B u_t .

    Complex modes are mapped to the real coordinates of ``ssm.as_lti()``
    (``x = \sqrt2 (\Re s, -\Im s)`` per conjugate pair), and only positions with
    ``attention_mask == 1`` are summed:

    .. math::

        \hat P = \frac{1}{T}\sum_{b,t:\ \mathrm{mask}_{bt}=1} x_{bt} x_{bt}^T, \qquad
        W = \frac{1}{T}\sum_{b,t:\ \mathrm{mask}_{bt}=1} u_{bt} u_{bt}^T .

    The raw second moment (not centred) is the input-weighted controllability Gramian
    (:mod:`lti.datadriven`). Each per-batch sum is formed in float64 on the model's device
    and added with compensated summation; data-parallel ranks all-reduce float64 sums and
    int64 counts, so sharded calibration equals single-process calibration up to float64
    rounding.
    """
    import torch.distributed as dist

    if gramian not in CALIBRATION_GRAMIANS:
        raise AdapterConfigError(
            f"`gramian` must be one of {CALIBRATION_GRAMIANS}; got {gramian!r}"
        )
    if max_batches is not None and (
        isinstance(max_batches, bool) or not isinstance(max_batches, int) or max_batches < 1
    ):
        raise AdapterConfigError(
            f"`max_batches` must be a positive int or None; got {max_batches!r}"
        )
    if isinstance(batches, (torch.Tensor, Mapping)) or not isinstance(batches, Iterable):
        # a tensor would be iterated row by row (1-D "batches"), a mapping key by key
        raise AdapterConfigError(
            "`batches` must be an iterable of batches (a list or a DataLoader); got "
            f"{type(batches).__name__}" + (" (pass [batch] for a single batch)"
                                           if isinstance(batches, (torch.Tensor, Mapping))
                                           else ""))
    base = unwrap_model(model)
    adapted = find_adapters(base)
    if not adapted:
        raise AdapterError("`model` has no HRM adapters; call `adapters.inject` first")
    distributed = dist.is_available() and dist.is_initialized()
    rank = dist.get_rank() if distributed else 0

    probes: dict[str, _Probe] = {}
    for name, wrapper in adapted.items():
        adapter = wrapper.adapter
        ssm = adapter.ssm
        rounded = (adapter_fingerprint(adapter, torch.float32)
                   if adapter.gate.dtype == torch.float64 else None)  # for a later .float()
        stats = LayerStats(name, ssm.d_model, ssm.n_real, ssm.n_complex,
                           adapter_fingerprint(adapter), gramian, rounded)
        # the states are computed by the module itself (DiagonalSSM.trajectory), in float64,
        # and mapped to the coordinates of ssm.as_lti() by DiagonalSSM.lti_states
        probes[name] = _Probe(copy.deepcopy(ssm).to(torch.float64), stats)

    current: dict = {}
    handles = [adapted[name].adapter.register_forward_pre_hook(_make_hook(p, current),
                                                                 with_kwargs=True)
               for name, p in probes.items()]
    flags = [(m, m.training) for m in model.modules()]
    device = _device_of(base)
    total = None
    if hasattr(batches, "__len__"):
        total = len(batches) if max_batches is None else min(len(batches), max_batches)
    elif max_batches is not None:
        total = max_batches
    bar = None
    try:
        from tqdm.auto import tqdm

        model.eval()
        seen = 0
        with torch.no_grad():
            bar = tqdm(batches, total=total, desc="calibrate", unit="batch",
                       disable=not progress or rank != 0)
            for batch in bar:
                if max_batches is not None and seen >= max_batches:
                    break
                args, kwargs, mask = _prepare_call(model, base, batch, device)
                current["mask"] = None if mask is None else mask.bool()
                current["index"] = seen
                model(*args, **kwargs)
                seen += 1
    finally:
        if bar is not None:
            bar.close()  # also on an error: no progress bar left registered with tqdm
        for handle in handles:
            handle.remove()
        for module, flag in flags:
            module.train(flag)
    out = CalibrationStats({name: p.stats for name, p in probes.items()}, gramian)
    if distributed and sync:
        out.all_reduce()
    if out.tokens == 0:
        raise AdapterError("calibration counted no token (empty `batches` or all positions "
                           "masked out)")
    return out
