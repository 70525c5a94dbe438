"""Target attainment: each variant's goodput per workload against the share its targets ask for."""

from __future__ import annotations

import pyqtgraph as pg
from PySide6 import QtCore

from workbench.charts.base import OKABE_ITO, lighten
from workbench.charts.targets import TargetsChart
from workbench.formatting import significant
from workbench.gui.chartkinds import base as kb
from workbench.spec.targets import TARGET_METRICS

__all__ = ["TargetsKind"]


@kb.renderer
class TargetsKind(kb.ChartKind[TargetsChart]):
    """Horizontal goodput bars per variant, grouped by workload; a dashed mark at the percentile."""

    data = TargetsChart

    def size(self, chart: TargetsChart) -> tuple[int, int]:
        return kb.WIDTH, 170 + 34 * (len(chart.bars) + len(chart.workloads))

    def build(self, widget: pg.GraphicsLayoutWidget, chart: TargetsChart) -> None:
        plot = kb.new_plot(widget, grid=(True, False), bottom=chart.x_axis)
        colours = chart.colours
        groups = [(w, [b.variant for b in chart.bars if b.workload == w]) for w in chart.workloads]
        dash = pg.mkPen("#555555", width=1.2, style=QtCore.Qt.PenStyle.DashLine)
        for (workload, _), ys in zip(groups, kb.grouped_rows(plot, groups), strict=True):
            bars = [b for b in chart.bars if b.workload == workload]
            for b, y in zip(bars, ys, strict=True):
                colour = colours.get(b.variant, OKABE_ITO[-1])
                share = 100 * (b.goodput or 0.0)
                plot.addItem(
                    pg.BarGraphItem(
                        x0=[0],
                        y=[y],
                        height=0.62,
                        width=[share],
                        brush=colour if b.status == "met" else lighten(colour),
                        pen=pg.mkPen(colour if b.status != "met" else "#333333", width=1.2),
                    )
                )
                # the share each target asks for, across this row
                kb.line(plot, [b.percentile, b.percentile], [y - 0.42, y + 0.42], pen=dash)
                kb.add_text(plot, max(share, b.percentile) + 1.5, y, b.label, kb.FOREGROUND, (0, 0.5))
        plot.setXRange(0, 175, padding=0)
        plot.getAxis("bottom").setTicks([[(v, f"{v}") for v in range(0, 101, 20)], []])

    def describe(self, chart: TargetsChart, plot: pg.PlotItem, x: float, y: float) -> str | None:
        target_bars = [tb for w in chart.workloads for tb in chart.bars if tb.workload == w]
        k = kb.row_at(plot, y, 0.4)
        if k is None or k >= len(target_bars):
            return None
        tb = target_bars[k]
        lines = [f"<b>{tb.variant}</b> on <b>{tb.workload}</b>: {tb.status}", tb.label]
        for metric, status, measured, target in tb.checks:
            label, unit, _ = measure = TARGET_METRICS[metric]
            value = "no data" if measured is None else f"{significant(measured, 4, grouped=True)} {unit}"
            lines.append(
                f"{label} p{significant(tb.percentile, 6)}: {value} vs {measure.bound} "
                f"{significant(target, 4, grouped=True)} {unit} ({status})"
            )
        return "<br>".join(lines)
