"""Tiny randomly initialised HF models shared by the adapter tests (no downloads)."""

from __future__ import annotations

import torch


def tiny_gpt2(*, width: int = 32, layers: int = 2, vocab: int = 64, seed: int = 0):
    """A dropout-free GPT-2 of the given width/depth in eval mode, seeded for reproducibility."""
    import transformers

    torch.manual_seed(seed)
    cfg = transformers.GPT2Config(n_layer=layers, n_embd=width, n_head=2, vocab_size=vocab,
                                  n_positions=128, resid_pdrop=0.0, embd_pdrop=0.0,
                                  attn_pdrop=0.0)
    return transformers.GPT2LMHeadModel(cfg).eval()
