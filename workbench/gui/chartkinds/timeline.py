"""Per-token timelines: tokens against time for one representative prompt, one line per variant."""

from __future__ import annotations

import pyqtgraph as pg

from workbench.charts.base import OKABE_ITO, Axis
from workbench.charts.timeline import TimelineChart
from workbench.formatting import chart_value, ms_text
from workbench.gui.chartkinds.base import ChartKind, legend, line, new_plot, renderer, time_unit

__all__ = ["TimelineKind"]


@renderer
class TimelineKind(ChartKind[TimelineChart]):
    data = TimelineChart

    def build(self, widget: pg.GraphicsLayoutWidget, chart: TimelineChart) -> None:
        div, unit = time_unit(max((s.t_ms[-1] for s in chart.series), default=1.0))
        plot = new_plot(widget, grid=(True, True), bottom=Axis(chart.x_axis.label, unit), left=chart.y_axis)
        plot.getViewBox().setMouseEnabled(x=True, y=True)
        colours = chart.colours
        entries = []
        for s in chart.series:
            # a step function: the count jumps when a step delivers its tokens
            xs, ys = [s.t_ms[0] / div], [s.tokens[0]]
            for t, n in zip(s.t_ms[1:], s.tokens[1:], strict=True):
                xs += [t / div, t / div]
                ys += [ys[-1], n]
            colour = colours.get(s.variant, OKABE_ITO[-1])
            line(plot, xs, ys, pen=pg.mkPen(colour, width=2.5))
            if len(s.t_ms) > 1:  # the first token: where prefill ends
                line(
                    plot,
                    [s.t_ms[1] / div],
                    [s.tokens[1]],
                    pen=None,
                    symbol="o",
                    symbolSize=8,
                    symbolBrush=colour,
                    symbolPen=pg.mkPen(colour),
                )
                entries.append(
                    (
                        colour,
                        f"{s.variant}: first token {chart_value(s.t_ms[1] / div)} {unit}, "
                        f"done {chart_value(s.t_ms[-1] / div)} {unit}",
                    )
                )
        plot.setLimits(xMin=0, yMin=0)
        legend(widget, entries, per_line=2, marker="o")

    def describe(self, chart: TimelineChart, plot: pg.PlotItem, x: float, y: float) -> str | None:
        lines = []
        for s in chart.series:
            done = [n for t, n in zip(s.t_ms, s.tokens, strict=True) if t <= x]
            if s.t_ms and x <= s.t_ms[-1] * 1.05:
                lines.append(f"{s.variant}: {done[-1] if done else 0} tokens")
        if not lines or x < 0:
            return None
        return f"<b>at {ms_text(x)}</b> ({chart.workload}/{chart.prompt_id})<br>" + "<br>".join(lines)
