"""What an adapted model's ``save_pretrained`` (and a PEFT wrapper's ``load_adapter``) add.

:func:`adapters.inject` sets ``save_pretrained`` on the adapted model — and, when it adapts the
model inside a PEFT ``PeftModel``, ``save_pretrained`` and ``load_adapter`` on that wrapper — as
instance attributes that call the class's method and then the registered writers (readers).
:mod:`adapters.io` registers a writer (:func:`adapters.save_adapter`'s checkpoint, marked as
written by ``save_pretrained``) and a reader of the folder it writes, so a plain
``transformers.Trainer`` — whose checkpoints, resume and ``load_best_model_at_end`` of a
PeftModel go through PEFT's ``save_pretrained`` / ``load_adapter`` — keeps the HRM adapters
beside LoRA's.

:func:`adapters.remove` sets ``save_pretrained`` (the model's, a PEFT wrapper's) to
:func:`save_pretrained_without_adapters`: the class's method, then the registered cleaners.
:mod:`adapters.io` registers one that deletes the adapter checkpoint an earlier
``save_pretrained`` wrote into that folder (the folder then describes the model saved, which
has no adapters; a later ``load_adapter`` of it must not bring the removed adapters back), as
transformers deletes its own stale weight shards. A checkpoint written by
:func:`adapters.save_adapter` itself is the user's and is kept, with a warning.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from adapters.targets import ADAPTERS_ATTR

__all__ = [
    "register_checkpoint_writer",
    "register_checkpoint_reader",
    "save_pretrained_with_adapters",
    "load_adapter_with_adapters",
    "register_checkpoint_cleaner",
    "save_pretrained_without_adapters",
    "warn_if_wrapped_by_peft_after_inject",
]

_CHECKPOINT_WRITERS: list[Callable[..., object]] = []
_CHECKPOINT_READERS: list[Callable[..., object]] = []
_CHECKPOINT_CLEANERS: list[Callable[..., object]] = []
_UPLOAD = "_upload_modified_files"  # transformers' PushToHubMixin: uploads a folder's new files


def register_checkpoint_writer(writer: Callable[..., object]) -> None:
    """Have an adapted model's ``save_pretrained(d)`` also call ``writer(model, d)``.

    :mod:`adapters.io` registers :func:`adapters.save_adapter`'s writer when it is imported
    (it is by ``import adapters``), so that every ``save_pretrained`` folder — a plain
    ``transformers.Trainer``'s checkpoints included — holds an adapter checkpoint.

    Parameters
    ----------
    writer : callable
        ``writer(model, directory)``, or ``writer(model, directory, state_dict=sd)`` when
        ``save_pretrained`` was given a ``state_dict`` (a Trainer under DeepSpeed ZeRO-3 passes
        the gathered one); registered once (a second registration is ignored).
    """
    if writer not in _CHECKPOINT_WRITERS:
        _CHECKPOINT_WRITERS.append(writer)


def register_checkpoint_reader(reader: Callable[..., object]) -> None:
    """Have a PEFT wrapper's ``load_adapter(d, ...)`` also call ``reader(model, d)``.

    Parameters
    ----------
    reader : callable
        ``reader(model, directory)``; registered once.
    """
    if reader not in _CHECKPOINT_READERS:
        _CHECKPOINT_READERS.append(reader)


def register_checkpoint_cleaner(cleaner: Callable[..., object]) -> None:
    """Have a removed model's ``save_pretrained(d)`` also call ``cleaner(d)``.

    Parameters
    ----------
    cleaner : callable
        ``cleaner(directory)``; registered once.
    """
    if cleaner not in _CHECKPOINT_CLEANERS:
        _CHECKPOINT_CLEANERS.append(cleaner)


def _adapter_keys(state: dict) -> dict:
    """The adapters' entries of a state dict, named from ``hrm_adapters.`` on (a wrapper's
    state dict prefixes them, e.g. ``base_model.model.hrm_adapters...``)."""
    marker = ADAPTERS_ATTR + "."
    out = {}
    for k, v in state.items():
        at = 0 if k.startswith(marker) else k.find("." + marker) + 1
        if at or k.startswith(marker):
            out[k[at:]] = v
    return out


def save_pretrained_with_adapters(self, save_directory, *args, **kwargs):
    """``save_pretrained`` of the model's (or wrapper's) class, then the adapter checkpoint.

    With ``push_to_hub=True`` transformers uploads the folder's new files at the end of its own
    ``save_pretrained``; the adapter checkpoint is written just before that upload (through the
    instance's ``_upload_modified_files``), so the hub repository gets it too.
    """
    state = kwargs.get("state_dict")  # e.g. gathered from ZeRO-3 partitions by a Trainer
    extra = {} if state is None else {"state_dict": _adapter_keys(state)}  # (HF empties it)
    written = []

    def write() -> None:
        if not written:
            written.append(True)
            for writer in _CHECKPOINT_WRITERS:
                writer(self, Path(save_directory), **extra)

    upload = getattr(type(self), _UPLOAD, None)
    if kwargs.get("push_to_hub") and callable(upload):
        def write_then_upload(*a, **k):
            write()
            return upload(self, *a, **k)

        object.__setattr__(self, _UPLOAD, write_then_upload)
    try:
        out = type(self).save_pretrained(self, save_directory, *args, **kwargs)
    finally:
        self.__dict__.pop(_UPLOAD, None)
    if kwargs.get("is_main_process", True):
        write()
    return out


def save_pretrained_without_adapters(self, save_directory, *args, **kwargs):
    """``save_pretrained`` of the class, then the cleaners (a model whose adapters were removed:
    the folder must not keep an adapter checkpoint of an earlier save beside the new weights)."""
    out = type(self).save_pretrained(self, save_directory, *args, **kwargs)
    if kwargs.get("is_main_process", True):
        for cleaner in _CHECKPOINT_CLEANERS:
            cleaner(Path(save_directory))
    return out


def warn_if_wrapped_by_peft_after_inject(runtime, model) -> None:
    """Warn once when PEFT wrapped the adapted model *after* :func:`adapters.inject`.

    ``peft.get_peft_model`` freezes every parameter that is not its own (the HRM adapters'
    included) and its ``save_pretrained`` — so a ``Trainer``'s checkpoints — writes its own
    adapter only: trained HRM adapters would be missing from every checkpoint without a word.
    PEFT marks the model it wraps with a ``peft_config`` attribute; :func:`adapters.inject` of
    the PeftModel (LoRA first) binds the wrapper (``runtime.wrapper``) and is not warned.
    Called by the adapted model's forward pre-hook on training calls.
    """
    if getattr(runtime, "peft_checked", False):
        return
    runtime.peft_checked = True
    if ("peft_config" not in model.__dict__ or getattr(runtime, "wrapper", None) is not None
            or getattr(model, "_hf_peft_config_loaded", False)):
        return  # (transformers' own PEFT integration, model.load_adapter: no wrapper; the
        # model's save_pretrained, ours, writes the HRM checkpoint beside LoRA's)
    import warnings

    params = [p for a in runtime.adapted.values() for p in a.adapter.parameters()]
    trainable = sum(p.requires_grad for p in params)
    warnings.warn(
        "this model got its HRM adapters before a PEFT wrapper (peft.get_peft_model) was put "
        f"around it: {trainable} of {len(params)} adapter parameters are trainable (PEFT "
        "freezes what is not its own), and the PeftModel's save_pretrained, so a Trainer's "
        "checkpoints, will not hold the HRM adapters. Wrap with PEFT first and call "
        "adapters.inject on the PeftModel (its save_pretrained / load_adapter then keep both), "
        "or save them with adapters.save_adapter(model, folder)",
        UserWarning, stacklevel=2)


def load_adapter_with_adapters(self, model_id, *args, **kwargs):
    """PEFT's ``load_adapter`` (LoRA's weights), then the HRM adapters saved beside them."""
    out = type(self).load_adapter(self, model_id, *args, **kwargs)
    for reader in _CHECKPOINT_READERS:
        reader(self, model_id)
    return out
