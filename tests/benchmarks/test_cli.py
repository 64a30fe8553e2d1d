"""The command line's main job on a test-sized preset, and the experiment's invariants.

One tiny run (2-layer width-32 backbone pretrained for 30 steps into a temporary cache, 40
adapter steps) goes through the real ``python -m benchmarks.hrm`` entry point; the tests then check
what it printed and wrote: the table rows, the files, the reduction's bounds around the
measured error, orders below N, and that training lowered the loss.
"""

from __future__ import annotations

import dataclasses
import json

import pytest

pytest.importorskip("transformers", reason="extra 'hf' not installed")
pytest.importorskip("peft", reason="extra 'hf' not installed")

from benchmarks.hrm.__main__ import main  # noqa: E402
from benchmarks.hrm.backbone import BackboneConfig  # noqa: E402
from benchmarks.hrm.experiment import run_experiment  # noqa: E402
from benchmarks.hrm.presets import PRESETS, Preset  # noqa: E402

TINY = Preset(
    name="tiny-test",
    backbone=BackboneConfig(n_layer=2, n_head=2, n_embd=32, n_positions=32, steps=30,
                            batch_size=8, warmup_steps=3),
    task="dfa", k=2, length=8, batch_size=16, steps=40, phase2_steps=10,
    lr=1e-2, n_test=200, n_calibration=32, state_size=8, lora_lr=3e-3, lora_min_lr_ratio=1.0,
)


@pytest.fixture(scope="module")
def cache(tmp_path_factory):
    return tmp_path_factory.mktemp("backbone-cache")


@pytest.fixture(scope="module")
def cli_run(tmp_path_factory, cache):
    out = tmp_path_factory.mktemp("run")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("LTI_ADAPTERS_CACHE", str(cache))
        mp.setitem(PRESETS, TINY.name, TINY)
        import contextlib
        import io

        buffer = io.StringIO()
        with contextlib.redirect_stdout(buffer):
            status = main(["run", "--preset", TINY.name, "--out", str(out), "--no-progress"])
    return status, buffer.getvalue(), out


def test_cli_prints_table_and_writes_files(cli_run):
    status, printed, out = cli_run
    assert status == 0
    for row in ("| chance |", "| majority class |", "| LoRA r=", "| HRM N=8 |",
                "| HRM-BT zero-shot", "| HRM-BT + phase 2", "lower bound", "upper bound"):
        assert row in printed, row
    assert (out / "results.md").read_text().strip() == printed.split("\n\nwrote ")[0].strip()
    assert (out / "hsv.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    results = json.loads((out / "results.json").read_text())
    assert set(results["scores"]) == {"backbone", "lora", "hrm", "hrm_bt", "hrm_bt_phase2"}
    assert all(0.0 <= v <= 1.0 for v in results["scores"].values())
    assert results["baselines"]["chance"] == pytest.approx(0.5)


def test_cli_reduction_orders_and_bounds(cli_run):
    _, _, out = cli_run
    results = json.loads((out / "results.json").read_text())
    n = TINY.state_size
    assert len(results["orders"]) == TINY.backbone.n_layer
    assert all(1 <= r <= n for r in results["orders"])
    for row in results["reduction"]:
        assert row["order_before"] == n
        assert row["lower_bound"] <= row["measured_error"] * (1 + 1e-6) + 1e-12
        assert row["measured_error"] <= row["upper_bound"] * (1 + 1e-6) + 1e-12
    assert results["params"]["hrm_bt"] <= results["params"]["hrm"]
    # iso-parameter: LoRA's count is within one rank step of HRM's
    per_rank = results["params"]["lora"] // results["lora_rank"]
    assert abs(results["params"]["lora"] - results["params"]["hrm"]) <= per_rank


def test_training_lowers_the_loss(cli_run):
    _, _, out = cli_run
    results = json.loads((out / "results.json").read_text())
    histories = results["histories"]
    # each method ran with its own peak rate and schedule, task samples as characters
    assert results["lr"] == {"hrm": TINY.lr, "lora": TINY.lora_lr}
    assert results["min_lr_ratio"] == {"hrm": TINY.min_lr_ratio, "lora": 1.0}
    assert results["encoding"] == "chars"
    for name in ("lora", "hrm"):
        losses = histories[name]["losses"]
        assert len(losses) == TINY.steps
        assert sum(losses[-10:]) / 10 < sum(losses[:10]) / 10, name


def test_cli_rejects_a_sequence_longer_than_the_context(tmp_path, cache, monkeypatch, capsys):
    monkeypatch.setenv("LTI_ADAPTERS_CACHE", str(cache))
    monkeypatch.setitem(PRESETS, TINY.name, TINY)
    status = main(["--preset", TINY.name, "--T", "64", "--out", str(tmp_path), "--no-progress"])
    assert status == 2
    assert "n_positions=32" in capsys.readouterr().err


def test_bad_encoding_is_rejected_before_any_work(tmp_path):
    from adapters.exceptions import AdapterConfigError

    with pytest.raises(AdapterConfigError, match="`encoding`.*'tokens'"):
        run_experiment(TINY, encoding="tokens", out_dir=tmp_path, progress=False)
    assert not any(tmp_path.iterdir())


def test_text_task_reports_bits_per_character(tmp_path, cache, monkeypatch):
    monkeypatch.setenv("LTI_ADAPTERS_CACHE", str(cache))
    small = dataclasses.replace(TINY, steps=8, phase2_steps=2, n_test=32)
    results = run_experiment(small, task="text", T=16, out_dir=tmp_path, progress=False,
                             gramian="exact")
    assert results["metric"] == "bpc" and not results["higher_is_better"]
    base = results["baselines"]
    assert 0.0 < base["unigram"] < base["uniform"] <= 7.0
    assert all(0.0 < v < 10.0 for v in results["scores"].values())
    assert (tmp_path / "results.md").exists()
