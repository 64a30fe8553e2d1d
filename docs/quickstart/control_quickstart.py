# ruff: noqa: E402  (imports appear where the page introduces them)
"""Quickstart for control people: build a discrete-time system, solve a Lyapunov
equation, reduce the system by balanced truncation and check the certified bound with
the exact H-infinity norm. Runs in about a second; ``tests/test_docs.py`` executes it."""

# [system]
import numpy as np

from lti import DiscreteLTI

rng = np.random.default_rng(0)
n, m, p = 60, 2, 3
A = rng.standard_normal((n, n))
A *= 0.95 / np.max(np.abs(np.linalg.eigvals(A)))  # spectral radius 0.95: Schur-stable
B = rng.standard_normal((n, m))
C = rng.standard_normal((p, n))
G = DiscreteLTI(A, B, C)  # D defaults to zeros, dt=True means "discrete, unspecified"
print(G)
print("n, m, p =", (G.n, G.m, G.p), " stable:", G.is_stable())
# [/system]

# [lyapunov]
from lti import controllability_gramian, lyapunov_factor, solve_discrete_lyapunov

P = solve_discrete_lyapunov(A, B @ B.T)  # A P A^T - P + B B^T = 0
residual = np.linalg.norm(A @ P @ A.T - P + B @ B.T) / np.linalg.norm(P)
print(f"relative Lyapunov residual: {residual:.1e}")
assert residual < 1e-12

L = lyapunov_factor(A, B)  # P = L L^T, computed without forming P
assert np.allclose(L @ L.T, P, rtol=0, atol=1e-10 * np.linalg.norm(P))
assert np.allclose(controllability_gramian(G), P, rtol=0, atol=1e-10 * np.linalg.norm(P))
# [/lyapunov]

# [reduce]
from lti import balanced_truncation, hankel_singular_values, hinf_norm

hsv = hankel_singular_values(G)  # descending
print("largest HSVs:", np.array2string(hsv[:5], precision=3))

bt = balanced_truncation(G, order=12)
Gr = bt.reduced  # a DiscreteLTI with 12 states
err, omega = hinf_norm(G - Gr)  # exact H-infinity norm of the error system, peak frequency
print(f"order {bt.order}: sigma_13 = {bt.lower_bound:.3e} <= ||G - Gr||_inf = {err:.3e}"
      f" <= 2 * sum(tail) = {bt.error_bound:.3e}")
assert bt.lower_bound <= err * (1 + 1e-8)
assert err <= bt.error_bound * (1 + 1e-8)
# [/reduce]

# [spa]
spa = balanced_truncation(G, order=12, match_dc=True)  # singular perturbation approximation
dc_full = G.frequency_response([0.0])[0]  # G(e^{i0}) = G(1), shape (p, m)
dc_spa = spa.reduced.frequency_response([0.0])[0]
print(f"DC gain mismatch: truncation {np.abs(dc_full - Gr.frequency_response([0.0])[0]).max():.1e},"
      f" SPA {np.abs(dc_full - dc_spa).max():.1e}")
assert np.allclose(dc_spa, dc_full, rtol=1e-8, atol=1e-10)
# [/spa]

# [control]
try:
    import control  # python-control, optional: pip install "lti-adapters[control]"
except ImportError:
    control = None
if control is not None:
    sys_ct = Gr.to_control()  # a control.StateSpace with dt=True
    back = DiscreteLTI.from_control(sys_ct)
    assert np.array_equal(back.A, Gr.A)
    print("round trip through python-control:", type(sys_ct).__name__)
# [/control]
