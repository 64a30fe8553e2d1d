"""HRMConfig: validation names the field and value; JSON round-trip is lossless."""

from __future__ import annotations

import json

import pytest

from adapters.config import ADAPTER_TYPE, FORMAT_VERSION, HRMConfig
from adapters.exceptions import AdapterConfigError


@pytest.mark.parametrize(
    "cfg",
    [
        HRMConfig(),
        HRMConfig(d_state=5, target_modules=["mlp", "model.layers.1.mlp"], gate_init=0.25,
                  dt_min=1e-4, dt_max=0.1, mode="complex", scan="fft", reads="mlp_output",
                  layers_to_skip=[0, -1], dtype="float64", d_model=48),
        HRMConfig(target_modules=r"transformer\.h\.\d+\.mlp", scan="chunked"),
    ],
)
def test_json_round_trip(cfg):
    text = cfg.to_json()
    back = HRMConfig.from_json(text)
    assert back == cfg
    assert back.to_dict() == cfg.to_dict()
    data = json.loads(text)
    assert data["adapter_type"] == ADAPTER_TYPE and data["format_version"] == FORMAT_VERSION
    assert HRMConfig.from_dict(cfg.to_dict()) == cfg


def test_lists_become_tuples_and_hash():
    cfg = HRMConfig(target_modules=["mlp"], layers_to_skip=[1])
    assert cfg.target_modules == ("mlp",) and cfg.layers_to_skip == (1,)
    assert hash(cfg) == hash(HRMConfig(target_modules=("mlp",), layers_to_skip=(1,)))
    assert cfg.replace(d_state=4).d_state == 4 and cfg.d_state == 32


@pytest.mark.parametrize(
    ("kwargs", "needle"),
    [
        ({"d_state": 0}, "`d_state`"),
        ({"d_state": 2.0}, "`d_state`"),
        ({"d_state": True}, "`d_state`"),
        ({"target_modules": []}, "`target_modules`"),
        ({"target_modules": ["mlp", ""]}, "`target_modules`"),
        ({"target_modules": [".mlp"]}, "`target_modules`"),
        ({"target_modules": "mlp[("}, "regular expression"),
        ({"target_modules": 3}, "`target_modules`"),
        ({"gate_init": float("nan")}, "`gate_init`"),
        ({"gate_init": "0"}, "`gate_init`"),
        ({"dt_min": 0.0}, "dt_min"),
        ({"dt_max": 0.5}, "dt_max=0.5"),
        ({"dt_min": 0.2, "dt_max": 0.1}, "dt_max=0.1"),
        ({"mode": "quaternion"}, "`mode`"),
        ({"scan": "loop"}, "`scan`"),
        ({"reads": "attn"}, "`reads`"),
        ({"init": "random"}, "`init`"),
        ({"dtype": "bfloat16"}, "`dtype`"),
        ({"layers_to_skip": [1.5]}, "`layers_to_skip`"),
        ({"layers_to_skip": [1, 1]}, "duplicate"),
        ({"d_model": -3}, "`d_model`"),
    ],
)
def test_invalid_fields_raise_naming_field_and_value(kwargs, needle):
    with pytest.raises(AdapterConfigError) as info:
        HRMConfig(**kwargs)
    assert needle in str(info.value)
    assert isinstance(info.value, ValueError)


def test_from_dict_rejects_unknown_foreign_and_newer():
    good = HRMConfig().to_dict()
    with pytest.raises(AdapterConfigError, match="unknown HRMConfig keys.*'rank'"):
        HRMConfig.from_dict({**good, "rank": 8})
    with pytest.raises(AdapterConfigError, match="`adapter_type`.*'LORA'"):
        HRMConfig.from_dict({**good, "adapter_type": "LORA"})
    with pytest.raises(AdapterConfigError, match="`format_version`"):
        HRMConfig.from_dict({**good, "format_version": FORMAT_VERSION + 1})
    with pytest.raises(AdapterConfigError, match="could not be parsed"):
        HRMConfig.from_json("{not json")
    with pytest.raises(AdapterConfigError, match="must be a dict"):
        HRMConfig.from_json("[1, 2]")


def test_ssm_kwargs_carry_the_ssm_fields():
    cfg = HRMConfig(mode="complex", dt_min=2e-3, dt_max=5e-2, scan="fft")
    assert cfg.ssm_kwargs() == {"mode": "complex", "dt_min": 2e-3, "dt_max": 5e-2,
                                "scan": "fft", "init": "s4d"}
