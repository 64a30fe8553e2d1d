"""The main job: HRM adapters vs iso-parameter LoRA on a frozen pretrained backbone, reduced by
balanced truncation and fine-tuned again.

:func:`run_experiment` runs the whole pipeline of the paper on one task and one seed:

1. load (or pretrain once and cache) the frozen backbone (:mod:`benchmarks.hrm.backbone`);
2. phase 1: train an HRM adapter (N = ``preset.state_size``) beside every MLP and, on a
   separate copy, a peft LoRA on the linears of the same MLPs with the rank whose parameter
   count is closest (:func:`benchmarks.hrm.lora.iso_parameter_lora_rank`); same data stream, same
   number of steps;
3. calibrate the trained HRM adapters on fresh training-distribution samples
   (:func:`adapters.calibrate`), then reduce every layer by balanced truncation
   (:func:`adapters.reduce`) with the paper's relative rule ``sigma_i / sigma_1 >= eps``
   and/or an absolute tolerance on the certified bound;
4. evaluate the reduced adapter as it is (HRM-BT, zero-shot), fine-tune it (phase 2) and
   evaluate again;
5. write ``results.md`` (the table), ``results.json`` (everything measured) and
   ``hsv.png`` (Hankel singular values per layer) to ``out_dir``.

Every method is scored on the same fixed test set (paired comparison). The test set depends
only on the task, ``k``, ``T`` and ``test_seed`` -- not on the training seed -- so runs with
different seeds are paired too. Nothing is selected on the test set: each method is evaluated
once, after its last training step. Tasks: ``"dfa"`` and ``"parity"`` are scored by answer
accuracy (argmax over the possible answers), ``"text"`` by bits per character on held-out
text (lower is better).
"""

from __future__ import annotations

import copy
import dataclasses
import json
import logging
import math
import platform
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from adapters.config import HRMConfig
from adapters.exceptions import AdapterConfigError
from adapters.injection import find_adapters, inject
from benchmarks.hrm.backbone import pretrained_backbone
from benchmarks.hrm.lora import count_hrm_parameters, iso_parameter_lora_rank, make_lora_model
from benchmarks.hrm.presets import TEST_SEED, Preset, get_preset
from benchmarks.hrm.tasks import (
    BIT_IDS,
    PAD_ID,
    STATE_IDS,
    TASK_CHARACTERS,
    UNK_ID,
    VOCAB_SIZE,
    Batch,
    char_corpus,
    character_table,
    dfa_batches,
    dfa_last_symbol_accuracy,
    dfa_task,
    lm_batches,
    lm_eval_batches,
    parity_batches,
    parity_task,
    task_baselines,
)
from benchmarks.hrm.train import evaluate_accuracy, evaluate_bpc, train

__all__ = [
    "BACKBONES",
    "TASKS",
    "RemappedBatches",
    "TaskData",
    "format_results",
    "load_backbone",
    "run_experiment",
    "task_data",
]

logger = logging.getLogger(__name__)

TASKS = ("dfa", "parity", "text")
BACKBONES = ("tiny", "smollm2")
# Offsets of the other data streams from the training seed (independent streams).
_CALIBRATION_OFFSET = 1_000
_PHASE2_OFFSET = 2_000
_EVAL_BATCH = 250
_TEXT_WINDOW_BATCH = 32


@dataclass(frozen=True)
class TaskData:
    """Data and scoring of one task instance.

    Attributes
    ----------
    task : {"dfa", "parity", "text"}
    k : int or None
        DFA states (None for parity and text).
    length : int
        T: input symbols per sample (DFA, parity) or window length in characters (text).
    metric : {"accuracy", "bpc"}
        Higher accuracy is better; lower bits per character is better.
    stream : callable
        ``stream(batch_size, seed)`` -> endless iterator of training :class:`Batch` es.
    test : list of Batch
        The fixed test set, in evaluation batches.
    candidates : tuple of int or None
        Token ids the answer is chosen from (accuracy tasks).
    baselines : dict
        ``chance`` and ``majority`` accuracy (DFA also ``last_symbol``, the memoryless
        rule of :func:`benchmarks.hrm.tasks.dfa_last_symbol_accuracy`), or ``uniform`` and
        ``unigram`` bits per character.
    description : str
        One line for the table's title.
    """

    task: str
    k: int | None
    length: int
    metric: str
    stream: Callable[[int, int], Iterator[Batch]]
    test: list[Batch]
    candidates: tuple[int, ...] | None
    baselines: dict[str, float]
    description: str

    @property
    def higher_is_better(self) -> bool:
        """True for accuracy, False for bits per character."""
        return self.metric == "accuracy"


def _split(batch: Batch, size: int) -> list[Batch]:
    n = batch.input_ids.shape[0]
    return [Batch(batch.input_ids[i : i + size], batch.labels[i : i + size])
            for i in range(0, n, size)]


def task_data(task: str, *, k: int, length: int, n_test: int, test_seed: int) -> TaskData:
    """The training stream, fixed test set, answer candidates and baselines of one task.

    Parameters
    ----------
    task : {"dfa", "parity", "text"}
    k : int
        DFA states (ignored by parity and text).
    length : int
        T: input symbols per sample (DFA, parity) or window length in characters (text).
    n_test : int
        Test samples (text: about that many windows, in batches of 32).
    test_seed : int
        Seed of the test set (:data:`~benchmarks.hrm.presets.TEST_SEED` in the main job).

    Returns
    -------
    data : TaskData
    """
    if task == "dfa":
        test = dfa_task(n_test, k=k, length=length, seed=test_seed)
        base = task_baselines(test, n_classes=k)
        return TaskData(
            task, k, length, "accuracy",
            lambda b, s: dfa_batches(b, k=k, length=length, seed=s),
            _split(test, _EVAL_BATCH), tuple(STATE_IDS[:k]),
            {"chance": base.chance, "majority": base.majority,
             "last_symbol": dfa_last_symbol_accuracy(test, k)},
            f"in-context DFA execution, k = {k} states, T = {length} input bits",
        )
    if task == "parity":
        test = parity_task(n_test, length=length, seed=test_seed)
        base = task_baselines(test, n_classes=2)
        return TaskData(
            task, None, length, "accuracy",
            lambda b, s: parity_batches(b, length=length, seed=s),
            _split(test, _EVAL_BATCH), tuple(BIT_IDS),
            {"chance": base.chance, "majority": base.majority},
            f"parity of T = {length} bits (final mode)",
        )
    corpus = char_corpus()
    n_batches = max(1, math.ceil(n_test / _TEXT_WINDOW_BATCH))
    test = lm_eval_batches(corpus.val, batch_size=_TEXT_WINDOW_BATCH, seq_len=length,
                           max_batches=n_batches)
    # Unigram model of the training text (add-one smoothing), scored on the test windows.
    counts = torch.bincount(corpus.train, minlength=VOCAB_SIZE).double() + 1.0
    log2p = torch.log2(counts / counts.sum())
    targets = torch.cat([b.labels[:, 1:].reshape(-1) for b in test])
    used = int((counts > 1.0).sum())
    return TaskData(
        task, None, length, "bpc",
        lambda b, s: lm_batches(corpus.train, batch_size=b, seq_len=length, seed=s),
        test, None,
        {"uniform": math.log2(used), "unigram": float(-log2p[targets].mean())},
        f"character LM on {corpus.source}, windows of {length} characters (bits per char)",
    )


def _score(model: torch.nn.Module, data: TaskData) -> float:
    if data.metric == "accuracy":
        return evaluate_accuracy(model, data.test, candidates=data.candidates)
    return evaluate_bpc(model, data.test)


def _take(stream: Iterator[Batch], n_samples: int) -> list[Batch]:
    out, seen = [], 0
    while seen < n_samples:
        batch = next(stream)
        out.append(batch)
        seen += batch.input_ids.shape[0]
    return out


class RemappedBatches:
    """A re-iterable view of a batch stream with ids mapped into another vocabulary.

    Parameters
    ----------
    source : iterable of Batch
        Batches in the shared vocabulary of :mod:`benchmarks.hrm.tasks`.
    table : torch.Tensor
        ``(VOCAB_SIZE,)`` long: the new id of every shared id (labels ``-100`` stay).
    """

    def __init__(self, source, table: torch.Tensor):
        self.source = source
        self.table = table

    def _map(self, batch: Batch) -> Batch:
        labels = batch.labels.clone()
        mask = labels >= 0
        labels[mask] = self.table[labels[mask]]
        return Batch(self.table[batch.input_ids], labels)

    def __iter__(self):
        for batch in self.source:
            yield self._map(batch)


def _smollm2_token_table() -> torch.Tensor:
    """Map every id of the shared vocabulary to one SmolLM2 token (a single character).

    Characters map to themselves; task tokens to characters (``SEP_T`` -> ``|``, ``SEP_Q`` ->
    ``=``, bits -> ``0``/``1``, states -> ``A``, ``B``, ...). The map is injective within each
    task's tokens and within the text alphabet (the two never share a sample).
    """
    from benchmarks.hrm.backbone import load_smollm2_tokenizer
    from benchmarks.hrm.tasks import decode

    tokenizer = load_smollm2_tokenizer()
    chars = {PAD_ID: " ", UNK_ID: "?", **TASK_CHARACTERS}
    table = torch.empty(VOCAB_SIZE, dtype=torch.long)
    for i in range(VOCAB_SIZE):
        text = chars.get(i) or decode([i])
        ids = tokenizer.encode(text, add_special_tokens=False)
        if len(ids) != 1:
            raise AdapterConfigError(
                f"the SmolLM2 tokenizer splits {text!r} into {len(ids)} tokens; expected one"
            )
        table[i] = ids[0]
    return table


def load_backbone(preset: Preset, backbone: str, progress: bool, encoding: str = "chars"):
    """The frozen backbone of a run, what to record about it, and its input id table.

    Parameters
    ----------
    preset : Preset
        Its ``backbone`` recipe is used for the tiny backbone.
    backbone : {"tiny", "smollm2"}
    progress : bool
        Show progress bars (pretraining on a cache miss).
    encoding : {"chars", "ids"}
        Tiny backbone only: feed task tokens as characters or as the reserved task ids.

    Returns
    -------
    model : torch.nn.Module
        Frozen, in eval mode.
    info : dict
        JSON-ready: ``name``, ``config``, ``metrics``, ``from_cache``, ``path``.
    table : torch.Tensor or None
        Id map for :class:`RemappedBatches` (None: feed the task ids as they are).
    """
    if backbone == "tiny":
        bb = pretrained_backbone(preset.backbone, progress=progress)
        info = {"name": "gpt2-char (pretrained by the project, frozen)",
                "config": dataclasses.asdict(bb.config), "metrics": bb.metrics,
                "from_cache": bb.from_cache, "path": str(bb.path)}
        return bb.model, info, (character_table() if encoding == "chars" else None)
    from benchmarks.hrm.backbone import load_smollm2

    start = time.perf_counter()
    model = load_smollm2()
    info = {"name": "SmolLM2-135M-Instruct (gguf, frozen)", "config": {},
            "metrics": {"seconds": time.perf_counter() - start,
                        "n_params": sum(p.numel() for p in model.parameters())},
            "from_cache": True, "path": ""}
    return model, info, _smollm2_token_table()


def _orders(model: torch.nn.Module) -> list[int]:
    """Real state order of every adapter (``n_real + 2 n_complex``), in module order."""
    return [w.adapter.ssm.n_real + 2 * w.adapter.ssm.n_complex
            for w in find_adapters(model).values()]


def _trainable(model: torch.nn.Module) -> int:
    return sum(p.numel() for p in model.parameters() if p.requires_grad)


def _history(h) -> dict[str, Any]:
    n = max(1, min(10, len(h.losses) // 10))
    return {"first_loss": sum(h.losses[:n]) / n, "last_loss": sum(h.losses[-n:]) / n,
            "seconds": h.seconds, "losses": list(h.losses)}


def run_experiment(
    preset: str | Preset = "quick",
    *,
    task: str | None = None,
    T: int | None = None,  # noqa: N803 - the paper's name for the input length
    k: int | None = None,
    seed: int | None = None,
    out_dir: str | Path = "runs/quick",
    progress: bool = True,
    backbone: str = "tiny",
    rel_tol: float | None = None,
    tol: float | None = None,
    gramian: str = "data",
    test_seed: int = TEST_SEED,
    encoding: str = "chars",
) -> dict[str, Any]:
    """Run the main job on one task and one seed, write its table and plot, return the results.

    Parameters
    ----------
    preset : str or Preset
        ``"quick"`` (the default; a few minutes on two CPU cores), ``"small"``, ``"paper"``,
        or a :class:`~benchmarks.hrm.presets.Preset`.
    task : {"dfa", "parity", "text"} or None
        None takes the preset's task.
    T : int or None
        Input length (symbols for DFA/parity, window characters for text); None takes the
        preset's ``length`` (text: the backbone's context length).
    k : int or None
        DFA states; None takes the preset's.
    seed : int or None
        Training seed (initialisation and data order); None takes the preset's.
    out_dir : path
        Folder for ``results.md``, ``results.json`` and ``hsv.png`` (created).
    progress : bool
        Show progress bars.
    backbone : {"tiny", "smollm2"}
        The project's pretrained character GPT-2 (default) or SmolLM2-135M (opt-in; slow
        on CPU; task tokens are mapped to single-character SmolLM2 tokens).
    rel_tol : float or None
        The paper's rule: keep ``sigma_i / sigma_1 >= rel_tol`` per layer; None takes the
        preset's ``tol`` (0.01) unless `tol` is given.
    tol : float or None
        Absolute tolerance on the certified error bound of each layer (gate included).
    gramian : {"data", "exact"}
        Controllability Gramian of the reduction: the calibrated state covariance
        (the paper's empirical Gramian) or the exact one of the adapter.
    test_seed : int
        Seed of the fixed, paired test set.
    encoding : {"chars", "ids"}
        How task samples reach the tiny backbone: as plain characters
        (:func:`benchmarks.hrm.tasks.character_table`; the default) or with the reserved task
        token ids, which its pretraining never teaches to tell apart (kept to reproduce
        that negative control). SmolLM2 always reads characters.

    Returns
    -------
    results : dict
        JSON-ready: task, sizes, ``scores`` (``backbone``, ``lora``, ``hrm``, ``hrm_bt``,
        ``hrm_bt_phase2``), ``baselines``, ``params``, per-layer ``reduction`` rows (orders,
        HSVs, both bounds), training histories, timings, and the paths written.

    Raises
    ------
    AdapterConfigError
        Unknown task/backbone, a sequence longer than the backbone's context, bad tolerances.
    """
    from adapters import calibrate, reduce

    start = time.perf_counter()
    preset = get_preset(preset) if isinstance(preset, str) else preset
    if not isinstance(preset, Preset):
        raise AdapterConfigError(f"`preset` must be a name or a Preset; got {preset!r}")
    task = preset.task if task is None else task
    if task not in TASKS:
        raise AdapterConfigError(f"`task` must be one of {TASKS}; got {task!r}")
    if backbone not in BACKBONES:
        raise AdapterConfigError(f"`backbone` must be one of {BACKBONES}; got {backbone!r}")
    if encoding not in ("chars", "ids"):
        raise AdapterConfigError(f"`encoding` must be 'chars' or 'ids'; got {encoding!r}")
    if gramian not in ("data", "exact"):
        raise AdapterConfigError(f"`gramian` must be 'data' or 'exact'; got {gramian!r}")
    if rel_tol is not None and tol is not None:
        raise AdapterConfigError(
            f"give one of `rel_tol` and `tol`, not both; got rel_tol={rel_tol!r}, tol={tol!r}"
        )
    if rel_tol is None and tol is None:
        rel_tol = preset.tol
    seed = preset.seed if seed is None else seed
    k = preset.k if k is None else k
    if T is None:
        T = preset.backbone.n_positions if task == "text" else preset.length  # noqa: N806
    seq_len = {"dfa": 2 * k + T + 3, "parity": T + 2, "text": T}[task]
    if backbone == "tiny" and seq_len > preset.backbone.n_positions:
        raise AdapterConfigError(
            f"a {task} sample with T={T} has {seq_len} tokens, more than the backbone's "
            f"n_positions={preset.backbone.n_positions}; pick a larger preset or a smaller `T`"
        )
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    seconds: dict[str, float] = {}

    tick = time.perf_counter()
    base, backbone_info, table = load_backbone(preset, backbone, progress, encoding)
    seconds["backbone"] = time.perf_counter() - tick
    data = task_data(task, k=k, length=T, n_test=preset.n_test, test_seed=test_seed)

    def stream(batch_size: int, s: int):
        source = data.stream(batch_size, s)
        return source if table is None else iter(RemappedBatches(source, table))

    test = data.test if table is None else list(RemappedBatches(data.test, table))
    candidates = (data.candidates if table is None or data.candidates is None
                  else tuple(int(table[c]) for c in data.candidates))
    scored = dataclasses.replace(data, test=test, candidates=candidates)
    scores: dict[str, float] = {"backbone": _score(base, scored)}
    logger.info("frozen backbone without adapter: %s = %.4f", data.metric, scores["backbone"])

    # --- phase 1: HRM and iso-parameter LoRA on the same stream, same steps -------------
    config = HRMConfig(d_state=preset.state_size)
    rank = iso_parameter_lora_rank(base, config)
    histories: dict[str, Any] = {}
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        hrm = inject(copy.deepcopy(base), config)
        torch.manual_seed(seed)
        lora = make_lora_model(copy.deepcopy(base), rank, config=config)
    params = {"lora": _trainable(lora), "hrm": _trainable(hrm)}
    warmup = max(1, preset.steps // 10)
    for name, model in (("lora", lora), ("hrm", hrm)):
        tick = time.perf_counter()
        h = train(model, stream(preset.batch_size, seed), steps=preset.steps,
                  lr=preset.lr_of[name], warmup_steps=warmup,
                  min_lr_ratio=preset.min_lr_ratio_of[name],
                  seed=seed, progress=progress, desc=f"phase 1 {name}")
        histories[name] = _history(h)
        scores[name] = _score(model, scored)
        seconds[name] = time.perf_counter() - tick
        logger.info("%s: loss %.4f -> %.4f, %s = %.4f (%.0f s)", name,
                    histories[name]["first_loss"], histories[name]["last_loss"], data.metric,
                    scores[name], seconds[name])
    del lora

    # --- calibrate and reduce by balanced truncation -------------------------------------
    tick = time.perf_counter()
    reduced = copy.deepcopy(hrm)
    stats = None
    if gramian == "data":
        calibration = _take(stream(preset.batch_size, seed + _CALIBRATION_OFFSET),
                            preset.n_calibration)
        stats = calibrate(reduced, calibration, progress=progress)
    report = reduce(reduced, rel_tol=rel_tol, tol=tol, gramian=gramian, stats=stats,
                    measure=True)
    seconds["reduce"] = time.perf_counter() - tick
    params["hrm_bt"] = _trainable(reduced)
    scores["hrm_bt"] = _score(reduced, scored)
    logger.info("HRM-BT (zero-shot): orders %s, %s = %.4f", _orders(reduced), data.metric,
                scores["hrm_bt"])

    # --- phase 2: fine-tune the reduced adapter -------------------------------------------
    tick = time.perf_counter()
    h = train(reduced, stream(preset.batch_size, seed + _PHASE2_OFFSET),
              steps=preset.phase2_steps, lr=preset.lr,
              warmup_steps=max(1, preset.phase2_steps // 10),
              min_lr_ratio=preset.min_lr_ratio, seed=seed,
              progress=progress, desc="phase 2 HRM-BT")
    histories["hrm_bt_phase2"] = _history(h)
    scores["hrm_bt_phase2"] = _score(reduced, scored)
    seconds["phase2"] = time.perf_counter() - tick
    seconds["total"] = time.perf_counter() - start

    results: dict[str, Any] = {
        "preset": preset.name,
        "task": task,
        "description": data.description,
        "k": data.k,
        "T": T,
        "seed": seed,
        "test_seed": test_seed,
        "n_test": sum(b.input_ids.shape[0] for b in data.test),
        "metric": data.metric,
        "higher_is_better": data.higher_is_better,
        "backbone": backbone_info,
        "state_size": preset.state_size,
        "lora_rank": rank,
        "hrm_params_predicted": count_hrm_parameters(base, config),
        "encoding": "chars" if backbone != "tiny" else encoding,
        "steps": {"phase1": preset.steps, "phase2": preset.phase2_steps,
                  "batch_size": preset.batch_size},
        "lr": preset.lr_of,
        "min_lr_ratio": preset.min_lr_ratio_of,
        "reduction_rule": {"rel_tol": rel_tol, "tol": tol, "gramian": gramian,
                           "n_calibration": preset.n_calibration if stats is not None else 0},
        "baselines": data.baselines,
        "scores": scores,
        "params": params,
        "orders": _orders(reduced),
        "reduction": report.to_dict()["layers"],
        "histories": histories,
        "seconds": seconds,
        "environment": {"python": platform.python_version(), "torch": torch.__version__,
                        "threads": torch.get_num_threads()},
    }
    results["files"] = {"table": str(out / "results.md"), "json": str(out / "results.json"),
                        "plot": str(out / "hsv.png")}
    report.plot(out / "hsv.png")
    (out / "results.md").write_text(format_results(results) + "\n")
    (out / "results.json").write_text(json.dumps(results, indent=2) + "\n")
    return results


def _fmt(value: float, metric: str) -> str:
    return f"{value:.3f}" if metric == "accuracy" else f"{value:.4f}"


def format_results(results: dict[str, Any]) -> str:
    """The results table of one run as markdown.

    Parameters
    ----------
    results : dict
        As returned by :func:`run_experiment`.

    Returns
    -------
    markdown : str
        A title, the method table (baselines, frozen backbone, LoRA, HRM, HRM-BT zero-shot
        and after phase 2, with trainable parameters and per-layer state orders), the
        per-layer reduction bounds, and the differences between methods.
    """
    r = results
    metric = r["metric"]
    name = "accuracy" if metric == "accuracy" else "bits/char (lower is better)"
    s, p, n = r["scores"], r["params"], r["state_size"]
    orders = "/".join(str(o) for o in r["orders"])
    full = "/".join(str(row["order_before"]) for row in r["reduction"])
    rule = r["reduction_rule"]
    parts = []
    if rule["rel_tol"] is not None:
        parts.append(f"sigma_i/sigma_1 >= {rule['rel_tol']:g}")
    if rule["tol"] is not None:
        parts.append(f"bound <= {rule['tol']:g}")
    rule_text = " and ".join(parts) + f", {rule['gramian']} Gramian"
    steps = r["steps"]
    lines = [
        f"# {r['description']}",
        "",
        f"Preset `{r['preset']}`, seed {r['seed']}, backbone {r['backbone']['name']}; "
        f"{steps['phase1']} phase-1 steps (batch {steps['batch_size']}), "
        f"{steps['phase2']} phase-2 steps; peak learning rate "
        + ", ".join(f"{m.upper() if m == 'hrm' else 'LoRA'} {lr:g} "
                    f"({'constant' if r['min_lr_ratio'][m] == 1.0 else 'cosine'})"
                    for m, lr in r["lr"].items())
        + f"; task samples as {'characters' if r['encoding'] == 'chars' else 'task ids'}"
        f"; fixed test set of {r['n_test']} "
        f"{'samples' if metric == 'accuracy' else 'windows'} (seed {r['test_seed']}).",
        "",
        f"| method | trainable params | state order per layer | {name} |",
        "|---|---:|---|---:|",
    ]
    for key, value in r["baselines"].items():
        label = {"chance": "chance", "majority": "majority class",
                 "last_symbol": "last-bit rule (table + last bit, no memory)",
                 "uniform": "uniform over used characters",
                 "unigram": "unigram (train frequencies)"}[key]
        lines.append(f"| {label} | 0 | - | {_fmt(value, metric)} |")
    lines += [
        f"| frozen backbone, no adapter | 0 | - | {_fmt(s['backbone'], metric)} |",
        f"| LoRA r={r['lora_rank']} (peft, iso-parameter) | {p['lora']:,} | - | "
        f"{_fmt(s['lora'], metric)} |",
        f"| HRM N={n} | {p['hrm']:,} | {full} | {_fmt(s['hrm'], metric)} |",
        f"| HRM-BT zero-shot ({rule_text}) | {p['hrm_bt']:,} | {orders} | "
        f"{_fmt(s['hrm_bt'], metric)} |",
        f"| HRM-BT + phase 2 ({steps['phase2']} steps) | {p['hrm_bt']:,} | {orders} | "
        f"{_fmt(s['hrm_bt_phase2'], metric)} |",
        "",
        "Per-layer reduction; bounds on the H-infinity norm of gate x (full - reduced), "
        "measured with lti.hinf_norm:",
        "",
        "| layer | order r / n | modes | gate | sigma_{r+1}/sigma_1 | lower bound "
        "| measured | upper bound | weighted bound (data) |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for row in r["reduction"]:
        hsv, order = row["hsv"], row["order_after"]
        ratio = hsv[order] / hsv[0] if order < len(hsv) and hsv[0] > 0 else 0.0
        measured = "-" if row["measured_error"] is None else f"{row['measured_error']:.3g}"
        weighted = "-" if row["weighted_bound"] is None else f"{row['weighted_bound']:.3g}"
        lines.append(
            f"| {row['name']} | {order} / {row['order_before']} | "
            f"{row['modes_before']} -> {row['modes_after']} | {row['gate']:.3g} | "
            f"{ratio:.3g} | {row['lower_bound']:.3g} | {measured} | {row['upper_bound']:.3g} | "
            f"{weighted} |"
        )
    lines += [
        "",
        "lower = gate x sigma_{r+1} of the unweighted system; upper = certified bound for the "
        "installed module (with data Gramians the plain bound of input-weighted truncation, "
        "which can be loose); weighted bound = gate x 2 sum_{i>r} of the weighted HSVs, the "
        "bound on the error for inputs shaped like the calibration data.",
    ]
    sign = 1.0 if r["higher_is_better"] else -1.0
    lines += [
        "",
        f"HRM - LoRA: {sign * (s['hrm'] - s['lora']):+.4f}; "
        f"HRM-BT zero-shot - HRM: {sign * (s['hrm_bt'] - s['hrm']):+.4f}; "
        f"HRM-BT phase 2 - HRM: {sign * (s['hrm_bt_phase2'] - s['hrm']):+.4f} "
        f"(positive = better; one seed, no error bars). Wall time {r['seconds']['total']:.0f} s.",
    ]
    majority = r["baselines"].get("majority")
    if majority is not None and max(s["lora"], s["hrm"]) <= majority + 0.005:
        lines.append(
            "Neither LoRA nor HRM beats the majority-class baseline here: in this budget no "
            "adapter learned the task, so the differences above say nothing about the methods "
            "(use a larger preset or `benchmarks/bench_tasks.py`)."
        )
    return "\n".join(lines)
