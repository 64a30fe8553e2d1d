"""Closed-form Gramian factors of modal (real or complex diagonal) systems.

An adapter's SSM is modal: ``A`` is diagonal, or block diagonal with the real 2x2 blocks
``[[a, b], [-b, a]]`` that :meth:`lti.DiscreteLTI.from_diagonal` builds from a conjugate
pair ``lambda = a + j b``. The unitary change of variables ``W`` of those blocks makes
``A`` the complex diagonal ``diag(lambda)``, where the Stein equation has the closed form

.. math:: \\tilde P_{ij} = \\frac{(\\tilde B \\tilde B^H)_{ij}}{1 - \\lambda_i \\bar\\lambda_j},
          \\qquad \\tilde B = W^H B,

a Cauchy-like (Pick) matrix with displacement ``P - Lambda P Lambda^H = B B^H``. Every
entry of the closed form is accurate to a few ulps *relative to* ``sqrt(P_ii P_jj)``, so the
Cholesky factor of ``P`` is accurate to about ``n eps / rcond(H)`` with ``H`` the diagonally
scaled ``P`` (Cholesky is invariant under that scaling). When ``rcond(H) >= CHOL_RCOND``
(one LAPACK ``?pocon``) that factor is used; otherwise (nearly dependent modes, few inputs:
``H`` itself ill-conditioned) the factor is computed from the *generator* ``B`` by the Schur
algorithm for displacement structure, whose accuracy does not depend on it. A factor of the
formed ``P`` by an eigendecomposition would not do: it loses the small Hankel singular values
of graded realisations (tested). ``P = W P~ W^H`` then gives a real factor.
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp
from scipy.linalg import lapack

from lti.exceptions import (
    NonFiniteError,
    ShapeError,
    SolverError,
    SparseNotSupportedError,
    UnstableSystemError,
)

__all__ = ["diagonal_stein_factor", "modal_form", "modal_gramian_factors",
           "stein_factors_diagonal"]

_EPS = np.finfo(np.float64).eps
#: Smallest reciprocal condition number (1-norm, LAPACK ``?pocon``) of the diagonally
#: scaled closed-form Gramian for which its Cholesky factor is used (factor accurate to
#: about ``n eps / CHOL_RCOND`` relative); below it, the Schur algorithm on the generator.
CHOL_RCOND = 1e-3

_SPARSE_A = ("a modal `A` is (block) diagonal, so pass `A.toarray()` (closed form, O(n^2) "
             "memory); for a large sparse `A` use lti.lyapunov_factor(A, B) or "
             "lti.gramian_factors(G) (low-rank ADI factors, lti.lowrank)")


def _dense(what: str, name: str, X, alternative: str | None = None) -> np.ndarray:
    """``X`` as an ndarray; :class:`SparseNotSupportedError` naming the alternative when it
    is ``scipy.sparse`` (as :func:`lti.lowrank.dense_only` for the systems' entry points)."""
    if sp.issparse(X):
        raise SparseNotSupportedError(
            f"{what} needs dense algebra on `{name}`, which is sparse (shape {X.shape}); "
            + (alternative or f"pass `{name}.toarray()` (B, C and the generators are dense "
               "in lti: few columns)")
        )
    return np.asarray(X)


def _check_inside(what: str, rho: float) -> None:
    """The closed forms divide by ``1 - lambda_i conj(lambda_j)``: NaN factors (with
    RuntimeWarnings) unless every mode is inside the unit circle. O(1) given ``rho``; the
    Gramian solvers check their own stability margin before calling."""
    if not rho < 1.0:
        if np.isnan(rho):
            raise NonFiniteError(f"{what}: the modes must be finite; got nan")
        raise UnstableSystemError(f"{what}: the modes must lie inside the unit circle "
                                  f"(Schur-stable A); got max |lambda| = {rho:.6g}")


def _check_generator(what: str, name: str, M: np.ndarray, n: int, rows: bool = True) -> None:
    """ShapeError unless ``M`` is 2-D with ``n`` rows (``rows``) or ``n`` columns."""
    if M.ndim != 2 or M.shape[0 if rows else 1] != n:
        side = "rows" if rows else "columns"
        raise ShapeError(f"{what}: `{name}` must be 2-D with n = {n} {side}; got shape {M.shape}")


def modal_form(A: np.ndarray):
    """Eigenvalues and the conjugate-pair layout of a modal ``A``, or ``None``.

    Parameters
    ----------
    A : ndarray, shape (n, n)
        Real state matrix.

    Returns
    -------
    (lam, pairs) or None
        ``lam`` : complex ndarray, shape (n,), the eigenvalues in state order (``a + j b``
        at the first state of a block ``[[a, b], [-b, a]]``, ``a - j b`` at the second);
        ``pairs`` : int ndarray, the first state index of each 2x2 block. ``None`` when
        ``A`` is not block diagonal with 1x1 blocks and 2x2 blocks of that form.
    """
    A = _dense("modal_form()", "A", A, _SPARSE_A)
    if A.ndim != 2 or A.shape[0] != A.shape[1]:
        raise ShapeError(f"modal_form(): `A` must be square; got shape {A.shape}")
    if A.dtype.kind == "c":  # its real part would be read as the modes
        raise ShapeError("modal_form(): `A` must be real; got a complex array (for a complex "
                         "diagonal use lti.modal.diagonal_stein_factor(diag(A), B))")
    n = A.shape[0]
    if n > 2 and (A[0, n - 1] != 0 or A[n - 1, 0] != 0):
        return None  # a corner outside the band: the common dense case, decided in O(1)
    d = np.diag(A).copy()
    if n < 2:
        return d.astype(np.complex128), np.zeros(0, dtype=int)
    sup, sub = np.diag(A, 1), np.diag(A, -1)
    band = np.count_nonzero(d) + np.count_nonzero(sup) + np.count_nonzero(sub)
    if np.count_nonzero(A) != band:  # something outside the tridiagonal band
        return None
    nz = np.flatnonzero(sup)
    if np.any(sub[nz] != -sup[nz]) or np.count_nonzero(sub) != nz.size:
        return None  # not a rotation block [[a, b], [-b, a]]
    if nz.size and (np.any(np.diff(nz) < 2) or np.any(d[nz] != d[nz + 1])):
        return None  # overlapping blocks or unequal diagonal within a block
    lam = d.astype(np.complex128)
    lam[nz] += 1j * sup[nz]
    lam[nz + 1] -= 1j * sup[nz]
    return lam, nz


def _to_modal(M: np.ndarray, pairs: np.ndarray) -> np.ndarray:
    """``W^H M`` for the rows of M (n, k): rows (i, i+1) of a pair become
    ``(M_i - j M_{i+1}) / sqrt 2`` and its conjugate; other rows are kept."""
    out = M.astype(np.complex128)
    if pairs.size:
        x, y = M[pairs], M[pairs + 1]
        out[pairs] = (x - 1j * y) / np.sqrt(2.0)
        out[pairs + 1] = (x + 1j * y) / np.sqrt(2.0)
    return out


def _from_modal(L: np.ndarray, pairs: np.ndarray) -> np.ndarray:
    """``W L`` (the inverse map of :func:`_to_modal` on rows)."""
    out = L.copy()
    if pairs.size:
        u, v = L[pairs], L[pairs + 1]
        out[pairs] = (u + v) / np.sqrt(2.0)
        out[pairs + 1] = 1j * (u - v) / np.sqrt(2.0)
    return out


def stein_factors_diagonal(f: np.ndarray, Gs) -> list[np.ndarray]:
    """Factors ``L`` (``X = L L^H``) of ``X - diag(f_b) X diag(f_b)^H = G_b G_b^H``.

    Parameters
    ----------
    f : ndarray, shape (q, n)
        Diagonals ``f_b`` (real or complex, ``|f| < 1``) of ``q`` stable state matrices.
    Gs : sequence of q ndarrays, shape (n, k)
        Generators (``B`` or ``C^H``, real or complex), compressed to ``k <= n`` columns.

    Returns
    -------
    list of q ndarrays, shape (n, n)
        Lower triangular ``L_b`` with ``X_b = L_b L_b^H`` (real for real data).

    Notes
    -----
    :math:`X_{ij} = g_i g_j^H / (1 - f_i \\bar f_j)` (``g_i`` the rows of ``G``). The Schur
    algorithm for this displacement structure: with ``γ = ||g_j||`` and
    ``c = G g_j^H / γ`` (rows ``i >= j``), ``l = c sqrt(1 - |f_j|^2) / (1 - f \\bar f_j)`` is
    column j of the Cholesky factor, and the Schur complement ``X - l l^H`` has the same
    structure with the generator rows ``g_i + (φ_i - 1) c_i g_j / γ``,
    ``φ_i = (f_i - f_j) / (1 - \\bar f_j f_i)`` (a Blaschke factor, ``|φ_i| < 1``: each row
    is multiplied by a contraction, so the update is stable). It is Hammarling's recursion
    for diagonal ``A`` without the Householder reflector: n steps of ``O(n k)`` work per
    problem.
    """
    what = "stein_factors_diagonal()"
    f = np.atleast_2d(_dense(what, "f", f, "pass the diagonals as an ndarray of shape (q, n)"))
    _check_inside(what, float(np.max(np.abs(f), initial=0.0)))
    Gs = [_dense(what, "Gs[i]", Gb) for Gb in Gs]
    return [_schur_algorithm(fb, Gb) for fb, Gb in zip(f, Gs, strict=True)]


def _schur_algorithm(f: np.ndarray, G: np.ndarray) -> np.ndarray:
    """One problem of :func:`stein_factors_diagonal`: lower ``L`` for ``diag(f)``, ``G``."""
    n, k = G.shape
    dtype = np.result_type(f, G, np.float64)
    if n == 0 or k == 0:
        return np.zeros((n, n), dtype=dtype)
    G = np.array(G, dtype=dtype, copy=True)
    den = 1.0 - f[:, None] * f.conj()[None, :]  # (n, n): 1 - f_i conj(f_j)
    # column j of the factor is c * sd[j:, j]; the generator update uses phi - 1; both
    # stored transposed so that step j reads a contiguous row
    sd = np.ascontiguousarray((np.sqrt(1.0 - np.abs(f) ** 2)[None, :] / den).T)
    phi_m1 = np.ascontiguousarray(((f[:, None] - f[None, :]) / den - 1.0).T)
    # a generator row below this is dropped (changes X by < 1e-3 eps relative)
    negligible = 1e-3 * _EPS * float(np.linalg.norm(G))
    Lt = np.zeros((n, n), dtype=dtype)  # L transposed: row j is column j of L
    cplx = np.iscomplexobj(G)
    for j in range(n):
        g = G[j]
        gam = float(np.linalg.norm(g))
        if not gam > negligible:
            continue  # row dropped: column j of L stays zero
        u = g / gam
        c = G[j:] @ (u.conj() if cplx else u)
        Lt[j, j:] = c * sd[j, j:]
        G[j + 1 :] += np.outer(phi_m1[j, j + 1 :] * c[1:], u)
    return Lt.T


def _scaled_cholesky(f: np.ndarray, S: np.ndarray):
    """Lower ``L`` with ``X = L L^H`` for ``X_ij = S_ij / (1 - f_i conj f_j)`` (``S`` the
    generator's Gram matrix) by Cholesky of ``H = D^{-1} X D^{-1}``, ``D = diag(X)^{1/2}``;
    ``None`` when ``H`` is not safely positive definite (a zero row, ``?potrf`` failure or
    ``rcond(H) < CHOL_RCOND``)."""
    X = S / (1.0 - f[:, None] * f.conj()[None, :])
    d = np.sqrt(np.real(np.diagonal(X)))
    if not np.all(d > 0.0):
        return None
    H = X / d[:, None] / d[None, :]
    cplx = np.iscomplexobj(H)
    potrf, pocon = (lapack.zpotrf, lapack.zpocon) if cplx else (lapack.dpotrf, lapack.dpocon)
    R, info = potrf(H, lower=1, clean=1)
    if info != 0:
        return None
    rcond, info = pocon(R, float(np.linalg.norm(H, 1)), uplo="L")
    if info != 0 or not rcond >= CHOL_RCOND:
        return None
    return d[:, None] * R


def _compressed(M: np.ndarray) -> np.ndarray:
    """``K`` (n, min(n, k)) with ``K K^H = M M^H`` (triangular factor of ``M^H``)."""
    n, k = M.shape
    if k <= n:
        return M
    cplx = np.iscomplexobj(M)
    qr, _, _, info = (lapack.zgeqrf if cplx else lapack.dgeqrf)(M.conj().T if cplx else M.T)
    if info != 0:
        raise SolverError(f"QR compression failed (LAPACK ?geqrf info={info})")
    R = np.triu(qr[:n])  # M^H = Q R, M M^H = R^H R
    return R.conj().T if cplx else R.T


def _closed_form_factor(f: np.ndarray, S: np.ndarray, k: int, generator) -> np.ndarray:
    """Lower ``L`` (``X = L L^H``) of ``X_ij = S_ij / (1 - f_i conj f_j)``, ``S`` of rank
    at most ``k``: the scaled Cholesky factor when it is well conditioned, else the Schur
    algorithm on ``generator()`` (a compressed generator ``K`` with ``K K^H = S``).

    With ``4 k <= n`` the Cholesky factor is not tried: the displacement rank is low, the
    eigenvalues of ``X`` decay fast and ``H`` is numerically singular (``rcond(H) <
    CHOL_RCOND`` in 50 of 50 random cases at every n = 16...64 with ``k <= n / 4``), while
    the generator costs ``O(n^2 k)``, less than the Cholesky factorisation."""
    L = _scaled_cholesky(f, S) if 4 * k > f.size else None
    if L is None:  # ill-conditioned: the Schur algorithm on the generator
        (L,) = stein_factors_diagonal(f[None, :], [generator()])
    return L


def diagonal_stein_factor(f, G) -> np.ndarray:
    """Lower triangular ``L`` with ``X = L L^H`` for ``X - diag(f) X diag(f)^H = G G^H``.

    The one implementation of the diagonal Stein factor: :func:`lti.lyapunov_factor` with
    a diagonal ``A`` (``method="diagonal"``) and :func:`modal_gramian_factors` both use it.

    Parameters
    ----------
    f : array_like, shape (n,)
        Diagonal of a Schur-stable ``A`` (real or complex, ``|f_i| < 1``: else
        UnstableSystemError; the margin to the circle is the caller's).
    G : array_like, shape (n, m)
        Right-hand side factor (real or complex, any ``m``).

    Returns
    -------
    ndarray, shape (n, n)
        Lower triangular, real for real data.

    Notes
    -----
    The closed form ``X_ij = (G G^H)_ij / (1 - f_i conj f_j)`` factored by Cholesky after
    diagonal scaling when that is well conditioned, else by the Schur algorithm on ``G``
    (compressed to at most n columns by one QR); see the module docstring.

    Examples
    --------
    >>> import numpy as np
    >>> from lti.modal import diagonal_stein_factor
    >>> f = np.array([0.9, -0.5, 0.3 + 0.4j]); G = np.array([[1.0], [2.0], [1.0j]])
    >>> L = diagonal_stein_factor(f, G)
    >>> X = L @ L.conj().T
    >>> bool(np.linalg.norm(X - np.diag(f) @ X @ np.diag(f).conj().T - G @ G.conj().T) < 1e-13)
    True
    """
    what = "diagonal_stein_factor()"
    f = _dense(what, "f", f, "pass the diagonal as a 1-D array (`A.diagonal()`)")
    G = _dense(what, "G", G)
    if f.ndim != 1:
        raise ShapeError(f"{what}: `f` must be 1-D (the diagonal of A); got shape {f.shape}")
    n = f.size
    _check_generator(what, "G", G, n)
    _check_inside(what, float(np.max(np.abs(f), initial=0.0)))
    scale = float(np.max(np.abs(G), initial=0.0))
    if scale == 0.0:
        return np.zeros((n, n), dtype=np.result_type(f, G, np.float64))
    Gs = G / scale
    S = Gs @ Gs.conj().T if np.iscomplexobj(Gs) else Gs @ Gs.T
    return _closed_form_factor(f, S, G.shape[1], lambda: _compressed(Gs)) * scale


def _real_factor(L: np.ndarray, pairs: np.ndarray) -> np.ndarray:
    """Real ``R`` (n, n) with ``R R^T = Re((W L)(W L)^H)`` (= P, which is real)."""
    if not np.iscomplexobj(L):
        return L
    M = _from_modal(L, pairs)
    K = np.hstack([M.real, M.imag])  # (n, 2n): K K^T = Re(M M^H)
    return _compressed(K)


def modal_gramian_factors(A: np.ndarray, B: np.ndarray, C: np.ndarray, modal=None):
    """Both Gramian factors of a stable modal system, or ``None`` if ``A`` is not modal.

    Parameters
    ----------
    A : ndarray, shape (n, n)
        Diagonal, or block diagonal with ``[[a, b], [-b, a]]`` blocks
        (:meth:`lti.DiscreteLTI.from_diagonal`); spectral radius < 1 (UnstableSystemError
        otherwise; the stability margin to the circle is the caller's).
    B : ndarray, shape (n, m)
    C : ndarray, shape (p, n)
    modal : tuple, optional
        ``modal_form(A)`` when already computed.

    Returns
    -------
    (Lc, Lo, rho) or None
        Real ``Lc``, ``Lo`` of shape (n, n) with ``P = Lc Lc^T`` and ``Q = Lo Lo^T``,
        and the spectral radius ``rho``.

    Notes
    -----
    ``S = B B^T`` (one n x m x n product; ``m`` may be much larger than ``n``: 576 channels
    for a 32-state adapter) is mapped to modal coordinates, the closed form divided by
    ``1 - lambda_i conj(lambda_j)`` and factored by Cholesky after diagonal scaling when that
    is well conditioned (see the module docstring); else ``B`` is compressed to ``n``
    columns by one QR and factored by :func:`stein_factors_diagonal` (``diag(lambda)`` for
    ``P``, ``diag(conj lambda)`` for ``Q = sum (A^H)^k C^H C A^k``); then mapped back.

    Examples
    --------
    >>> import numpy as np
    >>> from lti import DiscreteLTI
    >>> from lti.modal import modal_gramian_factors
    >>> G = DiscreteLTI.from_diagonal([0.9 + 0.2j, 0.9 - 0.2j, 0.5], [[1.0], [1.0], [2.0]],
    ...                               [[1.0, 1.0, 1.0]])
    >>> Lc, Lo, rho = modal_gramian_factors(G.A, G.B, G.C)
    >>> P = Lc @ Lc.T
    >>> bool(np.linalg.norm(G.A @ P @ G.A.T - P + G.B @ G.B.T) < 1e-13 * np.linalg.norm(P))
    True
    """
    what = "modal_gramian_factors()"
    A = _dense(what, "A", A, _SPARSE_A)
    B, C = _dense(what, "B", B), _dense(what, "C", C)
    form = modal_form(A) if modal is None else modal
    if form is None:
        return None
    lam, pairs = form
    n = lam.size
    _check_generator(what, "B", B, n)
    _check_generator(what, "C", C, n, rows=False)
    rho = float(np.max(np.abs(lam), initial=0.0))
    _check_inside(what, rho)
    real = pairs.size == 0
    f = lam.real if real else lam
    out = []
    for M, fm in ((B, f), (C.T, np.conj(f))):
        scale = float(np.max(np.abs(M), initial=0.0))
        if scale == 0.0:
            out.append(np.zeros((n, n)))
            continue
        Ms = M / scale
        S = Ms @ Ms.T  # (n, n) Gram matrix of the generator, real
        if not real:  # W^H S W, S symmetric
            S = _to_modal(_to_modal(S, pairs).conj().T, pairs).conj().T
        L = _closed_form_factor(  # the generator: (n, <= n), same Gram matrix
            fm, S, Ms.shape[1],
            lambda Ms=Ms: _compressed(Ms) if real else _to_modal(_compressed(Ms), pairs))
        out.append(_real_factor(L, pairs) * scale)
    return out[0], out[1], rho
