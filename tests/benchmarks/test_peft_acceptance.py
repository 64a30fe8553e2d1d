"""benchmarks/peft_acceptance.py: the committed table is what the script renders from the
committed JSON, and one cheap measurement of it runs (the whole script is a benchmark)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

pytest.importorskip(
    "transformers", reason="the adapters extra (torch, transformers) is not installed")
from benchmarks import peft_acceptance  # noqa: E402

RESULTS = Path(peft_acceptance.__file__).resolve().parent / "results"


def test_committed_markdown_is_rendered_from_the_committed_json():
    res = json.loads((RESULTS / "peft_acceptance.json").read_text())
    command = f"python benchmarks/peft_acceptance.py --kills {res['kills_per_model']}"
    assert peft_acceptance.render(res, command) == (RESULTS / "peft_acceptance.md").read_text()
    assert set(res["reload"]) == set(res["dtype"]) == set(res["graph_breaks"]) == set(
        peft_acceptance.KINDS)


def test_reload_figures_of_one_family():
    r = peft_acceptance.reload_figures("mistral")
    assert r["from_pretrained_vs_base"] == 0.0
    assert r["from_pretrained_plus_load_adapter_vs_adapted"] == 0.0
    assert r["save_load_adapter_vs_adapted"] == 0.0
    assert r["adapter_effect"] > 1e-3 and r["unexpected_keys_reported"] == r["adapter_keys"] > 0
