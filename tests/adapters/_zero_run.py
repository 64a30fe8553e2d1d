"""One DeepSpeed ZeRO run on CPU for ``tests/adapters/test_deepspeed.py`` (its own process).

``python -m tests.adapters._zero_run STAGE OUT [PERSISTENCE]``: one process (rank 0 of 1,
gloo, DeepSpeed's CPU accelerator) trains a tiny adapted Llama for 4 steps through a plain
``transformers.Trainer`` with a ZeRO-``STAGE`` config, saving every 2 steps. At each save the
adapters' live values (gathered under ZeRO-3) are written to ``OUT/snapshot-<step>.pt``, and
``OUT/run.json`` records the engine's ZeRO stage, the losses and the initial adapter values'
file. ``PERSISTENCE`` is ZeRO-3's ``stage3_param_persistence_threshold`` (parameters with
fewer elements are not partitioned; DeepSpeed's default 100000 keeps every tensor of this tiny
model whole, 0 partitions all).
"""

from __future__ import annotations

import contextlib
import copy
import json
import os
import sys
from pathlib import Path


def main(stage: int, out: Path, persistence: int) -> None:
    import deepspeed
    import torch
    import transformers

    from adapters import HRMConfig, find_adapters, inject
    from adapters.io import adapter_state_dict
    from tests.adapters._tiny import tiny_causal_lm

    config = {"zero_optimization": {"stage": stage,
                                    "stage3_gather_16bit_weights_on_model_save": True,
                                    "stage3_param_persistence_threshold": persistence},
              "train_micro_batch_size_per_gpu": 2, "gradient_accumulation_steps": 1,
              "zero_force_ds_cpu_optimizer": False}
    args = transformers.TrainingArguments(
        output_dir=str(out), per_device_train_batch_size=2, max_steps=4, save_strategy="steps",
        save_steps=2, learning_rate=1e-2, report_to=[], logging_steps=1, disable_tqdm=True,
        deepspeed=config, use_cpu=True, seed=0, dataloader_num_workers=0)
    model = inject(tiny_causal_lm("llama"), HRMConfig(d_state=4, gate_init=0.1))
    torch.save(copy.deepcopy(adapter_state_dict(model)), out / "initial.pt")
    g = torch.Generator().manual_seed(3)
    data = [{"input_ids": x, "labels": x.clone()}
            for x in torch.randint(1, 64, (8, 8), generator=g)]
    params = [p for a in find_adapters(model).values() for p in a.adapter.parameters()]
    partitioned = []

    class Snapshot(transformers.TrainerCallback):
        def on_save(self, args, state, control, **kwargs):
            partitioned.append(sum(tuple(p.shape) != tuple(getattr(p, "ds_shape", p.shape))
                                   for p in params))
            gather = (deepspeed.zero.GatheredParameters(params) if stage == 3
                      else contextlib.nullcontext())
            with gather:
                torch.save(copy.deepcopy(adapter_state_dict(model)),
                           out / f"snapshot-{state.global_step}.pt")

    trainer = transformers.Trainer(model=model, args=args, train_dataset=data,
                                   callbacks=[Snapshot()])
    trainer.train()
    engine = trainer.model_wrapped
    record = {"deepspeed": deepspeed.__version__,
              "accelerator": deepspeed.accelerator.get_accelerator().device_name(),
              "zero_stage": int(engine.zero_optimization_stage()),
              "losses": [h["loss"] for h in trainer.state.log_history if "loss" in h],
              "partitioned_adapter_tensors_at_save": partitioned}
    (out / "run.json").write_text(json.dumps(record))


if __name__ == "__main__":
    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ.update(RANK="0", WORLD_SIZE="1", LOCAL_RANK="0")
    main(int(sys.argv[1]), Path(sys.argv[2]), int(sys.argv[3]) if len(sys.argv) > 3 else 100000)
