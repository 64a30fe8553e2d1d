"""The cheaper fixed costs of a small balanced truncation give the same results (issue 14,
"the fix does not slow the benchmarks").

Each fast piece is checked against the slower expression it replaced (kept here as the
reference, compared bit for bit), and the fast paths of validation still reject what they
rejected: no check was dropped, only the wrappers around them.
"""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest

import lti._bt_core as bl  # the numerical core of lti.balanced
from lti import (
    DiscreteLTI,
    InvalidArgumentError,
    NonFiniteError,
    ShapeError,
    SolverError,
    _jit,
    balanced_truncation,
    balanced_truncation_from_factors,
)
from lti._order import Rule, check_rule
from lti._rounding import ROUNDING_FACTOR, rounding_terms
from lti._validation import as_float_matrix
from lti.gramians import stable_gramian_factors
from lti.system import is_control_system
from tests.lti.jit_helpers import kernel_path

EPS = np.finfo(np.float64).eps


def _dense(n: int, seed: int, rho: float = 0.95, m: int = 2, p: int = 2) -> DiscreteLTI:
    rng = np.random.default_rng(seed)
    A = rng.standard_normal((n, n))
    A *= rho / np.max(np.abs(np.linalg.eigvals(A)))
    return DiscreteLTI(A, rng.standard_normal((n, m)), rng.standard_normal((p, n)),
                       rng.standard_normal((p, m)))


def _fir(numtaps: int = 17) -> DiscreteLTI:
    h = np.sin(0.3 * np.arange(1, numtaps + 1)) / np.arange(1, numtaps + 1)
    n = numtaps - 1
    return DiscreteLTI(np.diag(np.ones(n - 1), -1), np.eye(n)[:, :1], h[1:][None, :],
                       [[h[0]]])


SYSTEMS = {
    "dense16": lambda: _dense(16, 16),
    "diagonal": lambda: DiscreteLTI(np.diag(np.linspace(-0.9, 0.95, 10)),
                                    np.ones((10, 2)), np.arange(20.0).reshape(2, 10) / 10),
    "fir": _fir,
}


# ------------------------------------------------------------------- DiscreteLTI


def test_diagonal_flag_from_nonzero_counts():
    """is_diagonal (all nonzeros on the diagonal, counted) equals the old off-diagonal test,
    signed zeros and a single tiny off-diagonal entry included."""
    ones = (np.ones((3, 1)), np.ones((1, 3)))
    assert DiscreteLTI(np.diag([0.5, -0.0, 0.2]), *ones).is_diagonal
    off = np.diag([0.5, -0.0, 0.2])
    off[0, 2] = -0.0
    assert DiscreteLTI(off, *ones).is_diagonal
    off[2, 0] = 1e-300
    assert not DiscreteLTI(off, *ones).is_diagonal
    rng = np.random.default_rng(5)
    for _ in range(200):
        n = int(rng.integers(0, 6))
        M = rng.standard_normal((n, n)) * (rng.random((n, n)) < 0.3)
        G = DiscreteLTI(M, np.ones((n, 1)), np.ones((1, n)))
        assert G.is_diagonal == (not np.any(M - np.diag(np.diag(M))))


# ------------------------------------------------------------------ validation


def test_float64_fast_path_of_as_float_matrix():
    """A float64 ndarray: a fresh copy with the same layout (as the general path), or the
    array itself with copy=False; the finiteness test accepts huge finite entries and
    names the first bad one."""
    X = np.asfortranarray(np.arange(12.0).reshape(3, 4))
    Y = as_float_matrix("X", X)
    assert Y is not X and np.array_equal(Y, X) and Y.flags.f_contiguous
    Y[0, 0] = -1.0
    assert X[0, 0] == 0.0
    assert as_float_matrix("X", X, copy=False) is X
    assert np.array_equal(as_float_matrix("X", X.astype(np.float32)), X)  # general path
    big = np.array([[1e308, 1e308], [-1e308, -1e308]])
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no overflow warning from the finiteness test
        assert np.array_equal(as_float_matrix("big", big), big)
    bad = big.copy()
    bad[1, 0] = np.nan
    with pytest.raises(NonFiniteError, match=r"`big` must be finite; got nan at index \(1, 0\)"):
        as_float_matrix("big", bad)
    with pytest.raises(ShapeError, match="2-D"):
        as_float_matrix("v", np.ones(3))


def test_order_rule_fast_path_validates_as_before():
    assert check_rule(3, None, None, 5) == Rule(order=3)
    assert check_rule(np.int64(0), None, None, 5) == Rule(order=0)
    for bad in (True, 2.0, -1, 6, "2"):
        with pytest.raises(InvalidArgumentError, match="`order` must be an integer"):
            check_rule(bad, None, None, 5)
    with pytest.raises(InvalidArgumentError, match="exactly one"):
        check_rule(3, 0.1, None, 5)


def test_is_control_system_answers_for_discrete_lti_first():
    G = _dense(3, 0)
    assert not is_control_system(G) and not is_control_system((G.A, G.B, G.C))
    control = pytest.importorskip("control", reason="python-control is not installed")
    assert is_control_system(control.ss(G.A, G.B, G.C, G.D, True))
    assert is_control_system(control.tf([1.0], [1.0, -0.5], True))


# ----------------------------------------------------------- balanced.py pieces


def _norm2_reference(L: np.ndarray) -> float:
    """``_norm2`` as it was written with the np.* wrappers (the reference)."""
    if L.size == 0:
        return 0.0
    big, formed = float(np.max(np.abs(L))), L.shape[1] <= 128
    K = L.T @ L if formed else None
    i = int(np.argmax(np.diagonal(K) if formed else np.einsum("ij,ij->j", L, L)))
    x = K[:, i] if formed else L.T @ L[:, i]
    nx, est = math.sqrt(float(x @ x)), 0.0
    if nx == 0.0:
        return big
    x = x / nx
    for _ in range(20):
        y = K @ x if formed else L.T @ (L @ x)
        ny = math.sqrt(float(y @ y))
        if ny == 0.0:
            return big
        x, prev, est = y * (1.0 / ny), est, math.sqrt(ny)
        if abs(est - prev) <= 1e-3 * est:
            break
    return max(est, big)


@pytest.mark.parametrize("compiled", [True, False])
@pytest.mark.parametrize("shape", [(16, 16), (64, 64), (5, 3), (3, 5), (40, 130), (1, 1)])
def test_norm2_is_the_reference_iteration(shape, compiled):
    """Without the compiled kernels bit for bit the reference up to 128 columns (rows in
    their order); the compiled loop (L^T (L x), no K) is the same iteration: equal to
    rounding."""
    if compiled and not _jit.available():
        pytest.skip("numba not installed (extra 'fast')")
    rng = np.random.default_rng(shape[0] * 1000 + shape[1])
    with kernel_path(bl._power_norm, compiled) as calls:
        for k in range(12):
            L = rng.standard_normal(shape) * 10.0 ** rng.uniform(-6, 6)
            L = (np.asfortranarray(L), np.tril(L), L[::-1], L)[k % 4]
            # (a strided L is copied above 128 columns, a row-reversed one read unreversed:
            # other bits)
            if compiled or shape[1] > 128 or k % 4 == 2:
                assert bl.norm2(L) == pytest.approx(_norm2_reference(L), rel=1e-12, abs=0)
            else:
                assert bl.norm2(L) == _norm2_reference(L)
        assert bl.norm2(np.zeros(shape)) == 0.0
    # (13: the kernel also reads max |L| = 0 of the zero matrix, then its answer is 0)
    assert len(calls) == (13 if compiled and shape[1] <= 128 else 0)


def test_frobenius_helper_is_numpys_norm():
    rng = np.random.default_rng(2)
    for X in (rng.standard_normal((7, 5)), np.asfortranarray(rng.standard_normal((6, 9))),
              rng.standard_normal((8, 8))[::2, 1:], np.zeros((0, 3))):
        assert math.sqrt(bl.fro2(X)) == np.linalg.norm(X)


def test_rounding_terms_equal_the_reference_expression():
    for name in ("dense16", "diagonal", "fir"):
        G = SYSTEMS[name]()
        F = stable_gramian_factors(G)
        hsv = bl.hsv_svd(F.Lc, F.Lo, G.n)[0]
        floor = bl.noise_floor(hsv, F.Lc, F.Lo, F.rho)
        rounding, unit = rounding_terms(G, hsv, floor, F.rho)
        n = hsv.size
        ref_unit = ROUNDING_FACTOR * n * EPS * 2.0 * float(np.sum(hsv))  # no ||D||: D_r = D
        ref = (ref_unit / max(1.0 - F.rho * F.rho, EPS)
               + 2.0 * (floor / n) * (n - np.arange(n + 1)))
        assert unit == ref_unit and np.array_equal(rounding, ref)
        # match_dc: the computed D_r = D + correction adds eps ||D||_F to every order
        rounding_dc, unit_dc = rounding_terms(G, hsv, floor, F.rho, True)
        ref_dc = (ref_unit / max(1.0 - F.rho * F.rho, EPS) + EPS * float(np.linalg.norm(G.D))
                  + 2.0 * (floor / n) * (n - np.arange(n + 1)))
        assert unit_dc == ref_unit and np.array_equal(rounding_dc, ref_dc)


@pytest.mark.parametrize("order", [8, 9])
def test_rounding_term_uses_the_final_left_projection(order):
    """The conditioning ||T||_F ||Ti||_F in the rounding term is that of the returned T, Ti:
    on this system (HSVs down to 9e-11 sigma_1) the Newton step moves Ti by ~1e-7, so a
    conditioning taken before it would not give this equality."""
    from tests.lti.test_strategies import _modal9

    G = _modal9()
    res = balanced_truncation(G, order=order, method="sr")
    F = stable_gramian_factors(G)
    hsv = bl.hsv_svd(F.Lc, F.Lo, G.n)[0]
    floor = bl.noise_floor(hsv, F.Lc, F.Lo, F.rho)
    rounding, unit = rounding_terms(G, hsv, floor, F.rho)
    kappa = float(np.linalg.norm(res.T) * np.linalg.norm(res.Ti))
    assert res.order == order
    assert res.rounding_term == float(rounding[order] + unit * kappa)
    assert np.linalg.norm(res.Ti @ res.T - np.eye(order)) < 1e-12


def test_tail_sums_equal_the_reversed_cumsum():
    """bounds[k] = 2 sum_{i >= k} sigma_i + rounding[k], the sums as the reversed cumsum."""
    rng = np.random.default_rng(4)
    for n in (0, 1, 2, 7, 64):
        G = DiscreteLTI(np.diag(0.9 * rng.random(n)), np.ones((n, 1)), np.ones((1, n)))
        F = stable_gramian_factors(G)
        red = bl.reduce_stable(G, F.Lc, F.Lo, Rule(order=0), "sr", False, 2, rho=F.rho)
        tail = np.concatenate([np.cumsum(red.hsv[::-1])[::-1], [0.0]])
        assert red.bounds.shape == (n + 1,)
        assert np.array_equal(red.bounds, 2.0 * tail + red.rounding)


# ------------------------------------------------------------ the reduced system


def test_reduced_system_shares_the_read_only_feedthrough():
    """Truncation keeps G's D exactly: the reduced system shares G's read-only D (no copy;
    for D = 0 no fresh zeros and no scan), and all its arrays are read-only."""
    G = _dense(16, 1)
    res = balanced_truncation(G, order=4)
    assert res.reduced.D is G.D
    assert not any(getattr(res.reduced, X).flags.writeable for X in "ABCD")
    Z = DiscreteLTI(G.A, G.B, G.C)
    zres = balanced_truncation(Z, order=4)
    assert zres.reduced.D is Z.D and not np.any(zres.reduced.D)
    assert zres.reduced.D.shape == (2, 2)


def test_singular_perturbation_refuses_a_singular_i_minus_a22():
    """The SPA step by LAPACK getrf/getrs (sla.lu_factor/lu_solve's routines): a discarded
    state with A22 = 1 exactly (given factors, so no stability test stands in the way)
    gives the documented SolverError, as before, and a regular one the lu_solve result."""
    G = DiscreteLTI(np.diag([0.5, 1.0]), [[1.0], [1.0]], [[1.0, 1.0]])
    L = np.diag([2.0, 1.0])  # Lo^T Lc = diag(4, 1): state 2 (A22 = 1) is discarded at r = 1
    with pytest.raises(SolverError, match="I - A22 is singular"):
        balanced_truncation_from_factors(G, L, L, order=1, match_dc=True)
    H = DiscreteLTI(np.diag([0.5, 0.25]), [[1.0], [1.0]], [[1.0, 1.0]])
    res = balanced_truncation_from_factors(H, L, L, order=1, match_dc=True)
    # balanced coordinates: x1 = 2 x_1 / 2, so A11 = 0.5, A22 = 0.25, B = C^T = [1, 1]
    # (scaled by the factors): G_r(1) = G(1) = 1 / 0.5 + 1 / 0.75
    Gr = res.reduced
    dc = (Gr.C @ np.linalg.solve(np.eye(1) - Gr.A, Gr.B) + Gr.D)[0, 0]
    assert dc == pytest.approx(1.0 / 0.5 + 1.0 / 0.75, rel=1e-14, abs=0)


@pytest.mark.parametrize("m, p", [(1, 2), (40, 3)])
def test_resolvent_gains_with_the_cached_triangle(m, p):
    """The Schur rounding term with SchurForm's cached complex triangle (as balanced
    truncation passes it) equals the one that recomputes it, bit for bit: complex pairs,
    real eigenvalues, and a wide B (compressed first)."""
    from lti._rounding import resolvent_gains, schur_rounding
    from lti.lyapunov import real_schur

    rng = np.random.default_rng(m)
    A = rng.standard_normal((12, 12))
    A *= 0.9 / np.max(np.abs(np.linalg.eigvals(A)))
    S = real_schur(A)
    assert np.count_nonzero(np.diag(S.T, -1))  # there are 2x2 blocks to rotate
    B, C = S.Z.T @ rng.standard_normal((12, m)), rng.standard_normal((p, 12)) @ S.Z
    tri = S.complex_triangle()
    assert resolvent_gains(S.T, B, C, tri) == resolvent_gains(S.T, B, C)
    assert schur_rounding(S.T, B, C, 4.0, tri) == schur_rounding(S.T, B, C, 4.0)
    D = np.diag(np.linspace(-0.8, 0.9, 5))  # real: no rotations
    SD = real_schur(D)
    assert (resolvent_gains(SD.T, np.ones((5, 1)), np.ones((2, 5)), SD.complex_triangle())
            == resolvent_gains(SD.T, np.ones((5, 1)), np.ones((2, 5))))
