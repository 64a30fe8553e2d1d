"""lti.demo: typed errors from heat_equation, argparse errors (exit 2) from the CLI."""

from __future__ import annotations

import pytest

from lti import InvalidArgumentError
from lti.demo import heat_equation, main


@pytest.mark.parametrize("kwargs", [{"n": 0}, {"n": -3}, {"n": 2.5}, {"n": True},
                                    {"diffusivity": 0.0}, {"diffusivity": float("nan")}])
def test_heat_equation_bad_arguments(kwargs):
    """n = 0 / -3 gave a bare 'ValueError: negative dimensions are not allowed'; 2.5 a
    TypeError; diffusivity 0 or NaN went through to a NaN system or a singular one."""
    with pytest.raises(InvalidArgumentError):
        heat_equation(**kwargs)


def test_heat_equation_with_one_node():
    G = heat_equation(1)
    assert (G.n, G.m, G.p) == (1, 1, 2) and G.is_stable()


@pytest.mark.parametrize("argv", [["--n", "0"], ["--n", "10", "--order", "20"],
                                  ["--n", "10", "--tol", "-1"], ["--n", "10", "--tol", "nan"]])
def test_cli_reports_bad_arguments_as_usage_errors(argv, capsys):
    """Were tracebacks (ValueError, InvalidArgumentError) instead of argparse's exit 2; --tol -1
    was reported as 'got -0.0612' (multiplied by sigma_1)."""
    with pytest.raises(SystemExit) as exc:
        main(argv)
    assert exc.value.code == 2
    assert argv[-2] in capsys.readouterr().err
