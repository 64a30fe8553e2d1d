"""The fast one-token decode path of cached generation (``adapters._decode.DecodePlan``).

Every check compares it with the general path (the same call with the fast path switched off)
and with the full forward, for real, complex and mixed adapters, batch 1 and 2.
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from adapters import DiagonalSSM, HRMAdapter, HRMConfig, find_adapters, inject
from adapters import generation as gen_mod
from adapters.generation import get_adapter_states

transformers = pytest.importorskip("transformers", reason="extra 'hf' not installed")
from transformers import DynamicCache  # noqa: E402

H, VOCAB, TOL = 32, 64, 1e-5


def _model(mode: str, reads: str = "mlp_input") -> torch.nn.Module:
    torch.manual_seed(0)
    cfg = transformers.LlamaConfig(hidden_size=H, intermediate_size=64, num_hidden_layers=2,
                                   num_attention_heads=2, num_key_value_heads=1,
                                   vocab_size=VOCAB, bos_token_id=0, eos_token_id=0)
    model = inject(transformers.LlamaForCausalLM(cfg).eval(),
                   HRMConfig(d_state=6, mode="complex" if mode == "complex" else "real",
                             gate_init=0.5, reads=reads))
    rng = np.random.default_rng(1)
    for i, adapted in enumerate(find_adapters(model).values()):
        if mode == "mixed":  # 3 real poles (one negative) and 2 complex pairs, as reduce makes
            a = np.array([0.95, -0.6, 0.3 + 0.1 * i, 0.9 * np.exp(0.4j), 0.7 * np.exp(2.0j)])
            cplx = a.imag != 0
            B = rng.standard_normal((5, H)) + 1j * rng.standard_normal((5, H)) * cplx[:, None]
            C = rng.standard_normal((H, 5)) + 1j * rng.standard_normal((H, 5)) * cplx
            ssm = DiagonalSSM.from_discrete(a, B / H ** 0.5, C, dtype=torch.float32)
            adapted.adapter = HRMAdapter(H, ssm=ssm, gate_init=0.5, reads=reads)
        else:
            ssm = adapted.adapter.ssm
            with torch.no_grad():  # long memory: a lost or stale state shows in the logits
                for p in (getattr(ssm, "log_dt", None), getattr(ssm, "log_dt_cplx", None)):
                    if p is not None:
                        p.fill_(-2.5)
    return model


def _ids(batch: int, length: int, seed: int = 2) -> torch.Tensor:
    return torch.randint(1, VOCAB, (batch, length), generator=torch.Generator().manual_seed(seed))


def _decode(model, seq, prefill, *, fast=True, mask=False):
    """Logits of a prefill then one token per call (what greedy generate does)."""
    runs = []
    original = gen_mod.AdapterRuntime._plan

    def plan(self, ctx):
        p = original(self, ctx) if fast else None
        runs.append(p)
        return p

    kw = {}
    with torch.no_grad(), pytest.MonkeyPatch.context() as mp:
        mp.setattr(gen_mod.AdapterRuntime, "_plan", plan)
        cache = DynamicCache(config=model.config)
        if mask:
            kw["attention_mask"] = torch.ones_like(seq[:, :prefill])
        steps = [model(seq[:, :prefill], cache=cache, **kw).logits[:, -1]]
        for t in range(prefill, seq.shape[1]):
            if mask:
                kw["attention_mask"] = torch.ones_like(seq[:, : t + 1])
            steps.append(model(seq[:, t:t + 1], cache=cache, **kw).logits[:, -1])
    return torch.stack(steps, 1), cache, runs


@pytest.mark.parametrize("mode", ["real", "complex", "mixed"])
@pytest.mark.parametrize("batch", [1, 2])
def test_fast_decode_equals_the_general_path_and_the_full_forward(mode, batch):
    model = _model(mode)
    seq = _ids(batch, 14)
    fast, cache_f, runs = _decode(model, seq, 5, mask=batch == 2)
    assert len(runs) == 9 and all(p is not None and all(p.ran) for p in runs)  # taken throughout
    general, cache_g, runs_g = _decode(model, seq, 5, fast=False, mask=batch == 2)
    assert not any(runs_g)
    with torch.no_grad():
        full = model(seq, use_cache=False).logits[:, 4:]  # (B, 10, V)
    assert (fast - general).abs().max().item() < TOL
    assert (fast - full).abs().max().item() < TOL
    s_f, s_g = (next(iter(get_adapter_states(c).values())) for c in (cache_f, cache_g))
    assert s_f.keys() == s_g.keys()
    n = 5 if mode == "mixed" else 6
    for k in s_g:  # the states stored with the cache, in the adapters' own layout
        assert s_f[k].dtype == s_g[k].dtype and s_f[k].shape == s_g[k].shape == (batch, n)
        assert (s_f[k] - s_g[k]).abs().max().item() < TOL


@pytest.mark.parametrize("mode", ["real", "mixed"])
def test_fast_decode_reading_the_output_it_adds_to(mode):
    """``reads="mlp_output"``: the stream is the target's output, which the fast step then adds
    the branch to in place; every group's state must read it before any readout writes it."""
    model = _model(mode, reads="mlp_output")
    seq = _ids(2, 10)
    fast, _, runs = _decode(model, seq, 4)
    assert len(runs) == 6 and all(p is not None and all(p.ran) for p in runs)
    general, _, _ = _decode(model, seq, 4, fast=False)
    with torch.no_grad():
        full = model(seq, use_cache=False).logits[:, 3:]
    assert (fast - general).abs().max().item() < TOL
    assert (fast - full).abs().max().item() < TOL


def test_crop_by_one_after_fast_steps_and_reorder_resume_exactly():
    model = _model("mixed")
    seq = _ids(2, 12)
    alt = _ids(2, 1, seed=7)
    with torch.no_grad():
        _, cache, _ = _decode(model, seq[:, :10], 5)
        cache.crop(-1)  # back to 9 tokens: the state before the last fast step
        out = model(alt, cache=cache).logits[:, -1]
        ref = model(torch.cat([seq[:, :9], alt], 1), use_cache=False).logits[:, -1]
        assert (out - ref).abs().max().item() < TOL
        cache.reorder_cache(torch.tensor([1, 0]))  # beam search: states follow the rows
        out = model(seq[[1, 0], 10:11], cache=cache).logits[:, -1]
        ref = model(torch.cat([seq[:, :9], alt, seq[:, 10:11]], 1)[[1, 0]],
                    use_cache=False).logits[:, -1]
    assert (out - ref).abs().max().item() < TOL


def test_a_padded_decode_token_feeds_no_state():
    """A decode step whose token is masked leaves the state at ā s (general path on CPU)."""
    model = _model("real")
    seq = _ids(1, 8)
    with torch.no_grad():
        cache = DynamicCache(config=model.config)
        model(seq[:, :6], cache=cache)
        before = dict(next(iter(get_adapter_states(cache).values())))
        mask = torch.ones(1, 7, dtype=torch.long)
        mask[:, -1] = 0
        model(seq[:, 6:7], cache=cache, attention_mask=mask)
        after = next(iter(get_adapter_states(cache).values()))
    for name, adapted in find_adapters(model).items():
        a = adapted.adapter.ssm.discrete()[0]
        assert (after[name] - a * before[name]).abs().max().item() < 1e-6


def test_states_handed_out_are_not_rewritten_by_later_steps():
    """The fast path reuses a ring of state buffers; tensors given out are copies."""
    model = _model("complex")
    seq = _ids(1, 12)
    with torch.no_grad():
        cache = DynamicCache(config=model.config)
        model(seq[:, :5], cache=cache)
        model(seq[:, 5:6], cache=cache)
        model(seq[:, 6:7], cache=cache)
        given = next(iter(get_adapter_states(cache).values()))
        kept = {k: v.clone() for k, v in given.items()}
        for t in range(7, 12):
            model(seq[:, t:t + 1], cache=cache)
    assert all(torch.equal(given[k], kept[k]) for k in kept)


def test_a_cache_filled_under_inference_mode_continues_under_no_grad():
    model = _model("real")
    seq = _ids(1, 10)
    cache = DynamicCache(config=model.config)
    with torch.inference_mode():
        model(seq[:, :5], cache=cache)
        for t in range(5, 8):
            model(seq[:, t:t + 1], cache=cache)
    with torch.no_grad():
        out = [model(seq[:, t:t + 1], cache=cache).logits[:, -1] for t in (8, 9)]
        full = model(seq, use_cache=False).logits[:, 8:]
    assert (torch.stack(out, 1) - full).abs().max().item() < TOL


def test_a_decode_step_takes_one_token_streams_and_declines_the_rest():
    """``DecodePlan.step`` adds the branch for a (B, 1, H) or flattened (B, H) stream and returns
    None (the general path runs) for any other shape, another batch or width, or a name it does
    not hold; one step is ``h + (ā s + x B̄ᵀ) (gate C)ᵀ``."""
    from adapters._decode import DecodePlan, DecodeWeights, StateStack

    torch.manual_seed(0)
    adapters = {"a": HRMAdapter(H, 4, gate_init=0.5),
                "b": HRMAdapter(H, 3, gate_init=0.5, mode="complex")}
    weights = DecodeWeights(list(adapters), [ad.decode_weights() for ad in adapters.values()])
    B = 2
    s0 = {"a": torch.randn(B, 4), "b": torch.randn(B, 3, dtype=torch.complex64)}
    prev = StateStack.gather(weights, s0, B)
    x, h = torch.randn(B, 1, H), torch.randn(B, 1, H)
    with torch.no_grad():
        plan = DecodePlan(weights, prev, None)
        for bad in (torch.randn(B, 2, H), torch.randn(B + 1, 1, H), torch.randn(B, 1, H + 1),
                    torch.randn(B, H + 1), torch.randn(1, B, 1, H)):
            assert plan.step("a", bad, bad.clone()) is None
        assert plan.step("a", x, torch.randn(B, 2, H)) is None  # stream and output differ
        assert plan.step("c", x, h.clone()) is None
        assert not any(plan.ran)
        out_a = plan.step("a", x, h.clone())  # (B, 1, H)
        out_b = plan.step("b", x[:, 0], h[:, 0].clone())  # flattened (B, H)
        assert plan.ran == [True, True]
        for name, out in (("a", out_a), ("b", out_b)):
            y, _ = adapters[name].step(x[:, 0], s0[name])
            assert out.shape == ((B, 1, H) if name == "a" else (B, H))
            assert (out.reshape(B, H) - (h[:, 0] + y)).abs().max().item() < TOL


def test_one_row_decode_step_is_matrix_vector_where_the_products_use_the_blas():
    """Batch 1: adapters whose products have at least ``_BLAS_MIN`` multiply-adds per group
    step by ``addmv_`` on flat views (the rest, other dtypes and non-contiguous outputs by the
    batched ``baddbmm_`` step), with the same result; a stream that is not one position of
    width H is declined before anything is marked as run."""
    from adapters._decode import _BLAS_MIN, DecodePlan, DecodeWeights, StateStack

    torch.manual_seed(0)
    W = 128
    adapters = {"a": HRMAdapter(W, 4, gate_init=0.5),  # 512 multiply-adds: vector
                "b": HRMAdapter(W, 3, gate_init=0.5, mode="complex"),  # (Re, Im): 768
                "c": HRMAdapter(W, 2, gate_init=0.5)}  # 256 < _BLAS_MIN: batched
    assert W * 2 < _BLAS_MIN <= W * 4
    weights = DecodeWeights(list(adapters), [ad.decode_weights() for ad in adapters.values()])
    s0 = {"a": torch.randn(1, 4), "b": torch.randn(1, 3, dtype=torch.complex64),
          "c": torch.randn(1, 2)}
    x, h = torch.randn(1, 1, W), torch.randn(1, 1, W)
    with torch.no_grad():
        plan = DecodePlan(weights, StateStack.gather(weights, s0, 1), None)
        assert sorted(plan.vector) == ["a", "b"]
        for bad in (torch.randn(1, 2, W), torch.randn(2, 1, W), torch.randn(1, 1, W + 1),
                    torch.randn(0, W)):
            assert plan.step("a", bad, torch.randn(bad.shape)) is None
        assert plan.step("b", x, torch.randn(1, 2, W)) is None  # output of two positions
        assert not any(plan.ran)
        out = {"a": plan.step("a", x, h.clone()), "b": plan.step("b", x[:, 0], h[:, 0].clone()),
               "c": plan.step("c", x, h.clone())}
        assert plan.ran == [True, True, True]
        for name, got in out.items():
            y, _ = adapters[name].step(x[:, 0], s0[name])
            assert got.shape == ((1, W) if name == "b" else (1, 1, W))
            assert (got.reshape(1, W) - (h[:, 0] + y)).abs().max().item() < TOL
        # a half-precision stream and a non-contiguous output take the batched step
        plan = DecodePlan(weights, StateStack.gather(weights, s0, 1), None)
        y, _ = adapters["a"].step(x[:, 0], s0["a"])
        h2 = torch.randn(1, W, 2)[..., 0].unsqueeze(1)  # (1, 1, W), stride 2
        got = plan.step("a", x, h2)
        assert (got.reshape(1, W) - (h2[:, 0] + y)).abs().max().item() < TOL
        plan = DecodePlan(weights, StateStack.gather(weights, s0, 1), None)
        got = plan.step("a", x.to(torch.bfloat16), h.to(torch.bfloat16))
        assert got.dtype == torch.bfloat16 and got.shape == (1, 1, W)
        # reads="mlp_output": the stream is the output it is added to (read before written)
        plan = DecodePlan(weights, StateStack.gather(weights, s0, 1), None)
        y, _ = adapters["b"].step(h[:, 0], s0["b"])
        hh = h.clone()
        got = plan.step("b", hh, hh)
        assert got is hh and (got[:, 0] - (h[:, 0] + y)).abs().max().item() < TOL
