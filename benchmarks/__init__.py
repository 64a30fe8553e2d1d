"""Benchmark scripts (``bench_*.py``, ``select_lr.py``) and the paper's experiment harness
(:mod:`benchmarks.hrm`). Nothing in ``lti`` or ``adapters`` imports this package."""
