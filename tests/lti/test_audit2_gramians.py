"""stable_gramian_factors of a sparse system: a typed error naming the low-rank route."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp

from lti import DiscreteLTI, SparseNotSupportedError, gramian_factors
from lti.gramians import stable_gramian_factors


def test_stable_gramian_factors_of_a_sparse_system_names_gramian_factors():
    """Was a bare TypeError ("float() argument must be ... not 'csr_matrix'")."""
    A = sp.diags([0.5, -0.3, 0.2]).tocsr()
    G = DiscreteLTI(A, np.ones((3, 1)), np.ones((1, 3)))
    with pytest.raises(SparseNotSupportedError, match=r"lti\.gramian_factors\(G\)"):
        stable_gramian_factors(G)
    Lc, Lo = gramian_factors(G)  # the route the message names works
    dense = stable_gramian_factors(DiscreteLTI(A.toarray(), G.B, G.C))
    np.testing.assert_allclose(Lc @ Lc.T, dense.Lc @ dense.Lc.T, rtol=1e-10, atol=1e-14)
