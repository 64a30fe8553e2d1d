"""Task B of issue 18: HRM vs iso-parameter LoRA on a real frozen LM (SmolLM2-135M).

Protocol (fixed before any test-split number was seen):

* Backbone: SmolLM2-135M, dequantised, frozen, float32. Adapters in the top ``n_top`` blocks
  (default the last 4 of 30); the hidden states entering the first adapted block are cached
  once per window (:mod:`benchmarks.hrm.smollm`, exactness checked against the full forward).
* Text: ``pydoc_data.topics``; 90 % head / 10 % tail by characters. The tail is the held-out
  *test* split whose BPC is reported; the last 10 % of the head is the *dev* split used only to
  choose learning rates; 256-token windows.
* Arms (one seed fixes the initialisation and the data order, shared by all arms):
  ``hrm`` (N = 32, gate 0 at start), ``stateless`` (the same module with ``ā = 0``: the same
  B̄, C, gate, no state carried between positions), ``lora_qv`` (peft LoRA on q_proj and
  v_proj) and ``lora_mlp`` (peft LoRA on gate/up/down_proj), the LoRA ranks chosen so the
  trainable parameter counts are closest to HRM's.
* Training: AdamW (no weight decay), ``steps`` steps of ``batch`` windows, linear warm-up over
  10 % of the steps then cosine to 0 (``transformers.get_cosine_schedule_with_warmup``), grad
  clip 1.0, loss = mean next-token NLL. Learning rate per arm: a grid (factor 3 apart) run on
  seed 0, ``pilot_steps`` long (the same schedule shape), scored by dev BPC; if the best is at
  an edge of the grid the grid is extended on that side (so the choice is never at an edge).
  The main runs (``steps`` long, seeds 0, 1, ...) use the chosen rate.
* Metric on the test split: BPC = total NLL in bits / characters covered by the predicted
  tokens, overall and split into target positions < 128 and >= 128; the frozen model's BPC
  beside it. Paired bootstrap (``scipy.stats.bootstrap``, windows resampled, 95 %) of the BPC
  difference between arms of the same seed.
* Then on the HRM arm (each seed): calibrate (data Gramian on training windows) -> reduce
  (balanced truncation, ``rel_tol`` = 0.01) -> phase 2 (``phase2_steps`` more steps at the
  arm's rate): order per layer, parameters, BPC before/after.
* A win: HRM's BPC below the best LoRA arm's with the paired 95 % CI of the difference
  entirely below 0 on every seed, *and* below stateless HRM's likewise. Anything else is a
  null result.

Every run writes one JSON file under ``benchmarks/results/lm_study/cells/`` named by a hash
of its configuration and of this code (the two source files), so a re-run resumes and a code
change never mixes with old cells. Pilots are scored on the dev split only, main runs on the
test split only.

Run: ``python -m benchmarks.hrm.lm_study`` (``--help`` for the budget options).
"""

from __future__ import annotations

import argparse
import dataclasses
import hashlib
import json
import math
import os
import platform
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
from torch import nn

from . import lm_report, smollm

RESULTS = Path(__file__).resolve().parents[1] / "results" / "lm_study"
ARMS = ("hrm", "stateless", "lora_qv", "lora_mlp")
LR_GRIDS = {"hrm": (3e-3, 1e-2, 3e-2), "stateless": (3e-3, 1e-2, 3e-2),
            "lora_qv": (1e-3, 3e-3, 1e-2), "lora_mlp": (1e-3, 3e-3, 1e-2)}
LATE = 128  # target positions >= LATE are "late"


def code_version() -> str:
    """Hash of the sources that define a run (this file and ``smollm.py``)."""
    here = Path(__file__).resolve().parent
    blob = b"".join((here / f).read_bytes() for f in ("lm_study.py", "smollm.py"))
    return hashlib.sha256(blob).hexdigest()[:10]


@dataclass(frozen=True)
class Budget:
    """What one training run does (shared by all arms)."""

    n_top: int = 4
    d_state: int = 32
    seq_len: int = 256
    batch: int = 2
    steps: int = 30
    pilot_steps: int = 15
    train_windows: int = 160
    dev_windows: int = 19
    warmup_frac: float = 0.1
    phase2_steps: int = 15
    rel_tol: float = 0.01
    calib_windows: int = 16
    late: int = 128  # target positions >= late are "late"


# ---------------------------------------------------------------- adapters for each arm
def _stateless_forward(self, u, state=None, *, return_state=False):
    """``gate · C B̄ u_t`` per position: the HRM module with ``ā = 0`` (``ssm.step`` from zero)."""
    b, length, width = u.shape
    y, s = self.ssm.step(u.reshape(b * length, width))
    y = self.gate.to(y.dtype) * y.reshape(b, length, width)
    return (y, s) if return_state else y


def _hrm_config(budget: Budget):
    from adapters import HRMConfig

    first = smollm.N_LAYERS - budget.n_top
    return HRMConfig(d_state=budget.d_state, layers_to_skip=tuple(range(first)))


def _lora_targets(model, budget: Budget, kind: str) -> dict[str, tuple[int, int]]:
    first = smollm.N_LAYERS - budget.n_top
    leaves = {"lora_qv": ("q_proj", "v_proj"), "lora_mlp": ("gate_proj", "up_proj", "down_proj")}
    out = {}
    for name, mod in model.named_modules():
        parts = name.split(".")
        if (isinstance(mod, nn.Linear) and parts[-1] in leaves[kind] and "layers" in parts
                and int(parts[parts.index("layers") + 1]) >= first):
            out[name] = (mod.in_features, mod.out_features)
    return out


def hrm_parameters(model, budget: Budget) -> int:
    """Trainable parameters of HRM in the top blocks (``2 N H + 2 N + 1`` per block)."""
    width = model.config.hidden_size
    n = budget.d_state
    return budget.n_top * (2 * n * width + 2 * n + 1)


def iso_rank(model, budget: Budget, kind: str) -> tuple[int, int]:
    """``(rank, parameters)`` of the LoRA arm whose count is closest to HRM's (ties: smaller)."""
    per_rank = sum(i + o for i, o in _lora_targets(model, budget, kind).values())
    target = hrm_parameters(model, budget)
    low = max(1, target // per_rank)
    rank = min((low, low + 1), key=lambda r: (abs(r * per_rank - target), r))
    return rank, rank * per_rank


def attach(model, arm: str, budget: Budget, seed: int):
    """Put arm ``arm``'s freshly initialised adapters on ``model``; returns (wrapped, detach)."""
    torch.manual_seed(seed)
    if arm in ("hrm", "stateless"):
        from adapters import find_adapters, inject, remove

        inject(model, _hrm_config(budget))
        if arm == "stateless":
            for a in find_adapters(model).values():
                a.adapter.forward = _stateless_forward.__get__(a.adapter)
        return model, lambda: remove(model)
    import peft

    rank, _ = iso_rank(model, budget, arm)
    cfg = peft.LoraConfig(r=rank, lora_alpha=rank, lora_dropout=0.0,
                          target_modules=list(_lora_targets(model, budget, arm)))
    wrapped = peft.get_peft_model(model, cfg)

    def detach():
        wrapped.unload()

    return wrapped, detach


def trainable(module: nn.Module) -> dict[str, torch.Tensor]:
    return {n: p for n, p in module.named_parameters() if p.requires_grad}


# ---------------------------------------------------------------- training and evaluation
class TopView(smollm.TopStack):
    """:class:`smollm.TopStack` that also unwraps a peft model."""

    def _inner(self):
        base = self.lm
        if hasattr(base, "get_base_model"):
            base = base.get_base_model()
        return base


def train_run(top: nn.Module, states: torch.Tensor, ids: torch.Tensor, *, steps: int,
              batch: int, lr: float, warmup_frac: float, seed: int, desc: str,
              progress: bool = True) -> dict:
    """AdamW + warm-up/cosine on random windows (order fixed by ``seed``); loss per step."""
    from tqdm.auto import tqdm
    from transformers import get_cosine_schedule_with_warmup

    params = [p for p in top.parameters() if p.requires_grad]
    opt = torch.optim.AdamW(params, lr=lr, weight_decay=0.0)
    sched = get_cosine_schedule_with_warmup(opt, max(1, round(warmup_frac * steps)), steps)
    gen = torch.Generator().manual_seed(10_000 + seed)
    order = torch.cat([torch.randperm(len(ids), generator=gen)
                       for _ in range(math.ceil(steps * batch / len(ids)))])
    losses = []
    t0 = time.perf_counter()
    top.train()
    for step in tqdm(range(steps), desc=desc, disable=not progress, leave=False):
        idx = order[step * batch:(step + 1) * batch]
        loss = smollm.window_nll(top(states[idx]), ids[idx]).mean()
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        opt.step()
        sched.step()
        losses.append(float(loss.detach()))
        if not math.isfinite(losses[-1]):
            break
    top.eval()
    return {"losses": losses, "seconds": time.perf_counter() - t0}


@torch.no_grad()
def evaluate(top: nn.Module, states: torch.Tensor, windows: smollm.Windows, *,
             batch: int = 4, progress: bool = True, desc: str = "eval", late: int = LATE) -> dict:
    """Per-window NLL (bits) and characters, early (< late) and late (>= late) targets."""
    from tqdm.auto import tqdm

    top.eval()
    rows = []
    for i in tqdm(range(0, len(windows), batch), desc=desc, disable=not progress, leave=False):
        ids = windows.ids[i:i + batch]
        nll = smollm.window_nll(top(states[i:i + batch]), ids) / math.log(2)  # (b, L-1) bits
        chars = windows.chars[i:i + batch, 1:].double()
        is_late = torch.arange(1, ids.shape[1]) >= late
        rows.append(torch.stack([nll[:, ~is_late].sum(1), nll[:, is_late].sum(1),
                                 chars[:, ~is_late].sum(1), chars[:, is_late].sum(1)], 1))
    t = torch.cat(rows).double().numpy()  # (W, 4)
    return {"nll_early": t[:, 0].tolist(), "nll_late": t[:, 1].tolist(),
            "chars_early": t[:, 2].tolist(), "chars_late": t[:, 3].tolist(),
            **summarise(t)}


def summarise(t: np.ndarray) -> dict:
    return {"bpc": float((t[:, 0] + t[:, 1]).sum() / (t[:, 2] + t[:, 3]).sum()),
            "bpc_early": float(t[:, 0].sum() / t[:, 2].sum()),
            "bpc_late": float(t[:, 1].sum() / t[:, 3].sum())}


def _table(ev: dict) -> np.ndarray:
    return np.array([ev["nll_early"], ev["nll_late"], ev["chars_early"], ev["chars_late"]]).T


def paired_ci(ev_a: dict, ev_b: dict, part: str = "all", seed: int = 0,
              n_resamples: int = 2000) -> dict:
    """Paired bootstrap 95 % CI of BPC(a) - BPC(b) over test windows (a ratio of sums)."""
    from scipy.stats import bootstrap

    a, b = _table(ev_a), _table(ev_b)
    if part == "all":
        na, nb, c = a[:, 0] + a[:, 1], b[:, 0] + b[:, 1], a[:, 2] + a[:, 3]
    else:
        k = 0 if part == "early" else 1
        na, nb, c = a[:, k], b[:, k], a[:, 2 + k]

    def stat(x, y, z, axis=-1):
        return (x.sum(axis) - y.sum(axis)) / z.sum(axis)

    res = bootstrap((na, nb, c), stat, paired=True, vectorized=True, n_resamples=n_resamples,
                    confidence_level=0.95, method="percentile", random_state=seed)
    return {"diff": float(stat(na, nb, c)), "lo": float(res.confidence_interval.low),
            "hi": float(res.confidence_interval.high)}


# ---------------------------------------------------------------- the study
class Study:
    """Loads the backbone and the cached states once; runs cells with resumable results."""

    def __init__(self, budget: Budget, *, progress: bool = True, results: Path = RESULTS,
                 max_windows: dict | None = None,
                 splits: tuple[str, ...] = ("train", "dev", "test")) -> None:
        self.budget, self.progress, self.results = budget, progress, results
        self.version = code_version()
        (results / "cells").mkdir(parents=True, exist_ok=True)
        t0 = time.perf_counter()
        self.model = smollm.load_model()
        self.tok = smollm.load_tokenizer()
        self.first = smollm.N_LAYERS - budget.n_top
        texts = smollm.text_splits()
        self.win, self.states = {}, {}
        for name in splits:
            text = texts[name]
            w = smollm.make_windows(self.tok, text, budget.seq_len)
            cap = (max_windows or {}).get(name)
            if cap is not None and cap < len(w):  # evenly spaced over the split
                keep = torch.linspace(0, len(w) - 1, cap).round().long().unique()
                w = smollm.Windows(w.ids[keep], w.chars[keep], w.n_chars_text)
            self.win[name] = w
            self.states[name] = self._states(name, w)
        self.setup_seconds = time.perf_counter() - t0
        self.top = TopView(self.model, self.first)

    def _states(self, name: str, w: smollm.Windows) -> torch.Tensor:
        key = smollm.digest(name, self.first, w.ids.shape, hashlib.sha256(
            w.ids.numpy().tobytes()).hexdigest(), torch.__version__)
        path = smollm.cache_dir() / f"{name}-{key}.pt"
        if path.exists():
            return torch.load(path, weights_only=True)
        states = smollm.cache_hidden_states(self.model, w.ids, self.first,
                                            progress=self.progress)
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".tmp")
        torch.save(states, tmp)
        os.replace(tmp, path)
        return states

    # -- cells
    def cell_config(self, arm: str, lr: float, seed: int, kind: str = "main") -> dict:
        return {"arm": arm, "lr": lr, "seed": seed, "kind": kind,
                "budget": dataclasses.asdict(self.budget), "code": self.version}

    def _key(self, cfg: dict) -> str:
        return hashlib.sha256(json.dumps(cfg, sort_keys=True).encode()).hexdigest()[:12]

    def _cell_path(self, cfg: dict) -> Path:
        return self.results / "cells" / f"{cfg.get('kind', 'main')}-{cfg['arm']}-" \
            f"lr{cfg['lr']:g}-s{cfg['seed']}-{self._key(cfg)}.json"

    def _write(self, path: Path, data: dict) -> None:
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(data, indent=1))
        os.replace(tmp, path)

    def frozen(self) -> dict:
        """The frozen model's dev and test evaluation (a cell too)."""
        cfg = {"arm": "frozen", "lr": 0.0, "seed": 0, "budget": dataclasses.asdict(self.budget),
               "code": self.version}
        path = self._cell_path(cfg)
        if path.exists():
            return json.loads(path.read_text())
        out = {"config": cfg, "dev": evaluate(self.top, self.states["dev"], self.win["dev"],
                                              late=self.budget.late,
                                        progress=self.progress, desc="frozen dev"),
               "test": evaluate(self.top, self.states["test"], self.win["test"],
                                late=self.budget.late,
                                        progress=self.progress, desc="frozen test")}
        self._write(path, out)
        return out

    def run(self, arm: str, lr: float, seed: int, *, pilot: bool = False) -> dict:
        """Train one cell or load its file. A pilot (``pilot_steps``) is scored on the dev
        split, a main run (``steps``) on the test split (then reduced, for HRM)."""
        cfg = self.cell_config(arm, lr, seed, "pilot" if pilot else "main")
        path = self._cell_path(cfg)
        if path.exists():
            return json.loads(path.read_text())
        split = "dev" if pilot else "test"
        wrapped, detach = attach(self.model, arm, self.budget, seed)
        top = TopView(wrapped, self.first)
        try:
            hist = train_run(top, self.states["train"], self.win["train"].ids,
                             steps=self.budget.pilot_steps if pilot else self.budget.steps,
                             batch=self.budget.batch, lr=lr,
                             warmup_frac=self.budget.warmup_frac, seed=seed,
                             desc=f"{cfg['kind']} {arm} lr={lr:g} seed={seed}",
                             progress=self.progress)
            cell = {"config": cfg,
                    "n_trainable": sum(p.numel() for p in trainable(top).values()),
                    "train": hist,
                    split: evaluate(top, self.states[split], self.win[split],
                                    late=self.budget.late, progress=self.progress,
                                    desc=f"{arm} {split}")}
            self._write(path, cell)
            if arm == "hrm" and not pilot:
                self._reduce_cell(top, cfg, cell)
        finally:
            detach()
        return cell

    def _reduce_cell(self, top: nn.Module, cfg: dict, cell: dict) -> None:
        """calibrate -> reduce -> phase 2 on a trained HRM run (its own cell file)."""
        from adapters import calibrate, find_adapters, reduce

        rcfg = {**cfg, "arm": "hrm_reduced"}
        path = self._cell_path(rcfg)
        if path.exists():
            return
        b = self.budget
        calib = [self.states["train"][i:i + 4] for i in range(0, b.calib_windows, 4)]
        t0 = time.perf_counter()
        stats = calibrate(top, calib, gramian="data", progress=self.progress)
        report = reduce(top, rel_tol=b.rel_tol, gramian="data", stats=stats)
        lti_seconds = time.perf_counter() - t0
        after = evaluate(top, self.states["test"], self.win["test"], progress=self.progress,
                         desc="reduced test", late=b.late)
        hist = train_run(top, self.states["train"], self.win["train"].ids,
                         steps=b.phase2_steps, batch=b.batch, lr=cfg["lr"],
                         warmup_frac=b.warmup_frac, seed=cfg["seed"] + 1000, desc="phase 2",
                         progress=self.progress)
        phase2 = evaluate(top, self.states["test"], self.win["test"], progress=self.progress,
                          desc="phase-2 test", late=b.late)
        out = {"config": rcfg, "reduction": report.to_dict(), "calibrate_reduce_seconds":
               lti_seconds, "params_before": report.params_before,
               "params_after": sum(p.numel() for a in find_adapters(top).values()
                                   for p in a.adapter.parameters()),
               "orders": {r.name: [r.order_before, r.order_after] for r in report.layers},
               "test_full": {k: cell["test"][k] for k in ("bpc", "bpc_early", "bpc_late")},
               "test_reduced": after, "phase2_train": hist, "test_phase2": phase2}
        self._write(path, out)

    def choose_lr(self, arm: str, max_extend: int = 2) -> tuple[float, list[dict]]:
        """Grid on seed 0 scored by dev BPC, extended until the best is interior."""
        grid = list(LR_GRIDS[arm])
        for _ in range(max_extend + 1):
            cells = [self.run(arm, lr, 0, pilot=True) for lr in grid]
            scores = [c["dev"]["bpc"] if math.isfinite(c["dev"]["bpc"]) else math.inf
                      for c in cells]
            best = int(np.argmin(scores))
            if 0 < best < len(grid) - 1:
                return grid[best], cells
            grid = [grid[0] / 3] + grid if best == 0 else grid + [grid[-1] * 3]
        return grid[best], cells


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--seeds", type=int, default=2)
    p.add_argument("--steps", type=int, default=Budget.steps)
    p.add_argument("--pilot-steps", type=int, default=Budget.pilot_steps)
    p.add_argument("--batch", type=int, default=Budget.batch)
    p.add_argument("--phase2-steps", type=int, default=Budget.phase2_steps)
    p.add_argument("--calib-windows", type=int, default=Budget.calib_windows)
    p.add_argument("--arms", default=",".join(ARMS))
    p.add_argument("--results", type=Path, default=RESULTS)
    p.add_argument("--train-windows", type=int, default=160,
                   help="training windows cached and sampled from (evenly spaced over the split)")
    p.add_argument("--max-windows", type=int, default=None,
                   help="use at most this many windows per split (smoke runs only)")
    p.add_argument("--max-extend", type=int, default=2,
                   help="how often a learning-rate grid may grow when its best is at an edge")
    p.add_argument("--no-progress", action="store_true")
    args = p.parse_args(argv)
    torch.set_num_threads(1)
    budget = Budget(steps=args.steps, pilot_steps=args.pilot_steps, batch=args.batch,
                    phase2_steps=args.phase2_steps, calib_windows=args.calib_windows,
                    train_windows=args.train_windows)
    caps = {"train": budget.train_windows, "dev": budget.dev_windows}
    if args.max_windows is not None:
        caps = dict.fromkeys(("train", "dev", "test"), args.max_windows)
    study = Study(budget, progress=not args.no_progress, results=args.results, max_windows=caps)
    arms = args.arms.split(",")
    check = smollm.check_cache_exact(study.model, study.win["test"].ids[:2], study.first)
    frozen = study.frozen()
    chosen = {}
    for arm in arms:
        chosen[arm] = study.choose_lr(arm, args.max_extend)[0]
    for seed in range(args.seeds):
        for arm in arms:
            study.run(arm, chosen[arm], seed)
    params = {"hrm": hrm_parameters(study.model, budget),
              "stateless": hrm_parameters(study.model, budget)}
    for arm in ("lora_qv", "lora_mlp"):
        params[arm + "_rank"], params[arm] = iso_rank(study.model, budget, arm)
    lm_report.write(study, frozen, chosen, check, seeds=args.seeds, params=params,
                    paired_ci=paired_ci, env={
                        "python": platform.python_version(), "torch": torch.__version__,
                        "threads": torch.get_num_threads(),
                        "setup_seconds": study.setup_seconds})
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
