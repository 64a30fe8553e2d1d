"""Parallel diagonal scans against the step-by-step reference (adapters.scan).

Error metric: ``max |s - s_ref| / max |s_ref|`` with the reference computed in float64 by the
recurrent loop *from the same (rounded) inputs*, so only the algorithm's rounding is measured.
"""

from __future__ import annotations

import functools
import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from adapters.exceptions import (
    AdapterConfigError,
    AdapterDtypeError,
    AdapterShapeError,
    AdapterStabilityError,
)
from adapters.scan import (
    _chunked_loop_core,
    _chunked_matmul_core,
    _doubling_scan,
    _fast_len,
    _powers_at,
    auto_chunk,
    chunked_scan,
    fft_scan,
    recurrent_scan,
    run_core,
)

SCANS = {
    "fft": fft_scan,
    "chunked": chunked_scan,
    "chunked7": lambda u, a, s0=None: chunked_scan(u, a, s0, chunk=7),
    # the accelerator (matmul) form of the chunked scan, exercised on CPU too
    "matmul7": lambda u, a, s0=None: run_core(u, a, s0,
                                              functools.partial(_chunked_matmul_core, T=7)),
}
WIDE = {torch.float32: torch.float64, torch.complex64: torch.complex128}


def poles(kind, dtype=None):
    """Diagonals with |a| up to 0.999, including 0 and values of both signs."""
    if dtype is None:
        dtype = torch.float64 if kind == "real" else torch.complex128
    mags = torch.tensor([0.0, 0.3, 0.9, 0.99, 0.999, 0.999, 0.5, 0.97], dtype=torch.float64)
    if kind == "real":
        return (mags * torch.tensor([1, -1, 1, -1, 1, -1, 1, 1.0], dtype=torch.float64)).to(dtype)
    angles = torch.linspace(0.0, math.pi, 8, dtype=torch.float64)
    return torch.polar(mags, angles).to(dtype)


def inputs(kind, B, L, N, dtype, seed=0):
    g = torch.Generator().manual_seed(seed)
    if kind == "real":
        u = torch.randn(B, L, N, generator=g, dtype=torch.float64)
    else:
        u = torch.complex(
            torch.randn(B, L, N, generator=g, dtype=torch.float64),
            torch.randn(B, L, N, generator=g, dtype=torch.float64),
        )
    u[-1] = 1.0  # last batch entry: constant input, the largest |s| for |a| -> 1
    s0 = u[:, 0].clone() * 3.0
    return u.to(dtype), s0.to(dtype)


def rel_err(s, ref):
    return float((s.to(ref.dtype) - ref).abs().max() / ref.abs().max())


def reference(u, a, s0):
    wide = torch.complex128 if (u.is_complex() or a.is_complex()) else torch.float64
    return recurrent_scan(u.to(wide), a.to(wide), s0.to(wide))


@pytest.mark.parametrize("name", sorted(SCANS))
@pytest.mark.parametrize("kind", ["real", "complex"])
@pytest.mark.parametrize("L", [1, 2, 63, 64, 65, 1000, 4096])
def test_matches_recurrent_float64(name, kind, L):
    a = poles(kind)
    u, s0 = inputs(kind, 3, L, 8, a.dtype)
    s_ref, last_ref = reference(u, a, s0)
    s, last = SCANS[name](u, a, s0)
    assert s.shape == (3, L, 8) and last.shape == (3, 8) and s.dtype == u.dtype
    assert rel_err(s, s_ref) <= 1e-12
    assert rel_err(last, last_ref) <= 1e-12


@pytest.mark.parametrize("name", ["fft", "chunked"])
@pytest.mark.parametrize("kind", ["real", "complex"])
@pytest.mark.parametrize("L", [4096, pytest.param(16384, marks=pytest.mark.slow)])
def test_matches_recurrent_float32(name, kind, L):
    a = poles(kind, torch.float32 if kind == "real" else torch.complex64)
    u, s0 = inputs(kind, 3, L, 8, a.dtype)
    s_ref, last_ref = reference(u, a, s0)
    s, last = SCANS[name](u, a, s0)
    assert s.dtype == u.dtype
    assert rel_err(s, s_ref) <= 1e-5
    assert rel_err(last, last_ref) <= 1e-5


@pytest.mark.slow
@pytest.mark.parametrize("name", ["fft", "chunked"])
@pytest.mark.parametrize("kind", ["real", "complex"])
def test_matches_recurrent_float64_long(name, kind):
    a = poles(kind)
    u, s0 = inputs(kind, 2, 16384, 8, a.dtype)
    s_ref, _ = reference(u, a, s0)
    assert rel_err(SCANS[name](u, a, s0)[0], s_ref) <= 1e-12


def test_chunked_float32_per_mode_accuracy():
    """The chunked scan is accurate per mode, not only relative to the largest mode."""
    a = poles("real", torch.float32)
    u, s0 = inputs("real", 2, 4096, 8, torch.float32)
    s_ref, _ = reference(u, a, s0)
    s, _ = chunked_scan(u, a, s0)
    err = (s.double() - s_ref).abs().amax(dim=(0, 1)) / s_ref.abs().amax(dim=(0, 1))
    assert float(err.max()) <= 1e-5


@pytest.mark.parametrize("name", sorted(SCANS))
@pytest.mark.parametrize("kind", ["real", "complex"])
def test_gradcheck(name, kind):
    dtype = torch.float64 if kind == "real" else torch.complex128
    a = poles(kind)[[0, 1, 4, 5]].clone().requires_grad_(True)  # includes a = 0 and |a| = .999
    u, s0 = inputs(kind, 2, 20, 4, dtype)
    u.requires_grad_(True)
    s0.requires_grad_(True)
    fn = SCANS[name]
    assert torch.autograd.gradcheck(lambda u, a, s0: fn(u, a, s0), (u, a, s0))


@pytest.mark.parametrize("name", ["fft", "chunked"])
@pytest.mark.parametrize("kind", ["real", "complex"])
def test_gradients_match_recurrent_autograd(name, kind):
    """The adjoint-scan backward equals autograd through the loop, also for real u, complex a."""
    a = poles(kind).requires_grad_(True)
    u, s0 = inputs("real", 2, 500, 8, torch.float64)
    u.requires_grad_(True)
    s0.requires_grad_(True)
    g = torch.randn(2, 500, 8, dtype=a.dtype, generator=torch.Generator().manual_seed(1))
    grads = []
    for fn in (SCANS[name], recurrent_scan):
        s, last = fn(u, a, s0)
        loss = (s * g.conj()).real.sum() + last.abs().sum()
        grads.append(torch.autograd.grad(loss, (u, a, s0)))
    for got, want in zip(*grads, strict=True):
        assert got.dtype == want.dtype
        assert float((got - want).abs().max()) <= 1e-10 * max(1.0, float(want.abs().max()))


@pytest.mark.parametrize("name", ["fft", "chunked", "recurrent"])
@pytest.mark.parametrize("kind", ["real", "complex"])
def test_pieces_with_carried_state_equal_one_scan(name, kind):
    fn = recurrent_scan if name == "recurrent" else SCANS[name]
    a = poles(kind)
    u, s0 = inputs(kind, 2, 700, 8, a.dtype)
    s_full, last_full = fn(u, a, s0)
    state, parts = s0, []
    for lo, hi in ((0, 1), (1, 130), (130, 130), (130, 700)):
        s, state = fn(u[:, lo:hi], a, state)
        parts.append(s)
    assert rel_err(torch.cat(parts, dim=1), s_full) <= 1e-12
    assert rel_err(state, last_full) <= 1e-12


@pytest.mark.parametrize("name", ["fft", "chunked", "recurrent"])
def test_autocast_bf16_computes_in_float32(name):
    """Under CPU bf16 autocast the scan runs in float32 and rounds once to the input dtype."""
    fn = recurrent_scan if name == "recurrent" else SCANS[name]
    a = poles("real", torch.float32)
    u, s0 = inputs("real", 2, 300, 8, torch.float32)
    u16 = u.to(torch.bfloat16)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        s, last = fn(u16, a, s0)
        s32, _ = fn(u, a, s0)
    assert s.dtype == torch.bfloat16 and s32.dtype == torch.float32
    expect, _ = fn(u16.float(), a, s0)
    assert torch.equal(s, expect.to(torch.bfloat16))  # float32 math, one rounding
    # against the float32 run on unrounded inputs: bf16 input + output rounding, 2^-8 each
    assert rel_err(s, reference(u, a, s0)[0]) <= 2e-2
    assert rel_err(s32, reference(u, a, s0)[0]) <= 1e-5


@pytest.mark.parametrize("name", ["fft", "chunked", "recurrent"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_no_nan_near_unit_modulus(name, dtype):
    fn = recurrent_scan if name == "recurrent" else SCANS[name]
    top = torch.nextafter(torch.tensor(1.0, dtype=dtype), torch.tensor(0.0, dtype=dtype))
    a = torch.stack([top, -top, torch.tensor(0.0, dtype=dtype)])  # |a| = 1 - ulp
    u = torch.ones(2, 4096, 3, dtype=dtype)
    s, last = fn(u, a)
    assert torch.isfinite(s).all() and torch.isfinite(last).all()
    s_ref, _ = recurrent_scan(u.double(), a.double())
    # the float32 loop itself accumulates rounding like L * eps here (documented), the
    # parallel scans do not
    tol = 1e-12 if dtype == torch.float64 else (4096 * 6e-8 if name == "recurrent" else 1e-5)
    assert rel_err(s, s_ref) <= tol


@pytest.mark.parametrize("name", ["fft", "chunked", "recurrent"])
def test_length_one_and_zero(name):
    fn = recurrent_scan if name == "recurrent" else SCANS[name]
    a = torch.tensor([0.0, 0.5, -0.999])
    u = torch.randn(2, 1, 3)
    s0 = torch.randn(2, 3)
    s, last = fn(u, a, s0)
    assert torch.allclose(s[:, 0], a * s0 + u[:, 0]) and torch.equal(last, s[:, 0])
    s, last = fn(u[:, :0], a, s0)
    assert s.shape == (2, 0, 3) and torch.equal(last, s0)
    s, last = fn(u[:, :0], a)
    assert s.shape == (2, 0, 3) and torch.equal(last, torch.zeros(2, 3))


def test_inputs_not_modified():
    a = poles("complex")
    u, s0 = inputs("complex", 2, 100, 8, a.dtype)
    copies = [t.clone() for t in (u, a, s0)]
    for fn in (fft_scan, chunked_scan, recurrent_scan):
        fn(u, a, s0)
    for t, c in zip((u, a, s0), copies, strict=True):
        assert torch.equal(t, c)


def test_result_dtypes():
    u32, u64 = torch.randn(1, 5, 2), torch.randn(1, 5, 2, dtype=torch.float64)
    a_real, a_cplx = torch.tensor([0.5, -0.5]), torch.tensor([0.5j, 0.1 + 0j])
    assert fft_scan(u32, a_real)[0].dtype == torch.float32
    assert fft_scan(u64, a_real)[0].dtype == torch.float64
    assert chunked_scan(u32, a_cplx)[0].dtype == torch.complex64
    assert chunked_scan(u64, a_cplx)[0].dtype == torch.complex128
    assert recurrent_scan(u32.half(), a_real)[0].dtype == torch.float16


@pytest.mark.parametrize("fn", [fft_scan, chunked_scan, recurrent_scan])
def test_bad_inputs_raise_typed_errors(fn):
    u = torch.randn(2, 10, 3)
    with pytest.raises(AdapterStabilityError, match="1.2"):
        fn(u, torch.tensor([0.5, 1.2, 0.0]))
    with pytest.raises(AdapterStabilityError, match=r"\|a\|"):
        fn(u, torch.tensor([0.5, 1.0, 0.0]))
    with pytest.raises(AdapterStabilityError):
        fn(u, torch.tensor([0.5, float("nan"), 0.0]))
    with pytest.raises(AdapterStabilityError):
        fn(u.cfloat(), torch.tensor([0.5, 0.8 + 0.8j, 0.0]))  # |a| = 1.13
    with pytest.raises(AdapterShapeError, match="N = u.shape"):
        fn(u, torch.tensor([0.5, 0.1]))
    with pytest.raises(AdapterShapeError, match="3-D"):
        fn(u[0], torch.tensor([0.5, 0.1, 0.0]))
    with pytest.raises(AdapterShapeError, match="3-D"):
        fn(u[None], torch.tensor([0.5, 0.1, 0.0]))
    with pytest.raises(AdapterShapeError, match="s0"):
        fn(u, torch.tensor([0.5, 0.1, 0.0]), torch.zeros(3))
    with pytest.raises(AdapterDtypeError, match="int64"):
        fn(torch.ones(2, 10, 3, dtype=torch.int64), torch.tensor([0.5, 0.1, 0.0]))
    with pytest.raises(AdapterDtypeError):
        fn(u, torch.tensor([0, 0, 0]))
    with pytest.raises(AdapterDtypeError):
        fn(u.bool(), torch.tensor([0.5, 0.1, 0.0]))
    with pytest.raises(AdapterDtypeError):
        fn(u.numpy(), torch.tensor([0.5, 0.1, 0.0]))
    # the typed errors are also the built-in ones
    with pytest.raises(ValueError):
        fn(u, torch.tensor([2.0, 0.0, 0.0]))
    with pytest.raises(TypeError):
        fn(u.int(), torch.tensor([0.5, 0.1, 0.0]))


def test_bad_chunk():
    for chunk in (0, -3, 2.5, True, "auto"):
        with pytest.raises(AdapterConfigError, match="chunk"):
            chunked_scan(torch.randn(1, 4, 2), torch.tensor([0.1, 0.2]), chunk=chunk)


def test_auto_chunk_splits_evenly():
    for L in [0, 1, 2, 15, 16, 17, 23, 64, 139, 1000, 1024, 1025, 4096, 16384, 10007]:
        T = auto_chunk(L)
        assert 1 <= T <= max(L, 1) and T <= 32
        nc = -(-L // T)
        assert nc * T - L < max(nc, 1)  # padding shorter than one step per chunk
    assert auto_chunk(4096) == 32 and auto_chunk(1024) == 16


@pytest.mark.parametrize("L", [17, 23, 139, 1025])
def test_auto_chunk_is_the_default_and_exact(L):
    a = poles("complex")
    u, s0 = inputs("complex", 2, L, 8, a.dtype)
    s_ref, last_ref = reference(u, a, s0)
    s, last = chunked_scan(u, a, s0)
    assert torch.equal(s, chunked_scan(u, a, s0, chunk=auto_chunk(L))[0])
    assert rel_err(s, s_ref) <= 1e-12 and rel_err(last, last_ref) <= 1e-12


@pytest.mark.parametrize("kind", ["real", "complex"])
def test_powers_at_and_doubling_scan(kind):
    a = poles(kind)
    exps = [0, 1, 2, 7, 64, 1000]
    P = _powers_at(a, exps, a.dtype)
    for row, e in zip(P, exps, strict=True):
        want = torch.ones_like(a) if e == 0 else torch.linalg.matrix_power(torch.diag(a), e)
        want = want.diagonal() if e else want
        assert float((row - want).abs().max()) <= 1e-13
    # doubling scan with decay q = a^3 equals the loop, forwards and backwards
    q = a**3
    E, _ = inputs(kind, 2, 37, 8, a.dtype)
    Q = _powers_at(q, [1, 2, 4, 8, 16, 32], a.dtype)
    assert rel_err(_doubling_scan(E, Q), recurrent_scan(E, q)[0]) <= 1e-13
    back = recurrent_scan(E.flip(1), q)[0].flip(1)
    assert rel_err(_doubling_scan(E, Q, reverse=True), back) <= 1e-13


@pytest.mark.parametrize("T", [1, 5, 16])
def test_loop_core_non_contiguous_input_and_reverse(T):
    a = poles("real")
    u, s0 = inputs("real", 2, 50, 16, torch.float64)
    view = u[..., ::2]  # (2, 50, 8), not contiguous
    fwd = _chunked_loop_core(view, a, s0[:, ::2], T)
    assert rel_err(fwd, recurrent_scan(view, a, s0[:, ::2])[0]) <= 1e-13
    rev = _chunked_loop_core(view, a, s0[:, ::2], T, reverse=True)
    want = recurrent_scan(view.flip(1), a, s0[:, ::2])[0].flip(1)
    assert rel_err(rev, want) <= 1e-13
    assert torch.equal(view, u[..., ::2])  # input untouched


def test_fast_len():
    for n in [1, 2, 3, 7, 100, 4096, 8191, 32768, 10007]:
        m = _fast_len(n)
        assert m >= n and m % 2 == 0 and m <= 2 * n + 2
        k = m
        for p in (2, 3, 5):
            while k % p == 0:
                k //= p
        assert k == 1


@settings(max_examples=25, deadline=None)
@given(
    B=st.integers(1, 3),
    L=st.integers(1, 80),
    N=st.integers(1, 5),
    chunk=st.integers(1, 20),
    complex_=st.booleans(),
    radius=st.floats(0.0, 0.999),
    seed=st.integers(0, 2**16),
)
def test_property_parallel_equals_recurrent(B, L, N, chunk, complex_, radius, seed):
    g = torch.Generator().manual_seed(seed)
    mags = radius * torch.rand(N, generator=g, dtype=torch.float64)
    if complex_:
        a = torch.polar(mags, 2 * math.pi * torch.rand(N, generator=g, dtype=torch.float64))
        u = torch.randn(B, L, N, generator=g, dtype=torch.complex128)
    else:
        a = mags * torch.sign(torch.randn(N, generator=g, dtype=torch.float64))
        u = torch.randn(B, L, N, generator=g, dtype=torch.float64)
    s0 = torch.randn(B, N, generator=g, dtype=u.dtype)
    s_ref, last_ref = recurrent_scan(u, a, s0)
    for s, last in (chunked_scan(u, a, s0, chunk=chunk), fft_scan(u, a, s0)):
        assert rel_err(s, s_ref) <= 1e-12
        assert rel_err(last, last_ref) <= 1e-12


def test_compiling_an_adapter_warns_of_nothing_and_computes_the_same():
    """torch.compile of a training step: dynamo warns of "silent incorrectness" risk when it
    meets an lru_cache'd function (the exponents table), so that cache is skipped there."""
    import warnings

    from adapters import HRMAdapter

    adapter = HRMAdapter(16, 4, gate_init=0.5)
    x = torch.randn(2, 12, 16, generator=torch.Generator().manual_seed(0))
    want = adapter(x)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        got = torch.compile(lambda u: adapter(u), backend="eager")(x)
        got.sum().backward()
    assert [str(w.message) for w in caught if "lru_cache" in str(w.message)] == []
    assert torch.equal(got, want)
    assert adapter.gate.grad is not None


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.complex64,
                                   torch.complex128])
@pytest.mark.parametrize("reverse", [False, True])
def test_one_chunk_from_the_zero_state_is_the_general_scan_bit_for_bit(dtype, reverse):
    """A short prompt (one chunk, no initial state) skips the powers of ``a`` and recurs with
    ``a`` itself, which must be what the general path's ``a^1`` is, to the bit: the same
    scan from an all-zero initial state (which forms the powers and adds ``a^(t+1) 0``)."""
    g = torch.Generator().manual_seed(7)
    N = 64
    if dtype.is_complex:
        wide = torch.polar(torch.rand(N, generator=g, dtype=torch.float64),
                           6 * torch.rand(N, generator=g, dtype=torch.float64))
        u = torch.randn(2, 9, N, generator=g, dtype=torch.complex128)
    else:
        wide = 2 * torch.rand(N, generator=g, dtype=torch.float64) - 1
        u = torch.randn(2, 9, N, generator=g, dtype=torch.float64)
    a, u = wide.to(dtype), u.to(dtype)
    a[:3] = 0
    for T in (9, 16):  # one chunk (T >= L)
        fast = _chunked_loop_core(u, a, None, T, reverse)
        general = _chunked_loop_core(u, a, torch.zeros(2, N, dtype=dtype), T, reverse)
        assert torch.equal(fast, general)
        assert rel_err(fast, (recurrent_scan(u.flip(1), a)[0].flip(1) if reverse
                              else recurrent_scan(u, a)[0])) <= 1e-5
