# ruff: noqa: E402  (imports appear where the page introduces them)
"""Quickstart for LLM fine-tuning people: put HRM adapters into a frozen causal LM, train
them, generate with a KV cache, save and reload them, and shrink them by balanced
truncation. Uses a tiny randomly initialised GPT-2 so that it runs in seconds without
downloads; ``tests/test_docs.py`` executes it."""

# [model]
import torch

from benchmarks.hrm.backbone import BackboneConfig, build_backbone

# Any Hugging Face decoder works the same way, e.g.
#   model = transformers.AutoModelForCausalLM.from_pretrained("HuggingFaceTB/SmolLM2-135M")
model = build_backbone(BackboneConfig(n_layer=2, n_head=4, n_embd=64, n_positions=64))
input_ids = torch.randint(4, 118, (2, 24))  # (B, L) token ids
with torch.no_grad():
    base_logits = model(input_ids).logits  # (B, L, vocab)
# [/model]

# [inject]
from adapters import HRMConfig, inject, print_trainable_parameters

config = HRMConfig(d_state=16)  # N = 16 states per layer, beside every block's MLP
model = inject(model, config)  # in place: base frozen, one gated SSM per MLP
print_trainable_parameters(model)
with torch.no_grad():  # the gates start at 0: the adapted model IS the base model
    assert torch.equal(model(input_ids).logits, base_logits)
# [/inject]

# [train]
from benchmarks.hrm.tasks import dfa_batches
from benchmarks.hrm.train import train

history = train(model, dfa_batches(8, k=4, length=16, seed=0), steps=10, lr=1e-2,
                progress=False)
print(f"loss {history.losses[0]:.3f} -> {history.losses[-1]:.3f}")
# [/train]

# [generate]
model.eval()
with torch.no_grad():
    out = model.generate(input_ids, max_new_tokens=5, do_sample=False)
    # The adapters carry their SSM state next to the KV cache, so cached decoding gives
    # the same tokens as re-running the full sequence each time:
    seq = input_ids
    for _ in range(5):
        seq = torch.cat([seq, model(seq).logits[:, -1:].argmax(-1)], dim=1)
assert torch.equal(out, seq)
# [/generate]

# [save]
import tempfile

from adapters import load_adapter, save_adapter

with tempfile.TemporaryDirectory() as directory:
    save_dir = save_adapter(model, directory)  # hrm_adapter.safetensors + hrm_config.json
    fresh = build_backbone(BackboneConfig(n_layer=2, n_head=4, n_embd=64, n_positions=64))
    fresh = load_adapter(fresh, save_dir)
    with torch.no_grad():
        assert torch.equal(fresh(input_ids).logits, model(input_ids).logits)
# [/save]

# [reduce]
from adapters import calibrate, reduce

# Phase 1 is done: stream real data through the model and collect, per adapter, the
# second moment of the states it actually visits (the data-driven Gramian).
stats = calibrate(model, dfa_batches(8, k=4, length=16, seed=1), max_batches=2,
                  progress=False)
# Balanced truncation per layer, keeping sigma_i / sigma_1 >= 0.01 (the paper's rule);
# the reduced adapters are diagonal again, trainable, and saved like the full ones.
report = reduce(model, rel_tol=0.01, gramian="data", stats=stats, measure=True)
print(report.to_markdown())
for layer in report.layers:  # every bound includes the gate |g|
    assert layer.lower_bound <= layer.measured_error * (1 + 1e-6) + 1e-12
    assert layer.measured_error <= layer.upper_bound * (1 + 1e-6) + 1e-12
print(f"adapter parameters: {report.params_before} -> {report.params_after}")
# Phase 2: fine-tune the reduced adapters with the same loop as before.
history = train(model, dfa_batches(8, k=4, length=16, seed=2), steps=5, lr=1e-2,
                progress=False)
# [/reduce]
