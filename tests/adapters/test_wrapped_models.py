"""Checkpoints, calibration and reduction of a model inside ``torch.compile`` /
``DataParallel`` / ``DistributedDataParallel`` wrappers name the model's own modules.

Before ``adapters/_wrappers.py``, ``save_adapter(torch.compile(model), d)`` wrote keys
``_orig_mod.model.layers.0.mlp...`` that no plain model loads, ``save_adapter(DDP(model))``
raised "no HRM adapters", and ``calibrate(DataParallel(model), ...)`` "counted no token".
"""

from __future__ import annotations

import pytest
import torch
import torch.distributed as dist
from torch import nn

from adapters import HRMConfig, calibrate, find_adapters, inject, load_adapter, reduce, save_adapter
from adapters._wrappers import unwrap_model
from adapters.io import WEIGHTS_NAME, adapter_state_dict, base_fingerprint
from tests.adapters._tiny import tiny_causal_lm

pytest.importorskip("transformers", reason="the 'hf' extra (transformers) is not installed")
IDS = torch.randint(1, 64, (2, 12), generator=torch.Generator().manual_seed(1))


def _adapted():
    model = inject(tiny_causal_lm("llama"), HRMConfig(d_state=8, gate_init=0.5))
    with torch.no_grad():
        for a in find_adapters(model).values():
            a.adapter.ssm.B.add_(0.1)
    return model


@pytest.fixture(scope="module")
def process_group(tmp_path_factory):
    if dist.is_initialized():  # one set up elsewhere in this session: DDP can use it
        yield
        return
    store = tmp_path_factory.mktemp("pg") / "store"
    dist.init_process_group("gloo", init_method=f"file://{store}", rank=0, world_size=1)
    yield
    dist.destroy_process_group()


WRAPPERS = {
    "compile": lambda m: torch.compile(m),  # not called: wrapping alone renames the modules
    "DataParallel": nn.DataParallel,  # CPU, no device: calls the module directly
    "compile(DataParallel)": lambda m: torch.compile(nn.DataParallel(m)),
    "DDP": "ddp",
}


def _wrap(how, model, request):
    if WRAPPERS[how] == "ddp":
        request.getfixturevalue("process_group")
        return nn.parallel.DistributedDataParallel(model)
    return WRAPPERS[how](model)


@pytest.mark.parametrize("how", WRAPPERS)
def test_a_wrapped_model_saves_and_loads_under_its_own_names(how, tmp_path, request):
    model = _adapted()
    wrapped = _wrap(how, model, request)
    assert unwrap_model(wrapped) is model
    want = adapter_state_dict(model)
    assert adapter_state_dict(wrapped).keys() == want.keys()
    assert base_fingerprint(wrapped) == base_fingerprint(model)
    save_adapter(wrapped, tmp_path)
    fresh = load_adapter(tiny_causal_lm("llama"), tmp_path)  # a plain model reads it
    got = adapter_state_dict(fresh)
    assert got.keys() == want.keys() and all(torch.equal(got[k], want[k]) for k in want)

    for target in (tiny_causal_lm("llama"),  # a base model, adapted by the load
                   inject(tiny_causal_lm("llama"), HRMConfig(d_state=8))):
        into = _wrap(how, target, request)
        assert load_adapter(into, tmp_path) is into
        got = adapter_state_dict(target)
        assert all(torch.equal(got[k], want[k]) for k in want)
    assert (tmp_path / WEIGHTS_NAME).is_file()


def test_calibrate_and_reduce_through_data_parallel_equal_the_plain_model():
    plain, model = _adapted(), _adapted()
    batches = [IDS, IDS[:, :7]]
    stats_plain = calibrate(plain, batches, progress=False)
    stats = calibrate(nn.DataParallel(model), batches, progress=False)
    a, b = stats_plain.state_dict()["arrays"], stats.state_dict()["arrays"]
    assert a.keys() == b.keys() and all((a[k] == b[k]).all() for k in a)
    reduce(plain, stats=stats_plain, order=4, gramian="data")
    reduce(nn.DataParallel(model), stats=stats, order=4, gramian="data")
    with torch.no_grad():
        assert torch.equal(model(IDS).logits, plain(IDS).logits)
    assert {k: a.adapter.d_state for k, a in find_adapters(model).items()} == {
        k: a.adapter.d_state for k, a in find_adapters(plain).items()}


def test_a_model_adapted_inside_its_compile_wrapper_round_trips(tmp_path):
    """``inject(torch.compile(model))`` puts the adapters on the wrapper: they are saved and
    loaded from there (not looked for inside, where there are none)."""
    model = inject(torch.compile(tiny_causal_lm("llama")), HRMConfig(d_state=8, gate_init=0.5))
    save_adapter(model, tmp_path)
    into = inject(torch.compile(tiny_causal_lm("llama", seed=1)), HRMConfig(d_state=8))
    load_adapter(into, tmp_path)
    want, got = adapter_state_dict(model), adapter_state_dict(into)
    assert got.keys() == want.keys() and all(torch.equal(got[k], want[k]) for k in want)


def test_adapters_built_on_the_meta_device_are_loaded_not_left_empty(tmp_path):
    """Low-memory loading: the model and its adapters built on ``meta``, the base weights
    assigned, then ``load_adapter``; a copy into a meta tensor would be a silent no-op.
    (GPT-2: no non-persistent buffers, which a state dict does not restore.)"""
    source = inject(tiny_causal_lm("gpt2"), HRMConfig(d_state=8, gate_init=0.5))
    save_adapter(source, tmp_path)
    with torch.device("meta"):
        model = tiny_causal_lm("gpt2")
    inject(model, HRMConfig(d_state=8))
    model.load_state_dict(tiny_causal_lm("gpt2").state_dict(), assign=True, strict=False)
    load_adapter(model, tmp_path)
    assert {t.device.type for t in [*model.parameters(), *model.buffers()]} == {"cpu"}
    want, got = adapter_state_dict(source), adapter_state_dict(model)
    assert all(torch.equal(got[k], want[k]) for k in want)
    with torch.no_grad():
        assert torch.equal(model(IDS).logits, source(IDS).logits)
    trainable = [p for p in model.parameters() if p.requires_grad]
    assert trainable and all(n.startswith("hrm_adapters.") for n, p in model.named_parameters()
                             if p.requires_grad)
    model(IDS, labels=IDS).loss.backward()
    assert all(p.grad is not None for p in trainable)


def test_lora_from_peft_on_top_of_the_adapters_keeps_the_model_s_names(tmp_path):
    """``peft.get_peft_model(inject(model), LoraConfig(...))`` (LoRA on the attention): the
    adapter checkpoint names ``model.layers.0.mlp``, not ``base_model.model.model...``."""
    peft = pytest.importorskip("peft", reason="peft (the 'hf' extra) is not installed")
    model = _adapted()
    lora = peft.get_peft_model(model, peft.LoraConfig(r=4, target_modules=["q_proj", "v_proj"],
                                                      init_lora_weights=False))
    assert unwrap_model(lora) is model
    save_adapter(lora, tmp_path / "hrm")
    lora.save_pretrained(tmp_path / "lora")
    want = adapter_state_dict(model)
    plain = load_adapter(tiny_causal_lm("llama"), tmp_path / "hrm")
    got = adapter_state_dict(plain)
    assert got.keys() == want.keys() and all(torch.equal(got[k], want[k]) for k in want)
    both = load_adapter(peft.PeftModel.from_pretrained(tiny_causal_lm("llama"), tmp_path / "lora"),
                        tmp_path / "hrm")
    with torch.no_grad():
        assert torch.equal(both(input_ids=IDS).logits, lora(input_ids=IDS).logits)
