"""reduce(): certified bounds around the measured error, exactness at full order, diagonal
parallel-scan modules that train, save/load, the modal fallback, the report, the 30-layer size."""

from __future__ import annotations

import copy
import json
import warnings

import numpy as np
import pytest
import torch
from torch import nn

import lti
from adapters import (
    DiagonalSSM,
    HRMAdapter,
    HRMConfig,
    ReductionReport,
    calibrate,
    find_adapters,
    inject,
    load_adapter,
    reduce,
    save_adapter,
)
from adapters.exceptions import AdapterConfigError, AdapterError
from adapters.injection import get_adapter_config
from adapters.reduction import modal_form
from tests.adapters._tiny import tiny_gpt2

transformers = pytest.importorskip("transformers", reason="extra 'hf' not installed")

H, VOCAB = 32, 64


def _gpt2(seed=0):
    return tiny_gpt2(width=H, vocab=VOCAB, seed=seed)


@pytest.fixture(scope="module")
def base():
    return _gpt2()


def _adapted(base, mode="real", d_state=8, gate=0.3, scan="auto", seed=1):
    torch.manual_seed(seed)
    return inject(copy.deepcopy(base),
                  HRMConfig(d_state=d_state, gate_init=gate, mode=mode, scan=scan))


def _ids(seed=0, batch=3, length=40):
    return torch.randint(0, VOCAB, (batch, length), generator=torch.Generator().manual_seed(seed))


def _measured(full: HRMAdapter, reduced: HRMAdapter) -> float:
    """|| g (G - G_mod) ||_inf from the two modules, with lti only (independent of reduce)."""
    g = float(full.gate.detach())
    assert float(reduced.gate.detach()) == g
    E = full.ssm.as_lti() - reduced.ssm.as_lti()
    return abs(g) * lti.hinf_norm(E).value


def _streams(model, ids):
    got = {}
    handles = []
    for name, wrapper in find_adapters(model).items():
        def hook(module, args, name=name):
            got[name] = args[0].detach()
        handles.append(wrapper.adapter.register_forward_pre_hook(hook))
    with torch.no_grad():
        model(ids, use_cache=False)
    for h in handles:
        h.remove()
    return got


# --------------------------------------------------------------------------- the certificate


@pytest.mark.parametrize("mode", ["real", "complex"])
@pytest.mark.parametrize("rule", [{"rel_tol": 0.2}, {"order": 3}, {"tol": 0.05}])
def test_measured_error_inside_reported_bounds_exact(base, mode, rule):
    model = _adapted(base, mode)
    full = {k: copy.deepcopy(v.adapter) for k, v in find_adapters(model).items()}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        report = reduce(model, measure=True, **rule)
    for x in report.layers:
        new = find_adapters(model)[x.name].adapter
        err = _measured(full[x.name], new)
        assert x.measured_error == pytest.approx(err, rel=1e-6, abs=0)
        assert x.lower_bound * (1 - 1e-9) <= err <= x.upper_bound, x
        assert x.order_after == new.ssm.order and x.modes_after == new.ssm.d_state
        assert x.order_after <= x.order_before
        if "rel_tol" in rule:
            s = np.asarray(x.hsv)
            assert s[x.order_after - 1] >= 0.2 * s[0]
            assert x.order_after == s.size or s[x.order_after] < 0.2 * s[0]
        if "order" in rule:
            assert x.order_after == 3
        if "tol" in rule:
            assert x.truncation_bound <= 0.05
        s = np.asarray(x.hsv)
        # the truncation bound is lti's: 2 sum of the tail plus its stated rounding term
        assert 0 < x.rounding_term <= 1e-9 * abs(x.gate) * s.sum()
        assert x.truncation_bound == pytest.approx(
            abs(x.gate) * 2 * s[x.order_after:].sum() + x.rounding_term, rel=1e-12, abs=1e-300)


@pytest.mark.parametrize("gramian", ["data", "input"])
@pytest.mark.parametrize("rule", [{"rel_tol": 0.3}, {"order": 4}])
def test_measured_error_inside_reported_bounds_data_driven(base, gramian, rule):
    model = _adapted(base, "real")
    stats = calibrate(model, [_ids(1), _ids(2)], gramian="both", progress=False)
    full = {k: copy.deepcopy(v.adapter) for k, v in find_adapters(model).items()}
    report = reduce(model, gramian=gramian, stats=stats, measure=True, **rule)
    for x in report.layers:
        err = _measured(full[x.name], find_adapters(model)[x.name].adapter)
        assert x.lower_bound * (1 - 1e-9) <= err <= x.upper_bound, x
        assert x.weighted_bound is not None and np.isfinite(x.upper_bound)
        s = np.asarray(x.hsv)  # weighted HSVs
        assert x.weighted_bound == pytest.approx(x.gate * 2 * s[x.order_after:].sum(),
                                                 rel=1e-9, abs=0)
        if "order" in rule:
            assert x.order_after == 4
        else:
            assert s[x.order_after - 1] >= 0.3 * s[0] > s[x.order_after]


@pytest.mark.parametrize("gramian", ["exact", "data", "input"])
@pytest.mark.parametrize("rule", [{"rel_tol": 0.3}, {"order": 3}, {"tol": 1e-3}])
def test_one_lti_truncation_per_layer(base, monkeypatch, gramian, rule):
    # The selection rule (rel_tol included) is lti's: no full-order probe, no second call,
    # no Gramian factors computed by adapters.
    model = _adapted(base, "real")
    stats = (None if gramian == "exact"
             else calibrate(model, [_ids(1)], gramian="both", progress=False))
    calls = {"balanced_truncation": 0, "weighted_balanced_truncation": 0,
             "balanced_truncation_from_factors": 0, "gramian_factors": 0,
             "solve_discrete_lyapunov": 0, "psd_factor": 0}
    for fn in calls:
        real = getattr(lti, fn)

        def counted(*args, _real=real, _fn=fn, **kwargs):
            calls[_fn] += 1
            return _real(*args, **kwargs)

        monkeypatch.setattr(lti, fn, counted)
    report = reduce(model, gramian=gramian, stats=stats, **rule)
    n_layers = len(report.layers)
    which = "balanced_truncation" if gramian == "exact" else "weighted_balanced_truncation"
    assert calls.pop(which) == n_layers
    assert calls == dict.fromkeys(calls, 0)


def test_recorded_config_follows_the_reduction(base):
    model = _adapted(base, "real", d_state=8)
    assert get_adapter_config(model).d_state == 8
    report = reduce(model, order={"transformer.h.0.mlp": 3, "transformer.h.1.mlp": 5})
    sizes = [w.adapter.ssm.d_state for w in find_adapters(model).values()]
    assert get_adapter_config(model).d_state == max(sizes) == max(
        x.modes_after for x in report.layers) < 8
    # a wrapper around the adapted model (it holds the adapters, not the recorded config)
    inner = _adapted(base, "real", d_state=8)
    wrapper = nn.ModuleDict({"lm": inner})
    report = reduce(wrapper, order=2)
    assert get_adapter_config(inner).d_state == max(x.modes_after for x in report.layers) < 8


def test_stale_or_missing_statistics_are_refused(base):
    model = _adapted(base, "real")
    stats = calibrate(model, [_ids(1)], progress=False)
    with pytest.raises(AdapterConfigError, match="needs `stats`"):
        reduce(model, gramian="data", rel_tol=0.1)
    with pytest.raises(AdapterConfigError, match="no input covariance"):
        reduce(model, gramian="input", stats=stats, rel_tol=0.1)
    with torch.no_grad():
        find_adapters(model)["transformer.h.1.mlp"].adapter.ssm.B.mul_(1.5)
    with pytest.raises(AdapterConfigError, match="changed since calibration"):
        reduce(model, gramian="data", stats=stats, rel_tol=0.1)
    # nothing was swapped by the failed call
    assert all(w.adapter.ssm.d_state == 8 for w in find_adapters(model).values())


def test_bad_arguments(base):
    model = _adapted(base, "real")
    for kw in ({}, {"tol": 0.1, "order": 2}, {"tol": -1.0}, {"rel_tol": 2.0},
               {"order": 0}, {"order": 99}, {"order": 2, "gramian": "hankel"},
               {"order": 2, "method": "svd"}, {"order": {"nope": 2}}):
        with pytest.raises(AdapterConfigError):
            reduce(model, **kw)
    with pytest.raises(AdapterError, match="no HRM adapters"):
        reduce(_gpt2(), order=2)


def test_zero_gate_keeps_one_state_and_zero_bounds(base):
    model = _adapted(base, "real", gate=0.0)
    report = reduce(model, tol=1e-3, measure=True)
    for x in report.layers:
        assert x.order_after == 1 and x.upper_bound == x.lower_bound == x.measured_error == 0.0


# --------------------------------------------------------------------------- full order: exact


@pytest.mark.parametrize("mode", ["real", "complex"])
def test_full_order_reproduces_outputs_on_real_hidden_states(base, mode):
    model = _adapted(base, mode)
    ids = _ids(3)
    streams = _streams(model, ids)
    full = {k: copy.deepcopy(v.adapter) for k, v in find_adapters(model).items()}
    with torch.no_grad():
        logits_full = model(ids, use_cache=False).logits
    n = next(iter(full.values())).ssm.order
    report = reduce(model, order=n)
    worst = 0.0
    for name, adapter in full.items():
        new = find_adapters(model)[name].adapter
        with torch.no_grad():
            y, y_new = adapter(streams[name]), new(streams[name])
        assert y.dtype == y_new.dtype == torch.float32
        worst = max(worst, float((y - y_new).abs().max() / y.abs().max()))
        assert report[name].order_after == n
    print(f"order = N ({mode}): max relative output difference {worst:.2e}")
    assert worst <= 1e-5
    with torch.no_grad():
        logits = model(ids, use_cache=False).logits
    assert float((logits - logits_full).abs().max() / logits_full.abs().max()) <= 1e-5


# --------------------------------------------------------------------------- still fast, trainable


@pytest.mark.parametrize("scan", ["auto", "fft"])
def test_reduced_forward_uses_parallel_scan_and_trains(base, monkeypatch, scan):
    import adapters.scan
    import adapters.ssm

    model = _adapted(base, "complex", scan=scan)
    report = reduce(model, order=5)  # odd order: a real mode plus complex pairs
    assert any(x.n_real_after and x.n_complex_after for x in report.layers)
    calls = {"core": 0}
    name = "fft_core" if scan == "fft" else "chunked_core"
    core = getattr(adapters.ssm, name)

    def counting(*args, **kwargs):
        calls["core"] += 1
        return core(*args, **kwargs)

    def forbidden(*args, **kwargs):
        raise AssertionError("per-token loop used for L > 1")

    monkeypatch.setattr(adapters.ssm, name, counting)
    monkeypatch.setattr(adapters.scan, "recurrent_scan", forbidden)
    monkeypatch.setattr(adapters.scan, "_recurrent_scan", forbidden)
    monkeypatch.setattr(DiagonalSSM, "step", forbidden)
    monkeypatch.setattr(HRMAdapter, "step", forbidden)
    model.train()
    ids = _ids(4, length=24)
    out = model(ids, labels=ids, use_cache=False)
    n_adapters = len(find_adapters(model))
    assert calls["core"] >= 2 * n_adapters  # forward scans of real and complex modes
    out.loss.backward()
    assert calls["core"] >= 4 * n_adapters  # the backward pass is a parallel scan too
    for w in find_adapters(model).values():
        assert isinstance(w.adapter, HRMAdapter)
        for pname, p in w.adapter.named_parameters():
            assert isinstance(p, nn.Parameter) and p.requires_grad, pname
            assert p.grad is not None and torch.isfinite(p.grad).all(), pname
            assert p.grad.abs().sum() > 0, pname
    frozen = [p for n, p in model.named_parameters() if ".adapter." not in n]
    assert frozen and all(p.grad is None for p in frozen)
    # one optimiser step lowers the loss
    params = [p for p in model.parameters() if p.requires_grad]
    opt = torch.optim.SGD(params, lr=1e-3)
    opt.step()
    with torch.no_grad():
        assert model(ids, labels=ids, use_cache=False).loss < out.loss


def test_cached_decoding_of_reduced_model_matches_full_forward(base):
    model = _adapted(base, "complex")
    reduce(model, order=5)
    ids = _ids(5, batch=2, length=12)
    with torch.no_grad():
        full = model(ids, use_cache=False).logits[:, -1]
        pre = model(ids[:, :-1], use_cache=True)
        step = model(ids[:, -1:], cache=pre.cache, use_cache=True)  # transformers 5.x names
    assert torch.allclose(step.logits[:, -1], full, rtol=1e-4, atol=1e-5)


def test_save_load_round_trip_is_bit_identical(base, tmp_path):
    model = _adapted(base, "complex")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        reduce(model, order={"transformer.h.0.mlp": 5, "transformer.h.1.mlp": 8})
    structure = {k: (w.adapter.ssm.n_real, w.adapter.ssm.n_complex)
                 for k, w in find_adapters(model).items()}
    assert len(set(structure.values())) == 2  # per-layer sizes differ
    save_adapter(model, tmp_path / "ckpt")
    fresh = load_adapter(copy.deepcopy(base), tmp_path / "ckpt")
    assert {k: (w.adapter.ssm.n_real, w.adapter.ssm.n_complex)
            for k, w in find_adapters(fresh).items()} == structure
    ids = _ids(6)
    with torch.no_grad():
        a = model(ids, use_cache=False).logits
        b = fresh(ids, use_cache=False).logits
    assert torch.equal(a, b)
    for k, w in find_adapters(fresh).items():
        ref = find_adapters(model)[k].adapter.state_dict()
        assert all(torch.equal(v, ref[n]) for n, v in w.adapter.state_dict().items())
        assert all(p.requires_grad for p in w.adapter.parameters())


# --------------------------------------------------------------------------- modal form


@pytest.mark.parametrize("seed", range(4))
def test_modal_form_is_a_similarity(seed):
    rng = np.random.default_rng(seed)
    r = 7
    A = rng.standard_normal((r, r))
    A *= 0.95 / np.max(np.abs(np.linalg.eigvals(A)))
    B, C = rng.standard_normal((r, 5)), rng.standard_normal((5, r))
    a, Bm, Cm, real, cond, shift = modal_form(A, B, C)
    assert shift == 0.0 and cond < 1e8
    assert a.size == int(real.sum()) + (r - int(real.sum())) // 2
    ssm = DiagonalSSM.from_discrete(a, Bm, Cm, real_modes=real, dtype=torch.float64)
    G, Gm = lti.DiscreteLTI(A, B, C), ssm.as_lti()
    assert lti.hinf_norm(G - Gm).value <= 1e-10 * lti.hinf_norm(G).value
    # per mode, |B row| == |C column| (balanced scaling)
    np.testing.assert_allclose(np.linalg.norm(Bm, axis=1), np.linalg.norm(Cm, axis=0), rtol=1e-12,
                               atol=0)


def test_modal_form_fallback_for_defective_matrix():
    A = np.array([[0.6, 1.0, 0.0], [0.0, 0.6, 0.0], [0.0, 0.0, -0.2]])  # Jordan block
    B = np.array([[0.0, 1.0], [1.0, 0.5], [1.0, 0.0]])
    C = np.array([[1.0, 0.0, 1.0], [0.5, 1.0, 0.0]])
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the fallback succeeds: no warning
        a, Bm, Cm, real, cond, shift = modal_form(A, B, C, cond_max=1e8)
    assert 0.0 < shift <= 1e-4 * np.linalg.norm(A, 2) and cond <= 1e8
    ssm = DiagonalSSM.from_discrete(a, Bm, Cm, real_modes=real, dtype=torch.float64)
    G, Gm = lti.DiscreteLTI(A, B, C), ssm.as_lti()
    err = lti.hinf_norm(G - Gm).value
    # the change is small, and the certified bound reduce() adds covers it
    E = lti.DiscreteLTI(np.block([[A, np.zeros((3, 3))], [np.zeros((3, 3)), Gm.A]]),
                        np.vstack([B, Gm.B]), np.hstack([C, -Gm.C]))
    assert err <= 2 * lti.hankel_singular_values(E).sum()
    assert err <= 1e-3 * lti.hinf_norm(G).value


# --------------------------------------------------------------------------- report


def test_report_table_json_and_plot(base, tmp_path):
    model = _adapted(base, "real")
    report = reduce(model, rel_tol=0.2, measure=True)
    text = str(report)
    assert report.to_markdown() == text
    for x in report.layers:
        assert x.name in text and f"{x.params_before:,d} -> {x.params_after:,d}" in text
    assert report.params_after < report.params_before
    path = report.to_json(tmp_path / "report.json")
    again = ReductionReport.from_json(path)
    assert again == report
    assert json.loads(path.read_text())["rel_tol"] == 0.2
    pytest.importorskip("matplotlib", reason="extra 'plot' not installed")
    fig = report.plot(tmp_path / "hsv.png")
    assert (tmp_path / "hsv.png").stat().st_size > 1000
    ax = fig.axes[0]
    assert ax.get_yscale() == "log" and len(ax.lines) >= 2 * len(report.layers) + 1


# --------------------------------------------------------------------------- SmolLM2-sized


class _Block(nn.Module):
    def __init__(self, width):
        super().__init__()
        self.mlp = nn.Sequential(nn.Linear(width, 4), nn.GELU(), nn.Linear(4, width))

    def forward(self, x):
        return x + self.mlp(x)


class _Deep(nn.Module):
    def __init__(self, width, depth):
        super().__init__()
        self.h = nn.ModuleList([_Block(width) for _ in range(depth)])

    def forward(self, x):
        for block in self.h:
            x = block(x)
        return x


def test_thirty_layer_smollm2_sized_reduction():
    torch.manual_seed(0)
    model = inject(_Deep(576, 30), HRMConfig(d_state=32, gate_init=0.1))
    report = reduce(model, rel_tol=0.1)
    print(f"30 layers, H=576, N=32: lti time {report.lti_seconds:.3f} s wall, "
          f"{report.lti_cpu_seconds:.3f} s CPU (reduce total {report.seconds:.3f} s), "
          f"params {report.params_before:,d} -> "
          f"{report.params_after:,d}")
    assert len(report.layers) == 30
    for x in report.layers:
        assert x.order_before == 32 and 1 <= x.order_after < 32
        s = np.asarray(x.hsv)
        assert s[x.order_after - 1] >= 0.1 * s[0] > s[x.order_after]  # the paper's rule
        assert 0 < x.lower_bound <= x.upper_bound
    x = torch.randn(1, 8, 576)
    with torch.no_grad():
        assert torch.isfinite(model(x)).all()
