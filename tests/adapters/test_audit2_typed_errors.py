"""Bad arguments to the public functions raise the package's typed errors, naming the value.

Before: ``save_adapter(None, d)``, ``load_adapter("x", d)``, ``remove(None)``,
``find_adapters(None)``, ``disable_adapter(None)``, ``get_adapter_config(None)``,
``print_trainable_parameters(None)``: ``AttributeError: 'NoneType' object has no attribute
'_modules'``; ``save_adapter(model, None)``: ``TypeError: expected str, bytes or os.PathLike
object``; ``load_adapter(model, <the weights file>)``: "'.../hrm_adapter.safetensors/
hrm_adapter.safetensors' is missing"; ``calibrate(model, ids)`` (a tensor, not a list of
batches): a raw ``RuntimeError`` from inside the model; ``calibrate(model, None)``:
``TypeError``; ``reduce(..., stats="x")``: "has no statistics for adapter";
``allow_base_mismatch="yes"`` and ``measure="yes"`` were taken as true.
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
    print_trainable_parameters,
    reduce,
    remove,
    save_adapter,
)
from adapters.exceptions import AdapterConfigError, CheckpointError
from adapters.injection import get_adapter_config
from adapters.io import WEIGHTS_NAME
from tests.adapters._tiny import tiny_causal_lm

pytest.importorskip("transformers", reason="the 'hf' extra (transformers) is not installed")
IDS = torch.randint(1, 64, (2, 7), generator=torch.Generator().manual_seed(0))


@pytest.fixture(scope="module")
def saved(tmp_path_factory):
    model = inject(tiny_causal_lm("llama"), HRMConfig(d_state=4, gate_init=0.5))
    folder = tmp_path_factory.mktemp("ckpt")
    save_adapter(model, folder)
    return model, folder


NOT_A_MODEL = {
    "save_adapter": lambda x, d: save_adapter(x, d),
    "load_adapter": lambda x, d: load_adapter(x, d),
    "remove": lambda x, d: remove(x),
    "find_adapters": lambda x, d: find_adapters(x),
    "disable_adapter": lambda x, d: disable_adapter(x).__enter__(),
    "get_adapter_config": lambda x, d: get_adapter_config(x),
    "print_trainable_parameters": lambda x, d: print_trainable_parameters(x),
    "calibrate": lambda x, d: calibrate(x, [IDS], progress=False),
    "reduce": lambda x, d: reduce(x, order=2),
}


@pytest.mark.parametrize("function", NOT_A_MODEL)
@pytest.mark.parametrize("value", [None, "model"])
def test_a_model_argument_that_is_no_module_is_named(function, value, saved):
    with pytest.raises(AdapterConfigError, match=f"`model` must be an nn.Module; got "
                                                 f"{type(value).__name__}"):
        NOT_A_MODEL[function](value, saved[1])


@pytest.mark.parametrize("value", [None, 3])
def test_a_folder_argument_that_is_no_path_is_named(value, saved):
    model, folder = saved
    with pytest.raises(AdapterConfigError, match=rf"`save_adapter` takes a folder .*got "
                                                 rf"{type(value).__name__} {value!r}"):
        save_adapter(model, value)
    with pytest.raises(AdapterConfigError, match=rf"`load_adapter` takes a folder .*got "
                                                 rf"{type(value).__name__} {value!r}"):
        load_adapter(tiny_causal_lm("llama"), value)


def test_load_adapter_of_the_weights_file_says_it_wants_the_folder(saved):
    base = tiny_causal_lm("llama")
    with pytest.raises(CheckpointError, match=r"hrm_adapter.safetensors' is a file; "
                                              r"`load_adapter` reads the folder"):
        load_adapter(base, saved[1] / WEIGHTS_NAME)
    assert find_adapters(base) == {}
    with pytest.raises(AdapterConfigError, match=r"`allow_base_mismatch` must be a bool; "
                                                 r"got 'yes'"):
        load_adapter(base, saved[1], allow_base_mismatch="yes")
    assert find_adapters(base) == {}


@pytest.mark.parametrize("batches", [IDS, {"input_ids": IDS}, None, 3])
def test_calibrate_names_batches_that_are_not_a_collection_of_batches(batches, saved):
    model = saved[0]
    with pytest.raises(AdapterConfigError, match=r"`batches` must be an iterable of batches.*"
                                                 + type(batches).__name__):
        calibrate(model, batches, progress=False)
    assert [m for m in model.modules() if m.training] == []  # left as it was (eval)


def test_adapters_take_the_model_s_mode_at_inject_and_reduce():
    """(Before, the adapters of a model in eval mode were built in training mode.)"""
    model = inject(tiny_causal_lm("llama"), HRMConfig(d_state=4))
    assert [m for m in model.modules() if m.training] == []
    reduce(model, order=2)
    assert [m for m in model.modules() if m.training] == []
    model.train()
    reduce(model, order=1)
    assert all(m.training for m in model.modules())


def test_reduce_names_stats_and_measure_of_the_wrong_type(saved):
    model = saved[0]
    with pytest.raises(AdapterConfigError, match=r"`stats` must be the CalibrationStats .*str"):
        reduce(model, order=2, gramian="data", stats="x")
    with pytest.raises(AdapterConfigError, match=r"`measure` must be a bool; got 'yes'"):
        reduce(model, order=2, measure="yes")
    assert {a.adapter.d_state for a in find_adapters(model).values()} == {4}  # untouched
