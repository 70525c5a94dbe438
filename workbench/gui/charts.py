"""The charts, drawn with pyqtgraph — one module for the GUI and for headless export.

API (the data comes from :mod:`workbench.charts`, which needs no Qt)::

    from workbench.analysis.run import analyze_run
    from workbench.charts import run_charts
    from workbench.gui import charts

    analysis = analyze_run(store, run_id)                   # headless: stats, phases, roofline...
    data = run_charts(analysis)[0]     # every chart the run has data for; [0] is the headline
    # (or one at a time: workbench.charts.headline.headline_chart(summaries, labels), speedup_chart(analysis),
    #  timeline_charts(analysis), sweep_charts, acceptance_chart, memory_chart, roofline_chart)
    widget = charts.build(data)        # a pg.GraphicsLayoutWidget, ready to put in a layout (with its notes)
    widget.setMinimumSize(*charts.preferred_size(data))     # the size that fits its labels
    charts.fill(widget, other_data)    # redraw the same widget with new data (same or another chart)
    charts.save_png(data, "headline.png", scale=2)          # offscreen, 2x pixels, no caption
    charts.save_svg(data, "headline.svg")
    png_bytes = charts.png_bytes(data)                      # for embedding (HTML report: its figcaption)
    charts.png_bytes(data, notes=True)                      # with the caption drawn under the chart
    charts.qcolour("#0072B2"); charts.variant_qcolours(data.variants)
    charts.plot_items(widget)          # its pg.PlotItem panels (to link axes, add a crosshair...)

``build`` and ``fill`` only draw; they never show a window. ``chart.name`` is a stable id (the export
file stem: ``headline``, ``speedup``, ``timeline-<workload>``, ``ttft-vs-input``...), ``chart.rows()``
its data (what the CSV export holds), ``chart.title`` and ``chart.notes`` its caption. The window draws
the caption under the chart; the exported files (``png_bytes``, ``svg_bytes``, ``save_png``,
``save_svg``) leave it to the document that shows them (the report's figcaption) unless ``notes=True``
(the GUI's copy and export of one chart, which no document captions). Colours come from
:func:`workbench.charts.base.variant_colours` (Okabe–Ito, by run order), so a variant has the same colour
in every chart and in the report's tables. Every axis carries its unit; bars carry their values.

Export renders the very widget the GUI shows: PNG through pyqtgraph's ``ImageExporter`` (which
re-renders the scene at the requested width, so text and lines stay sharp at 2x), SVG by rendering the
scene into a ``QSvgGenerator``. pyqtgraph 0.14's own ``SVGExporter`` cannot be used on Qt 6.12: it
parses Qt's SVG path data assuming ``x,y`` pairs only and fails on the ``Z`` (close path) commands Qt
now writes (pyqtgraph#3495), and even with that patched it misplaces plot items against their axes.
The scene rendered straight into ``QSvgGenerator`` with the widget's logical DPI as resolution gives
an SVG that matches the PNG (``tests/test_charts.py`` renders both and compares them).
"""

from __future__ import annotations

import contextlib
import gc
import html
import os
import sys
import textwrap
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pyqtgraph as pg
from PySide6 import QtCore, QtGui, QtSvg, QtWidgets

from workbench import charts as cd

__all__ = [
    "build",
    "ensure_app",
    "fill",
    "plot_items",
    "png_bytes",
    "preferred_size",
    "qcolour",
    "render",
    "save_png",
    "save_svg",
    "svg_bytes",
    "variant_qcolours",
]

BACKGROUND = "#ffffff"
FOREGROUND = "#222222"
GRID = "#d9d9d9"
FONT_PX = 13  # tick labels, value labels
LABEL_PX = 14  # axis titles
TITLE_PX = 16
WIDTH = 1000  # default logical width of an exported chart (px; PNG is scale x this)


def qcolour(hex_colour: str, alpha: int = 255) -> QtGui.QColor:
    colour = QtGui.QColor(hex_colour)
    colour.setAlpha(alpha)
    return colour


def variant_qcolours(variants: tuple[str, ...] | list[str]) -> dict[str, QtGui.QColor]:
    return {name: qcolour(c) for name, c in cd.variant_colours(variants).items()}


def _font(px: int, bold: bool = False) -> QtGui.QFont:
    font = QtGui.QFont()
    font.setPixelSize(px)
    font.setBold(bold)
    return font


def _text_colour_on(hex_colour: str) -> str:
    """Black or white, whichever contrasts more with ``hex_colour`` (WCAG relative luminance)."""

    def linear(c: float) -> float:
        return c / 12.92 if c <= 0.04045 else ((c + 0.055) / 1.055) ** 2.4

    r, g, b = (linear(int(hex_colour[i : i + 2], 16) / 255) for i in (1, 3, 5))
    lum = 0.2126 * r + 0.7152 * g + 0.0722 * b
    return "#000000" if (lum + 0.05) / 0.05 >= 1.05 / (lum + 0.05) else "#ffffff"


def _fmt_ms(value: float) -> str:
    if value >= 100:
        return f"{value:,.0f}"
    if value >= 10:
        return f"{value:.1f}"
    return f"{value:.2f}"


# -- widgets -------------------------------------------------------------------------------------------


def build(
    chart: cd.Chart, parent: QtWidgets.QWidget | None = None, *, notes: bool = True
) -> pg.GraphicsLayoutWidget:
    """A new widget showing ``chart`` (``notes``: its caption under it)."""
    widget = pg.GraphicsLayoutWidget(parent=parent)
    widget.setBackground(BACKGROUND)
    fill(widget, chart, notes=notes)
    return widget


def fill(widget: pg.GraphicsLayoutWidget, chart: cd.Chart, *, notes: bool = True) -> None:
    """Clear ``widget`` and draw ``chart`` into it (``notes``: its caption under it)."""
    builder = _BUILDERS.get(type(chart))
    if builder is None:
        raise TypeError(f"no chart builder for {type(chart).__name__}")
    widget.clear()
    widget.ci.setContentsMargins(10, 10, 20, 10)
    if chart.title:
        widget.addLabel(chart.title, row=0, col=0, colspan=2, size=f"{TITLE_PX}px", color=FOREGROUND)
        widget.nextRow()
    builder(widget, chart)
    if notes and chart.notes:
        lines = [html.escape(line) for note in chart.notes for line in textwrap.wrap(note, 125)]
        widget.nextRow()
        widget.addLabel("<br>".join(lines), colspan=2, size=f"{FONT_PX}px", color="#555555")


def plot_items(widget: pg.GraphicsLayoutWidget) -> list[pg.PlotItem]:
    """The plot panels of a chart widget, left to right, top to bottom (e.g. to link axes)."""
    return [item for item in widget.ci.items if isinstance(item, pg.PlotItem)]


def preferred_size(chart: cd.Chart) -> tuple[int, int]:
    """Logical size (px) that fits ``chart`` without overlapping labels."""
    if isinstance(chart, cd.HeadlineChart):
        rows = sum(len(g.bars) + 1 for g in chart.groups)
        return WIDTH, 150 + 34 * rows
    if isinstance(chart, cd.SpeedupChart):
        rows = len({(p.workload, p.variant) for p in chart.points if p.metric == "e2e"}) + len(
            chart.workloads
        )
        return WIDTH, 150 + 34 * rows
    if isinstance(chart, cd.RooflineChart):
        return WIDTH, 150 + 34 * (len(chart.rows_) + len(chart.workloads))
    if isinstance(chart, cd.TargetsChart):
        return WIDTH, 170 + 34 * (len(chart.bars) + len(chart.workloads))
    if isinstance(chart, cd.MemoryChart):
        return WIDTH, 170 + 40 * len(chart.bars)
    if isinstance(chart, cd.QualityChart):
        return WIDTH, 560
    return WIDTH, 580


def _plot(widget: pg.GraphicsLayoutWidget, row: int | None = None, col: int | None = None) -> pg.PlotItem:
    plot = widget.addPlot(row=row, col=col)
    plot.setMenuEnabled(False)
    plot.hideButtons()
    plot.getViewBox().setMouseEnabled(x=True, y=False)
    for name in ("left", "bottom", "right", "top"):
        axis = plot.getAxis(name)
        axis.setPen(pg.mkPen(FOREGROUND))
        axis.setTextPen(pg.mkPen(FOREGROUND))
        axis.setTickFont(_font(FONT_PX))
        axis.enableAutoSIPrefix(False)
    return plot


def _axis_label(plot: pg.PlotItem, side: str, axis: cd.Axis) -> None:
    plot.setLabel(side, axis.text, **{"font-size": f"{LABEL_PX}px", "color": FOREGROUND})


def _text(
    plot: pg.PlotItem, x: float, y: float, text: str, colour: str, anchor: tuple[float, float], **kw: Any
) -> pg.TextItem | None:
    if not text:
        return None
    item = pg.TextItem(text=text, color=colour, anchor=anchor)
    item.setFont(_font(kw.get("px", FONT_PX), kw.get("bold", False)))
    item.setPos(x, y)
    item.setZValue(10)  # above bars
    plot.addItem(item)
    return item


def _grouped_rows(
    plot: pg.PlotItem, groups: list[tuple[str, list[str]]], *, gap: float = 1.4, x: float = 0.0
) -> list[list[float]]:
    """Lay out horizontal-bar rows top to bottom: a bold header row per group, then one row per label
    (ticks on the left axis). Returns the y of each row, per group."""
    plot.invertY(True)
    ticks: list[tuple[float, str]] = []
    positions: list[list[float]] = []
    y = 0.0
    for header, labels in groups:
        if header:
            _text(plot, x, y, header, FOREGROUND, (0, 0.5), bold=True)  # at the left edge of the x range
        else:
            y -= 1  # no header row
        ys = []
        for label in labels:
            y += 1
            ys.append(y)
            ticks.append((y, label))
        positions.append(ys)
        y += gap
    plot.getAxis("left").setTicks([ticks, []])
    plot.setYRange(-0.7, y - gap + 0.7, padding=0)
    return positions


def _time_unit(longest_ms: float) -> tuple[float, str]:
    """Milliseconds, or seconds once times reach 10 s (axis ticks stay short)."""
    return (1000.0, "s") if longest_ms >= 10_000 else (1.0, "ms")


def _headline(widget: pg.GraphicsLayoutWidget, chart: cd.HeadlineChart) -> None:
    plot = _plot(widget)
    plot.showGrid(x=True, y=False, alpha=0.15)
    longest_ms = max((b.total_ms for g in chart.groups for b in g.bars), default=1.0) or 1.0
    div, unit = _time_unit(longest_ms)
    _axis_label(plot, "bottom", cd.Axis(chart.x_axis.label, unit))
    longest = longest_ms / div
    colours = chart.colours
    groups = [
        (g.workload + (f"  —  {g.label}" if g.label else ""), [b.variant for b in g.bars])
        for g in chart.groups
    ]
    edge = pg.mkPen("#333333", width=0.8)
    for group, ys in zip(chart.groups, _grouped_rows(plot, groups), strict=True):
        dark = [colours.get(b.variant, cd.OKABE_ITO[-1]) for b in group.bars]
        light = [cd.lighten(c) for c in dark]
        prefill = [b.prefill_ms / div for b in group.bars]
        decode = [b.decode_ms / div for b in group.bars]
        pens = [edge] * len(ys)
        plot.addItem(
            pg.BarGraphItem(x0=[0.0] * len(ys), y=ys, height=0.66, width=prefill, brushes=light, pens=pens)
        )
        plot.addItem(pg.BarGraphItem(x0=prefill, y=ys, height=0.66, width=decode, brushes=dark, pens=pens))
        for bar, y, p, d, dc, lc in zip(group.bars, ys, prefill, decode, dark, light, strict=True):
            # values on the bars: inside a segment when it is wide enough, the total after the bar
            for x0, width, fill_colour in ((0.0, p, lc), (p, d, dc)):
                if width >= 0.09 * longest:
                    _text(plot, x0 + width / 2, y, _fmt_ms(width), _text_colour_on(fill_colour), (0.5, 0.5))
            label = f"{_fmt_ms(p + d)} {unit} · prefill {bar.prefill_share:.0%}"
            _text(plot, p + d + 0.01 * longest, y, label, FOREGROUND, (0, 0.5))
    plot.setXRange(0, longest * 1.32, padding=0)
    plot.setLimits(xMin=0)


def _line(plot: pg.PlotItem, *args: Any, **kwargs: Any) -> pg.PlotDataItem:
    """``plot.plot`` with antialiased lines (smooth in PNG and SVG alike)."""
    return plot.plot(*args, antialias=True, **kwargs)


#: the legend's glyph of each pyqtgraph marker (a legend shows the marker the chart draws)
_GLYPHS = {
    "o": "&#9679;",
    "s": "&#9632;",
    "t": "&#9660;",
    "d": "&#9670;",
    "+": "&#10010;",
    "star": "&#9733;",
    "p": "&#11039;",
    "h": "&#11042;",
    "bar": "&#9632;",
    "line": "&#9473;&#9473;",
}


def _legend(
    widget: pg.GraphicsLayoutWidget,
    entries: Sequence[tuple[str, str] | tuple[str, str, str]],
    per_line: int = 4,
    marker: str = "bar",
) -> None:
    """A legend row under the plot: a swatch in the variant's colour — the chart's own marker (``marker``,
    or per entry a third item: a pyqtgraph symbol, ``bar`` or ``line``) — and a text per entry. Outside
    the plot it never hides data, and it scales with the export (pyqtgraph's in-plot legend stays 1x
    in a 2x PNG)."""
    if not entries:
        return
    items = []
    for entry in entries:
        colour, text = entry[0], entry[1]
        glyph = _GLYPHS[entry[2] if len(entry) == 3 else marker]
        items.append(f'<span style="color:{colour}">{glyph}</span>&nbsp;{html.escape(text)}')
    lines = ["&nbsp;&nbsp;&nbsp;&nbsp;".join(items[i : i + per_line]) for i in range(0, len(items), per_line)]
    widget.nextRow()
    widget.addLabel("<br>".join(lines), colspan=2, size=f"{FONT_PX + 1}px", color=FOREGROUND)


def _timeline(widget: pg.GraphicsLayoutWidget, chart: cd.TimelineChart) -> None:
    plot = _plot(widget)
    plot.getViewBox().setMouseEnabled(x=True, y=True)
    plot.showGrid(x=True, y=True, alpha=0.15)
    div, unit = _time_unit(max((s.t_ms[-1] for s in chart.series), default=1.0))
    _axis_label(plot, "bottom", cd.Axis(chart.x_axis.label, unit))
    _axis_label(plot, "left", chart.y_axis)
    colours = chart.colours
    entries = []
    for s in chart.series:
        # a step function: the count jumps when a step delivers its tokens
        xs, ys = [s.t_ms[0] / div], [s.tokens[0]]
        for t, n in zip(s.t_ms[1:], s.tokens[1:], strict=True):
            xs += [t / div, t / div]
            ys += [ys[-1], n]
        colour = colours.get(s.variant, cd.OKABE_ITO[-1])
        _line(plot, xs, ys, pen=pg.mkPen(colour, width=2.5))
        if len(s.t_ms) > 1:  # the first token: where prefill ends
            _line(
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
                    f"{s.variant}: first token {_fmt_ms(s.t_ms[1] / div)} {unit}, done {_fmt_ms(s.t_ms[-1] / div)} {unit}",
                )
            )
    plot.setLimits(xMin=0, yMin=0)
    _legend(widget, entries, per_line=2, marker="o")


def _sweep(widget: pg.GraphicsLayoutWidget, chart: cd.SweepChart) -> None:
    plot = _plot(widget)
    plot.getViewBox().setMouseEnabled(x=True, y=True)
    plot.showGrid(x=True, y=True, alpha=0.15)
    _axis_label(plot, "bottom", chart.x_axis)
    _axis_label(plot, "left", chart.y_axis)
    colours = chart.colours
    entries = []
    top = 0.0
    for s in chart.series:
        colour = colours.get(s.variant, cd.OKABE_ITO[-1])
        lo = [v if v is not None else y for v, y in zip(s.lo, s.y, strict=True)]
        hi = [v if v is not None else y for v, y in zip(s.hi, s.y, strict=True)]
        top = max(top, *hi)
        low = pg.PlotCurveItem(list(s.x), lo, pen=pg.mkPen(None), antialias=True)
        high = pg.PlotCurveItem(list(s.x), hi, pen=pg.mkPen(None), antialias=True)
        plot.addItem(low)
        plot.addItem(high)
        plot.addItem(pg.FillBetweenItem(low, high, brush=qcolour(colour, 60)))
        _line(
            plot,
            list(s.x),
            list(s.y),
            pen=pg.mkPen(colour, width=2),
            symbol="o",
            symbolSize=7,
            symbolBrush=colour,
            symbolPen=pg.mkPen(colour),
        )
        if s.slope is not None and s.intercept is not None:
            x0, x1 = min(s.x), max(s.x)
            _line(
                plot,
                [x0, x1],
                [s.intercept + s.slope * x0, s.intercept + s.slope * x1],
                pen=pg.mkPen(colour, width=1.5, style=QtCore.Qt.PenStyle.DashLine),
            )
        slope = f": fit {s.slope:+.3g} {chart.slope_unit}" if s.slope is not None else ""
        entries.append((colour, f"{s.variant}{slope}"))
    plot.setLimits(xMin=0)
    plot.setYRange(0, top * 1.08 or 1, padding=0)
    _legend(widget, entries, per_line=2, marker="o")


def _speedup(widget: pg.GraphicsLayoutWidget, chart: cd.SpeedupChart) -> None:
    plot = _plot(widget)
    plot.showGrid(x=True, y=False, alpha=0.15)
    _axis_label(plot, "bottom", chart.x_axis)
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
    rows = _grouped_rows(plot, groups, x=x_min)
    # rows the x = 1 line must not cross: the workloads' headers (at the left edge) and the points
    # whose label starts left of 1 (a point below 1, its label to its right)
    blocked = [ys[0] - 1 for ys in rows if ys]
    for (workload, _), ys in zip(groups, rows, strict=True):
        points = [p for p in e2e if p.workload == workload]
        for p, y in zip(points, ys, strict=True):
            colour = colours.get(p.variant, cd.OKABE_ITO[-1])
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
            _line(
                plot,
                [p.value],
                [y],
                pen=None,
                symbol="o",
                symbolSize=13,
                symbolPen=pg.mkPen(colour, width=2),
                symbolBrush=colour if p.significant else BACKGROUND,
            )
            if p.lo is not None and p.hi is not None:
                verdict = ("faster" if p.value > 1 else "slower") if p.significant else "not significant"
                label = f"{p.value:.2f}x [{p.lo:.2f}–{p.hi:.2f}] · {verdict}"
            else:  # one trial per prompt: no interval, so nothing is known to be faster or slower
                label = f"{p.value:.2f}x · no interval"
            end = max(p.hi if p.hi is not None else p.value, p.value)
            _text(plot, end + 0.02 * span, y, label, FOREGROUND, (0, 0.5))
            if end + 0.02 * span < 1.0:
                blocked.append(y)
    # x = 1, dashed, broken where a label or a header sits on it
    dash = pg.mkPen("#555555", width=1.2, style=QtCore.Qt.PenStyle.DashLine)
    top, bottom = -0.7, (rows[-1][-1] if rows and rows[-1] else 0.0) + 0.7
    for a, b in _gaps(top, bottom, sorted(blocked), half=0.5):
        _line(plot, [1.0, 1.0], [a, b], pen=dash)
    plot.setXRange(x_min, x_max, padding=0)


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


def _acceptance(widget: pg.GraphicsLayoutWidget, chart: cd.AcceptanceChart) -> None:
    plot = _plot(widget)
    plot.showGrid(x=False, y=True, alpha=0.15)
    _axis_label(plot, "bottom", chart.x_axis)
    _axis_label(plot, "left", chart.y_axis)
    colours = chart.colours
    variants = list(chart.counts)
    entries = []
    lengths = sorted({k for c in chart.counts.values() for k in c})
    width = 0.8 / max(len(variants), 1)
    top = 0.0
    for i, variant in enumerate(variants):
        shares = chart.shares(variant)
        xs = [k - 0.4 + width * (i + 0.5) for k in shares]
        colour = colours.get(variant, cd.OKABE_ITO[-1])
        mean = chart.mean_length(variant)
        bars = pg.BarGraphItem(
            x=xs,
            height=list(shares.values()),
            width=width * 0.92,
            brush=colour,
            pen=pg.mkPen("#333333", width=0.8),
        )
        plot.addItem(bars)
        entries.append((colour, f"{variant}: mean {mean:.2f} tokens per step" if mean else variant))
        for x, share in zip(xs, shares.values(), strict=True):
            _text(plot, x, share, f"{share:.0f}", FOREGROUND, (0.5, 1.0), px=FONT_PX - 1)
            top = max(top, share)
    plot.getAxis("bottom").setTicks([[(k, str(k)) for k in lengths], []])
    plot.setXRange(min(lengths, default=1) - 0.6, max(lengths, default=1) + 0.6, padding=0)
    plot.setYRange(0, top * 1.12 or 1, padding=0)
    _legend(widget, entries, per_line=3)


#: a dash pattern per workload of the draft-position chart (the colour is the variant's)
_DASHES = (
    QtCore.Qt.PenStyle.SolidLine,
    QtCore.Qt.PenStyle.DashLine,
    QtCore.Qt.PenStyle.DotLine,
    QtCore.Qt.PenStyle.DashDotLine,
    QtCore.Qt.PenStyle.DashDotDotLine,
)
_SYMBOLS = ("o", "s", "t", "d", "+")


def _draft_positions(widget: pg.GraphicsLayoutWidget, chart: cd.DraftPositionChart) -> None:
    plot = _plot(widget)
    plot.showGrid(x=False, y=True, alpha=0.15)
    _axis_label(plot, "bottom", chart.x_axis)
    _axis_label(plot, "left", chart.y_axis)
    colours = chart.colours
    style = {w: i % len(_DASHES) for i, w in enumerate(chart.workloads)}
    entries = []
    for s in chart.series:
        colour = colours.get(s.variant, cd.OKABE_ITO[-1])
        i = style.get(s.workload, 0)
        _line(
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
            figures.append(f"accepted {s.acceptance:.0f} %")
        if s.needed is not None:
            figures.append(f"needed {s.needed:.0f} %" if s.needed <= 100 else "needed > 100 %")
        # decode and end to end: drafting can pay on decode and lose the whole request (its prefill)
        speedups = [
            f"{label} {value:.2f}x"
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
    _legend(widget, entries, per_line=2)  # each entry with its workload's marker


def _memory(widget: pg.GraphicsLayoutWidget, chart: cd.MemoryChart) -> None:
    plot = _plot(widget)
    plot.showGrid(x=True, y=False, alpha=0.15)
    _axis_label(plot, "bottom", chart.x_axis)
    colours = chart.colours
    ys = _grouped_rows(plot, [("", [b.variant for b in chart.bars])], gap=0)[0]
    longest = max((b.peak_mb for b in chart.bars), default=1.0) or 1.0
    edge = pg.mkPen("#333333", width=0.8)
    for b, y in zip(chart.bars, ys, strict=True):
        colour = colours.get(b.variant, cd.OKABE_ITO[-1])
        weights = min(b.weights_mb or 0.0, b.peak_mb)
        plot.addItem(
            pg.BarGraphItem(x0=[0], y=[y], height=0.62, width=[weights], brush=cd.lighten(colour), pen=edge)
        )
        plot.addItem(
            pg.BarGraphItem(
                x0=[weights], y=[y], height=0.62, width=[b.peak_mb - weights], brush=colour, pen=edge
            )
        )
        label = f"peak {b.peak_mb:,.0f} MB" + (f" · weights {b.weights_mb:,.0f} MB" if b.weights_mb else "")
        _text(plot, b.peak_mb + 0.01 * longest, y, label, FOREGROUND, (0, 0.5))
    plot.setXRange(0, longest * 1.45, padding=0)


def _roofline(widget: pg.GraphicsLayoutWidget, chart: cd.RooflineChart) -> None:
    plot = _plot(widget)
    plot.showGrid(x=True, y=False, alpha=0.15)
    _axis_label(plot, "bottom", chart.x_axis)
    colours = chart.colours
    groups = [(w, [r.variant for r in chart.rows_ if r.workload == w]) for w in chart.workloads]
    longest = max((max(r.limit_tokens_per_s, r.decode_tokens_per_s) for r in chart.rows_), default=1.0) or 1.0
    for (workload, _), ys in zip(groups, _grouped_rows(plot, groups), strict=True):
        for r, y in zip([r for r in chart.rows_ if r.workload == workload], ys, strict=True):
            colour = colours.get(r.variant, cd.OKABE_ITO[-1])
            plot.addItem(
                pg.BarGraphItem(
                    x0=[0],
                    y=[y],
                    height=0.62,
                    width=[r.decode_tokens_per_s],
                    brush=colour,
                    pen=pg.mkPen("#333333", width=0.8),
                )
            )
            plot.addItem(
                pg.BarGraphItem(
                    x0=[0],
                    y=[y],
                    height=0.8,
                    width=[r.limit_tokens_per_s],
                    brush=pg.mkBrush(None),
                    pen=pg.mkPen(colour, width=2, style=QtCore.Qt.PenStyle.DashLine),
                )
            )
            end = max(r.limit_tokens_per_s, r.decode_tokens_per_s)
            label = (
                f"{_fmt_ms(r.decode_tokens_per_s)} tok/s · {r.fraction:.0%} of the "
                f"{_fmt_ms(r.limit_tokens_per_s)} tok/s limit"
            )
            _text(plot, end + 0.01 * longest, y, label, FOREGROUND, (0, 0.5))
    plot.setXRange(0, longest * 1.5, padding=0)


def _targets(widget: pg.GraphicsLayoutWidget, chart: cd.TargetsChart) -> None:
    plot = _plot(widget)
    plot.showGrid(x=True, y=False, alpha=0.15)
    _axis_label(plot, "bottom", chart.x_axis)
    colours = chart.colours
    groups = [(w, [b.variant for b in chart.bars if b.workload == w]) for w in chart.workloads]
    dash = pg.mkPen("#555555", width=1.2, style=QtCore.Qt.PenStyle.DashLine)
    for (workload, _), ys in zip(groups, _grouped_rows(plot, groups), strict=True):
        bars = [b for b in chart.bars if b.workload == workload]
        for b, y in zip(bars, ys, strict=True):
            colour = colours.get(b.variant, cd.OKABE_ITO[-1])
            share = 100 * (b.goodput or 0.0)
            plot.addItem(
                pg.BarGraphItem(
                    x0=[0],
                    y=[y],
                    height=0.62,
                    width=[share],
                    brush=colour if b.status == "met" else cd.lighten(colour),
                    pen=pg.mkPen(colour if b.status != "met" else "#333333", width=1.2),
                )
            )
            # the share each target asks for, across this row
            _line(plot, [b.percentile, b.percentile], [y - 0.42, y + 0.42], pen=dash)
            _text(plot, max(share, b.percentile) + 1.5, y, b.label, FOREGROUND, (0, 0.5))
    plot.setXRange(0, 175, padding=0)
    plot.getAxis("bottom").setTicks([[(v, f"{v}") for v in range(0, 101, 20)], []])


_WORKLOAD_SYMBOLS = ("o", "s", "t", "d", "star", "p", "h")


def _quality(widget: pg.GraphicsLayoutWidget, chart: cd.QualityChart) -> None:
    """Two panels (e2e, decode): speed-up against log10 KLD; KLD 0 (the baseline, lossless variants)
    on a column at the left edge. Marker shape = workload, colour = variant; the Pareto front of each
    workload filled and joined by a dashed line."""
    scored = [p.kld for p in chart.points if p.kld > 0]
    floor = np.floor(np.log10(min(scored))) - 1 if scored else -6.0
    top = np.ceil(np.log10(max(scored))) if scored else -1.0

    def x_of(kld: float) -> float:
        return float(np.log10(kld)) if kld > 0 else float(floor)

    colours = chart.colours
    symbols = {w: _WORKLOAD_SYMBOLS[i % len(_WORKLOAD_SYMBOLS)] for i, w in enumerate(chart.workloads)}
    ticks = [(float(floor), "0")] + [(float(e), f"1e{int(e)}") for e in np.arange(floor + 1, top + 1)]
    for col, metric in enumerate(("e2e", "decode")):
        plot = _plot(widget, row=1, col=col)
        plot.getViewBox().setMouseEnabled(x=False, y=False)
        plot.showGrid(x=True, y=True, alpha=0.15)
        _axis_label(plot, "bottom", chart.x_axis if col == 0 else cd.Axis("KLD (log scale)"))
        _axis_label(plot, "left", cd.Axis(f"{metric} speed-up (> 1 is faster)"))
        plot.setTitle(f"{metric} speed-up vs KLD", size=f"{LABEL_PX}px", color=FOREGROUND)
        plot.getAxis("bottom").setTicks([ticks, []])
        dash = pg.mkPen("#555555", width=1.0, style=QtCore.Qt.PenStyle.DashLine)
        plot.addItem(pg.InfiniteLine(pos=1.0, angle=0, pen=dash))
        points = [p for p in chart.points if p.metric == metric]
        for workload in chart.workloads:
            front = sorted((p for p in points if p.workload == workload and p.pareto), key=lambda p: p.kld)
            if len(front) > 1:
                _line(plot, [x_of(p.kld) for p in front], [p.speedup for p in front], pen=dash)
        highs = [1.0]
        for p in points:
            colour = colours.get(p.variant, cd.OKABE_ITO[-1])
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
            _line(
                plot,
                [x],
                [p.speedup],
                pen=None,
                symbol=symbols[p.workload],
                symbolSize=12,
                symbolPen=pg.mkPen(colour, width=2),
                symbolBrush=colour if p.pareto else BACKGROUND,
            )
            if p.status == "scored":
                _text(plot, x + 0.08, p.speedup, f"{p.speedup:.2f}x", FOREGROUND, (0, 0.5), px=FONT_PX - 1)
        plot.setXRange(float(floor) - 0.5, float(top) + 0.7, padding=0)
        plot.setYRange(0, max(highs) * 1.12, padding=0)
    shapes = {
        "o": "&#9679;",
        "s": "&#9632;",
        "t": "&#9660;",
        "d": "&#9670;",
        "star": "&#9733;",
        "p": "&#11039;",
        "h": "&#11042;",
    }
    variants = [  # a colour bar, not a marker: the marker's shape is the workload
        f'<span style="color:{colours.get(v, cd.OKABE_ITO[-1])}">{_GLYPHS["line"]}</span>&nbsp;{html.escape(v)}'
        for v in dict.fromkeys(p.variant for p in chart.points)
    ]
    workloads = [f"{shapes[symbols[w]]}&nbsp;{html.escape(w)}" for w in chart.workloads]
    gap = "&nbsp;&nbsp;&nbsp;&nbsp;"
    widget.nextRow()
    widget.addLabel(
        f"variant: {gap.join(variants)}<br>workload (marker): {gap.join(workloads)}",
        colspan=2,
        size=f"{FONT_PX + 1}px",
        color=FOREGROUND,
    )


_BUILDERS: dict[type, Callable[[pg.GraphicsLayoutWidget, Any], None]] = {
    cd.HeadlineChart: _headline,
    cd.TimelineChart: _timeline,
    cd.SweepChart: _sweep,
    cd.ParameterSweepChart: _sweep,
    cd.SpeedupChart: _speedup,
    cd.BeforeAfterChart: _speedup,  # RUN_B over RUN_A per variant: the same rows and whiskers
    cd.AcceptanceChart: _acceptance,
    cd.DraftPositionChart: _draft_positions,
    cd.MemoryChart: _memory,
    cd.RooflineChart: _roofline,
    cd.TargetsChart: _targets,
    cd.QualityChart: _quality,
}


# -- headless rendering ------------------------------------------------------------------------------


def ensure_app() -> QtWidgets.QApplication:
    """The running QApplication, or a new one — offscreen when there is no display (CLI export on a
    server, CI)."""
    app = QtWidgets.QApplication.instance()
    if app is None:
        if sys.platform.startswith("linux") and not (
            os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY")
        ):
            os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
        app = QtWidgets.QApplication(sys.argv[:1])
    return app  # type: ignore[return-value]


@contextlib.contextmanager
def render(
    chart: cd.Chart, size: tuple[int, int] | None = None, *, notes: bool = False
) -> Iterator[pg.GraphicsLayoutWidget]:
    """``with render(chart) as widget:`` — ``chart`` in a laid-out widget that is never shown on
    screen (for export; ``notes``: with its caption drawn under it). The widget is destroyed on leaving
    the block: pyqtgraph items left to the interpreter's final garbage collection crash PySide6 at exit."""
    app = ensure_app()
    widget = build(chart, notes=notes)
    try:
        widget.setAttribute(QtCore.Qt.WidgetAttribute.WA_DontShowOnScreen)
        widget.resize(*(size or preferred_size(chart)))
        widget.show()  # lays the scene out at that size; nothing appears on a screen
        app.processEvents()
        yield widget
    finally:
        widget.close()
        del widget
        gc.collect()


def _png_image(widget: pg.GraphicsLayoutWidget, scale: float) -> QtGui.QImage:
    from pyqtgraph.exporters import ImageExporter

    exporter = ImageExporter(widget.scene())
    exporter.parameters()["width"] = round(widget.width() * scale)
    exporter.parameters()["background"] = qcolour(BACKGROUND)
    image = exporter.export(toBytes=True)
    image.setDotsPerMeterX(round(image.dotsPerMeterX() * scale))  # prints at the logical size
    image.setDotsPerMeterY(round(image.dotsPerMeterY() * scale))
    return image


def png_bytes(
    chart: cd.Chart, *, scale: float = 2.0, size: tuple[int, int] | None = None, notes: bool = False
) -> bytes:
    with render(chart, size, notes=notes) as widget:
        image = _png_image(widget, scale)
    buffer = QtCore.QBuffer()
    buffer.open(QtCore.QIODevice.OpenModeFlag.WriteOnly)
    image.save(buffer, "PNG")  # type: ignore[call-overload]  # the stubs say bytes; PySide6 takes str
    return bytes(buffer.data().data())


def save_png(
    chart: cd.Chart,
    path: str | os.PathLike[str],
    *,
    scale: float = 2.0,
    size: tuple[int, int] | None = None,
    notes: bool = False,
) -> Path:
    path = Path(path)
    path.write_bytes(png_bytes(chart, scale=scale, size=size, notes=notes))
    return path


def svg_bytes(chart: cd.Chart, *, size: tuple[int, int] | None = None, notes: bool = False) -> bytes:
    with render(chart, size, notes=notes) as widget:
        scene = widget.scene()
        source = widget.viewRect()  # what the widget shows (the scene may extend beyond it)
        buffer = QtCore.QBuffer()
        buffer.open(QtCore.QIODevice.OpenModeFlag.WriteOnly)
        generator = QtSvg.QSvgGenerator()
        generator.setOutputDevice(buffer)
        generator.setSize(QtCore.QSize(round(source.width()), round(source.height())))
        generator.setViewBox(QtCore.QRectF(0, 0, source.width(), source.height()))
        generator.setResolution(widget.logicalDpiX())  # else axes are scaled by 72/96 against the data
        generator.setTitle(chart.title or chart.key)
        painter = QtGui.QPainter(generator)
        try:
            painter.setRenderHint(QtGui.QPainter.RenderHint.Antialiasing)
            painter.setRenderHint(QtGui.QPainter.RenderHint.TextAntialiasing)
            painter.fillRect(QtCore.QRectF(0, 0, source.width(), source.height()), qcolour(BACKGROUND))
            scene.render(painter, QtCore.QRectF(0, 0, source.width(), source.height()), source)
        finally:
            painter.end()
    return bytes(buffer.data().data())


def save_svg(
    chart: cd.Chart, path: str | os.PathLike[str], *, size: tuple[int, int] | None = None, notes: bool = False
) -> Path:
    path = Path(path)
    path.write_bytes(svg_bytes(chart, size=size, notes=notes))
    return path
