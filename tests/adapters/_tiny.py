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


def tiny_causal_lm(kind: str, *, width: int = 32, layers: int = 2, vocab: int = 64, seed: int = 0):
    """A tiny random decoder in eval mode: ``kind`` in gpt2, llama, qwen2, mistral, opt."""
    import transformers

    if kind == "gpt2":
        return tiny_gpt2(width=width, layers=layers, vocab=vocab, seed=seed)
    torch.manual_seed(seed)
    if kind == "opt":
        cfg = transformers.OPTConfig(hidden_size=width, ffn_dim=2 * width, num_hidden_layers=layers,
                                     num_attention_heads=2, vocab_size=vocab,
                                     word_embed_proj_dim=width, max_position_embeddings=128,
                                     dropout=0.0, attention_dropout=0.0, pad_token_id=0,
                                     bos_token_id=0, eos_token_id=0)
        return transformers.OPTForCausalLM(cfg).eval()
    name = {"llama": "Llama", "qwen2": "Qwen2", "mistral": "Mistral"}[kind]
    cfg = getattr(transformers, f"{name}Config")(
        hidden_size=width, intermediate_size=2 * width, num_hidden_layers=layers,
        num_attention_heads=2, num_key_value_heads=1, vocab_size=vocab, bos_token_id=0,
        eos_token_id=0)
    return getattr(transformers, f"{name}ForCausalLM")(cfg).eval()


def perturbed(model):
    """`model` with every adapter's gate and input/output maps moved away from their initial
    values (gate 0.6 + 0.1 i, B and C plus 0.5 N(0, 1) from seed i, for the i-th adapter):
    the same on every model of one architecture, so adapted models can be compared."""
    from adapters import find_adapters

    with torch.no_grad():
        for i, adapted in enumerate(find_adapters(model).values()):
            adapted.adapter.gate.fill_(0.6 + 0.1 * i)
            g = torch.Generator().manual_seed(i)
            for p in (adapted.adapter.ssm.B, adapted.adapter.ssm.C):
                p.add_(torch.randn(p.shape, generator=g) * 0.5)
    return model
