"""Plots for model reduction (matplotlib is optional: ``pip install "lti-adapters[plot]"``)."""

from __future__ import annotations

import numpy as np

from lti.exceptions import InvalidArgumentError, MissingDependencyError

__all__ = ["plot_hsv"]


def _import_pyplot():
    try:
        import matplotlib.pyplot as plt
    except ImportError as exc:  # pragma: no cover - depends on the environment
        raise MissingDependencyError(
            'plotting needs matplotlib; install it with pip install "lti-adapters[plot]"'
        ) from exc
    return plt


_NEEDED = ("hsv", "order", "n_unstable", "error_bounds", "error_bound", "lower_bound")


def plot_hsv(result, *, ax=None, relative: bool = False, title: str | None = None):
    """Hankel-singular-value decay with the chosen order and both error bounds marked.

    Parameters
    ----------
    result : BalancedTruncation
        A result of :func:`lti.balanced_truncation` (uses ``hsv``, ``order``,
        ``n_unstable``, ``error_bounds``, ``error_bound`` and ``lower_bound``).
    ax : matplotlib.axes.Axes, optional
        Axes to draw into; a new figure is created when omitted.
    relative : bool, optional
        Plot ``sigma_i / sigma_1`` (and the bounds divided by ``sigma_1``).
    title : str, optional
        Axes title (a default names the order and the bounds).

    Returns
    -------
    matplotlib.axes.Axes
        The axes: HSVs ``sigma_i`` against ``i`` (log scale), the upper bound
        ``2 sum_{i>k} sigma_i`` for every stable order k, a vertical line at the chosen
        order, and the two bounds of the chosen order as markers.

    Raises
    ------
    MissingDependencyError
        matplotlib is not installed.
    InvalidArgumentError
        `result` has no HSVs to plot, is not a :class:`~lti.BalancedTruncation` (a Hankel-norm
        or weighted reduction has no per-order bounds of this kind), or `ax` is not an Axes.

    Examples
    --------
    >>> import matplotlib
    >>> matplotlib.use("Agg")
    >>> import numpy as np
    >>> from lti import DiscreteLTI, balanced_truncation
    >>> from lti.plotting import plot_hsv
    >>> G = DiscreteLTI(np.diag(0.9 ** np.arange(1, 11)), np.ones((10, 1)), np.ones((1, 10)))
    >>> ax = plot_hsv(balanced_truncation(G, order=3))
    >>> len(ax.lines) >= 4
    True
    """
    missing = [a for a in _NEEDED if not hasattr(result, a)]
    if missing:
        raise InvalidArgumentError(
            f"`result` must be a BalancedTruncation (lti.balanced_truncation's result); got "
            f"{type(result).__name__} without {', '.join(missing)}"
            + ("; a Hankel-norm or weighted reduction has no per-order bounds of this kind: "
               "plot `result.hsv` with matplotlib directly" if hasattr(result, "hsv") else "")
        )
    if ax is not None and not hasattr(ax, "semilogy"):
        raise InvalidArgumentError(
            f"`ax` must be a matplotlib Axes or None; got {type(ax).__name__}"
        )
    plt = _import_pyplot()
    hsv = np.asarray(result.hsv, dtype=np.float64)
    if hsv.size == 0 or not hsv[0] > 0:
        raise InvalidArgumentError("`result` has no positive Hankel singular values to plot")
    nu = int(result.n_unstable)
    r = int(result.order) - nu  # stable states kept
    scale = hsv[0] if relative else 1.0
    floor = np.finfo(np.float64).tiny
    k = np.arange(1, hsv.size + 1)
    bounds = np.asarray(result.error_bounds, dtype=np.float64)[nu:]  # stable orders 0..ns
    if ax is None:
        _, ax = plt.subplots(figsize=(6.4, 4.0))
    ax.semilogy(k, np.maximum(hsv / scale, floor), "o-", ms=3, label=r"$\sigma_i$")
    orders = np.arange(bounds.size)
    pos = bounds > 0
    ax.semilogy(orders[pos], bounds[pos] / scale, "--", color="0.4",
                label=r"upper bound $2\sum_{i>k}\sigma_i$ (order $k$)")
    ax.axvline(r, color="C3", lw=1.0, label=f"chosen order r = {result.order}"
               + (f" ({nu} unstable kept)" if nu else ""))
    if result.error_bound > 0:
        ax.semilogy([r], [result.error_bound / scale], "v", color="C3", ms=8,
                    label=f"error bound {result.error_bound:.3g}")
    if result.lower_bound > 0:
        ax.semilogy([r + 1], [result.lower_bound / scale], "^", color="C2", ms=8,
                    label=rf"lower bound $\sigma_{{r+1}}$ = {result.lower_bound:.3g}")
    ax.set_xlabel("index i / order k (stable part)")
    ax.set_ylabel(r"$\sigma_i / \sigma_1$" if relative else r"$\sigma_i$")
    ax.set_title(title if title is not None else
                 f"Hankel singular values: r = {result.order}, "
                 f"{result.lower_bound:.2g} <= err <= {result.error_bound:.2g}")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize="small")
    return ax
