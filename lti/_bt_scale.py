"""Exact power-of-2 rescaling of balanced truncation for data beyond the squared range.

The Hankel singular values scale like ``max|B| max|C|`` and the quantities balanced
truncation forms from them are squares or products of two (the noise floor
``||Lc|| ||Lo|| / (1 - rho^2)``, the sums of HSVs in the bounds, ``||T||_F^2``): with
``max|B| max|C|`` near ``1e300`` they overflow (B, C ~ 3e153 gave NaN bounds and an order
silently capped at 0), near ``1e-300`` they underflow. The system with ``B 2^-k``,
``C 2^-k`` (exact) and ``D = 0`` has the same state space, projections ``T``, ``Ti`` and
reduced ``A_r``, HSVs and bounds ``4^-k`` times as large, ``B_r``, ``C_r`` ``2^-k`` times
(``D`` enters neither the HSVs nor the projections: ``D_r = D`` plus, with ``match_dc``,
the singular-perturbation correction, which is computed for ``D = 0`` and added):
:mod:`lti.balanced` reduces it where ``max|B| max|C|`` lies outside ``[2^-SCALE_EXP,
2^SCALE_EXP]`` and maps the result back here (values beyond the float range become
``inf``, never NaN).
"""

from __future__ import annotations

import math
import warnings
from dataclasses import replace

import numpy as np

from lti._rounding import D_ROUNDING, fro_norm_safe
from lti.system import DiscreteLTI

__all__ = ["SCALE_EXP", "rescaled", "scale_exponent", "scaled_system"]

#: ``max|B| max|C|`` outside ``[2^-SCALE_EXP, 2^SCALE_EXP]`` (about 1e-90 .. 1e90) is rescaled.
SCALE_EXP = 300


def scale_exponent(G: DiscreteLTI) -> int:
    """``k`` with ``max|B| max|C| ~ 4^k`` when that product lies outside the safe range,
    else 0 (also 0 for a zero ``B`` or ``C``)."""
    b = float(abs(G.B).max(initial=0.0))
    c = float(abs(G.C).max(initial=0.0))
    if b == 0.0 or c == 0.0:
        return 0
    e = math.frexp(b)[1] + math.frexp(c)[1]  # max|B| max|C| in [2^(e-2), 2^e)
    if -SCALE_EXP <= e <= SCALE_EXP:
        return 0
    return e // 2


def scaled_system(G: DiscreteLTI, k: int) -> DiscreteLTI:
    """``(A, B 2^-k, C 2^-k, 0)``: exact (``B``, ``C`` entries that leave the float range
    under the scaling are not representable beside the largest ones anyway)."""
    with np.errstate(under="ignore"):
        return DiscreteLTI(G.A, np.ldexp(G.B, -k), np.ldexp(G.C, -k), None, G.dt)


def _up(x, e: int):
    with np.errstate(over="ignore", under="ignore"):
        return np.ldexp(x, e)


def rescaled(G: DiscreteLTI, k: int, run, tol, was_control: bool):
    """``run(Gs, tol_s)`` (balanced truncation of ``Gs = scaled_system(G, k)`` with the
    tolerance ``tol_s = tol 4^-k``) mapped back to ``G``: HSVs, bounds and the rounding term
    times ``4^k``, ``B_r``, ``C_r`` times ``2^k``, ``D_r = D`` (plus the singular-perturbation
    correction times ``4^k``, and then the rounding of that sum, ``eps ||D||_F``, added to
    the rounding term as :func:`lti._rounding.rounding_terms` does); the warnings of the
    scaled run are re-issued with a note on the units of the numbers they quote."""
    Gs = scaled_system(G, k)
    # (a tol beyond the range after scaling: the nearest float, so the rule stays valid)
    tol_s = None if tol is None else min(max(float(_up(float(tol), -2 * k)), 5e-324),
                                         float(np.finfo(np.float64).max))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        res = run(Gs, tol_s)
    for w in caught:
        msg = str(w.message)
        if issubclass(w.category, UserWarning):
            msg += (f" (numbers quoted for the system with B and C scaled by 2^{-k}, exactly, "
                    f"to keep squared quantities in range: HSVs, tol and bounds times 4^{k} "
                    "are those of the system passed)")
        warnings.warn(msg, w.category, stacklevel=3)
    red = res.reduced
    Dr, d_term = G.D, 0.0
    if res.match_dc:  # D_r = D + (singular-perturbation correction), the correction scaled
        Dr = G.D + _up(red.D, 2 * k)
        d_term = D_ROUNDING * fro_norm_safe(G.D)
    reduced = DiscreteLTI(red.A, _up(red.B, k), _up(red.C, k), Dr, G.dt)
    hsv = _up(res.hsv, 2 * k)
    bounds = _up(res.error_bounds, 2 * k) + d_term
    lower = float(_up(res.lower_bound, 2 * k))
    for X in (hsv, bounds):
        X.setflags(write=False)
    return replace(
        res,
        reduced=reduced.to_control() if was_control else reduced,
        hsv=hsv,
        error_bounds=bounds,
        error_bound=float(bounds[res.order]),
        lower_bound=max(lower - d_term, 0.0) if lower > 0 else 0.0,
        rounding_term=float(_up(res.rounding_term, 2 * k)) + d_term,
    )
