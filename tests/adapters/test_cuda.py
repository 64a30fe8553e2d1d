"""The scan and module checks on a CUDA device (marked ``gpu``; skipped without CUDA)."""

from __future__ import annotations

import math

import pytest
import torch

from adapters import DiagonalSSM, HRMAdapter
from adapters.exceptions import AdapterDtypeError, AdapterShapeError, AdapterStabilityError
from adapters.scan import chunked_scan, fft_scan, recurrent_scan

pytestmark = pytest.mark.gpu

DEV = "cuda"
PARALLEL = {"fft": fft_scan, "chunked": chunked_scan}


def poles(kind, dtype):
    mags = torch.tensor([0.0, 0.3, 0.9, 0.99, 0.999, 0.999, 0.5, 0.97], dtype=torch.float64)
    if kind == "real":
        a = mags * torch.tensor([1, -1, 1, -1, 1, -1, 1, 1.0], dtype=torch.float64)
    else:
        a = torch.polar(mags, torch.linspace(0.0, math.pi, 8, dtype=torch.float64))
    return a.to(dtype)


def inputs(kind, B, L, N, dtype, seed=0):
    g = torch.Generator().manual_seed(seed)
    u = torch.randn(B, L, N, generator=g, dtype=torch.float64)
    if kind == "complex":
        u = torch.complex(u, torch.randn(B, L, N, generator=g, dtype=torch.float64))
    u[-1] = 1.0
    return u.to(dtype), (3 * u[:, 0]).to(dtype)


def cpu_reference(u, a, s0):
    wide = torch.complex128 if (u.is_complex() or a.is_complex()) else torch.float64
    return recurrent_scan(u.cpu().to(wide), a.cpu().to(wide), s0.cpu().to(wide))


def rel_err(s, ref):
    return float((s.cpu().to(ref.dtype) - ref).abs().max() / ref.abs().max())


@pytest.mark.parametrize("name", sorted(PARALLEL))
@pytest.mark.parametrize("kind", ["real", "complex"])
@pytest.mark.parametrize("precision", ["single", "double"])
@pytest.mark.parametrize("L", [1, 65, 4096, 16384])
def test_cuda_scans_match_reference(name, kind, precision, L):
    real_t = torch.float32 if precision == "single" else torch.float64
    cplx_t = torch.complex64 if precision == "single" else torch.complex128
    dtype = real_t if kind == "real" else cplx_t
    a = poles(kind, dtype)
    u, s0 = inputs(kind, 3, L, 8, dtype)
    s_ref, last_ref = cpu_reference(u, a, s0)
    s, last = PARALLEL[name](u.to(DEV), a.to(DEV), s0.to(DEV))
    assert s.device.type == "cuda" and s.dtype == dtype
    tol = 1e-5 if precision == "single" else 1e-12
    assert rel_err(s, s_ref) <= tol and rel_err(last, last_ref) <= tol


@pytest.mark.parametrize("name", sorted(PARALLEL))
@pytest.mark.parametrize("kind", ["real", "complex"])
def test_cuda_gradcheck(name, kind):
    dtype = torch.float64 if kind == "real" else torch.complex128
    a = poles(kind, dtype)[[0, 1, 4, 5]].to(DEV).requires_grad_(True)
    u, s0 = inputs(kind, 2, 20, 4, dtype)
    u = u.to(DEV).requires_grad_(True)
    s0 = s0.to(DEV).requires_grad_(True)
    fn = PARALLEL[name]
    assert torch.autograd.gradcheck(
        lambda u, a, s0: fn(u, a, s0) if name == "fft" else fn(u, a, s0, chunk=7), (u, a, s0)
    )


@pytest.mark.parametrize("name", sorted(PARALLEL))
def test_cuda_pieces_equal_one_scan(name):
    fn = PARALLEL[name]
    a = poles("complex", torch.complex128).to(DEV)
    u, s0 = inputs("complex", 2, 700, 8, torch.complex128)
    u, s0 = u.to(DEV), s0.to(DEV)
    s_full, last_full = fn(u, a, s0)
    state, parts = s0, []
    for lo, hi in ((0, 1), (1, 130), (130, 700)):
        s, state = fn(u[:, lo:hi], a, state)
        parts.append(s)
    assert float((torch.cat(parts, 1) - s_full).abs().max() / s_full.abs().max()) <= 1e-12
    assert float((state - last_full).abs().max() / last_full.abs().max()) <= 1e-12


@pytest.mark.parametrize("name", sorted(PARALLEL))
@pytest.mark.parametrize("low", [torch.bfloat16, torch.float16])
def test_cuda_autocast_computes_in_float32(name, low):
    fn = PARALLEL[name]
    a = poles("real", torch.float32).to(DEV)
    u, s0 = inputs("real", 2, 300, 8, torch.float32)
    u, s0 = u.to(DEV), s0.to(DEV)
    u_low = u.to(low)
    with torch.autocast("cuda", dtype=low):
        s, _ = fn(u_low, a, s0)
    assert s.dtype == low
    expect, _ = fn(u_low.float(), a, s0)
    assert torch.equal(s, expect.to(low))
    assert rel_err(s, cpu_reference(u, a, s0)[0]) <= 2e-2


@pytest.mark.parametrize("name", sorted(PARALLEL))
def test_cuda_no_nan_near_unit_modulus(name):
    top = torch.nextafter(torch.tensor(1.0), torch.tensor(0.0))
    a = torch.stack([top, -top, torch.tensor(0.0)]).to(DEV)
    s, last = PARALLEL[name](torch.ones(2, 4096, 3, device=DEV), a)
    assert torch.isfinite(s).all() and torch.isfinite(last).all()


def test_cuda_typed_errors():
    u = torch.randn(2, 10, 3, device=DEV)
    with pytest.raises(AdapterStabilityError):
        fft_scan(u, torch.tensor([0.5, 1.5, 0.0], device=DEV))
    with pytest.raises(AdapterShapeError):
        chunked_scan(u, torch.tensor([0.5, 0.1], device=DEV))
    with pytest.raises(AdapterShapeError):
        fft_scan(u[0], torch.tensor([0.5, 0.1, 0.0], device=DEV))
    with pytest.raises(AdapterDtypeError):
        chunked_scan(u.int(), torch.tensor([0.5, 0.1, 0.0], device=DEV))


@pytest.mark.parametrize("mode", ["real", "complex"])
@pytest.mark.parametrize("scan", ["fft", "chunked"])
def test_cuda_module_matches_cpu(mode, scan):
    torch.manual_seed(0)
    ssm = DiagonalSSM(32, 8, mode=mode, scan=scan, dtype=torch.float64)
    u = torch.randn(2, 500, 32, dtype=torch.float64)
    with torch.no_grad():
        y_cpu, s_cpu = ssm(u, return_state=True)
        ssm_gpu = ssm.to(DEV)
        y, s = ssm_gpu(u.to(DEV), return_state=True)
    assert float((y.cpu() - y_cpu).abs().max()) <= 1e-12 * float(y_cpu.abs().max())
    assert float((s.cpu() - s_cpu).abs().max()) <= 1e-12 * float(s_cpu.abs().max())
    state, ys = None, []
    with torch.no_grad():
        for t in range(50):
            y_t, state = ssm_gpu.step(u[:, t].to(DEV), state)
            ys.append(y_t)
    assert float((torch.stack(ys, 1) - y[:, :50]).abs().max()) <= 1e-12


def test_cuda_module_autocast_and_gradients():
    torch.manual_seed(0)
    adapter = HRMAdapter(64, 16, gate_init=0.5).to(DEV)
    u = torch.randn(2, 1024, 64, device=DEV, requires_grad=True)
    y32 = adapter(u)
    with torch.autocast("cuda", dtype=torch.bfloat16):
        y16 = adapter(u)
    assert y16.dtype == torch.bfloat16
    err = float((y16.float() - y32).detach().abs().max())
    assert err <= 3e-2 * float(y32.detach().abs().max())
    y16.float().pow(2).sum().backward()
    for name, p in adapter.named_parameters():
        assert p.grad is not None and torch.isfinite(p.grad).all(), name
