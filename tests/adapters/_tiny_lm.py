"""Tiny randomly initialised causal LMs of four families (no downloads), for checkpoint tests.

``tiny_lm("llama")`` and ``tiny_lm("qwen2")`` have the same sizes, so only the fingerprint tells
them apart. Every model is dropout-free, in eval mode and seeded.
"""

from __future__ import annotations

import torch

KINDS = ("gpt2", "llama", "qwen2", "mistral")


def tiny_lm(kind: str = "llama", *, width: int = 32, layers: int = 2, vocab: int = 64,
            seed: int = 0, name_or_path: str | None = None):
    """A tiny ``*ForCausalLM`` of family ``kind`` (one of :data:`KINDS`)."""
    import transformers

    torch.manual_seed(seed)
    if kind == "gpt2":
        cfg = transformers.GPT2Config(n_layer=layers, n_embd=width, n_head=2, vocab_size=vocab,
                                      n_positions=128, resid_pdrop=0.0, embd_pdrop=0.0,
                                      attn_pdrop=0.0, bos_token_id=0, eos_token_id=0)
        model = transformers.GPT2LMHeadModel(cfg)
    else:
        classes = {"llama": (transformers.LlamaConfig, transformers.LlamaForCausalLM),
                   "qwen2": (transformers.Qwen2Config, transformers.Qwen2ForCausalLM),
                   "mistral": (transformers.MistralConfig, transformers.MistralForCausalLM)}
        config_cls, model_cls = classes[kind]
        cfg = config_cls(hidden_size=width, intermediate_size=2 * width, num_hidden_layers=layers,
                         num_attention_heads=2, num_key_value_heads=1, vocab_size=vocab,
                         max_position_embeddings=128, bos_token_id=0, eos_token_id=0,
                         tie_word_embeddings=False)
        model = model_cls(cfg)
    if name_or_path is not None:
        model.config._name_or_path = name_or_path
    return model.eval()
