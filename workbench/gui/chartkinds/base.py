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
from PySide6 import QtCore, QtGui, QtWidgets

from workbench.charts.base import Axis, Chart

__all__ = [
    "BACKGROUND",
    "FONT_PX",
    "FOREGROUND",
    "GLYPHS",
    "LABEL_PX",
    "RENDERERS",
    "TITLE_PX",
    "WIDTH",
    "ChartKind",
    "WrapLabel",
    "add_text",
    "axis_label",
    "font",
    "grouped_rows",
    "keep_labels_inside",
    "legend",
    "line",
    "new_plot",
    "qcolour",
    "renderer",
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
K = TypeVar("K", bound="type[ChartKind[Any]]")

#: the renderer of each chart kind, by kind (the data class's ``key``), as their modules registered them
RENDERERS: dict[str, ChartKind[Any]] = {}


def renderer(cls: K) -> K:
    """Class decorator: ``cls`` draws its ``data``'s kind (one renderer per kind: a second is an error)."""
    kind = cls.data.key
    if not kind:
        raise ValueError(f"{cls.__name__} draws no chart kind: set its data")
    if kind in RENDERERS and type(RENDERERS[kind]) is not cls:
        raise ValueError(
            f"chart kind {kind!r} has two renderers: {type(RENDERERS[kind]).__name__}, {cls.__name__}"
        )
    RENDERERS[kind] = cls()
    return cls


class ChartKind(ABC, Generic[C]):
    """How one kind of chart is drawn, on screen and in exported files alike: how it is drawn
    (:meth:`build`), the size that fits its labels (:meth:`size`) and what the mouse reads off it
    (:meth:`describe`).

    ``data`` is the headless data class (:mod:`workbench.charts`) it draws: its ``key`` is the kind,
    as the chart kinds' list (:mod:`workbench.charts.registry`) has it, with the tab that shows it.
    A class decorated with :func:`renderer` is registered as that kind's one renderer.
    """

    data: ClassVar[type[Chart]] = Chart

    @property
    def kind(self) -> str:
        return self.data.key

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


def keep_labels_inside(plot: pg.PlotItem) -> None:
    """Widen ``plot``'s x range, whenever its view is resized, just enough that every text on it (a
    bar's value, a group's header, a whisker's interval) ends inside the plot: a text has a width in
    pixels, not in data, so the room a kind left for it at one width is too little at a narrower one
    or with longer names; a text wider than 60 % of the plot is shortened with … to that. A range the
    kind set stays the least; an automatic one is only widened. A plot without texts is left alone."""
    view = plot.getViewBox()
    texts = {id(i): i.toPlainText() for i in plot.items if isinstance(i, pg.TextItem)}
    if not texts:
        return
    fixed = view.state["autoRange"][0] is False  # the kind set the x range
    set_low, set_high = view.viewRange()[0]
    hidden: set[int] = set()  # texts hidden here: they did not fit where they stand (restored when they do)

    def refit(*_: Any) -> None:
        width = view.sceneBoundingRect().width()
        low, high = (set_low, set_high) if fixed else view.viewRange()[0]
        need = high
        items = [i for i in plot.items if isinstance(i, pg.TextItem) and (i.isVisible() or id(i) in hidden)]
        for item in items:
            full = texts.get(id(item), item.toPlainText())
            x = float(item.pos().x())
            if x <= low:  # at the left edge (a group's header): no range makes room; shortened with …
                metrics = QtGui.QFontMetricsF(item.textItem.font())
                shown = metrics.elidedText(full, QtCore.Qt.TextElideMode.ElideRight, max(width - 12, 0))
                if shown != item.toPlainText():
                    item.setText(shown)
                continue
            # a text takes at most 60 % of its plot's width (shortened with …), so the data keep the rest
            metrics = QtGui.QFontMetricsF(item.textItem.font())
            shown = metrics.elidedText(full, QtCore.Qt.TextElideMode.ElideRight, max(0.6 * width, 0))
            if shown != item.toPlainText():
                item.setText(shown)
            right = (1 - float(item.anchor[0])) * item.boundingRect().width()  # px right of its x
            room = width - 4 - right
            if room > 0:
                need = max(need, low + (x - low) * width / room)
        if abs(need - view.viewRange()[0][1]) > 1e-9 * max(abs(need), 1.0):
            view.setXRange(low, need, padding=0)
        for item in items:  # a text that would start left of the plot (a value in too short a bar)
            x = float(item.pos().x())
            if x <= low or need <= low:
                continue
            left = (x - low) / (need - low) * width - float(item.anchor[0]) * item.boundingRect().width()
            item.setVisible(left >= -1)
            if left >= -1:
                hidden.discard(id(item))
            else:
                hidden.add(id(item))

    view.sigResized.connect(refit)
    refit()


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
    in a 2x PNG). At most ``per_line`` entries a line, and fewer where they would not fit the chart's
    width (:class:`WrapLabel`): a long entry is never cut at the canvas' edge."""
    if not entries:
        return
    items = []
    for entry in entries:
        colour, text = entry[0], entry[1]
        glyph = GLYPHS[entry[2] if len(entry) == 3 else marker]
        items.append(f'<span style="color:{colour}">{glyph}</span>&nbsp;{html.escape(text)}')
    widget.nextRow()
    widget.addItem(WrapLabel(items, px=FONT_PX + 1, per_line=per_line), colspan=2)


class WrapLabel(pg.GraphicsWidget):
    """Rich text that fits the width its layout row gives it: ``pieces`` (HTML) packed into centred
    lines — at most ``per_line`` a line, fewer where the next would pass the width — and a piece wider
    than a line wrapped at its spaces; ``per_line`` 1: a paragraph per piece. Its height follows its
    width, so a chart's title, legend and caption stay inside the canvas at every width (an exported
    file's, the app's narrower chart panel) instead of widening the layout past the canvas' edge, which
    pyqtgraph's ``LabelItem`` (one unbreakable line as its minimum width) does."""

    SEPARATOR = "&nbsp;" * 4

    def __init__(
        self,
        pieces: Sequence[str],
        *,
        px: int = FONT_PX,
        colour: str = FOREGROUND,
        per_line: int = 1,
        width: float = WIDTH - 30,
        max_width: float | None = None,
    ) -> None:
        super().__init__()
        self.pieces = list(pieces)
        self.per_line = max(per_line, 1)
        self.item = QtWidgets.QGraphicsTextItem(self)
        self.item.setDefaultTextColor(qcolour(colour))
        self.item.setFont(font(px))
        option = QtGui.QTextOption(QtCore.Qt.AlignmentFlag.AlignHCenter)
        option.setWrapMode(QtGui.QTextOption.WrapMode.WordWrap)
        self.item.document().setDefaultTextOption(option)
        self.item.document().setDocumentMargin(1)
        self._natural = [self._width_of(p) for p in [*self.pieces, self.SEPARATOR]]
        self._laid_out_at = -1.0
        self.setMinimumWidth(60)
        self.setPreferredWidth(60)  # takes the row's width, never asks for more
        if max_width is not None:
            self.setMaximumWidth(max_width)
        self.setSizePolicy(QtWidgets.QSizePolicy.Policy.Expanding, QtWidgets.QSizePolicy.Policy.Fixed)
        # the height of the lines the kind planned (per_line entries a line, nothing wrapped but at
        # max_width): what it sized the chart for; a narrower width adds to it (:attr:`extra_height`)
        planned = QtGui.QTextDocument()
        planned.setDefaultFont(self.item.font())
        planned.setDocumentMargin(1)
        planned.setTextWidth(max_width if max_width is not None else -1)
        groups = [self.pieces[i : i + self.per_line] for i in range(0, len(self.pieces), self.per_line)]
        planned.setHtml("<br>".join(self.SEPARATOR.join(group) for group in groups))
        self.planned_height = planned.size().height()
        self._lay_out(min(width, max_width or width))

    @property
    def extra_height(self) -> float:
        """The height (px) wrapping to the present width adds to the lines the kind planned."""
        return max(self.preferredHeight() - self.planned_height, 0.0)

    def _width_of(self, piece: str) -> float:
        document = QtGui.QTextDocument()
        document.setDefaultFont(self.item.font())
        document.setDocumentMargin(0)
        document.setHtml(piece)
        return document.idealWidth()

    def lines(self, width: float) -> list[str]:
        """The pieces packed into lines that fit ``width`` (px)."""
        *widths, gap = self._natural
        room = width * 0.97 - 2  # the document's margin, and rounding between measure and layout
        lines: list[list[str]] = []
        used = 0.0
        for piece, piece_width in zip(self.pieces, widths, strict=True):
            if lines and len(lines[-1]) < self.per_line and used + gap + piece_width <= room:
                lines[-1].append(piece)
                used += gap + piece_width
            else:
                lines.append([piece])
                used = piece_width
        return [self.SEPARATOR.join(line) for line in lines]

    def _lay_out(self, width: float) -> None:
        if width <= 0 or abs(width - self._laid_out_at) < 0.5:
            return
        self._laid_out_at = width
        self.item.setTextWidth(width)
        self.item.setHtml("<br>".join(self.lines(width)))
        height = self.item.boundingRect().height()
        if abs(height - self.preferredHeight()) >= 0.5:
            self.setMinimumHeight(height)
            self.setPreferredHeight(height)
            self.setMaximumHeight(height)
            self.updateGeometry()

    def toPlainText(self) -> str:
        return self.item.toPlainText()

    def resizeEvent(self, ev: Any) -> None:
        self._lay_out(self.size().width())
        self.item.setPos(0, 0)


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
