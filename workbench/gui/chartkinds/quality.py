"""Speed against quality: each variant × workload's speed-up (e2e, decode) against its KLD from the
baseline, with CIs on both axes and the Pareto front."""

from __future__ import annotations

import html

import numpy as np
import pyqtgraph as pg
from PySide6 import QtCore

from workbench.charts.base import OKABE_ITO, Axis
from workbench.charts.quality import QualityChart
from workbench.formatting import power_of_ten, times
from workbench.gui.chartkinds import base as kb

__all__ = ["QualityKind"]

_WORKLOAD_SYMBOLS = ("o", "s", "t", "d", "star", "p", "h")


@kb.renderer
class QualityKind(kb.ChartKind[QualityChart]):
    """Two panels (e2e, decode): speed-up against log10 KLD; KLD 0 (the baseline, lossless variants)
    on a column at the left edge. Marker shape = workload, colour = variant; the Pareto front of each
    workload filled and joined by a dashed line. No read-out: the points carry their speed-ups."""

    data = QualityChart

    def size(self, chart: QualityChart) -> tuple[int, int]:
        return kb.WIDTH, 560

    def build(self, widget: pg.GraphicsLayoutWidget, chart: QualityChart) -> None:
        scored = [p.kld for p in chart.points if p.kld > 0]
        floor = float(np.floor(np.log10(min(scored))) - 1) if scored else -6.0
        top = float(np.ceil(np.log10(max(scored)))) if scored else -1.0
        symbols = {w: _WORKLOAD_SYMBOLS[i % len(_WORKLOAD_SYMBOLS)] for i, w in enumerate(chart.workloads)}
        for col, metric in enumerate(("e2e", "decode")):
            _panel(widget, chart, col, metric, (floor, top), symbols)
        # a colour bar per variant, not a marker: the marker's shape is the workload
        variants = [
            f'<span style="color:{chart.colours.get(v, OKABE_ITO[-1])}">{kb.GLYPHS["line"]}</span>&nbsp;{html.escape(v)}'
            for v in dict.fromkeys(p.variant for p in chart.points)
        ]
        workloads = [f"{kb.GLYPHS[symbols[w]]}&nbsp;{html.escape(w)}" for w in chart.workloads]
        for key, entries in (("variant:", variants), ("workload (marker):", workloads)):
            widget.nextRow()  # each key a row of its own, wrapped to the chart's width
            widget.addItem(
                kb.WrapLabel([key, *entries], px=kb.FONT_PX + 1, per_line=len(entries) + 1), colspan=2
            )


def _panel(
    widget: pg.GraphicsLayoutWidget,
    chart: QualityChart,
    col: int,
    metric: str,
    decades: tuple[float, float],
    symbols: dict[str, str],
) -> None:
    """The panel of one metric (e2e, decode) in column ``col``: x from the decade below the lowest KLD
    (where KLD 0 sits) to the decade above the highest (``decades``)."""
    floor, top = decades

    def x_of(kld: float) -> float:
        return float(np.log10(kld)) if kld > 0 else floor

    colours = chart.colours
    ticks = [(floor, "0")] + [(float(e), power_of_ten(int(e))) for e in np.arange(floor + 1, top + 1)]
    plot = kb.new_plot(
        widget,
        row=1,
        col=col,
        grid=(True, True),
        bottom=chart.x_axis if col == 0 else Axis("KLD (log scale)"),
        left=Axis(f"{metric} speed-up (> 1 is faster)"),
    )
    plot.getViewBox().setMouseEnabled(x=False, y=False)
    plot.setTitle(f"{metric} speed-up vs KLD", size=f"{kb.LABEL_PX}px", color=kb.FOREGROUND)
    plot.getAxis("bottom").setTicks([ticks, []])
    dash = pg.mkPen("#555555", width=1.0, style=QtCore.Qt.PenStyle.DashLine)
    plot.addItem(pg.InfiniteLine(pos=1.0, angle=0, pen=dash))
    points = [p for p in chart.points if p.metric == metric]
    for workload in chart.workloads:
        front = sorted((p for p in points if p.workload == workload and p.pareto), key=lambda p: p.kld)
        if len(front) > 1:
            kb.line(plot, [x_of(p.kld) for p in front], [p.speedup for p in front], pen=dash)
    highs = [1.0]
    for p in points:
        colour = colours.get(p.variant, OKABE_ITO[-1])
        x = x_of(p.kld)
        if p.lo is not None and p.hi is not None:
            plot.addItem(
                pg.ErrorBarItem(
                    x=np.array([x]),
                    y=np.array([p.speedup]),
                    top=np.array([p.hi - p.speedup]),
                    bottom=np.array([p.speedup - p.lo]),
                    beam=0.06,
                    pen=pg.mkPen(colour, width=1.5),
                )
            )
            highs.append(p.hi)
        if p.kld_lo is not None and p.kld_hi is not None and p.kld_lo > 0:
            plot.addItem(
                pg.ErrorBarItem(
                    x=np.array([x]),
                    y=np.array([p.speedup]),
                    left=np.array([x - x_of(p.kld_lo)]),
                    right=np.array([x_of(p.kld_hi) - x]),
                    beam=0.06,
                    pen=pg.mkPen(colour, width=1.5),
                )
            )
        highs.append(p.speedup)
        kb.line(
            plot,
            [x],
            [p.speedup],
            pen=None,
            symbol=symbols[p.workload],
            symbolSize=12,
            symbolPen=pg.mkPen(colour, width=2),
            symbolBrush=colour if p.pareto else kb.BACKGROUND,
        )
        if p.status == "scored":
            kb.add_text(
                plot, x + 0.08, p.speedup, times(p.speedup), kb.FOREGROUND, (0, 0.5), px=kb.FONT_PX - 1
            )
    plot.setXRange(floor - 0.5, top + 0.7, padding=0)
    plot.setYRange(0, max(highs) * 1.12, padding=0)
