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
    monkeypatch.setattr(core, "LeadingSVD", lambda M: made.append(1) or sl.LeadingSVD(M))
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
