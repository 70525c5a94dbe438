"""A conversation workload's turns: TTFT against the turn, one line per variant with CI bands and a
fitted line, over a panel of the KV cache each variant's session held at the end of the turn (same x
axis, same colours). The x axis has a tick per turn with the history's tokens under it. Two runs
compared: the earlier run's lines dashed with hollow markers under the later run's."""

from __future__ import annotations

from typing import ClassVar

import pyqtgraph as pg
from PySide6 import QtCore

from workbench.charts.base import OKABE_ITO, Chart
from workbench.charts.conversation import ConversationChart
from workbench.charts.sweeps import SweepChart
from workbench.formatting import fmt
from workbench.gui.chartkinds.base import BACKGROUND, WIDTH, legend, line, new_plot, renderer
from workbench.gui.chartkinds.sweeps import SweepKind

__all__ = ["ConversationKind"]

#: the panels' heights (logical px): readable on screen and in an exported file
TTFT_PX = 380
KV_PX = 190
#: the left axes' common width: the two panels' x axes line up, their titles never overlap
LEFT_AXIS_PX = 78


@renderer
class ConversationKind(SweepKind):
    """TTFT turn by turn (:class:`~workbench.charts.conversation.ConversationChart`) in its own tab."""

    data: ClassVar[type[Chart]] = ConversationChart

    def size(self, chart: SweepChart) -> tuple[int, int]:
        kv = isinstance(chart, ConversationChart) and bool(chart.kv_cache)
        legend_px = 26 * ((len(chart.series) + 1) // 2)
        return WIDTH, 150 + TTFT_PX + (KV_PX if kv else 0) + legend_px + 24 * len(chart.notes)

    def min_height(self, chart: SweepChart) -> int | None:
        """Both panels at a readable height (the tab scrolls below it): never a sliver of TTFT."""
        height = self.size(chart)[1]
        return (
            height - (TTFT_PX + KV_PX) // 4
            if isinstance(chart, ConversationChart) and chart.kv_cache
            else height - TTFT_PX // 4
        )

    def build(self, widget: pg.GraphicsLayoutWidget, chart: SweepChart) -> None:
        assert isinstance(chart, ConversationChart)
        kv_panel = bool(chart.kv_cache)
        plot = new_plot(
            widget, grid=(True, True), left=chart.y_axis, bottom=None if kv_panel else chart.x_axis
        )
        entries = self.draw(plot, chart)
        plot.setMinimumHeight(TTFT_PX * 0.75)
        panels = [plot]
        if kv_panel:
            widget.nextRow()
            kv = new_plot(widget, grid=(True, True), bottom=chart.x_axis, left=chart.kv_axis)
            kv.setXLink(plot)
            kv.setMinimumHeight(KV_PX * 0.75)
            colours = chart.colours
            top = 0.0
            for s in chart.kv_cache:
                colour = colours.get(s.variant, OKABE_ITO[-1])
                top = max(top, *s.mib)
                dashed = s.variant in chart.before
                pen = pg.mkPen(
                    colour,
                    width=2,
                    style=QtCore.Qt.PenStyle.DashLine if dashed else QtCore.Qt.PenStyle.SolidLine,
                )
                line(
                    kv,
                    list(s.x),
                    list(s.mib),
                    pen=pen,
                    symbol="s",
                    symbolSize=6,
                    symbolBrush=BACKGROUND if dashed else colour,
                    symbolPen=pg.mkPen(colour),
                )
            kv.setYRange(0, top * 1.12 or 1, padding=0)
            panels.append(kv)
            plot.getAxis("bottom").setStyle(showValues=False)  # the KV panel's axis carries the turns
            for item, stretch in ((plot, 2), (kv, 1)):  # TTFT twice the KV panel's height
                row = next(r for r, cols in widget.ci.rows.items() if item in cols.values())
                widget.ci.layout.setRowStretchFactor(row, stretch)
        ticks = chart.turn_labels
        for p in panels:
            p.getAxis("left").setWidth(LEFT_AXIS_PX)
            p.getAxis("bottom").setTicks([ticks, []])
        if ticks:
            plot.setXRange(ticks[0][0] - 0.4, ticks[-1][0] + 0.4, padding=0)
        panels[-1].getAxis("bottom").setHeight(52 if chart.history else 36)
        legend(widget, entries, per_line=2, marker="o")

    def hollow(self, chart: SweepChart, series: str) -> bool:
        return isinstance(chart, ConversationChart) and series in chart.before

    def describe(self, chart: SweepChart, plot: pg.PlotItem, x: float, y: float) -> str | None:
        text = super().describe(chart, plot, x, y)
        if text is None or not isinstance(chart, ConversationChart):
            return text
        nearest = min({v for s in chart.series for v in s.x}, key=lambda v: abs(v - x))
        history = dict(chart.history).get(int(nearest))
        if history is not None:
            text += f"<br><i>history</i>: {fmt(history, 0)} tokens"
        cells = [
            f"{s.variant}: {fmt(s.mib[s.x.index(nearest)], 1)} {chart.kv_axis.unit} "
            f"({fmt(s.tokens[s.x.index(nearest)], 0)} tokens)"
            for s in chart.kv_cache
            if nearest in s.x
        ]
        cells += [f"{name}: not reported" for name in chart.kv_unknown]
        return text + ("<br><i>KV held</i><br>" + "<br>".join(cells) if cells else "")
