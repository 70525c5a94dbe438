"""What every chart kind shares: the :class:`ChartKind` base class, the style (colours, fonts, the
default width) and the drawing and hover helpers the kinds are built from.

A kind draws with pyqtgraph into a ``pg.GraphicsLayoutWidget`` that :func:`workbench.gui.charts.fill`
has cleared and titled; the caption (the chart's ``notes``) is added after it. The read-out finds what
is under the mouse from the chart's data, not from pixels: a bar's row is found by its position among
the rows of the plot (:func:`row_at`: row k is the k-th variant × workload of the chart's data, in
drawing order).
"""

from __future__ import annotations

import html
from abc import ABC, abstractmethod
from collections.abc import Sequence
from typing import Any, ClassVar, Generic, TypeVar

import numpy as np
import pyqtgraph as pg
from PySide6 import QtGui

from workbench.charts.base import Axis, Chart

__all__ = [
    "BACKGROUND",
    "FONT_PX",
    "FOREGROUND",
    "GLYPHS",
    "LABEL_PX",
    "TITLE_PX",
    "WIDTH",
    "ChartKind",
    "add_text",
    "axis_label",
    "font",
    "grouped_rows",
    "legend",
    "line",
    "new_plot",
    "qcolour",
    "row_at",
    "text_colour_on",
    "time_unit",
]

BACKGROUND = "#ffffff"
FOREGROUND = "#222222"
FONT_PX = 13  # tick labels, value labels
LABEL_PX = 14  # axis titles
TITLE_PX = 16
WIDTH = 1000  # default logical width of an exported chart (px; PNG is scale x this)

C = TypeVar("C", bound=Chart)


class ChartKind(ABC, Generic[C]):
    """One kind of chart, on screen and in exported files alike: how it is drawn (:meth:`build`), the
    size that fits its labels (:meth:`size`) and what the mouse reads off it (:meth:`describe`).

    ``data`` names the headless data classes (:mod:`workbench.charts`) it draws, matched by exact type;
    ``tab`` is the window's tab that shows them (:data:`workbench.gui.chartview.CHART_TABS`), None for
    charts the window does not show. A kind is registered in
    :data:`workbench.gui.chartkinds.CHART_KINDS`.
    """

    data: ClassVar[tuple[type[Chart], ...]] = ()
    tab: ClassVar[str | None] = None

    @abstractmethod
    def build(self, widget: pg.GraphicsLayoutWidget, chart: C) -> None:
        """Draw ``chart`` into ``widget`` (cleared, its title row added): plots, labels, a legend row."""

    def size(self, chart: C) -> tuple[int, int]:
        """Logical size (px) that fits ``chart`` without overlapping labels."""
        return WIDTH, 580

    def describe(self, chart: C, plot: pg.PlotItem, x: float, y: float) -> str | None:
        """The read-out (rich text) for the point (x, y) in ``plot``'s data coordinates, or None
        (nothing there)."""
        return None

    def min_height(self, chart: C) -> int | None:
        """The least height (px) the window may give ``chart`` before its tab scrolls instead; None:
        the window's default minimum."""
        return None


# -- style ---------------------------------------------------------------------------------------------


def qcolour(hex_colour: str, alpha: int = 255) -> QtGui.QColor:
    colour = QtGui.QColor(hex_colour)
    colour.setAlpha(alpha)
    return colour


def font(px: int, bold: bool = False) -> QtGui.QFont:
    out = QtGui.QFont()
    out.setPixelSize(px)
    out.setBold(bold)
    return out


def text_colour_on(hex_colour: str) -> str:
    """Black or white, whichever contrasts more with ``hex_colour`` (WCAG relative luminance)."""

    def linear(c: float) -> float:
        return c / 12.92 if c <= 0.04045 else ((c + 0.055) / 1.055) ** 2.4

    r, g, b = (linear(int(hex_colour[i : i + 2], 16) / 255) for i in (1, 3, 5))
    lum = 0.2126 * r + 0.7152 * g + 0.0722 * b
    return "#000000" if (lum + 0.05) / 0.05 >= 1.05 / (lum + 0.05) else "#ffffff"


def time_unit(longest_ms: float) -> tuple[float, str]:
    """Milliseconds, or seconds once times reach 10 s (axis ticks stay short)."""
    return (1000.0, "s") if longest_ms >= 10_000 else (1.0, "ms")


# -- drawing -------------------------------------------------------------------------------------------


def new_plot(
    widget: pg.GraphicsLayoutWidget,
    row: int | None = None,
    col: int | None = None,
    *,
    grid: tuple[bool, bool] | None = None,
    bottom: Axis | None = None,
    left: Axis | None = None,
) -> pg.PlotItem:
    """A plot panel in the chart's style: no menu or buttons, horizontal panning only, no SI prefixes;
    ``grid``: (x, y) grid lines; ``bottom``, ``left``: the axes' titles."""
    plot = widget.addPlot(row=row, col=col)
    plot.setMenuEnabled(False)
    plot.hideButtons()
    plot.getViewBox().setMouseEnabled(x=True, y=False)
    for name in ("left", "bottom", "right", "top"):
        axis = plot.getAxis(name)
        axis.setPen(pg.mkPen(FOREGROUND))
        axis.setTextPen(pg.mkPen(FOREGROUND))
        axis.setTickFont(font(FONT_PX))
        axis.enableAutoSIPrefix(False)
    if grid is not None:
        plot.showGrid(x=grid[0], y=grid[1], alpha=0.15)
    if bottom is not None:
        axis_label(plot, "bottom", bottom)
    if left is not None:
        axis_label(plot, "left", left)
    return plot


def axis_label(plot: pg.PlotItem, side: str, axis: Axis) -> None:
    plot.setLabel(side, axis.text, **{"font-size": f"{LABEL_PX}px", "color": FOREGROUND})


def add_text(
    plot: pg.PlotItem, x: float, y: float, text: str, colour: str, anchor: tuple[float, float], **kw: Any
) -> pg.TextItem | None:
    """A text at (x, y) above the bars (``px``, ``bold``: its font); none for an empty text."""
    if not text:
        return None
    item = pg.TextItem(text=text, color=colour, anchor=anchor)
    item.setFont(font(kw.get("px", FONT_PX), kw.get("bold", False)))
    item.setPos(x, y)
    item.setZValue(10)  # above bars
    plot.addItem(item)
    return item


def line(plot: pg.PlotItem, *args: Any, **kwargs: Any) -> pg.PlotDataItem:
    """``plot.plot`` with antialiased lines (smooth in PNG and SVG alike)."""
    return plot.plot(*args, antialias=True, **kwargs)


def grouped_rows(
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
            add_text(plot, x, y, header, FOREGROUND, (0, 0.5), bold=True)  # at the left edge of the x range
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


#: the legend's glyph of each pyqtgraph marker (a legend shows the marker the chart draws)
GLYPHS = {
    "o": "&#9679;",
    "hollow": "&#9675;",  # a hollow circle: the earlier of two runs
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


def legend(
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
        glyph = GLYPHS[entry[2] if len(entry) == 3 else marker]
        items.append(f'<span style="color:{colour}">{glyph}</span>&nbsp;{html.escape(text)}')
    lines = ["&nbsp;&nbsp;&nbsp;&nbsp;".join(items[i : i + per_line]) for i in range(0, len(items), per_line)]
    widget.nextRow()
    widget.addLabel("<br>".join(lines), colspan=2, size=f"{FONT_PX + 1}px", color=FOREGROUND)


# -- hover ---------------------------------------------------------------------------------------------


def _row_centres(plot: pg.PlotItem) -> list[float]:
    """The y of each row of a horizontal chart, top to bottom (bars' and points' centres)."""
    ys: set[float] = set()
    for item in plot.items:
        if isinstance(item, pg.BarGraphItem):
            ys.update(float(v) for v in np.atleast_1d(item.opts.get("y")) if v is not None)
        elif isinstance(item, pg.PlotDataItem):
            _, y = item.getData()
            if y is not None and len(y) == 1:  # single points (the speed-up markers)
                ys.add(float(y[0]))
    return sorted(ys)


def row_at(plot: pg.PlotItem, y: float, half: float = 0.45) -> int | None:
    """The index of the row of a horizontal chart within ``half`` of ``y``, or None."""
    for k, row in enumerate(_row_centres(plot)):
        if abs(y - row) <= half:
            return k
    return None
