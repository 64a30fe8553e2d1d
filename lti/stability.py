"""Stable/unstable decomposition of discrete-time systems.

:func:`split_unstable` block-diagonalises ``A`` into the part with ``|lambda| < 1`` and
the rest (an ordered real Schur form and one Sylvester equation), so that balanced
truncation can keep the unstable part exactly and reduce only the stable one.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import scipy.linalg as sla

from lti._validation import stability_margin
from lti.exceptions import SolverError
from lti.lowrank import dense_only
from lti.system import DiscreteLTI, as_discrete_system

__all__ = ["StableSplit", "split_unstable"]


@dataclass(frozen=True, eq=False)
class StableSplit:
    """``W^{-1} A W = diag(As, Au)`` with ``W = [W1 W2]``, ``W^{-1} = [V1; V2]``.

    Attributes
    ----------
    ns : int
        Number of stable states (``|lambda| < 1``).
    W1, W2 : ndarray, shapes (n, ns), (n, n - ns)
        Right bases of the stable and unstable invariant subspaces.
    V1, V2 : ndarray, shapes (ns, n), (n - ns, n)
        The matching rows of ``W^{-1}``.
    As, Au : ndarray, shapes (ns, ns), (n - ns, n - ns)
        Quasi-triangular stable and unstable blocks.
    """

    ns: int
    W1: np.ndarray
    W2: np.ndarray
    V1: np.ndarray
    V2: np.ndarray
    As: np.ndarray
    Au: np.ndarray

    def stable_part(self, G: DiscreteLTI) -> DiscreteLTI:
        """``(As, V1 B, C W1, D)``: the stable part of `G`."""
        return DiscreteLTI(self.As, self.V1 @ G.B, G.C @ self.W1, G.D, G.dt)


def split_unstable(sys) -> StableSplit:
    """Block-diagonalise ``A`` into stable (``|lambda| < 1``) and unstable parts.

    Ordered real Schur form ``A = Z [[T11, T12], [0, T22]] Z^T`` (stable eigenvalues
    first), then the Sylvester equation ``T11 X - X T22 + T12 = 0`` decouples the blocks:
    with ``W = Z [[I, X], [0, I]]``, ``W^{-1} A W = diag(T11, T22)``.

    Parameters
    ----------
    sys : DiscreteLTI, python-control system or tuple
        The system (see :func:`lti.system.as_discrete_system`).

    Returns
    -------
    StableSplit
    """
    G = as_discrete_system(sys)
    dense_only("split_unstable()", G)
    # eigenvalues within the rounding margin of the unit circle count as unstable (kept)
    limit = (1.0 - stability_margin(G.n, float(np.linalg.norm(G.A)))) ** 2
    T, Z, ns = sla.schur(G.A, output="real", sort=lambda re, im: re * re + im * im < limit)
    T11, T12, T22 = T[:ns, :ns], T[:ns, ns:], T[ns:, ns:]
    X = sla.solve_sylvester(T11, -T22, -T12)  # T11 X - X T22 = -T12
    if not np.all(np.isfinite(X)):
        raise SolverError("could not decouple the stable and unstable parts of `sys.A`")
    Z1, Z2 = Z[:, :ns], Z[:, ns:]
    W1, W2 = Z1, Z1 @ X + Z2
    V1, V2 = Z1.T - X @ Z2.T, Z2.T
    return StableSplit(ns, W1, W2, V1, V2, T11, T22)
