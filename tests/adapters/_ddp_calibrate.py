"""Light helpers for the two-rank calibration test (spawned processes import only this).

Kept apart from ``test_calibration.py`` so that the spawned ranks do not import transformers.
"""

from __future__ import annotations

import datetime

import torch
from torch import nn

from adapters import HRMConfig, calibrate, inject

VOCAB = 64


class _Block(nn.Module):
    def __init__(self, width):
        super().__init__()
        self.ln = nn.LayerNorm(width)
        self.mlp = nn.Sequential(nn.Linear(width, 2 * width), nn.GELU(),
                                 nn.Linear(2 * width, width))

    def forward(self, x):
        return x + self.mlp(self.ln(x))


class _TinyLM(nn.Module):
    """Token embedding + two residual MLP blocks: a cheap model to spawn in subprocesses."""

    def __init__(self, width=16, vocab=VOCAB):
        super().__init__()
        self.emb = nn.Embedding(vocab, width)
        self.h = nn.ModuleList([_Block(width), _Block(width)])

    def forward(self, input_ids, attention_mask=None):
        x = self.emb(input_ids)
        for block in self.h:
            x = block(x)
        return x


def ddp_model():
    torch.manual_seed(0)
    return inject(_TinyLM(), HRMConfig(d_state=5, gate_init=0.3, mode="complex"))


def shards():
    g = torch.Generator().manual_seed(11)
    out = []
    for _ in range(4):
        ids = torch.randint(0, VOCAB, (2, 40), generator=g)
        out.append(ids)
    return [out[0::2], out[1::2]]  # rank r takes every other batch


def ddp_worker(rank, world, init_file, out_path):
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel

    torch.set_num_threads(1)
    dist.init_process_group("gloo", init_method=f"file://{init_file}", rank=rank,
                            world_size=world, timeout=datetime.timedelta(seconds=120))
    try:
        model = DistributedDataParallel(ddp_model())
        stats = calibrate(model, shards()[rank], gramian="both", progress=False)
        if rank == 0:
            stats.save(out_path)
    finally:
        dist.destroy_process_group()
