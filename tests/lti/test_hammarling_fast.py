"""Slowly decaying dense systems: the squared-Smith attempt's in-loop screen (lti._smith)."""

from __future__ import annotations

import numpy as np
import pytest

import lti._smith as smith
import lti.gramians as gramians
from lti import DiscreteLTI
from lti.gramians import stable_gramian_factors


def _scaled_rotation(n: int, g: float, seed: int) -> np.ndarray:
    """``g Q`` with ``Q`` orthogonal: ``||A^j B||_F = g^j ||B||_F`` exactly."""
    Q, _ = np.linalg.qr(np.random.default_rng(seed).standard_normal((n, n)))
    return g * Q


def _dense(n: int, rho: float, seed: int) -> DiscreteLTI:
    rng = np.random.default_rng(seed)  # bench_balanced's family
    A = rng.standard_normal((n, n))
    A *= rho / np.max(np.abs(np.linalg.eigvals(A)))
    return DiscreteLTI(A, rng.standard_normal((n, 2)), rng.standard_normal((2, n)))


@pytest.mark.parametrize("n", [12, 40])
def test_in_loop_screen_threshold_matches_smith_promising(n):
    # decay exactly g per step: the window ratio is g^32 (1 + g^32); both screens put the
    # threshold at g = SMITH_SCREEN_RATIO = 0.96, while Smith itself converges for both g
    B = np.random.default_rng(1).standard_normal((n, 2))
    for g, promising in ((0.955, True), (0.965, False)):
        M = _scaled_rotation(n, g, seed=n)
        assert smith.smith_promising(M, B) is promising
        kw = dict(max_iter=smith.SMITH_AUTO_ITER, max_growth=smith.SMITH_MAX_GROWTH)
        plain = smith.smith_factors(M, [B], [False], **kw)
        assert plain is not None
        out = smith.smith_factors(M, [B], [False], screen=True, **kw)
        assert (out is not None) is promising
        if promising:  # the screen only decides; the factor is the same
            np.testing.assert_array_equal(out[0][0], plain[0][0])


def test_in_loop_screen_waits_out_transient_growth():
    # a Jordan-like chain (pole 0.59, subdiagonal 0.5): ||A^j B|| still grows at j = 16..63
    # but Smith converges; the screen judges it at the next squaring and lets it through
    n = 20
    A = 0.59 * np.eye(n) + 0.5 * np.diag(np.ones(n - 1), -1)
    B = np.eye(n)[:, :1]
    kw = dict(max_iter=smith.SMITH_AUTO_ITER, max_growth=smith.SMITH_MAX_GROWTH, screen=True)
    assert smith.smith_factors(A, [B], [False], **kw) is not None
    # growth that lasts beyond j = 64 (pole 0.95) is stopped one squaring later, even where
    # (without the growth guard) Smith would converge
    A = A + 0.36 * np.eye(n)
    kw["max_growth"] = np.inf
    assert smith.smith_factors(A, [B], [False], **kw) is None
    assert smith.smith_factors(A, [B], [False], **{**kw, "screen": False}) is not None


def test_in_loop_screen_looks_at_every_right_hand_side():
    n = 20
    B = np.random.default_rng(2).standard_normal((n, 1))
    # B excites only a fast mode, C^T the slow one: the attempt stops on C^T
    A = np.diag(np.r_[0.5, np.full(n - 1, 0.97)])  # Smith converges for both
    Bf = np.zeros((n, 1))
    Bf[0] = 1.0
    kw = dict(max_iter=smith.SMITH_AUTO_ITER, max_growth=smith.SMITH_MAX_GROWTH, screen=True)
    assert smith.smith_factors(A, [Bf], [False], **kw) is not None
    assert smith.smith_factors(A, [Bf, B], [False, True], **kw) is None
    kw["screen"] = False
    assert smith.smith_factors(A, [Bf, B], [False, True], **kw) is not None


@pytest.mark.parametrize("n", [16, 64, 128])
def test_slow_decay_stops_after_screen_step(monkeypatch, n):
    # rho = 0.9999: stable_gramian_factors gives up on Smith at squaring 4, 5 or 6 (it used to
    # run all 12 squarings first at n <= 128) and takes the Schur path
    G = _dense(n, 0.9999, seed=n)
    norms = []  # per squaring k: ||A_k||_F and ||A_k L_k||_F of both factors (2 at start)
    fro2 = smith._fro2
    monkeypatch.setattr(smith, "_fro2", lambda X: norms.append(1) or fro2(X))
    assert stable_gramian_factors(G).path == "schur"  # (compiled kernels: no attempt at all,
    assert len(norms) == 0 or len(norms) >= 2 * smith.SMITH_EARLY_STEP  # stops_at_early_step)
    norms.clear()
    monkeypatch.setattr(gramians, "stops_at_early_step", lambda A, B: False)  # the attempt
    F = stable_gramian_factors(G)
    assert F.path == "schur"
    assert 3 * smith.SMITH_EARLY_STEP <= len(norms) <= 3 * (smith.SMITH_SCREEN_STEP + 2) + 2


@pytest.mark.parametrize("n", [16, 64])
def test_benign_small_systems_keep_smith(n):
    # bench_balanced's rho = 0.95 family keeps the Smith path (no screen cost there: the
    # in-loop test reads norms the iteration computes anyway)
    G = _dense(n, 0.95, seed=n)
    F = stable_gramian_factors(G)
    assert F.path == "smith"
    P, Q = F.Lc @ F.Lc.T, F.Lo @ F.Lo.T
    rc = np.linalg.norm(G.A @ P @ G.A.T - P + G.B @ G.B.T) / np.linalg.norm(G.B @ G.B.T)
    ro = np.linalg.norm(G.A.T @ Q @ G.A - Q + G.C.T @ G.C) / np.linalg.norm(G.C.T @ G.C)
    assert max(rc, ro) < 1e-13


# ------------------------------------------------ the Hammarling kernel on slow decay


@pytest.fixture(params=["numpy", "compiled"])
def kernel_path(request, monkeypatch):
    """Run the test on the BLAS loop (LTI_DISABLE_JIT=1) and on the compiled kernel."""
    from lti import _jit

    if request.param == "numpy":
        monkeypatch.setenv("LTI_DISABLE_JIT", "1")
    elif not _jit.available():
        pytest.skip("numba not installed (extra 'fast')")
    else:
        monkeypatch.delenv("LTI_DISABLE_JIT", raising=False)
    return request.param


def _slow_triangular(n, rng, kind):
    """The (complex) Schur triangle of a slowly decaying dense A (spectral radius 0.9999,
    real spectrum for "real"), one diagonal entry set to 0 for the kernel's third branch."""
    import scipy.linalg as sla

    from lti._schur import complex_triangle

    if kind == "complex":  # bench_balanced's family: the spectrum fills the disk
        A = rng.standard_normal((n, n))
        A *= 0.9999 / np.max(np.abs(np.linalg.eigvals(A)))
        T = complex_triangle(sla.schur(A, output="real")[0])[0]
    else:  # real spectrum in (-1, 1), a third of it within 1e-3 of +-1; mildly non-normal
        d = rng.uniform(-0.999, 0.999, n)
        d[: n // 3] = rng.choice([-1.0, 1.0], n // 3) * rng.uniform(0.999, 0.9999, n // 3)
        V = np.eye(n) + 0.3 * rng.standard_normal((n, n)) / np.sqrt(n)
        T = sla.schur(V @ np.diag(d) @ np.linalg.inv(V), output="real")[0]
        assert not np.any(np.diag(T, -1))
        T = np.triu(T)
    T[n // 2, n // 2] = 0.0
    return T


@pytest.mark.parametrize("kind", ["real", "complex"])
@pytest.mark.parametrize("n, m, panel", [(150, 1, 64), (150, 3, 64), (70, 2, 5)])
def test_kernel_on_slow_decay_matches_the_reference(kind, n, m, panel, monkeypatch,
                                                    kernel_path):
    from lti import _hammarling
    from tests.lti.test_dense_fast import _reference_hammarling

    monkeypatch.setattr(_hammarling, "_PANEL", panel)  # re-packing of the active block
    rng = np.random.default_rng(n + m + panel)
    A = _slow_triangular(n, rng, kind)
    C = rng.standard_normal((m, n)) + (1j * rng.standard_normal((m, n)) if kind == "complex"
                                       else 0)
    U = _hammarling.hammarling_dense(A, C)
    Uref = _reference_hammarling(A, C)
    assert np.array_equal(np.tril(U, -1), np.zeros_like(U))
    X, Xref = U.conj().T @ U, Uref.conj().T @ Uref
    assert np.linalg.norm(X - Xref) <= 1e-12 * np.linalg.norm(Xref)
    R = A.conj().T @ X @ A - X + C.conj().T @ C
    assert np.linalg.norm(X) < 1e12  # a well-posed slow-decay problem, not an overflow
    assert np.linalg.norm(R) <= 1e-12 * np.linalg.norm(X)


def test_kernel_after_a_skipped_row(kernel_path):
    # column 1 of the right-hand side stays exactly zero (A[0, 1] = 0, C[:, 1] = 0): row 1
    # is skipped and the next solve must not see the previous row's u in its work vector
    from lti._hammarling import hammarling_dense
    from tests.lti.test_dense_fast import _reference_hammarling

    rng = np.random.default_rng(5)
    n = 12
    A = np.triu(rng.standard_normal((n, n))) * 0.3
    A[np.diag_indices(n)] = rng.uniform(0.6, 0.99, n)
    A[0, 1] = 0.0
    C = rng.standard_normal((2, n))
    C[:, 1] = 0.0
    U, Uref = hammarling_dense(A, C), _reference_hammarling(A, C)
    assert U[1, 1] == 0.0
    np.testing.assert_allclose(U.T @ U, Uref.T @ Uref, rtol=0, atol=1e-12 * np.abs(Uref).max() ** 2)
