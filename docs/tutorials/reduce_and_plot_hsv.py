# ruff: noqa: E402  (imports appear where the page introduces them)
"""Tutorial: reduce a lightly damped mass-spring chain by balanced truncation, plot its
Hankel singular values, and check the certified bounds against the exact H-infinity
error at every order. Executed by the documentation build (matplotlib's plot
directive); takes a few seconds."""

# [model]
import numpy as np

from lti import DiscreteLTI, discretize_zoh

k = 30  # masses, fixed at both ends: 2k = 60 states (positions, velocities)
I = np.eye(k)
K = 2 * I - np.eye(k, k=1) - np.eye(k, k=-1)  # stiffness
D = 0.02 * I + 0.5 * K  # Rayleigh damping: slow modes resonate, fast ones are damped
Ac = np.block([[np.zeros((k, k)), I], [-K, -D]])
Bc = np.zeros((2 * k, 1))
Bc[k, 0] = 1.0  # a force on the first mass
C = np.zeros((2, 2 * k))
C[0, k - 1] = 1.0  # position of the last mass
C[1, k // 2] = 1.0  # position of the middle mass
A, B = discretize_zoh(Ac, Bc, 0.1)  # zero-order hold, 10 samples per second
G = DiscreteLTI(A, B, C)
print(f"n = {G.n}, spectral radius = {G.spectral_radius():.5f}")
# [/model]

# [hsv]
from lti import hankel_singular_values

hsv = hankel_singular_values(G)  # descending, shape (n,)
print("sigma_1 =", hsv[0], " sigma_n / sigma_1 =", hsv[-1] / hsv[0])
# [/hsv]

# [sweep]
from lti import balanced_truncation, hinf_norm

orders = np.arange(2, 31, 2)
lower, measured, upper = [], [], []
for r in orders:
    bt = balanced_truncation(G, order=int(r))
    err = hinf_norm(G - bt.reduced).value  # exact, not a frequency grid
    # The certificate: sigma_{r+1} <= ||G - G_r||_inf <= 2 * (sigma_{r+1} + ... + sigma_n)
    assert bt.lower_bound <= err * (1 + 1e-7), (r, bt.lower_bound, err)
    assert err <= bt.error_bound * (1 + 1e-7), (r, err, bt.error_bound)
    lower.append(bt.lower_bound)
    measured.append(err)
    upper.append(bt.error_bound)
# [/sweep]

# [plot-hsv]
import matplotlib.pyplot as plt

fig, axes = plt.subplot_mosaic([["hsv", "err"], ["bode", "bode"]], figsize=(10, 7.6),
                               layout="constrained")
ax1, ax2 = axes["hsv"], axes["err"]
ax1.semilogy(np.arange(1, G.n + 1), hsv / hsv[0], "o", ms=3)
ax1.axhline(1e-3, color="gray", ls="--", lw=1)
ax1.text(G.n, 2e-3, r"$\sigma_i/\sigma_1 = 10^{-3}$", ha="right", color="gray")
ax1.set(xlabel="index i", ylabel=r"$\sigma_i / \sigma_1$", title="Hankel singular values")
ax2.semilogy(orders, upper, "v-", label=r"upper bound $2\sum_{i>r}\sigma_i$")
ax2.semilogy(orders, measured, "o-", label=r"measured $\|G - G_r\|_\infty$ (exact)")
ax2.semilogy(orders, lower, "^-", label=r"lower bound $\sigma_{r+1}$")
ax2.set(xlabel="reduced order r", title="error of balanced truncation")
ax2.legend(fontsize=8)
# [/plot-hsv]

# [bode]
bt = balanced_truncation(G, tol=1e-2 * hsv[0])  # smallest order with bound <= tol
print(f"tol = {1e-2 * hsv[0]:.3g} gives order {bt.order}, bound {bt.error_bound:.3g}")
omega = np.linspace(0.0, 0.3, 1500)  # rad/sample; the modes sit below 0.2


def gain(sys):
    """Largest singular value of the frequency response, shape (len(omega),)."""
    return np.linalg.norm(sys.frequency_response(omega), ord=2, axis=(1, 2))


ax = axes["bode"]
ax.semilogy(omega, gain(G), lw=2, label=f"full model, n = {G.n}")
ax.semilogy(omega, gain(bt.reduced), "--", label=f"balanced truncation, r = {bt.order}")
ax.semilogy(omega, gain(G - bt.reduced), color="C3", lw=1, label="error G - G_r")
ax.axhline(bt.error_bound, color="C3", ls=":", label="certified bound on the error")
ax.set_ylim(1e-6 * gain(G).max(), 10 * gain(G).max())
ax.set(xlabel=r"frequency $\omega$ (rad/sample)", ylabel=r"$\sigma_{\max}(G(e^{i\omega}))$",
       title="frequency response")
ax.legend(fontsize=8, loc="lower left")
# [/bode]
