"""Default targets of more architectures: feed-forwards named other than ``mlp`` and
mixture-of-experts blocks whose last linear layer is a router or a shared-expert gate.

Before, ``inject`` with the default ``target_modules=None`` refused Llama 4, MPT and
GraniteMoE (no module named ``mlp``: TargetModulesNotFoundError) and Qwen2-MoE / PhiMoE
(``'model.layers.0.mlp' returns 1 features``, read off the shared expert's gate H -> 1 or
the router H -> E), though each of them takes adapters when named explicitly.
"""

from __future__ import annotations

import pytest
import torch
from torch import nn

transformers = pytest.importorskip("transformers", reason="the 'hf' extra is not installed")

from adapters import HRMConfig, find_adapters, inject  # noqa: E402

W = 32
COMMON = dict(vocab_size=64, hidden_size=W, intermediate_size=2 * W, num_hidden_layers=2,
              num_attention_heads=2, num_key_value_heads=1, max_position_embeddings=64,
              pad_token_id=0, bos_token_id=1, eos_token_id=2)
CASES = {  # model_type: (extra config, expected target of block 0)
    "qwen2_moe": ({"moe_intermediate_size": W, "shared_expert_intermediate_size": W,
                   "num_experts": 4, "num_experts_per_tok": 2}, "model.layers.0.mlp"),
    "phimoe": ({"num_local_experts": 4}, "model.layers.0.mlp"),
    "llama4_text": ({"intermediate_size_mlp": 2 * W, "num_local_experts": 2, "head_dim": 16},
                    "model.layers.0.feed_forward"),
    "mpt": ({"d_model": W, "n_heads": 2, "n_layers": 2, "expansion_ratio": 2},
            "transformer.blocks.0.ffn"),
    "granitemoe": ({"num_local_experts": 2, "num_experts_per_tok": 1},
                   "model.layers.0.block_sparse_moe"),
}


def _tiny(kind: str):
    extra, _ = CASES[kind]
    cfg = transformers.AutoConfig.for_model(kind, **{**COMMON, **extra})
    torch.manual_seed(0)
    return transformers.AutoModelForCausalLM.from_config(cfg).eval()


@pytest.mark.parametrize("kind", sorted(CASES))
def test_default_targets_are_found_exact_at_init_and_generate_as_a_full_rerun(kind):
    model = _tiny(kind)
    ids = torch.randint(3, 64, (2, 6), generator=torch.Generator().manual_seed(0))
    mask = torch.ones_like(ids)
    mask[0, :2] = 0  # a left-padded row
    with torch.no_grad():
        base = model(ids, attention_mask=mask).logits
    inject(model, HRMConfig(d_state=4))
    names = list(find_adapters(model))
    assert names[0] == CASES[kind][1] and len(names) == 2
    with torch.no_grad():
        assert torch.equal(model(ids, attention_mask=mask).logits, base)
        for adapted in find_adapters(model).values():
            adapted.adapter.gate.fill_(0.5)
        assert not torch.equal(model(ids, attention_mask=mask).logits, base)
        kw = dict(attention_mask=mask, max_new_tokens=4, do_sample=False, pad_token_id=0)
        cached = model.generate(ids, **kw)
        full = model.generate(ids, use_cache=False, **kw)
    assert torch.equal(cached, full)


class _Both(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.mlp = nn.Linear(8, 8)
        self.ffn = nn.Linear(8, 8)

    def forward(self, x):
        return x + self.mlp(x) + self.ffn(x)


def test_a_block_takes_its_first_feed_forward_name_only():
    model = nn.Module()
    model.blocks = nn.ModuleList([_Both(), _Both()])
    model.forward = lambda x: model.blocks[1](model.blocks[0](x))
    inject(model, HRMConfig(d_state=2, d_model=8))
    assert list(find_adapters(model)) == ["blocks.0.mlp", "blocks.1.mlp"]


def _tiny_llava():
    vision = transformers.CLIPVisionConfig(hidden_size=16, intermediate_size=32,
                                           num_hidden_layers=1, num_attention_heads=2,
                                           image_size=16, patch_size=8)
    text = transformers.LlamaConfig(**{k: v for k, v in COMMON.items()
                                       if k != "max_position_embeddings"})
    torch.manual_seed(0)
    return transformers.LlavaForConditionalGeneration(transformers.LlavaConfig(
        vision_config=vision, text_config=text, image_token_index=63)).eval()


def test_a_vision_language_model_gets_adapters_in_its_language_model_only():
    # before: AdapterShapeError "'model.vision_tower.encoder.layers.0.mlp' reads 16 features,
    # not the stream width H = 32" (the vision tower's blocks were default targets too)
    model = _tiny_llava()
    ids = torch.tensor([[5, 63, 63, 63, 63, 7, 8, 9]])  # 4 image tokens: (16 / 8) ** 2 patches
    pixels = torch.randn(1, 3, 16, 16, generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        base = model(input_ids=ids, pixel_values=pixels).logits
    inject(model, HRMConfig(d_state=4))
    assert list(find_adapters(model)) == ["model.language_model.layers.0.mlp",
                                          "model.language_model.layers.1.mlp"]
    with torch.no_grad():
        assert torch.equal(model(input_ids=ids, pixel_values=pixels).logits, base)
        for adapted in find_adapters(model).values():
            adapted.adapter.gate.fill_(0.5)
        kw = dict(input_ids=ids, pixel_values=pixels, max_new_tokens=4, do_sample=False)
        assert torch.equal(model.generate(**kw), model.generate(use_cache=False, **kw))


def test_albert_s_ffn_ffn_output_pair_is_the_default_target():
    # ALBERT's `ffn` is a bare Linear(H, I), the first half of a pair: not a feed-forward block
    # (refused as "returns 64 features" once `ffn` became a default name); the pair is adapted
    cfg = transformers.AlbertConfig(vocab_size=64, embedding_size=16, hidden_size=W,
                                    intermediate_size=2 * W, num_hidden_layers=2,
                                    num_attention_heads=2, hidden_dropout_prob=0.0,
                                    attention_probs_dropout_prob=0.0)
    torch.manual_seed(0)
    model = transformers.AlbertModel(cfg).eval()
    ids = torch.randint(3, 64, (2, 8), generator=torch.Generator().manual_seed(0))
    mask = torch.ones_like(ids)
    mask[0, 5:] = 0
    with torch.no_grad():
        base = model(ids, attention_mask=mask).last_hidden_state
    inject(model, HRMConfig(d_state=4))
    block = "encoder.albert_layer_groups.0.albert_layers.0"  # one layer shared by all blocks
    assert list(find_adapters(model)) == [f"{block}.ffn_output"]
    with torch.no_grad():
        assert torch.equal(model(ids, attention_mask=mask).last_hidden_state, base)
        for adapted in find_adapters(model).values():
            adapted.adapter.gate.fill_(0.5)
        out = model(ids, attention_mask=mask).last_hidden_state
        alone = model(ids[:1, :5]).last_hidden_state
    assert not torch.equal(out, base)
    assert (out[0, :5] - alone[0]).abs().max() < 1e-5  # the padded row as if alone
