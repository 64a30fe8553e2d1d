"""Task A of issue 18 (benchmarks.hrm.task_a): the whole pipeline on a tiny budget, its parts."""

from __future__ import annotations

import dataclasses
import itertools
import json
import math

import numpy as np
import pytest
import torch

pytest.importorskip("transformers", reason="extra 'hf' not installed")
pytest.importorskip("peft", reason="extra 'hf' not installed")
pytest.importorskip("scipy", reason="scipy is required")

from adapters.exceptions import AdapterConfigError  # noqa: E402
from benchmarks.hrm import task_a  # noqa: E402
from benchmarks.hrm.backbone import (  # noqa: E402
    BackboneConfig,
    CopyingBackboneConfig,
    _pretrain_stream,
    build_backbone,
)
from benchmarks.hrm.tasks import (  # noqa: E402
    IGNORE_INDEX,
    STATE_IDS,
    char_corpus,
    copy_batches,
    dfa_task,
    induction_task,
)

TINY = CopyingBackboneConfig(n_layer=1, n_head=1, n_embd=16, n_positions=32, steps=4,
                             batch_size=4, lr=3e-3, warmup_steps=1, task_mix=0.0, copy_mix=0.25)
BUDGET = task_a.Budget(k=2, T=10, d_state=4, batch=4, steps=4, pilot_steps=2, n_val=16,
                       n_test=40, n_induction=10, induction_length=10)


def test_induction_set_repeats_each_string_and_labels_only_the_second_copy():
    ind = induction_task(5, length=7, seed=1)
    assert torch.equal(ind.input_ids[:, :7], ind.input_ids[:, 7:])
    assert (ind.labels[:, :7] == IGNORE_INDEX).all()
    assert torch.equal(ind.labels[:, 7:], ind.input_ids[:, 7:])
    assert not torch.equal(ind.input_ids[0], ind.input_ids[1])


def test_copy_segments_are_exact_repeats():
    batch = next(copy_batches(2, seq_len=200, seed=3, min_length=2, max_length=6))
    newline = 22
    for ids, labels in zip(batch.input_ids.tolist(), batch.labels.tolist(), strict=True):
        segments = "".join(chr(40 + t) if t != newline else "\n" for t in ids).split("\n")
        for seg in segments[:-1]:  # the last one may be cut
            half = len(seg) // 2
            assert len(seg) % 2 == 0 and 2 <= half <= 6 and seg[:half] == seg[half:]
        # labels: -100 on the first copies, the tokens themselves elsewhere
        assert all(lab in (IGNORE_INDEX, t) for lab, t in zip(labels, ids, strict=True))


def test_copying_config_has_its_own_cache_key_and_checks_its_fields():
    base = dict(n_layer=1, n_head=1, n_embd=8, n_positions=8, steps=1, warmup_steps=0,
                batch_size=4)
    assert CopyingBackboneConfig(**base).digest() != BackboneConfig(**base).digest()
    with pytest.raises(AdapterConfigError, match="copy_mix"):
        CopyingBackboneConfig(**base, task_mix=0.5, copy_mix=0.5)
    with pytest.raises(AdapterConfigError, match="copy_min_length"):
        CopyingBackboneConfig(**base, copy_min_length=5, copy_max_length=4)
    rows = next(_pretrain_stream(CopyingBackboneConfig(**base, copy_mix=0.5),
                                 char_corpus().train))
    # half the rows are copying rows (their first copies unsupervised), half are text
    assert rows.input_ids.shape == (4, 8)
    assert int((rows.labels[2:] == IGNORE_INDEX).sum()) > 0
    assert int((rows.labels[:2] == IGNORE_INDEX).sum()) == 0


def _posterior_brute_force(ids: list[int], k: int, m: int) -> np.ndarray:
    table = np.array(ids[:2 * k]).reshape(k, 2) - STATE_IDS[0]
    length = len(ids) - 2 * k - 3
    last = [b - 4 for b in ids[2 * k + 1 + length - m:2 * k + 1 + length]]
    counts = np.zeros(k)
    for prefix in itertools.product((0, 1), repeat=length - m):
        s = 0
        for bit in (*prefix, *last):
            s = table[s, bit]
        counts[s] += 1
    return counts / counts.sum()


def test_bayes_per_sample_matches_brute_force_over_every_prefix():
    k, length = 3, 10
    batch = dfa_task(25, k=k, length=length, seed=4)
    got = task_a.bayes_per_sample(batch, k)
    for i, ids in enumerate(batch.input_ids.tolist()):
        answer = ids[-1] - STATE_IDS[0]
        for m in task_a.LADDER:
            post = _posterior_brute_force(ids, k, m)
            assert got[f"m={m}"]["correct"][i] == int(post.argmax() == answer)
            assert got[f"m={m}"]["nll"][i] == pytest.approx(-math.log(post[answer]), abs=1e-9)
        assert got["decided_by_8"][i] == int(_posterior_brute_force(ids, k, 8).max() == 1.0)


def test_paired_ci_is_the_difference_of_means():
    rng = np.random.default_rng(0)
    a, b = rng.integers(0, 2, 300).tolist(), rng.integers(0, 2, 300).tolist()
    ci = task_a.paired_ci(a, b)
    assert ci["diff"] == pytest.approx(np.mean(a) - np.mean(b), abs=1e-12)
    assert ci["lo"] < ci["diff"] < ci["hi"]
    assert task_a.paired_ci(a, a)["diff"] == 0.0
    with pytest.raises(ValueError, match="equal"):
        task_a.paired_ci(a, b[:-1])


def test_arms_of_the_real_architecture_are_iso_parameter():
    torch.manual_seed(0)
    base = build_backbone(task_a.BACKBONE)
    base.requires_grad_(False)
    params = task_a.parameters(base, task_a.Budget())
    assert params == {"hrm": 33_028, "stateless": 33_028, "lora_attn_rank": 16,
                      "lora_attn": 32_768, "lora_mlp_rank": 6, "lora_mlp": 30_720}
    for arm in task_a.ARMS:
        model = task_a.arm_model(base, arm, task_a.Budget(), seed=0)
        assert sum(p.numel() for p in model.parameters() if p.requires_grad) == params[arm]
    assert not any(p.requires_grad for p in base.parameters())


def test_stateless_arm_carries_no_state():
    torch.manual_seed(0)
    base = build_backbone(TINY)
    base.requires_grad_(False)
    hrm = task_a.arm_model(base, "hrm", BUDGET, seed=1)
    stateless = task_a.arm_model(base, "stateless", BUDGET, seed=1)
    for p in itertools.chain(hrm.parameters(), stateless.parameters()):
        if p.requires_grad:
            torch.nn.init.normal_(p, std=0.3)  # move the gates off 0 in both
    stateless.load_state_dict(hrm.state_dict())
    ids = torch.randint(23, 118, (1, 12))
    with torch.no_grad():
        a, b = hrm(ids).logits, stateless(ids).logits
    assert torch.allclose(a[:, 0], b[:, 0], atol=1e-5)  # the state starts at zero
    assert not torch.allclose(a[:, 1:], b[:, 1:], atol=1e-3)  # later, HRM's state matters


@pytest.fixture()
def tiny_study(tmp_path, monkeypatch):
    monkeypatch.setattr(task_a, "GATE_BPC", 100.0)  # a tiny backbone cannot pass the real gate
    monkeypatch.setattr(task_a, "GATE_INDUCTION", 0.0)
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    kw = dict(arms=task_a.ARMS, seeds=2, results=tmp_path / "out", max_extend=1,
              cache_dir=tmp_path / "cache", log=lambda *_: None)
    yield kw
    torch.set_num_threads(threads)  # a process-wide setting: put back for the next tests


def test_the_pipeline_runs_end_to_end_and_resumes_from_its_cells(tiny_study, monkeypatch):
    out = tiny_study["results"]
    assert task_a.run_study(BUDGET, TINY, **tiny_study) == 0
    cells = sorted(p.name for p in (out / "cells").glob("*.json"))
    assert sum(c.startswith("main-") for c in cells) == len(task_a.ARMS) * 2
    assert sum(c.startswith("pilot-") for c in cells) >= 3 * len(task_a.ARMS)
    assert sum(c.startswith(("gate-", "bayes-")) for c in cells) == 2
    res = json.loads((out / "results.json").read_text())
    assert res["verdict"] in ("win", "null") and not res["missing"]
    assert set(res["chosen_lr"]) == set(task_a.ARMS)
    for arm in task_a.ARMS:  # interior, or flagged as an edge after the last extension
        grid = res["grids"][arm]
        assert res["lr_at_edge"][arm] == (res["chosen_lr"][arm] in (min(grid), max(grid)))
    row = res["per_seed"][1]
    assert set(row["hrm_minus"]) == {"stateless", "lora_attn", "lora_mlp"}
    bayes = res["bayes_test"]
    assert bayes["m=8"]["accuracy"] >= bayes["m=0"]["accuracy"] - 1e-12
    md = (out / "results.md").read_text()
    for heading in ("## Backbone gate", "## Bayes ladder", "## Test results",
                    "## HRM minus other arms", "## Verdict"):
        assert heading in md
    # a second run trains nothing: every cell is read back
    before = {p: p.stat().st_mtime_ns for p in (out / "cells").glob("*.json")}

    def no_training(*args, **kwargs):
        raise AssertionError("a finished cell was trained again")

    monkeypatch.setattr(task_a, "train_run", no_training)
    assert task_a.run_study(BUDGET, TINY, **tiny_study) == 0
    assert {p: p.stat().st_mtime_ns for p in (out / "cells").glob("*.json")} == before
    assert json.loads((out / "results.json").read_text())["per_seed"] == res["per_seed"]


def test_a_failed_gate_stops_the_study(tmp_path):
    out = tmp_path / "out"
    assert task_a.run_study(BUDGET, TINY, arms=task_a.ARMS, seeds=1, results=out,
                            cache_dir=tmp_path / "cache", log=lambda *_: None) == 0
    res = json.loads((out / "results.json").read_text())
    assert not res["gate"]["passed"] and res["verdict"].startswith("not meaningful")
    assert not list((out / "cells").glob("pilot-*"))
    assert "not meaningful" in (out / "results.md").read_text()
    assert res["gate"]["model"]["val_bpc"] > task_a.GATE_BPC
    assert dataclasses.asdict(TINY) == res["gate"]["backbone"]["config"]
