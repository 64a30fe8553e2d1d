"""Resuming an optimizer state saved while the adapters' gate was 0-dim (formats 1 and 2)
with plain torch optimizers (``adapters/_optimizer_state.py``)."""

from __future__ import annotations

import copy

import pytest
import torch
from torch import nn

from adapters import HRMConfig, find_adapters, inject
from adapters._optimizer_state import upgrade_optimizer_state
from tests.adapters._tiny import tiny_causal_lm

pytest.importorskip("transformers", reason="the 'hf' extra (transformers) is not installed")

IDS = torch.randint(1, 64, (2, 9), generator=torch.Generator().manual_seed(1))

OPTIMIZERS = {
    "AdamW": lambda ps: torch.optim.AdamW(ps, lr=1e-2),
    "AdamW-for-loop": lambda ps: torch.optim.AdamW(ps, lr=1e-2, foreach=False),
    "AdamW-fused": lambda ps: torch.optim.AdamW(ps, lr=1e-2, fused=True),
    "Adam-amsgrad": lambda ps: torch.optim.Adam(ps, lr=1e-2, amsgrad=True),
    "SGD-momentum": lambda ps: torch.optim.SGD(ps, lr=1e-2, momentum=0.9),
    "RMSprop": lambda ps: torch.optim.RMSprop(ps, lr=1e-2),
    "NAdam": lambda ps: torch.optim.NAdam(ps, lr=1e-2),  # 0-dim mu_product stays 0-dim
    "ASGD": lambda ps: torch.optim.ASGD(ps, lr=1e-2),  # 0-dim eta, mu stay 0-dim
}


def _model(old: bool):
    model = inject(tiny_causal_lm("llama"), HRMConfig(d_state=4, gate_init=0.1))
    if old:  # as code before format 3 built it: the gate a 0-dim parameter
        for a in find_adapters(model).values():
            a.adapter.gate = nn.Parameter(a.adapter.gate.detach().reshape(()).clone())
    return model


def _trainable(model):
    return [p for p in model.parameters() if p.requires_grad]


def _steps(model, opt, n):
    for _ in range(n):
        opt.zero_grad()
        model(IDS, labels=IDS).loss.backward()
        opt.step()


@pytest.mark.parametrize("name", OPTIMIZERS)
def test_an_old_optimizer_state_resumes_like_the_old_run(name, tmp_path):
    make = OPTIMIZERS[name]
    old = _model(old=True)
    opt = make(_trainable(old))
    _steps(old, opt, 2)
    gate_state = opt.state[find_adapters(old)["model.layers.0.mlp"].adapter.gate]
    assert any(v.dim() == 0 for k, v in gate_state.items() if k != "step")  # an old state
    torch.save(opt.state_dict(), tmp_path / "optimizer.pt")
    saved_model = {k: v.clone() for k, v in old.state_dict().items()}
    _steps(old, opt, 2)  # the uninterrupted old run
    want = [p.detach().reshape(-1) for p in _trainable(old)]

    new = _model(old=False)
    new.load_state_dict(saved_model)  # 0-dim gates read as (1,)
    resumed = make(_trainable(new))
    resumed.load_state_dict(torch.load(tmp_path / "optimizer.pt", weights_only=True))
    _steps(new, resumed, 2)
    got = [p.detach().reshape(-1) for p in _trainable(new)]
    assert all(torch.equal(a, b) for a, b in zip(got, want, strict=True))
    gate = find_adapters(new)["model.layers.0.mlp"].adapter.gate
    shapes = {k: tuple(v.shape) for k, v in resumed.state[gate].items()}
    scalars = {"step", "eta", "mu", "mu_product"}
    assert all(s == (1,) for k, s in shapes.items() if k not in scalars), shapes
    assert all(s == () for k, s in shapes.items() if k in scalars), shapes


def test_an_old_state_loaded_into_an_optimizer_that_already_stepped(tmp_path):
    old = _model(old=True)
    opt = torch.optim.SGD(_trainable(old), lr=1e-2, momentum=0.9)
    _steps(old, opt, 1)
    state = copy.deepcopy(opt.state_dict())  # its tensors are the live moments
    new = _model(old=False)
    running = torch.optim.SGD(_trainable(new), lr=1e-2, momentum=0.9)
    _steps(new, running, 1)  # watched from here on: the upgrade runs after each load
    new.load_state_dict(old.state_dict())
    running.load_state_dict(state)
    _steps(new, running, 1)
    _steps(old, opt, 1)
    assert all(torch.equal(a.reshape(-1), b.reshape(-1))
               for a, b in zip(_trainable(new), _trainable(old), strict=True))


def test_upgrade_reads_per_element_keys_off_the_other_parameters():
    big, one = nn.Parameter(torch.zeros(3)), nn.Parameter(torch.zeros(1))
    opt = torch.optim.SGD([big, one], lr=0.1)
    opt.state[big] = {"m": torch.zeros(3), "count": torch.tensor(2.0), "step": torch.tensor(1.)}
    opt.state[one] = {"m": torch.tensor(0.5), "count": torch.tensor(2.0),
                      "other": torch.tensor(1.0), "step": torch.tensor(1.0)}
    assert upgrade_optimizer_state(opt) == 1  # "m" (per element); "other" is unknown
    assert {k: tuple(v.shape) for k, v in opt.state[one].items()} == {
        "m": (1,), "count": (), "other": (), "step": ()}
    assert opt.state[one]["m"].item() == 0.5
    assert upgrade_optimizer_state(opt) == 0
    alone = torch.optim.SGD([one], lr=0.1)  # no other parameter: torch's own names decide
    alone.state[one] = {"momentum_buffer": torch.tensor(0.5), "H_diag": torch.tensor(2.0)}
    assert upgrade_optimizer_state(alone) == 1
    assert alone.state[one]["momentum_buffer"].shape == (1,)


def test_lbfgs_state_under_a_gate_is_left_alone():
    """LBFGS keeps its whole state under its first parameter, the adapter's gate here; its
    0-dim ``H_diag`` is a scalar of the method, not a moment of the gate."""
    from adapters import HRMAdapter

    adapter = HRMAdapter(8, 4, gate_init=0.5)
    assert next(adapter.parameters()) is adapter.gate
    opt = torch.optim.LBFGS(list(adapter.parameters()), lr=0.1, max_iter=3)
    x = torch.randn(2, 6, 8, generator=torch.Generator().manual_seed(0))

    def closure():
        opt.zero_grad()
        loss = adapter(x).pow(2).sum()
        loss.backward()
        return loss

    opt.step(closure)
    opt.step(closure)
    assert opt.state[adapter.gate]["H_diag"].dim() == 0
    assert upgrade_optimizer_state(opt) == 0
