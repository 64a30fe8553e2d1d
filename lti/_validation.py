"""Input validation shared by the public entry points of :mod:`lti`.

Every helper raises one of the typed errors of :mod:`lti.exceptions` with a message
that names the argument and the offending value, and never modifies its input.
"""

from __future__ import annotations

import numbers

import numpy as np
import scipy.linalg as sla
import scipy.sparse as sp

from lti.exceptions import (
    InvalidArgumentError,
    NonFiniteError,
    NotSymmetricError,
    ShapeError,
    SparseNotSupportedError,
    UnstableSystemError,
)

#: Where a sparse ``A`` is supported (named by the error of dense-only array arguments).
SPARSE_SUPPORTED = (
    "lti.DiscreteLTI keeps a sparse A, and lti.lyapunov_factor, lti.gramian_factors, "
    "lti.hankel_singular_values, lti.balanced_truncation, lti.h2_norm and lti.hankel_norm "
    "work on it through low-rank ADI factors (lti.lowrank); for small n pass X.toarray()"
)

__all__ = [
    "as_float_matrix",
    "asymmetry",
    "symmetrize_",
    "as_float_vector",
    "as_real_array",
    "first_nonfinite",
    "check_square",
    "check_symmetric",
    "check_context",
    "check_not_masked",
    "check_int",
    "check_stable",
    "balanced_margin",
    "spectral_radius",
    "stability_margin",
    "unstable_message",
    "sym_sqrt",
]


def _as_array(name: str, X, *, allow_complex: bool, copy: bool = True) -> np.ndarray:
    if type(X) is np.ndarray and X.dtype == np.float64:  # the common case, without the tests
        return X.copy(order="K") if copy else X  # what the general path below returns
    if sp.issparse(X):
        raise SparseNotSupportedError(
            f"`{name}` is a scipy.sparse matrix, but this function needs a dense array; "
            + SPARSE_SUPPORTED
        )
    check_not_masked(name, X)
    try:
        arr = np.asarray(X)
    except Exception as exc:  # ragged lists and the like
        raise ShapeError(  # (numpy's reason: a ragged list, a tensor that requires grad)
            f"`{name}` must be array-like; got {type(X).__name__} ({exc})") from exc
    if arr.dtype == object or not (
        np.issubdtype(arr.dtype, np.number) or np.issubdtype(arr.dtype, np.bool_)
    ):
        raise ShapeError(f"`{name}` must be a numeric array; got dtype {arr.dtype}")
    if np.iscomplexobj(arr):
        if not allow_complex:
            if np.any(arr.imag != 0):
                raise ShapeError(f"`{name}` must be real; got a complex array")
            arr = arr.real
            return np.array(arr, dtype=np.float64, copy=True)
        return np.array(arr, dtype=np.complex128, copy=True if copy else None)
    return np.array(arr, dtype=np.float64, copy=True if copy else None)


def check_not_masked(name: str, X) -> None:
    """Refuse a masked array with masked entries: ``np.asarray`` would read the values under
    the mask."""
    if isinstance(X, np.ma.MaskedArray) and np.ma.is_masked(X):
        bad = tuple(int(i) for i in np.argwhere(np.ma.getmaskarray(X))[0])
        raise InvalidArgumentError(
            f"`{name}` is a masked array with {int(np.ma.count_masked(X))} masked entries "
            f"(the first at index {bad}); pass `{name}.filled(value)` or `{name}.data`"
        )


def _check_finite(name: str, arr: np.ndarray) -> None:
    if not np.isfinite(arr).all():  # (the method: np.all's wrapper costs as much again)
        bad = np.argwhere(~np.isfinite(arr))[0]
        value = arr[tuple(bad)]
        raise NonFiniteError(
            f"`{name}` must be finite; got {value} at index {tuple(int(i) for i in bad)}"
        )


def as_float_matrix(
    name: str, X, *, allow_complex: bool = False, copy: bool = True
) -> np.ndarray:
    """Return a 2-D float64 (or complex128) copy of `X` after shape and finiteness checks.

    Parameters
    ----------
    name : str
        Argument name used in error messages.
    X : array_like, shape (r, c)
        The matrix.
    allow_complex : bool, optional
        Keep complex input as complex128 instead of rejecting a non-zero imaginary part.
    copy : bool, optional
        ``False`` returns the input itself when it already is a float64 (complex128)
        array; the caller must then treat it as read-only.

    Returns
    -------
    ndarray, shape (r, c)
        A fresh, writeable copy (unless ``copy=False``).

    Raises
    ------
    ShapeError
        If `X` is not 2-D or not numeric (or complex when not allowed).
    NonFiniteError
        If `X` holds NaN or inf.
    """
    arr = _as_array(name, X, allow_complex=allow_complex, copy=copy)
    if arr.ndim != 2:
        raise ShapeError(f"`{name}` must be a 2-D array; got shape {arr.shape}")
    _check_finite(name, arr)
    return arr


def as_real_array(name: str, x) -> np.ndarray:
    """Return `x` as a float64 array of any shape (a copy), with typed errors for complex,
    non-numeric and masked input; finiteness is left to the caller."""
    return _as_array(name, x, allow_complex=False)


def first_nonfinite(arr: np.ndarray) -> str:
    """``"nan at index (i, j)"`` for the first non-finite entry of `arr` (which has one)."""
    bad = np.argwhere(~np.isfinite(arr))[0]
    return f"{arr[tuple(bad)]} at index {tuple(int(i) for i in bad)}"


def as_float_vector(name: str, x, *, allow_complex: bool = False) -> np.ndarray:
    """Return a 1-D float64 (or complex128) copy of `x` after shape and finiteness checks.

    Parameters
    ----------
    name : str
        Argument name used in error messages.
    x : array_like, shape (n,)
        The vector.
    allow_complex : bool, optional
        Keep complex input as complex128.

    Returns
    -------
    ndarray, shape (n,)
        A fresh, writeable copy.
    """
    arr = _as_array(name, x, allow_complex=allow_complex)
    if arr.ndim != 1:
        raise ShapeError(f"`{name}` must be a 1-D array; got shape {arr.shape}")
    _check_finite(name, arr)
    return arr


def check_square(name: str, A: np.ndarray) -> int:
    """Raise :class:`ShapeError` unless `A` is a square 2-D array; return its size n."""
    if A.ndim != 2 or A.shape[0] != A.shape[1]:
        raise ShapeError(f"`{name}` must be square; got shape {A.shape}")
    return A.shape[0]


def check_symmetric(name: str, X: np.ndarray, *, rtol: float | None = None) -> float:
    """Raise :class:`NotSymmetricError` unless `X` is symmetric (Hermitian) to `rtol`.

    The test is ``||X - X^H||_max <= rtol * max(||X||_max, tiny)``, relative to the
    scale of the data; the default ``rtol`` is ``100 * n * eps``. Returns the measured
    ``||X - X^H||_max`` (0.0 for an exactly symmetric matrix).
    """
    n = check_square(name, X)
    if n == 0:
        return 0.0
    if rtol is None:
        rtol = 100.0 * max(n, 1) * np.finfo(np.float64).eps
    scale = float(np.max(np.abs(X)))
    asym = asymmetry(X)
    if asym > rtol * max(scale, np.finfo(np.float64).tiny):
        kind, op = ("Hermitian", "H") if np.iscomplexobj(X) else ("symmetric", "T")
        raise NotSymmetricError(
            f"`{name}` must be {kind}; got max|{name} - {name}^{op}| = {asym:.3g} "
            f"relative to max|{name}| = {scale:.3g} (rtol {rtol:.2g})"
        )
    return asym


_BLOCK = 256  # tile size of the cache-friendly transposed passes


def asymmetry(X: np.ndarray) -> float:
    """``max |X - X^H|`` of a square matrix, by tiles (no transposed full-size temporary)."""
    n = X.shape[0]
    if n <= 2 * _BLOCK:
        return float(np.max(np.abs(X - X.conj().T), initial=0.0))
    worst = 0.0
    for i in range(0, n, _BLOCK):
        I = slice(i, i + _BLOCK)
        for j in range(i, n, _BLOCK):
            J = slice(j, j + _BLOCK)
            worst = max(worst, float(np.max(np.abs(X[I, J] - X[J, I].conj().T))))
    return worst


def symmetrize_(X: np.ndarray) -> np.ndarray:
    """Replace ``X`` (square, writeable) by ``(X + X^H) / 2`` in place, by tiles; return it."""
    n = X.shape[0]
    if n <= 2 * _BLOCK:
        X[...] = 0.5 * (X + X.conj().T)
        return X
    for i in range(0, n, _BLOCK):
        I = slice(i, i + _BLOCK)
        for j in range(i, n, _BLOCK):
            J = slice(j, j + _BLOCK)
            M = 0.5 * (X[I, J] + X[J, I].conj().T)
            X[I, J] = M
            X[J, I] = M.conj().T
    return X


def spectral_radius(A) -> float:
    """Spectral radius ``max |lambda_i(A)|`` of a square matrix or of a diagonal ``a`` (1-D)."""
    A = np.asarray(A)
    if A.size == 0:
        return 0.0
    if A.ndim == 1:
        return float(np.max(np.abs(A)))
    return float(np.max(np.abs(np.linalg.eigvals(A))))


#: Eigenvalues within ``STABILITY_MARGIN n eps max(||A||_F, 1)`` of the unit circle count as
#: on it (a backward-stable eigenvalue solver moves them by about ``n eps ||A||``).
STABILITY_MARGIN = 8.0
_EPS = float(np.finfo(np.float64).eps)  # (np.finfo per call costs a microsecond)


def stability_margin(n: int, norm_A: float) -> float:
    """Distance from the unit circle within which a computed eigenvalue of an n x n matrix
    of Frobenius norm ``norm_A`` cannot be told from one on it:
    ``STABILITY_MARGIN * n * eps * max(norm_A, 1)`` (for eigenvalues of condition about one;
    an ill-conditioned eigenvalue near the circle is not caught)."""
    return STABILITY_MARGIN * max(n, 1) * _EPS * max(float(norm_A), 1.0)


def unstable_message(what: str, rho: float, margin: float) -> str:
    """The message of :class:`UnstableSystemError` for spectral radius ``rho``."""
    if rho >= 1.0:
        return f"{what} must be Schur-stable (spectral radius < 1); got {rho:.6g}"
    return (
        f"{what} must be Schur-stable (spectral radius < 1); got {rho!r} = 1 - {1.0 - rho:.3g}, "
        f"within the rounding margin {margin:.3g} of the unit circle (a pole on the circle "
        "as far as floating point can tell: the norms and Gramians are infinite)"
    )


def check_stable(name: str, A, *, rho: float | None = None, norm: float | None = None,
                 n: int | None = None) -> float:
    """Raise :class:`UnstableSystemError` unless `A` is Schur-stable with the rounding
    margin :func:`stability_margin`; return its spectral radius.

    Parameters
    ----------
    name : str
        Argument name used in error messages.
    A : ndarray, shape (n, n) or (n,), or None
        Square matrix, or the diagonal of a diagonal matrix (None: give `rho`, `norm`, `n`).
    rho : float, optional
        Precomputed spectral radius (saves an eigenvalue computation).
    norm, n : optional
        ``||A||_F`` and the order, when `A` is not given.
    """
    if rho is None:
        rho = spectral_radius(A)
    if A is not None:
        arr = np.asarray(A)
        n = arr.shape[0]
        norm = float(np.linalg.norm(arr)) if arr.ndim == 2 else float(np.max(np.abs(arr),
                                                                             initial=0.0))
    margin = stability_margin(n or 1, 1.0 if norm is None else norm)
    if not rho < 1.0 - margin and A is not None and np.ndim(A) == 2:
        rho, margin = balanced_margin(np.asarray(A), margin, rho)
    if not rho < 1.0 - margin:
        raise UnstableSystemError(unstable_message(f"`{name}`", rho, margin))
    return rho


def balanced_margin(A: np.ndarray, margin: float, rho: float) -> tuple[float, float]:
    """``(rho, margin)`` to test ``rho < 1 - margin`` with, for a dense ``A`` (n, n) whose
    spectral radius ``rho`` did not clear ``margin = stability_margin(n, ||A||_F)``.

    The margin of ``S^{-1} A S`` with LAPACK's diagonal balancing ``S`` (``gebal``, powers
    of 2: exact, the same eigenvalues) when smaller, and the larger of ``rho`` and the
    spectral radius of ``S^{-1} A S`` (a balancing eigensolver, whose error scales with that
    norm: ``rho`` may come from an unbalanced Schur form, whose eigenvalues are only as good
    as ``eps ||A||_F`` allows). ``||A||_F`` of a badly scaled realisation says nothing about
    its eigenvalues: ``[[0.999, 1e12], [0, 0.5]]`` (a state in units 1e12 times too small)
    had a margin of 3.5e-3 and was refused as "a pole on the circle", its balanced form
    ``[[0.999, 1], [0, 0.5]]`` (the same system) was not. Called only where the first check
    failed, so the common case pays nothing; sparse, empty or non-finite ``A``, or ``A``
    already balanced: ``(rho, margin)`` unchanged."""
    n = A.shape[0] if A.ndim == 2 else 0
    if n < 2 or sp.issparse(A) or not np.isfinite(A).all():
        return rho, margin
    with np.errstate(invalid="ignore"):  # (scipy casts the unused permutation: a warning)
        _, (scale, _) = sla.matrix_balance(A, permute=False, separate=True)
    if np.all(scale == 1.0):
        return rho, margin
    balanced = A * (1.0 / scale)[:, None] * scale[None, :]
    margin_b = stability_margin(n, float(np.linalg.norm(balanced)))
    if not margin_b < margin:
        return rho, margin
    return max(rho, spectral_radius(balanced)), margin_b


def check_int(name: str, value, *, minimum: int) -> int:
    """Validated integer ``>= minimum`` (``bool`` rejected)."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < minimum:
        raise InvalidArgumentError(f"`{name}` must be an integer >= {minimum}; got {value!r}")
    return int(value)


def check_context(horizon, burn_in) -> tuple[int | None, int]:
    """Validated context length ``horizon`` (None or >= 1) and ``burn_in < horizon``."""
    burn_in = check_int("burn_in", burn_in, minimum=0)
    if horizon is not None:
        horizon = check_int("horizon", horizon, minimum=1)
        if burn_in >= horizon:
            raise InvalidArgumentError(
                f"`burn_in` must be smaller than `horizon` ({horizon}); got {burn_in}"
            )
    return horizon, burn_in



def sym_sqrt(name: str, W: np.ndarray) -> np.ndarray:
    """Symmetric PSD square root; rejects asymmetric or clearly indefinite `W`."""
    scale = max(float(np.max(np.abs(W))), np.finfo(np.float64).tiny)
    if np.max(np.abs(W - W.T)) > 1e3 * W.shape[0] * np.finfo(np.float64).eps * scale:
        raise InvalidArgumentError(f"`{name}` must be symmetric; got max|W - W^T| = "
                                   f"{np.max(np.abs(W - W.T)):.3g}")
    w, V = np.linalg.eigh(0.5 * (W + W.T))
    if w.min(initial=0.0) < -1e3 * W.shape[0] * np.finfo(np.float64).eps * scale:
        raise InvalidArgumentError(
            f"`{name}` must be positive semidefinite; got eigenvalue {w.min():.3g}"
        )
    return (V * np.sqrt(np.clip(w, 0.0, None))) @ V.T

