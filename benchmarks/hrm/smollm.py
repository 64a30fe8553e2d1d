"""SmolLM2-135M as a frozen backbone for adapter studies, with an exact hidden-state cache.

Everything below the first adapted block is frozen and unadapted, so its output -- the
hidden states entering block ``first`` -- is a fixed function of the input ids. It is
computed once per window (:func:`cache_hidden_states`) and the adapted top of the model
(blocks ``first..29``, final norm, LM head) runs on it (:class:`TopStack`). That this is exact
is checked against the full forward (:func:`check_cache_exact`).

Text: ``pydoc_data.topics`` (entries in sorted-key order joined by a blank line, as the
character corpus of the tiny backbone), split by characters into a contiguous head (90 %)
and tail (10 %, the held-out split whose BPC is reported). The last ``dev_fraction`` of the
head is the *dev* split used only to choose learning rates. Each split is tokenised on its
own with SmolLM2's tokenizer and cut into non-overlapping windows of ``seq_len`` tokens; the
characters each token covers come from the tokenizer's offsets, so BPC is total NLL in bits
over the characters of the predicted tokens (the first token of a window is not predicted).
"""

from __future__ import annotations

import contextlib
import hashlib
import os
from dataclasses import dataclass
from pathlib import Path

import torch
from torch import nn

__all__ = [
    "Windows",
    "TopStack",
    "load_model",
    "load_tokenizer",
    "text_splits",
    "make_windows",
    "cache_hidden_states",
    "check_cache_exact",
    "window_nll",
]

N_LAYERS = 30


def _loaders():
    try:  # the harness' home after issue 17
        from benchmarks.hrm.backbone import load_smollm2, load_smollm2_tokenizer
    except ImportError:
        from adapters.backbone import load_smollm2, load_smollm2_tokenizer
    return load_smollm2, load_smollm2_tokenizer


def load_model() -> nn.Module:
    """The frozen, dequantised SmolLM2-135M (float32, eval mode, no gradients)."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    return _loaders()[0]()


def load_tokenizer():
    """SmolLM2's tokenizer, read offline from the same GGUF file."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    return _loaders()[1]()


def text_splits(val_fraction: float = 0.1, dev_fraction: float = 0.1) -> dict[str, str]:
    """The pydoc text as ``{"train", "dev", "test"}`` strings (split by characters).

    ``test`` is the last ``val_fraction`` (the reported held-out split), ``dev`` the last
    ``dev_fraction`` of the rest (learning-rate pilots), ``train`` what remains.
    """
    from pydoc_data.topics import topics

    text = "\n\n".join(topics[key] for key in sorted(topics))
    cut = int(round(len(text) * (1.0 - val_fraction)))
    head, test = text[:cut], text[cut:]
    cut_dev = int(round(len(head) * (1.0 - dev_fraction)))
    return {"train": head[:cut_dev], "dev": head[cut_dev:], "test": test}


@dataclass
class Windows:
    """Non-overlapping token windows of one split.

    Attributes
    ----------
    ids : LongTensor (W, L)
    chars : LongTensor (W, L)
        Characters of the text each token covers (from the tokenizer's offsets).
    n_chars_text : int
        Length of the split's text (the sum of ``chars`` over all tokens, windows and the
        dropped tail, equals it when the offsets tile the text).
    """

    ids: torch.Tensor
    chars: torch.Tensor
    n_chars_text: int

    def __len__(self) -> int:
        return self.ids.shape[0]


def make_windows(tokenizer, text: str, seq_len: int = 256) -> Windows:
    """Tokenise ``text`` (no special tokens) and cut it into windows of ``seq_len`` tokens."""
    enc = tokenizer(text, add_special_tokens=False, return_offsets_mapping=True)
    ids = torch.tensor(enc["input_ids"], dtype=torch.long)
    offs = torch.tensor(enc["offset_mapping"], dtype=torch.long)
    # characters covered by each token: from the end of the previous token to this end, so the
    # counts tile the text even where offsets overlap (byte-level pieces of one character)
    ends = offs[:, 1].cummax(0).values
    chars = torch.diff(ends, prepend=torch.zeros(1, dtype=torch.long))
    n = (len(ids) // seq_len) * seq_len
    return Windows(ids[:n].view(-1, seq_len), chars[:n].view(-1, seq_len), len(text))


class _StopForwardError(Exception):
    """Raised by the hook on the first adapted block: the forward below it is all we need."""


@torch.no_grad()
def cache_hidden_states(model: nn.Module, ids: torch.Tensor, first: int, *,
                        batch_size: int = 8, progress: bool = True) -> torch.Tensor:
    """Hidden states entering block ``first`` for every window: (W, L, H) float32.

    The forward stops at block ``first`` (a pre-hook raises), so blocks ``first..`` and the
    head are never run here.
    """
    from tqdm.auto import tqdm

    layer = model.model.layers[first]
    got: list[torch.Tensor] = []

    def hook(module, args, kwargs):
        got.append((args[0] if args else kwargs["hidden_states"]).detach().clone())
        raise _StopForwardError

    handle = layer.register_forward_pre_hook(hook, with_kwargs=True)
    try:
        for i in tqdm(range(0, len(ids), batch_size), desc=f"cache blocks < {first}",
                      disable=not progress, leave=False):
            with contextlib.suppress(_StopForwardError):
                model(input_ids=ids[i:i + batch_size], use_cache=False)
    finally:
        handle.remove()
    return torch.cat(got)


class TopStack(nn.Module):
    """Blocks ``first..`` of a Llama model, its final norm and LM head, on cached states.

    ``forward(h)`` with ``h`` (B, L, H) the hidden states entering block ``first`` returns the
    logits (B, L, V), as ``model(input_ids).logits`` would (causal attention, positions
    ``0..L-1``, no padding). Adapters injected into ``model`` (HRM or peft LoRA) are part of it;
    ``model`` is held as the submodule ``lm`` (adapter names start with ``lm.``).
    """

    def __init__(self, model: nn.Module, first: int) -> None:
        super().__init__()
        self.lm = model
        self.first = first

    def _inner(self):
        base = self.lm
        # a peft wrapper: PeftModel.base_model (LoraModel).model is the LlamaForCausalLM
        while not hasattr(base, "lm_head") and hasattr(base, "base_model"):
            base = base.base_model
        while not hasattr(base, "lm_head") and hasattr(base, "model"):
            base = base.model
        return base

    def forward(self, h: torch.Tensor) -> torch.Tensor:
        causal = self._inner()
        inner = causal.model
        pos = torch.arange(h.shape[1], device=h.device).unsqueeze(0)
        pe = inner.rotary_emb(h, pos)
        for layer in inner.layers[self.first:]:
            out = layer(h, attention_mask=None, position_ids=pos, position_embeddings=pe)
            h = out[0] if isinstance(out, tuple) else out
        return causal.lm_head(inner.norm(h))


@torch.no_grad()
def check_cache_exact(model: nn.Module, ids: torch.Tensor, first: int) -> dict:
    """Max |logits(full forward) - logits(TopStack on the cache)| on ``ids`` (B, L)."""
    full = model(input_ids=ids, use_cache=False).logits
    h = cache_hidden_states(model, ids, first, batch_size=len(ids), progress=False)
    top = TopStack(model, first)(h)
    return {"max_abs_diff": float((full - top).abs().max()),
            "max_abs_logit": float(full.abs().max()),
            "identical": bool(torch.equal(full, top)), "windows": int(ids.shape[0]),
            "seq_len": int(ids.shape[1])}


def window_nll(logits: torch.Tensor, ids: torch.Tensor) -> torch.Tensor:
    """Per-position NLL in nats of ``ids[:, 1:]`` under ``logits[:, :-1]``: (B, L-1)."""
    return nn.functional.cross_entropy(
        logits[:, :-1].transpose(1, 2).float(), ids[:, 1:], reduction="none")


def digest(*parts) -> str:
    """12 hex characters of a hash of ``parts`` (their ``repr``)."""
    return hashlib.sha256(repr(parts).encode()).hexdigest()[:12]


def cache_dir() -> Path:
    """Folder for cached hidden states: ``$LTI_ADAPTERS_CACHE/smollm2-states`` (or ~/.cache)."""
    root = os.environ.get("LTI_ADAPTERS_CACHE")
    base = Path(root) if root else Path.home() / ".cache" / "lti-adapters"
    return base / "smollm2-states"
