"""The statistics of ``benchmarks/bench_decode.py`` and its greedy decode loop (no timing here;
the benchmark itself is not run): paired per-round ratios with a bootstrap interval, the
lockstep combination of prompt and step ratios, and a loop that makes ``generate``'s tokens."""

from __future__ import annotations

import numpy as np
import pytest
import torch

pytest.importorskip("scipy", reason="bench_decode's bootstrap needs scipy")
pytest.importorskip("transformers", reason="bench_decode's decode loop needs transformers")
from benchmarks.bench_decode import (  # noqa: E402
    GreedyDecode,
    ModelClock,
    generate,
    generate_paired,
    lockstep_paired,
    lockstep_round,
    paired,
    shared_copy,
)


def test_paired_ratio_is_per_round_so_a_drift_common_to_both_arms_cancels():
    rng = np.random.default_rng(0)
    drift = 1.0 + 0.3 * rng.random(25)  # the machine slows both arms alike, round by round
    base = 2.0 * drift
    adapted = 2.04 * drift * (1 + 1e-4 * rng.standard_normal(25))
    r = paired(adapted, base, resamples=2000)
    assert r["median"] == pytest.approx(1.02, rel=2e-4, abs=0)
    assert r["low"] <= r["median"] <= r["high"]
    assert r["high"] - r["low"] < 1e-3  # the drift does not widen the interval
    # the ratio of the arms' own medians does not pair rounds: with a drift it is off
    assert np.median(adapted) / np.median(base) != pytest.approx(r["median"], rel=1e-6, abs=0)
    assert r["ratios"] == pytest.approx(list(adapted / base), rel=1e-12, abs=0)


def test_paired_interval_covers_the_spread_of_noisy_ratios_and_is_reproducible():
    rng = np.random.default_rng(1)
    base = np.full(40, 3.0)
    adapted = base * (1.02 + 0.02 * rng.standard_normal(40))
    r1, r2 = paired(adapted, base, resamples=2000), paired(adapted, base, resamples=2000)
    assert r1 == r2  # fixed seed
    assert r1["low"] < 1.02 < r1["high"]
    assert 0.003 < r1["high"] - r1["low"] < 0.03
    assert r1["min"] == pytest.approx(float((adapted / base).min()), rel=1e-12, abs=0)


def test_lockstep_combines_prompt_and_step_ratios_weighted_by_the_base_times():
    """Prompt 0.1 s at ratio 1.10, 47 steps of ~0.06 s at ratio 1.02 but the first at 1.5 (a
    set-up), drifts per round and per step common to both arms, independent bursts on either
    arm's turns: generate = (P 1.10 + sum_i S_i rho_i) / (P + sum_i S_i) exactly, and the
    interval is narrow although the step times themselves vary by 30 % and more."""
    rng = np.random.default_rng(2)
    R, S = 25, 47
    drift_r = 1.0 + 0.3 * rng.random(R)
    drift_s = drift_r[:, None] * (1.0 + 0.3 * rng.random((R, S)))
    prompt_b, steps_b = 0.1 * drift_r, 0.06 * drift_s
    rho = np.full(S, 1.02)
    rho[0] = 1.5
    # a neighbour's burst slows 10 % of either arm's turns by half, independently: the paired
    # medians are still the ratios, the ratio of the arms' own medians is not
    spike_a, spike_b = (1 + 0.5 * (rng.random((2, R, S)) < 0.1))
    steps_a = rho * steps_b * spike_a
    steps_b = steps_b * spike_b
    r = lockstep_paired(1.10 * prompt_b, prompt_b, steps_a, steps_b, resamples=500)
    assert abs(np.median(steps_a[:, 1:]) / np.median(steps_b[:, 1:]) - 1.02) > 1e-3
    assert r["prompt"]["median"] == pytest.approx(1.10, rel=1e-12, abs=0)
    assert r["step"]["median"] == pytest.approx(1.02, rel=1e-12, abs=0)
    P, S_i = float(np.median(prompt_b)), np.median(steps_b, axis=0)
    assert r["prompt_share"] == pytest.approx(P / (P + S_i.sum()), rel=1e-12, abs=0)
    want = (P * 1.10 + S_i @ rho) / (P + S_i.sum())
    assert r["generate"]["median"] == pytest.approx(want, rel=1e-12, abs=0)
    # the first step's set-up counts: without it the decode would cost less
    assert want - (P * 1.10 + S_i.sum() * 1.02) / (P + S_i.sum()) > 5e-3
    for key in ("prompt", "step", "generate"):
        assert r[key]["low"] <= r[key]["median"] <= r[key]["high"]
    assert r["generate"]["high"] - r["generate"]["low"] < 5e-3  # the drifts cancel


def test_lockstep_interval_resamples_whole_rounds():
    """A round that is slow for the adapted arm throughout (e.g. a neighbour's burst on its
    turns) moves the interval as one unit; reproducible with the fixed seed."""
    rng = np.random.default_rng(3)
    R, S = 20, 30
    steps_b = 0.05 * (1 + 0.01 * rng.standard_normal((R, S)))
    per_round = 1.02 + 0.03 * rng.standard_normal(R)[:, None]  # round-level noise only
    steps_a = steps_b * per_round
    prompt = np.full(R, 0.1)
    r1 = lockstep_paired(prompt, prompt, steps_a, steps_b, resamples=1000)
    r2 = lockstep_paired(prompt, prompt, steps_a, steps_b, resamples=1000)
    assert r1 == r2
    # with R rounds of round-level noise 0.03 the interval is ~ +-1.96 * 1.25 * 0.03 / sqrt(R)
    # wide, not the ~ 1/sqrt(R * S) of independent steps
    width = r1["step"]["high"] - r1["step"]["low"]
    assert 0.01 < width < 0.06
    with pytest.raises(ValueError, match=r"\(R, S\)"):
        lockstep_paired(prompt, prompt, steps_a[:, 0], steps_b[:, 0])


def _lockstep_rounds(rng, R=12, S=20, rho=1.03):
    """Lockstep rounds whose adapted arm costs exactly ``rho`` times the base's, with drifts
    common to both arms."""
    drift = 1.0 + 0.3 * rng.random((R, S))
    steps_b = 0.06 * drift
    prompt_b = 0.1 * drift[:, 0]
    return rho * prompt_b, prompt_b, rho * steps_b, steps_b


def test_generate_ratio_adds_the_work_outside_the_model_to_both_arms():
    """Model calls at ratio 1.03 and 0.4 s of generate's own work beside 1.2 s of calls, the
    same in both arms: the generate costs (1.03 M + G) / (M + G), less than the calls' 1.03;
    an arm whose outside work is 12 ms longer in every round pays those 12 ms. Drifts of the
    whole-generate rounds common to both arms cancel in the paired difference."""
    rng = np.random.default_rng(4)
    lock = _lockstep_rounds(rng)
    W = 9
    drift = 1.0 + 0.3 * rng.random(W)
    inside_b, outside_b = 1.2 * drift, 0.4 * drift
    r = generate_paired(*lock, inside_b, outside_b, outside_b, resamples=500)
    M, G = float(np.median(inside_b)), float(np.median(outside_b))
    assert r["model_ratio"] == pytest.approx(1.03, rel=1e-12, abs=0)
    assert r["inside_s"] == M and r["outside_s"] == G and r["outside_diff_s"] == 0.0
    assert r["median"] == pytest.approx((1.03 * M + G) / (M + G), rel=1e-12, abs=0)
    assert r["median"] < 1.03 - 1e-3
    assert r["outside_share"] == pytest.approx(G / (M + G), rel=1e-12, abs=0)
    assert r["low"] == pytest.approx(r["median"], abs=1e-9)  # nothing varies: a point
    assert r["high"] == pytest.approx(r["median"], abs=1e-9)
    slower = generate_paired(*lock, inside_b, outside_b + 0.012, outside_b, resamples=500)
    assert slower["outside_diff_s"] == pytest.approx(0.012, rel=1e-9, abs=0)
    assert slower["median"] == pytest.approx((1.03 * M + G + 0.012) / (M + G), rel=1e-12,
                                             abs=0)


def test_generate_interval_resamples_the_whole_generate_rounds_too():
    """Noise in the outside work's paired difference (the whole-generate rounds) widens the
    interval although the lockstep rounds are exact; noise in the lockstep rounds widens it
    although the whole-generate rounds are exact; reproducible with the fixed seed."""
    rng = np.random.default_rng(5)
    W = 10
    inside_b, outside_b = np.full(W, 1.2), np.full(W, 0.4)
    exact = _lockstep_rounds(rng)
    noisy_diff = outside_b + 0.01 * rng.standard_normal(W)
    r1 = generate_paired(*exact, inside_b, noisy_diff, outside_b, resamples=1000)
    assert r1 == generate_paired(*exact, inside_b, noisy_diff, outside_b, resamples=1000)
    # about +-1.96 * 1.25 * 0.01 / sqrt(W) / 1.6 s around the point
    assert 2e-3 < r1["high"] - r1["low"] < 2e-2
    assert r1["low"] <= r1["median"] <= r1["high"]
    pa, pb, sa, sb = exact
    per_round = (1 + 0.03 * rng.standard_normal(pa.size))
    r2 = generate_paired(pa * per_round, pb, sa * per_round[:, None], sb, inside_b, outside_b,
                         outside_b, resamples=1000)
    assert r2["high"] - r2["low"] > 5e-3
    with pytest.raises(ValueError, match="W >= 2"):
        generate_paired(*exact, inside_b[:1], outside_b[:1], outside_b[:1])


@pytest.fixture(scope="module")
def arms():
    from adapters import HRMConfig, find_adapters, inject
    from tests.adapters._tiny import tiny_causal_lm

    base = tiny_causal_lm("llama", vocab=96)
    base.generation_config.eos_token_id = None  # generate stops only at max_new_tokens
    torch.manual_seed(0)
    adapted = inject(shared_copy(base), HRMConfig(d_state=4))
    with torch.no_grad():
        for a in find_adapters(adapted).values():
            a.adapter.gate.fill_(0.5)
    return {"base": (base, False), "adapted": (adapted, False), "disabled": (adapted, True)}


def test_adapted_copy_shares_the_base_weights(arms):
    base, adapted = arms["base"][0], arms["adapted"][0]
    shared = {n: p for n, p in adapted.named_parameters() if not n.startswith("hrm_adapters")}
    assert shared.keys() == dict(base.named_parameters()).keys()
    assert all(p is shared[n] for n, p in base.named_parameters())
    assert base.model.layers[0].mlp is not adapted.model.layers[0].mlp  # modules copied


def test_greedy_loop_makes_generates_tokens_in_every_arm(arms):
    """The lockstep loop decodes what ``model.generate`` does, adapters on and off."""
    torch.manual_seed(1)
    ids = torch.randint(1, 96, (1, 5))
    tokens = 9
    got = lockstep_round(arms, ids, tokens, first=1, clock=iter(range(10**6)).__next__)
    for name, (model, off) in arms.items():
        if off:
            from adapters import disable_adapter

            with disable_adapter(model):
                want = generate(model, ids, tokens)
        else:
            want = generate(model, ids, tokens)
        assert want.shape == (1, 5 + tokens)
        assert torch.equal(got[name]["ids"], want), name
        assert len(got[name]["steps_s"]) == tokens - 1
        assert got[name]["prompt_s"] > 0 and all(t > 0 for t in got[name]["steps_s"])
    assert torch.equal(got["base"]["ids"], got["disabled"]["ids"])
    assert not torch.equal(got["base"]["ids"], got["adapted"]["ids"])  # the branch matters
    one = GreedyDecode(arms["adapted"][0], ids)
    one.prefill()
    one.step()
    assert torch.equal(one.ids, got["adapted"]["ids"][:, :7])


def test_model_clock_times_the_model_calls_of_a_generate_with_the_adapters_hooks_inside(arms):
    """Every call of ``generate`` is timed, the adapters' runtime hooks run inside the timed
    span (its call stack is empty at both clock readings), the time inside is part of the
    whole generate's, and the timing hooks are gone afterwards."""
    import time

    from adapters import find_adapters

    model = arms["adapted"][0]
    runtime = next(iter(find_adapters(model).values()))._runtime
    depth = []

    def clock():
        depth.append(len(runtime.calls.stack))
        return time.perf_counter()

    hooks = (len(model._forward_pre_hooks), len(model._forward_hooks))
    torch.manual_seed(2)
    ids = torch.randint(1, 96, (1, 4))
    t0 = time.perf_counter()
    with ModelClock(model, clock) as inside:
        out = generate(model, ids, 6)
    whole = time.perf_counter() - t0
    assert out.shape == (1, 10)
    assert inside.calls == 6 and len(depth) == 12
    assert set(depth) == {0}  # read before the runtime's pre-hook and after its post-hook
    assert 0 < inside.total < whole
    assert (len(model._forward_pre_hooks), len(model._forward_hooks)) == hooks
