"""The decode roofline: measured decode tok/s against the memory-bandwidth limit."""

from __future__ import annotations

import pyqtgraph as pg
from PySide6 import QtCore

from workbench.charts.base import OKABE_ITO
from workbench.charts.roofline import RooflineChart
from workbench.formatting import chart_value, fmt, percent
from workbench.gui.chartkinds import base as kb

__all__ = ["RooflineKind"]


@kb.renderer
class RooflineKind(kb.ChartKind[RooflineChart]):
    """A bar per variant × workload (its decode tok/s) in a dashed outline (the bandwidth limit)."""

    data = RooflineChart

    def size(self, chart: RooflineChart) -> tuple[int, int]:
        return kb.WIDTH, 150 + 34 * (len(chart.rows_) + len(chart.workloads))

    def build(self, widget: pg.GraphicsLayoutWidget, chart: RooflineChart) -> None:
        plot = kb.new_plot(widget, grid=(True, False), bottom=chart.x_axis)
        colours = chart.colours
        groups = [(w, [r.variant for r in chart.rows_ if r.workload == w]) for w in chart.workloads]
        longest = (
            max((max(r.limit_tokens_per_s, r.decode_tokens_per_s) for r in chart.rows_), default=1.0) or 1.0
        )
        for (workload, _), ys in zip(groups, kb.grouped_rows(plot, groups), strict=True):
            for r, y in zip([r for r in chart.rows_ if r.workload == workload], ys, strict=True):
                colour = colours.get(r.variant, OKABE_ITO[-1])
                # the measured bar, then the limit as a dashed outline around it
                for height, width, brush, pen in (
                    (0.62, r.decode_tokens_per_s, colour, pg.mkPen("#333333", width=0.8)),
                    (
                        0.8,
                        r.limit_tokens_per_s,
                        pg.mkBrush(None),
                        pg.mkPen(colour, width=2, style=QtCore.Qt.PenStyle.DashLine),
                    ),
                ):
                    plot.addItem(
                        pg.BarGraphItem(x0=[0], y=[y], height=height, width=[width], brush=brush, pen=pen)
                    )
                end = max(r.limit_tokens_per_s, r.decode_tokens_per_s)
                label = (
                    f"{chart_value(r.decode_tokens_per_s)} tok/s · {percent(r.fraction)} of the "
                    f"{chart_value(r.limit_tokens_per_s)} tok/s limit"
                )
                kb.add_text(plot, end + 0.01 * longest, y, label, kb.FOREGROUND, (0, 0.5))
        plot.setXRange(0, longest * 1.5, padding=0)

    def describe(self, chart: RooflineChart, plot: pg.PlotItem, x: float, y: float) -> str | None:
        rows = [r for w in chart.workloads for r in chart.rows_ if r.workload == w]
        k = kb.row_at(plot, y, 0.4)
        if k is None or k >= len(rows):
            return None
        r = rows[k]
        fraction = f" = {percent(r.fraction)} of the limit" if r.fraction is not None else ""
        limit = fmt(r.limit_tokens_per_s, 1) if r.limit_tokens_per_s else "–"
        decode = fmt(r.decode_tokens_per_s, 1) if r.decode_tokens_per_s else "–"
        bandwidth = f", {fmt(r.bandwidth_gbs, 1)} GB/s" if r.bandwidth_gbs else ""
        return (
            f"<b>{r.variant}</b> on <b>{r.workload}</b><br>decode {decode} tok/s{fraction}<br>"
            f"memory-bandwidth limit {limit} tok/s{bandwidth}"
        )
