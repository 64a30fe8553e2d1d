# ruff: noqa: E402  (imports appear where the page introduces them)
"""Tutorial: fine-tune a frozen GPT-2 with HRM adapters and with an iso-parameter LoRA
(Hugging Face peft) on in-context DFA execution, and compare.

By default this runs a *reduced* version that finishes in seconds on a laptop CPU (and
is executed by the documentation build): a tiny randomly initialised frozen backbone,
short sequences, 40 steps. Its numbers exercise the pipeline; they do not rank the
methods. ``PYTHONPATH=. python docs/tutorials/hrm_vs_lora.py --full`` (from the repository
root, where the harness package ``benchmarks.hrm`` lives) runs the same steps at the
documented size: the project's pretrained character GPT-2 (pretrained once and cached),
sequences of 128 bits and 1,500 steps per method. The project's experiment command,
``python -m benchmarks.hrm --preset small`` (or ``paper``), runs this comparison with its
recorded settings and writes a results table.
"""

import sys

FULL = "--full" in sys.argv[1:]

# [setup]
import copy

import torch

from benchmarks.hrm.backbone import BackboneConfig, build_backbone, pretrained_backbone
from benchmarks.hrm.tasks import (
    STATE_IDS,
    Batch,
    character_table,
    dfa_batches,
    dfa_task,
    task_baselines,
)

CHARS = character_table()  # task tokens written as characters: states A, B, ..., bits 0/1, | =


def as_text(batches):
    """Task batches as plain characters, the form a pretrained language model reads."""
    for batch in batches:
        labels = batch.labels.clone()
        labels[labels >= 0] = CHARS[labels[labels >= 0]]
        yield Batch(CHARS[batch.input_ids], labels)


torch.manual_seed(0)
if FULL:
    base = pretrained_backbone(progress=True).model  # 4 layers, width 128, frozen
    K, LENGTH, STEPS, BATCH, N_TEST, LR = 4, 128, 1500, 32, 1000, 3e-3
else:
    base = build_backbone(BackboneConfig(n_layer=2, n_head=4, n_embd=64, n_positions=64))
    K, LENGTH, STEPS, BATCH, N_TEST, LR = 4, 16, 40, 8, 128, 1e-2
test = next(as_text([dfa_task(N_TEST, k=K, length=LENGTH, seed=1)]))  # fixed test set
ANSWERS = CHARS[list(STATE_IDS[:K])].tolist()  # the K possible answers, as character ids
baselines = task_baselines(test, n_classes=K)
print(f"chance {baselines.chance:.3f}, majority {baselines.majority:.3f}")
# [/setup]

# [hrm]
from adapters.config import HRMConfig
from adapters.injection import get_nb_trainable_parameters, inject

config = HRMConfig(d_state=16)
hrm_model = inject(copy.deepcopy(base), config)  # in place on the copy; base stays untouched
with torch.no_grad():  # gate 0 at initialisation: exactly the base model
    assert torch.equal(hrm_model(test.input_ids[:4]).logits, base(test.input_ids[:4]).logits)
hrm_params, total = get_nb_trainable_parameters(hrm_model)
print(f"HRM: {hrm_params} trainable of {total} parameters")
# [/hrm]

# [lora]
from benchmarks.hrm.lora import iso_parameter_lora_rank, make_lora_model

rank = iso_parameter_lora_rank(base, config)  # LoRA on the linears of the same MLPs
lora_model = make_lora_model(copy.deepcopy(base), rank, config=config)
lora_params = sum(p.numel() for p in lora_model.parameters() if p.requires_grad)
print(f"LoRA rank {rank}: {lora_params} trainable parameters")
# [/lora]

# [train]
from benchmarks.hrm.train import evaluate_accuracy, train

results = {}
for name, model in (("HRM", hrm_model), ("LoRA", lora_model)):
    history = train(model, as_text(dfa_batches(BATCH, k=K, length=LENGTH, seed=0)), steps=STEPS,
                    lr=LR, warmup_steps=STEPS // 10, progress=FULL, desc=name)
    model.eval()
    accuracy = evaluate_accuracy(model, [test], candidates=ANSWERS)
    results[name] = (history, accuracy)
    print(f"{name}: final loss {history.losses[-1]:.3f}, test accuracy {accuracy:.3f}, "
          f"{history.seconds:.1f} s")
# [/train]

# [reduce]
from adapters import calibrate, reduce

stats = calibrate(hrm_model, as_text(dfa_batches(BATCH, k=K, length=LENGTH, seed=3)),
                  max_batches=8 if FULL else 4, progress=False)
report = reduce(hrm_model, rel_tol=0.01, gramian="data", stats=stats)  # in place
hrm_model.eval()
zero_shot = evaluate_accuracy(hrm_model, [test], candidates=ANSWERS)
phase2 = train(hrm_model, as_text(dfa_batches(BATCH, k=K, length=LENGTH, seed=4)),
               steps=STEPS // 3,
               lr=LR / 3, progress=FULL, desc="HRM-BT")
hrm_model.eval()
results["HRM-BT"] = (phase2, evaluate_accuracy(hrm_model, [test], candidates=ANSWERS))
bt_params = report.params_after
print(report.to_markdown())
print(f"HRM-BT: {hrm_params} -> {bt_params} parameters; accuracy {zero_shot:.3f} right after "
      f"reduction, {results['HRM-BT'][1]:.3f} after phase 2")
# [/reduce]

# [generate]
prompt = test.input_ids[:2, :-1]  # everything up to the answer
with torch.no_grad():
    out = hrm_model.generate(prompt, max_new_tokens=1, do_sample=False)
    full = hrm_model(prompt).logits[:, -1].argmax(-1)  # the same prediction without a cache
assert torch.equal(out[:, -1], full)
# [/generate]

# [plot]
import matplotlib.pyplot as plt
import numpy as np

fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(10, 3.6), layout="constrained",
                               gridspec_kw={"width_ratios": [2, 1]})
window = max(1, STEPS // 20)
for name in ("HRM", "LoRA"):
    losses = np.convolve(results[name][0].losses, np.ones(window) / window, mode="valid")
    ax1.plot(np.arange(window, STEPS + 1), losses, label=name)
losses = np.convolve(results["HRM-BT"][0].losses, np.ones(window) / window, mode="valid")
ax1.plot(STEPS + np.arange(window, STEPS // 3 + 1), losses, label="HRM-BT (phase 2)")
ax1.set(xlabel="step", ylabel="training loss (answer token)",
        title=f"DFA, k = {K}, T = {LENGTH}" + ("" if FULL else " (reduced run)"))
ax1.legend()
names = ["HRM", "HRM-BT", "LoRA"]
counts = {"HRM": hrm_params, "HRM-BT": bt_params, "LoRA": lora_params}
ax2.bar([f"{n}\n{counts[n]}" for n in names], [results[n][1] for n in names],
        color=["C0", "C2", "C1"])
ax2.axhline(baselines.chance, color="gray", ls=":", label="chance")
ax2.axhline(baselines.majority, color="gray", ls="--", label="majority class")
ax2.set(ylim=(0, 1), ylabel="test accuracy", title="accuracy (trainable parameters)")
ax2.legend(fontsize=8)
# [/plot]
