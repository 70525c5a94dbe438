"""Sweeps: a metric against a length, or against a swept strategy parameter, with CI bands and a
fitted line per series."""

from __future__ import annotations

from typing import ClassVar

import pyqtgraph as pg
from PySide6 import QtCore

from workbench.charts.base import OKABE_ITO, Chart
from workbench.charts.conversation import ConversationChart
from workbench.charts.sweeps import ParameterSweepChart, SweepChart
from workbench.formatting import ci_suffix, fmt, significant
from workbench.gui.chartkinds.base import WIDTH, ChartKind, legend, line, new_plot, qcolour

__all__ = ["ConversationKind", "ParameterSweepKind", "SweepKind"]


class SweepKind(ChartKind[SweepChart]):
    """TTFT against input length, decode tok/s against output length."""

    data: ClassVar[tuple[type[Chart], ...]] = (SweepChart,)
    tab: ClassVar[str | None] = "Sweeps"

    def build(self, widget: pg.GraphicsLayoutWidget, chart: SweepChart) -> None:
        plot = new_plot(widget, grid=(True, True), bottom=chart.x_axis, left=chart.y_axis)
        legend(widget, self.draw(plot, chart), per_line=2, marker="o")

    def draw(self, plot: pg.PlotItem, chart: SweepChart) -> list[tuple[str, str]]:
        """The series into ``plot``: CI bands, medians, fitted lines; returns the legend's entries."""
        plot.getViewBox().setMouseEnabled(x=True, y=True)
        colours = chart.colours
        entries = []
        top = 0.0
        for s in chart.series:
            colour = colours.get(s.variant, OKABE_ITO[-1])
            lo = [v if v is not None else y for v, y in zip(s.lo, s.y, strict=True)]
            hi = [v if v is not None else y for v, y in zip(s.hi, s.y, strict=True)]
            top = max(top, *hi)
            low = pg.PlotCurveItem(list(s.x), lo, pen=pg.mkPen(None), antialias=True)
            high = pg.PlotCurveItem(list(s.x), hi, pen=pg.mkPen(None), antialias=True)
            plot.addItem(low)
            plot.addItem(high)
            plot.addItem(pg.FillBetweenItem(low, high, brush=qcolour(colour, 60)))
            line(
                plot,
                list(s.x),
                list(s.y),
                pen=pg.mkPen(colour, width=2),
                symbol="o",
                symbolSize=7,
                symbolBrush=colour,
                symbolPen=pg.mkPen(colour),
            )
            if s.slope is not None and s.intercept is not None:
                x0, x1 = min(s.x), max(s.x)
                line(
                    plot,
                    [x0, x1],
                    [s.intercept + s.slope * x0, s.intercept + s.slope * x1],
                    pen=pg.mkPen(colour, width=1.5, style=QtCore.Qt.PenStyle.DashLine),
                )
            slope = (
                f": fit {significant(s.slope, 3, signed=True)} {chart.slope_unit}"
                if s.slope is not None
                else ""
            )
            entries.append((colour, f"{s.variant}{slope}"))
        plot.setLimits(xMin=0)
        plot.setYRange(0, top * 1.08 or 1, padding=0)
        return entries

    def describe(self, chart: SweepChart, plot: pg.PlotItem, x: float, y: float) -> str | None:
        xs = sorted({v for s in chart.series for v in s.x})
        if not xs:
            return None
        nearest = min(xs, key=lambda v: abs(v - x))
        if abs(nearest - x) > 0.1 * (xs[-1] - xs[0] or nearest or 1):
            return None
        unit = chart.y_axis.unit
        lines = [f"<b>{chart.x_axis.label} {fmt(nearest, 0)} {chart.x_axis.unit}</b>"]
        for s in chart.series:
            if nearest in s.x:
                i = s.x.index(nearest)
                ci = ci_suffix(s.lo[i], s.hi[i], 1, grouped=True)
                lines.append(f"{s.variant}: {fmt(s.y[i], 1)}{ci} {unit}")
        return "<br>".join(lines)


class ParameterSweepKind(SweepKind):
    """A metric against a swept variant parameter, one line per workload: drawn like the length sweeps.
    The window has no tab for it (the Sweeps tab holds the length sweeps); the report and the export
    show it."""

    data = (ParameterSweepChart,)
    tab = None


class ConversationKind(SweepKind):
    """TTFT against a conversation's turn, one line per variant: drawn like the length sweeps, in the
    Sweeps tab beside TTFT against input length; under it, a smaller panel of the KV cache each
    variant holds at the end of each turn (same x axis, same colours)."""

    data = (ConversationChart,)

    def size(self, chart: SweepChart) -> tuple[int, int]:
        return WIDTH, 760 if isinstance(chart, ConversationChart) and chart.kv_cache else 580

    def build(self, widget: pg.GraphicsLayoutWidget, chart: SweepChart) -> None:
        assert isinstance(chart, ConversationChart)
        if not chart.kv_cache:
            super().build(widget, chart)
            return
        plot = new_plot(widget, grid=(True, True), left=chart.y_axis)
        entries = self.draw(plot, chart)
        widget.nextRow()
        kv = new_plot(widget, grid=(True, True), bottom=chart.x_axis, left=chart.kv_axis)
        kv.setXLink(plot)
        colours = chart.colours
        styles = (QtCore.Qt.PenStyle.SolidLine, QtCore.Qt.PenStyle.DashLine, QtCore.Qt.PenStyle.DotLine)
        top = 0.0
        for i, s in enumerate(chart.kv_cache):  # equal caches overlap: the later ones dashed, dotted
            colour = colours.get(s.variant, OKABE_ITO[-1])
            top = max(top, *s.mib)
            pen = pg.mkPen(colour, width=2, style=styles[i % len(styles)])
            line(kv, list(s.x), list(s.mib), pen=pen, symbol="s", symbolSize=5, symbolBrush=colour)
        kv.setYRange(0, top * 1.1 or 1, padding=0)
        for item, stretch in ((plot, 3), (kv, 1)):  # the TTFT panel three times the KV panel's height
            row = next(r for r, cols in widget.ci.rows.items() if item in cols.values())
            widget.ci.layout.setRowStretchFactor(row, stretch)
        for p in (plot, kv):  # the two left axes one width: the panels' x axes line up
            p.getAxis("left").setWidth(70)
        legend(widget, entries, per_line=2, marker="o")

    def describe(self, chart: SweepChart, plot: pg.PlotItem, x: float, y: float) -> str | None:
        text = super().describe(chart, plot, x, y)
        if text is None or not isinstance(chart, ConversationChart) or not chart.kv_cache:
            return text
        nearest = min({v for s in chart.kv_cache for v in s.x}, key=lambda v: abs(v - x))
        cells = [
            f"{s.variant}: {fmt(s.mib[s.x.index(nearest)], 1)} {chart.kv_axis.unit}"
            for s in chart.kv_cache
            if nearest in s.x
        ]
        return text + "<br><i>KV cache</i><br>" + "<br>".join(cells)
