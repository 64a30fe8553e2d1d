"""Every public lti entry point given a sparse system (or sparse ``A``) either works or
raises SparseNotSupportedError naming the alternative: a walk over ``lti.__all__`` and the
public DiscreteLTI methods, so that a new public function must be placed here."""

from __future__ import annotations

import inspect
import re

import numpy as np
import pytest

import lti
from lti import DiscreteLTI, LTIError, SparseNotSupportedError
from tests.lti.test_sparse import heat

A, B, C = heat(6)  # n = 36, symmetric, Schur-stable
C = C[:1]  # m = p = 1 (series and interconnections pass their shape checks)


def _G():
    return DiscreteLTI(A, B, C)


def _check_factor(L):
    P = np.asarray(L) @ np.asarray(L).T
    Ad = A.toarray()
    assert np.linalg.norm(Ad @ P @ Ad.T - P + B @ B.T) <= 1e-8 * np.linalg.norm(B.T @ B)


WORKS = "works"
TYPED = "typed error"
#: public name -> (how to call it with sparse input, expected outcome, check of the result
#: or, for the typed error, a pattern the message must match: the function and its alternative)
CALLS = {
    "DiscreteLTI": (lambda: DiscreteLTI(A, B, C), WORKS, lambda G: G.A.format == "csr"),
    "as_discrete_system": (lambda: lti.as_discrete_system((A, B, C)), WORKS,
                           lambda G: G.n == 36),
    "balanced_truncation": (lambda: lti.balanced_truncation(_G(), order=2), WORKS,
                            lambda r: r.reduced.n == 2 and r.lower_bound <= r.error_bound),
    "balanced_truncation_from_factors": (
        lambda: lti.balanced_truncation_from_factors(_G(), *lti.gramian_factors(_G()), order=2),
        WORKS, lambda r: r.reduced.n == 2),
    "controllability_gramian": (lambda: lti.controllability_gramian(_G(), factor=True), WORKS,
                                _check_factor),
    "observability_gramian": (lambda: lti.observability_gramian(_G(), factor=True), WORKS,
                              lambda L: L.shape[0] == 36),
    "gramian_factors": (lambda: lti.gramian_factors(_G()), WORKS,
                        lambda F: _check_factor(F[0]) is None),
    "lyapunov_factor": (lambda: lti.lyapunov_factor(A, B), WORKS, _check_factor),
    "hankel_singular_values": (lambda: lti.hankel_singular_values(_G()), WORKS,
                               lambda s: s[0] > 0),
    "h2_norm": (lambda: lti.h2_norm(_G()), WORKS, lambda v: v > 0),
    "hankel_norm": (lambda: lti.hankel_norm(_G()), WORKS, lambda v: v > 0),
    "empirical_gramians": (lambda: lti.empirical_gramians(_G(), horizon=20), WORKS,
                           lambda E: E is not None),
    "discretize_zoh": (lambda: lti.discretize_zoh(A, B, 0.1), TYPED, "toarray"),
    "expected_state_covariance": (lambda: lti.expected_state_covariance(A, B), TYPED,
                                  "lyapunov_factor"),
    "state_covariance": (lambda: lti.state_covariance(A, B, np.ones((30, 1))), TYPED,
                         "toarray"),
    "StateCovarianceAccumulator": (lambda: lti.StateCovarianceAccumulator(A, B), TYPED,
                                   "toarray"),
    "psd_factor": (lambda: lti.psd_factor(A), TYPED, "`X` is a scipy.sparse"),
    "real_schur": (lambda: lti.real_schur(A), TYPED, "`A` is a scipy.sparse"),
    "solve_discrete_lyapunov": (lambda: lti.solve_discrete_lyapunov(A, B @ B.T), TYPED,
                                "lti.lyapunov_factor"),
    "split_unstable": (lambda: lti.split_unstable(_G()), TYPED, "^split_unstable.*eigs"),
    "hinf_norm": (lambda: lti.hinf_norm(_G()), TYPED, "^hinf_norm.*balanced_truncation"),
    "hankel_norm_approximation": (lambda: lti.hankel_norm_approximation(_G(), order=2),
                                  TYPED, "^hankel_norm_approximation.*balanced_truncation"),
    "weighted_balanced_truncation": (
        lambda: lti.weighted_balanced_truncation(_G(), order=2, input_covariance=np.eye(1)),
        TYPED, r"^weighted_balanced_truncation.*lti\.balanced_truncation\(G\)"),
}
#: public classes that hold results or are errors: no operation on a system
NOT_OPERATIONS = {
    name for name in lti.__all__
    if inspect.isclass(getattr(lti, name)) and (
        issubclass(getattr(lti, name), Exception)
        or name in {"BalancedTruncation", "EmpiricalGramians", "HankelNormApproximation",
                    "HinfNorm", "SchurForm", "StableSplit", "WeightedBalancedTruncation"})
}
#: DiscreteLTI methods: call with a sparse system, outcome
METHODS = {
    "poles": (lambda G: G.poles(), TYPED),
    "spectral_radius": (lambda G: G.spectral_radius(), TYPED),
    "is_stable": (lambda G: G.is_stable(), TYPED),
    "frequency_response": (lambda G: G.frequency_response([0.1]), TYPED),
    "similarity": (lambda G: G.similarity(np.eye(G.n)), TYPED),
    "series": (lambda G: G.series(G), TYPED),
    "to_control": (lambda G: G.to_control(), TYPED),
    "markov": (lambda G: G.markov(3), WORKS),
    "simulate": (lambda G: G.simulate(np.ones((5, 1))), WORKS),
    "from_control": (None, "constructor from a python-control system (dense by definition)"),
    "from_diagonal": (None, "constructor from a diagonal (dense by definition)"),
}
#: an alternative named in the message: an lti function, a scipy.sparse.linalg one, an option
ALTERNATIVE = re.compile(r"lti\.\w+|scipy\.sparse\.linalg\.\w+|factor=True|horizon=None")


def _assert_typed(call, hint=None):
    with pytest.raises(SparseNotSupportedError) as info:
        call()
    assert isinstance(info.value, TypeError) and isinstance(info.value, LTIError)
    msg = str(info.value)
    assert "sparse" in msg and ALTERNATIVE.search(msg), msg
    assert hint is None or re.search(hint, msg), (hint, msg)


def test_every_public_name_is_classified():
    operations = {n for n in lti.__all__ if callable(getattr(lti, n))} - NOT_OPERATIONS
    assert operations == set(CALLS), (operations ^ set(CALLS))


@pytest.mark.parametrize("name", sorted(CALLS))
def test_public_function_with_a_sparse_system(name):
    call, outcome, check = CALLS[name]
    if outcome == WORKS:
        assert check(call()) in (True, None)
    else:
        _assert_typed(call, check)


def test_every_public_method_is_classified():
    public = {n for n, v in vars(DiscreteLTI).items()
              if not n.startswith("_") and callable(getattr(DiscreteLTI, n))
              and not isinstance(v, property)}
    assert public == set(METHODS), public ^ set(METHODS)


@pytest.mark.parametrize("name", sorted(n for n in METHODS if METHODS[n][0] is not None))
def test_public_method_with_a_sparse_system(name):
    call, outcome = METHODS[name]
    G = _G()
    if outcome == WORKS:
        out = call(G)
        assert np.all(np.isfinite(out))
    else:
        _assert_typed(lambda: call(G))


@pytest.mark.parametrize("op", [lambda G: G + G, lambda G: G - G])
def test_interconnection_operators_with_a_sparse_system(op):
    _assert_typed(lambda: op(_G()))
    assert (-_G()).A.format == "csr" and (_G() * 2.0).n == 36
