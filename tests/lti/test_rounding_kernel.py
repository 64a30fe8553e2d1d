"""The compiled resolvent sampling of the Schur rounding term (lti._rounding) against the
NumPy path on the complex triangle and against dense solves: the same sampled norms."""

import numpy as np
import pytest

from lti import _jit, _rounding, balanced_truncation
from lti._rounding import (
    N_ANGLES,
    _resolvent_norms_py,
    resolvent_gains,
    schur_rounding,
)
from lti.lyapunov import real_schur
from lti.system import DiscreteLTI
from tests.lti.jit_helpers import needs_numba


def _random(n, rho, seed, m=2, p=2):
    rng = np.random.default_rng(seed)
    A = rng.standard_normal((n, n))
    A *= rho / np.max(np.abs(np.linalg.eigvals(A)))
    return A, rng.standard_normal((n, m)), rng.standard_normal((p, n))


def _nonnormal(n, seed):  # issue 14's kind: large strictly upper part, real spectrum
    rng = np.random.default_rng(seed)
    T = np.triu(2.0 * rng.standard_normal((n, n)), 1) + np.diag(rng.uniform(-0.95, 0.95, n))
    Q, _ = np.linalg.qr(rng.standard_normal((n, n)))
    return Q @ T @ Q.T, rng.standard_normal((n, 2)), rng.standard_normal((1, n))


CASES = {
    "slow64": lambda: _random(64, 0.9999, 64),
    "bench30": lambda: _random(30, 0.95, 30),
    "wide_tall": lambda: _random(9, 0.9, 1, m=20, p=15),
    "nonnormal": lambda: _nonnormal(20, 3),
    "symmetric": lambda: (lambda A, B, C: ((A + A.T) / 2.2 / np.max(np.abs(np.linalg.eigvalsh(
        (A + A.T) / 2.2))) * 0.9, B, C))(*_random(17, 1.0, 5)),
    "one_pair": lambda: (np.array([[0.3, 0.8], [-0.7, 0.3]]), np.ones((2, 1)), np.ones((1, 2))),
    "scalar": lambda: (np.array([[-0.99]]), np.array([[2.0]]), np.array([[0.5]])),
}


def _numpy_path(mp):
    """Switch off this kernel only (other kernels, e.g. Hammarling's, stay as they are)."""
    mp.setattr(_rounding._resolvent_norms, "compiled", lambda: None)


def _both_paths(T, B, C, monkeypatch):
    fast = resolvent_gains(T, B, C)
    with monkeypatch.context() as mp:
        _numpy_path(mp)
        ref = resolvent_gains(T, B, C)
    return fast, ref


@needs_numba
@pytest.mark.parametrize("case", sorted(CASES))
def test_compiled_gains_equal_the_numpy_path(case, monkeypatch):
    monkeypatch.delenv("LTI_DISABLE_JIT", raising=False)
    A, B, C = CASES[case]()
    S = real_schur(A)
    fast, ref = _both_paths(S.T, S.Z.T @ B, C @ S.Z, monkeypatch)
    np.testing.assert_allclose(fast, ref, rtol=1e-10, atol=0)


@pytest.mark.parametrize("case", ["bench30", "one_pair", "nonnormal"])
def test_kernel_source_as_plain_python_equals_the_numpy_path(case, monkeypatch):
    """The kernel's Python source (what numba compiles) runs without numba too."""
    A, B, C = CASES[case]()
    S = real_schur(A)
    B, C = S.Z.T @ B, C @ S.Z
    _numpy_path(monkeypatch)
    ref = resolvent_gains(S.T, B, C)
    from lti._rounding import _UNIFORM
    from lti._schur import quasi_triangular_eigvals

    out = _resolvent_norms_py(np.ascontiguousarray(S.T), np.ascontiguousarray(B),
                              np.ascontiguousarray(C.T), quasi_triangular_eigvals(S.T), _UNIFORM)
    np.testing.assert_allclose(out[2:], ref, rtol=1e-10)


def _dense_gains(T, B, C, theta):
    n = T.shape[0]
    ref = np.zeros(3)
    for t in theta:
        M = np.exp(1j * t) * np.eye(n) - T
        x = np.linalg.norm(np.linalg.solve(M.T, C.T))
        y = np.linalg.norm(np.linalg.solve(M, B))
        ref = np.maximum(ref, [x * y, x, y])
    return ref


@pytest.mark.parametrize("jit", [True, False])
def test_non_standard_blocks_against_dense_solves(jit, monkeypatch):
    """2x2 blocks that are not in LAPACK's standard form (a != d; one with real
    eigenvalues) next to 1x1 blocks: the closed-form block solve is exact for any block."""
    if jit and not _jit.available():
        pytest.skip("numba not installed (extra 'fast')")
    monkeypatch.delenv("LTI_DISABLE_JIT", raising=False)
    if not jit:
        _numpy_path(monkeypatch)
    rng = np.random.default_rng(11)
    n = 9
    T = np.triu(rng.standard_normal((n, n)), 1)
    np.fill_diagonal(T, rng.uniform(-0.9, 0.9, n))
    T[1:3, 1:3] = [[0.5, 0.9], [-0.4, 0.1]]  # complex pair, a != d
    T[4:6, 4:6] = [[0.2, 0.3], [0.5, -0.4]]  # real eigenvalues 0.35, -0.55 in a 2x2 block
    T[7:9, 7:9] = [[0.0, 0.99], [-0.99, 0.0]]  # pair of modulus 0.99 (a resonance)
    B, C = rng.standard_normal((n, 3)), rng.standard_normal((2, n))
    s, c, b = resolvent_gains(T, B, C)
    from lti._schur import quasi_triangular_eigvals

    lam = quasi_triangular_eigvals(T)
    theta = np.unique(np.concatenate([np.linspace(0, np.pi, N_ANGLES), np.abs(np.angle(lam))]))
    np.testing.assert_allclose([s, c, b], _dense_gains(T, B, C, theta), rtol=1e-11)


@needs_numba
@pytest.mark.parametrize("n, rho", [(64, 0.9999), (40, 0.95)])
def test_balanced_truncation_rounding_term_same_with_and_without_jit(n, rho, monkeypatch):
    """The whole BT on the Schur path: only the rounding term can differ between the two
    paths, and only by rounding; everything else is bit for bit the same."""
    monkeypatch.delenv("LTI_DISABLE_JIT", raising=False)
    A, B, C = _random(n, rho, n)
    G = DiscreteLTI(A, B, C)
    from lti.gramians import stable_gramian_factors

    S = real_schur(A)
    fast = schur_rounding(S.T, S.Z.T @ B, C @ S.Z, 4.0)
    res = balanced_truncation(G, order=n // 4)
    with monkeypatch.context() as mp:
        _numpy_path(mp)
        slow = schur_rounding(S.T, S.Z.T @ B, C @ S.Z, 4.0)
        ref = balanced_truncation(G, order=n // 4)
    assert fast == pytest.approx(slow, rel=1e-10, abs=0)
    if stable_gramian_factors(G).path == "schur":
        assert res.rounding_term == pytest.approx(ref.rounding_term, rel=1e-10, abs=0)
    assert np.array_equal(res.hsv, ref.hsv)
    assert np.array_equal(res.reduced.A, ref.reduced.A)
    np.testing.assert_allclose(res.error_bounds, ref.error_bounds, rtol=1e-12, atol=0)


@pytest.mark.parametrize("case", ["slow64", "one_pair", "symmetric"])
def test_given_eigenvalues_are_those_of_t(case):
    """balanced_truncation hands the Schur form's eigenvalues (lazily) to the rounding term:
    the same term, bit for bit, as computing them from T; the compiled path reads them."""
    A, B, C = CASES[case]()
    S = real_schur(A)
    B, C = S.Z.T @ B, C @ S.Z
    ref = schur_rounding(S.T, B, C, 4.0)
    called = []
    given = schur_rounding(S.T, B, C, 4.0, S.complex_triangle,
                           lambda: called.append(1) or S.eigenvalues())
    assert given == ref
    assert len(called) == (1 if _rounding._resolvent_norms.compiled() is not None else 0)
