"""benchmarks/dtype_gap.py: the committed table is what the script renders from the committed
JSON; its verdict follows the numbers; its control arm has the adapters' perturbation size; the
code-path check finds nothing with float64 adapters and finds a real difference when there is
one. The whole measurement is a benchmark (minutes); these pieces take a few seconds."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import numpy as np
import pytest
import torch

pytest.importorskip(
    "transformers", reason="the adapters extra (torch, transformers) is not installed")
from benchmarks import dtype_gap  # noqa: E402

RESULTS = Path(dtype_gap.__file__).resolve().parent / "results"


def test_committed_markdown_is_rendered_from_the_committed_json():
    res = json.loads((RESULTS / "dtype_gap.json").read_text())
    command = "python benchmarks/dtype_gap.py" + (
        "" if res["seeds"] == 20 else f" --seeds {res['seeds']}")
    assert dtype_gap.render(res, command) == (RESULTS / "dtype_gap.md").read_text()
    assert res["verdict"] == dtype_gap.verdict(res["cells"])
    assert set(res["cells"]) == {f"{k}/{d}" for k in dtype_gap.KINDS for d in dtype_gap.LOW}
    for cell in res["cells"].values():
        assert all(len(v) == res["seeds"] for arm in cell["gaps"].values() for v in arm.values())


def test_ratio_of_medians_and_its_paired_interval():
    rng = np.random.default_rng(1)
    den = rng.uniform(1, 2, 20)
    r = dtype_gap.ratio_ci(1.5 * den, den)  # exactly 1.5 in every pair
    assert r["ratio"] == pytest.approx(1.5, rel=1e-12, abs=0)
    assert r["low"] == pytest.approx(1.5, rel=1e-12, abs=0)
    assert r["high"] == pytest.approx(1.5, rel=1e-12, abs=0)
    noisy = dtype_gap.ratio_ci(den * rng.uniform(0.8, 1.2, 20), den)
    assert noisy["low"] < noisy["ratio"] < noisy["high"]


def _cell(ratio: tuple, control: tuple = (1.0, 0.9, 1.1), differ: int = 0) -> dict:
    def r(t):
        return {"ratio": t[0], "low": t[1], "high": t[2]}

    return {"ratios": {"adapted/base": r(ratio), "control/base": r(control),
                       "adapted/control": r(ratio)},
            "code_path": {"float32": {"differ": differ, "entries": 100},
                          "float64": {"differ": 0, "entries": 100}}}


def test_verdict_is_composed_from_the_numbers():
    same = dtype_gap.verdict({"a/x": _cell((1.1, 0.9, 1.3)), "b/x": _cell((0.9, 0.8, 1.05))})
    assert "contains 1 in all 2 cells" in same and "0.90-1.10x its base's" in same
    worse = dtype_gap.verdict({"a/x": _cell((1.1, 0.9, 1.3)),
                               "b/x": _cell((1.6, 1.2, 2.0), differ=7)})
    assert "contains 1 in 1 of 2 cells and lies above 1 in b/x" in worse
    assert "differ in 7 of 200 output entries" in worse


def test_control_term_has_the_adapter_branchs_size_and_no_state():
    seq = dtype_gap.sequences(0)[12]
    adapted = dtype_gap.adapted_model("llama", 0)
    rms = dtype_gap.branch_rms(adapted, seq)
    control = dtype_gap.control_model("llama", 0, rms, seq)
    base = dtype_gap._tiny("llama", 0)
    modules, seen = dict(control.named_modules()), {}
    for name in rms:  # the term = the control's MLP output minus the base MLP's, same input
        modules[name].register_forward_hook(
            lambda m, a, o, name=name: seen.__setitem__(name, (a[0], o)))
    with torch.no_grad():
        control(seq)
        for name, (x, out) in seen.items():
            term = out - dict(base.named_modules())[name](x)
            if name == next(iter(rms)):  # the first layer sees the base's own stream
                assert float(term.pow(2).mean().sqrt()) == pytest.approx(rms[name], rel=1e-5)
            # stateless: the term at a position depends on that position's input only
            late = dict(control.named_modules())[name](x[:, 5:]) - dict(
                base.named_modules())[name](x[:, 5:])
            assert torch.allclose(late, term[:, 5:], rtol=1e-5, atol=1e-7)


def test_code_path_check_finds_no_difference_in_float64_and_finds_a_real_one(monkeypatch):
    seq = dtype_gap.sequences(0)[12]
    model = dtype_gap.adapted_model("qwen2", 0)
    f64 = copy.deepcopy(model).to(torch.float64).to(torch.float16)
    differ, total = dtype_gap.code_path_differences(f64, seq, 12)
    assert differ == 0 and total == 2 * 4 * seq.shape[1] * 32
    from adapters import generation

    step = generation._Plan.step  # a decoding step that computes a little differently: found
    def skewed(self, *args):
        out = step(self, *args)
        return None if out is None else 1.001 * out

    monkeypatch.setattr(generation._Plan, "step", skewed)
    differ, _ = dtype_gap.code_path_differences(f64, seq, 12)
    assert differ > 0
