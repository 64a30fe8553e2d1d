"""Which base weights an adapter checkpoint written by ``save_pretrained`` sits beside.

An adapted model's ``save_pretrained(d)`` writes the base weights (transformers' files) and
:func:`adapters.save_adapter`'s checkpoint into ``d``; the checkpoint records a digest of those
base weights. A later ``save_pretrained(d)`` of a model that does not carry these adapters
(e.g. ``AutoModelForCausalLM.from_pretrained(d)`` fine-tuned and saved back) replaces the
weights but cannot know about the checkpoint; :func:`adapters.load_adapter` compares the
digest with the folder's weights then and warns when they changed.

The digest covers the base tensors only (the adapters' own ``hrm_adapters.*`` entries, which
an adapted model also writes into the weights file, are left out, so a re-save of the same base
weights without the adapters still matches): for every tensor of the folder's safetensors
weight files, sorted by name, its name, dtype, shape and three 4 KiB samples of its bytes
(start, middle, end; the whole tensor when smaller) — a few MB read, whatever the model's size.
The files are those ``from_pretrained`` reads.
A change confined to bytes between the samples goes unnoticed; retraining or merging a layer
changes every sample of it.

The weights file of such a folder also holds the adapters' own tensors; when they differ from
the adapter checkpoint beside them (:func:`stale_adapter_tensors`), one of the two files was
replaced without the other: a Trainer's hub push copies only ``model.safetensors`` (and
``config.json``) from each new checkpoint folder into the output folder, beside the adapter
checkpoint of an earlier ``save_model``.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from adapters.targets import ADAPTERS_ATTR

__all__ = ["base_weights_digest", "stale_adapter_tensors", "stored_adapter_tensors"]

#: transformers' and PEFT's safetensors weights: one file, or shards listed by an index.
_PREFIXES = ("model", "adapter_model")
_SAMPLE = 4096


def _is_adapter_key(name: str) -> bool:
    return name.startswith(ADAPTERS_ATTR + ".") or ("." + ADAPTERS_ATTR + ".") in name


def _samples(begin: int, end: int) -> list[tuple[int, int]]:
    """Byte ranges read of a tensor stored at [begin, end)."""
    if end - begin <= 3 * _SAMPLE:
        return [(begin, end)]
    middle = begin + (end - begin - _SAMPLE) // 2
    return [(begin, begin + _SAMPLE), (middle, middle + _SAMPLE), (end - _SAMPLE, end)]


def _weight_files(directory: Path) -> list[Path]:
    """The files ``from_pretrained`` reads: ``model.safetensors`` if there is one (transformers
    looks for it first), else the shards of ``model.safetensors.index.json``; PEFT's alike."""
    files = []
    for prefix in _PREFIXES:
        single = directory / f"{prefix}.safetensors"
        index = directory / f"{prefix}.safetensors.index.json"
        if single.is_file():
            files.append(single)
        elif index.is_file():
            shards = set(json.loads(index.read_text())["weight_map"].values())
            files.extend(directory / name for name in sorted(shards))
    return files


def base_weights_digest(directory: Path) -> str | None:
    """SHA-256 over samples of the base tensors in ``directory``'s safetensors weight files.

    Parameters
    ----------
    directory : pathlib.Path
        A folder written by ``save_pretrained``.

    Returns
    -------
    str or None
        Hex digest; None when the folder holds no (readable) safetensors weight file.
    """
    entries = []
    try:
        for path in _weight_files(directory):
            with open(path, "rb") as f:
                n = int.from_bytes(f.read(8), "little")
                header = json.loads(f.read(n))
            for name, entry in header.items():
                if name != "__metadata__" and not _is_adapter_key(name):
                    entries.append((name, entry, path, 8 + n))
        if not entries:
            return None
        h = hashlib.sha256()
        handles: dict[Path, object] = {}
        try:
            for name, entry, path, start in sorted(entries, key=lambda e: e[0]):
                f = handles.get(path) or handles.setdefault(path, open(path, "rb"))  # noqa: SIM115
                h.update(f"{name}:{entry['dtype']}:{entry['shape']}".encode())
                begin, end = (int(x) for x in entry["data_offsets"])
                for a, b in _samples(begin, end):
                    f.seek(start + a)
                    h.update(f.read(b - a))
        finally:
            for f in handles.values():
                f.close()
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return None
    return h.hexdigest()


def stored_adapter_tensors(directory: Path) -> dict | None:
    """The adapters' entries of ``directory``'s safetensors weight files (an adapted model's
    ``save_pretrained`` writes them beside the base tensors), named from ``hrm_adapters.`` on.

    Parameters
    ----------
    directory : pathlib.Path

    Returns
    -------
    dict of str to torch.Tensor or None
        E.g. ``{"hrm_adapters.model.layers.0.mlp.adapter.gate": tensor}`` (only these tensors
        are read); None when the folder holds no readable weight file or no such entry.
    """
    try:
        from safetensors import safe_open
    except ImportError:  # pragma: no cover - safetensors comes with the hf extra
        return None
    marker = ADAPTERS_ATTR + "."
    out = {}
    try:
        for path in _weight_files(directory):
            with safe_open(str(path), framework="pt") as f:
                for name in f.keys():  # noqa: SIM118 - a safe_open handle, not a dict
                    if _is_adapter_key(name):
                        at = 0 if name.startswith(marker) else name.index("." + marker) + 1
                        out[name[at:]] = f.get_tensor(name)
    except (OSError, ValueError, KeyError, TypeError, RuntimeError):
        return None
    return out or None


def stale_adapter_tensors(directory: Path, layers, tensors: dict) -> list[str]:
    """Keys of an adapter checkpoint's ``tensors`` whose copy in ``directory``'s model weights
    differs (one of the two files was replaced without the other), in checkpoint order.

    Parameters
    ----------
    directory : pathlib.Path
    layers : iterable of str
        The checkpoint's adapted module names (``"model.layers.0.mlp"``).
    tensors : dict of str to torch.Tensor
        The checkpoint's tensors, ``"<module name>.<adapter key>"``.

    Returns
    -------
    list of str
        Empty when the weights hold no adapter entries or all agree bit for bit (a 0-dim gate
        of an older format compares equal to the same value of shape (1,)).
    """
    import torch

    stored = stored_adapter_tensors(directory)
    if not stored:
        return []
    differ = []
    for layer in layers:
        for key, value in tensors.items():
            if not key.startswith(layer + "."):
                continue
            other = stored.get(f"{ADAPTERS_ATTR}.{layer}.adapter.{key[len(layer) + 1:]}")
            if other is not None and not (
                    other.dtype == value.dtype and other.numel() == value.numel()
                    and torch.equal(other.reshape(value.shape), value)):
                differ.append(key)
    return differ
