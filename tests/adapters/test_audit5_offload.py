"""Big-model inference: ``from_pretrained(d, device_map=...)`` with a layer offloaded to disk.

accelerate keeps an offloaded layer's weights as meta tensors and loads them for each call
(its ``AlignDevicesHook``), so the layer computes on the hook's ``execution_device``. Before:
``inject`` built that layer's adapter on the meta device (the device of the target's first
weight), every write into it was a silent no-op, and the first forward failed with torch's
"Tensor on device meta is not on the expected device cpu!". The adapter is now built where
the target computes, so the offloaded model equals the same adapted model held in memory.
"""

from __future__ import annotations

import pytest
import torch

from adapters import (
    HRMConfig,
    calibrate,
    disable_adapter,
    find_adapters,
    inject,
    load_adapter,
    reduce,
    save_adapter,
)
from adapters.adapted import target_device
from tests.adapters._tiny import perturbed, tiny_causal_lm

transformers = pytest.importorskip("transformers", reason="the 'hf' extra is not installed")
pytest.importorskip("accelerate", reason="the 'hf' extra is not installed")

IDS = torch.tensor([[5, 9, 14, 3, 22, 41, 7], [1, 2, 60, 33, 8, 19, 11]])
# layer 1 on "disk": its weights are meta tensors, loaded from the offload folder per call
DEVICE_MAP = {"model.embed_tokens": "cpu", "model.layers.0": "cpu", "model.layers.1": "disk",
              "model.norm": "cpu", "model.rotary_emb": "cpu", "lm_head": "cpu"}


@pytest.fixture
def saved_base(tmp_path):
    tiny_causal_lm("llama").save_pretrained(tmp_path / "base")
    return tmp_path / "base"


def _offloaded(folder, tmp_path, name):
    return transformers.AutoModelForCausalLM.from_pretrained(
        folder, device_map=DEVICE_MAP, offload_folder=str(tmp_path / name)).eval()


def test_adapters_of_an_offloaded_layer_live_where_it_computes(saved_base, tmp_path):
    model = _offloaded(saved_base, tmp_path, "off")
    mlp = model.model.layers[1].mlp
    assert mlp.up_proj.weight.is_meta  # offloaded: the precondition of this test
    assert target_device(mlp) == torch.device("cpu")
    perturbed(inject(model, HRMConfig(d_state=8, gate_init=0.0)))
    devices = {name: {p.device.type for p in a.adapter.parameters()}
               for name, a in find_adapters(model).items()}
    assert devices == {"model.layers.0.mlp": {"cpu"}, "model.layers.1.mlp": {"cpu"}}

    ref = perturbed(inject(tiny_causal_lm("llama"), HRMConfig(d_state=8, gate_init=0.0)))
    with torch.no_grad():
        assert torch.equal(model(IDS).logits, ref(IDS).logits)
        with disable_adapter(model), disable_adapter(ref):
            assert torch.equal(model(IDS).logits, ref(IDS).logits)
        cached = model.generate(IDS, max_new_tokens=6, do_sample=False)
        assert torch.equal(cached, model.generate(IDS, max_new_tokens=6, do_sample=False,
                                                  use_cache=False))
        assert torch.equal(cached, ref.generate(IDS, max_new_tokens=6, do_sample=False))


def test_offloaded_model_saves_loads_calibrates_and_reduces(saved_base, tmp_path):
    model = perturbed(inject(_offloaded(saved_base, tmp_path, "off"), HRMConfig(d_state=8)))
    ref = perturbed(inject(tiny_causal_lm("llama"), HRMConfig(d_state=8)))
    save_adapter(model, tmp_path / "adapter")
    again = load_adapter(_offloaded(saved_base, tmp_path, "off2"), tmp_path / "adapter")
    batches = [{"input_ids": IDS}]
    reduce(model, order=3, gramian="data", stats=calibrate(model, batches, progress=False))
    reduce(ref, order=3, gramian="data", stats=calibrate(ref, batches, progress=False))
    with torch.no_grad():
        assert torch.equal(again(IDS).logits, load_adapter(tiny_causal_lm("llama"),
                                                           tmp_path / "adapter")(IDS).logits)
        assert torch.equal(model(IDS).logits, ref(IDS).logits)  # reduced alike
    model.train()
    model(IDS, labels=IDS).loss.backward()
    assert all(p.grad is not None and not p.grad.is_meta
               for p in model.parameters() if p.requires_grad)


def test_a_meta_module_without_an_accelerate_hook_stays_on_meta():
    # inject before the weights exist (init_empty_weights): load_adapter assigns the values
    with torch.device("meta"):
        model = tiny_causal_lm("llama")
    inject(model, HRMConfig(d_state=4))
    assert {p.device.type for a in find_adapters(model).values()
            for p in a.adapter.parameters()} == {"meta"}
