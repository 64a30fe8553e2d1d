"""Named experiment presets: backbone recipe, task, and training budgets for the main job.

``quick`` is the command line's default: the whole main job (pretrain the backbone, train
LoRA and HRM, calibrate, reduce, phase 2, evaluate) is sized to finish within 10 minutes on
two CPU cores. ``small`` and ``paper`` are larger: longer contexts (the benchmark grid's
lengths), a longer-pretrained backbone and more steps; they are meant for the benchmark grid
and a machine with time to spare.

Measured for ``quick`` on this project's 2-core machine (single-thread CPU seconds, which
is roughly the wall time on an idle core): pretraining the backbone takes about 80 s (val
BPC about 3.5); an adapter step on DFA k=2, T=8 with batch 32 takes about 0.1 s. Peak
learning rates and schedules per method (HRM 1e-2 with a cosine decay, LoRA 3e-3 constant)
are those chosen on a validation split by ``benchmarks/select_lr.py`` (DFA k=2, T=16; see
``benchmarks/results/select_lr.md``). With task samples written as characters, the quick
run (seed 0) reaches LoRA 0.795, HRM 0.815, HRM-BT 0.815 (majority class 0.600): the
shortcut "the last bit decides when both states go to the same place" is learnt by both,
so ``quick`` checks the pipeline end to end with a measurable signal; it does not test the
paper's long-T claim (that is the benchmark grid, ``benchmarks/bench_tasks.py``).
``small`` and ``paper`` scale the budgets up and were not tuned.
"""

from __future__ import annotations

from dataclasses import dataclass

from adapters.exceptions import AdapterConfigError
from benchmarks.hrm.backbone import BackboneConfig
from benchmarks.hrm.tasks import MAX_STATES

__all__ = ["PRESETS", "TEST_SEED", "Preset", "get_preset"]

#: Seed of the fixed test set of every run, whatever its training seed: runs with different
#: seeds (and every method of one run) are scored on the same samples (paired comparisons).
TEST_SEED = 10_000


@dataclass(frozen=True)
class Preset:
    """Everything the main job needs besides the adapter configs' own defaults.

    Parameters
    ----------
    name : str
        Key of the preset in :data:`PRESETS` (e.g. ``"quick"``).
    backbone : BackboneConfig
        Recipe of the frozen, pretrained character GPT-2.
    task : {"dfa", "parity"}
    k : int
        DFA states (ignored for parity, whose answers are 2 classes).
    length : int
        Input symbols T per sample.
    batch_size : int
        Training batch size (fresh samples every step).
    steps : int
        Phase-1 optimiser steps, the same for LoRA and HRM.
    phase2_steps : int
        Fine-tuning steps of the reduced HRM adapter.
    lr : float
        Peak learning rate of the HRM runs (phase 1 and phase 2) after a 10 % linear
        warm-up, and of LoRA unless `lora_lr` is given.
    n_test : int
        Size of the fixed, paired test set (same samples for every method).
    n_calibration : int
        Number of training-distribution samples streamed through the adapters to build the
        empirical Gramians.
    state_size : int
        HRM state size N before reduction.
    tol : float
        Relative Hankel-singular-value tolerance of the reduction (keep sigma_i / sigma_1 >= tol).
    seed : int
        Training seed (backbone pretraining has its own, in ``backbone``); the test set's
        seed is :data:`TEST_SEED`, whatever this one is.
    lora_lr : float or None
        Peak learning rate of the LoRA run; None uses `lr`.
    min_lr_ratio : float
        After the warm-up the rate follows a cosine from its peak down to
        ``min_lr_ratio`` times the peak; ``1.0`` keeps it constant (HRM, and LoRA unless
        `lora_min_lr_ratio` is given).
    lora_min_lr_ratio : float or None
        The same for the LoRA run; None uses `min_lr_ratio`.
    """

    name: str
    backbone: BackboneConfig
    task: str
    k: int
    length: int
    batch_size: int
    steps: int
    phase2_steps: int
    lr: float
    n_test: int
    n_calibration: int
    state_size: int = 32
    tol: float = 0.01
    seed: int = 0
    lora_lr: float | None = None
    min_lr_ratio: float = 0.1
    lora_min_lr_ratio: float | None = None

    def __post_init__(self) -> None:
        if self.task not in ("dfa", "parity"):
            raise AdapterConfigError(f"`task` must be 'dfa' or 'parity'; got {self.task!r}")
        if self.task == "dfa" and not 2 <= self.k <= MAX_STATES:
            raise AdapterConfigError(f"`k` must lie in [2, {MAX_STATES}]; got {self.k!r}")
        for name in ("length", "batch_size", "steps", "phase2_steps", "n_test",
                     "n_calibration", "state_size"):
            value = getattr(self, name)
            if not isinstance(value, int) or value < 1:
                raise AdapterConfigError(f"`{name}` must be a positive integer; got {value!r}")
        if self.sequence_length > self.backbone.n_positions:
            raise AdapterConfigError(
                f"a {self.task} sample of length={self.length} has {self.sequence_length} "
                f"tokens, more than the backbone's n_positions={self.backbone.n_positions}"
            )
        for name in ("lr", "lora_lr"):
            value = getattr(self, name)
            if value is not None and not (isinstance(value, float) and 0.0 < value < 1.0):
                raise AdapterConfigError(f"`{name}` must be a float in (0, 1); got {value!r}")
        for name in ("min_lr_ratio", "lora_min_lr_ratio"):
            value = getattr(self, name)
            if value is not None and not (isinstance(value, float) and 0.0 <= value <= 1.0):
                raise AdapterConfigError(f"`{name}` must be a float in [0, 1]; got {value!r}")
        if not 0.0 < self.tol < 1.0:
            raise AdapterConfigError(f"`tol` must lie in (0, 1); got {self.tol!r}")

    @property
    def n_classes(self) -> int:
        """Number of possible answers: ``k`` for DFA, 2 for parity."""
        return self.k if self.task == "dfa" else 2

    @property
    def lr_of(self) -> dict[str, float]:
        """Peak learning rate per method: ``{"hrm": lr, "lora": lora_lr or lr}``."""
        return {"hrm": self.lr, "lora": self.lr if self.lora_lr is None else self.lora_lr}

    @property
    def min_lr_ratio_of(self) -> dict[str, float]:
        """Final-to-peak rate ratio per method (``1.0``: constant after the warm-up)."""
        lora = self.min_lr_ratio if self.lora_min_lr_ratio is None else self.lora_min_lr_ratio
        return {"hrm": self.min_lr_ratio, "lora": lora}

    @property
    def sequence_length(self) -> int:
        """Tokens per sample: ``2k + T + 3`` (DFA) or ``T + 2`` (final-mode parity)."""
        return 2 * self.k + self.length + 3 if self.task == "dfa" else self.length + 2


PRESETS: dict[str, Preset] = {
    preset.name: preset
    for preset in (
        Preset(
            name="quick",
            backbone=BackboneConfig(n_layer=4, n_head=4, n_embd=128, n_positions=64, steps=300,
                                    batch_size=16, lr=3e-3, warmup_steps=30),
            task="dfa", k=2, length=8, batch_size=32, steps=500, phase2_steps=200,
            lr=1e-2, n_test=1000, n_calibration=256, lora_lr=3e-3, lora_min_lr_ratio=1.0,
        ),
        Preset(
            name="small",
            backbone=BackboneConfig(n_layer=4, n_head=4, n_embd=128, n_positions=256,
                                    steps=1500, batch_size=16, lr=3e-3, warmup_steps=100),
            task="dfa", k=4, length=64, batch_size=32, steps=1500, phase2_steps=500,
            lr=1e-2, n_test=2000, n_calibration=512, lora_lr=3e-3, lora_min_lr_ratio=1.0,
        ),
        Preset(
            name="paper",
            backbone=BackboneConfig(n_layer=4, n_head=4, n_embd=128, n_positions=640,
                                    steps=4000, batch_size=16, lr=3e-3, warmup_steps=200),
            task="dfa", k=4, length=512, batch_size=32, steps=4000, phase2_steps=1000,
            lr=1e-2, n_test=2000, n_calibration=1024, lora_lr=3e-3, lora_min_lr_ratio=1.0,
        ),
    )
}


def get_preset(name: str) -> Preset:
    """Look up a preset by name.

    Parameters
    ----------
    name : str
        One of ``PRESETS`` (``"quick"``, ``"small"``, ``"paper"``).

    Returns
    -------
    preset : Preset
        The registered preset of that name.
    """
    try:
        return PRESETS[name]
    except KeyError:
        raise AdapterConfigError(
            f"`name` must be one of {sorted(PRESETS)}; got {name!r}"
        ) from None
