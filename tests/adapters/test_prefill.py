"""One discretisation of all adapters per chunk of cached generation (``adapters._prefill``)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from adapters import DiagonalSSM, HRMConfig, _prefill, find_adapters, generation, inject
from adapters import ssm as ssm_mod

transformers = pytest.importorskip("transformers", reason="extra 'hf' not installed")
from transformers import DynamicCache  # noqa: E402


def _mixed(H: int, n_real: int, n_cplx: int, seed: int) -> DiagonalSSM:
    rng = np.random.default_rng(seed)
    a = np.concatenate([rng.uniform(-0.99, 0.99, n_real),
                        rng.uniform(0.1, 0.99, n_cplx) * np.exp(1j * rng.uniform(0.1, 3, n_cplx))])
    cplx = a.imag != 0
    B = rng.standard_normal((a.size, H)) + 1j * rng.standard_normal((a.size, H)) * cplx[:, None]
    C = rng.standard_normal((H, a.size)) + 1j * rng.standard_normal((H, a.size)) * cplx
    return DiagonalSSM.from_discrete(a, B, C, real_modes=a.imag == 0, dtype=torch.float32)


def test_projections_of_all_modules_at_once_equal_each_modules_own_bit_for_bit():
    """Sizes that leave tails in the vector loops (1, 5, 7, 13, 33 modes) and whole vectors."""
    torch.manual_seed(0)
    ssms = {f"r{n}": DiagonalSSM(24, n) for n in (1, 5, 16, 33)}
    ssms.update({f"c{n}": DiagonalSSM(24, n, mode="complex") for n in (1, 7, 13)})
    ssms.update({f"m{i}": _mixed(24, 3 + i, 2 + i, i) for i in range(3)})
    with torch.no_grad():  # trained-looking values: every parameter moved off its init
        for m in ssms.values():
            for p in m.parameters():
                p.add_(0.3 * torch.randn_like(p))
        got = _prefill.projections({**ssms, "other": torch.nn.Linear(2, 2)})
        assert got.keys() == ssms.keys()
        for name, m in ssms.items():
            own = m._projections()
            for x, y in zip(got[name], own, strict=True):
                assert (x is None and y is None) or (x.dtype == y.dtype and torch.equal(x, y))


def test_modules_of_other_dtypes_are_discretised_each_on_its_own():
    a, b = DiagonalSSM(8, 4), DiagonalSSM(8, 4, dtype=torch.float64)
    got = _prefill.projections({"a": a, "b": b})
    for name, m in (("a", a), ("b", b)):
        assert all(torch.equal(x, y) for x, y in zip(got[name][2:], m._projections()[2:],
                                                  strict=True))
        assert got[name][2].dtype == m.B.dtype


def test_a_prompt_discretises_every_adapter_in_one_set_of_kernels(monkeypatch):
    """A cached prompt calls the real modes' zero-order hold once for all layers; its logits and
    the stored states are those of the per-layer discretisation bit for bit."""
    torch.manual_seed(0)
    cfg = transformers.LlamaConfig(hidden_size=32, intermediate_size=64, num_hidden_layers=3,
                                   num_attention_heads=2, num_key_value_heads=1, vocab_size=64)
    model = inject(transformers.LlamaForCausalLM(cfg).eval(), HRMConfig(d_state=6, gate_init=0.5))
    with torch.no_grad():
        for a in find_adapters(model).values():
            a.adapter.ssm.log_dt.add_(torch.randn(6))
    seq = torch.randint(1, 64, (2, 9), generator=torch.Generator().manual_seed(1))
    calls = []
    hold = ssm_mod.zoh_real

    def counted(*args):
        calls.append(args[0].shape[0])
        return hold(*args)

    def run():
        cache = DynamicCache(config=model.config)
        with torch.no_grad():
            logits = model(seq, cache=cache).logits
        states = next(iter(cache._hrm_adapter_states.values())).states
        return logits, states

    monkeypatch.setattr(_prefill, "zoh_real", counted)
    batched, states = run()
    assert calls == [3 * 6]  # one call, the 3 layers' 6 modes side by side
    monkeypatch.setattr(generation, "_projections",
                        lambda ssms: {k: m._projections() for k, m in ssms.items()})
    alone, states_alone = run()
    assert torch.equal(batched, alone)
    assert all(torch.equal(states[k], states_alone[k]) for k in states_alone)
    with torch.no_grad():
        assert (batched - model(seq, use_cache=False).logits).abs().max().item() < 1e-5
