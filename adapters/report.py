"""The report of :func:`adapters.reduce`: what balanced truncation did to each adapter.

:class:`LayerReduction` holds one adapter's HSVs, orders, mode counts, bounds (gate
included), parameters and timing; :class:`ReductionReport` the layers and the settings, with
a Markdown table, JSON round trip and an HSV plot (matplotlib, ``[plot]`` extra). Plain data:
no torch, no numerics beyond the plot.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from adapters._atomic import atomic_write_text, file_path
from adapters._optional import require
from adapters.exceptions import AdapterConfigError, AdapterError, CheckpointError
from adapters.targets import block_index

__all__ = ["LayerReduction", "ReductionReport"]


@dataclass(frozen=True)
class LayerReduction:
    """What :func:`reduce` did to one adapter (all bounds include ``|gate|``).

    Attributes
    ----------
    name : str
        Dotted module name of the adapter.
    gate : float
        Gate g (kept unchanged).
    gramian : str
        ``"exact"``, ``"data"`` or ``"input"``.
    hsv : tuple of float
        Hankel singular values used to rank the states, descending (weighted ones for
        ``"data"`` / ``"input"``), without the gate.
    order_before, order_after : int
        Real order n and r (``n_real + 2 n_complex``).
    modes_before, modes_after : int
        State length N and N' of the SSM modules.
    n_real_after, n_complex_after : int
        Mode structure of the reduced SSM.
    lower_bound : float
        ``|g| sigma_{r+1}(G)`` (unweighted HSVs): no adapter of order r is closer to the
        full one in the H-infinity norm.
    upper_bound : float
        Certified ``|| g (G - G_mod) ||_inf`` bound for the module actually installed:
        ``truncation_bound + realisation_bound + rounding slack``.
    truncation_bound : float
        ``|g|`` times the certified H-infinity bound of the balanced-truncation step
        (``2 sum_{i>r} sigma_i + rounding_term`` for exact Gramians; the plain bound of
        :func:`lti.weighted_balanced_truncation` otherwise), as reported by :mod:`lti`.
    weighted_bound : float or None
        ``|g| 2 sum_{i>r} sigma~_i`` (data / input Gramians only): the bound for the weighted
        *surrogate* system of :class:`lti.WeightedBalancedTruncation` (the input model built
        from the statistics), not a bound on the error for the calibration stream itself.
    realisation_bound : float
        ``|g| 2 sum_i sigma_i(G_r - G_mod)``: certified bound of what the modal form, a
        fallback perturbation and the rounding of the new parameters changed.
    measured_error : float or None
        ``|| g (G - G_mod) ||_inf`` from :func:`lti.hinf_norm` (``measure=True``).
    eig_cond : float
        Condition number of the unit-column eigenvector matrix of the diagonalised
        ``A_r`` (after the fallback, if one was needed).
    shift : float
        Spectral-norm size of the fallback perturbation of ``A_r`` (0 when none).
    params_before, params_after : int
        Trainable parameters of the adapter (gate included).
    lti_seconds : float
        Wall time of this layer's numerics (export, compression, truncation in :mod:`lti`,
        modal form, realisation bound); building the torch modules and the measurement are
        not included.
    rounding_term : float
        ``|g|`` times :attr:`lti.BalancedTruncation.rounding_term` (the stated rounding term
        of the computed HSVs and projection), which ``truncation_bound`` includes.
    """

    name: str
    gate: float
    gramian: str
    hsv: tuple
    order_before: int
    order_after: int
    modes_before: int
    modes_after: int
    n_real_after: int
    n_complex_after: int
    lower_bound: float
    upper_bound: float
    truncation_bound: float
    weighted_bound: float | None
    realisation_bound: float
    measured_error: float | None
    eig_cond: float
    shift: float
    params_before: int
    params_after: int
    lti_seconds: float
    rounding_term: float = 0.0


@dataclass(frozen=True)
class ReductionReport:
    """Result of :func:`reduce`: one :class:`LayerReduction` per adapter, and the settings.

    Attributes
    ----------
    layers : tuple of LayerReduction
        In module order.
    gramian, method : str
        As passed to :func:`reduce`.
    tol, rel_tol : float or None
        The selection rule used (``order`` otherwise).
    order : int or dict or None
    lti_seconds : float
        Total wall time of the layers' numerics (see :attr:`LayerReduction.lti_seconds`).
    lti_cpu_seconds : float
        The same as CPU time of the calling thread (insensitive to other load on the machine;
        equal to the wall time on an idle machine when BLAS runs single-threaded).
    measure_seconds : float
        Time of the optional :func:`lti.hinf_norm` measurements.
    seconds : float
        Wall time of the whole :func:`reduce` call.
    """

    layers: tuple
    gramian: str
    method: str
    tol: float | None = None
    rel_tol: float | None = None
    order: object = None
    lti_seconds: float = 0.0
    lti_cpu_seconds: float = 0.0
    measure_seconds: float = 0.0
    seconds: float = 0.0

    @property
    def params_before(self) -> int:
        """Adapter parameters before reduction (all layers)."""
        return sum(layer.params_before for layer in self.layers)

    @property
    def params_after(self) -> int:
        """Adapter parameters after reduction (all layers)."""
        return sum(layer.params_after for layer in self.layers)

    def __getitem__(self, name: str) -> LayerReduction:
        for layer in self.layers:
            if layer.name == name:
                return layer
        raise KeyError(f"no layer {name!r} in the report; have {[x.name for x in self.layers]}")

    # ---- text
    def to_markdown(self) -> str:
        """A Markdown table: one row per layer, then the totals.

        Returns
        -------
        str
            The table (orders, gate, HSV ratio, bounds, parameters) and a totals line.
        """
        rule = (f"tol={self.tol:g}" if self.tol is not None else
                f"rel_tol={self.rel_tol:g}" if self.rel_tol is not None else
                f"order={self.order}")
        weighted = any(x.weighted_bound is not None for x in self.layers)
        hsv_kind = "weighted HSVs" if weighted else "HSVs"
        lines = [
            f"Balanced truncation ({self.gramian} Gramians, {rule}); bounds on "
            f"||gate (G - G_r)||_inf; sigma: {hsv_kind}",
            "",
            "| layer | modes | order | gate | sigma_r+1/sigma_1 | lower | measured | upper "
            + ("| weighted " if weighted else "") + "| params |",
            "|---|---|---|---|---|---|---|---|" + ("---|" if weighted else "") + "---|",
        ]
        for x in self.layers:
            s1 = x.hsv[0] if x.hsv and x.hsv[0] > 0 else float("nan")
            nxt = x.hsv[x.order_after] / s1 if x.order_after < len(x.hsv) else 0.0
            meas = "-" if x.measured_error is None else f"{x.measured_error:.3g}"
            wcol = ""
            if weighted:
                wcol = "- | " if x.weighted_bound is None else f"{x.weighted_bound:.3g} | "
            lines.append(
                f"| {x.name} | {x.modes_before} -> {x.modes_after} | {x.order_before} -> "
                f"{x.order_after} | {x.gate:.3g} | {nxt:.3g} | {x.lower_bound:.3g} | {meas} | "
                f"{x.upper_bound:.3g} | {wcol}{x.params_before:,d} -> {x.params_after:,d} |"
            )
        before, after = self.params_before, self.params_after
        pct = 100.0 * after / before if before else float("nan")
        lines += ["", f"parameters {before:,d} -> {after:,d} ({pct:.1f} %); "
                      f"lti time {self.lti_seconds:.3f} s (CPU {self.lti_cpu_seconds:.3f} s); "
                      f"total {self.seconds:.3f} s"]
        return "\n".join(lines)

    def __str__(self) -> str:
        return self.to_markdown()

    # ---- JSON
    def to_dict(self) -> dict:
        """JSON-able dict (floats, ints, strings, lists).

        Returns
        -------
        dict
            The fields; ``"layers"`` is a list of dicts of :class:`LayerReduction` fields,
            with ``hsv`` as a list. :meth:`from_dict` inverts it.
        """
        out = asdict(self)
        out["layers"] = [dict(asdict(x), hsv=list(x.hsv)) for x in self.layers]
        return out

    @classmethod
    def from_dict(cls, data: Mapping) -> ReductionReport:
        """Inverse of :meth:`to_dict`.

        Parameters
        ----------
        data : mapping
            As returned by :meth:`to_dict` (or read back from its JSON); not modified.

        Returns
        -------
        ReductionReport

        Raises
        ------
        AdapterError
            ``layers`` is missing, or a key is missing or unknown.

        Examples
        --------
        >>> report = ReductionReport(layers=(), gramian="data", method="sr", rel_tol=1e-3)
        >>> ReductionReport.from_dict(report.to_dict()) == report
        True
        """
        try:
            data = dict(data)
            layers = tuple(LayerReduction(**dict(x, hsv=tuple(x["hsv"])))
                           for x in data.pop("layers"))
            return cls(layers=layers, **data)
        except (KeyError, TypeError) as exc:
            raise AdapterError(f"not a valid reduction report: {exc}") from exc

    def to_json(self, path: str | os.PathLike) -> Path:
        """Write the report to ``path`` as JSON; returns the path.

        Parameters
        ----------
        path : str or os.PathLike
            File to write (replaced atomically if it exists); missing parent folders are made.

        Returns
        -------
        pathlib.Path
            ``path``.

        Raises
        ------
        AdapterConfigError
            ``path`` is not a path.
        CheckpointError
            ``path`` is an existing folder.

        Examples
        --------
        >>> import os, tempfile
        >>> report = ReductionReport(layers=(), gramian="data", method="sr", rel_tol=1e-3)
        >>> with tempfile.TemporaryDirectory() as d:
        ...     back = ReductionReport.from_json(report.to_json(os.path.join(d, "r.json")))
        >>> back == report
        True
        """
        path = file_path(path, "ReductionReport.to_json")
        if path.is_dir():
            raise CheckpointError(f"{str(path)!r} is a folder; `ReductionReport.to_json` writes a "
                                  "file, e.g. " + repr(str(path / "report.json")))
        path.parent.mkdir(parents=True, exist_ok=True)
        return atomic_write_text(path, json.dumps(self.to_dict(), indent=2) + "\n")

    @classmethod
    def from_json(cls, path: str | os.PathLike) -> ReductionReport:
        """Read a report written by :meth:`to_json`.

        Parameters
        ----------
        path : str or os.PathLike
            A JSON file written by :meth:`to_json`.

        Returns
        -------
        ReductionReport

        Raises
        ------
        AdapterError
            The file is not JSON, or its object is not a valid report (see :meth:`from_dict`).
        AdapterConfigError
            ``path`` is not a path.
        OSError
            The file cannot be read.
        """
        path = file_path(path, "ReductionReport.from_json")
        text = path.read_text()
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise AdapterError(f"{str(path)!r} is not a reduction report written by "
                               f"ReductionReport.to_json (not JSON: {exc})") from exc
        return cls.from_dict(data)

    # ---- figure
    def plot(self, path: str | os.PathLike | None = None, *, fig=None):
        """HSV decay per layer (``sigma_i / sigma_1``, log scale) and the kept order per layer.

        Left: one curve per layer, coloured by its position in the model (a legend names up to
        8 layers; with more, a colour bar gives the layer number, so that a 30-layer model stays
        readable); a dot marks each layer's kept order r on its curve, and the threshold
        ``rel_tol`` is a horizontal line when it was the rule. Right: the kept order r per
        layer (bars, in the same colours) against the order before (outlines).

        Parameters
        ----------
        path : str or path-like, optional
            Save the figure there (format from the suffix).
        fig : matplotlib.figure.Figure, optional
            An empty figure to draw into (e.g. ``plt.figure()``, so pyplot shows it); by default
            a new figure, not registered with pyplot.

        Returns
        -------
        matplotlib.figure.Figure
            The figure (also saved to ``path`` when given).

        Raises
        ------
        AdapterConfigError
            ``path`` is not a path or ``fig`` not a Figure.
        MissingDependencyError
            matplotlib is missing (``pip install "lti-adapters[plot]"``); an ImportError.
        """
        purpose = "ReductionReport.plot"
        mpl = require("matplotlib", extra="plot", purpose=purpose)
        agg = require("matplotlib.backends.backend_agg", extra="plot", purpose=purpose)
        figure = require("matplotlib.figure", extra="plot", purpose=purpose)
        colors_mod = require("matplotlib.colors", extra="plot", purpose=purpose)
        cm = require("matplotlib.cm", extra="plot", purpose=purpose)
        if path is not None:
            path = file_path(path, "ReductionReport.plot")
        if fig is not None and not isinstance(fig, figure.FigureBase):  # (a SubFigure too)
            raise AdapterConfigError(f"`fig` must be a matplotlib Figure; got {type(fig).__name__}")
        if fig is None:
            fig = figure.Figure(figsize=(10.0, 4.2), layout="constrained")
            agg.FigureCanvasAgg(fig)
        ax, bars = fig.subplots(1, 2, width_ratios=(3, 2))
        n_layers = len(self.layers)
        many = n_layers > 8
        cmap = mpl.colormaps["viridis"]
        norm = colors_mod.BoundaryNorm(np.arange(-0.5, max(n_layers, 1) + 0.5), cmap.N)
        colors = [cmap(norm(j)) for j in range(n_layers)]
        floor = np.inf
        for j, x in enumerate(self.layers):
            h = np.asarray(x.hsv, dtype=float)
            if h.size == 0 or not h[0] > 0:
                continue
            rel = h / h[0]
            pos = rel > 0
            idx = np.arange(1, h.size + 1)
            ax.semilogy(idx[pos], rel[pos], "-", color=colors[j], lw=1.0 if many else 1.4,
                        alpha=0.85, label=None if many else x.name)
            r = x.order_after
            if 1 <= r <= h.size and rel[r - 1] > 0:
                ax.semilogy([r], [rel[r - 1]], "o", color=colors[j], ms=3.5, mec="k", mew=0.3)
            if np.any(pos):
                floor = min(floor, rel[pos].min())
        if self.rel_tol is not None:
            ax.axhline(self.rel_tol, color="crimson", ls="--", lw=1.0,
                       label=f"threshold {self.rel_tol:g}")
        ax.set_xlabel("state index i")
        ax.set_ylabel("sigma_i / sigma_1")
        ax.set_title(f"Hankel singular values per layer ({self.gramian}); dots: kept order",
                     fontsize=10)
        ax.grid(True, alpha=0.3)
        if ax.get_legend_handles_labels()[0]:
            ax.legend(fontsize=7, loc="upper right")
        if np.isfinite(floor):
            ax.set_ylim(bottom=max(floor * 0.5, 1e-17))
        layer_ids = np.arange(n_layers)
        before = [x.order_before for x in self.layers]
        bars.bar(layer_ids, before, color="none", edgecolor="0.5", lw=0.8)
        bars.bar(layer_ids, [x.order_after for x in self.layers], color=colors)
        bars.set_xlabel("layer")
        bars.set_ylabel("order")
        bars.set_title("kept order r per layer (outline: order before)", fontsize=10)
        bars.set_ylim(0, 1.05 * max(before, default=1))
        ticks = layer_ids[:: max(1, int(np.ceil(n_layers / 10)))]
        # ticks say the model's block numbers ("model.layers.27.mlp" -> 27), the legend's names
        numbers = [block_index(x.name) for x in self.layers]
        if None in numbers or len(set(numbers)) != n_layers:
            numbers = list(layer_ids)
        labels = [str(numbers[t]) for t in ticks]
        bars.set_xticks(ticks, labels)
        if many:
            bar = fig.colorbar(cm.ScalarMappable(norm=norm, cmap=cmap), ax=ax, pad=0.01,
                               ticks=ticks)
            bar.set_ticklabels(labels)
            bar.set_label("layer", fontsize=9)
        if path is not None:
            path.parent.mkdir(parents=True, exist_ok=True)
            fig.savefig(str(path), dpi=120)
        return fig
