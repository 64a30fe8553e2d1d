"""Reference systems for tests and benchmarks (numpy and scipy only)."""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp

__all__ = ["heat_2d"]


def heat_2d(N: int, half_width: float = 0.1):
    """2-D heat equation on the unit square, ``N x N`` interior grid (``n = N^2`` states),
    explicit Euler with ``dt = 0.2 h^2``, ``h = 1/(N+1)``: ``A = I + dt L`` (sparse CSR,
    five-point Laplacian ``L``, spectral radius -> 1 as ``N`` grows).

    Returns ``(A, B, C)``: ``A`` (n, n) scipy.sparse, ``B`` (n, 1) the indicator of the
    square patch of half-width `half_width` around (0.3, 0.3), ``C`` (2, n) those around
    (0.7, 0.7) and (0.7, 0.3) times ``h^2``.
    """
    h = 1.0 / (N + 1)
    T = sp.diags([np.ones(N - 1), -2.0 * np.ones(N), np.ones(N - 1)], [-1, 0, 1]) / h**2
    eye = sp.eye(N)
    A = (sp.eye(N * N) + 0.2 * h * h * (sp.kron(T, eye) + sp.kron(eye, T))).tocsr()
    x = (np.arange(N) + 1) * h
    X, Y = np.meshgrid(x, x, indexing="ij")

    def patch(cx, cy):
        inside = (np.abs(X - cx) <= half_width) & (np.abs(Y - cy) <= half_width)
        return inside.ravel().astype(float)

    B = patch(0.3, 0.3)[:, None]
    C = np.vstack([patch(0.7, 0.7), patch(0.7, 0.3)]) * h * h
    return A, B, C
