"""The SmolLM2 study's pieces on a tiny random Llama (seconds): exact hidden-state cache,
the stateless HRM arm, iso-parameter LoRA ranks, BPC bookkeeping and the paired bootstrap."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

transformers = pytest.importorskip("transformers", reason="extra 'hf' not installed")
pytest.importorskip("peft", reason="extra 'hf' not installed")
pytest.importorskip("scipy", reason="scipy is required")

from benchmarks.hrm import lm_study, smollm  # noqa: E402


@pytest.fixture()
def tiny(monkeypatch):
    monkeypatch.setattr(smollm, "N_LAYERS", 3)
    cfg = transformers.LlamaConfig(vocab_size=50, hidden_size=16, intermediate_size=32,
                                   num_hidden_layers=3, num_attention_heads=4,
                                   num_key_value_heads=2, max_position_embeddings=64)
    torch.manual_seed(0)
    model = transformers.LlamaForCausalLM(cfg).eval().requires_grad_(False)
    ids = torch.randint(0, 50, (3, 20))
    return model, ids


def test_cache_is_exact_and_stops_below_the_first_adapted_block(tiny):
    model, ids = tiny
    calls = []
    model.model.layers[2].register_forward_pre_hook(lambda m, a: calls.append(1))
    check = smollm.check_cache_exact(model, ids, first=1)
    assert check["identical"] and check["max_abs_diff"] == 0.0
    calls.clear()
    h = smollm.cache_hidden_states(model, ids, 1, batch_size=2, progress=False)
    assert h.shape == (3, 20, 16) and not calls  # nothing at or above block 1 ran


def test_stateless_arm_is_hrm_with_zero_pole(tiny):
    model, ids = tiny
    budget = lm_study.Budget(n_top=2, d_state=4)
    h = smollm.cache_hidden_states(model, ids, 1, progress=False)
    outs = {}
    for arm in ("hrm", "stateless"):
        wrapped, detach = lm_study.attach(model, arm, budget, seed=3)
        from adapters import find_adapters

        for a in find_adapters(wrapped).values():
            a.adapter.gate.data.fill_(1.0)
            a.adapter.ssm.log_dt.data.fill_(math.log(0.1))
        u = torch.randn(2, 7, 16)
        ad = next(iter(find_adapters(wrapped).values())).adapter
        outs[arm] = (ad(u), ad, u)
        top = lm_study.TopView(wrapped, 1)
        assert top(h).shape == (3, 20, 50)
        detach()
    y_state, ad, u = outs["hrm"]
    y_less, _, _ = outs["stateless"]
    # stateless: every position is the first step from the zero state
    ref = torch.stack([ad.step(u[:, t])[0] for t in range(7)], 1)
    assert torch.allclose(y_less, ref, atol=1e-6)
    assert torch.allclose(y_less[:, 0], y_state[:, 0], atol=1e-6)  # same B, C, gate
    assert not torch.allclose(y_less[:, 1:], y_state[:, 1:], atol=1e-4)  # memory differs
    assert torch.equal(model(ids).logits, model(ids).logits)


def test_iso_rank_and_detach_restore_the_base(tiny):
    model, ids = tiny
    budget = lm_study.Budget(n_top=2, d_state=4)
    base = model(ids).logits
    target = lm_study.hrm_parameters(model, budget)
    assert target == 2 * (2 * 4 * 16 + 2 * 4 + 1)
    for arm in ("lora_qv", "lora_mlp"):
        rank, n = lm_study.iso_rank(model, budget, arm)
        per = n // rank
        assert abs(n - target) <= abs((rank + 1) * per - target)
        assert rank == 1 or abs(n - target) <= abs((rank - 1) * per - target)
        wrapped, detach = lm_study.attach(model, arm, budget, seed=0)
        assert sum(p.numel() for p in wrapped.parameters() if p.requires_grad) == n
        detach()
        assert torch.equal(model(ids).logits, base)


def test_bpc_counts_characters_and_paired_ci_brackets_a_shift():
    rng = np.random.default_rng(0)
    w = 40
    a = {"nll_early": rng.uniform(50, 60, w).tolist(), "nll_late": rng.uniform(50, 60, w).tolist(),
         "chars_early": [100.0] * w, "chars_late": [100.0] * w}
    b = {**a, "nll_late": [x + 5.0 for x in a["nll_late"]]}
    s = lm_study.summarise(lm_study._table(b))
    assert s["bpc_late"] == pytest.approx(sum(b["nll_late"]) / (100 * w))
    ci = lm_study.paired_ci(a, b, "late")
    assert ci["diff"] == pytest.approx(-0.05) and ci["lo"] <= -0.05 <= ci["hi"]
    assert lm_study.paired_ci(a, b, "early")["diff"] == 0.0


class _CharTokenizer:
    """One token per character (ids mod 50), with offsets, like a fast tokenizer's output."""

    def __call__(self, text, add_special_tokens=False, return_offsets_mapping=True):
        return {"input_ids": [ord(c) % 50 for c in text],
                "offset_mapping": [(i, i + 1) for i in range(len(text))]}


def test_study_end_to_end_on_a_tiny_llama(tiny, tmp_path, monkeypatch):
    """Pilots -> chosen rate -> test -> calibrate/reduce/phase 2 -> tables, and resumption."""
    model, _ = tiny
    monkeypatch.setenv("LTI_ADAPTERS_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(smollm, "load_model", lambda: model)
    monkeypatch.setattr(smollm, "load_tokenizer", _CharTokenizer)
    monkeypatch.setattr(lm_study, "LR_GRIDS", {a: (1e-3, 1e-2, 1e-1) for a in lm_study.ARMS})
    budget = lm_study.Budget(n_top=2, d_state=4, seq_len=32, steps=3, pilot_steps=2,
                             phase2_steps=2, late=16,
                             calib_windows=4, train_windows=8)
    study = lm_study.Study(budget, progress=False, results=tmp_path / "res",
                           max_windows={"train": 8, "dev": 4, "test": 6})
    assert {k: len(w) for k, w in study.win.items()} == {"train": 8, "dev": 4, "test": 6}
    assert int(study.win["test"].chars.sum()) == 6 * 32  # one character per token
    frozen = study.frozen()
    lr, cells = study.choose_lr("hrm", max_extend=0)
    assert lr in (1e-3, 1e-2, 1e-1) and len(cells) == 3
    assert all("dev" in c and "test" not in c for c in cells)  # pilots never see test
    cell = study.run("hrm", lr, 0)
    assert set(cell["test"]) >= {"bpc", "bpc_early", "bpc_late", "nll_late"}
    assert len(cell["train"]["losses"]) == budget.steps and "dev" not in cell
    again = study.run("hrm", lr, 0)  # from the cell file, no training
    assert again == cell
    reduced = list((tmp_path / "res" / "cells").glob("main-hrm_reduced-*.json"))
    assert len(reduced) == 1
    chosen = {"hrm": lr}
    for arm in ("stateless", "lora_qv", "lora_mlp"):
        chosen[arm] = study.choose_lr(arm, max_extend=0)[0]
        study.run(arm, chosen[arm], 0)
    from benchmarks.hrm import lm_report

    params = {"hrm": 1, "stateless": 1, "lora_qv": 1, "lora_qv_rank": 1, "lora_mlp": 1,
              "lora_mlp_rank": 1}
    out = lm_report.write(study, frozen, chosen, {"max_abs_diff": 0.0, "identical": True},
                          seeds=1, env={}, params=params, paired_ci=lm_study.paired_ci)
    assert out["verdict"] in ("win", "null") and len(out["reductions"]) == 1
    text = (tmp_path / "res" / "results.md").read_text()
    assert "Verdict" in text and "HRM minus" in text
    assert torch.equal(model(study.win["test"].ids).logits,
                       model(study.win["test"].ids).logits)


class _GenTokenizer(_CharTokenizer):
    eos_token_id = 0

    def __call__(self, text, add_special_tokens=False, return_offsets_mapping=True,
                 return_tensors=None):
        enc = super().__call__(text)
        if return_tensors == "pt":
            return {"input_ids": torch.tensor([enc["input_ids"]])}
        return enc

    def decode(self, ids, skip_special_tokens=True):
        return "".join(chr(97 + int(i) % 26) for i in ids)


def test_demo_cli_runs_the_whole_job_on_a_tiny_llama(tiny, tmp_path, monkeypatch, capsys):
    """``python -m benchmarks.hrm.lm_demo`` end to end (seconds): tables, plot, samples."""
    pytest.importorskip("matplotlib", reason="extra 'plot' not installed")
    from benchmarks.hrm import lm_demo

    model, _ = tiny
    monkeypatch.setenv("LTI_ADAPTERS_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(smollm, "load_model", lambda: model)
    monkeypatch.setattr(smollm, "load_tokenizer", _GenTokenizer)
    real = lm_study.Budget

    def small(**kw):
        return real(**{**kw, "n_top": 2, "d_state": 4, "seq_len": 32, "late": 16,
                       "calib_windows": 4})

    monkeypatch.setattr(lm_study, "Budget", small)
    out = tmp_path / "demo"
    threads = torch.get_num_threads()  # main() sets torch's threads (--threads, default 1)
    try:
        status = lm_demo.main(["--out", str(out), "--steps", "2", "--phase2-steps", "1",
                               "--train-windows", "6", "--test-windows", "4",
                               "--sample-tokens", "3", "--no-progress"])
    finally:
        torch.set_num_threads(threads)  # a process-wide setting: put back for the next tests
    assert status == 0
    for name in ("results.md", "results.json", "hsv.png"):
        assert (out / name).stat().st_size > 0
    text = capsys.readouterr().out
    assert "HRM reduced + phase 2" in text and "LoRA q,v" in text
    import json

    res = json.loads((out / "results.json").read_text())
    assert res["hrm"]["params"] == 2 * (2 * 4 * 16 + 2 * 4 + 1)
    assert [lay["order_before"] for lay in res["layers"]] == [4, 4]
    assert len(res["sample_hrm_phase2"]) == 3
