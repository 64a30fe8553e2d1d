"""Discrete-time linear time-invariant systems: Lyapunov equations, Gramians,
Hankel singular values and balanced truncation with certified error bounds.

Pure numpy/scipy (slycot optional); never imports torch.
"""

from __future__ import annotations

from lti.balanced import (
    BalancedTruncation,
    balanced_truncation,
    balanced_truncation_from_factors,
    hankel_singular_values,
)
from lti.datadriven import (
    StateCovarianceAccumulator,
    WeightedBalancedTruncation,
    expected_state_covariance,
    state_covariance,
    weighted_balanced_truncation,
)
from lti.empirical import EmpiricalGramians, empirical_gramians
from lti.exceptions import (
    EmptyDataError,
    InvalidArgumentError,
    LTIError,
    MissingDependencyError,
    NonFiniteError,
    NotSymmetricError,
    ShapeError,
    SolverError,
    SparseNotSupportedError,
    UnstableSystemError,
)

# --- public API (each module adds its own import block below) ---
from lti.gramians import controllability_gramian, gramian_factors, observability_gramian
from lti.hankel import HankelNormApproximation, hankel_norm_approximation
from lti.lyapunov import (
    SchurForm,
    lyapunov_factor,
    psd_factor,
    real_schur,
    solve_discrete_lyapunov,
)
from lti.norms import HinfNorm, h2_norm, hankel_norm, hinf_norm
from lti.stability import StableSplit, split_unstable
from lti.system import DiscreteLTI, as_discrete_system, discretize_zoh

__all__ = [
    "BalancedTruncation",
    "DiscreteLTI",
    "EmpiricalGramians",
    "EmptyDataError",
    "HankelNormApproximation",
    "HinfNorm",
    "InvalidArgumentError",
    "LTIError",
    "MissingDependencyError",
    "NonFiniteError",
    "NotSymmetricError",
    "SchurForm",
    "ShapeError",
    "SolverError",
    "SparseNotSupportedError",
    "StableSplit",
    "StateCovarianceAccumulator",
    "UnstableSystemError",
    "WeightedBalancedTruncation",
    "as_discrete_system",
    "balanced_truncation",
    "balanced_truncation_from_factors",
    "controllability_gramian",
    "discretize_zoh",
    "empirical_gramians",
    "expected_state_covariance",
    "gramian_factors",
    "h2_norm",
    "hankel_norm",
    "hankel_norm_approximation",
    "hankel_singular_values",
    "hinf_norm",
    "lyapunov_factor",
    "observability_gramian",
    "psd_factor",
    "real_schur",
    "solve_discrete_lyapunov",
    "split_unstable",
    "state_covariance",
    "weighted_balanced_truncation",
]
__version__ = "0.1.0"
