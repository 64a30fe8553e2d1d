"""Stateful adapters under KV-cached generation (non-zero gates, so the adapters matter).

Every comparison is against a computation that never uses the cache: the full-sequence
forward, or ``generate(use_cache=False)``.
"""

from __future__ import annotations

import copy

import pytest
import torch
from torch import nn

from adapters import HRMConfig, find_adapters, inject
from adapters.exceptions import AdapterError
from adapters.generation import HISTORY_MAX_LEN, get_adapter_states

transformers = pytest.importorskip("transformers", reason="extra 'hf' not installed")
from transformers import DynamicCache  # noqa: E402

H, N, VOCAB, TOL = 32, 8, 64, 1e-5
GEN = {"do_sample": False, "output_logits": True, "return_dict_in_generate": True,
       "pad_token_id": 0}


def tiny(kind: str) -> nn.Module:
    torch.manual_seed(0)
    if kind == "gpt2":
        cfg = transformers.GPT2Config(n_layer=2, n_embd=H, n_head=2, vocab_size=VOCAB,
                                      bos_token_id=0, eos_token_id=0, n_positions=256)
        return transformers.GPT2LMHeadModel(cfg).eval()
    cfg = transformers.LlamaConfig(hidden_size=H, intermediate_size=64, num_hidden_layers=2,
                                   num_attention_heads=2, num_key_value_heads=1, vocab_size=VOCAB,
                                   bos_token_id=0, eos_token_id=0)
    return transformers.LlamaForCausalLM(cfg).eval()


def adapted(kind: str, mode: str = "real", gate: float = 0.5) -> nn.Module:
    model = inject(tiny(kind), HRMConfig(d_state=N, mode=mode, gate_init=gate))
    torch.manual_seed(1)
    with torch.no_grad():  # long memory, so a lost state shows up in the logits
        for a in find_adapters(model).values():
            ssm = a.adapter.ssm
            for p in (getattr(ssm, "log_dt", None), getattr(ssm, "log_dt_cplx", None)):
                if p is not None:
                    p.fill_(-2.5)
    return model


def ids(batch: int, length: int, seed: int = 2) -> torch.Tensor:
    return torch.randint(1, VOCAB, (batch, length), generator=torch.Generator().manual_seed(seed))


def max_diff(a, b) -> float:
    return max((x - y).abs().max().item() for x, y in zip(a, b, strict=True))


@pytest.mark.parametrize(("kind", "mode"), [("gpt2", "real"), ("llama", "real"),
                                            ("llama", "complex")])
def test_cached_greedy_equals_uncached_and_full_forward(kind, mode):
    model = adapted(kind, mode)
    prompt = ids(2, 7)
    cached = model.generate(prompt, max_new_tokens=10, **GEN)
    uncached = model.generate(prompt, max_new_tokens=10, use_cache=False, **GEN)
    assert torch.equal(cached.sequences, uncached.sequences)
    d_gen = max_diff(cached.logits, uncached.logits)
    with torch.no_grad():
        full = model(cached.sequences, use_cache=False).logits  # (B, L, V)
    steps = [full[:, prompt.shape[1] - 1 + i] for i in range(10)]
    d_full = max_diff(cached.logits, steps)
    print(f"{kind}/{mode}: cached vs uncached {d_gen:.2e}, cached vs full forward {d_full:.2e}")
    assert d_gen < TOL and d_full < TOL
    # and the greedy tokens are the argmax of the full forward
    assert torch.equal(cached.sequences[:, 7:], torch.stack(steps, 1).argmax(-1))


@pytest.mark.parametrize("kind", ["gpt2", "llama"])
def test_the_state_is_what_makes_decoding_right(kind):
    model = adapted(kind)
    seq = ids(2, 12)
    with torch.no_grad():
        full = model(seq, use_cache=False).logits[:, -1]
        cache = DynamicCache(config=model.config)
        model(seq[:, :-1], cache=cache)
        good_cache = copy.deepcopy(cache)  # deepcopy keeps the adapter states with the cache
        good = model(seq[:, -1:], cache=good_cache).logits[:, -1]
        for states in get_adapter_states(cache).values():  # the reference's stateless branch
            assert all(s.abs().max() > 0 for s in states.values())
        rec = next(iter(cache._hrm_adapter_states.values()))
        rec.states = {k: torch.zeros_like(v) for k, v in rec.states.items()}
        stateless = model(seq[:, -1:], cache=cache).logits[:, -1]
    d_good, d_bad = (good - full).abs().max().item(), (stateless - full).abs().max().item()
    print(f"{kind}: carried state {d_good:.2e}, zero state {d_bad:.2e}")
    assert d_good < TOL and d_bad > 1e-3


@pytest.mark.parametrize("kind", ["gpt2", "llama"])
def test_chunked_prefill_equals_one_prefill(kind):
    model = adapted(kind)
    seq = ids(2, 3 + 2 + HISTORY_MAX_LEN + 6 + 4)
    cuts = [0, 3, 5, 5 + HISTORY_MAX_LEN + 6, seq.shape[1]]  # short, short, long (scan), short
    with torch.no_grad():
        full = model(seq, use_cache=False).logits
        one = DynamicCache(config=model.config)
        model(seq, cache=one)
        cache = DynamicCache(config=model.config)
        pieces = [model(seq[:, a:b], cache=cache).logits for a, b in zip(cuts, cuts[1:],
                                                                          strict=False)]
    d_logits = (torch.cat(pieces, 1) - full).abs().max().item()
    s_one = next(iter(get_adapter_states(one).values()))
    s_chunked = next(iter(get_adapter_states(cache).values()))
    d_state = max((s_one[k] - s_chunked[k]).abs().max().item() for k in s_one)
    print(f"{kind}: chunked vs full logits {d_logits:.2e}, final states {d_state:.2e}")
    assert d_logits < TOL and d_state < TOL
    # generate()'s own chunked prefill
    prompt = ids(2, 11)
    a = model.generate(prompt, max_new_tokens=6, **GEN)
    b = model.generate(prompt, max_new_tokens=6, prefill_chunk_size=4, **GEN)
    assert torch.equal(a.sequences, b.sequences) and max_diff(a.logits, b.logits) < TOL


@pytest.mark.parametrize("kind", ["gpt2", "llama"])
def test_beam_search_follows_reordering(kind):
    model = adapted(kind)
    prompt = ids(2, 6)
    kw = {"num_beams": 4, "num_return_sequences": 2, "max_new_tokens": 8, "do_sample": False,
          "pad_token_id": 0, "output_scores": True, "return_dict_in_generate": True}
    cached = model.generate(prompt, **kw)
    uncached = model.generate(prompt, use_cache=False, **kw)
    d = (cached.sequences_scores - uncached.sequences_scores).abs().max().item()
    print(f"{kind}: beam search cached == uncached: "
          f"{torch.equal(cached.sequences, uncached.sequences)}, score diff {d:.2e}")
    assert torch.equal(cached.sequences, uncached.sequences) and d < TOL


@pytest.mark.parametrize("kind", ["gpt2", "llama"])
def test_left_padded_batch_equals_unpadded_rows(kind):
    model = adapted(kind)
    rows = [ids(1, 7, seed=3)[0], ids(1, 3, seed=4)[0]]
    width = max(len(r) for r in rows)
    batch = torch.zeros(2, width, dtype=torch.long)
    mask = torch.zeros(2, width, dtype=torch.long)
    for i, r in enumerate(rows):
        batch[i, width - len(r):] = r
        mask[i, width - len(r):] = 1
    worst = 0.0
    for use_cache in (True, False):
        out = model.generate(batch, attention_mask=mask, max_new_tokens=6, use_cache=use_cache,
                             **GEN)
        for i, r in enumerate(rows):
            single = model.generate(r[None], max_new_tokens=6, use_cache=use_cache, **GEN)
            assert torch.equal(out.sequences[i, width:], single.sequences[0, len(r):])
            worst = max(worst, max_diff([x[i] for x in out.logits],
                                        [x[0] for x in single.logits]))
    print(f"{kind}: left-padded vs unpadded rows, max logit diff {worst:.2e}")
    assert worst < TOL
    with torch.no_grad():  # the padded row's state equals the unpadded row's state
        c_pad, c_one = DynamicCache(config=model.config), DynamicCache(config=model.config)
        pos = (mask.cumsum(1) - 1).clamp(min=0)  # as generate() derives them
        model(batch, attention_mask=mask, position_ids=pos, cache=c_pad)
        model(rows[1][None], cache=c_one)
    s_pad = next(iter(get_adapter_states(c_pad).values()))
    s_one = next(iter(get_adapter_states(c_one).values()))
    assert max((s_pad[k][1] - s_one[k][0]).abs().max().item() for k in s_one) < TOL


def test_batch_select_and_repeat_follow_the_cache():
    model = adapted("llama")
    seq = ids(2, 9)
    with torch.no_grad():
        full = model(seq, use_cache=False).logits[:, -1]
        cache = DynamicCache(config=model.config)
        model(seq[:, :-1], cache=cache)
        cache.batch_select_indices(torch.tensor([1]))
        cache.batch_repeat_interleave(3)
        out = model(seq[1:, -1:].repeat(3, 1), cache=cache).logits[:, -1]
    assert (out - full[1:].expand(3, -1)).abs().max().item() < TOL


@pytest.mark.parametrize("kind", ["gpt2", "llama"])
def test_crop_back_into_the_last_chunk_and_assisted_decoding(kind):
    model = adapted(kind)
    seq = ids(1, 14)
    alt = ids(1, 3, seed=9)
    with torch.no_grad():
        cache = DynamicCache(config=model.config)
        model(seq[:, :8], cache=cache)  # prefill: its last tokens' states are kept
        cache.crop(-3)  # back to 5 tokens, inside the prefill chunk
        out = model(alt, cache=cache).logits
        ref = model(torch.cat([seq[:, :5], alt], 1), use_cache=False).logits[:, 5:]
        assert (out - ref).abs().max().item() < TOL
        cache.crop(-3)
        model(seq[:, 5:12], cache=cache)  # a 7-token continuation, now at 12 tokens
        cache.crop(-2)  # back to 10 tokens: inside the last chunk
        out = model(alt, cache=cache).logits
        ref = model(torch.cat([seq[:, :10], alt], 1), use_cache=False).logits[:, 10:]
        assert (out - ref).abs().max().item() < TOL
        cache.crop(-6)  # 13 -> 7 tokens, before the last chunk (10..13): a clear error
        with pytest.raises(AdapterError, match="known only after"):
            model(alt, cache=cache)
    assistant = tiny(kind)  # an unadapted draft model proposes, the adapted model verifies
    prompt = ids(1, 6)
    greedy = model.generate(prompt, max_new_tokens=10, do_sample=False, pad_token_id=0)
    assisted = model.generate(prompt, max_new_tokens=10, do_sample=False, pad_token_id=0,
                              assistant_model=assistant)
    assert torch.equal(greedy, assisted)


def test_cache_without_adapter_state_raises_and_plain_forward_is_stateless():
    model = adapted("gpt2")
    base = tiny("gpt2")
    seq = ids(2, 6)
    with torch.no_grad():
        cache = DynamicCache(config=base.config)
        base(seq, cache=cache)  # filled by a model without adapters
        with pytest.raises(AdapterError, match="no adapter state"):
            model(seq[:, -1:], cache=cache)
        assert model._hrm_runtime.calls.stack == []  # a failed call leaves no context behind
        a = model(seq, use_cache=False).logits
        b = model(seq, use_cache=False).logits
        out = model(seq)  # use_cache from the config: the returned cache carries the states
    assert torch.equal(a, b) and torch.equal(out.logits, a)
    assert get_adapter_states(out.cache)


def test_static_cache_generation_matches():
    model = adapted("llama")
    prompt = ids(2, 7)
    dynamic = model.generate(prompt, max_new_tokens=6, **GEN)
    static = model.generate(prompt, max_new_tokens=6, cache_implementation="static", **GEN)
    assert torch.equal(dynamic.sequences, static.sequences)
    assert max_diff(dynamic.logits, static.logits) < TOL


def _compiled_calls(model, x):
    """A plain forward, a cached prefill and a one-token decode step, as one traced function."""
    full = model(x, use_cache=False).logits
    cache = DynamicCache(config=model.config)
    prefill = model(x, cache=cache).logits
    step = model(x[:, -1:], cache=cache).logits
    return full, prefill, step


@pytest.mark.parametrize("kind", [
    "llama", *(pytest.param(k, marks=pytest.mark.slow) for k in ("gpt2", "qwen2", "mistral"))])
def test_no_more_graph_breaks_than_the_base_model(kind):
    """Item 6 of issue 16: no host synchronisation (``Tensor.item()``) in the forward paths.

    Two layers (a prompt discretises all adapters at once) and two cases of the decode step:
    two rows (``baddbmm_``) and one row with 32 modes (width 32: the matrix-vector step)."""
    from tests.adapters._tiny import tiny_causal_lm

    for batch, d_state in ((2, 4), (1, 32)):
        counts = {}
        for adapt in (False, True):
            model = tiny_causal_lm(kind, layers=2)
            if adapt:
                inject(model, HRMConfig(d_state=d_state, gate_init=0.5))
            torch._dynamo.reset()
            with torch.no_grad():
                explained = torch._dynamo.explain(_compiled_calls)(model, ids(batch, 7))
            counts[adapt] = explained.graph_break_count
            reasons = [str(r.reason).splitlines()[0] for r in explained.break_reasons]
            print(f"{kind} batch {batch} {'adapted' if adapt else 'base'}: "
                  f"{explained.graph_break_count} graph breaks, {explained.graph_count} graphs "
                  f"{reasons}")
        torch._dynamo.reset()
        assert counts[True] <= counts[False]


def test_no_cache_deprecation_warning_from_our_code_paths(caplog):
    """Item 9 of issue 16: transformers 5.x renamed ``past_key_values`` to ``cache``; the
    adapters read and write the supported name (no FutureWarning, no deprecation log)."""
    import logging
    import warnings

    from transformers.utils import logging as hf_logging

    model = adapted("llama")
    hf_logging.get_logger("transformers").propagate = True
    hf_logging.warning_once.cache_clear()  # logged once per process: forget earlier tests
    with warnings.catch_warnings(record=True) as caught, caplog.at_level(logging.WARNING):
        warnings.simplefilter("always")
        model.generate(ids(2, 5), max_new_tokens=3, **GEN)
        with torch.no_grad():
            out = model(ids(2, 5))  # use_cache from the config: the output's cache is read
            model(ids(2, 1), cache=out.cache)
    deprecations = [str(w.message) for w in caught
                    if issubclass(w.category, (FutureWarning, DeprecationWarning))]
    logged = [r.getMessage() for r in caplog.records if "deprecated" in r.getMessage()]
    assert not deprecations and not logged, (deprecations, logged)
    assert get_adapter_states(out.cache)


def test_weights_changed_between_generations_are_used(monkeypatch):
    """A change invisible to version counters (``.data`` writes, as some optimizers do) is
    picked up by the next generation, cached and uncached alike (no stale memo)."""
    model = adapted("llama")
    prompt = ids(2, 6)
    first = model.generate(prompt, max_new_tokens=4, **GEN)
    with torch.no_grad():
        model(prompt, use_cache=False)
        for a in find_adapters(model).values():
            a.adapter.ssm.B.data.mul_(3.0)
            a.adapter.gate.data.fill_(-0.7)
    cached = model.generate(prompt, max_new_tokens=4, **GEN)
    uncached = model.generate(prompt, max_new_tokens=4, use_cache=False, **GEN)
    assert max_diff(first.logits, cached.logits) > 1e-3
    assert torch.equal(cached.sequences, uncached.sequences)
    assert max_diff(cached.logits, uncached.logits) < TOL
