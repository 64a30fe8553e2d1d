"""plot_hsv: typed errors for what it cannot draw, and no pyplot state touched when an
Axes is given."""

from __future__ import annotations

import numpy as np
import pytest

matplotlib = pytest.importorskip("matplotlib", reason="matplotlib is not installed (extra 'plot')")
matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from lti import (  # noqa: E402
    DiscreteLTI,
    InvalidArgumentError,
    balanced_truncation,
    hankel_norm_approximation,
    weighted_balanced_truncation,
)
from lti.plotting import plot_hsv  # noqa: E402

G = DiscreteLTI(np.diag(0.9 ** np.arange(1, 9)), np.ones((8, 1)), np.ones((1, 8)))


@pytest.mark.parametrize(
    "make, match",
    [
        (lambda: hankel_norm_approximation(G, order=3),
         "HankelNormApproximation without error_bounds"),
        (lambda: weighted_balanced_truncation(G, input_covariance=np.eye(1), order=3),
         "WeightedBalancedTruncation without n_unstable, error_bounds"),
        (lambda: np.ones(3), "ndarray without hsv"),
    ],
    ids=["hankel", "weighted", "array"],
)
def test_results_it_cannot_draw_get_a_typed_error(make, match):
    """Were bare AttributeErrors ('... has no attribute error_bounds / n_unstable / hsv')."""
    with pytest.raises(InvalidArgumentError, match=match):
        plot_hsv(make())


def test_ax_that_is_not_an_axes():
    with pytest.raises(InvalidArgumentError, match="`ax` must be a matplotlib Axes.*int"):
        plot_hsv(balanced_truncation(G, order=3), ax=1)


def test_given_axes_leave_pyplot_alone():
    fig, ax = plt.subplots()
    try:
        other = plt.figure()
        nums, current, rc = plt.get_fignums(), plt.gca(), dict(matplotlib.rcParams)
        assert plot_hsv(balanced_truncation(G, order=3), ax=ax) is ax
        assert plt.get_fignums() == nums and plt.gca() is current
        assert plt.gcf() is other and dict(matplotlib.rcParams) == rc
        assert len(ax.lines) >= 4
    finally:
        plt.close(fig)
        plt.close(other)
