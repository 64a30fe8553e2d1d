"""Optional SLICOT backend (slycot): SB03MD for ``X``, SB03OD for its factor.

Used only when a caller asks for ``method="slycot"`` by name.
"""

from __future__ import annotations

import warnings

import numpy as np

from lti._hammarling import compress_rows
from lti._validation import check_stable, symmetrize_
from lti.exceptions import InvalidArgumentError, MissingDependencyError

__all__ = ["factor_slycot", "import_slycot", "solve_slycot"]


def import_slycot():
    try:
        import slycot
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise MissingDependencyError(
            'method="slycot" needs slycot; install it with pip install "lti-adapters[control]"'
        ) from exc
    return slycot


def solve_slycot(M: np.ndarray, Q: np.ndarray) -> np.ndarray:
    slycot = import_slycot()
    if np.iscomplexobj(M) or np.iscomplexobj(Q):
        raise InvalidArgumentError('method="slycot" needs real `A` and `Q`')
    n = M.shape[0]
    if n == 0:
        return np.zeros((0, 0))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        _, _, X, scale, _, _, w = slycot.sb03md57(
            M.copy(), C=-Q.copy(), dico="D", job="X", fact="N", trana="T"
        )
    check_stable("A", M, rho=float(np.max(np.abs(w))))
    return symmetrize_(X / scale)


def factor_slycot(M: np.ndarray, Bm: np.ndarray, transpose: bool) -> np.ndarray:
    slycot = import_slycot()
    if np.iscomplexobj(M) or np.iscomplexobj(Bm):
        raise InvalidArgumentError('method="slycot" needs real `A` and `B`')
    n, m = Bm.shape
    if n == 0:
        return np.zeros((0, 0))
    if m > n:  # SB03OD's wrapper takes at most n columns: B B^T = R^T R, R from a QR of B^T
        Bm = compress_rows(Bm.T).T
        m = Bm.shape[1]
    ld = max(n, m)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if transpose:
            # op(A) = A: A^T X A - X = -scale^2 B B^T with op(B) = B^T (m x n), X = U^T U
            Bp = np.zeros((ld, n))
            Bp[:m] = Bm.T
            U, scale, w = slycot.sb03od(n, m, M.copy(), np.zeros((n, n)), Bp, "D", trans="N")
            L = U.T
        else:
            # op(A) = A^T: A X A^T - X = -scale^2 B B^T with op(B) = B (n x m), X = U U^T
            Bp = np.zeros((n, ld))
            Bp[:, :m] = Bm
            U, scale, w = slycot.sb03od(n, m, M.copy(), np.zeros((n, n)), Bp, "D", trans="T")
            L = U
    check_stable("A", M, rho=float(np.max(np.abs(w))))
    return L[:n, :n] / scale
