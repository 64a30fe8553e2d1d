"""Default targets (``target_modules=None``) of two encoder families.

* T5 encoders (``T5EncoderModel``, ``UMT5EncoderModel``: text encoders of diffusion models,
  sentence-T5): their feed-forward ``DenseReluDense`` was listed among the candidates but not
  found, so ``inject`` raised TargetModulesNotFoundError with the default config; and
  ``UMT5EncoderModel``, which keeps its family's ``is_encoder_decoder=True`` without having a
  decoder, was refused as an encoder-decoder model whatever the targets.
* MobileBERT: its blocks hold ``ffn``, a ModuleList of feed-forward layers (never called), and
  the default rule took that list *and* the pair inside its layers, then refused its own choice
  with "`target_modules` selects nested modules ...; select one level", although the user
  selected nothing. A container is no feed-forward now: the pairs inside it and the block's own
  pair are the targets, and a width that is not the model's (MobileBERT's bottleneck) gets the
  ordinary AdapterShapeError.
"""

from __future__ import annotations

import pytest
import torch

from adapters import HRMConfig, disable_adapter, find_adapters, inject
from adapters.exceptions import AdapterShapeError
from adapters.targets import find_target_modules
from tests.adapters._tiny import perturbed

transformers = pytest.importorskip("transformers", reason="the 'hf' extra is not installed")

IDS = torch.tensor([[5, 9, 14, 3, 22, 41, 7, 30], [1, 2, 60, 33, 8, 19, 11, 4]])
MASK = torch.tensor([[1, 1, 1, 1, 1, 1, 0, 0], [1] * 8])  # row 0 right-padded


@pytest.mark.parametrize("family", ["T5", "UMT5"])
def test_t5_encoders_take_adapters_by_default(family):
    torch.manual_seed(0)
    config = getattr(transformers, f"{family}Config")(
        d_model=32, d_ff=64, num_layers=2, num_heads=2, d_kv=16, vocab_size=64, dropout_rate=0.0)
    model = getattr(transformers, f"{family}EncoderModel")(config).eval()
    with torch.no_grad():
        base = model(IDS, attention_mask=MASK).last_hidden_state
        inject(model, HRMConfig(d_state=4))
        assert list(find_adapters(model)) == ["encoder.block.0.layer.1.DenseReluDense",
                                              "encoder.block.1.layer.1.DenseReluDense"]
        assert torch.equal(model(IDS, attention_mask=MASK).last_hidden_state, base)
        perturbed(model)
        out = model(IDS, attention_mask=MASK).last_hidden_state
        assert (out - base).abs().max() > 0.1  # the branches act
        alone = model(IDS[:1, :6]).last_hidden_state  # the padding drives no state
        assert (out[0, :6] - alone[0]).abs().max() < 1e-5
        with disable_adapter(model):
            assert torch.equal(model(IDS, attention_mask=MASK).last_hidden_state, base)


def _mobilebert():
    torch.manual_seed(0)
    return transformers.MobileBertModel(transformers.MobileBertConfig(
        hidden_size=32, num_hidden_layers=2, num_attention_heads=2, intermediate_size=64,
        vocab_size=64, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0,
        max_position_embeddings=64, embedding_size=32, intra_bottleneck_size=16,
        num_feedforward_networks=2, true_hidden_size=16)).eval()


def test_mobilebert_default_targets_are_one_level_and_its_width_is_checked():
    model = _mobilebert()
    names = find_target_modules(model)
    assert sorted(names) == ["encoder.layer.0.ffn.0.output.dense", "encoder.layer.0.output.dense",
                             "encoder.layer.1.ffn.0.output.dense", "encoder.layer.1.output.dense"]
    # its feed-forward runs at the bottleneck width (16), not hidden_size (32)
    with pytest.raises(AdapterShapeError, match="reads 16 features, not the stream width H = 32"):
        inject(model, HRMConfig(d_state=4))
    with torch.no_grad():
        base = model(IDS, attention_mask=MASK).last_hidden_state
        inject(model, HRMConfig(d_state=4, d_model=16))
        assert len(find_adapters(model)) == 4
        assert torch.equal(model(IDS, attention_mask=MASK).last_hidden_state, base)
