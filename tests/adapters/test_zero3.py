"""DeepSpeed ZeRO-3 partitions parameters: a rank's ``param.data`` is then a shard (often
empty) and the full shape is in ``param.ds_shape``. An adapter checkpoint written from that
state would hold empty tensors (seen with deepspeed 0.19.8 on CPU, persistence threshold 0),
so saving refuses it with a typed error that says how to gather first. Simulated here by
setting the two attributes the way ZeRO-3 does (deepspeed is not a dependency)."""

from __future__ import annotations

import pytest
import torch

from adapters import HRMConfig, find_adapters, inject, load_adapter, save_adapter
from adapters.exceptions import CheckpointError
from adapters.io import WEIGHTS_NAME, adapter_state_dict
from tests.adapters._tiny_lm import tiny_lm

pytest.importorskip("transformers", reason="extra 'hf' not installed")
pytest.importorskip("safetensors", reason="extra 'hf' not installed")


def _adapter_params(model):
    return [p for a in find_adapters(model).values() for p in a.adapter.parameters()]


def test_partitioned_adapters_are_refused_and_nothing_is_written(tmp_path):
    model = inject(tiny_lm("llama"), HRMConfig(d_state=4, gate_init=0.3))
    params = _adapter_params(model)
    full = [p.data for p in params]
    for p in params:  # what ZeRO-3 leaves outside a gathered region
        p.ds_shape = p.shape
        p.data = torch.empty(0, dtype=p.dtype)
    with pytest.raises(CheckpointError, match=r"partitioned by DeepSpeed ZeRO-3.*GatheredParam"):
        save_adapter(model, tmp_path)
    assert not (tmp_path / WEIGHTS_NAME).exists()
    with pytest.raises(CheckpointError, match="ZeRO-3"):
        model.save_pretrained(tmp_path / "hf")  # the writer behind a Trainer's checkpoints

    for p, data in zip(params, full, strict=True):  # gathered: the full tensors are local
        p.data = data
    want = adapter_state_dict(model)  # ds_shape equal to the local shape: no error
    save_adapter(model, tmp_path)
    got = adapter_state_dict(load_adapter(tiny_lm("llama"), tmp_path))
    assert all(torch.equal(got[k], want[k]) for k in want)
