"""Speculative decoding: tokens per verify step (accepted length) and the acceptance at each draft
position."""

from __future__ import annotations

import pyqtgraph as pg
from PySide6 import QtCore

from workbench.charts.acceptance import AcceptanceChart, DraftPositionChart
from workbench.charts.base import OKABE_ITO
from workbench.formatting import count, fixed, spaced_percent, times
from workbench.gui.chartkinds import base as kb

__all__ = ["AcceptanceKind", "DraftPositionKind"]


@kb.renderer
class AcceptanceKind(kb.ChartKind[AcceptanceChart]):
    """Bars per variant: the share of verify steps that yielded 1, 2, … tokens."""

    data = AcceptanceChart

    def build(self, widget: pg.GraphicsLayoutWidget, chart: AcceptanceChart) -> None:
        plot = kb.new_plot(widget, grid=(False, True), bottom=chart.x_axis, left=chart.y_axis)
        colours = chart.colours
        variants = list(chart.counts)
        entries = []
        lengths = sorted({k for c in chart.counts.values() for k in c})
        width = 0.8 / max(len(variants), 1)
        top = 0.0
        for i, variant in enumerate(variants):
            shares = chart.shares(variant)
            xs = [k - 0.4 + width * (i + 0.5) for k in shares]
            colour = colours.get(variant, OKABE_ITO[-1])
            mean = chart.mean_length(variant)
            bars = pg.BarGraphItem(
                x=xs,
                height=list(shares.values()),
                width=width * 0.92,
                brush=colour,
                pen=pg.mkPen("#333333", width=0.8),
            )
            plot.addItem(bars)
            entries.append((colour, f"{variant}: mean {fixed(mean, 2)} tokens per step" if mean else variant))
            for x, share in zip(xs, shares.values(), strict=True):
                kb.add_text(plot, x, share, count(share), kb.FOREGROUND, (0.5, 1.0), px=kb.FONT_PX - 1)
                top = max(top, share)
        plot.getAxis("bottom").setTicks([[(k, str(k)) for k in lengths], []])
        plot.setXRange(min(lengths, default=1) - 0.6, max(lengths, default=1) + 0.6, padding=0)
        plot.setYRange(0, top * 1.12 or 1, padding=0)
        kb.legend(widget, entries, per_line=3)

    def describe(self, chart: AcceptanceChart, plot: pg.PlotItem, x: float, y: float) -> str | None:
        variants = list(chart.counts)
        if not variants:
            return None
        length = round(x)
        width = 0.8 / len(variants)
        i = int((x - (length - 0.4)) // width)
        if not 0 <= i < len(variants):
            return None
        share = chart.shares(variants[i]).get(length)
        if share is None or not 0 <= y <= share * 1.05 + 1:
            return None
        steps = chart.counts[variants[i]][length]
        return f"<b>{variants[i]}</b><br>{length} token(s) per verify step: {spaced_percent(share / 100)} of steps ({steps})"


#: a dash pattern per workload of the draft-position chart (the colour is the variant's)
_DASHES = (
    QtCore.Qt.PenStyle.SolidLine,
    QtCore.Qt.PenStyle.DashLine,
    QtCore.Qt.PenStyle.DotLine,
    QtCore.Qt.PenStyle.DashDotLine,
    QtCore.Qt.PenStyle.DashDotDotLine,
)
_SYMBOLS = ("o", "s", "t", "d", "+")


@kb.renderer
class DraftPositionKind(kb.ChartKind[DraftPositionChart]):
    """A line per speculative variant × workload: the acceptance at each draft position."""

    data = DraftPositionChart

    def build(self, widget: pg.GraphicsLayoutWidget, chart: DraftPositionChart) -> None:
        plot = kb.new_plot(widget, grid=(False, True), bottom=chart.x_axis, left=chart.y_axis)
        colours = chart.colours
        style = {w: i % len(_DASHES) for i, w in enumerate(chart.workloads)}
        entries = []
        for s in chart.series:
            colour = colours.get(s.variant, OKABE_ITO[-1])
            i = style.get(s.workload, 0)
            kb.line(
                plot,
                list(s.positions),
                list(s.rates),
                pen=pg.mkPen(colour, width=2.2, style=_DASHES[i]),
                symbol=_SYMBOLS[i],
                symbolSize=8,
                symbolBrush=colour,
                symbolPen=pg.mkPen(colour),
            )
            figures = []
            if s.acceptance is not None:
                figures.append(f"accepted {spaced_percent(s.acceptance / 100)}")
            if s.needed is not None:  # in % (the chart's axis); "> 100 %" where no acceptance reaches it
                figures.append(f"needed {spaced_percent(s.needed / 100)}")
            # decode and end to end: drafting can pay on decode and lose the whole request (its prefill)
            speedups = [
                f"{label} {times(value)}"
                for label, value in (("decode", s.speedup_decode), ("e2e", s.speedup_e2e))
                if value is not None
            ]
            if speedups:
                figures.append(" · ".join(speedups))
            dash = ("—", "– –", "···", "–·", "–··")[i]
            text = f"{s.variant} · {s.workload} ({dash})" + (f": {', '.join(figures)}" if figures else "")
            entries.append((colour, text, _SYMBOLS[i]))
        longest = max((p for s in chart.series for p in s.positions), default=1)
        plot.getAxis("bottom").setTicks([[(k, str(k)) for k in range(1, longest + 1)], []])
        plot.setXRange(0.6, longest + 0.4, padding=0)
        plot.setYRange(0, 105, padding=0)
        kb.legend(widget, entries, per_line=2)  # each entry with its workload's marker

    def describe(self, chart: DraftPositionChart, plot: pg.PlotItem, x: float, y: float) -> str | None:
        position = round(x)
        rows = [
            (s, s.rates[s.positions.index(position)], s.reached[s.positions.index(position)])
            for s in chart.series
            if position in s.positions
        ]
        if not rows or abs(x - position) > 0.3 or not -5 <= y <= 105:
            return None
        lines = [f"<b>draft position {position}</b>"]
        lines += [
            f"{s.variant} on {s.workload}: {spaced_percent(rate / 100)} accepted (of {n} steps)"
            for s, rate, n in rows
        ]
        return "<br>".join(lines)
