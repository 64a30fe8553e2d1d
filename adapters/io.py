"""Adapter-only checkpoints: ``adapter_config.json`` + ``adapter_model.safetensors``.

Only the adapters' tensors are written (keys ``"<module name>.<adapter tensor>"``, e.g.
``"model.layers.0.mlp.ssm.B"``), through safetensors: loading never unpickles. The JSON holds
the :class:`~adapters.HRMConfig`, the per-layer structure (width, real/complex mode counts:
reduced adapters differ per layer), every tensor's shape and dtype, and the SHA-256 of the
weights file, so a tampered or mismatched checkpoint raises :class:`CheckpointError`.

:class:`AdapterTrainerMixin` makes HF ``Trainer`` checkpoints adapter-only.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import Any

import torch
from torch import nn

from adapters.config import FORMAT_VERSION, HRMConfig
from adapters.exceptions import AdapterConfigError, AdapterError, CheckpointError
from adapters.inject import find_adapters, get_adapter_config, inject, remove

__all__ = [
    "CONFIG_NAME",
    "WEIGHTS_NAME",
    "save_adapter",
    "load_adapter",
    "adapter_state_dict",
    "AdapterTrainerMixin",
]

CONFIG_NAME = "adapter_config.json"
WEIGHTS_NAME = "adapter_model.safetensors"
_DTYPES = {"float32": torch.float32, "float64": torch.float64, "float16": torch.float16,
           "bfloat16": torch.bfloat16}


def _require_safetensors():
    try:
        import safetensors.torch as st
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise ImportError(
            'adapter checkpoints need safetensors: `pip install "lti-adapters[hf]"`'
        ) from exc
    return st


def _dtype_name(dtype: torch.dtype) -> str:
    return str(dtype).removeprefix("torch.")


def adapter_state_dict(model: nn.Module) -> dict[str, torch.Tensor]:
    """The adapters' tensors only: ``{"<module name>.<key>": tensor}`` (detached, on CPU).

    Parameters
    ----------
    model : nn.Module
        A model adapted by :func:`adapters.inject`.

    Returns
    -------
    dict of str to torch.Tensor
    """
    out = {}
    for name, adapted in find_adapters(model).items():
        for key, value in adapted.adapter.state_dict().items():
            out[f"{name}.{key}"] = value.detach().to("cpu").contiguous()
    return out


def _layer_meta(adapted: nn.Module) -> dict[str, Any]:
    ssm = adapted.adapter.ssm
    return {"d_model": int(ssm.d_model), "n_real": int(ssm.n_real),
            "n_complex": int(ssm.n_complex), "scan": ssm.scan}


def save_adapter(model: nn.Module, directory: str | os.PathLike) -> Path:
    """Write the adapters of ``model`` to ``directory`` (created if needed).

    Parameters
    ----------
    model : nn.Module
        A model adapted by :func:`adapters.inject` (reduced adapters included).
    directory : str or path-like
        Output directory; created if missing, existing files of the same names overwritten.

    Returns
    -------
    pathlib.Path
        The directory, holding ``adapter_config.json`` and ``adapter_model.safetensors``.

    Raises
    ------
    AdapterError
        ``model`` has no adapters.
    """
    st = _require_safetensors()
    config = get_adapter_config(model)
    adapters = find_adapters(model)
    tensors = adapter_state_dict(model)
    directory = Path(directory)
    directory.mkdir(parents=True, exist_ok=True)
    weights = directory / WEIGHTS_NAME
    st.save_file(tensors, str(weights), metadata={"format": "pt", "adapter_type": "HRM"})
    meta = {
        "config": config.to_dict(),
        "format_version": FORMAT_VERSION,
        "layers": {name: _layer_meta(a) for name, a in adapters.items()},
        "tensors": {k: {"shape": list(v.shape), "dtype": _dtype_name(v.dtype)}
                    for k, v in tensors.items()},
        "weights_sha256": hashlib.sha256(weights.read_bytes()).hexdigest(),
    }
    (directory / CONFIG_NAME).write_text(json.dumps(meta, indent=2, sort_keys=True) + "\n")
    return directory


def _read_checkpoint(directory: Path) -> tuple[dict[str, Any], HRMConfig, dict[str, torch.Tensor]]:
    st = _require_safetensors()
    config_path, weights_path = directory / CONFIG_NAME, directory / WEIGHTS_NAME
    for path in (config_path, weights_path):
        if not path.is_file():
            raise CheckpointError(f"adapter checkpoint file {str(path)!r} is missing")
    try:
        meta = json.loads(config_path.read_text())
        layers, listing = meta["layers"], meta["tensors"]
        digest = meta["weights_sha256"]
        config = HRMConfig.from_dict(meta["config"])
        if not isinstance(layers, dict) or not isinstance(listing, dict):
            raise TypeError("`layers` and `tensors` must be objects")
    except (json.JSONDecodeError, KeyError, TypeError, AdapterConfigError) as exc:
        raise CheckpointError(f"{str(config_path)!r} is not a valid adapter config: {exc}") from exc
    actual = hashlib.sha256(weights_path.read_bytes()).hexdigest()
    if actual != digest:
        raise CheckpointError(
            f"{WEIGHTS_NAME!r} does not match the SHA-256 recorded in {CONFIG_NAME!r} "
            f"(recorded {digest[:12]}..., file {actual[:12]}...): the file was changed or "
            "belongs to another checkpoint"
        )
    try:
        tensors = st.load_file(str(weights_path))
    except Exception as exc:  # safetensors raises its own SafetensorError / OSError
        raise CheckpointError(f"{str(weights_path)!r} could not be read: {exc}") from exc
    listed = {k: (tuple(v["shape"]), v["dtype"]) for k, v in listing.items()}
    stored = {k: (tuple(v.shape), _dtype_name(v.dtype)) for k, v in tensors.items()}
    if listed != stored:
        diff = sorted(set(listed.items()) ^ set(stored.items()))
        raise CheckpointError(f"{WEIGHTS_NAME!r} does not match its listing in {CONFIG_NAME!r}: "
                              f"{diff[:10]}")
    return layers, config, tensors


def _placeholder_ssm(meta: dict[str, Any], dtype: torch.dtype, device: torch.device) -> nn.Module:
    """A DiagonalSSM of the stored structure (values are overwritten by the checkpoint)."""
    from adapters.ssm import DiagonalSSM

    n_real, n_cplx, width = meta["n_real"], meta["n_complex"], meta["d_model"]
    n = n_real + n_cplx
    a = torch.full((n,), 0.5, dtype=torch.complex128)
    a[n_real:] += 0.25j
    b = torch.ones(n, width, dtype=torch.complex128)  # B̄ (N, H)
    b[n_real:] += 1j
    c = torch.ones(width, n, dtype=torch.complex128)  # C (H, N)
    c[:, n_real:] += 1j
    real = torch.arange(n) < n_real
    return DiagonalSSM.from_discrete(a, b, c, real_modes=real.numpy(), scan=meta["scan"],
                                     device=device, dtype=dtype)


def _structure(adapted: nn.Module) -> tuple:
    meta = _layer_meta(adapted)
    return meta["d_model"], meta["n_real"], meta["n_complex"]


def load_adapter(model: nn.Module, directory: str | os.PathLike) -> nn.Module:
    """Load adapters saved by :func:`save_adapter` into ``model`` (in place).

    A base model is adapted first with the stored config; layers whose stored structure (state
    size, real/complex modes) differs from the model's adapters get a matching (e.g. reduced)
    SSM. Every key, shape and dtype is then checked strictly before any value is copied.

    Parameters
    ----------
    model : nn.Module
        The base model, or one adapted with a compatible config.
    directory : str or path-like
        A directory written by :func:`save_adapter`.

    Returns
    -------
    nn.Module
        ``model``, whose adapters now hold the checkpoint's values bit for bit.

    Raises
    ------
    CheckpointError
        Missing or unreadable files, a checksum mismatch, a config the model's adapters were
        not built with, or missing / unexpected / mismatched keys (all named). A base model
        is left unadapted.
    """
    layers, config, tensors = _read_checkpoint(Path(directory))
    injected_here = False
    if not find_adapters(model):
        try:
            inject(model, config)
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
    return model


def _load_into(model: nn.Module, config: HRMConfig, layers: dict[str, Any],
               tensors: dict[str, torch.Tensor]) -> None:
    current = get_adapter_config(model)
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
            swaps[name] = _placeholder_ssm(meta, p.dtype, p.device)
    expected = {}
    for name, adapted in adapters.items():
        source = adapted.adapter.state_dict()
        if name in swaps:
            source = {"gate": source["gate"],
                      **{f"ssm.{k}": v for k, v in swaps[name].state_dict().items()}}
        for key, value in source.items():
            expected[f"{name}.{key}"] = (tuple(value.shape), _dtype_name(value.dtype))
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
        adapters[name].adapter.ssm = ssm
    with torch.no_grad():
        for name, adapted in adapters.items():
            state = adapted.adapter.state_dict(keep_vars=True)
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
