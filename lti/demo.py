"""Demonstration: balanced truncation of a discretised heat equation with certified bounds.

Run ``python -m lti.demo`` (options: ``--n``, ``--tol``, ``--order``, ``--match-dc``). The
system is built here, nothing is downloaded: a rod of length 1 with fixed-temperature ends,
``n`` interior finite-difference nodes, a heater at x = 0.2 and thermometers at x = 0.5 and
x = 0.8, discretised by zero-order hold. The demo prints the leading Hankel singular
values, the order chosen for the tolerance, both error bounds and the H-infinity error
measured with :func:`lti.hinf_norm`.
"""

from __future__ import annotations

import argparse
import sys
import time

import numpy as np

from lti._validation import check_int
from lti.balanced import balanced_truncation, hankel_singular_values
from lti.exceptions import InvalidArgumentError
from lti.norms import hinf_norm
from lti.system import DiscreteLTI, discretize_zoh

__all__ = ["heat_equation", "main"]


def heat_equation(n: int = 150, *, dt: float = 1e-3, diffusivity: float = 1.0) -> DiscreteLTI:
    """Zero-order-hold model of the 1-D heat equation on [0, 1] with n interior nodes.

    Parameters
    ----------
    n : int, optional
        Number of interior grid nodes (states), >= 1.
    dt : float, optional
        Sampling time.
    diffusivity : float, optional
        Thermal diffusivity.

    Returns
    -------
    DiscreteLTI
        n states, 1 input (heater at x = 0.2), 2 outputs (temperatures at 0.5 and 0.8).

    Raises
    ------
    InvalidArgumentError
        `n` not an integer >= 1, `diffusivity` not positive and finite, or a bad `dt`.

    Notes
    -----
    :math:`\\dot T = \\kappa T_{xx} + b(x) u`, central differences with spacing
    ``h = 1 / (n + 1)``: ``A_c = kappa / h^2 tridiag(1, -2, 1)``; ``b`` is a unit heat
    source spread over the nodes next to x = 0.2, the outputs interpolate the nodes next
    to the sensors. Then ``(A, B) = discretize_zoh(A_c, b, dt)``.

    Examples
    --------
    >>> from lti.demo import heat_equation
    >>> G = heat_equation(40)
    >>> (G.n, G.m, G.p), bool(0.98 < G.spectral_radius() < 1.0)
    ((40, 1, 2), True)
    """
    n = check_int("n", n, minimum=1)
    if isinstance(diffusivity, bool) or not (isinstance(diffusivity, (int, float, np.number))
                                             and np.isfinite(diffusivity) and diffusivity > 0):
        raise InvalidArgumentError(
            f"`diffusivity` must be positive and finite; got {diffusivity!r}"
        )
    h = 1.0 / (n + 1)
    x = h * np.arange(1, n + 1)
    Ac = (diffusivity / h**2) * (
        np.diag(-2.0 * np.ones(n)) + np.diag(np.ones(n - 1), 1) + np.diag(np.ones(n - 1), -1)
    )
    b = np.maximum(0.0, 1.0 - np.abs(x - 0.2) / h)[:, None] / h  # hat function, unit mass
    C = np.vstack([np.maximum(0.0, 1.0 - np.abs(x - s) / h) for s in (0.5, 0.8)])
    A, B = discretize_zoh(Ac, b, dt)
    return DiscreteLTI(A, B, C, dt=dt)


def main(argv=None) -> int:
    """Command-line entry point of ``python -m lti.demo``; returns the exit status.

    Builds :func:`heat_equation`, reduces it by balanced truncation and prints the Hankel
    singular values, both error bounds, the measured H-infinity error and timings.

    Parameters
    ----------
    argv : sequence of str, optional
        Command-line arguments (``--n``, ``--tol``, ``--order``, ``--match-dc``); ``None``
        reads ``sys.argv[1:]``.

    Returns
    -------
    int
        0 when the measured error lies within ``[sigma_(r+1), 2 sum_(i>r) sigma_i]``,
        1 otherwise.

    Raises
    ------
    SystemExit
        On ``--help`` or invalid arguments (from :mod:`argparse`).

    Examples
    --------
    >>> import contextlib, io
    >>> with contextlib.redirect_stdout(io.StringIO()) as out:
    ...     status = main(["--n", "20", "--order", "4"])
    >>> status, "(within the bounds" in out.getvalue()
    (0, True)
    """
    parser = argparse.ArgumentParser(prog="python -m lti.demo", description=__doc__.split("\n")[0])
    parser.add_argument("--n", type=int, default=150, help="number of states (default 150)")
    parser.add_argument("--tol", type=float, default=1e-6,
                        help="error tolerance relative to sigma_1 (default 1e-6)")
    parser.add_argument("--order", type=int, default=None, help="fixed order instead of --tol")
    parser.add_argument("--match-dc", action="store_true",
                        help="singular perturbation approximation (keeps G(1))")
    args = parser.parse_args(argv)
    if args.n < 1:
        parser.error(f"--n must be >= 1; got {args.n}")
    if not (np.isfinite(args.tol) and args.tol > 0):
        parser.error(f"--tol must be positive and finite; got {args.tol}")
    if args.order is not None and not 0 <= args.order <= args.n:
        parser.error(f"--order must be in [0, n = {args.n}]; got {args.order}")

    t0 = time.perf_counter()
    G = heat_equation(args.n)
    print(f"system: 1-D heat equation, n = {G.n} states, m = {G.m} input, p = {G.p} outputs, "
          f"dt = {G.dt:g}, spectral radius {G.spectral_radius():.6f}")
    t1 = time.perf_counter()
    if args.order is None:
        hsv = hankel_singular_values(G)
        tol = args.tol * hsv[0]
        res = balanced_truncation(G, tol=tol, match_dc=args.match_dc)
        rule = f"tol = {args.tol:g} * sigma_1 = {tol:.3e}"
    else:
        res = balanced_truncation(G, order=args.order, match_dc=args.match_dc)
        hsv, rule = res.hsv, f"order = {args.order}"
    t2 = time.perf_counter()
    lead = min(12, hsv.size)
    print(f"leading Hankel singular values (of {hsv.size}):")
    print("  " + " ".join(f"{s:.3e}" for s in hsv[:lead]))
    print(f"reduction ({'SPA, match_dc' if args.match_dc else 'truncation'}, "
          f"method {res.method!r}): {rule} -> order r = {res.order}")
    print(f"  rounding term                   = {res.rounding_term:.6e}")
    print(f"  lower bound  sigma_(r+1) - rounding         = {res.lower_bound:.6e}")
    print(f"  upper bound  2 sum_(i>r) sigma_i + rounding = {res.error_bound:.6e}")
    err, omega = hinf_norm(G - res.reduced)
    t3 = time.perf_counter()
    inside = res.lower_bound <= err <= res.error_bound
    print(f"  measured ||G - G_r||_inf       = {err:.6e} at omega = {omega:.4f} rad/sample "
          f"({'within' if inside else 'OUTSIDE'} the bounds; err / bound = "
          f"{err / res.error_bound if res.error_bound > 0 else 0.0:.3f})")
    dc = np.abs(G.frequency_response([0.0]) - res.reduced.frequency_response([0.0])).max()
    print(f"  DC gain error |G(1) - G_r(1)|   = {dc:.3e}")
    print(f"time: build {t1 - t0:.2f} s, reduction {t2 - t1:.2f} s, H-inf norm {t3 - t2:.2f} s")
    return 0 if inside else 1


if __name__ == "__main__":
    sys.exit(main())
