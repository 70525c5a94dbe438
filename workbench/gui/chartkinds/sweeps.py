"""Sweeps: a metric against a length, or against a swept strategy parameter, with CI bands and a
fitted line per series."""

from __future__ import annotations

from typing import ClassVar

import pyqtgraph as pg
from PySide6 import QtCore

from workbench.charts.base import OKABE_ITO, Chart
from workbench.charts.sweeps import ParameterSweepChart, SweepChart
from workbench.formatting import ci_suffix, fmt, significant
from workbench.gui.chartkinds.base import ChartKind, legend, line, new_plot, qcolour, renderer

__all__ = ["ParameterSweepKind", "SweepKind"]

#: a workload's marker when a chart has several workloads (its lines keep the variant's colour)
SYMBOLS = ("o", "s", "t", "d", "star", "p", "h")


@renderer
class SweepKind(ChartKind[SweepChart]):
    """TTFT against input length, decode tok/s against output length."""

    data: ClassVar[type[Chart]] = SweepChart

    def build(self, widget: pg.GraphicsLayoutWidget, chart: SweepChart) -> None:
        plot = new_plot(widget, grid=(True, True), bottom=chart.x_axis, left=chart.y_axis)
        legend(widget, self.draw(plot, chart), per_line=2, marker="o")

    def draw(self, plot: pg.PlotItem, chart: SweepChart) -> list[tuple[str, str] | tuple[str, str, str]]:
        """The series into ``plot``: CI bands, medians, fitted lines; returns the legend's entries."""
        plot.getViewBox().setMouseEnabled(x=True, y=True)
        colours = chart.colours
        entries: list[tuple[str, str] | tuple[str, str, str]] = []
        top = 0.0
        # one line per workload × variant: the variant's colour, a marker per workload
        workloads = list(dict.fromkeys(s.workload for s in chart.series if s.workload))
        for s in chart.series:
            symbol = SYMBOLS[workloads.index(s.workload) % len(SYMBOLS)] if s.workload else "o"
            colour = colours.get(s.variant, OKABE_ITO[-1])
            lo = [v if v is not None else y for v, y in zip(s.lo, s.y, strict=True)]
            hi = [v if v is not None else y for v, y in zip(s.hi, s.y, strict=True)]
            top = max(top, *hi)
            low = pg.PlotCurveItem(list(s.x), lo, pen=pg.mkPen(None), antialias=True)
            high = pg.PlotCurveItem(list(s.x), hi, pen=pg.mkPen(None), antialias=True)
            plot.addItem(low)
            plot.addItem(high)
            plot.addItem(pg.FillBetweenItem(low, high, brush=qcolour(colour, 60)))
            hollow = self.hollow(chart, s.variant)
            line(
                plot,
                list(s.x),
                list(s.y),
                pen=pg.mkPen(
                    colour,
                    width=2,
                    style=QtCore.Qt.PenStyle.DashLine if hollow else QtCore.Qt.PenStyle.SolidLine,
                ),
                symbol=symbol,
                symbolSize=8,
                symbolBrush="#ffffff" if hollow else colour,
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
            entries.append((colour, f"{s.label}{slope}", "hollow" if hollow else symbol))
        plot.setLimits(xMin=0)
        plot.setYRange(0, top * 1.08 or 1, padding=0)
        return entries

    def hollow(self, chart: SweepChart, series: str) -> bool:
        """Whether ``series`` is drawn dashed with hollow markers (the earlier of two runs)."""
        return False

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
                lines.append(f"{s.label}: {fmt(s.y[i], 1)}{ci} {unit}")
        return "<br>".join(lines)


@renderer
class ParameterSweepKind(SweepKind):
    """A metric against a swept variant parameter, one line per workload: drawn like the length sweeps.
    The window has no tab for it (the Sweeps tab holds the length sweeps); the report and the export
    show it."""

    data = ParameterSweepChart
