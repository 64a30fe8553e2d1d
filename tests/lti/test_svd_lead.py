"""lti._svd_lead: all singular values by dqds and the leading vectors by inverse iteration
(checked), against LAPACK dgesdd; balanced truncation on that route against the dgesdd one."""

import numpy as np
import pytest

import lti._bt_core as core
import lti._svd_lead as sl
from lti import DiscreteLTI, balanced_truncation, hinf_norm
from tests.lti.jit_helpers import needs_compiled


def _matrix(n, kind, seed=0):
    rng = np.random.default_rng(seed)
    Q1, _ = np.linalg.qr(rng.standard_normal((n, n)))
    Q2, _ = np.linalg.qr(rng.standard_normal((n, n)))
    if kind == "graded":  # HSV-like decay over 12 orders
        s = np.logspace(0, -12, n)
    elif kind == "ties":  # exact repeats and a near-repeat in the leading part
        s = np.r_[[5.0] * 3, [2.0, 2.0 * (1 + 1e-12)], np.linspace(1.0, 1e-6, n - 5)]
    elif kind == "dominant":  # one value far above the rest (the slow BT family)
        s = np.r_[4e4, np.logspace(1.6, -11, n - 1)]
    else:
        return rng.standard_normal((n, n))
    return np.asfortranarray((Q1 * s) @ Q2.T)


@needs_compiled
@pytest.mark.parametrize("kind", ["random", "graded", "ties", "dominant"])
@pytest.mark.parametrize("n, k", [(40, 10), (96, 24), (130, 64)])
def test_values_and_leading_vectors_against_dgesdd(kind, n, k):
    from scipy.linalg import lapack

    M = _matrix(n, kind, n)
    U2, s2, Vt2, _ = lapack.dgesdd(M, compute_uv=1, full_matrices=0)
    L = sl.LeadingSVD(M)
    np.testing.assert_allclose(L.values, s2, rtol=0, atol=8 * n * np.finfo(float).eps * s2[0])
    out = L.vectors(k)
    assert out is not None  # the check passes on these (ties: Gram-Schmidt in the cluster)
    U, Vt = out
    assert U.shape == (n, k) and Vt.shape == (k, n)
    tol = 8 * n * np.finfo(float).eps
    np.testing.assert_allclose(U.T @ U, np.eye(k), atol=tol)
    np.testing.assert_allclose(Vt @ Vt.T, np.eye(k), atol=tol)
    np.testing.assert_allclose(M @ Vt.T, U * L.values[:k], atol=tol * s2[0])
    np.testing.assert_allclose(M.T @ U, Vt.T * L.values[:k], atol=tol * s2[0])
    # the same subspaces as dgesdd's where the values are separated (projector distance)
    gaps = np.abs(np.diff(s2[: k + 1])) / s2[0]
    if gaps[-1] > 1e-8:
        P, P2 = U @ U.T, U2[:, :k] @ U2[:, :k].T
        assert np.abs(P - P2).max() <= 1e-13 / gaps[-1]


@needs_compiled
def test_vectors_refused_when_the_check_fails(monkeypatch):
    M = _matrix(50, "graded")
    L = sl.LeadingSVD(M)
    monkeypatch.setattr(sl, "_EPS", 0.0)  # no residual passes a zero tolerance
    assert L.vectors(10) is None
    assert L.vectors(sl.MAX_VECTORS + 1) is None


def test_unavailable_route_says_so(monkeypatch):
    monkeypatch.setenv("LTI_DISABLE_JIT", "1")
    assert sl.LeadingSVD(_matrix(40, "random")).values is None
    monkeypatch.delenv("LTI_DISABLE_JIT")
    assert sl.LeadingSVD(np.zeros((40, 40))).values is None  # M = 0: dgesdd
    assert sl.LeadingSVD(np.ones((5, 4))).values is None  # not square


@needs_compiled
def test_kernel_source_is_the_compiled_kernel():
    M = _matrix(20, "graded", 3)
    L = sl.LeadingSVD(M)
    s = L.values
    args = (L._d / s[0], L._e[:19] / s[0], s / s[0], 6)
    out = []
    for f in (sl._tgk_vectors_py, sl._tgk_vectors.compiled()):
        Ub, Vb = np.empty((20, 6), order="F"), np.empty((20, 6), order="F")
        out.append((f(*args, Ub, Vb), Ub, Vb))
    assert out[0][0] <= 1e-14 and out[1][0] <= 1e-14
    np.testing.assert_allclose(out[0][1], out[1][1], atol=1e-13)
    np.testing.assert_allclose(out[0][2], out[1][2], atol=1e-13)


@needs_compiled
@pytest.mark.parametrize("match_dc", [False, True])
def test_balanced_truncation_on_the_leading_route_equals_dgesdd_route(match_dc, monkeypatch):
    """n = 100 >= LEAD_MIN_N, slow decay (the Schur path): the same HSVs and bounds to
    rounding, models within their bound of each other, and the error inside the bounds."""
    rng = np.random.default_rng(100)
    A = rng.standard_normal((100, 100))
    A *= 0.9999 / np.max(np.abs(np.linalg.eigvals(A)))
    G = DiscreteLTI(A, rng.standard_normal((100, 2)), rng.standard_normal((2, 100)))
    calls = []
    orig = sl.LeadingSVD.vectors
    monkeypatch.setattr(sl.LeadingSVD, "vectors", lambda self, k: calls.append(k) or orig(self, k))
    made = []
    monkeypatch.setattr(core, "LeadingSVD", lambda *a: made.append(1) or sl.LeadingSVD(*a))
    fast = balanced_truncation(G, order=25, match_dc=match_dc)
    # (SPA needs the vectors up to the minimal order, unknown before the values: dgesdd)
    assert calls == ([] if match_dc else [25]) and made == ([] if match_dc else [1])
    balanced_truncation(G, rel_tol=1e-3)  # no explicit order: dgesdd, no values twice
    balanced_truncation(G, order=sl.MAX_VECTORS + 1)  # more vectors than it computes
    assert len(made) == (0 if match_dc else 1)
    monkeypatch.setattr(core, "LEAD_MIN_N", 10**9)
    ref = balanced_truncation(G, order=25, match_dc=match_dc)
    assert calls == ([] if match_dc else [25])
    np.testing.assert_allclose(fast.hsv, ref.hsv, rtol=0, atol=1e-14 * ref.hsv[0])
    assert fast.error_bound == pytest.approx(ref.error_bound, rel=1e-9)
    err = hinf_norm(G - fast.reduced).value
    assert fast.lower_bound <= err <= fast.error_bound
    assert hinf_norm(fast.reduced - ref.reduced).value <= 1e-6 * fast.error_bound


def _tgk_sequential(d, e, s, k, Ub, Vb):
    """The inverse iteration one value after the other, as _tgk_vectors_py was written before
    its factorisations and solves ran side by side (the reference of the lane-wise code:
    the same operations per value, so the same numbers)."""
    eps = np.finfo(float).eps
    n = d.shape[0]
    N = 2 * n
    off = np.zeros(N)
    off[0::2] = d
    off[1:N - 1:2] = e
    X = np.zeros((k, N))
    worst, first = 0.0, 0
    for i in range(k):
        sig = s[i]
        if i > 0 and s[i - 1] - sig > 1e-3:
            first = i
        dd, dl, du, du2 = np.full(N, -sig), off.copy(), off.copy(), np.zeros(N)
        piv = np.zeros(N, dtype=int)
        for j in range(N - 1):
            if abs(dd[j]) >= abs(dl[j]):
                piv[j] = j
                if dd[j] == 0.0:
                    dd[j] = eps
                f = dl[j] / dd[j]
                dl[j] = f
                dd[j + 1] -= f * du[j]
            else:
                piv[j] = j + 1
                f = dd[j] / dl[j]
                dd[j] = dl[j]
                dl[j] = f
                t = du[j]
                du[j] = dd[j + 1]
                dd[j + 1] = t - f * dd[j + 1]
                if j < N - 2:
                    du2[j] = du[j + 1]
                    du[j + 1] = -f * du[j + 1]
        dd[dd == 0.0] = eps
        dd = 1.0 / dd
        x = X[i]
        x[:] = 1.0 + ((7 * np.arange(N) + 3 * i) % 11) / 11.0
        for _ in range(2):
            for j in range(N - 1):
                ip = piv[j]
                t = x[2 * j + 1 - ip] - dl[j] * x[ip]
                x[j] = x[ip]
                x[j + 1] = t
            x[N - 1] *= dd[N - 1]
            x[N - 2] = (x[N - 2] - du[N - 2] * x[N - 1]) * dd[N - 2]
            for j in range(N - 3, -1, -1):
                x[j] = (x[j] - du[j] * x[j + 1] - du2[j] * x[j + 2]) * dd[j]
            x *= 1.0 / np.abs(x).max()
        for _ in range(2):
            for p in range(first, i):
                x -= (X[p] @ x) * X[p]
            x *= 1.0 / np.sqrt(x @ x)
        Vb[:, i] = x[0::2] / np.sqrt(x[0::2] @ x[0::2])
        Ub[:, i] = x[1::2] / np.sqrt(x[1::2] @ x[1::2])
        bv = d * Vb[:, i] + np.r_[e * Vb[1:, i], 0.0]
        btu = d * Ub[:, i] + np.r_[0.0, e * Ub[:-1, i]]
        worst = max(worst, np.sqrt(max(((bv - sig * Ub[:, i]) ** 2).sum(),
                                       ((btu - sig * Vb[:, i]) ** 2).sum())))
    return worst


@needs_compiled
@pytest.mark.parametrize("kind", ["random", "graded", "ties", "dominant"])
def test_lane_wise_inverse_iteration_is_the_sequential_one(kind):
    """The k factorisations and solves side by side (one lane per value, pivoting as
    selects) give the vectors of the one-value-at-a-time iteration, to rounding (the
    Gram-Schmidt sums in another order)."""
    n, k = 40, 12
    L = sl.LeadingSVD(_matrix(n, kind, 5))
    s = L.values
    args = (L._d / s[0], L._e[: n - 1] / s[0], s / s[0], k)
    out = []
    for f in (_tgk_sequential, sl._tgk_vectors_py, sl._tgk_vectors.compiled()):
        Ub, Vb = np.empty((n, k)), np.empty((n, k))
        out.append((f(*args, Ub, Vb), Ub, Vb))
    for res, Ub, Vb in out[1:]:
        assert res <= 4 * n * np.finfo(float).eps
        # the spanned subspaces; the vectors themselves where no value is repeated (inside
        # an exact tie they are any basis, which a different summation order changes)
        for X, R in ((Ub, out[0][1]), (Vb, out[0][2])):
            np.testing.assert_allclose(X @ X.T, R @ R.T, rtol=0, atol=1e-13)
            if kind != "ties":
                np.testing.assert_allclose(X, R, rtol=0, atol=1e-14)


@needs_compiled
def test_back_transformation_applies_the_bidiagonal_reduction():
    """_back_transform: ``Q U``, ``P V`` of dgebrd's reflectors; applied to the identity they
    are orthogonal ``Q``, ``P`` with ``Q^T M P`` the upper bidiagonal ``B`` (d, e)."""
    n = 30
    M = _matrix(n, "random", 2)
    L = sl.LeadingSVD(M)
    for f in (sl._back_transform_py, sl._back_transform.compiled()):
        Q, P = np.eye(n), np.eye(n)
        f(L._A, L._tq, L._tp, Q, P)
        tol = 1e-14 * n
        np.testing.assert_allclose(Q.T @ Q, np.eye(n), atol=tol)
        np.testing.assert_allclose(P.T @ P, np.eye(n), atol=tol)
        B = np.diag(L._d) + np.diag(L._e[: n - 1], 1)
        np.testing.assert_allclose(Q.T @ M @ P, B, atol=tol * np.abs(M).max())


@needs_compiled
def test_product_formed_in_the_block_is_the_product():
    """LeadingSVD(None, (Lc, Lo)) forms M = Lo^T Lc as (Lc^T Lo)^T in its block: the same
    values and vectors, bit for bit, as LeadingSVD((Lc.T @ Lo).T)."""
    rng = np.random.default_rng(3)
    Lc = np.tril(rng.standard_normal((50, 50)))[::-1]  # the Schur path's row-reversed factor
    Lo = np.tril(rng.standard_normal((50, 50)))
    a, b = sl.LeadingSVD((Lc.T @ Lo).T), sl.LeadingSVD(None, (Lc, Lo))
    assert np.array_equal(a.values, b.values)
    for x, y in zip(a.vectors(9), b.vectors(9), strict=True):
        assert np.array_equal(x, y)


@needs_compiled
@pytest.mark.parametrize("method", ["sr", "bfsr"])
def test_bt_at_64_states_takes_the_leading_route(method, monkeypatch):
    """n = 64 >= LEAD_MIN_N (the slow family's smallest benchmark size): the leading route,
    with the HSVs, bounds and reduced transfer function of the dgesdd route to rounding."""
    assert core.LEAD_MIN_N <= 64
    rng = np.random.default_rng(64)
    A = rng.standard_normal((64, 64))
    A *= 0.9999 / np.max(np.abs(np.linalg.eigvals(A)))
    G = DiscreteLTI(A, rng.standard_normal((64, 2)), rng.standard_normal((2, 64)),
                    rng.standard_normal((2, 2)))
    made = []
    monkeypatch.setattr(core, "LeadingSVD", lambda *a: made.append(1) or sl.LeadingSVD(*a))
    fast = balanced_truncation(G, order=16, method=method)
    assert made == [1]
    monkeypatch.setattr(core, "LEAD_MIN_N", 10**9)
    ref = balanced_truncation(G, order=16, method=method)
    assert made == [1]
    np.testing.assert_allclose(fast.hsv, ref.hsv, rtol=0, atol=1e-13 * ref.hsv[0])
    assert fast.error_bound == pytest.approx(ref.error_bound, rel=1e-9)
    assert fast.rounding_term == pytest.approx(ref.rounding_term, rel=1e-6)
    # (the models differ by rounding relative to their gain, ~1e5 at z = 1 for rho = 0.9999)
    gain = hinf_norm(ref.reduced).value
    assert hinf_norm(fast.reduced - ref.reduced).value <= 1e-10 * gain
    err = hinf_norm(G - fast.reduced).value
    assert fast.lower_bound <= err <= fast.error_bound
