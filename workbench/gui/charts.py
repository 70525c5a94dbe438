"""The charts, drawn with pyqtgraph — one module for the GUI and for headless export.

API (the data comes from :mod:`workbench.charts`, which needs no Qt)::

    from workbench.analysis.run import analyze_run
    from workbench.charts import run_charts
    from workbench.gui import charts

    analysis = analyze_run(store.load_run(run_id))                   # headless: stats, phases, roofline...
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

``build`` and ``fill`` only draw; they never show a window. How each kind of chart is drawn, its size
and its hover read-out are one class per kind, its renderer, registered by the kind
(:mod:`workbench.gui.chartkinds`, ``kind_of(chart)``); this module draws what every
chart has (its title above, its caption under it) and renders charts offscreen for export.
``chart.name`` is a stable id (the export file stem: ``headline``, ``speedup``, ``timeline-<workload>``,
``ttft-vs-input``...), ``chart.rows()`` its data (what the CSV export holds), ``chart.title`` and
``chart.notes`` its caption. The window draws the caption under the chart; the exported files
(``png_bytes``, ``svg_bytes``, ``save_png``, ``save_svg``) leave it to the document that shows them
(the report's figcaption) unless ``notes=True`` (the GUI's copy and export of one chart, which no
document captions). Colours come from :func:`workbench.charts.base.variant_colours` (Okabe–Ito, by
run order), so a variant has the same colour in every chart and in the report's tables. Every axis
carries its unit; bars carry their values.

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
import math
import os
import sys
from collections.abc import Iterator
from pathlib import Path

import pyqtgraph as pg
from PySide6 import QtCore, QtGui, QtSvg, QtWidgets

from workbench import charts as cd
from workbench.gui.chartkinds import kind_of
from workbench.gui.chartkinds.base import BACKGROUND, TITLE_PX, WIDTH, WrapLabel, keep_labels_inside, qcolour

#: a caption's widest line (px): ~125 characters, as long as a line a reader's eye follows
_CAPTION_PX = 860

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
    "wrapped_extra",
]


def variant_qcolours(variants: tuple[str, ...] | list[str]) -> dict[str, QtGui.QColor]:
    return {name: qcolour(c) for name, c in cd.variant_colours(variants).items()}


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
    kind = kind_of(chart)
    if kind is None:
        raise TypeError(f"no chart builder for {type(chart).__name__}")
    widget.clear()
    widget.ci.setContentsMargins(10, 10, 20, 10)
    # the title and the caption wrap to the chart's width (WrapLabel): nothing passes the canvas' edge
    if chart.title:
        widget.addItem(WrapLabel([html.escape(chart.title)], px=TITLE_PX), row=0, col=0, colspan=2)
        widget.nextRow()
    kind.build(widget, chart)
    for plot in plot_items(widget):
        keep_labels_inside(plot)
    if notes and chart.notes:
        widget.nextRow()
        # lines a reader's eye can follow
        caption = WrapLabel([html.escape(n) for n in chart.notes], colour="#555555", max_width=_CAPTION_PX)
        widget.addItem(caption, colspan=2)
        widget.ci.layout.setAlignment(caption, QtCore.Qt.AlignmentFlag.AlignHCenter)


def plot_items(widget: pg.GraphicsLayoutWidget) -> list[pg.PlotItem]:
    """The plot panels of a chart widget, left to right, top to bottom (e.g. to link axes)."""
    return [item for item in widget.ci.items if isinstance(item, pg.PlotItem)]


def wrapped_extra(widget: pg.GraphicsLayoutWidget) -> int:
    """The height (px) a chart's title, legend and caption take, wrapped to its width, beyond the lines
    its kind planned for: how much taller the chart must be to keep its plots' planned height (an
    export grows by it; the app's chart too, and its tab scrolls)."""
    return math.ceil(sum(i.extra_height for i in widget.ci.items if isinstance(i, WrapLabel)))


def preferred_size(chart: cd.Chart) -> tuple[int, int]:
    """Logical size (px) that fits ``chart`` without overlapping labels (its kind's size)."""
    kind = kind_of(chart)
    return kind.size(chart) if kind is not None else (WIDTH, 580)


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
        width, height = size or preferred_size(chart)
        widget.resize(width, height)
        widget.show()  # lays the scene out at that size; nothing appears on a screen
        _settle(app)
        if size is None and (extra := wrapped_extra(widget)):
            widget.resize(width, height + extra)  # the lines its title, legend and caption wrapped to
            _settle(app)
        yield widget
    finally:
        widget.close()
        del widget
        gc.collect()


def _settle(app: QtWidgets.QApplication) -> None:
    """Let the layout settle: a wrapped label's height follows the width it is given (a second pass)."""
    for _ in range(3):
        app.processEvents()


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
