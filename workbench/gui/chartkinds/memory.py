"""Memory: each variant's weights and peak memory."""

from __future__ import annotations

import pyqtgraph as pg

from workbench.charts.base import OKABE_ITO, lighten
from workbench.charts.memory import MemoryChart, memory_groups
from workbench.formatting import fmt
from workbench.gui.chartkinds import base as kb

__all__ = ["MemoryKind"]


@kb.renderer
class MemoryKind(kb.ChartKind[MemoryChart]):
    """A bar per variant: light the weights, full the peak."""

    data = MemoryChart

    def size(self, chart: MemoryChart) -> tuple[int, int]:
        return kb.WIDTH, 170 + 40 * len(chart.bars)

    def build(self, widget: pg.GraphicsLayoutWidget, chart: MemoryChart) -> None:
        plot = kb.new_plot(widget, grid=(True, False), bottom=chart.x_axis)
        colours = chart.colours
        groups = memory_groups(chart.bars)
        placed = kb.grouped_rows(plot, groups, gap=0)
        y_of = {
            name: y
            for (_, names), ys in zip(groups, placed, strict=True)
            for name, y in zip(names, ys, strict=True)
        }
        longest = max((b.peak_mb for b in chart.bars), default=1.0) or 1.0
        edge = pg.mkPen("#333333", width=0.8)
        for b in chart.bars:
            y = y_of[b.variant]
            colour = colours.get(b.variant, OKABE_ITO[-1])
            weights = min(b.weights_mb or 0.0, b.peak_mb)
            plot.addItem(
                pg.BarGraphItem(x0=[0], y=[y], height=0.62, width=[weights], brush=lighten(colour), pen=edge)
            )
            plot.addItem(
                pg.BarGraphItem(
                    x0=[weights], y=[y], height=0.62, width=[b.peak_mb - weights], brush=colour, pen=edge
                )
            )
            label = f"peak {fmt(b.peak_mb, 0)} MB ({b.label})" + (
                f" · weights {fmt(b.weights_mb, 0)} MB" if b.weights_mb else ""
            )
            kb.add_text(plot, b.peak_mb + 0.01 * longest, y, label, kb.FOREGROUND, (0, 0.5))
        plot.setXRange(0, longest * 1.45, padding=0)

    def describe(self, chart: MemoryChart, plot: pg.PlotItem, x: float, y: float) -> str | None:
        k = kb.row_at(plot, y, 0.31)
        by_name = {b.variant: b for b in chart.bars}
        ordered = [by_name[name] for _, names in memory_groups(chart.bars) for name in names]
        if k is None or k >= len(ordered) or not 0 <= x <= ordered[k].peak_mb:
            return None
        b = ordered[k]
        weights = f"<br>weights {fmt(b.weights_mb, 0)} MB" if b.weights_mb else ""
        return f"<b>{b.variant}</b><br>peak {fmt(b.peak_mb, 0)} MB ({b.label}){weights}"
