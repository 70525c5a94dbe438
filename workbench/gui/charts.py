"""The charts, drawn with pyqtgraph — one module for the GUI and for headless export.

API (the data comes from :mod:`workbench.chartdata`, which needs no Qt)::

    from workbench import chartdata
    from workbench.gui import charts

    data = chartdata.headline_chart(summaries, labels)     # or analysis.charts: every chart of a run
    widget = charts.build(data)        # a pg.GraphicsLayoutWidget, ready to put in a layout
    charts.fill(widget, other_data)    # redraw the same widget with new data (same or another chart)
    charts.save_png(data, "headline.png", scale=2)          # offscreen, 2x pixels
    charts.save_svg(data, "headline.svg")
    png_bytes = charts.png_bytes(data)                      # for embedding (HTML report)
    charts.qcolour("#0072B2"); charts.variant_qcolours(data.variants)
    charts.plot_items(widget)          # its pg.PlotItem panels (to link axes, add a crosshair...)

``build`` and ``fill`` only draw; they never show a window. Colours come from
:func:`workbench.chartdata.variant_colours` (Okabe–Ito, by run order), so a variant has the same colour
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

import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyqtgraph as pg
from PySide6 import QtCore, QtGui, QtSvg, QtWidgets

from .. import chartdata as cd

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


def build(chart: cd.Chart, parent: QtWidgets.QWidget | None = None) -> pg.GraphicsLayoutWidget:
    """A new widget showing ``chart``."""
    widget = pg.GraphicsLayoutWidget(parent=parent)
    widget.setBackground(BACKGROUND)
    fill(widget, chart)
    return widget


def fill(widget: pg.GraphicsLayoutWidget, chart: cd.Chart) -> None:
    """Clear ``widget`` and draw ``chart`` into it."""
    builder = _BUILDERS.get(type(chart))
    if builder is None:
        raise TypeError(f"no chart builder for {type(chart).__name__}")
    widget.clear()
    widget.ci.setContentsMargins(10, 10, 20, 10)
    if chart.title:
        widget.addLabel(chart.title, row=0, col=0, colspan=2, size=f"{TITLE_PX}px", color=FOREGROUND)
        widget.nextRow()
    builder(widget, chart)
    if chart.notes:
        widget.nextRow()
        widget.addLabel("<br>".join(chart.notes), colspan=2, size=f"{FONT_PX}px", color="#555555")


def plot_items(widget: pg.GraphicsLayoutWidget) -> list[pg.PlotItem]:
    """The plot panels of a chart widget, left to right, top to bottom (e.g. to link axes)."""
    return [item for item in widget.ci.items if isinstance(item, pg.PlotItem)]


def preferred_size(chart: cd.Chart) -> tuple[int, int]:
    """Logical size (px) that fits ``chart`` without overlapping labels."""
    if isinstance(chart, cd.HeadlineChart):
        rows = sum(len(g.bars) + 1 for g in chart.groups)
        return WIDTH, 150 + 34 * rows
    return WIDTH, 520


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
) -> pg.TextItem:
    item = pg.TextItem(text=text, color=colour, anchor=anchor)
    item.setFont(_font(kw.get("px", FONT_PX), kw.get("bold", False)))
    item.setPos(x, y)
    item.setZValue(10)  # above bars
    plot.addItem(item)
    return item


def _headline(widget: pg.GraphicsLayoutWidget, chart: cd.HeadlineChart) -> None:
    plot = _plot(widget)
    plot.invertY(True)  # first workload at the top
    plot.showGrid(x=True, y=False, alpha=0.15)
    _axis_label(plot, "bottom", chart.x_axis)
    colours = chart.colours
    longest = max((b.total_ms for g in chart.groups for b in g.bars), default=1.0) or 1.0
    ticks: list[tuple[float, str]] = []
    y = 0.0
    for group in chart.groups:
        header = f"{group.workload}" + (f"  —  {group.label}" if group.label else "")
        _text(plot, 0, y, header, FOREGROUND, (0, 0.5), bold=True)
        ys, prefill, decode, dark, light = [], [], [], [], []
        for bar in group.bars:
            y += 1
            ys.append(y)
            prefill.append(bar.prefill_ms)
            decode.append(bar.decode_ms)
            colour = colours.get(bar.variant, cd.OKABE_ITO[-1])
            dark.append(colour)
            light.append(cd.lighten(colour))
            ticks.append((y, bar.variant))
            # values on the bars: inside a segment when it is wide enough, the total after the bar
            for x0, width, fill_colour in (
                (0.0, bar.prefill_ms, light[-1]),
                (bar.prefill_ms, bar.decode_ms, colour),
            ):
                if width >= 0.09 * longest:
                    _text(plot, x0 + width / 2, y, _fmt_ms(width), _text_colour_on(fill_colour), (0.5, 0.5))
            _text(
                plot,
                bar.total_ms + 0.01 * longest,
                y,
                f"{_fmt_ms(bar.total_ms)} ms · prefill {bar.prefill_share:.0%}",
                FOREGROUND,
                (0, 0.5),
            )
        edge = pg.mkPen("#333333", width=0.8)
        plot.addItem(
            pg.BarGraphItem(
                x0=[0.0] * len(ys), y=ys, height=0.66, width=prefill, brushes=light, pens=[edge] * len(ys)
            )
        )
        plot.addItem(
            pg.BarGraphItem(x0=prefill, y=ys, height=0.66, width=decode, brushes=dark, pens=[edge] * len(ys))
        )
        y += 1.4  # gap before the next workload's header
    plot.getAxis("left").setTicks([ticks, []])
    plot.setXRange(0, longest * 1.32, padding=0)
    plot.setYRange(-0.7, y - 1.4 + 0.7, padding=0)
    plot.setLimits(xMin=0)


_BUILDERS: dict[type, Callable[[pg.GraphicsLayoutWidget, Any], None]] = {
    cd.HeadlineChart: _headline,
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


def render(chart: cd.Chart, size: tuple[int, int] | None = None) -> pg.GraphicsLayoutWidget:
    """``chart`` in a laid-out widget that is never shown on screen (for export)."""
    app = ensure_app()
    widget = build(chart)
    widget.setAttribute(QtCore.Qt.WidgetAttribute.WA_DontShowOnScreen)
    widget.resize(*(size or preferred_size(chart)))
    widget.show()  # lays the scene out at that size; nothing appears on a screen
    app.processEvents()
    return widget


def _png_image(widget: pg.GraphicsLayoutWidget, scale: float) -> QtGui.QImage:
    from pyqtgraph.exporters import ImageExporter

    exporter = ImageExporter(widget.scene())
    exporter.parameters()["width"] = round(widget.width() * scale)
    exporter.parameters()["background"] = qcolour(BACKGROUND)
    image = exporter.export(toBytes=True)
    image.setDotsPerMeterX(round(image.dotsPerMeterX() * scale))  # prints at the logical size
    image.setDotsPerMeterY(round(image.dotsPerMeterY() * scale))
    return image


def png_bytes(chart: cd.Chart, *, scale: float = 2.0, size: tuple[int, int] | None = None) -> bytes:
    widget = render(chart, size)
    try:
        image = _png_image(widget, scale)
        buffer = QtCore.QBuffer()
        buffer.open(QtCore.QIODevice.OpenModeFlag.WriteOnly)
        image.save(buffer, "PNG")
        return bytes(buffer.data())
    finally:
        widget.close()
        widget.deleteLater()


def save_png(
    chart: cd.Chart, path: str | os.PathLike[str], *, scale: float = 2.0, size: tuple[int, int] | None = None
) -> Path:
    path = Path(path)
    path.write_bytes(png_bytes(chart, scale=scale, size=size))
    return path


def svg_bytes(chart: cd.Chart, *, size: tuple[int, int] | None = None) -> bytes:
    widget = render(chart, size)
    try:
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
        return bytes(buffer.data())
    finally:
        widget.close()
        widget.deleteLater()


def save_svg(chart: cd.Chart, path: str | os.PathLike[str], *, size: tuple[int, int] | None = None) -> Path:
    path = Path(path)
    path.write_bytes(svg_bytes(chart, size=size))
    return path
