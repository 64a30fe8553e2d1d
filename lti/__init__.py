"""Discrete-time linear time-invariant systems: Lyapunov equations, Gramians,
Hankel singular values and balanced truncation with certified error bounds.

Pure numpy/scipy (slycot optional); never imports torch.
"""

from __future__ import annotations

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
    UnstableSystemError,
)

from lti.lyapunov import (
    SchurForm,
    lyapunov_factor,
    psd_factor,
    real_schur,
    solve_discrete_lyapunov,
)

# --- public API (each module adds its own import block below) ---
from lti.system import DiscreteLTI, discretize_zoh

__all__ = [
    "DiscreteLTI",
    "EmpiricalGramians",
    "EmptyDataError",
    "InvalidArgumentError",
    "LTIError",
    "MissingDependencyError",
    "NonFiniteError",
    "NotSymmetricError",
    "SchurForm",
    "ShapeError",
    "SolverError",
    "UnstableSystemError",
    "discretize_zoh",
    "empirical_gramians",
    "lyapunov_factor",
    "psd_factor",
    "real_schur",
    "solve_discrete_lyapunov",
]
__version__ = "0.1.0"
