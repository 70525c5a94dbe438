"""Speed-ups with their confidence intervals: against the baseline variant, or (two runs compared) each
variant's change from one run to the other, drawn alike."""

from __future__ import annotations

import numpy as np
import pyqtgraph as pg
from PySide6 import QtCore

from workbench.charts.base import OKABE_ITO
from workbench.charts.before_after import BeforeAfterChart
from workbench.charts.speedup import SpeedupChart
from workbench.formatting import interval_ratio, times
from workbench.gui.chartkinds import base as kb

__all__ = ["BeforeAfterKind", "SpeedupKind"]


@kb.renderer
class SpeedupKind(kb.ChartKind[SpeedupChart]):
    """One row per variant × workload: the e2e speed-up, its CI whiskers, the line at 1."""

    data = SpeedupChart

    def size(self, chart: SpeedupChart) -> tuple[int, int]:
        rows = len({(p.workload, p.variant) for p in chart.points if p.metric == "e2e"}) + len(
            chart.workloads
        )
        return kb.WIDTH, 150 + 34 * rows

    def build(self, widget: pg.GraphicsLayoutWidget, chart: SpeedupChart) -> None:
        plot = kb.new_plot(widget, grid=(True, False), bottom=chart.x_axis)
        colours = chart.colours
        e2e = [p for p in chart.points if p.metric == "e2e"]
        groups = [
            (w, [p.variant for p in e2e if p.workload == w])
            for w in chart.workloads
            if any(p.workload == w for p in e2e)
        ]
        lows = [min(p.lo if p.lo is not None else p.value, 1.0) for p in e2e]
        highs = [max(p.hi if p.hi is not None else p.value, 1.0) for p in e2e]
        left, right = min(lows, default=0.5), max(highs, default=2.0)
        span = max(right - left, 0.2)
        x_min, x_max = max(0.0, left - 0.08 * span), right + 0.55 * span
        rows = kb.grouped_rows(plot, groups, x=x_min)
        # rows the x = 1 line must not cross: the workloads' headers (at the left edge) and the points
        # whose label starts left of 1 (a point below 1, its label to its right)
        blocked = [ys[0] - 1 for ys in rows if ys]
        for (workload, _), ys in zip(groups, rows, strict=True):
            points = [p for p in e2e if p.workload == workload]
            for p, y in zip(points, ys, strict=True):
                colour = colours.get(p.variant, OKABE_ITO[-1])
                if p.lo is not None and p.hi is not None:
                    plot.addItem(
                        pg.ErrorBarItem(
                            x=np.array([p.value]),
                            y=np.array([y]),
                            left=np.array([p.value - p.lo]),
                            right=np.array([p.hi - p.value]),
                            beam=0.25,
                            pen=pg.mkPen(colour, width=2),
                        )
                    )
                kb.line(
                    plot,
                    [p.value],
                    [y],
                    pen=None,
                    symbol="o",
                    symbolSize=13,
                    symbolPen=pg.mkPen(colour, width=2),
                    symbolBrush=colour if p.significant else kb.BACKGROUND,
                )
                if p.lo is not None and p.hi is not None:
                    verdict = ("faster" if p.value > 1 else "slower") if p.significant else "not significant"
                    label = f"{interval_ratio(p.value, p.lo, p.hi)} · {verdict}"
                else:  # one trial per prompt: no interval, so nothing is known to be faster or slower
                    label = f"{times(p.value)} · no interval"
                end = max(p.hi if p.hi is not None else p.value, p.value)
                kb.add_text(plot, end + 0.02 * span, y, label, kb.FOREGROUND, (0, 0.5))
                if end + 0.02 * span < 1.0:
                    blocked.append(y)
        # x = 1, dashed, broken where a label or a header sits on it
        dash = pg.mkPen("#555555", width=1.2, style=QtCore.Qt.PenStyle.DashLine)
        top, bottom = -0.7, (rows[-1][-1] if rows and rows[-1] else 0.0) + 0.7
        for a, b in _gaps(top, bottom, sorted(blocked), half=0.5):
            kb.line(plot, [1.0, 1.0], [a, b], pen=dash)
        plot.setXRange(x_min, x_max, padding=0)

    def describe(self, chart: SpeedupChart, plot: pg.PlotItem, x: float, y: float) -> str | None:
        e2e = [p for w in chart.workloads for p in chart.points if p.metric == "e2e" and p.workload == w]
        k = kb.row_at(plot, y)
        if k is None or k >= len(e2e):
            return None
        p = e2e[k]
        lines = [f"<b>{p.variant}</b> on <b>{p.workload}</b> vs {chart.baseline}"]
        for q in chart.points:
            if q.variant == p.variant and q.workload == p.workload:
                sig = "" if q.significant else " (not significant)" if q.lo is not None else ""
                lines.append(f"{q.metric} speed-up: {interval_ratio(q.value, q.lo, q.hi)}{sig}")
        return "<br>".join(lines)


def _gaps(top: float, bottom: float, blocked: list[float], half: float) -> list[tuple[float, float]]:
    """The stretches of [top, bottom] outside ``blocked[i] ± half`` (``blocked`` sorted)."""
    out, y = [], top
    for b in blocked:
        if b - half > y:
            out.append((y, b - half))
        y = max(y, b + half)
    if bottom > y:
        out.append((y, bottom))
    return out


@kb.renderer
class BeforeAfterKind(SpeedupKind):
    """Two runs compared: RUN_B over RUN_A per variant, drawn as the speed-ups (the same rows and
    whiskers)."""

    data = BeforeAfterChart
