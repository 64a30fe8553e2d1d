"""Several threads running ``generate`` on one adapted model at once (a server's thread pool).

Before: the runtime kept the calls under way (their contexts and the fast decode step) and a
pair's captured input (OPT's ``fc1`` -> ``fc2``) in one place per model, so concurrent calls
read each other's context: 14 of 16 calls raised AdapterError ("the KV cache holds 7 tokens
but the adapter states are known only after 0..6 tokens") or AdapterShapeError, where the base
model and the same model inside ``disable_adapter`` returned 16 of 16 right. Both are per
thread now; ``disable_adapter`` stays one flag per model (as in PEFT), so a generation it starts
in another thread (a streamer's) runs the base model.
"""

from __future__ import annotations

import sys
import threading

import pytest
import torch

from adapters import HRMConfig, disable_adapter, inject
from tests.adapters._tiny import perturbed, tiny_causal_lm

pytest.importorskip("transformers", reason="the 'hf' extra is not installed")

PROMPTS = [torch.tensor([[5, 9, 14, 3, 22]]), torch.tensor([[1, 2, 60, 33, 8, 19], [7] * 6]),
           torch.tensor([[40, 41, 42, 43, 44, 45, 46]]), torch.tensor([[11, 3, 9, 20]] * 3)]
GEN = {"max_new_tokens": 12, "min_new_tokens": 12, "do_sample": False, "pad_token_id": 0}


def _adapted(kind: str):
    return perturbed(inject(tiny_causal_lm(kind), HRMConfig(d_state=8)))


def _concurrently(model, rounds: int = 3) -> list[str]:
    """Each prompt generated ``rounds`` times in its own thread, all threads at once."""
    with torch.no_grad():
        expected = [model.generate(p, **GEN) for p in PROMPTS]
    results: list[str] = []
    start = threading.Barrier(len(PROMPTS))

    def work(i: int) -> None:
        start.wait()
        for _ in range(rounds):
            try:
                with torch.no_grad():
                    out = model.generate(PROMPTS[i], **GEN)
                results.append("ok" if torch.equal(out, expected[i]) else "wrong tokens")
            except Exception as exc:  # noqa: BLE001 - what went wrong is the test's output
                results.append(f"{type(exc).__name__}: {exc}")

    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-5)  # switch threads often, as busy servers do
    try:
        threads = [threading.Thread(target=work, args=(i,)) for i in range(len(PROMPTS))]
        for t in threads:
            t.start()
        for t in threads:
            t.join(timeout=240)
    finally:
        sys.setswitchinterval(interval)
    assert not any(t.is_alive() for t in threads)
    return results


@pytest.mark.parametrize("kind", ["llama", "opt"])  # opt: the branch reads fc1's input
def test_concurrent_generation_gives_each_thread_its_own_tokens(kind):
    results = _concurrently(_adapted(kind))
    assert results == ["ok"] * (3 * len(PROMPTS))


def test_disable_adapter_covers_a_generation_it_starts_in_another_thread():
    model = _adapted("llama")
    prompt = PROMPTS[0]
    with torch.no_grad():
        adapted = model.generate(prompt, **GEN)
        with disable_adapter(model):
            base = model.generate(prompt, **GEN)
            out = {}
            worker = threading.Thread(target=lambda: out.setdefault(
                "tokens", model.generate(prompt, **GEN)))
            worker.start()
            worker.join(timeout=240)
    assert not torch.equal(adapted, base)  # the branch matters for these tokens
    assert torch.equal(out["tokens"], base)
