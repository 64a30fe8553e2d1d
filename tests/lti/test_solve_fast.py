"""The fast parts of the dense Stein solve (``lti._stein``) against plain references.

``solve_schur(..., factor=F)`` transforms ``F`` (``Q = F F^T``) to Schur coordinates instead
of ``Q``; :func:`lti._stein.congruence` computes ``Z Y Z^H`` by its upper tiles; the leaves
of the Stein recursion apply the complex-pair rotations as batched 2x2 products. Each is
compared with the straightforward computation it replaces.
"""

from __future__ import annotations

import numpy as np
import pytest
import scipy.linalg as sla

import lti._stein as stein
from lti import _jit
from lti._schur import real_schur
from tests.lti.jit_helpers import needs_numba

LEAF_MODES = ["numpy", pytest.param("compiled", marks=needs_numba)]


def _set_mode(monkeypatch, mode):
    """Select the leaf implementation: ``SteinRecursion`` reads the switch when built."""
    if mode == "numpy":
        monkeypatch.setenv("LTI_DISABLE_JIT", "1")
    else:
        monkeypatch.delenv("LTI_DISABLE_JIT", raising=False)


def _stable(n, rho, seed, m=3):
    rng = np.random.default_rng(seed)
    A = rng.standard_normal((n, n))
    A *= rho / np.max(np.abs(np.linalg.eigvals(A)))
    return A, rng.standard_normal((n, m))


def _residual(A, X, Q):
    return np.linalg.norm(A @ X @ A.conj().T - X + Q) / np.linalg.norm(Q)


@pytest.mark.parametrize("n", [5, 255, 256, 301])
@pytest.mark.parametrize("kind", ["real", "complex"])
def test_congruence_matches_the_full_product(n, kind):
    rng = np.random.default_rng(n)
    Z = rng.standard_normal((n, n))
    Y = rng.standard_normal((n, n))
    if kind == "complex":
        Z = Z + 1j * rng.standard_normal((n, n))
        Y = Y + 1j * rng.standard_normal((n, n))
    Z = np.linalg.qr(Z)[0]
    Y = Y + Y.conj().T
    X = stein.congruence(Z, Y)
    ref = Z @ Y @ Z.conj().T
    assert np.array_equal(X, X.conj().T)  # exactly Hermitian
    assert np.linalg.norm(X - ref) <= 1e-14 * np.linalg.norm(ref)


def _stein_sylvester_reference(T1, T2, R):
    """``T1 Y T2^H - Y + R = 0`` by the dense Kronecker system (small blocks only)."""
    k1, k2 = R.shape
    K = np.kron(T2.conj(), T1) - np.eye(k1 * k2)
    return np.linalg.solve(K, -R.reshape(-1, order="F")).reshape((k1, k2), order="F")


@pytest.mark.parametrize("mode", LEAF_MODES)
@pytest.mark.parametrize("kind", ["real pairs", "real spectrum", "complex"])
def test_leaf_matches_the_kronecker_solve(kind, mode, monkeypatch):
    _set_mode(monkeypatch, mode)
    rng = np.random.default_rng(21)
    n = 30
    if kind == "real spectrum":  # triangular T: no rotations at all
        V = rng.standard_normal((n, n))
        A = V @ np.diag(rng.uniform(-0.95, 0.95, n)) @ np.linalg.inv(V)
    else:
        A = rng.standard_normal((n, n))
        if kind == "complex":
            A = A + 1j * rng.standard_normal((n, n))
        A *= 0.97 / np.max(np.abs(np.linalg.eigvals(A)))
    S = real_schur(A)
    rec = stein.SteinRecursion(S.T)
    assert (rec._kernel is not None) == (mode == "compiled")
    h = rec._split(0, n)  # never cuts a 2x2 block
    if kind == "real pairs":  # 2x2 blocks on both sides: the kernel's 4x4 systems
        sub = np.diag(S.T, -1)
        assert np.any(sub[: h - 1]) and np.any(sub[h:]), "the test needs complex pairs"
    for r1, r2 in [((0, h), (h, n)), ((h, n), (0, h)), ((0, n), (0, n)), ((h, n), (h, n))]:
        R = rng.standard_normal((r1[1] - r1[0], r2[1] - r2[0]))
        if kind == "complex":
            R = R + 1j * rng.standard_normal(R.shape)
        Y = rec.leaf(r1, r2, R)
        T1 = S.T[r1[0]:r1[1], r1[0]:r1[1]]
        T2 = S.T[r2[0]:r2[1], r2[0]:r2[1]]
        ref = _stein_sylvester_reference(T1, T2, R)
        assert np.linalg.norm(Y - ref) <= 1e-12 * np.linalg.norm(ref)
        assert np.iscomplexobj(Y) == (kind == "complex")


@needs_numba
@pytest.mark.parametrize("kind", ["real pairs", "complex"])
def test_leaf_kernel_compiled_matches_its_python_source(kind, monkeypatch):
    # the kernel's own source run as plain Python is the line-by-line reference
    _set_mode(monkeypatch, "compiled")
    rng = np.random.default_rng(4)
    A = rng.standard_normal((9, 9))
    if kind == "complex":
        A = A + 1j * rng.standard_normal((9, 9))
    T = real_schur(0.9 * A / np.max(np.abs(np.linalg.eigvals(A)))).T
    T1, T2 = np.asfortranarray(T[:5, :5]), np.asfortranarray(T[5:, 5:])
    R = np.asfortranarray(rng.standard_normal((5, 4)).astype(T.dtype))
    Yc = stein._leaf_kernel.compiled()(T1, T2, R, np.empty((5, 4), T.dtype, order="F"))
    Yp = stein._leaf_kernel.py_func(T1, T2, R, np.empty((5, 4), T.dtype, order="F"))
    assert np.linalg.norm(Yc - Yp) <= 1e-14 * np.linalg.norm(Yp)
    assert np.linalg.norm(T1 @ Yc @ T2.conj().T - Yc + R) <= 1e-14 * np.linalg.norm(R)


@pytest.mark.parametrize("kind", ["real", "complex"])
def test_recursion_compiled_and_numpy_leaves_agree(kind, monkeypatch):
    # whole solves (n = 150: many leaves and 2x2 blocks cut nowhere), each mode against
    # the other and the residual; LTI_DISABLE_JIT=1 is the NumPy fallback
    rng = np.random.default_rng(8)
    A, B = _stable(150, 0.999, 8)
    if kind == "complex":
        A = A + 1j * rng.standard_normal(A.shape) * 0.5
        A *= 0.999 / np.max(np.abs(np.linalg.eigvals(A)))
    Q = B @ B.T
    S = real_schur(A)
    X = {}
    for mode in ["numpy", "compiled"] if _jit.available() else ["numpy"]:
        _set_mode(monkeypatch, mode)
        assert (stein.SteinRecursion(S.T)._kernel is None) == (mode == "numpy")
        X[mode] = stein.solve_schur(A, Q, S, refine=True, factor=B)
        assert np.array_equal(X[mode], X[mode].conj().T)
        assert _residual(A, X[mode], Q) <= 1e-13
    if "compiled" in X:
        ref = X["numpy"]
        assert np.linalg.norm(X["compiled"] - ref) <= 1e-11 * np.linalg.norm(ref)


@pytest.mark.parametrize("n, rho", [(40, 0.9999), (300, 0.9999), (300, 0.9)])
def test_factor_transform_matches_the_dense_transform(n, rho):
    A, B = _stable(n, rho, n)
    Q = B @ B.T
    S = real_schur(A)
    X_ref = stein.solve_schur(A, Q, S)  # Z^T Q Z by two products; no refinement
    X = stein.solve_schur(A, Q, S, factor=B)
    assert np.array_equal(X, X.T)
    assert np.linalg.norm(X - X_ref) <= 1e-11 * np.linalg.norm(X_ref)
    # refined: the same accuracy as the dense transform, and within the documented bound
    Xr = stein.solve_schur(A, Q, S, refine=True, factor=B)
    Xr_ref = stein.solve_schur(A, Q, S, refine=True)
    assert np.array_equal(Xr, Xr.T) and np.array_equal(Xr_ref, Xr_ref.T)
    assert _residual(A, Xr, Q) <= 1.5 * _residual(A, Xr_ref, Q)
    assert _residual(A, Xr, Q) <= 1e-12


@pytest.mark.parametrize("mode", LEAF_MODES)
@pytest.mark.parametrize("n, rho, m", [(150, 0.9999, 3), (301, 0.95, 1), (64, 0.999, 32)])
def test_factor_first_pass_by_hammarling(n, rho, m, mode, monkeypatch):
    # with compiled kernels and a real factor (n >= _FACTOR_PASS_MIN), the first solve is
    # X = L L^T from Hammarling's factor; it must equal the recursion's X (the reference:
    # Q itself, no factor) to rounding, be exactly symmetric and as accurate; without
    # compiled kernels the recursion runs
    _set_mode(monkeypatch, mode)
    A, B = _stable(n, rho, n + m, m=m)
    Q = B @ B.T
    S = real_schur(A)
    calls = []
    first_pass = stein._factor_first_pass
    monkeypatch.setattr(stein, "_factor_first_pass",
                        lambda *a: calls.append(1) or first_pass(*a))
    X = stein.solve_schur(A, Q, S, factor=B)
    assert len(calls) == (mode == "compiled")
    X_ref = stein.solve_schur(A, Q, S)
    assert np.array_equal(X, X.T)
    assert np.linalg.norm(X - X_ref) <= 1e-11 * np.linalg.norm(X_ref)
    assert _residual(A, X, Q) <= 1.5 * _residual(A, X_ref, Q)
    Xr = stein.solve_schur(A, Q, S, refine=True, factor=B)
    assert np.array_equal(Xr, Xr.T) and _residual(A, Xr, Q) <= 1e-13


def test_factor_first_pass_is_not_taken_below_its_size(monkeypatch):
    _set_mode(monkeypatch, "compiled")
    monkeypatch.setattr(stein, "_factor_first_pass", None)  # calling it would fail
    A, B = _stable(stein._FACTOR_PASS_MIN - 1, 0.99, 4)
    X = stein.solve_schur(A, B @ B.T, real_schur(A), refine=True, factor=B)
    assert _residual(A, X, B @ B.T) <= 1e-13


@pytest.mark.parametrize("n", [1, 5, 128, 129, 300])
def test_mirror_upper(n):
    rng = np.random.default_rng(n)
    U = np.triu(rng.standard_normal((n, n)))
    X = stein.mirror_upper_(np.asfortranarray(U.copy()))
    assert np.array_equal(X, np.triu(U) + np.triu(U, 1).T)


def test_factor_transform_complex():
    rng = np.random.default_rng(5)
    n = 60
    A = rng.standard_normal((n, n)) + 1j * rng.standard_normal((n, n))
    A *= 0.99 / np.max(np.abs(np.linalg.eigvals(A)))
    F = rng.standard_normal((n, 2)) + 1j * rng.standard_normal((n, 2))
    Q = F @ F.conj().T
    S = real_schur(A)
    X = stein.solve_schur(A, Q, S, refine=True, factor=F)
    X_ref = stein.solve_schur(A, Q, S, refine=True)
    assert np.array_equal(X, X.conj().T)
    assert np.linalg.norm(X - X_ref) <= 1e-12 * np.linalg.norm(X_ref)
    assert _residual(A, X, Q) <= 1e-13
    # a complex factor with a real A takes the complex Schur form
    Ar, _ = _stable(20, 0.99, 6)
    F, Q = F[:20], F[:20] @ F[:20].conj().T
    Sr = real_schur(Ar)
    Xc = stein.solve_schur(Ar, Q, Sr, refine=True, factor=F)
    Xc_ref = stein.solve_schur(Ar, Q, Sr, refine=True)
    assert np.linalg.norm(Xc - Xc_ref) <= 1e-12 * np.linalg.norm(Xc_ref)
    assert _residual(Ar, Xc, Q) <= 1e-13
    Xd = sla.solve_discrete_lyapunov(Ar, Q, method="direct")  # Kronecker: independent
    assert np.linalg.norm(Xc - Xd) <= 1e-10 * np.linalg.norm(Xd)


@pytest.mark.parametrize("case", ["low rank", "indefinite"])
def test_auto_solve_hands_the_psd_factor_to_the_schur_path(case, monkeypatch):
    import lti.lyapunov as lyapunov

    A, B = _stable(150, 0.9999, 3)  # slow decay: the Smith attempt is screened out
    Q = B @ B.T if case == "low rank" else B @ np.diag([1.0, 1.0, -1.0]) @ B.T
    seen = {}
    solve_schur = lyapunov.solve_schur

    def spy(*args, **kwargs):
        seen["factor"] = kwargs.get("factor")
        return solve_schur(*args, **kwargs)

    monkeypatch.setattr(lyapunov, "solve_schur", spy)
    X = lyapunov.solve_discrete_lyapunov(A, Q)
    F = seen["factor"]
    if case == "indefinite":
        assert F is None
    else:
        assert F.shape == (150, 3)
        assert np.linalg.norm(F @ F.T - Q) <= 1e-14 * np.linalg.norm(Q)
    X_ref = lyapunov.solve_discrete_lyapunov(A, Q, method="schur")
    assert seen["factor"] is None  # method="schur": Q itself (the reference)
    assert np.linalg.norm(X - X_ref) <= 1e-12 * np.linalg.norm(X_ref)


def test_refinement_triggers_at_slow_decay():
    # rho = 0.9999: the Schur form's backward error leaves ~1e-12; one refinement step
    # (residual in the original coordinates) brings it below 1e-13
    A, B = _stable(150, 0.9999, 3)
    Q = B @ B.T
    S = real_schur(A)
    r0 = _residual(A, stein.solve_schur(A, Q, S, factor=B), Q)
    r1 = _residual(A, stein.solve_schur(A, Q, S, refine=True, factor=B), Q)
    assert r0 > stein.REFINE_RTOL
    assert r1 <= 0.5 * r0


def _spy_single(monkeypatch):
    seen = []
    single = stein._single_correction

    def spy(*args):
        out = single(*args)
        seen.append(out is not None)
        return out

    monkeypatch.setattr(stein, "_single_correction", spy)
    return seen


@pytest.mark.parametrize("mode", LEAF_MODES)
@pytest.mark.parametrize("kind", ["real", "complex"])
def test_single_precision_correction_keeps_the_accuracy(kind, mode, monkeypatch):
    # the refinement's recursion in single precision: kept by its probe guard at slow
    # decay, and the refined residual that of the double-precision correction (to noise)
    _set_mode(monkeypatch, mode)
    A, B = _stable(300, 0.9999, 2)
    if kind == "complex":
        A = A + 0.5j * np.random.default_rng(2).standard_normal(A.shape)
        A *= 0.9999 / np.max(np.abs(np.linalg.eigvals(A)))
        B = B + 1j * B[::-1]
    Q = B @ B.conj().T
    S = real_schur(A)
    monkeypatch.setattr(stein, "_SINGLE_MIN", 10**9)
    X64 = stein.solve_schur(A, Q, S, refine=True, factor=B)
    seen = _spy_single(monkeypatch)
    monkeypatch.setattr(stein, "_SINGLE_MIN", 100)
    X = stein.solve_schur(A, Q, S, refine=True, factor=B)
    assert seen == [True]
    assert np.array_equal(X, X.conj().T)
    assert _residual(A, X, Q) <= 1.05 * _residual(A, X64, Q)
    assert _residual(A, X, Q) <= 1e-12
    assert np.linalg.norm(X - X64) <= 1e-11 * np.linalg.norm(X64)


@needs_numba
@pytest.mark.parametrize("tol, expected", [(1e-2, "single"), (1e-3, "double"), (1e-6, None)])
def test_single_correction_back_transform_tiers(tol, expected, monkeypatch):
    # rho = 0.9999, n = 300: the single-precision back-transform leaves ~1.6e-3 of R, the
    # double one ~6.5e-5 (same single-precision dY); the guard keeps the first that passes.
    # Compiled leaves: the NumPy ones compute in complex128, so their "single" dY is a
    # double one and both back-transforms run in double
    _set_mode(monkeypatch, "compiled")
    A, B = _stable(300, 0.9999, 2)
    Q = B @ B.T
    S = real_schur(A)
    X0 = stein.solve_schur(A, Q, S, factor=B)
    R = (A @ X0) @ A.T - X0 + Q
    R = 0.5 * (R + R.T)
    monkeypatch.setattr(stein, "_SINGLE_TOL", tol)
    dX, bt = stein.single_correction_parts(A, R, S.T, S.Z)
    assert bt == expected
    if expected is None:
        assert dX is None and stein._single_correction(A, R, S.T, S.Z) is None
        return
    assert np.array_equal(dX, dX.T)
    left = np.linalg.norm(R + A @ dX @ A.T - dX) / np.linalg.norm(R)
    assert left <= 2 * tol  # the probes estimate it within ~30 %
    if expected == "single":  # Z and the products rounded: 1.6e-3 here
        assert left >= 5e-4
    else:  # the same dY by Z in double: 6.5e-5 (1.2e-4 with Z rounded to single)
        assert left <= 1e-4
    assert np.array_equal(stein._single_correction(A, R, S.T, S.Z), dX)


def _nonnormal(n, seed):
    rng = np.random.default_rng(seed)
    Z = np.linalg.qr(rng.standard_normal((n, n)))[0]
    N = (2.4 / np.sqrt(n)) * np.triu(rng.standard_normal((n, n)), 1)
    A = Z @ (np.diag(rng.uniform(-1, 1, n)) + N) @ Z.T
    return A * (0.95 / np.max(np.abs(np.linalg.eigvals(A)))), rng.standard_normal((n, 2))


def test_single_precision_correction_refused_where_it_is_inaccurate(monkeypatch):
    # strongly non-normal A: the single-precision correction removes less than 99 % of the
    # residual; the probes see it and the solve takes the double-precision correction
    A, B = _nonnormal(150, 0)
    Q = B @ B.T
    S = real_schur(A)
    X0 = stein.solve_schur(A, Q, S, factor=B)
    R = (A @ X0) @ A.T - X0 + Q
    r0 = np.linalg.norm(R) / np.linalg.norm(Q)
    assert r0 > stein._SINGLE_MAX_RESIDUAL  # solve_schur would not even try it
    assert stein._single_correction(A, R, S.T, S.Z) is None
    # what it refused: a correction that leaves most of the residual
    low = stein.SteinRecursion(S.T.astype(np.float32))
    Rz = S.Z.T @ R @ S.Z
    scale = np.max(np.abs(Rz))
    dX = S.Z @ (low.symmetric((0, 150), (Rz / scale).astype(np.float32)) * scale) @ S.Z.T
    assert np.linalg.norm(R + A @ dX @ A.T - dX) > 0.1 * np.linalg.norm(R)
    # and through the solve: not tried (first residual too large), same result as without it
    seen = _spy_single(monkeypatch)
    monkeypatch.setattr(stein, "_SINGLE_MIN", 100)
    X = stein.solve_schur(A, Q, S, refine=True, factor=B)
    monkeypatch.setattr(stein, "_SINGLE_MIN", 10**9)
    assert seen == [] and np.array_equal(X, stein.solve_schur(A, Q, S, refine=True, factor=B))


@pytest.mark.parametrize("rho, seed, kept", [(0.9999, 1, False), (0.95, 2, True)])
def test_double_correction_kept_only_when_it_lowers_the_residual(rho, seed, kept):
    # strongly non-normal A: at rho = 0.9999 the equation is hopeless (relative residual
    # ~5e5) and the correction would raise it to ~3e8; the probes see it and the first
    # solve is returned. At rho = 0.95 the correction helps (1e-4 -> 1e-5) and is kept
    rng = np.random.default_rng(seed)
    n = 100
    Z = np.linalg.qr(rng.standard_normal((n, n)))[0]
    N = (3.0 / np.sqrt(n)) * np.triu(rng.standard_normal((n, n)), 1)
    A = Z @ (np.diag(rng.uniform(-1, 1, n)) + N) @ Z.T
    A *= rho / np.max(np.abs(np.linalg.eigvals(A)))
    B = rng.standard_normal((n, 2))
    Q = B @ B.T
    S = real_schur(A)
    X0 = stein.solve_schur(A, Q, S, factor=B)
    X = stein.solve_schur(A, Q, S, refine=True, factor=B)
    r0, r1 = _residual(A, X0, Q), _residual(A, X, Q)
    assert r0 > stein.REFINE_RTOL  # the correction was computed
    if kept:
        assert r1 <= 0.5 * r0
    else:
        assert np.array_equal(X, X0)
        # what was dropped: the correction raises the residual
        R = (A @ X0) @ A.T - X0 + Q
        dX = S.Z @ stein.SteinRecursion(S.T).symmetric((0, n), S.Z.T @ R @ S.Z) @ S.Z.T
        assert _residual(A, X0 + dX, Q) > 10 * r0


def _random_quasi_triangular(rng, k):
    """Upper quasi-triangular, random 1x1 / 2x2 diagonal blocks (2x2 not standardised, with
    complex eigenvalues), spectral radius < 1."""
    T = np.triu(rng.standard_normal((k, k)))
    i = 0
    while i < k:
        if i + 1 < k and rng.random() < 0.5:
            a, d = rng.uniform(-0.6, 0.6, 2)
            b, c = rng.uniform(0.2, 0.6), -rng.uniform(0.2, 0.6)  # b c < 0: a complex pair
            T[i : i + 2, i : i + 2] = [[a, b], [c, d]]
            i += 2
        else:
            T[i, i] = rng.uniform(-0.9, 0.9)
            i += 1
    return np.asfortranarray(T)


@needs_numba
def test_leaf_kernel_on_random_block_structures(monkeypatch):
    # any placement of 2x2 blocks (first / last position, adjacent, blocks of order 2),
    # any 2x2 shape: compiled kernel and its Python source against the Kronecker solve
    # (order >= 2: SteinRecursion.leaf sends order 1 to the NumPy path)
    _set_mode(monkeypatch, "compiled")
    rng = np.random.default_rng(11)
    kern = stein._leaf_kernel.compiled()
    for _ in range(40):
        k1, k2 = rng.integers(2, 9, 2)
        T1, T2 = _random_quasi_triangular(rng, k1), _random_quasi_triangular(rng, k2)
        R = np.asfortranarray(rng.standard_normal((k1, k2)))
        ref = _stein_sylvester_reference(T1, T2, R)
        for f in (kern, stein._leaf_kernel.py_func):
            Y = f(T1, T2, R, np.empty((k1, k2), order="F"))
            assert np.linalg.norm(Y - ref) <= 1e-13 * np.linalg.norm(ref)


@pytest.mark.parametrize("c", [2.0**-480, 2.0**480])
def test_refinement_is_scale_invariant(c, monkeypatch):
    # Q ~ 1e-289 / 1e289: the residual tests use scaled norms (np.linalg.norm squares the
    # entries: 0 or inf there, so the refinement was skipped); power-of-two scaling is
    # exact, so the scaled solve is the unscaled one times c^2, bit for bit
    A, B = _stable(300, 0.9999, 3)
    S = real_schur(A)
    seen = _spy_single(monkeypatch)
    X1 = stein.solve_schur(A, B @ B.T, S, refine=True, factor=B)
    Bc = c * B
    Xc = stein.solve_schur(A, Bc @ Bc.T, S, refine=True, factor=Bc)
    assert seen == [True, True]  # refined both times, the single correction kept
    assert np.array_equal(Xc / c**2, X1)
