"""An adapter checkpoint older than the adapter tensors in the model weights beside it is warned.

A Trainer with ``push_to_hub=True`` (hub_strategy "every_save", the default) pushes its output
folder at each save after copying into it only the model weights (``model.safetensors``,
``config.json``, ...) of the new ``checkpoint-N``; the adapter checkpoint there (from an
earlier ``save_model``) stays as it was. Before, ``load_adapter`` of such a folder silently
loaded those earlier adapters, although the weights file beside them held the new ones. It
now compares the two (only the adapters' entries of the weights are read) and warns.
"""

from __future__ import annotations

import shutil
import warnings

import pytest
import torch

from adapters import HRMConfig, find_adapters, inject, load_adapter, save_adapter
from tests.adapters._tiny import tiny_causal_lm

pytest.importorskip("transformers", reason="the 'hf' extra is not installed")

IDS = torch.tensor([[3, 14, 15, 9, 2, 6]])


def _trained_more(model):
    with torch.no_grad():
        for a in find_adapters(model).values():
            a.adapter.gate.add_(0.25)
    return model


def test_model_weights_newer_than_the_adapter_checkpoint_are_warned(tmp_path):
    model = inject(tiny_causal_lm("llama"), HRMConfig(d_state=4, gate_init=0.1))
    model.save_pretrained(tmp_path / "out")  # an earlier save_model(output_dir)
    _trained_more(model).save_pretrained(tmp_path / "checkpoint-4")
    # what Trainer._push_from_checkpoint does before pushing output_dir
    shutil.copy(tmp_path / "checkpoint-4" / "model.safetensors", tmp_path / "out")
    with pytest.warns(UserWarning, match="differ from its adapter checkpoint"):
        load_adapter(tiny_causal_lm("llama"), tmp_path / "out")
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the checkpoint folder itself is consistent
        again = load_adapter(tiny_causal_lm("llama"), tmp_path / "checkpoint-4")
    with torch.no_grad():
        assert torch.equal(again(IDS).logits, model(IDS).logits)


def test_consistent_folders_are_not_warned(tmp_path):
    model = inject(tiny_causal_lm("gpt2"), HRMConfig(d_state=4, gate_init=0.3))
    model.save_pretrained(tmp_path / "a", max_shard_size="20KB")  # sharded weights
    save_adapter(model, tmp_path / "b")  # no model weights beside it
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for folder in ("a", "b"):
            load_adapter(tiny_causal_lm("gpt2"), tmp_path / folder)
