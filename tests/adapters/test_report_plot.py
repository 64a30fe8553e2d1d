"""ReductionReport.plot stays readable for a 30-layer model: a colour bar instead of 30 legend
entries, and a panel of kept orders per layer; ``fig=`` draws into a pyplot figure."""

from __future__ import annotations

import pytest
import torch
from torch import nn

from adapters import HRMConfig, find_adapters, inject, reduce

mpl = pytest.importorskip("matplotlib", reason="extra 'plot' not installed")
mpl.use("Agg")


def report_for(layers: int):
    torch.manual_seed(0)
    blocks = nn.ModuleList(nn.ModuleDict({"mlp": nn.Linear(8, 8)}) for _ in range(layers))
    model = inject(nn.ModuleDict({"layers": blocks}), HRMConfig(d_state=6, gate_init=0.5))
    with torch.no_grad():
        for a in find_adapters(model).values():
            for p in a.adapter.ssm.parameters():
                p.add_(0.3 * torch.randn_like(p))
    return reduce(model, rel_tol=0.05, gramian="exact")


@pytest.fixture(scope="module")
def report30():
    return report_for(30)


def test_thirty_layers_get_a_colour_bar_and_an_order_panel(report30, tmp_path):
    fig = report30.plot(tmp_path / "hsv.png")
    assert (tmp_path / "hsv.png").stat().st_size > 1000
    hsv_ax, orders_ax, bar_ax = fig.axes
    assert bar_ax.get_ylabel() == "layer"
    ticks = [int(t) for t in bar_ax.get_yticks()]
    assert ticks[0] == 0 and ticks[-1] >= 27 and len(ticks) <= 11  # readable tick labels
    labels = hsv_ax.get_legend_handles_labels()[1]
    assert labels == ["threshold 0.05"]  # no 30-entry legend
    kept = [p for p in orders_ax.patches if p.get_facecolor()[3] > 0]
    assert [round(p.get_height()) for p in kept] == [x.order_after for x in report30.layers]
    colours = {p.get_facecolor() for p in kept}
    assert len(colours) == 30  # one colour per layer, matching the colour bar


def test_few_layers_keep_a_legend_and_no_colour_bar(tmp_path):
    report = report_for(3)
    fig = report.plot()
    assert len(fig.axes) == 2
    names = fig.axes[0].get_legend_handles_labels()[1]
    assert names == [x.name for x in report.layers] + ["threshold 0.05"]


def test_draws_into_a_given_pyplot_figure(report30):
    import matplotlib.pyplot as plt

    fig = plt.figure()
    try:
        assert report30.plot(fig=fig) is fig and len(fig.axes) == 3
        assert plt.fignum_exists(fig.number)
    finally:
        plt.close(fig)


def test_the_order_panel_names_the_model_s_block_numbers():
    """A report of blocks 26-29 (the last four of a 30-layer model) says 26-29 on the order
    panel, as its legend does, not the positions 0-3."""
    torch.manual_seed(0)
    blocks = nn.ModuleList(nn.ModuleDict({"mlp": nn.Linear(8, 8)}) for _ in range(30))
    model = inject(nn.ModuleDict({"layers": blocks}),
                   HRMConfig(d_state=6, gate_init=0.5, layers_to_skip=tuple(range(26))))
    report = reduce(model, rel_tol=0.05, gramian="exact")
    fig = report.plot()
    assert [t.get_text() for t in fig.axes[1].get_xticklabels()] == ["26", "27", "28", "29"]
    assert fig.axes[0].get_legend_handles_labels()[1][:4] == [f"layers.{i}.mlp"
                                                              for i in range(26, 30)]
    big = report_for(12).plot()  # colour bar and panel: every other block, numbered the same
    assert [t.get_text() for t in big.axes[1].get_xticklabels()] == [
        t.get_text() for t in big.axes[2].get_yticklabels()] == [str(i) for i in range(0, 12, 2)]
