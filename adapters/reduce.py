r"""Balanced truncation of trained adapters into smaller *diagonal* adapters.

Shapes: H model width, n order of an adapter's real system (``ssm.as_lti()``, ``n_real +
2 n_complex``), r reduced order, N / N' modes of the full / reduced :class:`DiagonalSSM`.

For each adapter ``y = g · ssm(u)`` (scalar gate g) :func:`reduce`

1. exports the discrete system :math:`G(z) = C (zI - A)^{-1} B` with
   :meth:`DiagonalSSM.as_lti` (the module's output is :math:`z G(z)`: same Gramians, HSVs and
   H-infinity norms), compressing the H-wide input and output maps to at most n columns by
   QR (``B = R_b^T Q_b^T``, ``C = Q_c R_c``; isometries change no Gramian, HSV or norm);
2. reduces it with :func:`lti.balanced_truncation` (exact Gramians) or
   :func:`lti.weighted_balanced_truncation` (data-driven state covariance or input
   covariance from :func:`adapters.calibrate`);
3. brings the reduced dense :math:`A_r` back to a **diagonal** (modal) system -- eigenvalues,
   one representative per complex-conjugate pair -- and builds a new trainable
   :class:`DiagonalSSM` with :meth:`DiagonalSSM.from_discrete`, so the reduced adapter keeps
   the parallel (chunked / FFT) scan, the one-step decode and ``nn.Parameter`` s;
4. measures what the modal step and the float32 parameters changed (a certified bound, see
   :func:`reduce` Notes) and adds it to the reported upper bound;
5. swaps a new :class:`HRMAdapter` with the same gate into the model.

This is the only module (with :mod:`adapters.calibrate`) that moves data between torch and
numpy.
"""

from __future__ import annotations

import json
import math
import numbers
import os
import time
import warnings
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
import torch
from torch import nn

from adapters.exceptions import AdapterConfigError, AdapterError, AdapterStabilityError
from adapters.injection import find_adapters

__all__ = ["LayerReduction", "ReductionReport", "reduce", "modal_form"]

_GRAMIANS = ("exact", "data", "input")
_METHODS = ("auto", "sr", "bfsr")
_EPS = float(np.finfo(np.float64).eps)
COND_MAX = 1e8
"""Default largest accepted condition number of the (unit-column) eigenvector matrix."""
FP_SLACK = 1e3
"""Float64 rounding allowance added to every upper bound: ``FP_SLACK * n * eps * 2 sum(hsv)``
(about 1e-11 of ``||G||`` for n = 32)."""
_SHIFTS = (1e-12, 1e-10, 1e-8, 1e-6, 1e-4)


# --------------------------------------------------------------------------- report


@dataclass(frozen=True)
class LayerReduction:
    """What :func:`reduce` did to one adapter (all bounds include ``|gate|``).

    Attributes
    ----------
    name : str
        Dotted module name of the adapter.
    gate : float
        Gate g (kept unchanged).
    gramian : str
        ``"exact"``, ``"data"`` or ``"input"``.
    hsv : tuple of float
        Hankel singular values used to rank the states, descending (weighted ones for
        ``"data"`` / ``"input"``), without the gate.
    order_before, order_after : int
        Real order n and r (``n_real + 2 n_complex``).
    modes_before, modes_after : int
        State length N and N' of the SSM modules.
    n_real_after, n_complex_after : int
        Mode structure of the reduced SSM.
    lower_bound : float
        ``|g| sigma_{r+1}(G)`` (unweighted HSVs): no adapter of order r is closer to the
        full one in the H-infinity norm.
    upper_bound : float
        Certified ``|| g (G - G_mod) ||_inf`` bound for the module actually installed:
        ``truncation_bound + realisation_bound + rounding slack``.
    truncation_bound : float
        ``|g|`` times the certified H-infinity bound of the balanced-truncation step
        (``2 sum_{i>r} sigma_i`` for exact Gramians; the plain bound of
        :func:`lti.weighted_balanced_truncation` otherwise).
    weighted_bound : float or None
        ``|g| 2 sum_{i>r} sigma~_i``, the bound on the input-weighted error (data / input
        Gramians only; see :class:`lti.WeightedBalancedTruncation`).
    realisation_bound : float
        ``|g| 2 sum_i sigma_i(G_r - G_mod)``: certified bound of what the modal form, a
        fallback perturbation and the rounding of the new parameters changed.
    measured_error : float or None
        ``|| g (G - G_mod) ||_inf`` from :func:`lti.hinf_norm` (``measure=True``).
    eig_cond : float
        Condition number of the unit-column eigenvector matrix of the diagonalised
        ``A_r`` (after the fallback, if one was needed).
    shift : float
        Spectral-norm size of the fallback perturbation of ``A_r`` (0 when none).
    params_before, params_after : int
        Trainable parameters of the adapter (gate included).
    lti_seconds : float
        Time spent inside :mod:`lti` for this layer (measurement excluded).
    """

    name: str
    gate: float
    gramian: str
    hsv: tuple
    order_before: int
    order_after: int
    modes_before: int
    modes_after: int
    n_real_after: int
    n_complex_after: int
    lower_bound: float
    upper_bound: float
    truncation_bound: float
    weighted_bound: float | None
    realisation_bound: float
    measured_error: float | None
    eig_cond: float
    shift: float
    params_before: int
    params_after: int
    lti_seconds: float


@dataclass(frozen=True)
class ReductionReport:
    """Result of :func:`reduce`: one :class:`LayerReduction` per adapter, and the settings.

    Attributes
    ----------
    layers : tuple of LayerReduction
        In module order.
    gramian, method : str
        As passed to :func:`reduce`.
    tol, rel_tol : float or None
        The selection rule used (``order`` otherwise).
    order : int or dict or None
    lti_seconds : float
        Total wall time inside :mod:`lti` calls (export, Gramians, truncation, realisation
        bound).
    lti_cpu_seconds : float
        The same as CPU time of the calling thread (insensitive to other load on the machine;
        equal to the wall time on an idle machine when BLAS runs single-threaded).
    measure_seconds : float
        Time of the optional :func:`lti.hinf_norm` measurements.
    seconds : float
        Wall time of the whole :func:`reduce` call.
    """

    layers: tuple
    gramian: str
    method: str
    tol: float | None = None
    rel_tol: float | None = None
    order: object = None
    lti_seconds: float = 0.0
    lti_cpu_seconds: float = 0.0
    measure_seconds: float = 0.0
    seconds: float = 0.0

    @property
    def params_before(self) -> int:
        """Adapter parameters before reduction (all layers)."""
        return sum(layer.params_before for layer in self.layers)

    @property
    def params_after(self) -> int:
        """Adapter parameters after reduction (all layers)."""
        return sum(layer.params_after for layer in self.layers)

    def __getitem__(self, name: str) -> LayerReduction:
        for layer in self.layers:
            if layer.name == name:
                return layer
        raise KeyError(f"no layer {name!r} in the report; have {[x.name for x in self.layers]}")

    # ---- text
    def to_markdown(self) -> str:
        """A Markdown table: one row per layer, then the totals.

        Returns
        -------
        str
            The table (orders, gate, HSV ratio, bounds, parameters) and a totals line.
        """
        rule = (f"tol={self.tol:g}" if self.tol is not None else
                f"rel_tol={self.rel_tol:g}" if self.rel_tol is not None else
                f"order={self.order}")
        weighted = any(x.weighted_bound is not None for x in self.layers)
        hsv_kind = "weighted HSVs" if weighted else "HSVs"
        lines = [
            f"Balanced truncation ({self.gramian} Gramians, {rule}); bounds on "
            f"||gate (G - G_r)||_inf; sigma: {hsv_kind}",
            "",
            "| layer | modes | order | gate | sigma_r+1/sigma_1 | lower | measured | upper "
            + ("| weighted " if weighted else "") + "| params |",
            "|---|---|---|---|---|---|---|---|" + ("---|" if weighted else "") + "---|",
        ]
        for x in self.layers:
            s1 = x.hsv[0] if x.hsv and x.hsv[0] > 0 else float("nan")
            nxt = x.hsv[x.order_after] / s1 if x.order_after < len(x.hsv) else 0.0
            meas = "-" if x.measured_error is None else f"{x.measured_error:.3g}"
            wcol = ""
            if weighted:
                wcol = "- | " if x.weighted_bound is None else f"{x.weighted_bound:.3g} | "
            lines.append(
                f"| {x.name} | {x.modes_before} -> {x.modes_after} | {x.order_before} -> "
                f"{x.order_after} | {x.gate:.3g} | {nxt:.3g} | {x.lower_bound:.3g} | {meas} | "
                f"{x.upper_bound:.3g} | {wcol}{x.params_before:,d} -> {x.params_after:,d} |"
            )
        before, after = self.params_before, self.params_after
        pct = 100.0 * after / before if before else float("nan")
        lines += ["", f"parameters {before:,d} -> {after:,d} ({pct:.1f} %); "
                      f"lti time {self.lti_seconds:.3f} s (CPU {self.lti_cpu_seconds:.3f} s); "
                      f"total {self.seconds:.3f} s"]
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.to_markdown()

    # ---- JSON
    def to_dict(self) -> dict:
        """JSON-able dict (floats, ints, strings, lists).

        Returns
        -------
        dict
            The fields; ``"layers"`` is a list of dicts of :class:`LayerReduction` fields,
            with ``hsv`` as a list. :meth:`from_dict` inverts it.
        """
        out = asdict(self)
        out["layers"] = [dict(asdict(x), hsv=list(x.hsv)) for x in self.layers]
        return out

    @classmethod
    def from_dict(cls, data: Mapping) -> ReductionReport:
        """Inverse of :meth:`to_dict`.

        Parameters
        ----------
        data : mapping
            As returned by :meth:`to_dict` (or read back from its JSON); not modified.

        Returns
        -------
        ReductionReport

        Raises
        ------
        AdapterError
            ``layers`` is missing, or a key is missing or unknown.

        Examples
        --------
        >>> report = ReductionReport(layers=(), gramian="data", method="sr", rel_tol=1e-3)
        >>> ReductionReport.from_dict(report.to_dict()) == report
        True
        """
        try:
            data = dict(data)
            layers = tuple(LayerReduction(**dict(x, hsv=tuple(x["hsv"])))
                           for x in data.pop("layers"))
            return cls(layers=layers, **data)
        except (KeyError, TypeError) as exc:
            raise AdapterError(f"not a valid reduction report: {exc}") from exc

    def to_json(self, path: str | os.PathLike) -> Path:
        """Write the report to ``path`` as JSON; returns the path.

        Parameters
        ----------
        path : str or os.PathLike
            File to write (overwritten if it exists).

        Returns
        -------
        pathlib.Path
            ``path``.

        Examples
        --------
        >>> import os, tempfile
        >>> report = ReductionReport(layers=(), gramian="data", method="sr", rel_tol=1e-3)
        >>> with tempfile.TemporaryDirectory() as d:
        ...     back = ReductionReport.from_json(report.to_json(os.path.join(d, "r.json")))
        >>> back == report
        True
        """
        path = Path(path)
        path.write_text(json.dumps(self.to_dict(), indent=2) + "\n")
        return path

    @classmethod
    def from_json(cls, path: str | os.PathLike) -> ReductionReport:
        """Read a report written by :meth:`to_json`.

        Parameters
        ----------
        path : str or os.PathLike
            A JSON file written by :meth:`to_json`.

        Returns
        -------
        ReductionReport

        Raises
        ------
        AdapterError
            The JSON object is not a valid report (see :meth:`from_dict`).
        OSError
            The file cannot be read.
        json.JSONDecodeError
            The file is not valid JSON.
        """
        return cls.from_dict(json.loads(Path(path).read_text()))

    # ---- figure
    def plot(self, path: str | os.PathLike | None = None):
        """HSV decay per layer (``sigma_i / sigma_1``, log scale) with the chosen orders.

        The threshold ``rel_tol`` is drawn as a horizontal line when it was the rule; each
        layer's chosen order r is marked on its curve (the last kept state).

        Parameters
        ----------
        path : str or path-like, optional
            Save the figure there (format from the suffix).

        Returns
        -------
        matplotlib.figure.Figure
            The figure (also saved to ``path`` when given).

        Raises
        ------
        ImportError
            matplotlib is missing (``pip install "lti-adapters[plot]"``).
        """
        try:
            from matplotlib import colormaps
            from matplotlib.backends.backend_agg import FigureCanvasAgg
            from matplotlib.figure import Figure
        except ImportError as exc:  # pragma: no cover - depends on the environment
            raise ImportError(
                'ReductionReport.plot needs matplotlib: `pip install "lti-adapters[plot]"`'
            ) from exc
        fig = Figure(figsize=(7.0, 4.2))
        FigureCanvasAgg(fig)
        ax = fig.add_subplot(1, 1, 1)
        cmap = colormaps["viridis"]
        k = max(len(self.layers) - 1, 1)
        floor = np.inf
        for j, x in enumerate(self.layers):
            h = np.asarray(x.hsv, dtype=float)
            if h.size == 0 or not h[0] > 0:
                continue
            rel = h / h[0]
            pos = rel > 0
            idx = np.arange(1, h.size + 1)
            color = cmap(j / k)
            label = x.name if len(self.layers) <= 8 else None
            ax.semilogy(idx[pos], rel[pos], "-", color=color, lw=1.0, label=label)
            r = x.order_after
            if 1 <= r <= h.size and rel[r - 1] > 0:
                ax.semilogy([r], [rel[r - 1]], "o", color=color, ms=4)
            if np.any(pos):
                floor = min(floor, rel[pos].min())
        if self.rel_tol is not None:
            ax.axhline(self.rel_tol, color="crimson", ls="--", lw=1.0,
                       label=f"threshold {self.rel_tol:g}")
        ax.set_xlabel("state index i")
        ax.set_ylabel("sigma_i / sigma_1")
        ax.set_title(f"Hankel singular values per layer ({self.gramian}); dots: kept order")
        if ax.get_legend_handles_labels()[0]:
            ax.legend(fontsize=7, loc="upper right")
        if np.isfinite(floor):
            ax.set_ylim(bottom=max(floor * 0.5, 1e-17))
        fig.tight_layout()
        if path is not None:
            fig.savefig(str(path), dpi=120)
        return fig


# --------------------------------------------------------------------------- numerics


class _Clock:
    """Accumulates the wall and CPU (this thread) time spent inside lti calls."""

    def __init__(self):
        self.seconds = 0.0
        self.cpu_seconds = 0.0
        self.measure = 0.0

    def __call__(self, fn, *args, **kwargs):
        t0, c0 = time.perf_counter(), time.thread_time()
        try:
            return fn(*args, **kwargs)
        finally:
            self.seconds += time.perf_counter() - t0
            self.cpu_seconds += time.thread_time() - c0


def _compress(A, B, C):
    """``(Gc, Qb, Qc)`` with ``(A, B, C) = Qc Gc Qb^T`` and at most n inputs/outputs in ``Gc``.

    ``B = Rb^T Qb^T`` and ``C = Qc Rc`` by QR; ``Qb`` / ``Qc`` have orthonormal columns (None
    when that side is not wider than n). ``D = 0``.
    """
    from lti import DiscreteLTI

    n = A.shape[0]
    Qb = Qc = None
    if B.shape[1] > n:
        Qb, Rb = np.linalg.qr(B.T)  # B^T = Qb Rb: (m, n), (n, n)
        B = Rb.T
    if C.shape[0] > n:
        Qc, C = np.linalg.qr(C)  # C = Qc Rc: (p, n), (n, n)
    return DiscreteLTI(A, B, C), Qb, Qc


def _factors(G):
    """Gramian factors ``(Lc, Lo)`` of a small stable system: Schur-based Lyapunov solves and
    clipped eigendecompositions (:func:`lti.solve_discrete_lyapunov`, :func:`lti.psd_factor`).

    At the sizes of compressed adapters (n <= 64) this is several times faster than the
    Hammarling factor, with HSVs equal to float64 rounding relative to ``sigma_1`` (what the
    bounds need)."""
    import lti

    A, B, C = np.asarray(G.A), np.asarray(G.B), np.asarray(G.C)
    P = lti.solve_discrete_lyapunov(A, B @ B.T)
    Q = lti.solve_discrete_lyapunov(A.T, C.T @ C)
    return lti.psd_factor(P), lti.psd_factor(Q)


def _eig(A):
    lam, V = np.linalg.eig(A)
    lam = lam.astype(np.complex128)
    V = V.astype(np.complex128)
    norms = np.linalg.norm(V, axis=0)
    cond = float(np.linalg.cond(V / norms)) if A.shape[0] else 1.0
    return lam, V, cond if np.isfinite(cond) else np.inf


def modal_form(A, B, C, *, cond_max=COND_MAX):
    r"""Diagonal (modal) realisation of a real system, one mode per conjugate pair.

    Parameters
    ----------
    A : ndarray, shape (r, r)
        Real, Schur-stable state matrix.
    B : ndarray, shape (r, m)
        Real input matrix.
    C : ndarray, shape (p, r)
        Real output matrix.
    cond_max : float, optional
        Largest accepted condition number of the unit-column eigenvector matrix V.

    Returns
    -------
    a : ndarray, shape (N,)
        Poles: the real eigenvalues, then one eigenvalue (``Im > 0``) per conjugate pair.
    Bm : ndarray, shape (N, m)
        Modal input rows (real for real poles).
    Cm : ndarray, shape (p, N)
        Modal output columns, with ``y = Cm_real s_real + 2 Re(Cm_cplx s_cplx)``.
    real : ndarray of bool, shape (N,)
        Which entries are real modes.
    cond : float
        Condition number of V that was used.
    shift : float
        Spectral norm of the perturbation added to A (0 when none was needed).

    Notes
    -----
    With :math:`A = V \Lambda V^{-1}`: :math:`B_m = V^{-1} B`, :math:`C_m = C V`; the partner
    of a pair contributes the complex conjugate, hence the factor 2 Re. Each mode is then
    scaled so that its row of :math:`B_m` and its column of :math:`C_m` have equal norms
    (a diagonal similarity: the transfer function is unchanged).

    Ill-conditioned eigenvectors (:math:`\kappa(V) > ` `cond_max`: a nearly defective
    :math:`A`, whose modal form would amplify rounding by :math:`\kappa(V)`) are handled
    by a documented fallback: :math:`A + \delta \|A\|_2 E` with a fixed, seeded Gaussian
    :math:`E` (:math:`\|E\|_2 = 1`) and :math:`\delta = 10^{-12}, 10^{-10}, \dots, 10^{-4}`
    in turn, keeping the first that is stable and well conditioned (else the best one, with
    a warning). The perturbation separates clustered eigenvalues; the error it causes is
    *not* assumed small: :func:`reduce` measures the difference between the truncated and
    the installed realisation and adds its certified bound to the reported upper bound.

    Examples
    --------
    >>> import numpy as np
    >>> A = np.array([[0.5, 0.3], [-0.3, 0.5]])
    >>> B, C = np.array([[1.0], [0.0]]), np.array([[1.0, 1.0]])
    >>> a, Bm, Cm, real, cond, shift = modal_form(A, B, C)
    >>> z = np.exp(0.4j)
    >>> G = (C @ np.linalg.solve(z * np.eye(2) - A, B))[0, 0]
    >>> Gm = (Cm / (z - a)) @ Bm + (Cm.conj() / (z - a.conj())) @ Bm.conj()  # mode + partner
    >>> bool(a.size == 1 and abs(Gm[0, 0] - G) < 1e-14 and shift == 0.0)
    True
    """
    A, B, C = (np.asarray(X, dtype=np.float64) for X in (A, B, C))
    lam, V, cond = _eig(A)
    shift = 0.0
    if not cond <= cond_max:
        rng = np.random.default_rng(0)
        E = rng.standard_normal(A.shape)
        E /= np.linalg.norm(E, 2)
        scale = max(float(np.linalg.norm(A, 2)), np.finfo(np.float64).tiny)
        best = (cond, lam, V, 0.0)
        for delta in _SHIFTS:
            lam2, V2, cond2 = _eig(A + delta * scale * E)
            if not np.max(np.abs(lam2), initial=0.0) < 1.0:
                continue
            if cond2 < best[0]:
                best = (cond2, lam2, V2, delta * scale)
            if cond2 <= cond_max:
                break
        cond, lam, V, shift = best
        if not cond <= cond_max:
            warnings.warn(
                f"the reduced state matrix is nearly defective: eigenvector condition number "
                f"{cond:.3g} > cond_max = {cond_max:.3g} even after perturbation; the modal "
                "form may lose accuracy (its measured error is added to the bound)",
                UserWarning,
                stacklevel=2,
            )
    Bm = np.linalg.solve(V, B.astype(np.complex128))  # (r, m)
    Cm = C @ V  # (p, r)
    real = lam.imag == 0.0  # LAPACK returns exactly 0 for real eigenvalues of a real matrix
    upper = lam.imag > 0.0
    if int(upper.sum()) != int((lam.imag < 0.0).sum()):
        raise AdapterStabilityError("the reduced state matrix has unpaired complex eigenvalues")
    keep = real | upper
    a, Bm, Cm, real = lam[keep], Bm[keep], Cm[:, keep], real[keep]
    a[real] = a[real].real
    Bm[real] = Bm[real].real
    Cm[:, real] = Cm[:, real].real
    nb = np.linalg.norm(Bm, axis=1)
    nc = np.linalg.norm(Cm, axis=0)
    ok = (nb > 0) & (nc > 0)
    d = np.ones(a.shape[0])
    d[ok] = np.sqrt(nc[ok] / nb[ok])
    return a, Bm * d[:, None], Cm / d[None, :], real, float(cond), float(shift)


# --------------------------------------------------------------------------- checks


def _check_positive(name, value):
    if (isinstance(value, bool) or not isinstance(value, numbers.Real)
            or not math.isfinite(value) or value <= 0):
        raise AdapterConfigError(f"`{name}` must be a positive finite number; got {value!r}")
    return float(value)


def _check_rule(tol, order, rel_tol):
    given = [k for k, v in (("tol", tol), ("order", order), ("rel_tol", rel_tol))
             if v is not None]
    if len(given) != 1:
        raise AdapterConfigError(
            f"give exactly one of `tol`, `order`, `rel_tol`; got {given or 'none'}"
        )
    if tol is not None:
        _check_positive("tol", tol)
    if rel_tol is not None:
        _check_positive("rel_tol", rel_tol)
        if rel_tol > 1:
            raise AdapterConfigError(f"`rel_tol` must lie in (0, 1]; got {rel_tol!r}")


def _order_for(order, name, n):
    r = order.get(name) if isinstance(order, Mapping) else order
    if r is None:
        raise AdapterConfigError(f"`order` has no entry for adapter {name!r}")
    if isinstance(r, bool) or not isinstance(r, numbers.Integral) or not 1 <= r <= n:
        raise AdapterConfigError(
            f"`order` for {name!r} must be an int in [1, n] with n = {n} (the real order "
            f"n_real + 2 n_complex); got {r!r}"
        )
    return int(r)


def _stats_for(stats, name, adapter, gramian):
    from adapters.calibrate import adapter_fingerprint

    if stats is None:
        raise AdapterConfigError(
            f"gramian={gramian!r} needs `stats` from adapters.calibrate(model, batches)"
        )
    try:
        layer = stats[name]
    except (KeyError, TypeError) as exc:
        raise AdapterConfigError(f"`stats` has no statistics for adapter {name!r}") from exc
    if layer.fingerprint != adapter_fingerprint(adapter):
        raise AdapterConfigError(
            f"the adapter {name!r} changed since calibration (its parameters differ from "
            "those the statistics were collected with); run adapters.calibrate again"
        )
    return layer


# --------------------------------------------------------------------------- one layer


def _count_rel(hsv, rel_tol):
    return max(1, int(np.count_nonzero(hsv >= rel_tol * hsv[0]))) if hsv[0] > 0 else 1


def _truncate(Gc, name, gramian, stats_layer, Qb, g, tol, order, rel_tol, method, clock):
    """Reduce the compressed system.

    Returns ``(reduced, hsv, plain_hsv, truncation_bound, lower_bound, weighted_bound)``.
    """
    import lti

    n = Gc.n
    t = None if tol is None else (tol / abs(g) if g != 0 else math.inf)
    if gramian == "exact":
        Lc, Lo = clock(_factors, Gc)

        def run(**kw):
            return clock(lti.balanced_truncation_from_factors, Gc, Lc, Lo, method=method, **kw)

        if rel_tol is not None:
            hsv = np.linalg.svd(Lo.T @ Lc, compute_uv=False)  # HSVs, descending
            res = run(order=min(_count_rel(hsv, rel_tol), n))
        elif order is not None:
            res = run(order=_order_for(order, name, n))
        else:
            res = run(tol=t) if math.isfinite(t) else None
            if res is None or res.order == 0:
                res = run(order=1)
        hsv = np.asarray(res.hsv)
        return res.reduced, hsv, hsv, res.error_bound, res.lower_bound, None
    if gramian == "data":
        kw = {"state_covariance": stats_layer.state_covariance()}
    else:
        W = stats_layer.input_covariance()
        kw = {"input_covariance": W if Qb is None else Qb.T @ W @ Qb}

    def run(**more):
        return clock(lti.weighted_balanced_truncation, Gc, method=method, **kw, **more)

    if rel_tol is not None:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            probe = run(order=n)
        res = run(order=_count_rel(np.asarray(probe.hsv), rel_tol))
    elif order is not None:
        res = run(order=_order_for(order, name, n))
    else:
        res = run(tol=t) if math.isfinite(t) else None
        if res is None or res.order == 0:
            res = run(order=1)
    return (res.reduced, np.asarray(res.hsv), np.asarray(res.unweighted_hsv), res.error_bound,
            res.lower_bound, res.weighted_error_bound)


def _reduce_layer(name, adapter, *, gramian, stats, tol, order, rel_tol, method, measure,
                  cond_max, clock):
    import lti
    from adapters.layer import HRMAdapter
    from adapters.ssm import DiagonalSSM

    t_layer = clock.seconds
    ssm = adapter.ssm
    g = float(adapter.gate.detach().cpu())
    stats_layer = None if gramian == "exact" else _stats_for(stats, name, adapter, gramian)
    G = clock(ssm.as_lti)  # (A, B, C): n states, H inputs and outputs, D = 0
    Gc, Qb, Qc = clock(_compress, *(np.asarray(X) for X in (G.A, G.B, G.C)))
    reduced, hsv, plain_hsv, trunc, lower, weighted = _truncate(
        Gc, name, gramian, stats_layer, Qb, g, tol, order, rel_tol, method, clock)
    Ar, Br, Cr = (np.asarray(X) for X in (reduced.A, reduced.B, reduced.C))
    Br = Br if Qb is None else Br @ Qb.T  # (r, H)
    Cr = Cr if Qc is None else Qc @ Cr  # (H, r)
    a, Bm, Cm, real, cond, shift = modal_form(Ar, Br, Cr, cond_max=cond_max)
    p = next(ssm.parameters())
    try:
        new_ssm = DiagonalSSM.from_discrete(a, Bm, Cm, real_modes=real, scan=ssm.scan,
                                            device=p.device, dtype=p.dtype)
    except AdapterError as exc:
        raise type(exc)(f"adapter {name!r}: the reduced system cannot be installed: {exc}"
                        ) from exc
    new = HRMAdapter(ssm.d_model, ssm=new_ssm, reads=adapter.reads)
    with torch.no_grad():
        new.gate.copy_(adapter.gate.detach())
    # certified realisation error: || G_r - G_mod ||_inf <= 2 sum sigma_i(G_r - G_mod)
    G_mod = clock(new_ssm.as_lti)
    A_m, B_m, C_m = (np.asarray(X) for X in (G_mod.A, G_mod.B, G_mod.C))
    r, r_m = Ar.shape[0], A_m.shape[0]
    A_e = np.zeros((r + r_m, r + r_m))
    A_e[:r, :r], A_e[r:, r:] = Ar, A_m
    E, _, _ = clock(_compress, A_e, np.vstack([Br, B_m]), np.hstack([Cr, -C_m]))  # G_r - G_mod
    Lc_e, Lo_e = clock(_factors, E)
    realisation = 2.0 * float(np.sum(np.linalg.svd(Lo_e.T @ Lc_e, compute_uv=False)))
    slack = FP_SLACK * G.n * _EPS * 2.0 * float(np.sum(plain_hsv))
    lti_seconds = clock.seconds - t_layer
    measured = None
    if measure:
        t0 = time.perf_counter()
        n = G.n
        A_d = np.zeros((n + r_m, n + r_m))
        A_d[:n, :n], A_d[n:, n:] = np.asarray(G.A), A_m
        diff, _, _ = _compress(A_d, np.vstack([np.asarray(G.B), B_m]),
                               np.hstack([np.asarray(G.C), -C_m]))  # G - G_mod
        measured = abs(g) * float(lti.hinf_norm(diff).value)
        clock.measure += time.perf_counter() - t0
    ag = abs(g)
    info = LayerReduction(
        name=name, gate=g, gramian=gramian, hsv=tuple(float(x) for x in hsv),
        order_before=int(G.n), order_after=int(Ar.shape[0]),
        modes_before=int(ssm.d_state), modes_after=int(new_ssm.d_state),
        n_real_after=int(new_ssm.n_real), n_complex_after=int(new_ssm.n_complex),
        lower_bound=ag * float(lower),
        upper_bound=ag * (float(trunc) + realisation + slack),
        truncation_bound=ag * float(trunc),
        weighted_bound=None if weighted is None else ag * float(weighted),
        realisation_bound=ag * realisation, measured_error=measured, eig_cond=cond,
        shift=shift, params_before=int(adapter.num_parameters),
        params_after=int(new.num_parameters), lti_seconds=lti_seconds,
    )
    return new, info


# --------------------------------------------------------------------------- public


def reduce(
    model: nn.Module,
    *,
    tol: float | None = None,
    order: int | Mapping[str, int] | None = None,
    rel_tol: float | None = None,
    gramian: str = "exact",
    stats=None,
    method: str = "auto",
    measure: bool = False,
    cond_max: float = COND_MAX,
) -> ReductionReport:
    r"""Replace every adapter by a balanced truncation of itself, kept diagonal and trainable.

    Parameters
    ----------
    model : nn.Module
        A model adapted by :func:`adapters.inject` (possibly wrapped in
        ``DistributedDataParallel``). Modified in place.
    tol : float, optional
        Absolute tolerance on the certified truncation bound *including the gate*: per
        layer the smallest order r with ``|g| 2 sum_{i>r} sigma_i <= tol`` (exact Gramians;
        with ``"data"`` / ``"input"`` Gramians the weighted bound
        ``|g| 2 sum_{i>r} sigma~_i``). A gate of 0 keeps order 1.
    order : int or dict of str to int, optional
        Real order r to keep (``1 <= r <= n``, n = ``n_real + 2 n_complex``), for all
        layers or per adapter name.
    rel_tol : float, optional
        The paper's rule: keep the states with ``sigma_i / sigma_1 >= rel_tol`` (0.01 for
        small tasks, 0.10 for the 7B model). Exactly one of `tol`, `order`, `rel_tol`.
    gramian : {"exact", "data", "input"}, optional
        ``"exact"``: infinite-horizon Gramians of the adapter (:func:`lti.balanced_truncation`,
        certified ``sigma_{r+1} <= ||G - G_r|| <= 2 sum_{i>r} sigma_i``). ``"data"``: the
        data-driven controllability Gramian ``E[x x^T]`` of ``stats`` with the exact
        observability Gramian (:func:`lti.weighted_balanced_truncation`); ``"input"``: the
        stream covariance ``W`` of ``stats`` as a white-noise input model.
    stats : CalibrationStats, optional
        From :func:`adapters.calibrate` with the same adapter parameters (checked by
        fingerprint); required for ``"data"`` and ``"input"``.
    method : {"auto", "sr", "bfsr"}, optional
        Projection method of :mod:`lti`.
    measure : bool, optional
        Also compute ``|| g (G - G_mod) ||_inf`` with :func:`lti.hinf_norm` per layer (slower;
        not counted in ``lti_seconds``).
    cond_max : float, optional
        Largest accepted eigenvector condition number of the modal form (see
        :func:`modal_form`).

    Returns
    -------
    ReductionReport
        Per layer: HSVs, orders, bounds (gate included), parameters; timings.

    Raises
    ------
    AdapterError
        ``model`` has no adapters.
    AdapterConfigError
        Not exactly one of `tol` / `order` / `rel_tol`; bad values; missing or stale `stats`.
    AdapterStabilityError
        A reduced system could not be installed (unstable pole).

    Notes
    -----
    The adapter is :math:`y = g\, z G(z) u` with :math:`G = (A, B, C, 0)` from
    :meth:`DiagonalSSM.as_lti`; the factor z (the module reads ``y_t = C s_t`` with ``s_t``
    already holding ``u_t``) changes no norm, so every statement is about
    :math:`\| g (G - G_{mod}) \|_\infty`, where :math:`G_{mod}` is the *installed* module
    (float32 parameters, evaluated in float64).

    Certificate. With :math:`G_r` the truncated system,

    .. math::

        |g| \sigma_{r+1}(G) \le \| g (G - G_{mod}) \|_\infty \le
        |g| \big( \beta_r + 2 \textstyle\sum_i \sigma_i(G_r - G_{mod}) + \epsilon \big),

    where :math:`\beta_r` is the truncation bound (exact Gramians: :math:`2 \sum_{i>r}
    \sigma_i`; data / input Gramians: the certified plain bound of
    :func:`lti.weighted_balanced_truncation`, :math:`\|M\| \|K\| 2 \sum_{i>r}
    \tilde\sigma_i`, which may be loose -- the weighted bound is reported apart), the
    second term bounds the change made by the modal form, a fallback perturbation and the
    rounding of the new parameters (any stable system obeys
    :math:`\|E\|_\infty \le 2 \sum_i \sigma_i(E)`), and :math:`\epsilon =
    10^3 n\, \mathrm{eps}\, 2 \sum_i \sigma_i(G)` allows for the float64 rounding of these
    computations. The lower bound holds for every system of order r (the installed one
    has order r).

    Diagonal result. :math:`A_r` is diagonalised (:func:`modal_form`): real eigenvalues
    become real modes, each conjugate pair one complex mode, so the new
    :class:`DiagonalSSM` is ``"real"``, ``"complex"`` or ``"mixed"`` with
    ``N' = n_real + n_complex`` modes and real order r. An ill-conditioned eigenvector
    matrix triggers the documented perturbation fallback; its effect is inside the
    realisation term above, so the certificate stays honest.

    The singular-perturbation variant (``match_dc``) is not offered: it yields a
    feedthrough :math:`D_r \ne 0`, and :math:`z D_r` is not causal, so no
    :class:`DiagonalSSM` can realise it.

    The wide input/output maps (H >> n) are compressed by QR before any lti call
    (:math:`B = R_b^T Q_b^T`, :math:`C = Q_c R_c` with isometries :math:`Q_b, Q_c`), which
    leaves Gramians, HSVs, bounds and norms unchanged and makes a 576-wide layer cost
    what a 32-wide one does.

    Examples
    --------
    >>> import torch
    >>> from torch import nn
    >>> from adapters import HRMConfig, inject
    >>> from adapters.reduce import reduce
    >>> class Block(nn.Module):
    ...     def __init__(self):
    ...         super().__init__()
    ...         self.mlp = nn.Sequential(nn.Linear(8, 16), nn.GELU(), nn.Linear(16, 8))
    ...     def forward(self, x):
    ...         return x + self.mlp(x)
    >>> class Tiny(nn.Module):
    ...     def __init__(self):
    ...         super().__init__()
    ...         self.h = nn.ModuleList([Block(), Block()])
    ...     def forward(self, x):
    ...         return self.h[1](self.h[0](x))
    >>> torch.manual_seed(0) and None
    >>> model = inject(Tiny(), HRMConfig(d_state=6, gate_init=0.5))
    >>> report = reduce(model, order=3, measure=True)
    >>> x = report["h.0.mlp"]
    >>> x.modes_after <= 3, x.lower_bound <= x.measured_error <= x.upper_bound
    (True, True)
    """
    import lti  # noqa: F401 - imported before the clock starts (scipy's import is slow)

    t_start = time.perf_counter()
    _check_rule(tol, order, rel_tol)
    if gramian not in _GRAMIANS:
        raise AdapterConfigError(f"`gramian` must be one of {_GRAMIANS}; got {gramian!r}")
    if method not in _METHODS:
        raise AdapterConfigError(f"`method` must be one of {_METHODS}; got {method!r}")
    _check_positive("cond_max", cond_max)
    from torch.nn.parallel import DistributedDataParallel

    base = model.module if isinstance(model, DistributedDataParallel) else model
    adapted = find_adapters(base)
    if not adapted:
        raise AdapterError("`model` has no HRM adapters; call `adapters.inject` first")
    if isinstance(order, Mapping):
        unknown = sorted(set(order) - set(adapted))
        if unknown:
            raise AdapterConfigError(f"`order` names unknown adapters {unknown}")
    clock = _Clock()
    built, infos = {}, []
    for name, wrapper in adapted.items():  # build everything first, then swap
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            new, info = _reduce_layer(
                name, wrapper.adapter, gramian=gramian, stats=stats, tol=tol, order=order,
                rel_tol=rel_tol, method=method, measure=measure, cond_max=cond_max,
                clock=clock,
            )
        for w in caught:  # re-issued at the caller, naming the layer
            warnings.warn(f"adapter {name!r}: {w.message}", w.category, stacklevel=2)
        built[name] = new
        infos.append(info)
    for name, new in built.items():
        adapted[name].adapter = new
    order_out = dict(order) if isinstance(order, Mapping) else order
    return ReductionReport(
        layers=tuple(infos), gramian=gramian, method=method,
        tol=None if tol is None else float(tol),
        rel_tol=None if rel_tol is None else float(rel_tol), order=order_out,
        lti_seconds=clock.seconds, lti_cpu_seconds=clock.cpu_seconds,
        measure_seconds=clock.measure,
        seconds=time.perf_counter() - t_start,
    )
