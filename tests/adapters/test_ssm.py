"""DiagonalSSM and HRMAdapter: forward vs reference, decoding, export/import, stability."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from adapters import DiagonalSSM, HRMAdapter
from adapters.exceptions import (
    AdapterConfigError,
    AdapterDtypeError,
    AdapterShapeError,
    AdapterStabilityError,
)
from adapters.scan import recurrent_scan

F64 = torch.float64


def make(mode, H=12, N=6, dtype=F64, seed=0, **kw):
    torch.manual_seed(seed)
    if mode == "mixed":
        rng = np.random.default_rng(seed)
        a = np.concatenate([rng.uniform(-0.95, 0.99, 3), 0.9 * np.exp(1j * rng.uniform(0, 3, 3))])
        B = (
            rng.standard_normal((6, H))
            + 1j * rng.standard_normal((6, H)) * (np.arange(6) >= 3)[:, None]
        )
        C = rng.standard_normal((H, 6)) + 1j * rng.standard_normal((H, 6)) * (np.arange(6) >= 3)
        return DiagonalSSM.from_discrete(a, B, C, dtype=dtype, **kw)
    return DiagonalSSM(H, N, mode=mode, dtype=dtype, **kw)


def reference(ssm, u, state=None):
    """y from discrete() and the step-by-step loop (the module's documented convention)."""
    a, B, C = (t.detach() for t in ssm.discrete())
    v = u.to(B.dtype) @ B.T  # (B, L, N)
    s, last = recurrent_scan(v, a, state)
    w = torch.ones(ssm.d_state, dtype=F64)
    w[ssm.n_real :] = 2.0  # y = C_r s_r + 2 Re(C_c s_c)
    y = ((s * w.to(s.dtype)) @ C.T.to(s.dtype)).real
    return y, last


MODES = ["real", "complex", "mixed"]


def maxabs(t):
    return float(t.detach().abs().max())


@pytest.mark.parametrize("scan", ["auto", "fft", "chunked"])
@pytest.mark.parametrize("mode", MODES)
@torch.no_grad()
def test_forward_matches_reference(mode, scan):
    ssm = make(mode, scan=scan)
    u = torch.randn(3, 150, 12, dtype=F64)
    state0 = torch.randn(3, ssm.d_state, dtype=ssm.state_dtype)
    if state0.is_complex():
        state0[:, : ssm.n_real].imag.zero_()  # real modes have real states
    y, state = ssm(u, state0, return_state=True)
    y_ref, last_ref = reference(ssm, u, state0)
    assert y.shape == (3, 150, 12) and y.dtype == F64
    assert state.shape == (3, ssm.d_state) and state.dtype == ssm.state_dtype
    assert maxabs(y - y_ref) <= 1e-12 * maxabs(y_ref)
    assert maxabs(state - last_ref) <= 1e-12 * maxabs(last_ref)


@pytest.mark.parametrize("n_real", [1, 2])
def test_mixed_module_one_projection_each_way(n_real, monkeypatch):
    """All modes share one input and one output matmul (odd and even numbers of real modes)."""
    rng = np.random.default_rng(n_real)
    a = np.concatenate([rng.uniform(-0.9, 0.9, n_real), 0.95 * np.exp(1j * rng.uniform(0, 3, 2))])
    is_c = np.arange(n_real + 2) >= n_real
    B = (
        rng.standard_normal((n_real + 2, 12))
        + 1j * rng.standard_normal((n_real + 2, 12)) * is_c[:, None]
    )
    C = rng.standard_normal((12, n_real + 2)) + 1j * rng.standard_normal((12, n_real + 2)) * is_c
    ssm = DiagonalSSM.from_discrete(a, B, C, dtype=F64)
    assert (ssm.n_real, ssm.n_complex) == (n_real, 2)
    u = torch.randn(2, 33, 12, dtype=F64)
    state0 = ssm.initial_state(2) + torch.randn(2, n_real + 2, dtype=torch.complex128)
    state0[:, :n_real].imag.zero_()
    calls = []
    linear = torch.nn.functional.linear
    monkeypatch.setattr(
        torch.nn.functional, "linear", lambda *args: calls.append(1) or linear(*args)
    )
    with torch.no_grad():
        y, state = ssm(u, state0, return_state=True)
        y_t, s_t = ssm.step(u[:, 0], state0)
    assert len(calls) == 4  # forward: in + out; step: in + out
    y_ref, last_ref = reference(ssm, u, state0)
    assert maxabs(y - y_ref) <= 1e-12 * maxabs(y_ref)
    assert maxabs(state - last_ref) <= 1e-12 * maxabs(last_ref)
    assert maxabs(y_t - y[:, 0]) <= 1e-12 * maxabs(y_ref)
    assert torch.equal(s_t[:, :n_real].imag, torch.zeros(2, n_real, dtype=F64))


@pytest.mark.parametrize("mode", MODES)
def test_step_decoding_equals_forward(mode):
    ssm = make(mode)
    u = torch.randn(2, 40, 12, dtype=F64)
    y, state = ssm(u, return_state=True)
    s, ys = None, []
    for t in range(40):
        y_t, s = ssm.step(u[:, t], s)
        ys.append(y_t)
    assert maxabs(torch.stack(ys, 1) - y) <= 1e-12
    assert maxabs(s - state) <= 1e-12
    # prefill then decode (the generation pattern)
    y_pre, s_pre = ssm(u[:, :25], return_state=True)
    for t in range(25, 40):
        y_t, s_pre = ssm.step(u[:, t], s_pre)
        assert maxabs(y_t - y[:, t]) <= 1e-12


@pytest.mark.parametrize("mode", MODES)
def test_pieces_equal_full_sequence(mode):
    ssm = make(mode)
    u = torch.randn(2, 300, 12, dtype=F64)
    y, last = ssm(u, return_state=True)
    y1, s = ssm(u[:, :1], return_state=True)
    y2, s = ssm(u[:, 1:177], s, return_state=True)
    y3, s = ssm(u[:, 177:], s, return_state=True)
    assert maxabs(torch.cat([y1, y2, y3], 1) - y) <= 1e-12
    assert maxabs(s - last) <= 1e-12


@pytest.mark.parametrize("mode", ["real", "complex"])
def test_length_zero_and_one(mode):
    ssm = make(mode, dtype=torch.float32)
    state = ssm.initial_state(2)
    y, s = ssm(torch.randn(2, 0, 12), state, return_state=True)
    assert y.shape == (2, 0, 12) and torch.equal(s, state)
    y, s = ssm(torch.randn(2, 1, 12), return_state=True)
    assert y.shape == (2, 1, 12) and torch.isfinite(y).all() and torch.isfinite(s).all()


@pytest.mark.parametrize("mode", ["real", "complex"])
def test_autocast_bf16(mode):
    """Under CPU bf16 autocast: runs, bf16 output, float32 state, close to the float32 run."""
    ssm = make(mode, H=64, N=16, dtype=torch.float32)
    u = torch.randn(2, 512, 64)
    y32, s32 = ssm(u, return_state=True)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        y16, s16 = ssm(u, return_state=True)
    assert y16.dtype == torch.bfloat16 and s16.dtype == ssm.state_dtype
    # bf16 projections (8-bit mantissa): stated tolerance 3e-2 of max |y|
    scale = maxabs(y32)
    assert maxabs(y16.float() - y32) <= 3e-2 * scale
    assert maxabs(s16 - s32) <= 3e-2 * maxabs(s32)
    assert torch.isfinite(y16.float()).all()


def test_float32_module_matches_float64_reference():
    ssm = make("real", H=32, N=8, dtype=torch.float32)
    ssm64 = make("real", H=32, N=8, dtype=F64)
    ssm64.load_state_dict({k: v.double() for k, v in ssm.state_dict().items()})
    u = torch.randn(2, 4096, 32)
    y32 = ssm(u)
    y64 = ssm64(u.double())
    assert maxabs(y32.double() - y64) <= 1e-5 * maxabs(y64)


def test_s4d_real_initialisation():
    H, N = 256, 32
    ssm = DiagonalSSM(H, N, dt_min=1e-3, dt_max=1e-1)
    assert torch.allclose(ssm.log_A, torch.log(torch.arange(1.0, N + 1)))
    dt = ssm.log_dt.exp()
    assert bool((dt >= 1e-3 * (1 - 1e-6)).all() and (dt <= 1e-1 * (1 + 1e-6)).all())
    assert abs(float(ssm.B.detach().std()) * math.sqrt(H) - 1) < 0.05  # B ~ N(0, 1/H)
    assert abs(float(ssm.C.detach().std()) * math.sqrt(N) - 1) < 0.05  # C ~ N(0, 1/N)
    a, B, C = ssm.double().discrete()
    assert bool((a > 0).all() and (a < 1).all())
    # ZOH: B_bar = (a_bar - 1) / a_c * B, a_c = -exp(log_A)
    a_c = -ssm.log_A.exp()
    assert torch.allclose(B, ((a - 1) / a_c)[:, None] * ssm.B, rtol=1e-10, atol=0)
    assert ssm.num_parameters == 2 * N * H + 2 * N


def test_s4d_lin_complex_initialisation():
    ssm = DiagonalSSM(16, 8, mode="complex", dtype=F64)
    a, _, _ = ssm.discrete()
    dt = ssm.log_dt_cplx.exp()
    expect = torch.exp(
        dt
        * torch.complex(torch.full((8,), -0.5, dtype=F64), math.pi * torch.arange(8.0, dtype=F64))
    )
    assert torch.allclose(a, expect, rtol=1e-14, atol=0)
    assert ssm.order == 16 and ssm.mode == "complex"
    assert ssm.num_parameters == 4 * 8 * 16 + 3 * 8


@pytest.mark.parametrize("mode", ["real", "complex"])
def test_stable_after_loading_arbitrary_finite_values(mode):
    ssm = make(mode, dtype=torch.float32)
    g = torch.Generator().manual_seed(3)
    for scale in (1e-30, 1.0, 1e4, 1e30):
        sd = {
            k: (torch.randn(v.shape, generator=g) * scale).to(v.dtype)
            for k, v in ssm.state_dict().items()
        }
        ssm.load_state_dict(sd)
        a, B, C = ssm.discrete()
        assert maxabs(a) < 1.0
        assert torch.isfinite(torch.view_as_real(B) if B.is_complex() else B).all()
        y = ssm(torch.randn(2, 50, 12))
        assert torch.isfinite(y).all() or scale == 1e30  # huge B, C may overflow float32


@pytest.mark.parametrize("mode", MODES)
def test_gradients_reach_every_parameter(mode):
    ssm = make(mode, dtype=F64)
    u = torch.randn(2, 80, 12, dtype=F64, requires_grad=True)
    ssm(u).pow(2).sum().backward()
    for name, p in ssm.named_parameters():
        assert p.grad is not None and torch.isfinite(p.grad).all(), name
        assert maxabs(p.grad) > 0, name
    assert u.grad is not None


def test_gradcheck_module_real_and_complex():
    for mode in ("real", "complex"):
        ssm = make(mode, H=3, N=2, dtype=F64)
        names = [n for n, _ in ssm.named_parameters()]

        def f(u, *ps, ssm=ssm, names=names):
            return torch.func.functional_call(ssm, dict(zip(names, ps, strict=True)), (u,))

        u = torch.randn(1, 9, 3, dtype=F64, requires_grad=True)
        params = [p.detach().clone().requires_grad_(True) for p in ssm.parameters()]
        assert torch.autograd.gradcheck(f, (u, *params))


# ----------------------------------------------------------------------------- export / import


def test_from_discrete_round_trip_mixed():
    rng = np.random.default_rng(1)
    a = np.array([0.9, -0.3, 0.5 + 0.4j, 0.0, 0.2j, 0.999, -0.8 - 0.1j])
    is_c = np.iscomplex(a)
    B = rng.standard_normal((7, 5)) + 1j * rng.standard_normal((7, 5)) * is_c[:, None]
    C = rng.standard_normal((5, 7)) + 1j * rng.standard_normal((5, 7)) * is_c
    order = np.concatenate([np.flatnonzero(~is_c), np.flatnonzero(is_c)])  # real modes first
    for dtype, tol in ((F64, 1e-13), (torch.float32, 1e-6)):
        ssm = DiagonalSSM.from_discrete(a, B, C, dtype=dtype)
        assert ssm.mode == "mixed" and (ssm.n_real, ssm.n_complex) == (4, 3)
        a2, B2, C2 = (t.detach().numpy() for t in ssm.discrete())
        assert np.abs(a2 - a[order]).max() <= tol
        assert np.abs(B2 - B[order]).max() <= tol * np.abs(B).max()
        assert np.abs(C2 - C[:, order]).max() <= tol * np.abs(C).max()
        assert all(isinstance(p, torch.nn.Parameter) and p.requires_grad for p in ssm.parameters())


@pytest.mark.parametrize("mode", ["real", "complex"])
def test_from_discrete_reproduces_module(mode):
    ssm = make(mode)
    a, B, C = ssm.discrete()
    real_modes = np.zeros(ssm.d_state, bool) if mode == "complex" else None
    twin = DiagonalSSM.from_discrete(a, B, C, real_modes=real_modes, dtype=F64)
    u = torch.randn(2, 100, 12, dtype=F64)
    assert maxabs(twin(u) - ssm(u)) <= 1e-12 * maxabs(ssm(u))
    assert twin.mode == mode


def test_from_discrete_torch_inputs_and_dt():
    a = torch.tensor([0.5, 0.7 + 0.2j])
    B = torch.tensor([[1.0, 0.0], [1.0 + 1.0j, 2.0]])
    C = torch.tensor([[1.0, 2.0 - 1.0j], [0.0, 1.0]])
    for dt in (None, 1e-4, 0.1, [0.01, 0.05]):
        ssm = DiagonalSSM.from_discrete(a, B, C, dt=dt, dtype=F64)
        a2, B2, _ = ssm.discrete()
        assert torch.allclose(a2, a.to(a2.dtype), atol=1e-7)
        assert torch.allclose(B2, B.to(B2.dtype), atol=1e-6)


def test_from_discrete_errors():
    B, C = np.ones((2, 3)), np.ones((3, 2))
    with pytest.raises(AdapterStabilityError, match="1.01"):
        DiagonalSSM.from_discrete(np.array([0.5, -1.01]), B, C)
    with pytest.raises(AdapterStabilityError):
        DiagonalSSM.from_discrete(np.array([0.5, np.nan]), B, C)
    with pytest.raises(AdapterShapeError):
        DiagonalSSM.from_discrete(np.array([0.5, 0.1]), np.ones((3, 3)), C)
    with pytest.raises(AdapterShapeError):
        DiagonalSSM.from_discrete(np.array([0.5, 0.1]), B, np.ones((2, 2)))
    with pytest.raises(AdapterConfigError, match="real_modes"):
        DiagonalSSM.from_discrete(np.array([0.5, 0.1j]), B, C, real_modes=[True, True])
    with pytest.raises(AdapterConfigError, match="dt"):
        DiagonalSSM.from_discrete(np.array([0.5, 0.1]), B, C, dt=1.0)
    with pytest.warns(UserWarning, match="clamped"):
        ssm = DiagonalSSM.from_discrete(np.array([1 - 1e-9, 0.1]), B, C, dtype=F64)
    assert maxabs(ssm.discrete()[0]) < 1.0


@pytest.mark.parametrize("mode", MODES)
def test_as_lti_is_the_module_shifted_by_one_step(mode):
    ssm = make(mode)
    G = ssm.as_lti()
    assert G.A.shape == (ssm.order, ssm.order) and G.A.dtype == np.float64
    assert G.B.shape == (ssm.order, 12) and G.C.shape == (12, ssm.order)
    assert G.is_stable()
    u = torch.randn(2, 60, 12, dtype=F64)
    y = ssm(u).detach().numpy()
    for b in range(2):
        y_lti = G.simulate(np.vstack([u[b].numpy(), np.zeros((1, 12))]))
        assert np.abs(y_lti[1:] - y[b]).max() <= 1e-12 * np.abs(y).max()
    # poles: the module's a (and conjugates for complex modes)
    a = ssm.discrete()[0].detach().numpy()
    expect = np.sort_complex(
        np.concatenate([a[: ssm.n_real], a[ssm.n_real :], a[ssm.n_real :].conj()])
    )
    assert np.abs(np.sort_complex(np.linalg.eigvals(G.A).astype(complex)) - expect).max() <= 1e-10


def test_as_lti_complex_mode_with_real_pole():
    """S4D-Lin mode 0 has A_im = 0: a complex mode with a real pole exports as two real modes."""
    ssm = DiagonalSSM(4, 3, mode="complex", dtype=F64)
    assert float(ssm.discrete()[0][0].imag.detach()) == 0.0
    G = ssm.as_lti()
    u = torch.randn(1, 30, 4, dtype=F64)
    y_lti = G.simulate(np.vstack([u[0].numpy(), np.zeros((1, 4))]))
    assert np.abs(y_lti[1:] - ssm(u)[0].detach().numpy()).max() <= 1e-12


# ----------------------------------------------------------------------------- validation


def test_config_errors():
    with pytest.raises(AdapterConfigError, match="mode"):
        DiagonalSSM(8, 4, mode="quaternion")
    with pytest.raises(AdapterConfigError, match="scan"):
        DiagonalSSM(8, 4, scan="loop")
    with pytest.raises(AdapterConfigError, match="dt_min"):
        DiagonalSSM(8, 4, dt_min=1e-6)
    with pytest.raises(AdapterConfigError, match="dt_min"):
        DiagonalSSM(8, 4, dt_min=0.05, dt_max=0.01)
    with pytest.raises(AdapterConfigError, match="d_state"):
        DiagonalSSM(8, 0)
    with pytest.raises(AdapterConfigError, match="d_model"):
        DiagonalSSM(8.0, 4)
    with pytest.raises(AdapterConfigError, match="init"):
        DiagonalSSM(8, 4, init="hippo")


def test_input_errors():
    ssm = DiagonalSSM(8, 4)
    with pytest.raises(AdapterShapeError, match="d_model = 8"):
        ssm(torch.randn(2, 5, 7))
    with pytest.raises(AdapterShapeError):
        ssm(torch.randn(5, 8))
    with pytest.raises(AdapterDtypeError):
        ssm(torch.ones(2, 5, 8, dtype=torch.int64))
    with pytest.raises(AdapterShapeError, match="state"):
        ssm(torch.randn(2, 5, 8), torch.zeros(2, 5))
    with pytest.raises(AdapterShapeError):
        ssm.step(torch.randn(2, 5, 8), None)
    with pytest.raises(AdapterShapeError, match="state"):
        ssm.step(torch.randn(2, 8), torch.zeros(3, 4))


# ----------------------------------------------------------------------------- HRMAdapter


def test_hrm_adapter_is_exact_noop_at_init_and_trainable():
    adapter = HRMAdapter(16, 4)
    u = torch.randn(2, 30, 16)
    y = adapter(u)
    assert torch.equal(y, torch.zeros_like(y))
    y.pow(2).sum().backward()  # zero loss gradient through y = 0 is 0 ...
    loss = (adapter(u) * torch.randn(2, 30, 16)).sum()  # ... a linear loss reaches the gate
    adapter.zero_grad()
    loss.backward()
    assert float(adapter.gate.grad.abs()) > 0
    assert adapter.num_parameters == 2 * 4 * 16 + 2 * 4 + 1
    assert adapter.reads == "mlp_input"


def test_hrm_adapter_gate_scales_and_step_mirrors():
    ssm = make("mixed", dtype=F64)
    adapter = HRMAdapter(12, gate_init=0.25, ssm=ssm, reads="mlp_output")
    u = torch.randn(2, 20, 12, dtype=F64)
    y, state = adapter(u, return_state=True)
    assert torch.allclose(y, 0.25 * ssm(u), rtol=0, atol=1e-14)
    s, ys = None, []
    for t in range(20):
        y_t, s = adapter.step(u[:, t], s)
        ys.append(y_t)
    assert maxabs(torch.stack(ys, 1) - y) <= 1e-12
    assert maxabs(s - state) <= 1e-12
    assert adapter.reads == "mlp_output" and adapter.d_state == 6


def test_hrm_adapter_errors():
    with pytest.raises(AdapterConfigError, match="reads"):
        HRMAdapter(8, 4, reads="attention")
    with pytest.raises(AdapterConfigError, match="not both"):
        HRMAdapter(8, ssm=DiagonalSSM(8, 4), mode="complex")
    with pytest.raises(AdapterShapeError, match="d_model"):
        HRMAdapter(16, ssm=DiagonalSSM(8, 4))
    with pytest.raises(AdapterConfigError, match="gate_init"):
        HRMAdapter(8, 4, gate_init=float("nan"))


# --------------------------------------------------------------------------- one trajectory


@pytest.mark.parametrize("mode", MODES)
@torch.no_grad()
def test_trajectory_is_the_reference_recursion_and_forward_reads_it_out(mode):
    ssm = make(mode)
    u = torch.randn(2, 40, 12, dtype=F64)
    s0 = ssm.initial_state(2) + 0.3
    a, B, _ = ssm.discrete()
    s_ref, _ = recurrent_scan(u.to(B.dtype) @ B.T, a, s0)  # s_t = a s_{t-1} + B u_t
    s = ssm.trajectory(u, s0)
    assert s.shape == (2, 40, ssm.d_state) and s.dtype == ssm.state_dtype
    assert maxabs(s - s_ref) <= 1e-12 * maxabs(s_ref)
    y, last = ssm(u, s0, return_state=True)
    assert torch.equal(s[:, -1], last)
    assert maxabs(ssm.readout(s) - y) <= 1e-13 * maxabs(y)


def _real_stacked(ssm):
    """The module's system on z = [Re s_real, Re s_cplx, Im s_cplx] (float64 numpy)."""
    a, B, C = (t.detach().resolve_conj().numpy().astype(np.complex128) for t in ssm.discrete())
    nr = ssm.n_real
    ac = a[nr:]
    A_z = np.diag(np.concatenate([a[:nr].real, ac.real, ac.real]))
    nc = ac.shape[0]
    A_z[nr:nr + nc, nr + nc:] = -np.diag(ac.imag)
    A_z[nr + nc:, nr:nr + nc] = np.diag(ac.imag)
    B_z = np.vstack([B[:nr].real, B[nr:].real, B[nr:].imag])
    C_z = np.hstack([C[:, :nr].real, 2 * C[:, nr:].real, -2 * C[:, nr:].imag])
    return A_z, B_z, C_z


@pytest.mark.parametrize("mode", [*MODES, "flat"])
def test_lti_states_are_the_coordinates_of_as_lti(mode):
    """M A_z = A M, M B_z = B, C_z = C M for the map of ssm_lti.lti_state_map (one owner)."""
    from adapters.ssm_lti import lti_state_map

    if mode == "flat":  # complex modes whose pole is real export as two real modes
        ssm = make("complex", N=4)
        with torch.no_grad():
            ssm.A_im[1:3] = 0.0
    else:
        ssm = make(mode)
    G = ssm.as_lti()
    A_z, B_z, C_z = _real_stacked(ssm)
    a_c = ssm.discrete()[0][ssm.n_real:].detach().numpy() if ssm.n_complex else []
    index, scale = lti_state_map(ssm.n_real, a_c)
    M = np.zeros((ssm.order, ssm.order))
    M[np.arange(ssm.order), index] = scale
    assert np.abs(G.A @ M - M @ A_z).max() <= 1e-12
    assert np.abs(M @ B_z - G.B).max() <= 1e-12 * np.abs(G.B).max()
    assert np.abs(C_z - G.C @ M).max() <= 1e-12 * np.abs(G.C).max()
    with torch.no_grad():  # and the module's trajectory, mapped, is the exported state sequence
        u = torch.randn(1, 30, 12, dtype=F64)
        x = ssm.lti_states(ssm.trajectory(u))[0].numpy()  # (L, n)
    step = x[:-1] @ G.A.T + u[0, 1:].numpy() @ G.B.T
    assert np.abs(x[1:] - step).max() <= 1e-12 * np.abs(x).max()
