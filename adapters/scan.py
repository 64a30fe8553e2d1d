r"""Diagonal linear scans: ``s_t = a * s_{t-1} + u_t`` over a sequence, three ways.

Shapes: B batch, L length, N state size. ``u`` is ``(B, L, N)``, ``a`` is ``(N,)``, the optional
initial state ``s0`` (the state before the first step, ``s_{-1}``) is ``(B, N)``. Every scan
returns ``(s, s_last)``: all states ``s`` ``(B, L, N)`` and the final state ``s_last = s[:, -1]``
``(B, N)`` (equal to ``s0``, or zeros, when ``L = 0``), so a long sequence can be processed in
pieces by passing ``s_last`` as the next piece's ``s0``.

- :func:`fft_scan` -- the scan as a causal convolution with the kernel ``a^k``, computed with an
  FFT padded to a fast length ``>= 2L``; ``O(L log L)``.
- :func:`chunked_scan` -- the exact blocked form: inside each chunk of ``T`` steps the decay
  matrix ``a^(t-j)`` (a batched matmul on accelerators, its recursion vectorised over chunks on
  CPU), between chunks the carried state (a scan over the chunk boundaries with decay
  ``a^T``: recursive on accelerators, a ``log2``-depth doubling scan on CPU); ``O(L T)``
  work, the chunk length chosen from ``L`` by :func:`auto_chunk` unless given.
- :func:`recurrent_scan` -- the step-by-step loop: the reference, and the decoding path.

Numerics policy
---------------
- The scan is computed in float32 or better whatever the caller's autocast state: autocast is
  switched off inside, float16/bfloat16 inputs are upcast to float32 (complex to complex64), and
  float64 is kept when ``u``, ``a`` or ``s0`` is float64/complex128.
- The powers ``a^k`` are always formed in float64 (complex128) and then rounded once to the
  compute dtype, so the kernel itself carries no float32 error that grows with ``k``.
- The result is cast back to the precision of ``u``: real ``u`` with real ``a`` gives ``u.dtype``;
  a complex result (complex ``u`` or ``a``) gives the complex dtype of ``u``'s precision
  (complex64 for float16/bfloat16/float32 inputs, complex128 for float64).
- Accuracy near ``|a| -> 1``: both parallel scans are exact algorithms, so their error is
  rounding error only. Measured in float32 against a float64 loop on the same rounded inputs
  (``tests/adapters/test_scan.py``, ``benchmarks/bench_scan.py``), with random and constant
  inputs, ``L <= 16384`` and ``|a|`` up to ``1 - 1e-6``: the error relative to ``max |s|`` of
  the whole output is below 1e-6 for both (the acceptance bound is 1e-5). Relative to each
  mode's *own* ``max |s|`` the chunked scan stays below 1e-6, while the FFT scan reaches about
  1e-4 for a mode near ``a = -1`` driven by a constant input: the FFT's error scales with
  ``eps * ||u|| * ||K||`` (K the kernel ``a^k``), which such a mode's small output does not
  dominate; this is why ``DiagonalSSM`` uses the chunked scan by default. The float32
  *recurrent* loop accumulates rounding like ``eps / (1 - |a|)`` (measured 3e-5 at
  ``|a| = 0.999``), so compare against a float64 reference, not against the float32 loop.
"""

from __future__ import annotations

import functools
import numbers

import torch

from adapters.exceptions import (
    AdapterConfigError,
    AdapterDtypeError,
    AdapterShapeError,
    AdapterStabilityError,
)

__all__ = ["auto_chunk", "chunked_scan", "fft_scan", "recurrent_scan"]

_LOW_PRECISION = (torch.float16, torch.bfloat16)


# --------------------------------------------------------------------------- validation / dtypes


def _check_float(name: str, x: torch.Tensor) -> None:
    if x.dtype == torch.bool or not (x.is_floating_point() or x.is_complex()):
        raise AdapterDtypeError(
            f"`{name}` must be a floating-point or complex tensor; got dtype {x.dtype}"
        )


def _validate(u, a, s0):
    """Check shapes, dtypes and stability; return ``a`` as a tensor on ``u``'s device."""
    if not isinstance(u, torch.Tensor):
        raise AdapterDtypeError(f"`u` must be a torch.Tensor; got {type(u).__name__}")
    _check_float("u", u)
    if u.dim() != 3:
        raise AdapterShapeError(
            f"`u` must be 3-D (B, L, N); got {u.dim()}-D tensor of shape {tuple(u.shape)}"
        )
    a = torch.as_tensor(a, device=u.device)
    _check_float("a", a)
    if a.dim() != 1 or a.shape[0] != u.shape[2]:
        raise AdapterShapeError(
            f"`a` must have shape (N,) with N = u.shape[2] = {u.shape[2]}; got {tuple(a.shape)}"
        )
    if a.numel():
        radius = float(a.detach().abs().max())
        if not radius < 1.0:  # also catches NaN
            raise AdapterStabilityError(
                f"`a` must satisfy |a| < 1 (stable diagonal scan); got max |a| = {radius:.6g}"
            )
    if s0 is not None:
        if not isinstance(s0, torch.Tensor):
            raise AdapterDtypeError(f"`s0` must be a torch.Tensor; got {type(s0).__name__}")
        _check_float("s0", s0)
        if s0.shape != (u.shape[0], u.shape[2]):
            raise AdapterShapeError(
                f"`s0` must have shape (B, N) = {(u.shape[0], u.shape[2])}; got {tuple(s0.shape)}"
            )
    return a


def _dtypes(u, a, s0):
    """Return (compute dtype, output dtype) following the module's numerics policy."""
    tensors = [u, a] if s0 is None else [u, a, s0]
    is_complex = any(t.is_complex() for t in tensors)
    wide = any(t.dtype in (torch.float64, torch.complex128) for t in tensors)
    if is_complex:
        compute = torch.complex128 if wide else torch.complex64
        out = torch.complex128 if u.dtype in (torch.float64, torch.complex128) else torch.complex64
    else:
        compute = torch.float64 if wide else torch.float32
        out = u.dtype
    return compute, out


def _powers(a: torch.Tensor, n: int, dtype: torch.dtype) -> torch.Tensor:
    """Powers ``a^0, ..., a^(n-1)`` as an ``(n, N)`` tensor, formed in float64/complex128.

    Built by doubling (``P[m:2m] = P[:m] * a^m``): exact products, so the relative error is
    ``O(log2(n) eps64)`` with no ``k * eps`` growth, and the values (and gradients) are exact
    polynomials in ``a``, also at ``a = 0``. Rounded once to `dtype`.
    """
    wide = torch.complex128 if a.is_complex() else torch.float64
    a = a.to(wide)  # (N,)
    P = torch.ones((1, a.shape[0]), dtype=wide, device=a.device)  # (1, N)
    am = a.unsqueeze(0)  # (1, N), a^m for the current block length m
    while P.shape[0] < n:
        P = torch.cat([P, P * am], dim=0)  # (2m, N)
        am = am * am
    return P[:n].to(dtype)


def _empty(u, s0, out):
    s = u.new_zeros(u.shape, dtype=out)  # (B, 0, N)
    last = s0.clone() if s0 is not None else u.new_zeros((u.shape[0], u.shape[2]))  # (B, N)
    return s, last.to(out)


class _ParallelScan(torch.autograd.Function):
    """Autograd for a parallel scan ``core``: the backward pass is the same scan run
    backwards in time with ``conj(a)`` (the adjoint recursion), so it is as fast as the
    forward pass and needs no graph through the FFT or the chunk matmuls."""

    @staticmethod
    def forward(ctx, u, a, s0, core):
        with torch.no_grad():
            s = core(u, a, s0)  # (B, L, N)
        ctx.core = core
        ctx.has_s0 = s0 is not None
        ctx.save_for_backward(a, s0 if s0 is not None else a.new_zeros(0), s)
        return s

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, g):
        a, s0, s = ctx.saved_tensors
        need_u, need_a, need_s0 = ctx.needs_input_grad[:3]
        grad_u = grad_a = grad_s0 = None
        if not (need_u or need_a or need_s0):
            return None, None, None, None
        ac = a.conj()
        # adjoint: lam_t = g_t + conj(a) lam_{t+1}, the same scan backwards in time
        lam = ctx.core(g, ac, None, reverse=True)  # (B, L, N)
        if need_u:
            grad_u = lam
        if need_a:
            # sum_t lam_t conj(s_{t-1}), with s_{-1} = s0
            grad_a = (lam[:, 1:] * s[:, :-1].conj()).sum(dim=(0, 1))  # (N,)
            if ctx.has_s0:
                grad_a = grad_a + (lam[:, 0] * s0.conj()).sum(dim=0)
        if need_s0 and ctx.has_s0:
            grad_s0 = lam[:, 0] * ac  # (B, N)
        return grad_u, grad_a, grad_s0, None


def _cast(t, dtype):
    """``t.to(dtype)`` without the call (its argument parsing) when ``t`` has that dtype."""
    return t if t.dtype is dtype else t.to(dtype)


def _no_grad_scan(u, a, s0, core):
    with torch.no_grad():
        return core(u, a, s0)


def _core_call(u, a, s0, core):
    return core(u, a, s0)


def run_core(u, a, s0, core, check=True):
    """Validate, cast to the compute dtype, run ``core`` with autocast off, cast back.

    ``check=False`` skips the validation (and its device sync); for callers such as
    :class:`adapters.DiagonalSSM` whose ``a`` is stable and well-shaped by construction.
    """
    if check:
        a = _validate(u, a, s0)
    compute, out = _dtypes(u, a, s0)
    s0_c = None if s0 is None else _cast(s0, compute)
    if u.shape[1] == 0:
        return _empty(u, s0_c, out)
    args = (_cast(u, compute), _cast(a, compute), s0_c, core)
    # without a gradient to take, the core itself (the autograd Function's own overhead is
    # most of a short scan's cost, e.g. a prompt in generation); the same values either way
    grad = torch.is_grad_enabled()
    scan = _ParallelScan.apply if grad and (
        u.requires_grad or a.requires_grad or (s0 is not None and s0.requires_grad)
    ) else _no_grad_scan if grad else _core_call  # no grad mode to enter when it is off
    if autocast_for(u):
        with torch.autocast(device_type=u.device.type, enabled=False):
            s = scan(*args)  # (B, L, N)
    else:  # entering the context costs more than a short scan
        s = scan(*args)  # (B, L, N)
    s = _cast(s, out)
    return s, s[:, -1]


_ANY_AUTOCAST = getattr(torch._C, "_is_any_autocast_enabled", None)


def autocast_on(device_type):
    """Whether autocast is on for ``device_type`` (a device type name, e.g. ``"cpu"``).

    Torch's flag for any device is read first (a call without an argument to parse); the
    per-device check runs only when some autocast is on, and alone while compiling.
    """
    if (_ANY_AUTOCAST is not None and not torch.compiler.is_compiling()
            and not _ANY_AUTOCAST()):
        return False
    try:
        return torch.is_autocast_enabled(device_type)
    except TypeError:  # torch < 2.4: no device argument
        if device_type == "cpu":
            return torch.is_autocast_cpu_enabled()
        return torch.is_autocast_enabled()


def autocast_for(t: torch.Tensor) -> bool:
    """:func:`autocast_on` for ``t``'s device, not asking ``t`` for it (``t.device.type``
    makes a device object and a string, ~20 us in place) unless some autocast is on."""
    if (_ANY_AUTOCAST is not None and not torch.compiler.is_compiling()
            and not _ANY_AUTOCAST()):
        return False
    return autocast_on(t.device.type)


def _fast_len(n: int) -> int:
    """Smallest even 5-smooth integer ``>= n`` (a fast FFT length on CPU and CUDA)."""
    best = 2 * n + 2
    p5 = 1
    while p5 < best:
        p35 = p5
        while p35 < best:
            m = p35 * 2  # even
            while m < n:
                m *= 2
            best = min(best, m)
            p35 *= 3
        p5 *= 5
    return best


# --------------------------------------------------------------------------- FFT scan


def fft_core(u, a, s0, reverse=False):
    """FFT scan on validated compute-dtype tensors (no autograd)."""
    if reverse:  # s_t = a s_{t+1} + u_t with s_L = s0
        return fft_core(u.flip(1), a, s0).flip(1)
    L = u.shape[1]
    n = _fast_len(2 * L)
    P = _powers(a, L + 1, u.dtype)  # (L + 1, N), P[k] = a^k
    x, K = u.transpose(1, 2), P[:L].T  # (B, N, L), (N, L): transform the time axis last
    if u.is_complex():
        S = torch.fft.fft(x, n=n) * torch.fft.fft(K, n=n)  # (B, N, n)
        s = torch.fft.ifft(S, n=n)[..., :L].transpose(1, 2)  # (B, L, N)
    else:
        S = torch.fft.rfft(x, n=n) * torch.fft.rfft(K, n=n)  # (B, N, n // 2 + 1)
        s = torch.fft.irfft(S, n=n)[..., :L].transpose(1, 2)  # (B, L, N)
    if s0 is not None:
        s = s + P[1:] * s0.unsqueeze(1)  # a^(t+1) s0
    return s


def fft_scan(u, a, s0=None):
    r"""Diagonal scan ``s_t = a * s_{t-1} + u_t`` as a causal FFT convolution.

    Parameters
    ----------
    u : torch.Tensor, shape (B, L, N)
        Inputs, real or complex floating point.
    a : torch.Tensor, shape (N,)
        Diagonal of the state matrix, real or complex, ``|a| < 1``.
    s0 : torch.Tensor, shape (B, N), optional
        State before the first step (``s_{-1}``); zeros by default.

    Returns
    -------
    s : torch.Tensor, shape (B, L, N)
        All states, in the precision of `u` (complex when `u` or `a` is complex).
    s_last : torch.Tensor, shape (B, N)
        The final state ``s[:, -1]``, to be passed as `s0` of the next piece.

    Raises
    ------
    AdapterShapeError
        `u` not 3-D, `a` not of shape (N,), `s0` not of shape (B, N).
    AdapterDtypeError
        Integer or boolean tensors.
    AdapterStabilityError
        ``max |a| >= 1`` (or NaN).

    Notes
    -----
    With the kernel :math:`K_k = a^k`,

    .. math::

        s_t = \sum_{k=0}^{t} a^k u_{t-k} + a^{t+1} s_{-1},

    a causal convolution evaluated with real FFTs (complex FFTs when anything is complex) of a
    fast length :math:`n \ge 2L`, so there is no circular wrap-around. Computed in float32 or
    better even under autocast; see the module's numerics policy. Cost :math:`O(B N L \log L)`.

    Examples
    --------
    >>> import torch
    >>> from adapters.scan import fft_scan, recurrent_scan
    >>> u = torch.randn(2, 100, 4, dtype=torch.float64)
    >>> a = torch.tensor([0.5, -0.9, 0.99, 0.0], dtype=torch.float64)
    >>> s, last = fft_scan(u, a)
    >>> bool((s - recurrent_scan(u, a)[0]).abs().max() < 1e-12)
    True
    """
    return run_core(u, a, s0, fft_core)


# --------------------------------------------------------------------------- chunked scan


def auto_chunk(L: int) -> int:
    """Chunk length used by :func:`chunked_scan` when `chunk` is None, for length `L`.

    About 16 steps per chunk up to ``L = 1024`` and 32 beyond (the fastest forward+backward
    in ``benchmarks/bench_scan.py`` on CPU), shortened so that the chunks split `L` evenly
    or nearly so (the last chunk is padded by fewer than ``L / T`` steps).

    Parameters
    ----------
    L : int
        Sequence length.

    Returns
    -------
    int
        The chunk length ``T``, ``1 <= T <= max(L, 1)``.

    Examples
    --------
    >>> from adapters.scan import auto_chunk
    >>> auto_chunk(23), auto_chunk(139), auto_chunk(4096)
    (12, 16, 32)
    """
    target = 16 if L <= 1024 else 32
    nc = max(1, -(-L // target))
    return max(1, -(-L // nc))


def chunked_core(u, a, s0, T=None, reverse=False):
    """Blocked scan on validated compute-dtype tensors (no autograd), by device.

    ``reverse=True`` runs ``s_t = a s_{t+1} + u_t`` with ``s_L = s0`` (the adjoint scan).
    ``T=None`` picks the chunk length with :func:`auto_chunk`.
    """
    if T is None:
        T = auto_chunk(u.shape[1])
    if u.device.type == "cpu":
        return _chunked_loop_core(u, a, s0, T, reverse)
    return _chunked_matmul_core(u, a, s0, T, reverse)


@functools.lru_cache(maxsize=64)
def _exponents(exps):
    """The exponents as a float64 CPU tensor, built once per tuple (a list costs ~25 us)."""
    return torch.tensor(exps, dtype=torch.float64)


def _powers_at(a: torch.Tensor, exps, dtype: torch.dtype) -> torch.Tensor:
    """Powers ``a^e`` for the non-negative integer exponents `exps`, as ``(len(exps), N)``.

    Evaluated elementwise in float64 (``pow``, correctly signed for negative ``a``) or, for
    complex ``a``, in polar form ``|a|^e exp(i e arg a)`` in complex128: three kernel calls
    whatever the exponents, with a relative error of a few float64 ulps times ``e`` at most
    (the conditioning of ``a^e`` itself). ``0^0 = 1``. Rounded once to `dtype`.
    """
    if torch.compiler.is_compiling():  # traced once into the graph; dynamo warns on lru_cache
        e = torch.tensor(tuple(exps), dtype=torch.float64).to(a.device).unsqueeze(1)
    else:
        e = _exponents(tuple(exps)).to(a.device).unsqueeze(1)  # (K, 1)
    if a.is_complex():
        a = a.to(torch.complex128)
        P = torch.polar(a.abs().unsqueeze(0) ** e, a.angle().unsqueeze(0) * e)  # (K, N)
    else:
        P = a.to(torch.float64).unsqueeze(0) ** e  # (K, N)
    return P.to(dtype)


def _doubling_scan(E, Q, reverse=False):
    """Scan ``S_c = q S_{c-1} + E_c`` (or ``S_c = q S_{c+1} + E_c``) along dim 1 of `E`.

    Hillis-Steele doubling: level ``k`` adds ``q^(2^k)`` (row ``k`` of `Q`) times the partial
    sums ``2^k`` places back, ``ceil(log2 n)`` levels of two kernels each, on ``E`` of shape
    ``(B, n, N)``. Exact algorithm; each output is a sum of at most ``log2 n`` rounded terms.
    """
    n = E.shape[1]
    d, k = 1, 0
    while d < n:
        F = torch.empty_like(E)  # (B, n, N)
        if reverse:
            torch.addcmul(E[:, :-d], Q[k], E[:, d:], out=F[:, :-d])
            F[:, -d:] = E[:, -d:]
        else:
            torch.addcmul(E[:, d:], Q[k], E[:, :-d], out=F[:, d:])
            F[:, :d] = E[:, :d]
        E, d, k = F, 2 * d, k + 1
    return E


def _chunked_loop_core(u, a, s0, T, reverse=False):
    """CPU form: the in-chunk recursion vectorised over all chunks, a doubling scan across them.

    Same algorithm as :func:`_chunked_matmul_core` with the ``T x T`` decay-matrix product
    evaluated by its recursion (``T - 1`` elementwise steps, each over all chunks at once): on
    CPU the small matmuls and the layout copies they need cost more than those steps. The
    states carried between chunks come from a doubling scan over the ``nc - 1`` chunk
    boundaries with decay ``a^T`` (``log2 nc`` levels on ``(B, nc, N)``), and one fused pass
    adds ``a^(t+1)`` times the carried state to every chunk. All in place in the output.
    """
    Bsz, L, N = u.shape
    T = max(1, min(T, L))
    nc = -(-L // T)  # number of chunks
    pad = nc * T - L
    if pad:  # zeros that the scan meets last: after the end, or before the start if reverse
        u = torch.nn.functional.pad(u, (0, 0, pad, 0) if reverse else (0, 0, 0, pad))
    levels = (nc - 1).bit_length() if nc > 1 else 0  # doubling levels across chunks
    # one chunk from the zero state (a short prompt) needs only a^1, which _powers_at gives
    # back as `a` bit for bit except in complex128 (its polar form rounds): no powers then
    only_a = nc == 1 and s0 is None and a.dtype != torch.complex128
    # rows: a^1 .. a^T (P[t] = a^(t+1)), then a^(T 2^k) for the doubling levels
    P = None if only_a else _powers_at(
        a, list(range(1, T + 1)) + [T << k for k in range(levels)], u.dtype)
    if not pad:  # the padded copy is ours already; otherwise one contiguous copy
        u = u.clone(memory_format=torch.contiguous_format)
    s = u.view(Bsz, nc, T, N)  # (B, nc, T, N), becomes the zero-state scan
    ss = s.unbind(2)  # T views (B, nc, N)
    a_c = a if only_a else P[0]
    if reverse:
        for t in range(T - 2, -1, -1):  # zero-state scan inside every chunk at once
            ss[t].addcmul_(a_c, ss[t + 1])  # (B, nc, N)
    else:
        for t in range(1, T):
            ss[t].addcmul_(a_c, ss[t - 1])  # (B, nc, N)
    if nc > 1:
        # boundary values from zero state, s0 folded into the first (last if reverse) one
        e = s[:, 1:, 0] if reverse else s[:, :-1, -1]  # (B, nc-1, N)
        if s0 is not None:
            e = e.clone()
            e[:, -1 if reverse else 0].addcmul_(P[T - 1], s0)  # + a^T s0
        S = _doubling_scan(e, P[T:], reverse)  # (B, nc-1, N), true boundary states
        edge = torch.zeros_like(S[:, :1]) if s0 is None else s0.unsqueeze(1)  # (B, 1, N)
        carry = torch.cat([S, edge] if reverse else [edge, S], dim=1)  # (B, nc, N)
    else:
        carry = None if s0 is None else s0.unsqueeze(1)  # (B, 1, N)
    if carry is not None:
        Pt = P[:T].flip(0) if reverse else P[:T]  # (T, N): a^(T-t) or a^(t+1)
        s.addcmul_(Pt, carry.unsqueeze(2))  # + decayed carried state
    s = s.view(Bsz, nc * T, N)  # (B, nc*T, N)
    if not pad:
        return s
    return s[:, pad:] if reverse else s[:, :L]


def _chunked_matmul_core(u, a, s0, T, reverse=False):
    """Matmul form (CUDA and other accelerators): recursive over chunk ends.

    One batched matmul per level does everything: each chunk's inputs, augmented by the state
    carried into the chunk, times the ``(T + 1, T)`` matrix ``[M^T; a^(t+1)]`` of its mode.
    """
    if reverse:
        return _chunked_matmul_core(u.flip(1), a, s0, T).flip(1)
    Bsz, L, N = u.shape
    T = max(1, min(T, L))
    nc = -(-L // T)  # number of chunks
    pad = nc * T - L
    if pad:
        u = torch.nn.functional.pad(u, (0, 0, 0, pad))  # (B, nc*T, N)
    wide = torch.complex128 if u.is_complex() else torch.float64
    Pw = _powers(a, T + 1, wide)  # (T + 1, N), a^k in float64/complex128
    P = Pw.to(u.dtype)
    idx = torch.arange(T, device=u.device)
    diff = idx[None, :] - idx[:, None]  # (T_j, T_t), t - j
    W = torch.empty((N, T + 1, T), dtype=u.dtype, device=u.device)  # per mode: rows j, cols t
    W[:, :T] = (P[diff.clamp(min=0)] * (diff >= 0).unsqueeze(-1)).permute(2, 0, 1)  # a^(t-j)
    W[:, T] = P[1:].T  # carry row: a^(t+1)
    X = torch.empty((N, Bsz * nc, T + 1), dtype=u.dtype, device=u.device)
    X[..., :T] = u.reshape(Bsz * nc, T, N).permute(2, 0, 1)  # (N, B*nc, T) chunk inputs
    if nc == 1:
        X[..., T] = 0 if s0 is None else s0.T  # (N, B)
    else:
        ends = torch.bmm(X[..., :T], W[:, :T, T - 1 :])  # (N, B*nc, 1), chunk ends from zero
        ends = ends.reshape(N, Bsz, nc).permute(1, 2, 0)  # (B, nc, N)
        S = _chunked_matmul_core(ends[:, :-1], Pw[T], s0, T)  # true ends (decay a^T)
        carry = X[..., T].view(N, Bsz, nc)  # (N, B, nc) view into X
        carry[:, :, 0] = 0 if s0 is None else s0.T
        carry[:, :, 1:] = S.permute(2, 0, 1)
    out = torch.bmm(X, W)  # (N, B*nc, T)
    return out.reshape(N, Bsz, nc * T).permute(1, 2, 0)[:, :L].contiguous()  # (B, L, N)


def chunked_scan(u, a, s0=None, chunk=None):
    r"""Diagonal scan ``s_t = a * s_{t-1} + u_t`` in exact blocked (chunked) form.

    Parameters
    ----------
    u : torch.Tensor, shape (B, L, N)
        Inputs, real or complex floating point.
    a : torch.Tensor, shape (N,)
        Diagonal of the state matrix, real or complex, ``|a| < 1``.
    s0 : torch.Tensor, shape (B, N), optional
        State before the first step (``s_{-1}``); zeros by default.
    chunk : int, optional
        Chunk length ``T``, clipped to ``L``; by default :func:`auto_chunk` of ``L`` (16 or
        32 steps per chunk).

    Returns
    -------
    s : torch.Tensor, shape (B, L, N)
        All states, in the precision of `u` (complex when `u` or `a` is complex).
    s_last : torch.Tensor, shape (B, N)
        The final state ``s[:, -1]``.

    Raises
    ------
    AdapterShapeError, AdapterDtypeError, AdapterStabilityError
        As :func:`fft_scan`; also :class:`~adapters.exceptions.AdapterConfigError` for a
        non-positive `chunk`.

    Notes
    -----
    Split the sequence into chunks ``c`` of ``T`` steps. Inside a chunk, with the decay matrix
    :math:`M_{tj} = a^{t-j}` for :math:`j \le t` (zero otherwise),

    .. math::

        s_{cT+t} = \sum_{j \le t} a^{t-j} u_{cT+j} + a^{t+1} S_{c-1},

    where :math:`S_{c-1}` is the state at the end of the previous chunk. The chunk-end states
    obey the same recursion with decay :math:`a^T`, :math:`S_c = a^T S_{c-1} + e_c` (``e_c`` the
    chunk's zero-state end), which is solved by calling this scan recursively (depth
    :math:`\log_T L`). On CUDA and other accelerators the in-chunk sum is one batched matmul
    per level (:math:`O(B L T N)` work, the carry folded in as an extra row); on CPU, where
    those small matmuls and their layout copies cost more than they save, the same sum is
    evaluated by its recursion, ``T`` elementwise steps vectorised over all chunks. Both forms
    are exact; there is no Python loop over the sequence length.

    Examples
    --------
    >>> import torch
    >>> from adapters.scan import chunked_scan, recurrent_scan
    >>> u = torch.randn(2, 300, 3, dtype=torch.complex128)
    >>> a = torch.tensor([0.9j, -0.5 + 0.1j, 0.99], dtype=torch.complex128)
    >>> s, last = chunked_scan(u, a, chunk=16)
    >>> bool((s - recurrent_scan(u, a)[0]).abs().max() < 1e-12)
    True
    """
    if chunk is not None and (
        isinstance(chunk, bool) or not isinstance(chunk, numbers.Integral) or chunk < 1
    ):
        raise AdapterConfigError(f"`chunk` must be a positive int or None; got {chunk!r}")
    T = None if chunk is None else int(chunk)
    return run_core(u, a, s0, functools.partial(chunked_core, T=T))


# --------------------------------------------------------------------------- recurrent scan


def _recurrent_scan(u, a, s0):
    Bsz, L, N = u.shape
    s = torch.zeros((Bsz, N), dtype=u.dtype, device=u.device) if s0 is None else s0
    states = []
    for u_t in u.unbind(1):  # unbind: one backward node for all steps, not L full-size scatters
        s = a * s + u_t  # (B, N)
        states.append(s)
    return torch.stack(states, dim=1), s


def recurrent_scan(u, a, s0=None):
    r"""Diagonal scan ``s_t = a * s_{t-1} + u_t`` as a step-by-step loop.

    The slow reference for the parallel scans and the path used for one-token decoding
    (``L = 1``). Same numerics policy as :func:`fft_scan`.

    Parameters
    ----------
    u : torch.Tensor, shape (B, L, N)
        Inputs, real or complex floating point.
    a : torch.Tensor, shape (N,)
        Diagonal of the state matrix, real or complex, ``|a| < 1``.
    s0 : torch.Tensor, shape (B, N), optional
        State before the first step (``s_{-1}``); zeros by default.

    Returns
    -------
    s : torch.Tensor, shape (B, L, N)
        All states.
    s_last : torch.Tensor, shape (B, N)
        The final state (``s0`` or zeros when ``L = 0``).

    Raises
    ------
    AdapterShapeError, AdapterDtypeError, AdapterStabilityError
        As :func:`fft_scan`.

    Notes
    -----
    :math:`s_t = a \odot s_{t-1} + u_t` for :math:`t = 0, \dots, L-1`, one elementwise update
    per step: :math:`O(B L N)` work but :math:`L` sequential kernel launches. In float32 its
    rounding error accumulates like :math:`\epsilon / (1 - |a|)`.

    Examples
    --------
    >>> import torch
    >>> from adapters.scan import recurrent_scan
    >>> u = torch.ones(1, 3, 1)
    >>> s, last = recurrent_scan(u, torch.tensor([0.5]))
    >>> s.flatten().tolist(), last.flatten().tolist()
    ([1.0, 1.5, 1.75], [1.75])
    """
    a = _validate(u, a, s0)
    compute, out = _dtypes(u, a, s0)
    s0_c = None if s0 is None else s0.to(compute)
    if u.shape[1] == 0:
        return _empty(u, s0_c, out)
    with torch.autocast(device_type=u.device.type, enabled=False):
        s, s_last = _recurrent_scan(u.to(compute), a.to(compute), s0_c)
    return s.to(out), s_last.to(out)
