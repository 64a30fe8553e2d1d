r"""Calibration statistics: per-adapter state and stream moments, mergeable and saveable.

Shapes: H model width, n the order of an adapter's real system ``ssm.as_lti()``
(``n_real + 2 n_complex``).

:func:`adapters.calibrate` (:mod:`adapters.calibration`) fills one :class:`LayerStats` per
adapter and returns them as :class:`CalibrationStats`; :func:`adapters.reduce` reads the
data-driven Gramians from them. Every stored quantity is additive (token counts, sums, sums
of outer products, accumulated with the compensated :class:`lti.StateCovarianceAccumulator`),
so data-parallel shards merge exactly; :func:`adapter_fingerprint` ties the statistics to the
adapter parameters they were collected with.
"""

from __future__ import annotations

import hashlib
import json
import os
import zipfile
from collections.abc import Mapping
from pathlib import Path

import numpy as np
import torch
from torch import nn

from adapters._atomic import atomic_open, file_path
from adapters.exceptions import AdapterConfigError, AdapterError, CheckpointError

__all__ = ["CALIBRATION_GRAMIANS", "CalibrationStats", "LayerStats", "adapter_fingerprint"]

#: What :func:`adapters.calibrate` can collect (its ``gramian`` argument).
CALIBRATION_GRAMIANS = ("data", "input", "both")
_FORMAT = "hrm-calibration"
_FORMAT_VERSION = 1

def adapter_fingerprint(adapter: nn.Module, dtype: torch.dtype | None = None) -> str:
    """SHA-256 of an adapter's SSM tensors and structure.

    Calibration statistics describe the states of one particular system; :func:`adapters.reduce`
    compares this fingerprint with the one stored at calibration time and refuses stale
    statistics.

    Parameters
    ----------
    adapter : HRMAdapter
        The adapter (its ``ssm`` is hashed; the gate is not part of the states).
    dtype : torch.dtype, optional
        Hash the floating-point tensors cast to this dtype (the fingerprint the adapter had
        in that dtype, when the cast is exact: a model cast by ``model.double()`` after
        calibration describes the same system).

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
        if dtype is not None and t.is_floating_point():
            t = t.to(dtype)
        h.update(f"{key}:{t.dtype}:{tuple(t.shape)}".encode())
        h.update(t.view(torch.uint8).numpy().tobytes() if t.numel() else b"")
    return h.hexdigest()



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
    rounded_fingerprint : str or None, optional
        For a float64 adapter, its fingerprint rounded to float32
        (``adapter_fingerprint(adapter, torch.float32)``): :func:`adapters.reduce` accepts
        the statistics for the same adapter after ``model.float()``, whose values differ from
        the calibrated ones by that rounding only.

    Attributes
    ----------
    order : int
        ``n = n_real + 2 n_complex``, the order of ``ssm.as_lti()``.
    state : lti.StateCovarianceAccumulator or None
        Moments of the exported system's state (n,); None unless ``gramian`` is "data"/"both".
    inputs : lti.StateCovarianceAccumulator or None
        Moments of the stream (H,); None unless ``gramian`` is "input"/"both".
    """

    def __init__(self, name, d_model, n_real, n_complex, fingerprint, gramian,
                 rounded_fingerprint=None):
        from lti import StateCovarianceAccumulator

        if gramian not in CALIBRATION_GRAMIANS:
            raise AdapterConfigError(
                f"`gramian` must be one of {CALIBRATION_GRAMIANS}; got {gramian!r}"
            )
        self.name = name
        self.d_model = int(d_model)
        self.n_real = int(n_real)
        self.n_complex = int(n_complex)
        self.fingerprint = fingerprint
        self.rounded_fingerprint = rounded_fingerprint
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

    def accumulate(self, which: str, count: int, total: np.ndarray, outer: np.ndarray) -> None:
        """Add the moments of a batch of vectors to one statistic.

        Parameters
        ----------
        which : {"state", "inputs"}
            The statistic (it must be collected).
        count : int
            Number of vectors (tokens) T.
        total : numpy.ndarray, shape (k,)
            Their sum (float64); k is :attr:`order` for ``"state"``, H for ``"inputs"``.
        outer : numpy.ndarray, shape (k, k)
            The sum of their outer products ``V^T V`` for the vectors as rows of V (T, k).
        """
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
        meta = {"d_model": self.d_model, "n_real": self.n_real, "n_complex": self.n_complex,
                "fingerprint": self.fingerprint, "gramian": self.gramian}
        if self.rounded_fingerprint is not None:  # (absent in files written before)
            meta["rounded_fingerprint"] = self.rounded_fingerprint
        return meta

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
    >>> from adapters import calibrate
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
                             mine.fingerprint, mine.gramian, mine.rounded_fingerprint)
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
                                   m["fingerprint"], m["gramian"], m.get("rounded_fingerprint"))
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
            File to write (replaced atomically if it exists: a temporary file in the same
            directory, fsync, rename); used as given, so name it ``*.npz``. Missing parent
            folders are created.

        Returns
        -------
        pathlib.Path
            ``path``.

        Raises
        ------
        AdapterConfigError
            ``path`` is not a path.
        CheckpointError
            ``path`` is an existing folder.

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
        path = file_path(path, "CalibrationStats.save")
        state = self.state_dict()
        if path.is_dir():
            raise CheckpointError(f"{str(path)!r} is a folder; `CalibrationStats.save` writes a "
                                  "file, e.g. " + repr(str(path / "stats.npz")))
        path.parent.mkdir(parents=True, exist_ok=True)
        header = np.frombuffer(json.dumps(state["meta"]).encode(), dtype=np.uint8)
        with atomic_open(path, "wb") as fh:  # a killed save leaves the old file (issue 16)
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
        AdapterConfigError
            ``path`` is not a path.
        CheckpointError
            The file is truncated or not a ``.npz`` written by :meth:`save`.
        AdapterError
            The file's header or arrays are not valid calibration statistics.
        OSError
            The file cannot be read.
        """
        path = file_path(path, "CalibrationStats.load")
        try:
            with np.load(path, allow_pickle=False) as data:
                meta = json.loads(data["__meta__"].tobytes().decode())
                arrays = {k: data[k] for k in data.files if k != "__meta__"}
        except (EOFError, KeyError, ValueError, zipfile.BadZipFile) as exc:
            # a truncated or foreign file: np.load raises EOFError/BadZipFile/ValueError,
            # a missing header KeyError, a corrupt header a JSON ValueError
            raise CheckpointError(
                f"{str(path)!r} is not a calibration-statistics file written by "
                f"CalibrationStats.save (truncated or foreign: {type(exc).__name__}: {exc})"
            ) from exc
        return cls.from_state_dict({"meta": meta, "arrays": arrays})

    def __repr__(self) -> str:
        return (f"CalibrationStats(layers={len(self.layers)}, gramian={self.gramian!r}, "
                f"tokens={self.tokens})")
