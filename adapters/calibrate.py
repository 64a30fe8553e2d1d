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
import hashlib
import inspect
import json
import math
import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
from torch import nn

from adapters.exceptions import AdapterConfigError, AdapterError, AdapterShapeError
from adapters.injection import find_adapters
from adapters.scan import chunked_scan

__all__ = ["CalibrationStats", "LayerStats", "calibrate", "adapter_fingerprint"]

_GRAMIANS = ("data", "input", "both")
_FORMAT = "hrm-calibration"
_FORMAT_VERSION = 1


# --------------------------------------------------------------------------- helpers


def adapter_fingerprint(adapter: nn.Module) -> str:
    """SHA-256 of an adapter's SSM tensors and structure.

    Calibration statistics describe the states of one particular system; :func:`adapters.reduce`
    compares this fingerprint with the one stored at calibration time and refuses stale
    statistics.

    Parameters
    ----------
    adapter : HRMAdapter
        The adapter (its ``ssm`` is hashed; the gate is not part of the states).

    Returns
    -------
    str
        Hex digest.
    """
    ssm = adapter.ssm
    h = hashlib.sha256()
    h.update(f"{ssm.d_model}/{ssm.n_real}/{ssm.n_complex}".encode())
    for key, value in sorted(ssm.state_dict().items()):
        t = value.detach().to("cpu").contiguous()
        h.update(f"{key}:{t.dtype}:{tuple(t.shape)}".encode())
        h.update(t.view(torch.uint8).numpy().tobytes() if t.numel() else b"")
    return h.hexdigest()


def _real_coordinates(ssm: nn.Module):
    """Float64 ``(a, B̄)`` of the module and the map ``M`` from its real-stacked state
    ``[s_real, Re s_cplx, Im s_cplx]`` (n,) to the state of ``ssm.as_lti()`` (n,).

    The layout mirrors :meth:`DiagonalSSM.as_lti` and is verified against it
    (``M A_aug = A M``, ``M B_aug = B``, ``C_aug = C M``), so a change there cannot silently
    give statistics in the wrong coordinates.
    """
    wide = copy.deepcopy(ssm).to(torch.float64)
    with torch.no_grad():
        a, b, c = (t.detach().cpu() for t in wide.discrete())  # (N,), (N, H), (H, N)
    a_np = a.resolve_conj().numpy().astype(np.complex128)
    b_np = b.resolve_conj().numpy().astype(np.complex128)
    c_np = c.resolve_conj().numpy().astype(np.complex128)
    nr, nc = ssm.n_real, ssm.n_complex
    n = nr + 2 * nc
    ac = a_np[nr:]
    flat = np.abs(ac.imag) <= 1e-12 * np.maximum(1.0, np.abs(ac))
    f, p = np.flatnonzero(flat), np.flatnonzero(~flat)
    m_map = np.zeros((n, n))  # lti state = m_map @ [s_r, Re s_c, Im s_c]
    m_map[np.arange(nr), np.arange(nr)] = 1.0
    row = nr
    for idx in f:  # Re parts of real-pole complex modes, then their Im parts
        m_map[row, nr + idx] = 1.0
        row += 1
    for idx in f:
        m_map[row, nr + nc + idx] = 1.0
        row += 1
    s2 = math.sqrt(2.0)
    for idx in p:  # each pair: xi = sqrt2 Re s, eta = -sqrt2 Im s
        m_map[row, nr + idx] = s2
        m_map[row + 1, nr + nc + idx] = -s2
        row += 2
    # real-stacked system of the module itself
    a_aug = np.zeros((n, n))
    a_aug[:nr, :nr] = np.diag(a_np[:nr].real)
    ar, ai = ac.real, ac.imag
    a_aug[nr:nr + nc, nr:nr + nc] = np.diag(ar)
    a_aug[nr:nr + nc, nr + nc:] = -np.diag(ai)
    a_aug[nr + nc:, nr:nr + nc] = np.diag(ai)
    a_aug[nr + nc:, nr + nc:] = np.diag(ar)
    b_aug = np.vstack([b_np[:nr].real, b_np[nr:].real, b_np[nr:].imag])  # (n, H)
    c_aug = np.hstack([c_np[:, :nr].real, 2 * c_np[:, nr:].real, -2 * c_np[:, nr:].imag])
    exported = ssm.as_lti()
    a_l, b_l, c_l = (np.asarray(x) for x in (exported.A, exported.B, exported.C))
    scale_b = max(float(np.abs(b_l).max(initial=0.0)), 1e-300)
    scale_c = max(float(np.abs(c_l).max(initial=0.0)), 1e-300)
    if not (
        np.abs(a_l @ m_map - m_map @ a_aug).max(initial=0.0) <= 1e-12
        and np.abs(m_map @ b_aug - b_l).max(initial=0.0) <= 1e-12 * scale_b
        and np.abs(c_aug - c_l @ m_map).max(initial=0.0) <= 1e-12 * scale_c
    ):
        raise AdapterError(
            "calibration's state layout disagrees with DiagonalSSM.as_lti() for an SSM with "
            f"n_real={nr}, n_complex={nc}; the statistics would be in the wrong coordinates"
        )
    return a, b, m_map


@dataclass
class _Probe:
    """Per-adapter calibration state while the hooks are installed."""

    a: torch.Tensor  # (N,) float64 / complex128
    b: torch.Tensor  # (N, H)
    m_map: torch.Tensor  # (n, n) float64
    n_real: int
    stats: LayerStats


# --------------------------------------------------------------------------- statistics


def _moments(count, total, outer):
    return {"count": np.asarray(count, dtype=np.int64), "sum": np.asarray(total),
            "sum_outer": np.asarray(outer)}


class LayerStats:
    """Calibration statistics of one adapter (streaming, mergeable).

    Parameters
    ----------
    name : str
        Dotted module name of the adapter.
    d_model : int
        Stream width H.
    n_real, n_complex : int
        Mode structure of the SSM at calibration time.
    fingerprint : str
        :func:`adapter_fingerprint` at calibration time.
    gramian : {"data", "input", "both"}
        Which statistics are kept.

    Attributes
    ----------
    order : int
        ``n = n_real + 2 n_complex``, the order of ``ssm.as_lti()``.
    state : lti.StateCovarianceAccumulator or None
        Moments of the exported system's state (n,); None unless ``gramian`` is "data"/"both".
    inputs : lti.StateCovarianceAccumulator or None
        Moments of the stream (H,); None unless ``gramian`` is "input"/"both".
    """

    def __init__(self, name, d_model, n_real, n_complex, fingerprint, gramian):
        from lti import StateCovarianceAccumulator

        if gramian not in _GRAMIANS:
            raise AdapterConfigError(f"`gramian` must be one of {_GRAMIANS}; got {gramian!r}")
        self.name = name
        self.d_model = int(d_model)
        self.n_real = int(n_real)
        self.n_complex = int(n_complex)
        self.fingerprint = fingerprint
        self.gramian = gramian
        self.order = self.n_real + 2 * self.n_complex
        self.state = (StateCovarianceAccumulator(n=self.order)
                      if gramian in ("data", "both") else None)
        self.inputs = (StateCovarianceAccumulator(n=self.d_model)
                       if gramian in ("input", "both") else None)

    @property
    def count(self) -> int:
        """Number of tokens counted."""
        acc = self.state if self.state is not None else self.inputs
        return int(acc.count)

    def _add(self, which, count, total, outer):
        from lti import StateCovarianceAccumulator

        acc = getattr(self, which)
        part = StateCovarianceAccumulator.from_state_dict(_moments(count, total, outer))
        setattr(self, which, acc.merge(part))

    def state_covariance(self) -> np.ndarray:
        r"""Data-driven controllability Gramian :math:`\hat P = E[x x^T]`, shape (n, n).

        In the coordinates of ``ssm.as_lti()`` of the calibrated adapter.

        Raises
        ------
        AdapterConfigError
            State statistics were not collected (``gramian="input"``).
        lti.EmptyDataError
            No token was counted.
        """
        return self._finalized("state", "data")

    def input_covariance(self) -> np.ndarray:
        r"""Stream second moment :math:`W = E[u u^T]`, shape (H, H).

        Raises
        ------
        AdapterConfigError
            Input statistics were not collected (``gramian="data"``).
        lti.EmptyDataError
            No token was counted.
        """
        return self._finalized("inputs", "input")

    def _finalized(self, which: str, gramian: str) -> np.ndarray:
        acc = getattr(self, which)
        if acc is None:
            kind = "state" if which == "state" else "input"
            raise AdapterConfigError(
                f"layer {self.name!r} was calibrated with gramian={self.gramian!r}: no {kind} "
                f"covariance; calibrate with gramian='{gramian}' or 'both'"
            )
        return np.real(acc.finalize())

    def meta(self) -> dict:
        """JSON-able description (everything but the moments)."""
        return {"d_model": self.d_model, "n_real": self.n_real, "n_complex": self.n_complex,
                "fingerprint": self.fingerprint, "gramian": self.gramian}

    def arrays(self) -> dict[str, np.ndarray]:
        """Additive moments ``{"state.count": ..., "state.sum": ..., ...}`` (float64/int64)."""
        out = {}
        for which in ("state", "inputs"):
            acc = getattr(self, which)
            if acc is not None:
                for key, value in acc.state_dict().items():
                    out[f"{which}.{key}"] = value
        return out

    def load_arrays(self, arrays: Mapping[str, np.ndarray]) -> None:
        """Replace the moments by ``arrays`` (as returned by :meth:`arrays`, e.g. summed).

        Parameters
        ----------
        arrays : mapping of str to numpy.ndarray
            ``"<which>.count"`` (int64 scalar, tokens), ``"<which>.sum"`` (n,) and
            ``"<which>.sum_outer"`` (n, n) for each collected ``which`` in ``{"state",
            "inputs"}``; ``n`` is :attr:`order` for ``"state"`` and ``H`` for ``"inputs"``.
            Extra keys are ignored.

        Raises
        ------
        AdapterError
            A key needed for a collected statistic is missing.

        Examples
        --------
        >>> import numpy as np
        >>> layer = LayerStats("mlp", 3, 2, 0, "fp", "data")  # H = 3, order 2
        >>> X = np.arange(6.0).reshape(3, 2)  # three tokens' states, (tokens, order)
        >>> layer.load_arrays({"state.count": np.int64(3), "state.sum": X.sum(0),
        ...                    "state.sum_outer": X.T @ X})
        >>> layer.count, layer.state_covariance().shape
        (3, (2, 2))
        """
        from lti import StateCovarianceAccumulator

        for which in ("state", "inputs"):
            if getattr(self, which) is None:
                continue
            try:
                state = {k: arrays[f"{which}.{k}"] for k in ("count", "sum", "sum_outer")}
            except KeyError as exc:
                raise AdapterError(f"layer {self.name!r}: missing statistic {exc}") from exc
            setattr(self, which, StateCovarianceAccumulator.from_state_dict(state))

    def __repr__(self) -> str:
        return (f"LayerStats({self.name!r}, order={self.order}, H={self.d_model}, "
                f"gramian={self.gramian!r}, tokens={self.count})")


class CalibrationStats:
    """Per-adapter calibration statistics returned by :func:`calibrate`.

    Parameters
    ----------
    layers : dict of str to LayerStats
        In module order.
    gramian : {"data", "input", "both"}

    Notes
    -----
    Every stored quantity is additive (token counts, sums, sums of outer products), so
    :meth:`merge` and :meth:`all_reduce` combine data-parallel shards exactly (up to float64
    rounding of the sums). :meth:`save` writes a ``.npz`` with the moments plus a JSON header
    (no pickling); :meth:`load` reads it back.

    Examples
    --------
    >>> import torch
    >>> from torch import nn
    >>> from adapters import HRMConfig, inject
    >>> from adapters.calibrate import calibrate
    >>> class Block(nn.Module):
    ...     def __init__(self):
    ...         super().__init__()
    ...         self.mlp = nn.Sequential(nn.Linear(8, 16), nn.GELU(), nn.Linear(16, 8))
    ...     def forward(self, x):
    ...         return x + self.mlp(x)
    >>> class Tiny(nn.Module):
    ...     def __init__(self):
    ...         super().__init__()
    ...         self.emb, self.h = nn.Embedding(10, 8), nn.ModuleList([Block()])
    ...     def forward(self, ids):
    ...         return self.h[0](self.emb(ids))
    >>> model = inject(Tiny(), HRMConfig(d_state=4, gate_init=0.1))
    >>> stats = calibrate(model, [torch.randint(0, 10, (2, 12))], progress=False)
    >>> P = stats["h.0.mlp"].state_covariance()
    >>> P.shape, stats["h.0.mlp"].count, bool((abs(P - P.T) < 1e-12).all())
    ((4, 4), 24, True)
    """

    def __init__(self, layers: dict[str, LayerStats], gramian: str):
        self.layers = dict(layers)
        self.gramian = gramian

    def __getitem__(self, name: str) -> LayerStats:
        try:
            return self.layers[name]
        except KeyError:
            raise KeyError(f"no calibration statistics for {name!r}; have "
                           f"{list(self.layers)}") from None

    def __contains__(self, name: object) -> bool:
        return name in self.layers

    def __iter__(self):
        return iter(self.layers)

    def __len__(self) -> int:
        return len(self.layers)

    @property
    def tokens(self) -> int:
        """Tokens counted (the same for every layer)."""
        return max((s.count for s in self.layers.values()), default=0)

    # ---- combine
    def merge(self, other: CalibrationStats) -> CalibrationStats:
        """Statistics of both (a new object; layers, structure and fingerprints must agree).

        Parameters
        ----------
        other : CalibrationStats
            Statistics of the same adapters (same layer names, sizes, fingerprints and
            ``gramian``), e.g. from another data shard. Neither input is modified.

        Returns
        -------
        CalibrationStats
            Token counts, sums and sums of outer products added layer by layer.

        Raises
        ------
        AdapterConfigError
            ``other`` is not :class:`CalibrationStats` or describes different adapters.

        Examples
        --------
        >>> import numpy as np
        >>> layer = LayerStats("mlp", 3, 2, 0, "fp", "data")
        >>> X = np.arange(6.0).reshape(3, 2)
        >>> layer.load_arrays({"state.count": np.int64(3), "state.sum": X.sum(0),
        ...                    "state.sum_outer": X.T @ X})
        >>> stats = CalibrationStats({"mlp": layer}, "data")
        >>> both = stats.merge(stats)
        >>> both.tokens, bool(np.allclose(both["mlp"].state_covariance(),
        ...                               stats["mlp"].state_covariance()))
        (6, True)
        """
        self._check_compatible(other)
        out = CalibrationStats({}, self.gramian)
        for name, mine in self.layers.items():
            theirs = other.layers[name]
            new = LayerStats(name, mine.d_model, mine.n_real, mine.n_complex,
                             mine.fingerprint, mine.gramian)
            for which in ("state", "inputs"):
                if getattr(mine, which) is not None:
                    setattr(new, which, getattr(mine, which).merge(getattr(theirs, which)))
            out.layers[name] = new
        return out

    def _check_compatible(self, other):
        if not isinstance(other, CalibrationStats):
            raise AdapterConfigError(
                f"`other` must be CalibrationStats; got {type(other).__name__}"
            )
        mine = {k: v.meta() for k, v in self.layers.items()}
        theirs = {k: v.meta() for k, v in other.layers.items()}
        if mine != theirs:
            diff = sorted(k for k in set(mine) | set(theirs) if mine.get(k) != theirs.get(k))
            raise AdapterConfigError(
                f"calibration statistics describe different adapters at {diff[:5]}"
            )

    def _flat(self):
        names = list(self.layers)
        floats, counts, keys = [], [], []
        for name in names:
            for key, value in self.layers[name].arrays().items():
                keys.append((name, key, value.shape))
                if key.endswith(".count"):
                    counts.append(np.atleast_1d(value).astype(np.int64))
                else:
                    floats.append(np.asarray(value, dtype=np.float64).ravel())
        return keys, floats, counts

    def all_reduce(self, group=None) -> CalibrationStats:
        """Sum the statistics over the ranks of a :mod:`torch.distributed` process group.

        In place (and returns ``self``). Float64 moments travel as one float64 tensor, token
        counts as one int64 tensor; with the NCCL backend they go through the current CUDA
        device. Every rank ends with the statistics of all ranks' data.

        Parameters
        ----------
        group : ProcessGroup, optional
            Default: the world.

        Returns
        -------
        CalibrationStats
            ``self``, now holding the sums over all ranks.

        Raises
        ------
        AdapterError
            The ranks hold statistics of different sizes (different adapters).
        """
        import torch.distributed as dist

        keys, floats, counts = self._flat()
        device = torch.device("cpu")
        if dist.get_backend(group) == "nccl":
            device = torch.device("cuda", torch.cuda.current_device())
        f = torch.from_numpy(np.concatenate(floats) if floats else np.zeros(0)).to(device)
        c = torch.from_numpy(np.concatenate(counts) if counts else np.zeros(0, np.int64))
        c = c.to(device)
        sizes = torch.tensor([f.numel(), c.numel()], dtype=torch.int64, device=device)
        lo, hi = sizes.clone(), sizes.clone()
        dist.all_reduce(lo, op=dist.ReduceOp.MIN, group=group)
        dist.all_reduce(hi, op=dist.ReduceOp.MAX, group=group)
        if not torch.equal(lo, hi):
            raise AdapterError(
                f"ranks hold calibration statistics of different sizes ({lo.tolist()} vs "
                f"{hi.tolist()}): the models' adapters differ"
            )
        dist.all_reduce(f, group=group)
        dist.all_reduce(c, group=group)
        f_np, c_np = f.cpu().numpy(), c.cpu().numpy()
        per_layer: dict[str, dict[str, np.ndarray]] = {name: {} for name in self.layers}
        fi = ci = 0
        for name, key, shape in keys:
            if key.endswith(".count"):
                per_layer[name][key] = np.asarray(c_np[ci], dtype=np.int64)
                ci += 1
            else:
                size = int(np.prod(shape))
                per_layer[name][key] = f_np[fi:fi + size].reshape(shape)
                fi += size
        for name, arrays in per_layer.items():
            self.layers[name].load_arrays(arrays)
        return self

    # ---- serialisation
    def state_dict(self) -> dict:
        """Everything needed to rebuild the statistics, as plain data.

        Returns
        -------
        dict
            ``{"meta": JSON-able dict, "arrays": {"<layer>/<key>": ndarray}}``; the keys and
            shapes of the arrays are those of :meth:`LayerStats.arrays`.
        """
        arrays = {}
        for name, layer in self.layers.items():
            for key, value in layer.arrays().items():
                arrays[f"{name}/{key}"] = value
        meta = {"format": _FORMAT, "version": _FORMAT_VERSION, "gramian": self.gramian,
                "layers": {name: layer.meta() for name, layer in self.layers.items()}}
        return {"meta": meta, "arrays": arrays}

    @classmethod
    def from_state_dict(cls, state: Mapping) -> CalibrationStats:
        """Inverse of :meth:`state_dict`.

        Parameters
        ----------
        state : mapping
            ``{"meta": ..., "arrays": ...}`` as returned by :meth:`state_dict`.

        Returns
        -------
        CalibrationStats

        Raises
        ------
        AdapterError
            ``state`` is malformed, of another format or version, or misses an array.
        """
        try:
            meta, arrays = state["meta"], state["arrays"]
            if meta.get("format") != _FORMAT or meta.get("version") != _FORMAT_VERSION:
                raise ValueError(f"format {meta.get('format')!r} v{meta.get('version')!r}")
            layers = {}
            for name, m in meta["layers"].items():
                layer = LayerStats(name, m["d_model"], m["n_real"], m["n_complex"],
                                   m["fingerprint"], m["gramian"])
                prefix = f"{name}/"
                layer.load_arrays({k[len(prefix):]: v for k, v in arrays.items()
                                   if k.startswith(prefix)})
                layers[name] = layer
            return cls(layers, meta["gramian"])
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            raise AdapterError(f"not valid calibration statistics: {exc}") from exc

    def save(self, path: str | os.PathLike) -> Path:
        """Write to ``path`` (``.npz``: the moments plus a JSON header; no pickling).

        Parameters
        ----------
        path : str or os.PathLike
            File to write (overwritten if it exists); used as given, so name it ``*.npz``.

        Returns
        -------
        pathlib.Path
            ``path``.

        Examples
        --------
        >>> import os, tempfile
        >>> import numpy as np
        >>> layer = LayerStats("mlp", 3, 2, 0, "fp", "data")
        >>> X = np.arange(6.0).reshape(3, 2)
        >>> layer.load_arrays({"state.count": np.int64(3), "state.sum": X.sum(0),
        ...                    "state.sum_outer": X.T @ X})
        >>> stats = CalibrationStats({"mlp": layer}, "data")
        >>> with tempfile.TemporaryDirectory() as d:
        ...     back = CalibrationStats.load(stats.save(os.path.join(d, "stats.npz")))
        >>> back.tokens, bool(np.array_equal(back["mlp"].state_covariance(),
        ...                                  stats["mlp"].state_covariance()))
        (3, True)
        """
        state = self.state_dict()
        path = Path(path)
        header = np.frombuffer(json.dumps(state["meta"]).encode(), dtype=np.uint8)
        with open(path, "wb") as fh:
            np.savez(fh, __meta__=header, **state["arrays"])
        return path

    @classmethod
    def load(cls, path: str | os.PathLike) -> CalibrationStats:
        """Read statistics written by :meth:`save`.

        Parameters
        ----------
        path : str or os.PathLike
            A ``.npz`` file written by :meth:`save`.

        Returns
        -------
        CalibrationStats

        Raises
        ------
        AdapterError
            The file's header or arrays are not valid calibration statistics.
        OSError
            The file cannot be read.
        """
        with np.load(Path(path), allow_pickle=False) as data:
            meta = json.loads(data["__meta__"].tobytes().decode())
            arrays = {k: data[k] for k in data.files if k != "__meta__"}
        return cls.from_state_dict({"meta": meta, "arrays": arrays})

    def __repr__(self) -> str:
        return (f"CalibrationStats(layers={len(self.layers)}, gramian={self.gramian!r}, "
                f"tokens={self.tokens})")


# --------------------------------------------------------------------------- calibration


def _unwrap(model: nn.Module) -> nn.Module:
    from torch.nn.parallel import DistributedDataParallel

    return model.module if isinstance(model, DistributedDataParallel) else model


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
            st = probe.stats
            if st.state is not None:
                s_aug = _states(probe, x)  # (B, L, n) in the module's real-stacked layout
                s = s_aug @ probe.m_map.T  # (B, L, n) in the as_lti() coordinates
                v = s[keep]  # (T, n)
                st._add("state", v.shape[0], v.sum(0).cpu().numpy(), (v.T @ v).cpu().numpy())
            if st.inputs is not None:
                v = x[keep]  # (T, H)
                st._add("inputs", v.shape[0], v.sum(0).cpu().numpy(), (v.T @ v).cpu().numpy())
        return None

    return hook


def _states(probe: _Probe, x: torch.Tensor) -> torch.Tensor:
    """States of the adapter's SSM (float64) stacked as ``[s_real, Re s_c, Im s_c]``."""
    nr = probe.n_real
    a, b = probe.a.to(x.device), probe.b.to(x.device)
    parts = []
    if nr:
        v = x @ b[:nr].real.T  # (B, L, n_real)
        s, _ = chunked_scan(v, a[:nr].real)
        parts.append(s)
    if a.shape[0] > nr:
        bc = b[nr:]
        v = torch.complex(x @ bc.real.T, x @ bc.imag.T)  # (B, L, n_complex)
        s, _ = chunked_scan(v, a[nr:])
        parts += [s.real, s.imag]
    return torch.cat(parts, dim=-1)


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
        ``DistributedDataParallel``). It is run in eval mode under ``torch.no_grad()``; the
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

    if gramian not in _GRAMIANS:
        raise AdapterConfigError(f"`gramian` must be one of {_GRAMIANS}; got {gramian!r}")
    if max_batches is not None and (
        isinstance(max_batches, bool) or not isinstance(max_batches, int) or max_batches < 1
    ):
        raise AdapterConfigError(
            f"`max_batches` must be a positive int or None; got {max_batches!r}"
        )
    base = _unwrap(model)
    adapted = find_adapters(base)
    if not adapted:
        raise AdapterError("`model` has no HRM adapters; call `adapters.inject` first")
    distributed = dist.is_available() and dist.is_initialized()
    rank = dist.get_rank() if distributed else 0

    probes: dict[str, _Probe] = {}
    for name, wrapper in adapted.items():
        adapter = wrapper.adapter
        ssm = adapter.ssm
        a, b, m_map = _real_coordinates(ssm)
        stats = LayerStats(name, ssm.d_model, ssm.n_real, ssm.n_complex,
                           adapter_fingerprint(adapter), gramian)
        dev = next(ssm.parameters()).device
        probes[name] = _Probe(a.to(dev), b.to(dev), torch.from_numpy(m_map).to(dev),
                              ssm.n_real, stats)

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
                model(*args, **kwargs)
                seen += 1
            bar.close()
    finally:
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
