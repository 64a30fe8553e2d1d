"""The snippet on the front page of the documentation (run by tests/test_docs.py)."""

# [first-look]
import numpy as np

from lti import DiscreteLTI, balanced_truncation, hinf_norm

rng = np.random.default_rng(0)
A = rng.standard_normal((50, 50))
A *= 0.9 / max(abs(np.linalg.eigvals(A)))  # Schur-stable: spectral radius 0.9
G = DiscreteLTI(A, rng.standard_normal((50, 2)), rng.standard_normal((3, 50)))
bt = balanced_truncation(G, tol=1e-3)
err = hinf_norm(G - bt.reduced).value  # exact H-infinity norm of the error system
print(bt.order, bt.lower_bound, err, bt.error_bound)
assert bt.lower_bound <= err <= bt.error_bound  # the certificate holds
# [/first-look]
