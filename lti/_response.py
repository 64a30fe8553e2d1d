"""Kernels of :class:`lti.system.DiscreteLTI`'s frequency response and simulation.

Plain arrays in and out (validated by the caller): ``z`` is shape (k,) complex, ``B`` is
(n, m), ``C`` is (p, n), ``D`` is (p, m); responses are (k, p, m), frequency first.
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp

__all__ = [
    "diagonal_response",
    "markov_overflow_message",
    "overflow_message",
    "schur_response",
    "simulate_states",
]


def diagonal_response(a: np.ndarray, B: np.ndarray, C: np.ndarray, D: np.ndarray,
                      z: np.ndarray) -> np.ndarray:
    """``sum_i C[:, i] B[i] / (z - a_i) + D`` for a diagonal ``A = diag(a)``, (k, p, m)."""
    Zd = z[:, None] - a[None, :]  # (k, n)
    pole = Zd == 0
    R = 1.0 / np.where(pole, 1.0, Zd)
    G = np.einsum("pi,ki,im->kpm", C, R, B) + D[None]
    return _at_poles(G, pole)


#: Most complex entries ``n k m`` of one work array of the refined frequency response.
REFINE_CHUNK = 2**21  # 32 MiB


def schur_response(T: np.ndarray, Bt: np.ndarray, Ct: np.ndarray, D: np.ndarray,
                   z: np.ndarray, refine: tuple | None = None) -> np.ndarray:
    """``Ct (zI - T)^{-1} Bt + D`` for upper triangular ``T`` (n, n), (k, p, m).

    With ``refine = (A, Z, B, C)`` (``A = Z T Z^H``, ``Bt = Z^H B``, ``Ct = C Z``) one step of
    iterative refinement in the original coordinates follows: ``X = Z Xt``, residual
    ``R = B - (zI - A) X`` (``A`` real: ``A X`` as two real products), ``X += Z (zI -
    T)^{-1} Z^H R``, ``G = C X + D``. The Schur form's backward error (``c n eps ||A||``, from
    the QR iteration) is what limits the unrefined result; the residual is formed with
    ``A`` itself, so one step brings the error to that of a dense LU solve per frequency,
    below that of SLICOT TB05AD's Hessenberg evaluation (against 40-digit references:
    ``benchmarks/results/freq_accuracy.md``), at about four times the cost of the
    unrefined evaluation (all of it BLAS products over the k m right-hand sides).
    Frequencies whose correction is not finite keep the unrefined value. The refined
    evaluation runs over chunks of frequencies of at most ``REFINE_CHUNK`` complex entries
    ``n k m`` per work array (a few such arrays are alive at once).
    """
    n, k, m = T.shape[0], z.size, Bt.shape[1]
    k_max = max(1, REFINE_CHUNK // max(n * m, 1))
    if refine is not None and k > k_max:
        return np.concatenate([schur_response(T, Bt, Ct, D, z[j : j + k_max], refine)
                               for j in range(0, k, k_max)])
    d = np.diag(T)
    pole = z[:, None] == d[None, :]  # (k, n): zI - T exactly singular
    if pole.any():
        d = np.where(pole, z[:, None] - 1.0, d[None, :])  # (k, n), 1 on those rows
    X = _back_substitute(T, d, np.broadcast_to(Bt[:, None, :], (n, k, m)), z)
    if refine is None:
        G = np.einsum("pi,ikm->kpm", Ct, X)
        return _at_poles(G + D[None], pole)
    A, Z, B, C = refine
    X = (Z @ X.reshape(n, k * m)).reshape(n, k, m)  # original coordinates
    AX = _real_times_complex(A, X.reshape(n, k * m)).reshape(n, k, m)
    R = AX - z[None, :, None] * X + B[:, None, :]  # B - (zI - A) X
    dX = _back_substitute(T, d, (Z.conj().T @ R.reshape(n, k * m)).reshape(n, k, m), z)
    dX = (Z @ dX.reshape(n, k * m)).reshape(n, k, m)
    ok = np.isfinite(dX).all(axis=(0, 2))  # (k,)
    if not ok.all():
        dX[:, ~ok] = 0.0
    G = np.einsum("pi,ikm->kpm", C, X + dX)
    return _at_poles(G + D[None], pole)


def _back_substitute(T: np.ndarray, d: np.ndarray, R: np.ndarray, z: np.ndarray) -> np.ndarray:
    """``X`` (n, k, m) with ``(z_k I - T) X[:, k] = R[:, k]``, ``T`` upper triangular, its
    diagonal ``d`` ((n,), or (k, n) with exact poles replaced): rows n-1 ... 0, all k and m
    at once."""
    n, k, m = R.shape
    X = np.empty((n, k, m), dtype=np.complex128)
    for i in range(n - 1, -1, -1):
        rhs = R[i]  # (k, m)
        if i + 1 < n:
            # + T[i, i+1:] X[i+1:] since (zI - T) has -T off the diagonal
            acc = T[i, i + 1 :] @ X[i + 1 :].reshape(n - i - 1, k * m)
            rhs = rhs + acc.reshape(k, m)
        X[i] = rhs / (z - d[..., i])[:, None]
    return X


def _real_times_complex(A: np.ndarray, X: np.ndarray) -> np.ndarray:
    """``A @ X`` for real ``A`` (n, n) and complex C-contiguous ``X`` (n, q): one real
    product on the interleaved real and imaginary parts (a quarter of the complex flops)."""
    if np.iscomplexobj(A):  # pragma: no cover - DiscreteLTI holds real A
        return A @ X
    X = np.ascontiguousarray(X)
    return (A @ X.view(np.float64)).view(np.complex128)


def _at_poles(G: np.ndarray, pole: np.ndarray) -> np.ndarray:
    """``inf + nan j`` at the frequencies (rows of `pole`, (k, n)) on a pole."""
    hit = pole.any(axis=1)
    if hit.any():
        G[hit] = complex(np.inf, np.nan)
    return G


def simulate_states(A: np.ndarray, diagonal: bool, BU: np.ndarray,
                    x0: np.ndarray) -> np.ndarray:
    """States ``x_0, ..., x_T`` of ``x_{t+1} = A x_t + (B u)_t``, shape (T + 1, n).

    `BU` is ``U @ B.T``, shape (T, n); `diagonal` says ``A`` is diagonal.
    """
    steps, n = BU.shape[0], x0.shape[0]
    X = np.empty((steps + 1, n))
    X[0] = x0
    if diagonal:
        a = np.diag(A)
        for t in range(steps):
            X[t + 1] = a * X[t] + BU[t]
    else:
        AT = A.T
        for t in range(steps):
            X[t + 1] = X[t] @ AT + BU[t]
    return X


def overflow_message(X: np.ndarray, Y: np.ndarray, sys) -> str:
    """Why a simulation's states `X` (T + 1, n) or outputs `Y` (T, p) are not finite."""
    bad_x = ~np.isfinite(X).all(axis=1)  # (T + 1,)
    bad_y = ~np.isfinite(Y).all(axis=1)  # (T,)
    tx = int(np.argmax(bad_x)) if bad_x.any() else None
    ty = int(np.argmax(bad_y)) if bad_y.any() else None
    if tx is not None and (ty is None or tx <= ty):
        what = f"the state x_t overflowed float64 at step t = {tx} of {X.shape[0] - 1}"
    else:
        what = f"the output y_t overflowed float64 at step t = {ty} of {Y.shape[0]}"
    return what + _radius(sys) + "; simulate fewer steps (or rescale x0, u, C, D) to keep it finite"


def markov_overflow_message(H: np.ndarray, sys) -> str:
    """Why Markov parameters `H` (k, p, m) are not finite."""
    i = int(np.argmax(~np.isfinite(H).reshape(H.shape[0], -1).all(axis=1)))
    return (f"C A^i B overflowed float64 at i = {i} of k = {H.shape[0]}{_radius(sys)}; ask "
            "for fewer terms (or rescale B, C)")


def _radius(sys) -> str:
    if sys.n and not sp.issparse(sys.A):
        return f" (spectral radius of `A` {sys.spectral_radius():.6g})"
    return ""
