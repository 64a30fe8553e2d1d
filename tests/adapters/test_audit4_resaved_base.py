"""``from_pretrained(d)`` without the adapters, changed and saved back into ``d``: the adapter
checkpoint an earlier ``save_pretrained`` of the adapted model left there is stale, and
``load_adapter(d)`` says so.

Before: ``load_adapter`` loaded the adapters trained with the earlier base weights without a
word (transformers' class method cannot know our files, so the save cannot remove them). The
checkpoint now records a digest of the base tensors it was saved beside; a re-save of the same
base weights (without the adapters' entries) still matches and is not warned.
"""

from __future__ import annotations

import warnings

import pytest
import torch

from adapters import HRMConfig, inject, load_adapter
from tests.adapters._tiny import tiny_causal_lm

transformers = pytest.importorskip("transformers", reason="the 'hf' extra is not installed")


@pytest.fixture(params=[{}, {"max_shard_size": "20KB"}], ids=["one file", "sharded"])
def folder(request, tmp_path):
    inject(tiny_causal_lm("llama"), HRMConfig(d_state=4, gate_init=0.3)).save_pretrained(
        tmp_path, **request.param)
    return tmp_path, request.param


def _reloaded(folder):
    return transformers.AutoModelForCausalLM.from_pretrained(folder).eval()


def test_a_base_changed_and_saved_back_warns_at_load_adapter(folder):
    folder, kw = folder
    plain = _reloaded(folder)
    with torch.no_grad():
        plain.model.layers[1].mlp.down_proj.weight.mul_(1.01)  # e.g. fine-tuned
    plain.save_pretrained(folder, **kw)
    with pytest.warns(UserWarning, match="base weights in .* were replaced"):
        load_adapter(_reloaded(folder), folder)


def test_the_same_base_saved_back_is_not_warned(folder):
    folder, kw = folder
    _reloaded(folder).save_pretrained(folder, **kw)  # the hrm_adapters.* entries are gone
    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)
        load_adapter(_reloaded(folder), folder)
