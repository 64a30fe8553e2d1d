"""Order selection for balanced truncation: the rules ``order``, ``tol`` and ``rel_tol``.

:func:`check_rule` validates that exactly one rule is given; :func:`select_order` turns it
into the number of stable states to keep (ties never split by ``tol``/``rel_tol``, the
certified floor ``minimal_order`` respected, warnings where the request cannot be met).
"""

from __future__ import annotations

import math
import numbers
import warnings
from dataclasses import dataclass

import numpy as np

from lti.exceptions import InvalidArgumentError

__all__ = ["TIE_RTOL", "Rule", "check_rule", "select_order"]

#: HSVs closer than this (relative) count as tied (see ``lti.balanced_truncation``).
TIE_RTOL = 1e-10


@dataclass(frozen=True)
class Rule:
    """The order-selection rule: exactly one of ``order``, ``tol``, ``rel_tol`` is set."""

    order: int | None = None
    tol: float | None = None
    rel_tol: float | None = None

    def shifted(self, nu: int) -> Rule:
        """The same rule for the stable part (``nu`` unstable states kept)."""
        if self.order is None:
            return self
        return Rule(order=self.order - nu)


def check_rule(order, tol, rel_tol, n: int) -> Rule:
    if tol is None and rel_tol is None and order is not None:  # the common call: an order
        return Rule(order=_check_order_tol(order, None, n)[0])
    given = {k: v for k, v in (("order", order), ("tol", tol), ("rel_tol", rel_tol))
             if v is not None}
    if len(given) != 1:
        shown = ", ".join(f"{k}={v!r}" for k, v in given.items()) or "none"
        raise InvalidArgumentError(
            f"pass exactly one of `order`, `tol` and `rel_tol`; got {shown}"
        )
    if rel_tol is not None:
        if (isinstance(rel_tol, bool) or not isinstance(rel_tol, numbers.Real)
                or not (_finite(rel_tol) and 0.0 < rel_tol <= 1.0)):
            raise InvalidArgumentError(f"`rel_tol` must be a number in (0, 1]; got {rel_tol!r}")
        return Rule(rel_tol=float(rel_tol))
    order, tol = _check_order_tol(order, tol, n)
    return Rule(order=order, tol=tol)


def _finite(x) -> bool:
    """``math.isfinite`` for any real number: a Fraction (np.isfinite raised a bare
    TypeError) or an int beyond the float range (False, not OverflowError)."""
    try:
        return math.isfinite(x)
    except OverflowError:
        return False


def _check_order_tol(order, tol, n: int) -> tuple[int | None, float | None]:
    if order is not None:
        if isinstance(order, bool) or not isinstance(order, numbers.Integral):
            raise InvalidArgumentError(f"`order` must be an integer in [0, {n}]; got {order!r}")
        if not 0 <= order <= n:
            raise InvalidArgumentError(
                f"`order` must be an integer in [0, n={n}]; got {int(order)}"
            )
        return int(order), None
    if isinstance(tol, bool) or not isinstance(tol, numbers.Real) or not _finite(tol):
        raise InvalidArgumentError(f"`tol` must be a positive finite number; got {tol!r}")
    if not tol > 0:
        raise InvalidArgumentError(f"`tol` must be a positive finite number; got {tol!r}")
    return None, float(tol)



def select_order(hsv, bounds, rule: Rule, nmin, stacklevel):
    """Number r of stable states to keep (see balanced_truncation, Notes)."""
    ns = hsv.size
    order, tol = rule.order, rule.tol
    if rule.rel_tol is not None:
        r = int(np.count_nonzero(hsv >= rule.rel_tol * hsv[0])) if ns and hsv[0] > 0 else 0
        while 0 < r < ns and hsv[r - 1] - hsv[r] <= TIE_RTOL * hsv[r - 1] and hsv[r] > 0:
            r += 1  # never split a tie: move the cut up
        if r > nmin:
            warnings.warn(
                f"`rel_tol` = {rule.rel_tol:.3g} is below the rounding-noise floor of the "
                f"Hankel singular values: kept the minimal realisation ({nmin} states) "
                f"instead of {r}",
                UserWarning,
                stacklevel=stacklevel,
            )
            r = nmin
        return r
    if order is not None:
        r = order
        if r > nmin:
            warnings.warn(
                f"requested {r} stable states but only {nmin} Hankel singular values exceed "
                f"the rounding-noise floor (the rest belong to a numerically non-minimal part "
                f"that cannot be balanced); keeping {nmin}",
                UserWarning,
                stacklevel=stacklevel,
            )
            r = nmin
        elif 0 < r < ns and hsv[r - 1] - hsv[r] <= TIE_RTOL * hsv[r - 1] and hsv[r] > 0:
            warnings.warn(
                f"order splits tied Hankel singular values sigma_{r} = {hsv[r - 1]:.17g} and "
                f"sigma_{r + 1} = {hsv[r]:.17g}: the kept subspace is not unique (which "
                "reduced model of that order comes back depends on rounding)",
                UserWarning,
                stacklevel=stacklevel,
            )
        return r
    r = int(np.flatnonzero(bounds <= tol)[0])  # bounds[ns] == 0 <= tol always qualifies
    while 0 < r < ns and hsv[r - 1] - hsv[r] <= TIE_RTOL * hsv[r - 1] and hsv[r] > 0:
        r += 1  # never split a tie: move the cut up (the bound only decreases)
    if r > nmin:
        warnings.warn(
            f"`tol` = {tol:.3g} is below the numerical floor of the bound: kept the minimal "
            f"realisation ({nmin} states, bound {bounds[nmin]:.3g}) instead of "
            f"{r} states",
            UserWarning,
            stacklevel=stacklevel,
        )
        r = nmin
    elif r == ns and ns > 0:
        warnings.warn(
            f"no order below n = {ns} has error bound <= tol = {tol:.3g} (the bound at order "
            f"{ns - 1} is {bounds[ns - 1]:.3g}); returning the full-order balanced realisation",
            UserWarning,
            stacklevel=stacklevel,
        )
    return r
