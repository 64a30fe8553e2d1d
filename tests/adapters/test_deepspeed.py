"""DeepSpeed ZeRO-2 and ZeRO-3 with a plain ``transformers.Trainer`` (CPU, one process, gloo).

The engine used to stop at start-up on every ZeRO stage (``_broadcast_model`` views each
parameter as bytes, which a 0-dim tensor cannot be: the adapters' gate had shape ()). Each run
goes in its own process (``tests/adapters/_zero_run.py``), so that DeepSpeed's process group
and accelerator do not leak into other tests. DeepSpeed is not a dependency of this project;
without it (as in CI) the tests are skipped. A run takes about 10 s on one core, after DeepSpeed
has built its CPU communication op once (minutes, cached under ~/.cache/torch_extensions).
"""

from __future__ import annotations

import importlib.util
import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from adapters import load_adapter
from adapters.io import adapter_state_dict
from tests.adapters._tiny import tiny_causal_lm

pytest.importorskip(
    "transformers", reason="the adapters extra (torch, transformers) is not installed")
pytestmark = pytest.mark.skipif(
    importlib.util.find_spec("deepspeed") is None,
    reason="deepspeed is not installed (not a dependency; CI lacks it): ZeRO runs not tried")

ROOT = Path(__file__).resolve().parents[2]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.parametrize(("stage", "persistence"), [(2, 100000), (3, 100000), (3, 0)],
                         ids=["zero2", "zero3", "zero3-partitioned"])
def test_zero_trains_and_writes_adapter_checkpoints_that_load_back_exactly(stage, persistence,
                                                                           tmp_path):
    """Persistence 100000 (DeepSpeed's default) leaves this tiny model's tensors whole under
    ZeRO-3; 0 partitions every adapter parameter, so the checkpoint must come from the state
    dict the Trainer gathers (``save_pretrained(d, state_dict=...)``)."""
    env = {**os.environ, "MASTER_PORT": str(_free_port()), "OMP_NUM_THREADS": "1",
           "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    run = subprocess.run([sys.executable, "-m", "tests.adapters._zero_run", str(stage),
                          str(tmp_path), str(persistence)], cwd=ROOT, env=env,
                         capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stderr[-3000:]
    record = json.loads((tmp_path / "run.json").read_text())
    print(f"ZeRO-{stage}: {record}")
    assert record["zero_stage"] == stage and len(record["losses"]) == 4
    partitioned = record["partitioned_adapter_tensors_at_save"]
    assert partitioned == ([10, 10] if persistence == 0 else [0, 0])  # 5 parameters x 2 layers
    initial = torch.load(tmp_path / "initial.pt", weights_only=True)
    for step in (2, 4):
        live = torch.load(tmp_path / f"snapshot-{step}.pt", weights_only=True)
        got = adapter_state_dict(load_adapter(tiny_causal_lm("llama"),
                                              tmp_path / f"checkpoint-{step}"))
        assert got.keys() == live.keys()
        assert all(torch.equal(got[k], live[k]) for k in live), step  # bit for bit
        assert not all(torch.equal(live[k], initial[k]) for k in live)  # it trained
        assert got["model.layers.0.mlp.gate"].shape == (1,)
