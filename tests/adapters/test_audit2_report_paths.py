"""Paths given to the statistics' and the report's file methods: typed errors, folders made.

Before: ``CalibrationStats.save(None)`` / ``.load(None)``, ``ReductionReport.to_json(None)`` /
``from_json(None)``: ``TypeError: expected str, bytes or os.PathLike object``;
``to_json(<a folder>)``: ``IsADirectoryError``; ``from_json(<not JSON>)``: a bare
``json.JSONDecodeError``; ``plot(3)`` saved ``3.png`` into the working directory;
``plot(fig="x")``: ``AttributeError``; ``plot("new/x.png")`` and ``to_json("new/r.json")``:
``FileNotFoundError`` (``CalibrationStats.save`` makes missing parent folders).
"""

from __future__ import annotations

import numpy as np
import pytest

from adapters.exceptions import AdapterConfigError, AdapterError, CheckpointError
from adapters.report import LayerReduction, ReductionReport
from adapters.statistics import CalibrationStats, LayerStats


def _stats():
    layer = LayerStats("mlp", 3, 2, 0, "fp", "data")
    X = np.arange(6.0).reshape(3, 2)
    layer.load_arrays({"state.count": np.int64(3), "state.sum": X.sum(0),
                       "state.sum_outer": X.T @ X})
    return CalibrationStats({"mlp": layer}, "data")


def _report():
    layer = LayerReduction(
        name="model.layers.0.mlp", gate=0.5, gramian="exact", hsv=(1.0, 0.5, 0.1),
        order_before=3, order_after=2, modes_before=3, modes_after=2, n_real_after=2,
        n_complex_after=0, lower_bound=0.05, upper_bound=0.2, truncation_bound=0.2,
        weighted_bound=None, realisation_bound=0.0, measured_error=None, eig_cond=1.0,
        shift=0.0, params_before=10, params_after=7, lti_seconds=0.0, rounding_term=0.0)
    return ReductionReport(layers=(layer,), gramian="exact", method="sr", order=2)


@pytest.mark.parametrize("value", [None, 3])
def test_file_methods_name_a_path_argument_that_is_no_path(value):
    stats, report = _stats(), _report()
    calls = {"CalibrationStats.save": lambda: stats.save(value),
             "CalibrationStats.load": lambda: CalibrationStats.load(value),
             "ReductionReport.to_json": lambda: report.to_json(value),
             "ReductionReport.from_json": lambda: ReductionReport.from_json(value)}
    if value is not None:  # plot(None) is "do not save"
        calls["ReductionReport.plot"] = lambda: report.plot(value)
    for name, call in calls.items():
        with pytest.raises(AdapterConfigError, match=rf"`{name}` takes a file path .*got "
                                                     rf"{type(value).__name__} {value!r}"):
            call()


def test_report_json_into_folders_and_from_foreign_files(tmp_path):
    report = _report()
    with pytest.raises(CheckpointError, match=r"is a folder; `ReductionReport.to_json` writes"):
        report.to_json(tmp_path)
    path = report.to_json(tmp_path / "new" / "r.json")  # parents made
    assert ReductionReport.from_json(path) == report
    (tmp_path / "bad.json").write_text("{")
    with pytest.raises(AdapterError, match=r"is not a reduction report .*not JSON"):
        ReductionReport.from_json(tmp_path / "bad.json")


def test_report_plot_makes_its_folder_and_names_a_bad_figure(tmp_path):
    pytest.importorskip("matplotlib", reason="the 'plot' extra (matplotlib) is not installed")
    report = _report()
    report.plot(tmp_path / "new" / "hsv.png")
    assert (tmp_path / "new" / "hsv.png").stat().st_size > 0
    with pytest.raises(AdapterConfigError, match=r"`fig` must be a matplotlib Figure; got str"):
        report.plot(fig="x")
