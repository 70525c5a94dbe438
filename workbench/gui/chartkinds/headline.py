"""The headline chart: prefill and decode time stacked per variant, grouped by workload."""

from __future__ import annotations

import pyqtgraph as pg

from workbench.charts.base import OKABE_ITO, Axis, lighten
from workbench.charts.headline import HeadlineChart
from workbench.formatting import chart_value, ms_text, percent
from workbench.gui.chartkinds import base as kb

__all__ = ["HeadlineKind"]


@kb.renderer
class HeadlineKind(kb.ChartKind[HeadlineChart]):
    data = HeadlineChart

    def size(self, chart: HeadlineChart) -> tuple[int, int]:
        rows = sum(len(g.bars) + 1 for g in chart.groups)
        return kb.WIDTH, 150 + 34 * rows

    def build(self, widget: pg.GraphicsLayoutWidget, chart: HeadlineChart) -> None:
        longest_ms = max((b.total_ms for g in chart.groups for b in g.bars), default=1.0) or 1.0
        div, unit = kb.time_unit(longest_ms)
        plot = kb.new_plot(widget, grid=(True, False), bottom=Axis(chart.x_axis.label, unit))
        longest = longest_ms / div
        colours = chart.colours
        groups = [
            (g.workload + (f"  —  {g.label}" if g.label else ""), [b.variant for b in g.bars])
            for g in chart.groups
        ]
        edge = pg.mkPen("#333333", width=0.8)
        for group, ys in zip(chart.groups, kb.grouped_rows(plot, groups), strict=True):
            dark = [colours.get(b.variant, OKABE_ITO[-1]) for b in group.bars]
            light = [lighten(c) for c in dark]
            prefill = [b.prefill_ms / div for b in group.bars]
            decode = [b.decode_ms / div for b in group.bars]
            pens = [edge] * len(ys)
            plot.addItem(
                pg.BarGraphItem(
                    x0=[0.0] * len(ys), y=ys, height=0.66, width=prefill, brushes=light, pens=pens
                )
            )
            plot.addItem(
                pg.BarGraphItem(x0=prefill, y=ys, height=0.66, width=decode, brushes=dark, pens=pens)
            )
            squeezed = [
                (y, b.compress_ms / div, c)
                for y, b, c in zip(ys, group.bars, light, strict=True)
                if b.compress_ms
            ]
            if squeezed:  # prompt compression: the first part of the prefill, a lighter shade still
                plot.addItem(
                    pg.BarGraphItem(
                        x0=[0.0] * len(squeezed),
                        y=[y for y, _, _ in squeezed],
                        height=0.66,
                        width=[w for _, w, _ in squeezed],
                        brushes=[lighten(c) for _, _, c in squeezed],
                        pens=[edge] * len(squeezed),
                    )
                )
            for bar, y, p, d, dc, lc in zip(group.bars, ys, prefill, decode, dark, light, strict=True):
                # values on the bars: inside a segment when it is wide enough, the total after the bar
                for x0, width, fill_colour in ((0.0, p, lc), (p, d, dc)):
                    if width >= 0.09 * longest:
                        kb.add_text(
                            plot,
                            x0 + width / 2,
                            y,
                            chart_value(width),
                            kb.text_colour_on(fill_colour),
                            (0.5, 0.5),
                        )
                label = f"{chart_value(p + d)} {unit} · prefill {percent(bar.prefill_share)}"
                kb.add_text(plot, p + d + 0.01 * longest, y, label, kb.FOREGROUND, (0, 0.5))
        plot.setXRange(0, longest * 1.32, padding=0)
        plot.setLimits(xMin=0)

    def describe(self, chart: HeadlineChart, plot: pg.PlotItem, x: float, y: float) -> str | None:
        bars = [(g, b) for g in chart.groups for b in g.bars]
        k = kb.row_at(plot, y, 0.33)
        if k is None or k >= len(bars) or not 0 <= x <= bars[k][1].total_ms:
            return None
        group, bar = bars[k]
        part = "prefill" if x <= bar.prefill_ms else "decode"
        squeezed = (
            [f"of which compressing the prompt: {ms_text(bar.compress_ms)}"]
            if bar.compress_ms is not None
            else []
        )
        lines = [
            f"<b>{bar.variant}</b> on <b>{group.workload}</b> ({bar.n} trials, medians)",
            ("<u>" if part == "prefill" else "")
            + f"prefill (TTFT): {ms_text(bar.prefill_ms)}"
            + ("</u>" if part == "prefill" else ""),
            *squeezed,
            ("<u>" if part == "decode" else "")
            + f"decode (after the first token): {ms_text(bar.decode_ms)}"
            + ("</u>" if part == "decode" else ""),
            f"total {ms_text(bar.total_ms)}, prefill {percent(bar.prefill_share)}",
        ]
        if group.label:
            lines.append(group.label)
        return "<br>".join(lines)
