"""An adapted model survives ``copy.deepcopy``, ``pickle`` and ``torch.save(model)`` whole:
the copy computes the same logits and generations, its ``save_pretrained`` still writes the
adapter checkpoint, and changing the copy leaves the original alone."""

from __future__ import annotations

import copy
import io
import pickle

import pytest
import torch

from adapters import HRMConfig, find_adapters, inject, load_adapter, remove
from adapters.io import WEIGHTS_NAME, adapter_state_dict
from tests.adapters._tiny import tiny_causal_lm

pytest.importorskip("transformers", reason="the 'hf' extra (transformers) is not installed")

IDS = torch.randint(1, 64, (2, 9), generator=torch.Generator().manual_seed(1))


def _adapted(kind):
    model = inject(tiny_causal_lm(kind), HRMConfig(d_state=4, gate_init=0.5))
    with torch.no_grad():
        for a in find_adapters(model).values():
            a.adapter.ssm.B.add_(0.1)  # not the initial values
    return model


def _logits(model):
    with torch.no_grad():
        return model(IDS).logits


def _pickled(model):
    return pickle.loads(pickle.dumps(model))


def _torch_saved(model):
    buffer = io.BytesIO()
    torch.save(model, buffer)
    buffer.seek(0)
    return torch.load(buffer, weights_only=False)


COPIES = {"deepcopy": copy.deepcopy, "pickle": _pickled, "torch.save": _torch_saved}
CASES = list(COPIES)


@pytest.mark.parametrize("how", CASES)
@pytest.mark.parametrize("kind", ["gpt2", "llama"])
def test_a_copied_adapted_model_is_the_same_model(kind, how, tmp_path):
    model = _adapted(kind)
    want, prompt = _logits(model), IDS[:1, :5]
    generated = model.generate(prompt, max_new_tokens=4, do_sample=False)
    twin = COPIES[how](model)
    assert torch.equal(_logits(twin), want)
    assert torch.equal(twin.generate(prompt, max_new_tokens=4, do_sample=False), generated)
    twin.save_pretrained(tmp_path)  # still writes the adapter checkpoint beside the model
    assert (tmp_path / WEIGHTS_NAME).is_file()
    fresh = load_adapter(tiny_causal_lm(kind), tmp_path)
    saved, live = adapter_state_dict(fresh), adapter_state_dict(model)
    assert all(torch.equal(saved[k], live[k]) for k in live)
    with torch.no_grad():  # the copy's adapters are its own
        for a in find_adapters(twin).values():
            a.adapter.gate.fill_(0.0)
    assert torch.equal(_logits(model), want)
    assert torch.equal(_logits(twin), _logits(remove(copy.deepcopy(model))))
    remove(twin)
    assert vars(twin)["save_pretrained"].args == (twin,)  # the copy's own, not the original's
