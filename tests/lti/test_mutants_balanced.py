"""Tests that kill the surviving mutants of ``lti/balanced.py`` (issue 14, mutation testing).

Each test says what the mutants it is for get wrong; the mutants are listed in
``benchmarks/results/mutmut_balanced.md`` (written by ``benchmarks/mutation_report.py`` from
mutmut's own results). References are independent of the code under test where possible:
scipy's dense Lyapunov solver for the Gramians, closed forms for one-state and diagonal
systems, numpy's SVD for norms.
"""

from __future__ import annotations

import inspect
import os
import warnings
from pathlib import Path

import numpy as np
import pytest
import scipy.linalg as sla
import scipy.sparse as sp

import lti
from lti import (
    DiscreteLTI,
    InvalidArgumentError,
    ShapeError,
    UnstableSystemError,
    balanced_truncation,
    balanced_truncation_from_factors,
    hankel_singular_values,
)
from lti._bt_core import norm2 as _norm2
from lti.gramians import stable_gramian_factors
from lti.lyapunov import lyapunov_factor
from lti.testing.systems import heat_2d

EPS = np.finfo(np.float64).eps


def _heat(N: int = 10, d: float = 0.0, dt=True):
    """2-D heat equation (lti.testing.systems.heat_2d, patches of half-width 0.15), sparse
    ``A``, feedthrough ``d``; and the same system with a dense ``A``."""
    A, B, C = heat_2d(N, half_width=0.15)
    D = np.full((2, 1), d)
    return DiscreteLTI(A, B, C, D, dt), DiscreteLTI(A.toarray(), B, C, D, dt)


# ------------------------------------------------------------- sparse A (low-rank)


def test_sparse_path_keeps_d_dt_method_and_options():
    """Through the low-rank factors: D and dt of the system reach the reduced model,
    method and match_dc are passed on (sr is not bfsr; SPA matches the DC gain), and the
    result has k HSVs, k + 1 bounds and minimal_order <= k."""
    Gs, Gd = _heat(d=0.25, dt=0.1)
    sr = balanced_truncation(Gs, order=3, method="sr")
    bf = balanced_truncation(Gs, order=3, method="bfsr")
    spa = balanced_truncation(Gs, order=3, match_dc=True)
    k = sr.hsv.size
    assert 3 < k < Gs.n
    for res, method, dc in ((sr, "sr", False), (bf, "bfsr", False), (spa, "sr", True)):
        assert res.method == method and res.match_dc is dc
        assert res.reduced.dt == 0.1
        if not dc:  # truncation keeps D; SPA adds C2 (I - A22)^{-1} B2 to it
            np.testing.assert_array_equal(res.reduced.D, Gd.D)
        assert res.error_bounds.shape == (k + 1,) and res.hsv.shape == (k,)
        assert isinstance(res.minimal_order, int) and 3 <= res.minimal_order <= k
    np.testing.assert_allclose(bf.T.T @ bf.T, np.eye(3), atol=1e-12)  # bfsr: orthonormal T
    assert np.linalg.norm(sr.T.T @ sr.T - np.eye(3)) > 1e-3  # sr: balancing, not orthonormal
    g1 = Gd.frequency_response([0.0])[0]
    np.testing.assert_allclose(spa.reduced.frequency_response([0.0])[0], g1, rtol=1e-8)
    assert abs(sr.reduced.frequency_response([0.0])[0] - g1).max() > 1e-6 * abs(g1).max()


def test_sparse_order_may_equal_the_resolved_rank_and_rel_tol_works():
    Gs, Gd = _heat()
    k = balanced_truncation(Gs, order=1).hsv.size
    full = balanced_truncation(Gs, order=k)  # order == k is allowed, k + 1 is not
    assert full.order == k and full.reduced.n == k
    with pytest.raises(InvalidArgumentError, match=r"resolved by the low-rank .* with a "
                                                   r"smaller `tol` resolves more\)$"):
        balanced_truncation(Gs, order=k + 1)
    rs, rd = balanced_truncation(Gs, rel_tol=1e-3), balanced_truncation(Gd, rel_tol=1e-3)
    assert rs.order == rd.order == int(np.sum(rd.hsv >= 1e-3 * rd.hsv[0]))


# ------------------------------------------------------------------ from factors


def _dense(seed: int = 3, n: int = 8, m: int = 2, p: int = 2, dt=True):
    rng = np.random.default_rng(seed)
    Q, _ = np.linalg.qr(rng.standard_normal((n, n)))
    A = Q @ np.diag(rng.uniform(-0.9, 0.9, n)) @ Q.T
    return DiscreteLTI(A, rng.standard_normal((n, m)), rng.standard_normal((p, n)),
                       rng.standard_normal((p, m)), dt)


def test_from_factors_passes_method_match_dc_dt_and_control_type_on():
    G = _dense(dt=0.5)
    Lc, Lo = lyapunov_factor(G.A, G.B), lyapunov_factor(G.A, G.C.T, transpose=True)
    sr = balanced_truncation_from_factors(G, Lc, Lo, order=3, method="sr")
    bf = balanced_truncation_from_factors(G, Lc, Lo, order=3, method="bfsr")
    spa = balanced_truncation_from_factors(G, Lc, Lo, order=3, match_dc=True)
    assert (sr.method, bf.method, spa.method) == ("sr", "bfsr", "sr")
    assert (sr.match_dc, spa.match_dc) == (False, True)
    np.testing.assert_allclose(bf.T.T @ bf.T, np.eye(3), atol=1e-12)
    assert np.linalg.norm(sr.T.T @ sr.T - np.eye(3)) > 1e-3
    g1 = G.frequency_response([0.0])[0]
    np.testing.assert_allclose(spa.reduced.frequency_response([0.0])[0], g1, rtol=1e-10)
    assert sr.reduced.dt == 0.5 and spa.reduced.dt == 0.5
    assert repr(sr).startswith("BalancedTruncation(order=3, n=8, n_unstable=0, method='sr'")
    control = pytest.importorskip(
        "control", reason="python-control (optional peer) is not installed")
    res = balanced_truncation_from_factors(control.ss(G.A, G.B, G.C, G.D, 0.5), Lc, Lo, order=3)
    assert isinstance(res.reduced, control.StateSpace) and res.reduced.dt == 0.5


def test_from_low_rank_factors_order_zero_bfsr_has_n_rows():
    """Factors with fewer columns than n: the empty projections still have n rows/columns."""
    G = _dense()
    Lc, Lo = lyapunov_factor(G.A, G.B), lyapunov_factor(G.A, G.C.T, transpose=True)
    U, s, _ = np.linalg.svd(Lc, full_matrices=False)
    Lc3 = U[:, :3] * s[:3]  # rank 3, (8, 3)
    U, s, _ = np.linalg.svd(Lo, full_matrices=False)
    Lo4 = U[:, :4] * s[:4]  # rank 4, (8, 4)
    for method in ("sr", "bfsr"):
        for Lc_, Lo_ in ((Lc3, Lo), (Lc, Lo4), (Lc3, Lo4)):
            res = balanced_truncation_from_factors(G, Lc_, Lo_, order=0, method=method)
            assert res.T.shape == (8, 0) and res.Ti.shape == (0, 8) and res.reduced.n == 0


def test_from_an_empty_factor_all_hsvs_are_zero():
    """A controllability factor with no columns (P = 0): Lo^T Lc is empty, n zero HSVs."""
    G = _dense()
    Lo = lyapunov_factor(G.A, G.C.T, transpose=True)
    res = balanced_truncation_from_factors(G, np.zeros((8, 0)), Lo, rel_tol=0.5)
    assert res.order == 0 and res.minimal_order == 0
    np.testing.assert_array_equal(res.hsv, np.zeros(8))


def test_factor_shape_errors_name_the_factor():
    G = _dense()
    Lc, Lo = lyapunov_factor(G.A, G.B), lyapunov_factor(G.A, G.C.T, transpose=True)
    with pytest.raises(ShapeError, match=r"^`Lc` must have n = 8 rows"):
        balanced_truncation_from_factors(G, Lc[:5], Lo, order=2)
    with pytest.raises(ShapeError, match=r"^`Lo` must have n = 8 rows"):
        balanced_truncation_from_factors(G, Lc, Lo[:5], order=2)


_LTI_DIR = str(Path(lti.__file__).resolve().parent)


def _warned_here(record, line: int) -> None:
    """Every warning is attributed to the user's line (file and line number), never to lti's
    own code. Not checkable under mutmut (MUTANT_UNDER_TEST set): its trampolines add a
    stack frame per mutated function, so stacklevel points elsewhere even for the original
    code; there only the presence of the warning is checked."""
    assert record, "expected a warning"
    if "MUTANT_UNDER_TEST" in os.environ:
        return
    where = [(x.filename, x.lineno) for x in record]
    assert not any(str(Path(f).resolve()).startswith(_LTI_DIR) for f, _ in where), where
    assert all(x == (__file__, line) for x in where), (line, where)


def test_order_warnings_point_at_the_caller():
    """The order-selection warnings (tol met only by the full order, an order splitting a
    tie) name the line of the user's call, on the dense, the from-factors, the sparse and
    the unstable path (stacklevel)."""
    G = _dense()
    Lc, Lo = lyapunov_factor(G.A, G.B), lyapunov_factor(G.A, G.C.T, transpose=True)
    Gs, _ = _heat()  # sparse: two decoupled copies, every HSV tied; order 1 splits a tie
    G2 = DiscreteLTI(sp.block_diag([Gs.A, Gs.A]).tocsr(), sla.block_diag(Gs.B, Gs.B),
                     sla.block_diag(Gs.C, Gs.C))
    with warnings.catch_warnings(record=True) as w1:
        warnings.simplefilter("always")
        line = inspect.currentframe().f_lineno + 1
        balanced_truncation(G, tol=1e-300)
    _warned_here(w1, line)
    with warnings.catch_warnings(record=True) as w2:
        warnings.simplefilter("always")
        line = inspect.currentframe().f_lineno + 1
        balanced_truncation_from_factors(G, Lc, Lo, tol=1e-300)
    _warned_here(w2, line)
    with warnings.catch_warnings(record=True) as w3:
        warnings.simplefilter("always")
        line = inspect.currentframe().f_lineno + 1
        balanced_truncation(G2, order=1)
    _warned_here(w3, line)
    Gu = DiscreteLTI(np.diag([1.5, 0.5, -0.3]), np.ones((3, 1)), np.ones((1, 3)))  # unstable
    with warnings.catch_warnings(record=True) as w4:
        warnings.simplefilter("always")
        line = inspect.currentframe().f_lineno + 1
        balanced_truncation(Gu, tol=1e-300)
    _warned_here(w4, line)


def test_spa_pole_warning_is_a_user_warning_at_the_caller():
    """SPA of a firwin FIR at order 1 (A_r = -1 + O(1e-14)): truncation is returned instead,
    with a UserWarning (full text) at the line of the user's call."""
    from scipy import signal  # scipy is a core dependency: import it plainly
    rng = np.random.default_rng(3019)  # the case of test_regressions
    N = int(rng.integers(8, 65))
    h = signal.firwin(N + 1, rng.uniform(0.1, 0.9))
    G = DiscreteLTI(np.diag(np.ones(N - 1), -1), np.eye(N)[:, :1], h[1:][None, :],
                    h[:1][None, :])
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        line = inspect.currentframe().f_lineno + 1
        res = balanced_truncation(G, order=1, match_dc=True)
    assert res.match_dc is False and np.isfinite(res.error_bound)  # truncation instead
    assert len(w) == 1 and w[0].category is UserWarning
    assert str(w[0].message).endswith(
        "the balanced truncation of the same order is returned instead (result.match_dc is "
        "False; same bounds)")
    _warned_here(w, line)


def test_zero_system_has_minimal_order_zero():
    """B = 0: every HSV is exactly 0 and so is the noise floor; none of them counts (HSVs
    must exceed the floor), so tol and rel_tol keep no state and an explicit order is capped
    at 0 with a warning."""
    G = DiscreteLTI(np.diag([0.5, -0.3, 0.2]), np.zeros((3, 1)), np.ones((1, 3)))
    for kw in ({"tol": 1e-6}, {"rel_tol": 0.5}):
        res = balanced_truncation(G, **kw)
        assert res.order == 0 and res.minimal_order == 0 and np.all(res.hsv == 0.0)
    with pytest.warns(UserWarning, match="only 0 Hankel singular values"):
        res = balanced_truncation(G, order=2)
    assert res.order == 0 and res.reduced.n == 0


# ------------------------------------------------- noise floor and rounding term


def test_norm2_estimates_the_spectral_norm():
    """_norm2: power iteration on L^T L, never below the largest entry; exact zero and
    empty inputs give 0."""
    rng = np.random.default_rng(5)
    U, _ = np.linalg.qr(rng.standard_normal((12, 4)))
    V, _ = np.linalg.qr(rng.standard_normal((4, 4)))
    L = U @ np.diag([3.0, 2.5, 1.0, 0.5]) @ V.T  # ||L||_2 = 3, entries < 2
    assert np.max(np.abs(L)) < 2.0
    assert _norm2(L) == pytest.approx(3.0, rel=2e-3, abs=0) and _norm2(L) <= 3.0 * (1 + 1e-12)
    K = L.T @ L
    x = K[:, int(np.argmax(np.diagonal(K)))]
    one_step = np.sqrt(np.linalg.norm(K @ (x / np.linalg.norm(x))))
    assert one_step < 0.9 * 3.0  # one power step is far off: the iteration must go on
    # small scale: the stopping test is relative to the estimate
    assert _norm2(1e-3 * L) == pytest.approx(3e-3, rel=2e-3, abs=0)
    # scaled so that the first step gives 1: the first test compares with 0, not 1
    assert _norm2(L / one_step) == pytest.approx(3.0 / one_step, rel=2e-3, abs=0)
    assert _norm2(np.zeros((5, 3))) == 0.0 and _norm2(np.zeros((5, 0))) == 0.0
    e = np.zeros((4, 1))
    e[2] = -2.0
    assert _norm2(e) == 2.0 and _norm2(np.array([[-2.0]])) == 2.0
    # K = L^T L = [[1]] exactly (nx = ny = 1): the norm 1, not the largest entry 0.5
    assert _norm2(np.full((4, 1), 0.5)) == 1.0
    # start from the column of K with the largest diagonal: K = diag(1, 8); from column 0
    # (an eigenvector) the iteration would stay at 1 and return the largest entry 2
    L2 = np.array([[1.0, 0.0], [0.0, 2.0], [0.0, 2.0]])
    assert _norm2(L2) == pytest.approx(np.sqrt(8.0), abs=0)


def _nonnormal(n: int = 6, seed: int = 1):
    """A Schur-stable A with departure from normality ~ 1e2: ||Lc|| ||Lo|| >> sigma_1."""
    rng = np.random.default_rng(seed)
    T = np.triu(4.0 * rng.standard_normal((n, n)), 1) + np.diag(rng.uniform(-0.8, 0.8, n))
    Q, _ = np.linalg.qr(rng.standard_normal((n, n)))
    return DiscreteLTI(Q @ T @ Q.T, rng.standard_normal((n, 1)), rng.standard_normal((1, n)))


def _mild(seed: int = 0, n: int = 5):
    """Mildly non-normal: the small-n squared-Smith path takes it, and its spectral-radius
    bound (0.8107) is above the spectral radius (0.7955): 1 - rho^2 differs by 7 %."""
    rng = np.random.default_rng(seed)
    T = np.triu(rng.standard_normal((n, n)), 1) + np.diag(rng.uniform(-0.8, 0.8, n))
    Q, _ = np.linalg.qr(rng.standard_normal((n, n)))
    return DiscreteLTI(Q @ T @ Q.T, rng.standard_normal((n, 1)), rng.standard_normal((1, n)))


def _schur_term(A, B, C) -> float:
    """lti._rounding's Schur term, recomputed with numpy on the original coordinates (the
    resolvent norms and Frobenius norms do not depend on the Schur basis):
    4 n eps ((1 + ||A||_F) s + ||B||_F c + ||C||_F b), s, c, b the largest ||C R|| ||R B||,
    ||C R||, ||R B|| (Frobenius) over 32 angles of [0, pi] and the eigenvalue angles."""
    n = A.shape[0]
    lam = np.linalg.eigvals(A)
    near = np.argsort(np.abs(np.abs(lam) - 1.0))[:32]
    theta = np.unique(np.concatenate([np.linspace(0.0, np.pi, 32), np.abs(np.angle(lam[near]))]))
    gains = []
    for z in np.exp(1j * theta):
        M = z * np.eye(n) - A
        rb, cr = np.linalg.norm(np.linalg.solve(M, B)), np.linalg.norm(np.linalg.solve(M.T, C.T))
        gains.append((rb * cr, cr, rb))
    s, c, b = np.max(np.array(gains), axis=0)
    return 4.0 * n * EPS * ((1.0 + np.linalg.norm(A)) * s + np.linalg.norm(B) * c
                            + np.linalg.norm(C) * b)


@pytest.mark.parametrize("match_dc", [False, True])
@pytest.mark.parametrize("system", ["nonnormal", "smith"])
def test_rounding_term_is_the_documented_formula(match_dc, system):
    """BalancedTruncation.rounding_term = 2 (n - r) delta + 4 n eps g (1 / (1 - rho^2) +
    ||T||_F ||Ti||_F), delta = eps max(sigma_1, ||Lc||_2 ||Lo||_2 / (1 - rho^2)),
    g = ||D||_F + 2 sum sigma. ||Lc||_2 ||Lo||_2 = sqrt(||P||_2 ||Q||_2) from scipy's dense
    Gramians; "nonnormal": this term, not sigma_1, sets delta; "smith": the Smith path, whose
    spectral-radius bound (not the spectral radius) enters."""
    G = _nonnormal() if system == "nonnormal" else _mild()
    n, r = G.n, 2
    P = sla.solve_discrete_lyapunov(G.A, G.B @ G.B.T)
    Q = sla.solve_discrete_lyapunov(G.A.T, G.C.T @ G.C)
    F = stable_gramian_factors(G)
    rho = F.rho  # spectral radius (Schur path) or the Smith bound used
    rho_true = np.max(np.abs(np.linalg.eigvals(G.A)))
    assert rho_true <= rho < 1.0
    if system == "smith":  # the bound, not the spectral radius, is what the code uses
        assert F.path == "smith" and (1 - rho_true**2) > 1.05 * (1 - rho**2)
    res = balanced_truncation(G, order=r, match_dc=match_dc)
    s = res.hsv
    scale = np.sqrt(np.linalg.norm(P, 2) * np.linalg.norm(Q, 2)) / (1.0 - rho**2)
    if system == "nonnormal":
        assert scale > 1e2 * s[0]  # the factor term dominates delta
    delta = EPS * max(s[0], scale)
    g = np.linalg.norm(G.D) + 2.0 * np.sum(s)
    kappa = np.linalg.norm(res.T) * np.linalg.norm(res.Ti)
    extra = _schur_term(G.A, G.B, G.C) if F.path == "schur" else 0.0  # none on Smith's path
    expected = 2 * (n - r) * delta + 4 * n * EPS * g * (1.0 / (1.0 - rho**2) + kappa) + extra
    assert res.rounding_term == pytest.approx(expected, rel=2e-3, abs=0)  # _norm2 is an estimate
    assert res.error_bound == pytest.approx(2 * np.sum(s[r:]) + expected, rel=1e-9, abs=0)
    assert res.lower_bound == pytest.approx(max(s[r] - expected, 0.0), rel=1e-9, abs=0)
    assert res.minimal_order == int(np.sum(s > n * delta))


def test_rounding_term_at_order_zero_and_read_only_results():
    """Order 0: T is empty and adds no conditioning term (kappa = 0): rounding_term =
    2 n delta + 4 n eps g / (1 - rho^2). The result's arrays are read-only."""
    G = _nonnormal()
    n = G.n
    P = sla.solve_discrete_lyapunov(G.A, G.B @ G.B.T)
    Q = sla.solve_discrete_lyapunov(G.A.T, G.C.T @ G.C)
    rho = stable_gramian_factors(G).rho
    res = balanced_truncation(G, order=0)
    s = res.hsv
    delta = EPS * max(s[0], np.sqrt(np.linalg.norm(P, 2) * np.linalg.norm(Q, 2)) / (1 - rho**2))
    g = np.linalg.norm(G.D) + 2.0 * np.sum(s)
    expected = 2 * n * delta + 4 * n * EPS * g / (1.0 - rho**2) + _schur_term(G.A, G.B, G.C)
    assert res.T.shape == (n, 0) and res.rounding_term == pytest.approx(expected, rel=2e-3, abs=0)
    for X in (res.hsv, res.error_bounds, res.T, res.Ti):
        assert not X.flags.writeable
    with pytest.raises(ValueError, match="read-only"):
        res.hsv[0] = 0.0


@pytest.mark.parametrize("coupled", [True, False])
def test_rounding_term_of_an_unstable_system_includes_the_decoupling(coupled):
    """Unstable part kept: the stable part's rounding term times the conditioning
    cond = max(1, ||W||_F ||W^-1||_F / n) of the stable/unstable decoupling (W = [W1 W2],
    W^-1 = [V1; V2] from lti.stability.split_unstable): a strongly coupled pair makes
    cond >> 1, a decoupled (diagonal) one cond = 1; the stable part is non-normal, so
    ||Lc|| ||Lo|| / (1 - rho^2) sets delta. D and dt reach the reduced model."""
    from lti.stability import split_unstable

    A = np.array([[0.5, 40.0 if coupled else 0.0, 30.0], [0.0, 1.5, 0.0], [0.0, 0.0, -0.4]])
    G = DiscreteLTI(A, [[1.0], [1.0], [0.5]], [[1.0, 0.3, -1.0]], [[0.1]], 0.5)
    split = split_unstable(G)
    W = np.hstack([split.W1, split.W2])
    V = np.vstack([split.V1, split.V2])
    cond = max(1.0, np.linalg.norm(W) * np.linalg.norm(V) / G.n)
    assert cond > 10.0 if coupled else cond < 1.5
    Gs = split.stable_part(G)
    ns, rs = Gs.n, 1
    P = sla.solve_discrete_lyapunov(Gs.A, Gs.B @ Gs.B.T)
    Q = sla.solve_discrete_lyapunov(Gs.A.T, Gs.C.T @ Gs.C)
    rho = float(np.max(np.abs(np.linalg.eigvals(Gs.A))))
    res = balanced_truncation(G, order=rs + 1)
    assert res.n_unstable == 1
    s = res.hsv
    scale = np.sqrt(np.linalg.norm(P, 2) * np.linalg.norm(Q, 2)) / (1 - rho**2)
    assert scale > 10.0 * s[0]
    delta = EPS * max(s[0], scale)
    g = np.linalg.norm(Gs.D) + 2.0 * np.sum(s)
    kappa = np.linalg.norm(res.T) * np.linalg.norm(res.Ti)
    expected = cond * (2 * (ns - rs) * delta + 4 * ns * EPS * g * (1.0 / (1.0 - rho**2) + kappa)
                       + _schur_term(Gs.A, Gs.B, Gs.C))
    assert res.rounding_term == pytest.approx(expected, rel=2e-3, abs=0)
    assert res.reduced.dt == 0.5 and res.reduced.D[0, 0] == 0.1
    # the unstable path passes method and match_dc on: SPA matches the gain at z = 1
    assert res.method == "sr" and res.match_dc is False
    spa = balanced_truncation(G, order=rs + 1, match_dc=True)
    assert spa.method == "sr" and spa.match_dc is True
    g1 = G.frequency_response([0.0])[0]
    np.testing.assert_allclose(spa.reduced.frequency_response([0.0])[0], g1, rtol=1e-9)
    assert abs(res.reduced.frequency_response([0.0])[0] - g1).max() > 1e-6 * abs(g1).max()
    assert balanced_truncation(G, order=rs + 1, method="bfsr").method == "bfsr"
    control = pytest.importorskip(
        "control", reason="python-control (optional peer) is not installed")
    out = balanced_truncation(control.ss(A, G.B, G.C, G.D, 0.5), order=rs + 1)
    assert isinstance(out.reduced, control.StateSpace) and out.reduced.dt == 0.5


def test_rounding_term_from_factors_uses_the_spectral_radius():
    """balanced_truncation_from_factors: no Smith bound is at hand, so rho is the spectral
    radius of A, and the noise floor is n eps max(sigma_1, ||Lc||_2 ||Lo||_2) (the factors
    are taken as given: no 1 / (1 - rho^2) in it)."""
    G = _nonnormal()
    n, r = G.n, 2
    P = sla.solve_discrete_lyapunov(G.A, G.B @ G.B.T)
    Q = sla.solve_discrete_lyapunov(G.A.T, G.C.T @ G.C)
    Lc, Lo = np.linalg.cholesky(P), np.linalg.cholesky(Q)
    rho = float(np.max(np.abs(np.linalg.eigvals(G.A))))
    res = balanced_truncation_from_factors(G, Lc, Lo, order=r)
    s = res.hsv
    delta = EPS * max(s[0], np.sqrt(np.linalg.norm(P, 2) * np.linalg.norm(Q, 2)))
    g = np.linalg.norm(G.D) + 2.0 * np.sum(s)
    kappa = np.linalg.norm(res.T) * np.linalg.norm(res.Ti)
    expected = 2 * (n - r) * delta + 4 * n * EPS * g * (1.0 / (1.0 - rho**2) + kappa)
    assert res.rounding_term == pytest.approx(expected, rel=2e-3, abs=0)
    assert res.minimal_order == int(np.sum(s > n * delta))


def test_hsv_unstable_message_points_to_balanced_truncation():
    G = DiscreteLTI(np.diag([0.5, 1.5]), np.ones((2, 1)), np.ones((1, 2)))
    with pytest.raises(UnstableSystemError,
                       match=r"balanced_truncation keeps the unstable part and reports "
                             r"the stable part's HSVs\)$"):
        hankel_singular_values(G)
