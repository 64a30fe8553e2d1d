# ruff: noqa: E402  (imports appear where the page introduces them)
"""Quickstart for LLM fine-tuning people: put HRM adapters into a frozen Hugging Face causal LM,
train them with a plain ``transformers.Trainer``, generate with a KV cache, save and reload
them, and shrink them by balanced truncation. A tiny randomly initialised Llama and a tokenizer
trained in memory keep it to seconds without downloads; ``tests/test_docs.py`` executes it (and,
marked slow, the same steps on the real SmolLM2-135M)."""

# [model]
import torch
import transformers
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

# With a real model the two objects come from the hub:
#   tokenizer = transformers.AutoTokenizer.from_pretrained("HuggingFaceTB/SmolLM2-135M")
#   model = transformers.AutoModelForCausalLM.from_pretrained("HuggingFaceTB/SmolLM2-135M")
# Here: a byte-level BPE tokenizer trained on a few lines and a 2-layer random Llama.
CORPUS = [f"the key {k} opens door {k} . " * 3 + f"door {k} is open ." for k in range(40)]
bpe = Tokenizer(models.BPE(unk_token="<unk>"))
bpe.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
bpe.decoder = decoders.ByteLevel()
bpe.train_from_iterator(CORPUS, trainers.BpeTrainer(
    vocab_size=300, special_tokens=["<pad>", "<s>", "</s>", "<unk>"], show_progress=False,
    initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
tokenizer = transformers.PreTrainedTokenizerFast(
    tokenizer_object=bpe, pad_token="<pad>", bos_token="<s>", eos_token="</s>", unk_token="<unk>")


def load_base() -> transformers.PreTrainedModel:
    """The frozen base model (here: the same random weights on every call)."""
    torch.manual_seed(0)
    return transformers.LlamaForCausalLM(transformers.LlamaConfig(
        vocab_size=len(tokenizer), hidden_size=64, intermediate_size=128, num_hidden_layers=2,
        num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=128,
        pad_token_id=tokenizer.pad_token_id, bos_token_id=tokenizer.bos_token_id,
        eos_token_id=tokenizer.eos_token_id))


model = load_base()
batch = tokenizer(["the key 7 opens", "door 3 is"], return_tensors="pt", padding=True)
with torch.no_grad():
    base_logits = model(**batch).logits  # (B, L, vocab)
# [/model]

# [inject]
from adapters import HRMConfig, inject, print_trainable_parameters

config = HRMConfig(d_state=16)  # N = 16 states per layer, beside every block's MLP
model = inject(model, config)  # in place: base frozen, one gated SSM per MLP
print_trainable_parameters(model)
with torch.no_grad():  # the gates start at 0: the adapted model IS the base model
    assert torch.equal(model(**batch).logits, base_logits)
# [/inject]

# [train]
import tempfile

train_set = [tokenizer(line) for line in CORPUS]  # any map-style dataset of token ids works
collator = transformers.DataCollatorForLanguageModeling(tokenizer, mlm=False)  # labels = ids


def fit(model, steps: int, output_dir: str) -> list[float]:
    """Train the trainable (adapter) parameters with a plain Trainer; the logged losses."""
    args = transformers.TrainingArguments(
        output_dir=output_dir, max_steps=steps, per_device_train_batch_size=8,
        learning_rate=1e-2, logging_steps=10, save_steps=steps, save_only_model=True,
        report_to=[], disable_tqdm=True, use_cpu=True)
    trainer = transformers.Trainer(model=model, args=args, train_dataset=train_set,
                                   data_collator=collator)
    trainer.train()
    return [h["loss"] for h in trainer.state.log_history if "loss" in h]


run_dir = tempfile.mkdtemp()
losses = fit(model, steps=30, output_dir=run_dir)  # writes run_dir/checkpoint-30 at the end
print(f"training loss {losses[0]:.3f} -> {losses[-1]:.3f}")
# [/train]

# [generate]
model.eval()
tokenizer.padding_side = "left"  # decoder-only generation pads on the left
prompt = tokenizer(["the key 7 opens door", "door 3"], return_tensors="pt", padding=True)
gen = {"max_new_tokens": 6, "do_sample": False, "pad_token_id": tokenizer.pad_token_id}
with torch.no_grad():
    cached = model.generate(**prompt, **gen)  # KV cache + the adapters' SSM states
    uncached = model.generate(**prompt, use_cache=False, **gen)  # full re-run every token
assert torch.equal(cached, uncached)
print(tokenizer.batch_decode(cached, skip_special_tokens=True))
# [/generate]

# [save]
from adapters import load_adapter, save_adapter

with torch.no_grad():
    logits = model(**batch).logits
with tempfile.TemporaryDirectory() as directory:
    save_adapter(model, directory)  # hrm_adapter.safetensors (+ hrm_config.json), adapters only
    fresh = load_adapter(load_base(), directory)  # into a fresh copy of the base model
    with torch.no_grad():
        assert torch.equal(fresh(**batch).logits, logits)
# The Trainer's checkpoint folders hold the same adapter checkpoint (an adapted model's
# save_pretrained writes it next to the base weights, which keep their names):
from_trainer = load_adapter(load_base(), f"{run_dir}/checkpoint-30")
with torch.no_grad():
    assert torch.equal(from_trainer(**batch).logits, logits)
# [/save]

# [reduce]
from adapters import calibrate, reduce

# Stream real data through the model and collect, per adapter, the second moment of the
# states it actually visits (the data-driven Gramian).
calib = [tokenizer(CORPUS[i:i + 8], return_tensors="pt", padding=True) for i in (0, 8, 16)]
stats = calibrate(model, calib, progress=False)
# Balanced truncation per layer, keeping sigma_i / sigma_1 >= 0.01; the reduced adapters are
# diagonal again, trainable, and saved like the full ones.
report = reduce(model, rel_tol=0.01, gramian="data", stats=stats, measure=True)
print(report.to_markdown())
for layer in report.layers:  # every bound includes the gate |g|
    assert layer.lower_bound <= layer.measured_error * (1 + 1e-6) + 1e-12
    assert layer.measured_error <= layer.upper_bound * (1 + 1e-6) + 1e-12
print(f"adapter parameters: {report.params_before} -> {report.params_after}")
losses = fit(model, steps=10, output_dir=f"{run_dir}/phase2")  # phase 2, smaller adapters

import matplotlib.pyplot as plt

report.plot(fig=plt.figure(figsize=(10, 4), layout="constrained"))  # HSVs and kept orders
# [/reduce]

import shutil

shutil.rmtree(run_dir)
