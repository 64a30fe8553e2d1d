r"""Balanced truncation of trained adapters into smaller *diagonal* adapters.

Shapes: H model width, n order of an adapter's real system (``ssm.as_lti()``, ``n_real +
2 n_complex``), r reduced order, N / N' modes of the full / reduced :class:`DiagonalSSM`.

For each adapter ``y = g · ssm(u)`` (scalar gate g) :func:`reduce`

1. exports the discrete system :math:`G(z) = C (zI - A)^{-1} B` with
   :meth:`DiagonalSSM.as_lti` (the module's output is :math:`z G(z)`, which has the same
   H-infinity norm as :math:`G` -- :math:`|z| = 1` on the unit circle -- but not the same
   Gramians or HSVs; the HSVs ranked and reported are those of :math:`G`), compressing the
   H-wide input and output maps to at most n columns by QR (``B = R_b^T Q_b^T``,
   ``C = Q_c R_c``; isometries change no Gramian, HSV or norm);
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

This module and calibration (:mod:`adapters.calibration`) move data between torch and numpy;
the report it returns is :mod:`adapters.report`.
"""

from __future__ import annotations

import contextlib
import math
import numbers
import time
import warnings
from collections.abc import Iterator, Mapping
from dataclasses import dataclass

import numpy as np
import torch
from torch import nn

from adapters._wrappers import unwrap_model
from adapters.exceptions import (
    AdapterConfigError,
    AdapterError,
    AdapterStabilityError,
    CalibrationError,
)
from adapters.injection import find_adapters, get_adapter_config, set_adapter_config
from adapters.report import LayerReduction, ReductionReport
from adapters.statistics import CalibrationStats, adapter_fingerprint

__all__ = ["COND_MAX", "FP_SLACK", "REDUCTION_GRAMIANS", "modal_form", "reduce"]

#: Gramians :func:`reduce` can balance (its ``gramian`` argument).
REDUCTION_GRAMIANS = ("exact", "data", "input")
_EPS = float(np.finfo(np.float64).eps)
COND_MAX = 1e8
"""Default largest accepted condition number of the (unit-column) eigenvector matrix."""
FP_SLACK = 1e3
"""Float64 rounding allowance added to every upper bound: ``FP_SLACK * n * eps * 2 sum(hsv)``
(about 1e-11 of ``||G||`` for n = 32)."""
_SHIFTS = (1e-12, 1e-10, 1e-8, 1e-6, 1e-4)

# --------------------------------------------------------------------------- numerics


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
    if stats is None:
        raise AdapterConfigError(
            f"gramian={gramian!r} needs `stats` from adapters.calibrate(model, batches)"
        )
    try:
        layer = stats[name]
    except (KeyError, TypeError) as exc:
        raise AdapterConfigError(f"`stats` has no statistics for adapter {name!r}") from exc
    now = adapter_fingerprint(adapter)
    rounded = getattr(layer, "rounded_fingerprint", None)  # calibrated in float64, now float32
    if layer.fingerprint != now and not (rounded is not None and rounded == now) and not any(
            layer.fingerprint == adapter_fingerprint(adapter, d)
            for d in (torch.float32, torch.float64) if _exact_in(adapter, d)):
        raise AdapterConfigError(
            f"the adapter {name!r} changed since calibration (its parameters differ from "
            "those the statistics were collected with); run adapters.calibrate again"
        )
    return layer


def _exact_in(adapter, dtype) -> bool:
    """Whether every floating-point SSM tensor of `adapter` is exactly representable in
    `dtype` (a cast after calibration, e.g. ``model.double()``, keeps the same system)."""
    return all(torch.equal(t.to(dtype).to(t.dtype), t)
               for t in adapter.ssm.state_dict().values() if t.is_floating_point())


# --------------------------------------------------------------------------- one layer


@dataclass(frozen=True)
class _Truncation:
    """Balanced truncation of one compressed adapter system (gate not included)."""

    reduced: object  # lti.DiscreteLTI of order r
    hsv: np.ndarray  # (n,) HSVs that ranked the states (weighted for "data" / "input")
    plain_hsv: np.ndarray  # (n,) HSVs of the unweighted system
    truncation_bound: float  # certified H-infinity bound of the truncation step
    rounding_term: float  # lti's rounding term, included in truncation_bound
    lower_bound: float  # sigma_{r+1} of the unweighted system
    weighted_bound: float | None  # 2 sum_{i>r} of the weighted HSVs ("data" / "input")


def _rule_for(name, n, g, tol, order, rel_tol):
    """The order-selection keyword of one layer for lti, or None (a zero gate under `tol`)."""
    if rel_tol is not None:
        return {"rel_tol": rel_tol}
    if order is not None:
        return {"order": _order_for(order, name, n)}
    t = tol / abs(g) if g != 0 else math.inf  # the bound is on g (G - G_r)
    return {"tol": t} if math.isfinite(t) else None


def _truncate(Gc, rule, gramian, stats_layer, Qb, method) -> _Truncation:
    """One call of lti's (weighted) balanced truncation with `rule`; order >= 1 always.

    An adapter needs at least one mode: when the rule keeps none (a zero system, or a zero
    gate under `tol`), one state is kept.
    """
    import lti

    if gramian == "exact":
        def run(**kw):
            return lti.balanced_truncation(Gc, method=method, **kw)
    else:
        if gramian == "data":
            weights = {"state_covariance": stats_layer.state_covariance()}
        else:
            W = stats_layer.input_covariance()  # (H, H), compressed like B
            weights = {"input_covariance": W if Qb is None else Qb.T @ W @ Qb}

        def run(**kw):
            return lti.weighted_balanced_truncation(Gc, method=method, **weights, **kw)

    res = None if rule is None else run(**rule)
    if res is None or res.order == 0:
        res = run(order=1)
    if gramian == "exact":
        hsv = np.asarray(res.hsv)
        return _Truncation(res.reduced, hsv, hsv, float(res.error_bound),
                           float(res.rounding_term), float(res.lower_bound), None)
    weighted = res.weighted_error_bound
    return _Truncation(res.reduced, np.asarray(res.hsv), np.asarray(res.unweighted_hsv),
                       float(res.error_bound), float(res.rounding_term),
                       float(res.lower_bound), None if weighted is None else float(weighted))


def _realisation_bound(Ar, Br, Cr, G_mod) -> float:
    """``2 sum_i sigma_i(G_r - G_mod)``, a certified bound on ``||G_r - G_mod||_inf``."""
    import lti

    A_m, B_m, C_m = (np.asarray(X) for X in (G_mod.A, G_mod.B, G_mod.C))
    r, r_m = Ar.shape[0], A_m.shape[0]
    A_e = np.zeros((r + r_m, r + r_m))
    A_e[:r, :r], A_e[r:, r:] = Ar, A_m
    E, _, _ = _compress(A_e, np.vstack([Br, B_m]), np.hstack([Cr, -C_m]))  # G_r - G_mod
    return 2.0 * float(np.sum(lti.hankel_singular_values(E)))


def _measured_error(G, G_mod) -> float:
    """``||G - G_mod||_inf`` by :func:`lti.hinf_norm`."""
    import lti

    A_m, B_m, C_m = (np.asarray(X) for X in (G_mod.A, G_mod.B, G_mod.C))
    n, r_m = G.n, A_m.shape[0]
    A_d = np.zeros((n + r_m, n + r_m))
    A_d[:n, :n], A_d[n:, n:] = np.asarray(G.A), A_m
    diff, _, _ = _compress(A_d, np.vstack([np.asarray(G.B), B_m]),
                           np.hstack([np.asarray(G.C), -C_m]))  # G - G_mod
    return float(lti.hinf_norm(diff).value)


@dataclass
class _Elapsed:
    seconds: float = 0.0  # wall time
    cpu_seconds: float = 0.0  # CPU time of this thread


@contextlib.contextmanager
def _timed(into: _Elapsed) -> Iterator[None]:
    """Add the wall and thread CPU time of the block to `into`."""
    t0, c0 = time.perf_counter(), time.thread_time()
    try:
        yield
    finally:
        into.seconds += time.perf_counter() - t0
        into.cpu_seconds += time.thread_time() - c0


def _reduce_layer(name, adapter, *, gramian, stats, tol, order, rel_tol, method, measure,
                  cond_max):
    """``(new adapter, LayerReduction, numerics time, measurement time)`` of one adapter."""
    from adapters.layer import HRMAdapter
    from adapters.ssm import DiagonalSSM

    ssm = adapter.ssm
    g = float(adapter.gate.detach().cpu())
    stats_layer = None if gramian == "exact" else _stats_for(stats, name, adapter, gramian)
    numerics, measuring = _Elapsed(), _Elapsed()
    with _timed(numerics):
        G = ssm.as_lti()  # (A, B, C): n states, H inputs and outputs, D = 0
        Gc, Qb, Qc = _compress(*(np.asarray(X) for X in (G.A, G.B, G.C)))
        rule = _rule_for(name, Gc.n, g, tol, order, rel_tol)
        cut = _truncate(Gc, rule, gramian, stats_layer, Qb, method)
        if cut.reduced.n == 0:  # a zero data-driven Gramian: nothing can be balanced
            raise CalibrationError(
                f"adapter {name!r}: the calibration statistics never excite it (its "
                f"{'state' if gramian == 'data' else 'input'} covariance is zero: every "
                "counted stream it read was zero), so no state can be kept by a data-driven "
                "reduction; reduce it with gramian='exact' or calibrate on data that reach it")
        Ar, Br, Cr = (np.asarray(X) for X in (cut.reduced.A, cut.reduced.B, cut.reduced.C))
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
    new = HRMAdapter(ssm.d_model, ssm=new_ssm, reads=adapter.reads).train(adapter.training)
    with torch.no_grad():
        new.gate.copy_(adapter.gate.detach())
    with _timed(numerics):
        # certified realisation error: || G_r - G_mod ||_inf <= 2 sum sigma_i(G_r - G_mod)
        G_mod = new_ssm.as_lti()
        realisation = _realisation_bound(Ar, Br, Cr, G_mod)
    slack = FP_SLACK * G.n * _EPS * 2.0 * float(np.sum(cut.plain_hsv))
    measured = None
    if measure:
        with _timed(measuring):
            measured = abs(g) * _measured_error(G, G_mod)
    ag = abs(g)
    info = LayerReduction(
        name=name, gate=g, gramian=gramian, hsv=tuple(float(x) for x in cut.hsv),
        order_before=int(G.n), order_after=int(Ar.shape[0]),
        modes_before=int(ssm.d_state), modes_after=int(new_ssm.d_state),
        n_real_after=int(new_ssm.n_real), n_complex_after=int(new_ssm.n_complex),
        lower_bound=ag * cut.lower_bound,
        upper_bound=ag * (cut.truncation_bound + realisation + slack),
        truncation_bound=ag * cut.truncation_bound,
        weighted_bound=None if cut.weighted_bound is None else ag * cut.weighted_bound,
        realisation_bound=ag * realisation, measured_error=measured, eig_cond=cond,
        shift=shift, params_before=int(adapter.num_parameters),
        params_after=int(new.num_parameters), lti_seconds=numerics.seconds,
        rounding_term=ag * cut.rounding_term,
    )
    return new, info, numerics, measuring


def _record_reduced_size(model: nn.Module, d_state: int) -> None:
    """Make the recorded config of every adapted (sub)model say ``d_state`` (the largest
    reduced layer's N; the per-layer structure lives in the modules and in the checkpoint).
    `model` may be the adapted model itself or a wrapper around it."""
    for module in model.modules():
        try:
            config = get_adapter_config(module)
        except AdapterError:
            continue  # not the model inject() was called on
        set_adapter_config(module, config.replace(d_state=d_state))


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
        ``DistributedDataParallel``, ``torch.compile``, ``DataParallel`` or a DeepSpeed
        engine). Modified in place.
    tol : float, optional
        *Absolute* tolerance (not relative to ``sigma_1`` or to the adapter's norm) on a
        bound *including the gate*: per layer the smallest order r with
        ``|g| 2 sum_{i>r} sigma_i <= tol`` (exact Gramians: the certified truncation bound).
        With ``"data"`` / ``"input"`` Gramians it is ``tol`` of
        :func:`lti.weighted_balanced_truncation`, an absolute tolerance on the *weighted*
        bound ``|g| 2 sum_{i>r} sigma~_i`` (which bounds the error of the weighted surrogate
        system, not the certified plain bound in ``truncation_bound``). A gate of 0 keeps
        order 1.
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
        fingerprint; a cast after calibration is accepted: ``model.double()``, and
        ``model.float()`` of adapters calibrated in float64); required for ``"data"`` and
        ``"input"``.
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
    CalibrationError
        ``gramian="data"`` / ``"input"`` with statistics that never excite an adapter (its
        covariance is zero; before, an ``AdapterShapeError`` about installing N = 0 modes).

    Notes
    -----
    The adapter is :math:`y = g\, z G(z) u` with :math:`G = (A, B, C, 0)` from
    :meth:`DiagonalSSM.as_lti`; the factor z (the module reads ``y_t = C s_t`` with ``s_t``
    already holding ``u_t``) changes no H-infinity norm (:math:`|z| = 1` on the unit
    circle), though :math:`z G` has other Gramians and HSVs than :math:`G` (the HSVs here are
    :math:`G`'s), so every statement is about
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
    >>> from adapters import reduce
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
    import lti  # noqa: F401 - imported before any timing starts (scipy's import is slow)

    t_start = time.perf_counter()
    _check_rule(tol, order, rel_tol)
    if gramian not in REDUCTION_GRAMIANS:
        raise AdapterConfigError(
            f"`gramian` must be one of {REDUCTION_GRAMIANS}; got {gramian!r}"
        )
    from lti.balanced import BT_METHODS  # checked before the model is touched

    if method not in BT_METHODS:
        raise AdapterConfigError(f"`method` must be one of {BT_METHODS}; got {method!r}")
    _check_positive("cond_max", cond_max)
    if not isinstance(measure, bool):
        raise AdapterConfigError(f"`measure` must be a bool; got {measure!r}")
    if stats is not None and not isinstance(stats, CalibrationStats):
        raise AdapterConfigError("`stats` must be the CalibrationStats of adapters.calibrate; "
                                 f"got {type(stats).__name__}")
    base = unwrap_model(model)
    adapted = find_adapters(base)
    if not adapted:
        raise AdapterError("`model` has no HRM adapters; call `adapters.inject` first")
    if isinstance(order, Mapping):
        unknown = sorted(set(order) - set(adapted))
        if unknown:
            raise AdapterConfigError(f"`order` names unknown adapters {unknown}")
    built, infos = {}, []
    numerics, measuring = _Elapsed(), _Elapsed()
    for name, wrapper in adapted.items():  # build everything first, then swap
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            new, info, spent, measured = _reduce_layer(
                name, wrapper.adapter, gramian=gramian, stats=stats, tol=tol, order=order,
                rel_tol=rel_tol, method=method, measure=measure, cond_max=cond_max,
            )
        for w in caught:  # re-issued at the caller, naming the layer
            message = f"adapter {name!r}: {w.message}"
            if tol is not None and "tol =" in message:  # lti's tol is reduce's over |gate|
                message += (f" [lti was given `tol` = {tol:g} / |gate| {abs(info.gate):.3g}: "
                            "its tol and bounds are those of the ungated SSM]")
            warnings.warn(message, w.category, stacklevel=2)
        built[name] = new
        infos.append(info)
        numerics.seconds += spent.seconds
        numerics.cpu_seconds += spent.cpu_seconds
        measuring.seconds += measured.seconds
    for name, new in built.items():
        adapted[name].adapter = new
    _record_reduced_size(base, max(x.modes_after for x in infos))
    order_out = dict(order) if isinstance(order, Mapping) else order
    return ReductionReport(
        layers=tuple(infos), gramian=gramian, method=method,
        tol=None if tol is None else float(tol),
        rel_tol=None if rel_tol is None else float(rel_tol), order=order_out,
        lti_seconds=numerics.seconds, lti_cpu_seconds=numerics.cpu_seconds,
        measure_seconds=measuring.seconds,
        seconds=time.perf_counter() - t_start,
    )
