"""The scans on half-precision tensors: computed in float32, rounded once to the input's dtype.

Against a float64 loop on the same (rounded) inputs, every state is within one unit of the
dtype's precision of its mode's largest |state| (measured at most 0.47 eps for bf16 and fp16,
lengths 1 to 1025, poles up to 0.95 of either sign); a pole that rounds to 1 in the dtype is
refused with a typed error instead of a scan that grows without bound.
"""

from __future__ import annotations

import pytest
import torch

from adapters.exceptions import AdapterStabilityError
from adapters.scan import chunked_scan, fft_scan


def _loop(u, a, s0):
    s, out = s0.double(), []
    for t in range(u.shape[1]):
        s = a.double() * s + u[:, t].double()
        out.append(s)
    return torch.stack(out, 1)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
@pytest.mark.parametrize("scan", [fft_scan, chunked_scan])
def test_half_precision_scans_are_rounded_once(scan, dtype):
    g = torch.Generator().manual_seed(0)
    eps = torch.finfo(dtype).eps
    for L in (1, 2, 33, 257, 1025):
        for B in (1, 3):
            a = (torch.rand(4, generator=g) * 0.95 * torch.tensor([1.0, -1.0, 1.0, -1.0])).to(dtype)
            u = torch.randn(B, L, 4, generator=g).to(dtype)
            s0 = torch.randn(B, 4, generator=g).to(dtype)
            s, last = scan(u, a, s0)
            assert s.dtype == dtype and last.dtype == dtype
            want = _loop(u, a, s0)
            err = ((s.double() - want).abs() / want.abs().amax(dim=1, keepdim=True)).max()
            assert err <= eps, (L, B, float(err))
            assert torch.equal(last, s[:, -1])


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_a_pole_that_rounds_to_one_is_refused(dtype):
    a = torch.tensor([0.5, 1 - 1e-5], dtype=torch.float64).to(dtype)
    assert float(a[1]) == 1.0
    for scan in (fft_scan, chunked_scan):
        with pytest.raises(AdapterStabilityError, match=r"\|a\| < 1"):
            scan(torch.ones(1, 8, 2, dtype=dtype), a)
