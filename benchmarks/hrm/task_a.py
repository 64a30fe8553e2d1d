"""Task A of issue 18: in-context DFA execution on the tiny frozen character backbone.

Protocol (every choice fixed here before a gate, validation or test number was seen):

* **Backbone gate.** The tiny character GPT-2 (:data:`BACKBONE`: 4 layers, 4 heads, width 128,
  128-character context) is pretrained once on ``pydoc_data.topics`` text mixed with generic
  copying data (repeated random strings, :func:`benchmarks.hrm.tasks.copy_batches`; nothing
  DFA-specific) and frozen. Gate: bits per character on the whole held-out text split
  <= :data:`GATE_BPC` and next-character accuracy on the second copy of a repeated random
  20-character string (all 20 characters, argmax over the whole vocabulary, 1,000 strings)
  >= :data:`GATE_INDUCTION`; both reported beside an add-one bigram model of the training
  text. If the gate fails, the DFA study is not run and the report says Task A is not
  meaningful on this backbone.
* **Task.** DFA with k = 4 states, T = 64 bits (:func:`benchmarks.hrm.tasks.dfa_task`),
  written as characters (:func:`benchmarks.hrm.tasks.character_table`); the answer is read as
  the argmax over the k state characters. Training stream ``dfa_batches(seed = run seed)``
  (the same for every arm of a seed); a validation set (:data:`VAL_SEED`) for the pilots only;
  a shared test set (:data:`~benchmarks.hrm.presets.TEST_SEED`) for the main runs only.
* **Arms** (all 4 blocks, ~33k trainable parameters each): ``hrm`` (N = 32 beside every MLP,
  :func:`adapters.inject`), ``stateless`` (the same module with ``ā = 0``: same B̄, C, gate;
  :func:`benchmarks.hrm.lm_study._stateless_forward`), ``lora_attn`` (peft LoRA on the fused
  q/k/v projection ``attn.c_attn``) and ``lora_mlp`` (peft LoRA on ``mlp.c_fc`` and
  ``mlp.c_proj``), LoRA ranks with the trainable-parameter count closest to HRM's.
* **Training**, identical for all arms: AdamW (no weight decay), ``steps`` steps of ``batch``
  samples, linear warm-up over 10 % then cosine to 0
  (``transformers.get_cosine_schedule_with_warmup``), gradient clip 1.0, loss = cross-entropy
  on the answer token only. Final checkpoint only.
* **Learning rate per arm**: pilots on seed 0, ``pilot_steps`` long (same schedule shape),
  scored by validation log-loss; grid factor 3 apart, extended on the side of an edge winner
  (at most ``max_extend`` times), so the choice is interior.
* **Report** (:mod:`benchmarks.hrm.task_a_report`): test accuracy and log-loss (nats, softmax
  over the k state characters) per arm and seed; the Bayes ladder (m = 0, 1, 4, 8: the best
  predictor given the table and the last m bits) exactly (:mod:`benchmarks.hrm.dfa_bayes`) and
  on this test set; accuracy on the stratum *not* decided by the last 8 bits (test samples
  whose m = 8 posterior is not a certainty); paired-bootstrap 95 % intervals of arm
  differences over the test samples (:func:`benchmarks.hrm.lm_study.paired_ci`).
* **A win**: HRM's test accuracy above the best LoRA arm's with the paired 95 % interval of
  the difference entirely above 0 on every seed, *and* above stateless HRM's likewise.
  Anything else is a null result.

Every run writes one JSON cell under ``benchmarks/results/task_a/cells/``, named by a hash of
its configuration and of this file, so a killed run resumes from its finished cells and a
code change never mixes with old cells.

Run: ``python -m benchmarks.hrm.task_a`` (``--help`` for the budget options).
"""

from __future__ import annotations

import argparse
import copy
import dataclasses
import hashlib
import json
import math
import os
import platform
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
from torch import nn

from benchmarks.hrm.backbone import BackboneConfig, CopyingBackboneConfig, pretrained_backbone
from benchmarks.hrm.presets import TEST_SEED
from benchmarks.hrm.tasks import (
    BIT_IDS,
    IGNORE_INDEX,
    STATE_IDS,
    VOCAB_SIZE,
    Batch,
    char_corpus,
    character_table,
    dfa_batches,
    dfa_task,
    induction_task,
    lm_eval_batches,
)

RESULTS = Path(__file__).resolve().parents[1] / "results" / "task_a"
ARMS = ("hrm", "stateless", "lora_attn", "lora_mlp")
LR_GRIDS = {"hrm": (1e-2, 3e-2, 1e-1), "stateless": (1e-2, 3e-2, 1e-1),
            "lora_attn": (1e-3, 3e-3, 1e-2), "lora_mlp": (1e-3, 3e-3, 1e-2)}
VAL_SEED = 20_000
INDUCTION_SEED = 30_000
GATE_BPC = 2.5
GATE_INDUCTION = 0.5
LADDER = (0, 1, 4, 8)

# The backbone recipe of Task A, fixed before any gate or test number was seen: the default
# architecture (4 layers, 4 heads, width 128) with a 128-character context, pretrained for
# 3,000 steps of 16 rows (12 text windows + 4 rows of repeated random strings), AdamW 3e-3,
# 150 warm-up steps then cosine to 10 % (3,000 rather than 4,000 steps: 0.6 s per step measured
# on the shared CPU, and the gate has a 35-minute pretraining budget).
BACKBONE = CopyingBackboneConfig(n_layer=4, n_head=4, n_embd=128, n_positions=128, steps=3000,
                                 batch_size=16, lr=3e-3, warmup_steps=150, weight_decay=0.01,
                                 task_mix=0.0, copy_mix=0.25, copy_min_length=4,
                                 copy_max_length=40, seed=0)


def code_version() -> str:
    """Hash of this file (it defines every run; the report lives elsewhere)."""
    return hashlib.sha256(Path(__file__).read_bytes()).hexdigest()[:10]


@dataclass(frozen=True)
class Budget:
    """What the study does (shared by all arms)."""

    k: int = 4
    T: int = 64  # noqa: N815 - the paper's name for the input length
    d_state: int = 32
    batch: int = 16
    steps: int = 1200
    pilot_steps: int = 300
    warmup_frac: float = 0.1
    n_val: int = 1000
    n_test: int = 2000
    n_induction: int = 1000
    induction_length: int = 20


# ---------------------------------------------------------------- the gate
def bigram_log2_probs(train: torch.Tensor) -> torch.Tensor:
    """Add-one bigram model of a token stream: ``(V, V)`` table of ``log2 p(b | a)``."""
    counts = torch.ones(VOCAB_SIZE, VOCAB_SIZE, dtype=torch.float64)
    counts.index_put_((train[:-1], train[1:]), torch.ones(train.numel() - 1, dtype=torch.float64),
                      accumulate=True)
    return torch.log2(counts / counts.sum(1, keepdim=True))


def _targets(batches: list[Batch]) -> tuple[torch.Tensor, torch.Tensor]:
    prev = torch.cat([b.input_ids[:, :-1].reshape(-1) for b in batches])
    nxt = torch.cat([b.labels[:, 1:].reshape(-1) for b in batches])
    keep = nxt != IGNORE_INDEX
    return prev[keep], nxt[keep]


@torch.no_grad()
def gate(model: nn.Module, budget: Budget, train_tokens: torch.Tensor,
         val_tokens: torch.Tensor) -> dict:
    """Validation BPC and induction accuracy of ``model`` and of the add-one bigram model."""
    from benchmarks.hrm.train import evaluate_accuracy, evaluate_bpc

    seq_len = model.config.n_positions
    val = lm_eval_batches(val_tokens, batch_size=32, seq_len=seq_len)
    ind = induction_task(budget.n_induction, length=budget.induction_length,
                         seed=INDUCTION_SEED)
    ind_batches = [Batch(ind.input_ids[i:i + 100], ind.labels[i:i + 100])
                   for i in range(0, budget.n_induction, 100)]
    table = bigram_log2_probs(train_tokens)
    prev, nxt = _targets(val)
    iprev, inxt = _targets(ind_batches)
    out = {
        "model": {"val_bpc": evaluate_bpc(model, val),
                  "induction_accuracy": evaluate_accuracy(model, ind_batches)},
        "bigram": {"val_bpc": float(-table[prev, nxt].mean()),
                   "induction_accuracy": float((table[iprev].argmax(1) == inxt).double().mean())},
        "val_characters": int(nxt.numel()), "induction_strings": budget.n_induction,
        "induction_length": budget.induction_length,
        "thresholds": {"val_bpc": GATE_BPC, "induction_accuracy": GATE_INDUCTION},
    }
    m = out["model"]
    out["passed"] = bool(m["val_bpc"] <= GATE_BPC and m["induction_accuracy"] >= GATE_INDUCTION)
    return out


# ---------------------------------------------------------------- Bayes per test sample
def bayes_per_sample(batch: Batch, k: int, ms: tuple[int, ...] = LADDER) -> dict:
    """Per sample of a DFA set: the Bayes posterior given the table and the last m bits.

    Returns ``{"m=<m>": {"correct": [...], "nll": [...]}, "decided_by_8": [...]}``: whether the
    posterior's argmax (ties to the smallest state) is the answer, its negative log
    probability of the answer (nats), and whether the last 8 bits decide the answer (the
    m = 8 posterior is a point mass). The state before the last m bits is distributed as
    ``e_0 M^(T-m)`` with ``M`` the table's random-walk matrix.
    """
    ids = batch.input_ids.numpy()
    n = ids.shape[0]
    length = ids.shape[1] - 2 * k - 3
    tables = (ids[:, :2 * k] - STATE_IDS[0]).reshape(n, k, 2)
    bits = ids[:, 2 * k + 1:2 * k + 1 + length] - BIT_IDS[0]
    answer = ids[:, -1] - STATE_IDS[0]
    rows = np.arange(n)
    walk = np.zeros((n, k, k))
    for b in (0, 1):
        np.add.at(walk, (rows[:, None], np.arange(k)[None, :], tables[:, :, b]), 0.5)
    out: dict = {}
    need = sorted(set(ms) | {8})
    for m in need:
        p = np.zeros((n, k))
        p[:, 0] = 1.0
        for _ in range(length - m):
            p = np.einsum("ns,nst->nt", p, walk)
        for t in range(length - m, length):  # push through the known last m bits
            q = np.zeros_like(p)
            np.add.at(q, (rows[:, None], tables[rows, :, bits[:, t]]), p)
            p = q
        pred = p.argmax(1)
        entry = {"correct": (pred == answer).astype(int).tolist(),
                 "nll": (-np.log(p[rows, answer])).tolist()}
        if m in ms:
            out[f"m={m}"] = entry
        if m == 8:
            out["decided_by_8"] = (p.max(1) > 1.0 - 1e-12).astype(int).tolist()
    return out


# ---------------------------------------------------------------- arms
def _mapped(batch: Batch, table: torch.Tensor) -> Batch:
    labels = batch.labels.clone()
    mask = labels >= 0
    labels[mask] = table[labels[mask]]
    return Batch(table[batch.input_ids], labels)


def _attn_targets(model: nn.Module) -> dict[str, tuple[int, int]]:
    from adapters.targets import linear_dims

    return {n: linear_dims(m) for n, m in model.named_modules() if n.endswith("attn.c_attn")}


def arm_model(base: nn.Module, arm: str, budget: Budget, seed: int) -> nn.Module:
    """A deep copy of ``base`` with arm ``arm``'s freshly initialised adapters (seeded)."""
    from adapters import HRMConfig, find_adapters, inject
    from benchmarks.hrm.lm_study import _stateless_forward
    from benchmarks.hrm.lora import make_lora_model

    model = copy.deepcopy(base)
    torch.manual_seed(seed)
    if arm in ("hrm", "stateless"):
        inject(model, HRMConfig(d_state=budget.d_state))
        if arm == "stateless":
            for a in find_adapters(model).values():
                a.adapter.forward = _stateless_forward.__get__(a.adapter)
        return model
    rank, _ = iso_rank(base, budget, arm)
    targets = None if arm == "lora_mlp" else list(_attn_targets(base))
    return make_lora_model(model, rank, targets, config=HRMConfig(d_state=budget.d_state))


def parameters(base: nn.Module, budget: Budget) -> dict:
    """Trainable parameters of every arm (and the LoRA ranks)."""
    from adapters import HRMConfig
    from benchmarks.hrm.lora import count_hrm_parameters

    hrm = count_hrm_parameters(base, HRMConfig(d_state=budget.d_state))
    out = {"hrm": hrm, "stateless": hrm}
    for arm in ("lora_attn", "lora_mlp"):
        out[arm + "_rank"], out[arm] = iso_rank(base, budget, arm)
    return out


def iso_rank(base: nn.Module, budget: Budget, arm: str) -> tuple[int, int]:
    """``(rank, parameters)`` of a LoRA arm, the count closest to HRM's (ties: smaller rank)."""
    from adapters import HRMConfig
    from benchmarks.hrm.lora import count_hrm_parameters, lora_target_linears

    config = HRMConfig(d_state=budget.d_state)
    linears = lora_target_linears(base, config) if arm == "lora_mlp" else _attn_targets(base)
    per_rank = sum(i + o for i, o in linears.values())
    target = count_hrm_parameters(base, config)
    low = max(1, target // per_rank)
    rank = min((low, low + 1), key=lambda r: (abs(r * per_rank - target), r))
    return rank, rank * per_rank


# ---------------------------------------------------------------- training and evaluation
def train_run(model: nn.Module, budget: Budget, *, steps: int, lr: float, seed: int) -> dict:
    """AdamW + transformers' warm-up/cosine on the seed's DFA stream; loss per step."""
    from transformers import get_cosine_schedule_with_warmup

    from benchmarks.hrm.train import _logits, causal_lm_loss

    table = character_table()
    params = [p for p in model.parameters() if p.requires_grad]
    opt = torch.optim.AdamW(params, lr=lr, weight_decay=0.0)
    sched = get_cosine_schedule_with_warmup(opt, max(1, round(budget.warmup_frac * steps)),
                                            steps)
    stream = dfa_batches(budget.batch, k=budget.k, length=budget.T, seed=seed)
    losses = []
    t0 = time.perf_counter()
    model.train()
    for _ in range(steps):
        batch = _mapped(next(stream), table)
        loss = causal_lm_loss(_logits(model, batch.input_ids), batch.labels)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        opt.step()
        sched.step()
        losses.append(float(loss.detach()))
        if not math.isfinite(losses[-1]):
            break
    model.eval()
    return {"losses": losses, "seconds": time.perf_counter() - t0}


@torch.no_grad()
def evaluate(model: nn.Module, data: Batch, k: int, batch: int = 50) -> dict:
    """Per sample: correct (argmax over the k state characters) and log-loss (nats)."""
    from benchmarks.hrm.train import _logits

    table = character_table()
    cand = table[torch.tensor(STATE_IDS[:k])]
    model.eval()
    correct, nll = [], []
    for i in range(0, data.input_ids.shape[0], batch):
        part = _mapped(Batch(data.input_ids[i:i + batch], data.labels[i:i + batch]), table)
        logits = _logits(model, part.input_ids)[:, -2, cand].double()  # (b, k) at SEP_Q
        logp = torch.log_softmax(logits, dim=-1)
        answer = data.input_ids[i:i + batch, -1] - STATE_IDS[0]
        correct += (logp.argmax(-1) == answer).int().tolist()
        nll += (-logp[torch.arange(len(answer)), answer]).tolist()
    return {"correct": correct, "nll": nll, "accuracy": float(np.mean(correct)),
            "log_loss": float(np.mean(nll))}


def paired_ci(a: list[float], b: list[float], seed: int = 0) -> dict:
    """Paired bootstrap 95 % CI of ``mean(a) - mean(b)`` over test samples.

    Reuses :func:`benchmarks.hrm.lm_study.paired_ci` (a ratio of sums, resampled jointly):
    with every sample's value as its "NLL" and a count of 1 it is the difference of means.
    """
    from benchmarks.hrm.lm_study import paired_ci as ratio_ci

    n = len(a)
    if n != len(b) or n == 0:
        raise ValueError(f"paired samples must have equal, non-zero lengths; got {n}, {len(b)}")
    zeros, ones = [0.0] * n, [1.0] * n

    def ev(x):
        return {"nll_early": list(map(float, x)), "nll_late": zeros, "chars_early": ones,
                "chars_late": zeros}

    return ratio_ci(ev(a), ev(b), part="early", seed=seed)


# ---------------------------------------------------------------- the study
class Study:
    """The frozen backbone, the data sets and resumable cells."""

    def __init__(self, budget: Budget, backbone: BackboneConfig = BACKBONE, *,
                 results: Path = RESULTS, cache_dir: str | os.PathLike | None = None,
                 progress: bool = False) -> None:
        self.budget, self.results, self.backbone_config = budget, results, backbone
        self.version = code_version()
        (results / "cells").mkdir(parents=True, exist_ok=True)
        t0 = time.perf_counter()
        self.backbone = pretrained_backbone(backbone, cache_dir=cache_dir, progress=progress)
        self.model = self.backbone.model
        self.load_seconds = time.perf_counter() - t0
        self.val = dfa_task(budget.n_val, k=budget.k, length=budget.T, seed=VAL_SEED)
        self.test = dfa_task(budget.n_test, k=budget.k, length=budget.T, seed=TEST_SEED)

    def _write(self, path: Path, data: dict) -> None:
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(data, indent=1))
        os.replace(tmp, path)

    def _key(self, cfg: dict) -> str:
        return hashlib.sha256(json.dumps(cfg, sort_keys=True).encode()).hexdigest()[:12]

    def _base_config(self) -> dict:
        return {"budget": dataclasses.asdict(self.budget), "code": self.version,
                "backbone": self.backbone_config.digest()}

    def gate(self) -> dict:
        """The backbone gate (a cell too)."""
        cfg = {"arm": "gate", **self._base_config()}
        path = self.results / "cells" / f"gate-{self._key(cfg)}.json"
        if path.exists():
            return json.loads(path.read_text())
        corpus = char_corpus()
        out = {"config": cfg, **gate(self.model, self.budget, corpus.train, corpus.val),
               "backbone": {"config": dataclasses.asdict(self.backbone_config),
                            "class": type(self.backbone_config).__name__,
                            "pretraining": self.backbone.metrics,
                            "from_cache": self.backbone.from_cache}}
        self._write(path, out)
        return out

    def bayes(self) -> dict:
        """The Bayes ladder on this test set, per sample (a cell too)."""
        cfg = {"arm": "bayes", **self._base_config()}
        path = self.results / "cells" / f"bayes-{self._key(cfg)}.json"
        if path.exists():
            return json.loads(path.read_text())
        out = {"config": cfg, **bayes_per_sample(self.test, self.budget.k)}
        self._write(path, out)
        return out

    def cell_config(self, arm: str, lr: float, seed: int, kind: str) -> dict:
        return {"arm": arm, "lr": lr, "seed": seed, "kind": kind, **self._base_config()}

    def cell_path(self, cfg: dict) -> Path:
        return self.results / "cells" / (f"{cfg['kind']}-{cfg['arm']}-lr{cfg['lr']:g}-"
                                         f"s{cfg['seed']}-{self._key(cfg)}.json")

    def run(self, arm: str, lr: float, seed: int, *, pilot: bool = False) -> dict:
        """Train one cell or load its file: a pilot is scored on the validation set only,
        a main run on the test set only."""
        cfg = self.cell_config(arm, lr, seed, "pilot" if pilot else "main")
        path = self.cell_path(cfg)
        if path.exists():
            return json.loads(path.read_text())
        model = arm_model(self.model, arm, self.budget, seed)
        steps = self.budget.pilot_steps if pilot else self.budget.steps
        hist = train_run(model, self.budget, steps=steps, lr=lr, seed=seed)
        split, data = ("val", self.val) if pilot else ("test", self.test)
        t0 = time.perf_counter()
        ev = evaluate(model, data, self.budget.k)
        cell = {"config": cfg, "n_trainable": sum(p.numel() for p in model.parameters()
                                                  if p.requires_grad),
                "train": hist, split: ev, "eval_seconds": time.perf_counter() - t0}
        self._write(path, cell)
        return cell

    def choose_lr(self, arm: str, max_extend: int = 2) -> tuple[float, list[float]]:
        """Pilot grid on seed 0 scored by validation log-loss, extended until the best is
        interior (at most ``max_extend`` times); returns the rate and the grid tried."""
        grid = list(LR_GRIDS[arm])
        for attempt in range(max_extend + 1):
            cells = [self.run(arm, lr, 0, pilot=True) for lr in grid]
            scores = [c["val"]["log_loss"] if math.isfinite(c["val"]["log_loss"]) else math.inf
                      for c in cells]
            best = int(np.argmin(scores))
            if 0 < best < len(grid) - 1 or attempt == max_extend:
                return grid[best], grid
            grid = [grid[0] / 3] + grid if best == 0 else grid + [grid[-1] * 3]
        raise AssertionError("unreachable")


def main(argv: list[str] | None = None) -> int:
    from benchmarks.hrm import task_a_report

    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--seeds", type=int, default=3)
    p.add_argument("--steps", type=int, default=Budget.steps)
    p.add_argument("--pilot-steps", type=int, default=Budget.pilot_steps)
    p.add_argument("--batch", type=int, default=Budget.batch)
    p.add_argument("--n-test", type=int, default=Budget.n_test)
    p.add_argument("--n-val", type=int, default=Budget.n_val)
    p.add_argument("--max-extend", type=int, default=2)
    p.add_argument("--arms", default=",".join(ARMS))
    p.add_argument("--results", type=Path, default=RESULTS)
    p.add_argument("--gate-only", action="store_true",
                   help="pretrain (or load) the backbone, run the gate, write the report, stop")
    args = p.parse_args(argv)
    from threadpoolctl import threadpool_limits

    torch.set_num_threads(1)
    budget = Budget(steps=args.steps, pilot_steps=args.pilot_steps, batch=args.batch,
                    n_test=args.n_test, n_val=args.n_val)
    with threadpool_limits(limits=1):  # BLAS pinned to one thread, as torch is
        return run_study(budget, BACKBONE, arms=tuple(args.arms.split(",")), seeds=args.seeds,
                         results=args.results, max_extend=args.max_extend,
                         gate_only=args.gate_only, report=task_a_report.write,
                         log=lambda text: print(text, flush=True),
                         command=" ".join(["python -m benchmarks.hrm.task_a",
                                           *(sys.argv[1:] if argv is None else argv)]))


def run_study(budget: Budget, backbone: BackboneConfig, *, arms: tuple[str, ...], seeds: int,
              results: Path, max_extend: int = 2, gate_only: bool = False, report=None,
              cache_dir: str | os.PathLike | None = None, log=print,
              command: str = "python -m benchmarks.hrm.task_a") -> int:
    """Gate, then pilots (all arms), then main runs seed by seed; the report after each."""
    if report is None:
        from benchmarks.hrm.task_a_report import write as report
    unknown = set(arms) - set(ARMS)
    if unknown:
        raise ValueError(f"unknown arms {sorted(unknown)}; expected a subset of {ARMS}")
    study = Study(budget, backbone, results=results, cache_dir=cache_dir)
    env = {"python": platform.python_version(), "torch": torch.__version__,
           "threads": torch.get_num_threads(), "driver": command,
           "blas": "threadpoolctl threadpool_limits(1) (under main())"}
    g = study.gate()
    m = g["model"]
    log(f"gate: val BPC {m['val_bpc']:.4f} (bigram {g['bigram']['val_bpc']:.4f}), induction "
        f"{m['induction_accuracy']:.4f} (bigram {g['bigram']['induction_accuracy']:.4f}): "
        f"{'passed' if g['passed'] else 'FAILED'}")
    chosen: dict = {}
    grids: dict = {}

    def write():
        report(study, g, chosen, grids, seeds=seeds, arms=arms, env=env)

    if gate_only or not g["passed"]:
        write()
        return 0
    study.bayes()
    for arm in arms:
        t0 = time.perf_counter()
        chosen[arm], grids[arm] = study.choose_lr(arm, max_extend)
        log(f"{arm}: lr {chosen[arm]:g} (grid {grids[arm]}, {time.perf_counter() - t0:.0f} s)")
        write()
    for seed in range(seeds):
        for arm in arms:
            cell = study.run(arm, chosen[arm], seed)
            log(f"{arm} seed {seed}: test accuracy {cell['test']['accuracy']:.4f}, log-loss "
                f"{cell['test']['log_loss']:.4f} ({cell['train']['seconds']:.0f} s)")
            write()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
