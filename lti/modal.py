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
from scipy.linalg import lapack

from lti.exceptions import SolverError

__all__ = ["modal_form", "modal_gramian_factors", "stein_factors_diagonal"]

_EPS = np.finfo(np.float64).eps
#: Smallest reciprocal condition number (1-norm, LAPACK ``?pocon``) of the diagonally
#: scaled closed-form Gramian for which its Cholesky factor is used (factor accurate to
#: about ``n eps / CHOL_RCOND`` relative); below it, the Schur algorithm on the generator.
CHOL_RCOND = 1e-3


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
    for diagonal ``A`` without the Householder reflector; the ``q`` problems run in one
    loop of n steps of ``O(q n k)`` work.
    """
    f = np.atleast_2d(f)
    q, n = f.shape
    dtype = np.result_type(f, *Gs, np.float64)
    k = max((G.shape[1] for G in Gs), default=0)
    G = np.zeros((q, n, k), dtype=dtype)
    for b, Gb in enumerate(Gs):
        G[b, :, : Gb.shape[1]] = Gb
    if n == 0 or k == 0:
        return list(np.zeros((q, n, n), dtype=dtype))
    den = 1.0 - f[:, :, None] * f.conj()[:, None, :]  # (q, n, n): 1 - f_i conj(f_j)
    # column j of the factor is c * sd[:, j:, j]; the generator update uses phi - 1; both
    # stored transposed so that step j reads a contiguous row
    sd = np.ascontiguousarray((np.sqrt(1.0 - np.abs(f) ** 2)[:, None, :] / den)
                              .transpose(0, 2, 1))
    phi_m1 = np.ascontiguousarray(((f[:, :, None] - f[:, None, :]) / den - 1.0)
                                  .transpose(0, 2, 1))
    # a generator row below this is dropped (changes X by < 1e-3 eps relative)
    negligible = 1e-3 * _EPS * np.sqrt(np.max(np.real(np.einsum("bik,bik->b", G, G.conj()))))
    Lt = np.zeros((q, n, n), dtype=dtype)  # L transposed: row j is column j of L
    cplx = np.iscomplexobj(G)
    inv = np.zeros(q)
    for j in range(n):
        g = G[:, j, :]  # (q, k)
        gam = np.sqrt(np.real(np.einsum("bk,bk->b", g, g.conj() if cplx else g)))  # (q,)
        np.divide(1.0, gam, out=inv, where=gam > negligible)  # 1 / gamma, or 0: row dropped
        inv[gam <= negligible] = 0.0
        u = g * inv[:, None]  # (q, k): g_j / gamma
        c = np.matmul(G[:, j:, :], (u.conj() if cplx else u)[:, :, None])[:, :, 0]
        Lt[:, j, j:] = c * sd[:, j, j:]
        G[:, j + 1 :, :] += (phi_m1[:, j, j + 1 :] * c[:, 1:])[:, :, None] * u[:, None, :]
    L = Lt.transpose(0, 2, 1)
    return list(L)


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
    """``K`` (n, min(n, k)) with ``K K^T = M M^T`` (triangular factor of ``M^T``)."""
    n, k = M.shape
    if k <= n:
        return M
    qr, _, _, info = lapack.dgeqrf(M.T)  # M^T = Q R, M M^T = R^T R
    if info != 0:
        raise SolverError(f"QR compression failed (LAPACK dgeqrf info={info})")
    return np.triu(qr[:n]).T


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
        (:meth:`lti.DiscreteLTI.from_diagonal`); spectral radius < 1 (checked by the
        caller).
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
    form = modal_form(A) if modal is None else modal
    if form is None:
        return None
    lam, pairs = form
    n = lam.size
    rho = float(np.max(np.abs(lam), initial=0.0))
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
        L = _scaled_cholesky(fm, S)
        if L is None:  # ill-conditioned: the Schur algorithm on the generator
            K = _compressed(Ms)  # (n, <= n), same Gram matrix
            (L,) = stein_factors_diagonal(fm[None, :], [K if real else _to_modal(K, pairs)])
        out.append(_real_factor(L, pairs) * scale)
    return out[0], out[1], rho
