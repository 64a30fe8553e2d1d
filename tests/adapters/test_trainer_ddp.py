"""HF Trainer with adapter-only checkpoints, single process and 2-process CPU DDP (gloo)."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
import torch

from adapters import HRMConfig, find_adapters, inject, load_adapter
from adapters.io import CONFIG_NAME, WEIGHTS_NAME, AdapterTrainerMixin, adapter_state_dict

transformers = pytest.importorskip("transformers", reason="extra 'hf' not installed")
pytest.importorskip("accelerate", reason="extra 'hf' not installed")
st = pytest.importorskip("safetensors.torch", reason="extra 'hf' not installed")

REPO = Path(__file__).resolve().parents[2]


def tiny():
    torch.manual_seed(0)
    cfg = transformers.LlamaConfig(hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                                   num_attention_heads=2, num_key_value_heads=1, vocab_size=64,
                                   bos_token_id=0, eos_token_id=0)
    return transformers.LlamaForCausalLM(cfg)


class _Data(torch.utils.data.Dataset):
    def __init__(self, n: int = 8, length: int = 10) -> None:
        g = torch.Generator().manual_seed(7)
        self.ids = torch.randint(1, 64, (n, length), generator=g)

    def __len__(self) -> int:
        return len(self.ids)

    def __getitem__(self, i):
        return {"input_ids": self.ids[i], "labels": self.ids[i]}


def test_trainer_writes_adapter_only_checkpoints_that_reload(tmp_path):
    model = inject(tiny(), HRMConfig(d_state=8, gate_init=0.01))
    base = {k: v.clone() for k, v in model.state_dict().items() if ".adapter." not in k}
    init = {k: v.clone() for k, v in adapter_state_dict(model).items()}

    class HRMTrainer(AdapterTrainerMixin, transformers.Trainer):
        """A transformers Trainer that checkpoints only the adapters."""

    args = transformers.TrainingArguments(
        output_dir=str(tmp_path), max_steps=2, per_device_train_batch_size=4, learning_rate=1e-2,
        save_strategy="steps", save_steps=1, save_only_model=True, report_to=[], use_cpu=True,
        disable_tqdm=True, logging_steps=1, seed=0, dataloader_num_workers=0,
    )
    HRMTrainer(model=model, args=args, train_dataset=_Data()).train()
    for step in (1, 2):
        files = {p.name for p in (tmp_path / f"checkpoint-{step}").iterdir()}
        assert {CONFIG_NAME, WEIGHTS_NAME} <= files
        assert not files & {"model.safetensors", "pytorch_model.bin", "config.json"}, files
    trained = adapter_state_dict(model)
    assert all(not torch.equal(trained[k], init[k]) for k in ("model.layers.0.mlp.gate",))
    now = model.state_dict()
    assert all(torch.equal(now[k], v) for k, v in base.items())  # the base stayed frozen
    fresh = load_adapter(tiny(), tmp_path / "checkpoint-2")
    model.eval()
    fresh.eval()
    x = _Data().ids[:2]
    with torch.no_grad():
        assert torch.equal(model(x, use_cache=False).logits, fresh(x, use_cache=False).logits)


_WORKER = textwrap.dedent('''
    import json, os, sys
    import torch, transformers
    from adapters import HRMConfig, inject
    from adapters.io import AdapterTrainerMixin, adapter_state_dict
    from safetensors.torch import save_file
    torch.set_num_threads(1)
    rank, out = int(os.environ["RANK"]), sys.argv[1]
    torch.manual_seed(0)
    cfg = transformers.LlamaConfig(hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                                   num_attention_heads=2, num_key_value_heads=1, vocab_size=64,
                                   bos_token_id=0, eos_token_id=0)
    model = transformers.LlamaForCausalLM(cfg)
    base = {k: v.clone() for k, v in model.state_dict().items()}
    torch.manual_seed(100 + rank)  # different adapter init per rank: DDP must broadcast rank 0's
    inject(model, HRMConfig(d_state=8, gate_init=0.01))
    init = {k: v.clone() for k, v in adapter_state_dict(model).items()}
    class Data(torch.utils.data.Dataset):
        ids = torch.randint(1, 64, (16, 10), generator=torch.Generator().manual_seed(7))
        def __len__(self): return len(self.ids)
        def __getitem__(self, i): return {"input_ids": self.ids[i], "labels": self.ids[i]}
    class HRMTrainer(AdapterTrainerMixin, transformers.Trainer):
        """A transformers Trainer that checkpoints only the adapters."""
    if sys.argv[2] == "plain":  # a plain Trainer: full checkpoints, adapters written beside
        HRMTrainer = transformers.Trainer
    args = transformers.TrainingArguments(
        output_dir=out, max_steps=2, per_device_train_batch_size=2, learning_rate=1e-2,
        save_strategy="steps", save_steps=2, save_only_model=True, report_to=[], use_cpu=True,
        ddp_backend="gloo", disable_tqdm=True, seed=0, dataloader_num_workers=0)
    trainer = HRMTrainer(model=model, args=args, train_dataset=Data())
    trainer.train()
    world = torch.distributed.get_world_size() if torch.distributed.is_initialized() else 1
    state = adapter_state_dict(model)
    save_file(state, os.path.join(out, f"rank{rank}.safetensors"))
    save_file(init, os.path.join(out, f"init{rank}.safetensors"))
    base_diff = max((model.state_dict()[k] - v).abs().max().item()
                    for k, v in base.items() if k in model.state_dict())
    n_base = sum(1 for k in base if k in model.state_dict())
    with open(os.path.join(out, f"rank{rank}.json"), "w") as f:
        json.dump({"world": world, "base_diff": base_diff, "n_base": n_base,
                   "step": trainer.state.global_step}, f)
''')


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.timeout(420)  # above the workers' own 300 s deadline, so that it reports first
@pytest.mark.parametrize("trainer", ["mixin", pytest.param("plain", marks=pytest.mark.slow)])
def test_two_process_ddp_gloo_keeps_ranks_in_sync(tmp_path, trainer):
    script = tmp_path / "worker.py"
    script.write_text(_WORKER)
    port = _free_port()
    procs = []
    for rank in range(2):
        env = {**os.environ, "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port),
               "WORLD_SIZE": "2", "RANK": str(rank), "LOCAL_RANK": str(rank),
               "LOCAL_WORLD_SIZE": "2", "OMP_NUM_THREADS": "1",
               "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]),
               "TRANSFORMERS_VERBOSITY": "error"}
        procs.append(subprocess.Popen([sys.executable, str(script), str(tmp_path), trainer],
                                      env=env,
                                      cwd=str(REPO), stdout=subprocess.PIPE,
                                      stderr=subprocess.STDOUT, text=True))
    logs = []
    deadline = time.monotonic() + 300  # one deadline for both ranks (marker: 420 s in all)
    try:
        for p in procs:
            logs.append(p.communicate(timeout=max(1.0, deadline - time.monotonic()))[0])
    except subprocess.TimeoutExpired:
        pytest.fail("DDP workers timed out")
    finally:  # also on pytest-timeout's failure or Ctrl-C: no rank outlives the test
        for q in procs:
            if q.poll() is None:
                q.kill()
                q.communicate(timeout=30)
    for p, log in zip(procs, logs, strict=True):
        assert p.returncode == 0, log[-3000:]
    info = [json.loads((tmp_path / f"rank{r}.json").read_text()) for r in range(2)]
    assert [i["world"] for i in info] == [2, 2] and [i["step"] for i in info] == [2, 2]
    assert all(i["base_diff"] == 0.0 and i["n_base"] > 0 for i in info)  # frozen base
    r0, r1 = (st.load_file(str(tmp_path / f"rank{r}.safetensors")) for r in range(2))
    i0, i1 = (st.load_file(str(tmp_path / f"init{r}.safetensors")) for r in range(2))
    assert any(not torch.equal(i0[k], i1[k]) for k in i0)  # ranks started apart ...
    assert all(torch.equal(r0[k], r1[k]) for k in r0)  # ... and ended bit-identical
    assert not torch.equal(r0["model.layers.0.mlp.gate"], i0["model.layers.0.mlp.gate"])
    ckpt = tmp_path / "checkpoint-2"
    assert {CONFIG_NAME, WEIGHTS_NAME} <= {p.name for p in ckpt.iterdir()}
    saved = st.load_file(str(ckpt / WEIGHTS_NAME))
    assert all(torch.equal(saved[k], r0[k]) for k in r0)
    loaded = load_adapter(tiny(), ckpt)
    assert len(find_adapters(loaded)) == 2
    assert ("model.safetensors" in {p.name for p in ckpt.iterdir()}) == (trainer == "plain")
