"""Adapter-only checkpoints: ``hrm_adapter.safetensors`` (+ its readable copy ``hrm_config.json``).

Only the adapters' tensors are written (keys ``"<module name>.<adapter tensor>"``, e.g.
``"model.layers.0.mlp.ssm.B"``), through safetensors: loading never unpickles. The checkpoint
is **one file**: the safetensors header's metadata holds, under ``"hrm_checkpoint"``, the
:class:`~adapters.HRMConfig`, the base model's fingerprint (``model_type``, class,
``name_or_path`` when known, width, layer count, adapted module names), the per-layer
structure (width, real/complex mode counts: reduced adapters differ per layer), every tensor's
shape and dtype, and the SHA-256 of the tensor data. ``hrm_config.json`` is the same record as
plain JSON for people and hub tools; the loader trusts the header (which cannot disagree with
the weights) and warns when the copy does not match it.

Format versions. 3 (written now): as 2, but each ``gate`` is stored with shape (1,), the shape
of the parameter (a 0-dim parameter cannot be broadcast by DeepSpeed's engine). 2: our own
file names, the record in the header, the base model's fingerprint; the gate 0-dim. 1: PEFT's
file names (below). Checkpoints of versions 1 and 2 load bit for bit: a 0-dim gate is read as
shape (1,) (so is one in a full-model state dict, e.g. an older Trainer checkpoint's
``model.safetensors``, through :class:`adapters.layer.HRMAdapter`'s state-dict loading); an
optimizer state saved then (0-dim moments of the gate) is given the gate's shape before the
optimizer's first step (:mod:`adapters._optimizer_state`). Code
from before version 3 refuses a version-3 checkpoint with a ``CheckpointError``
(``format_version`` must be in [1, 2]); it is never loaded wrongly.

File names. The names are our own (since format version 2): a folder with PEFT's
``adapter_config.json`` / ``adapter_model.safetensors`` would be taken for a PEFT adapter by
``peft.PeftModel.from_pretrained`` and by hub tools, which then fail deep inside with a bare
``KeyError``. On our folder, ``PeftModel.from_pretrained`` now stops at once with PEFT's own
``ValueError: Can't find 'adapter_config.json' at '<folder>'``. Folders written by the old
format (version 1, PEFT's names) are still read, with a ``FutureWarning`` (no fingerprint is
recorded there, so the base model cannot be checked); :func:`save_adapter` converts them.

Crash safety. The weights file is written to a temporary file in the same folder, fsync'ed and
renamed over ``hrm_adapter.safetensors`` (:mod:`adapters._atomic`), then the JSON copy the same
way. A process killed at any moment therefore leaves the previous checkpoint or the new one,
never a truncated or mixed one: there is no moment at which the weights and the config they
belong to are in different files, and no moment at which the folder is moved away (other files
in it, e.g. a Trainer's optimizer state, are never touched).

Base model check. :func:`load_adapter` compares the recorded fingerprint with the model's and
raises :class:`~adapters.exceptions.BaseModelMismatchError` naming every difference (a Llama
adapter does not load into a Qwen2 model of the same sizes); ``allow_base_mismatch=True``
loads it anyway, with a warning, when the shapes fit.

:class:`AdapterTrainerMixin` makes HF ``Trainer`` checkpoints adapter-only.
"""

from __future__ import annotations

import hashlib
import json
import os
import warnings
from pathlib import Path
from typing import Any

import torch
from torch import nn

from adapters._atomic import atomic_write_bytes, atomic_write_text, fsync_directory
from adapters._hooks import register_checkpoint_cleaner, register_checkpoint_reader
from adapters._optional import require
from adapters._pairing import base_weights_digest, stale_adapter_tensors
from adapters._wrappers import unwrap_model
from adapters.config import ADAPTER_TYPE, FORMAT_VERSION, HRMConfig
from adapters.exceptions import (
    AdapterConfigError,
    AdapterError,
    BaseModelMismatchError,
    CheckpointError,
)
from adapters.injection import (
    find_adapters,
    get_adapter_config,
    inject,
    register_checkpoint_writer,
    remove,
)
from adapters.layer import ssm_of_structure

__all__ = [
    "CONFIG_NAME",
    "WEIGHTS_NAME",
    "LEGACY_CONFIG_NAME",
    "LEGACY_WEIGHTS_NAME",
    "save_adapter",
    "load_adapter",
    "adapter_state_dict",
    "base_fingerprint",
    "AdapterTrainerMixin",
]

CONFIG_NAME = "hrm_config.json"
WEIGHTS_NAME = "hrm_adapter.safetensors"
#: File names of format version 1 (PEFT's names), still read by :func:`load_adapter`.
LEGACY_CONFIG_NAME = "adapter_config.json"
LEGACY_WEIGHTS_NAME = "adapter_model.safetensors"
_HEADER_KEY = "hrm_checkpoint"
#: Fingerprint fields that must agree between the checkpoint and the model.
_COMPARED = ("model_type", "hidden_size", "num_layers")


def _require_safetensors():
    return require("safetensors.torch", extra="hf", purpose="adapter checkpoints")


def _dtype_name(dtype: torch.dtype) -> str:
    return str(dtype).removeprefix("torch.")


def adapter_state_dict(model: nn.Module, state_dict: dict[str, torch.Tensor] | None = None,
                       ) -> dict[str, torch.Tensor]:
    """The adapters' tensors only: ``{"<module name>.<key>": tensor}`` (detached, on CPU).

    Parameters
    ----------
    model : nn.Module
        A model adapted by :func:`adapters.inject`, possibly wrapped by ``torch.compile``,
        DDP, ``DataParallel`` or a DeepSpeed engine (keys name the model's own modules).
    state_dict : dict, optional
        A full state dict of ``model`` (keys as ``model.state_dict()``'s, e.g.
        ``"hrm_adapters.model.layers.0.mlp.adapter.gate"``), such as the one a Trainer under
        DeepSpeed ZeRO-3 gathers and passes to ``save_pretrained``; adapter tensors of the
        full shape and dtype found in it are taken from it instead of from the live
        parameters.

    Returns
    -------
    dict of str to torch.Tensor

    Raises
    ------
    CheckpointError
        Adapter parameters are partitioned by DeepSpeed ZeRO-3 (their local data is a shard
        or empty) and ``state_dict`` does not hold them whole: gather them first, on every
        rank, e.g.
        ``with deepspeed.zero.GatheredParameters(list(model.parameters())): save_adapter(...)``.
    """
    from adapters.targets import ADAPTERS_ATTR

    model = unwrap_model(model)
    out = {}
    partitioned = []
    given = {} if state_dict is None else state_dict
    for name, adapted in find_adapters(model).items():
        for key, value in adapted.adapter.state_dict(keep_vars=True).items():
            full = getattr(value, "ds_shape", None)  # set on ZeRO-3 parameters
            shape = tuple(value.shape) if full is None else tuple(full)
            whole = given.get(f"{ADAPTERS_ATTR}.{name}.adapter.{key}")
            if (isinstance(whole, torch.Tensor) and tuple(whole.shape) == shape
                    and whole.dtype == value.dtype):
                value = whole
            elif tuple(value.shape) != shape:
                partitioned.append(f"{name}.{key}")
            out[f"{name}.{key}"] = value.detach().to("cpu").contiguous()
    if partitioned:
        raise CheckpointError(
            f"{len(partitioned)} of {len(out)} adapter tensors are partitioned by DeepSpeed "
            f"ZeRO-3 here (e.g. {partitioned[0]!r}), so their local data is not the tensor; "
            "gather them on every rank first: `with deepspeed.zero.GatheredParameters("
            "list(model.parameters())): save_adapter(model, directory)`"
        )
    return out


def _int_attr(obj: Any, *names: str) -> int | None:
    for name in names:
        value = getattr(obj, name, None)
        if isinstance(value, int) and not isinstance(value, bool):
            return value
    return None


def base_fingerprint(model: nn.Module) -> dict[str, Any]:
    """What identifies the base model an adapter belongs to.

    Parameters
    ----------
    model : nn.Module
        A transformers model (its ``config`` is read) or any module; adapted or not.

    Returns
    -------
    dict
        ``model_type`` (``config.model_type`` or None), ``architecture`` (the class name),
        ``name_or_path`` (``config._name_or_path`` when set, else None), ``hidden_size`` and
        ``num_layers`` (from the text config; None when unknown) and ``target_modules`` (the
        names of the adapted modules, empty for a base model).

    Examples
    --------
    >>> base_fingerprint(nn.Linear(2, 2))["architecture"]
    'Linear'
    """
    model = unwrap_model(model)
    cfg = getattr(model, "config", None)
    text = cfg.get_text_config() if hasattr(cfg, "get_text_config") else cfg
    return {
        "model_type": getattr(cfg, "model_type", None) or None,
        "architecture": type(model).__name__,
        "name_or_path": getattr(cfg, "_name_or_path", None) or None,
        "hidden_size": _int_attr(text, "hidden_size", "n_embd", "d_model"),
        "num_layers": _int_attr(text, "num_hidden_layers", "n_layer", "num_layers"),
        "target_modules": list(find_adapters(model)),
    }


def _base_differences(saved: dict[str, Any], current: dict[str, Any]) -> list[str]:
    """Fields of two fingerprints that disagree, as ``"field: checkpoint X vs model Y"``."""
    fields = list(_COMPARED)
    if saved.get("model_type") is None and current.get("model_type") is None:
        fields.append("architecture")  # plain modules: the class is all we know
    out = []
    for key in fields:
        a, b = saved.get(key), current.get(key)
        if key != "model_type" and (a is None or b is None):
            continue  # unknown on one side: the shape checks decide
        if a != b:
            out.append(f"{key}: checkpoint {a!r} vs model {b!r}")
    return out


def _tensors_digest(tensors: dict[str, torch.Tensor]) -> str:
    """SHA-256 of names, dtypes, shapes and raw bytes of the tensors (in key order)."""
    h = hashlib.sha256()
    for key in sorted(tensors):
        t = tensors[key].detach().to("cpu").contiguous()
        h.update(f"{key}|{_dtype_name(t.dtype)}|{list(t.shape)}|".encode())
        h.update(t.reshape(-1).view(torch.uint8).numpy().tobytes())
    return h.hexdigest()


def _layer_meta(adapted: nn.Module) -> dict[str, Any]:
    ssm = adapted.adapter.ssm
    return {"d_model": int(ssm.d_model), "n_real": int(ssm.n_real),
            "n_complex": int(ssm.n_complex), "scan": ssm.scan}


def _directory(directory: Any, function: str) -> Path:
    """``directory`` as a Path; a typed error naming what was passed instead of a path."""
    if not isinstance(directory, (str, os.PathLike)):
        raise AdapterConfigError(f"`{function}` takes a folder (str or os.PathLike); got "
                                 f"{type(directory).__name__} {directory!r}")
    return Path(directory)


def save_adapter(model: nn.Module, directory: str | os.PathLike, *,
                 state_dict: dict[str, torch.Tensor] | None = None) -> Path:
    """Write the adapters of ``model`` to ``directory`` (created if needed), crash-safely.

    Parameters
    ----------
    model : nn.Module
        A model adapted by :func:`adapters.inject` (reduced adapters included), possibly
        wrapped by ``torch.compile``, DDP, ``DataParallel`` or a DeepSpeed engine.
    directory : str or path-like
        Output directory; created if missing. :data:`WEIGHTS_NAME` and :data:`CONFIG_NAME`
        are replaced atomically; other files in it are left alone.
    state_dict : dict, optional
        The model's full state dict when the caller has it (``save_pretrained(d,
        state_dict=...)``; under DeepSpeed ZeRO-3 a Trainer passes the gathered one): the
        adapter tensors are read from it where it holds them whole (see
        :func:`adapter_state_dict`).

    Returns
    -------
    pathlib.Path
        The directory, holding ``hrm_adapter.safetensors`` (the checkpoint, config included)
        and ``hrm_config.json`` (a readable copy of its config).

    Raises
    ------
    AdapterError
        ``model`` has no adapters.
    AdapterConfigError
        ``model`` is not a module or ``directory`` not a path.
    CheckpointError
        ``directory`` is a file, or the adapters are partitioned by DeepSpeed ZeRO-3 and
        ``state_dict`` does not hold them whole (see :func:`adapter_state_dict`); nothing is
        written.

    Notes
    -----
    If the process dies during the call, ``directory`` holds the previous checkpoint or the
    new one (see the module docstring); at worst a hidden temporary file remains, removed by
    the next save.
    """
    return _write(model, directory, state_dict, saved_by="save_adapter")


def _write(model: nn.Module, directory: Any, state_dict: dict[str, torch.Tensor] | None,
           saved_by: str, base_weights: str | None = None) -> Path:
    st = _require_safetensors()
    directory = _directory(directory, "save_adapter")
    model = unwrap_model(model)
    config = _live_config(model)
    adapters = find_adapters(model)
    tensors = adapter_state_dict(model, state_dict)
    meta = {
        "adapter_type": ADAPTER_TYPE,
        "format_version": FORMAT_VERSION,
        "config": config.to_dict(),
        "base_model": base_fingerprint(model),
        "layers": {name: _layer_meta(a) for name, a in adapters.items()},
        "tensors": {k: {"shape": list(v.shape), "dtype": _dtype_name(v.dtype)}
                    for k, v in tensors.items()},
        "tensors_sha256": _tensors_digest(tensors),
        "saved_by": saved_by,  # "save_pretrained": the folder's base weights' companion
    }
    if base_weights is not None:  # (extra key: older readers ignore it)
        meta["base_weights"] = base_weights
    blob = st.save(tensors, metadata={"format": "pt", "adapter_type": ADAPTER_TYPE,
                                      "format_version": str(FORMAT_VERSION),
                                      _HEADER_KEY: json.dumps(meta, sort_keys=True)})
    if directory.exists() and not directory.is_dir():
        raise CheckpointError(f"{str(directory)!r} is a file; `save_adapter` writes a folder")
    if not directory.is_dir():
        directory.mkdir(parents=True, exist_ok=True)
        fsync_directory(directory.parent)
    atomic_write_bytes(directory / WEIGHTS_NAME, blob)  # the commit point
    atomic_write_text(directory / CONFIG_NAME, json.dumps(meta, indent=2, sort_keys=True) + "\n")
    return directory


def _header_metadata(data: bytes) -> dict[str, str]:
    """The ``__metadata__`` of a safetensors blob (8-byte little-endian length + JSON)."""
    if len(data) < 8:
        raise ValueError(f"{len(data)} bytes is too short for a safetensors file")
    n = int.from_bytes(data[:8], "little")
    if n > len(data) - 8:
        raise ValueError(f"header length {n} exceeds the file ({len(data)} bytes)")
    header = json.loads(data[8 : 8 + n])
    meta = header.get("__metadata__", {}) if isinstance(header, dict) else None
    if not isinstance(meta, dict):
        raise ValueError("the safetensors header is not an object")
    return meta


def _check_listing(meta: dict[str, Any], tensors: dict[str, torch.Tensor], where: str) -> None:
    listed = {k: (tuple(v["shape"]), v["dtype"]) for k, v in meta["tensors"].items()}
    stored = {k: (tuple(v.shape), _dtype_name(v.dtype)) for k, v in tensors.items()}
    if listed != stored:
        diff = sorted(set(listed.items()) ^ set(stored.items()))
        raise CheckpointError(f"the tensors of {where} do not match its listing: {diff[:10]}")


def _parse_meta(meta: Any, where: str) -> tuple[dict[str, Any], HRMConfig]:
    try:
        if not isinstance(meta, dict):
            raise TypeError(f"expected an object, got {type(meta).__name__}")
        layers, listing = meta["layers"], meta["tensors"]
        config = HRMConfig.from_dict(meta["config"])
        if not isinstance(layers, dict) or not isinstance(listing, dict):
            raise TypeError("`layers` and `tensors` must be objects")
    except (KeyError, TypeError, AdapterConfigError) as exc:
        raise CheckpointError(f"{where} does not hold a valid adapter checkpoint: {exc}") from exc
    return layers, config


def _read_checkpoint(directory: Path) -> tuple[dict[str, Any], HRMConfig, dict[str, torch.Tensor]]:
    """``(meta, config, tensors)`` of the checkpoint in ``directory`` (either format)."""
    st = _require_safetensors()
    weights_path = directory / WEIGHTS_NAME
    if not weights_path.is_file():
        if (directory / LEGACY_CONFIG_NAME).is_file():
            return _read_legacy(directory)
        raise CheckpointError(
            f"adapter checkpoint file {str(weights_path)!r} is missing"
            + (" (the folder holds only the JSON copy of a config)"
               if (directory / CONFIG_NAME).is_file() else "")
        )
    data = weights_path.read_bytes()  # one read: header and tensors come from the same bytes
    try:
        header = _header_metadata(data)
        tensors = st.load(data)
    except Exception as exc:  # safetensors raises its own SafetensorError / ValueError
        raise CheckpointError(f"{str(weights_path)!r} could not be read: {exc}") from exc
    if _HEADER_KEY not in header:
        raise CheckpointError(
            f"{str(weights_path)!r} is a safetensors file without an {_HEADER_KEY!r} record "
            "in its header: it was not written by `adapters.save_adapter`"
        )
    try:
        meta = json.loads(header[_HEADER_KEY])
    except json.JSONDecodeError as exc:
        raise CheckpointError(f"the header record of {str(weights_path)!r} is not JSON: "
                              f"{exc}") from exc
    layers, config = _parse_meta(meta, repr(str(weights_path)))
    if _tensors_digest(tensors) != meta.get("tensors_sha256"):
        raise CheckpointError(
            f"the tensors of {str(weights_path)!r} do not match the SHA-256 recorded in its "
            "header: the file was changed after it was written"
        )
    _check_listing(meta, tensors, repr(str(weights_path)))
    copy_path = directory / CONFIG_NAME
    if copy_path.is_file():
        try:
            copy = json.loads(copy_path.read_text())
        except (json.JSONDecodeError, UnicodeDecodeError):
            copy = None
        if copy != meta:
            warnings.warn(
                f"{str(copy_path)!r} does not match the config recorded in {WEIGHTS_NAME!r} "
                "(an interrupted save or an edit); the weights file's own record was used. "
                "Save again to refresh the copy.", stacklevel=3)
    return meta, config, tensors


def _read_legacy(directory: Path) -> tuple[dict[str, Any], HRMConfig, dict[str, torch.Tensor]]:
    """Format version 1: PEFT's file names, the weights' SHA-256 in the JSON."""
    st = _require_safetensors()
    config_path, weights_path = directory / LEGACY_CONFIG_NAME, directory / LEGACY_WEIGHTS_NAME
    try:
        meta = json.loads(config_path.read_text())
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise CheckpointError(f"{str(config_path)!r} is not valid JSON: {exc}") from exc
    if isinstance(meta, dict) and "peft_type" in meta:
        raise CheckpointError(
            f"{str(directory)!r} holds a PEFT adapter (peft_type={meta['peft_type']!r}), not an "
            "HRM adapter: load it with `peft.PeftModel.from_pretrained`"
        )
    layers, config = _parse_meta(meta, repr(str(config_path)))
    if not weights_path.is_file():
        raise CheckpointError(f"adapter checkpoint file {str(weights_path)!r} is missing")
    data = weights_path.read_bytes()
    if hashlib.sha256(data).hexdigest() != meta.get("weights_sha256"):
        raise CheckpointError(
            f"{LEGACY_WEIGHTS_NAME!r} does not match the SHA-256 recorded in "
            f"{LEGACY_CONFIG_NAME!r}: the file was changed or belongs to another checkpoint"
        )
    try:
        tensors = st.load(data)
    except Exception as exc:  # safetensors raises its own SafetensorError
        raise CheckpointError(f"{str(weights_path)!r} could not be read: {exc}") from exc
    _check_listing(meta, tensors, repr(str(weights_path)))
    warnings.warn(
        f"{str(directory)!r} is an adapter checkpoint of format version 1 (PEFT's file names, "
        "no base-model fingerprint, so the base model is not checked); `save_adapter` writes "
        f"format {FORMAT_VERSION} ({WEIGHTS_NAME!r} + {CONFIG_NAME!r}): load it and save it "
        "again to convert", FutureWarning, stacklevel=3)
    return meta, config, tensors


def _live_config(model: nn.Module) -> HRMConfig:
    """The adapters' config, with the dtype their parameters have now (see
    :func:`adapters.get_adapter_config`)."""
    return get_adapter_config(model)


def _structure(adapted: nn.Module) -> tuple:
    meta = _layer_meta(adapted)
    return meta["d_model"], meta["n_real"], meta["n_complex"]


def load_adapter(model: nn.Module, directory: str | os.PathLike, *,
                 allow_base_mismatch: bool = False) -> nn.Module:
    """Load adapters saved by :func:`save_adapter` into ``model`` (in place).

    The recorded base-model fingerprint is compared with ``model`` first. A base model is then
    adapted with the stored config; layers whose stored structure (state size, real/complex
    modes) differs from the model's adapters get a matching (e.g. reduced) SSM. Every key,
    shape and dtype is checked strictly before any value is copied.

    Parameters
    ----------
    model : nn.Module
        The base model, or one adapted with a compatible config; possibly wrapped by
        ``torch.compile``, DDP, ``DataParallel`` or a DeepSpeed engine (the model inside is
        loaded).
    directory : str or path-like
        A directory written by :func:`save_adapter` (format 3 or 2), or by the old format 1
        (PEFT's file names; read with a ``FutureWarning``).
    allow_base_mismatch : bool, default False
        Load even when the checkpoint was saved on another kind of base model (another
        ``model_type``, width or depth); a warning names the differences. Shapes must still
        fit.

    Returns
    -------
    nn.Module
        ``model`` as passed (wrapper included), whose adapters now hold the checkpoint's values
        bit for bit.

    Raises
    ------
    BaseModelMismatchError
        The checkpoint was saved on another base model (each differing field is named) and
        ``allow_base_mismatch`` is False.
    AdapterConfigError
        ``model`` is not a module, ``directory`` not a path or ``allow_base_mismatch`` not a
        bool.
    CheckpointError
        ``directory`` is a file; missing or unreadable files, a checksum mismatch, a PEFT
        folder, a config the model's adapters were not built with, or missing / unexpected /
        mismatched keys (all named). A base model is left unadapted.
    """
    directory = _directory(directory, "load_adapter")
    if not isinstance(allow_base_mismatch, bool):
        raise AdapterConfigError(
            f"`allow_base_mismatch` must be a bool; got {allow_base_mismatch!r}")
    wrapped, model = model, unwrap_model(model)
    if directory.is_file():
        raise CheckpointError(f"{str(directory)!r} is a file; `load_adapter` reads the folder "
                              "`save_adapter` wrote")
    meta, config, tensors = _read_checkpoint(directory)
    _check_companion(meta, directory)
    _check_stored_adapters(meta, directory, tensors)
    saved_base = meta.get("base_model")
    if isinstance(saved_base, dict):
        differences = _base_differences(saved_base, base_fingerprint(model))
        if differences:
            what = "; ".join(differences)
            origin = saved_base.get("name_or_path") or saved_base.get("architecture")
            if not allow_base_mismatch:
                raise BaseModelMismatchError(
                    f"the adapter checkpoint {str(directory)!r} was saved on another base model "
                    f"({origin!r}): {what}. Pass `allow_base_mismatch=True` to load it anyway"
                )
            warnings.warn(f"loading an adapter saved on another base model ({origin!r}): {what}",
                          stacklevel=2)
    layers = meta["layers"]
    injected_here = False
    if not find_adapters(model):
        try:
            inject(wrapped, config)  # (a PEFT wrapper gets its save_pretrained / load_adapter)
        except AdapterError as exc:
            raise CheckpointError(
                f"the checkpoint's adapters do not fit this model: {exc}"
            ) from exc
        injected_here = True
    try:
        _load_into(model, config, layers, tensors)
    except Exception:
        if injected_here:
            remove(model)
        raise
    return wrapped


def _check_companion(meta: dict[str, Any], directory: Path) -> None:
    """Warn when the base weights a ``save_pretrained`` checkpoint was written beside have
    been replaced since (a later ``save_pretrained`` of a model without these adapters)."""
    recorded = meta.get("base_weights")
    if meta.get("saved_by") != "save_pretrained" or not isinstance(recorded, str):
        return
    now = base_weights_digest(directory)
    if now is not None and now != recorded:
        warnings.warn(
            f"the base weights in {str(directory)!r} were replaced after its HRM adapter "
            f"checkpoint ({WEIGHTS_NAME}) was saved beside them (a later save_pretrained of a "
            "model without these adapters); the adapters loaded now were trained with the "
            "earlier base weights", UserWarning, stacklevel=3)


def _check_stored_adapters(meta: dict[str, Any], directory: Path,
                           tensors: dict[str, torch.Tensor]) -> None:
    """Warn when the adapter tensors in the folder's model weights differ from the checkpoint
    (:func:`adapters._pairing.stale_adapter_tensors`)."""
    differ = stale_adapter_tensors(directory, meta.get("layers", {}), tensors)
    if differ:
        warnings.warn(
            f"the adapter tensors inside the model weights of {str(directory)!r} differ from "
            f"its adapter checkpoint {WEIGHTS_NAME} ({len(differ)} tensors, e.g. "
            f"{differ[0]!r}): one of them was replaced without the other (a Trainer's hub push "
            f"copies only the model weights of each new checkpoint); {WEIGHTS_NAME} was "
            "loaded. The checkpoint-N folders hold both, consistent", UserWarning, stacklevel=3)


def _load_into(model: nn.Module, config: HRMConfig, layers: dict[str, Any],
               tensors: dict[str, torch.Tensor]) -> None:
    current = _live_config(model)
    differ = [f for f in ("reads", "mode", "dtype", "target_modules", "layers_to_skip")
              if getattr(current, f) != getattr(config, f)]
    if differ:
        raise CheckpointError(
            f"the model's adapters were built with other {differ} than the checkpoint: "
            + ", ".join(f"{f}={getattr(current, f)!r} vs {getattr(config, f)!r}" for f in differ)
        )
    adapters = find_adapters(model)
    missing_layers = sorted(set(adapters) - set(layers))
    unexpected_layers = sorted(set(layers) - set(adapters))
    if missing_layers or unexpected_layers:
        raise CheckpointError(
            f"adapter layers differ: missing in checkpoint {missing_layers}, "
            f"unexpected in checkpoint {unexpected_layers}"
        )
    # Swap in SSMs of the stored structure (reduced adapters) — built first, installed after.
    swaps = {}
    for name, adapted in adapters.items():
        meta = layers[name]
        try:
            want = (int(meta["d_model"]), int(meta["n_real"]), int(meta["n_complex"]))
        except (KeyError, TypeError, ValueError) as exc:
            raise CheckpointError(f"layer {name!r} has invalid metadata {meta!r}") from exc
        if want != _structure(adapted):
            if want[0] != adapted.adapter.d_model:
                raise CheckpointError(
                    f"layer {name!r} has width {want[0]} in the checkpoint but "
                    f"{adapted.adapter.d_model} in the model"
                )
            p = next(adapted.adapter.parameters())
            swaps[name] = ssm_of_structure(want[0], want[1], want[2], scan=meta["scan"],
                                           dtype=p.dtype, device=p.device)
    expected = {}
    for name, adapted in adapters.items():
        source = adapted.adapter.state_dict()
        if name in swaps:
            source = {"gate": source["gate"],
                      **{f"ssm.{k}": v for k, v in swaps[name].state_dict().items()}}
        for key, value in source.items():
            expected[f"{name}.{key}"] = (tuple(value.shape), _dtype_name(value.dtype))
    # formats 1 and 2 stored the gate 0-dim; the parameter has shape (1,) (same value)
    tensors = {k: v.reshape(1) if v.dim() == 0 and expected.get(k, ((),))[0] == (1,) else v
               for k, v in tensors.items()}
    got = {k: (tuple(v.shape), _dtype_name(v.dtype)) for k, v in tensors.items()}
    missing = sorted(set(expected) - set(got))
    unexpected = sorted(set(got) - set(expected))
    mismatched = sorted(f"{k}: checkpoint {got[k]} vs model {expected[k]}"
                        for k in set(got) & set(expected) if got[k] != expected[k])
    if missing or unexpected or mismatched:
        raise CheckpointError(
            f"adapter checkpoint does not fit the model: missing keys {missing}, unexpected "
            f"keys {unexpected}, mismatched {mismatched}"
        )
    for name, ssm in swaps.items():
        adapters[name].adapter.take_structure(ssm, where=name)
    with torch.no_grad():
        for name, adapted in adapters.items():
            state = adapted.adapter.state_dict(keep_vars=True)
            if any(t.is_meta for t in state.values()):
                # adapters built on the meta device (inject before the weights exist): a copy
                # into a meta tensor is a no-op, so the values are assigned, on the target's device
                device = next((p.device for p in adapted.mlp.parameters() if not p.is_meta),
                              torch.device("cpu"))
                adapted.adapter.load_state_dict(
                    {k: tensors[f"{name}.{k}"].to(device) for k in state}, assign=True)
                continue
            for key, target in state.items():
                target.copy_(tensors[f"{name}.{key}"])


class AdapterTrainerMixin:
    """Make an HF ``Trainer`` save and resume adapter-only checkpoints.

    Use as ``class HRMTrainer(AdapterTrainerMixin, transformers.Trainer): ...``. Each
    checkpoint folder then holds :data:`CONFIG_NAME` and :data:`WEIGHTS_NAME` (plus the
    Trainer's own optimizer/scheduler state unless ``save_only_model=True``) instead of a
    full copy of the frozen base model; resuming and ``load_best_model_at_end`` read them
    with :func:`load_adapter`. Under DDP only the main process writes (``should_save``).
    """

    def _adapter_model(self) -> nn.Module:
        model = self.accelerator.unwrap_model(self.model)
        if not find_adapters(model):
            raise AdapterError("AdapterTrainerMixin needs a model adapted by `adapters.inject`")
        return model

    def _save(self, output_dir: str | None = None, state_dict: dict | None = None) -> None:
        output_dir = output_dir if output_dir is not None else self.args.output_dir
        if not self.args.should_save:
            return
        save_adapter(self._adapter_model(), output_dir)

    def _load_from_checkpoint(self, resume_from_checkpoint: str, model: nn.Module | None = None,
                              ) -> None:
        target = self._adapter_model() if model is None else model
        load_adapter(target, resume_from_checkpoint)

    def _load_best_model(self) -> None:
        best = self.state.best_model_checkpoint
        if best is not None:
            load_adapter(self._adapter_model(), best)


def _load_beside(model: nn.Module, directory: Any) -> None:
    """After a PEFT wrapper's ``load_adapter(d, ...)``: the HRM adapters saved in ``d``, if any
    (a Trainer resuming or loading the best checkpoint of a PeftModel adapted inside)."""
    if isinstance(directory, (str, os.PathLike)) and (Path(directory) / WEIGHTS_NAME).is_file():
        load_adapter(model, directory)


def _save_beside(model: nn.Module, directory: Any, *,
                 state_dict: dict[str, torch.Tensor] | None = None) -> Path:
    """An adapted model's ``save_pretrained(d)``: the checkpoint, marked as written with the
    base weights of ``d`` (so that a later save of the model without adapters removes it)."""
    return _write(model, directory, state_dict, saved_by="save_pretrained",
                  base_weights=base_weights_digest(Path(directory)))


def _drop_stale(directory: Path) -> None:
    """After ``save_pretrained(d)`` of a model whose adapters were removed: delete the adapter
    checkpoint an earlier ``save_pretrained`` wrote beside the base weights of ``d`` (they were
    just replaced by a model without adapters); keep (and warn about) one written by
    :func:`save_adapter`, or one that cannot be read."""
    weights_path = directory / WEIGHTS_NAME
    if not weights_path.is_file():
        return
    try:
        with open(weights_path, "rb") as f:
            head = f.read(8)
            head += f.read(int.from_bytes(head, "little")) if len(head) == 8 else b""
        saved_by = json.loads(_header_metadata(head)[_HEADER_KEY]).get("saved_by")
    except (OSError, ValueError, KeyError, AttributeError):
        saved_by = None
    if saved_by != "save_pretrained":
        warnings.warn(
            f"{str(directory)!r} holds an HRM adapter checkpoint ({WEIGHTS_NAME}) that was not "
            "written by `save_pretrained`; it was kept, although the model saved there has no "
            "adapters: `load_adapter` of this folder restores those adapters (delete "
            f"{WEIGHTS_NAME} and {CONFIG_NAME} if that is not meant)", UserWarning, stacklevel=3)
        return
    weights_path.unlink()  # the commit point: without it the folder holds no checkpoint
    (directory / CONFIG_NAME).unlink(missing_ok=True)
    fsync_directory(directory)


# an adapted model's save_pretrained (and so a plain Trainer) writes this checkpoint too, and a
# PEFT wrapper's load_adapter reads it back; a removed model's save_pretrained drops it
register_checkpoint_writer(_save_beside)
register_checkpoint_reader(_load_beside)
register_checkpoint_cleaner(_drop_stale)
