"""The charts of the run on screen, in tabs, drawn by the chart module (the same code as ``workbench
export``: what the window shows is what the PNG/SVG files show), with hover read-outs, copy and export.

Hovering a bar (or a point, or a moment on a timeline) shows its numbers in a tooltip: the chart kind's
read-out (``describe`` of its class in :mod:`workbench.gui.chartkinds`), which comes from the chart's
data, not from the pixels. A chart's tab is the one its kind names in the chart kinds' list
(:mod:`workbench.charts.registry`).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from PySide6.QtCore import QEvent, QObject, QPointF, Qt, QTimer
from PySide6.QtGui import QCursor, QImage
from PySide6.QtWidgets import (
    QApplication,
    QLabel,
    QMenu,
    QScrollArea,
    QTabWidget,
    QToolTip,
    QVBoxLayout,
    QWidget,
)

from workbench import charts as cd
from workbench.charts.registry import chart_tabs, kinds_in
from workbench.gui import charts
from workbench.gui.chartkinds import kind_of

__all__ = [
    "CHART_TABS",
    "ChartHover",
    "ChartPanel",
    "copy_chart",
    "describe",
    "export_chart",
]

#: tab title, the chart keys it holds and what it says when the run has none of them: the chart tabs
#: of the chart kinds' list (:func:`workbench.charts.registry.chart_tabs`), in order
CHART_TABS: list[tuple[str, tuple[str, ...], str]] = [
    (tab.title, kinds_in(tab), tab.empty) for tab in chart_tabs()
]


#: a chart is never squeezed below this (px); a tab with several charts scrolls instead
MIN_CHART_HEIGHT = 340


def tab_of(chart: cd.Chart) -> int:
    return next(i for i, (_, keys, _) in enumerate(CHART_TABS) if chart.key in keys)


class ChartPanel(QTabWidget):
    """One tab per kind of chart; a tab with several charts (a timeline per workload) scrolls.

    Drawing a chart takes tens of milliseconds of the UI thread (pyqtgraph builds every item anew), so
    only the charts of the tab on screen are drawn, one per turn of the event loop; the others are
    drawn when their tab is opened.
    """

    def __init__(
        self,
        parent: QWidget | None = None,
        *,
        export: Callable[[cd.Chart, str], object] | None = None,
    ) -> None:
        super().__init__(parent)
        self.setObjectName("chartTabs")
        #: the context menu's "Export chart as PNG/SVG…": the window's export (it asks for the file)
        self.export = export
        self.widgets: dict[str, Any] = {}  # chart name -> GraphicsLayoutWidget
        self.hovers: dict[str, ChartHover] = {}
        self.data: dict[str, cd.Chart] = {}
        self._pages: list[QVBoxLayout] = []
        self._empty: list[QLabel] = []
        self.notes: list[QLabel] = []  # per tab: advice and tables above its charts (hidden when empty)
        self.active: str | None = None  # the chart last hovered or right-clicked
        self._stale: set[str] = set()  # charts whose data changed since they were drawn
        self._drawing = False
        self.currentChanged.connect(lambda _i: self._draw_next())
        for title, _, empty_text in CHART_TABS:
            inner = QWidget()
            layout = QVBoxLayout(inner)
            layout.setContentsMargins(0, 0, 0, 0)
            empty = QLabel(empty_text)
            empty.setAlignment(Qt.AlignmentFlag.AlignCenter)
            empty.setEnabled(False)
            layout.addWidget(empty)
            note = QLabel()
            note.setObjectName(f"note_{title.lower().replace(' ', '_').replace('-', '_')}")
            note.setTextFormat(Qt.TextFormat.RichText)
            note.setWordWrap(True)
            note.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
            note.setContentsMargins(8, 4, 8, 8)
            note.hide()
            layout.addWidget(note)  # above the charts: what the tab's charts add up to
            self.notes.append(note)
            layout.addStretch(0)  # charts (stretch 1) share the height; this only keeps the label up
            scroll = QScrollArea()
            scroll.setWidgetResizable(True)
            scroll.setWidget(inner)
            self.addTab(scroll, title)
            self._pages.append(layout)
            self._empty.append(empty)
        self._empty_default = [text for _, _, text in CHART_TABS]

    def set_empty_texts(self, texts: dict[str, str]) -> None:
        """What a tab without charts says, by tab title, instead of its default (two runs compared: a
        tab drawn for one run at a time says so, instead of "no speculative variants"); ``{}`` restores
        the defaults."""
        for i, (title, _, _) in enumerate(CHART_TABS):
            self._empty[i].setText(texts.get(title, self._empty_default[i]))
            self._empty[i].setWordWrap(True)

    def set_charts(self, chart_list: Sequence[cd.Chart]) -> None:
        """Show these charts (new data for the same chart redraws its widget in place)."""
        wanted = {c.name: c for c in chart_list}
        for name in list(self.widgets):
            if name not in wanted:
                widget = self.widgets.pop(name)
                self.hovers.pop(name, None)
                self._stale.discard(name)
                # stays a child until Qt deletes it: a parentless widget outliving the QApplication
                # (an exit before the next event loop turn) crashes the interpreter's shutdown
                widget.parentWidget().layout().removeWidget(widget)
                widget.hide()
                widget.deleteLater()
        for name in list(self.data):
            if name not in wanted:
                del self.data[name]
        self._stale &= set(wanted)  # a chart never drawn (another tab) and gone: nothing to draw
        for chart in chart_list:
            if self.data.get(chart.name) != chart or chart.name not in self.widgets:
                self._stale.add(chart.name)
            self.data[chart.name] = chart
        for i, (_, keys, _) in enumerate(CHART_TABS):
            has = any(c.key in keys for c in chart_list)
            self._empty[i].setVisible(not has)
            self.setTabToolTip(i, "" if has else self._empty[i].text())
        if self.active not in self.data:
            self.active = None
        self._draw_next()

    def set_note(self, title: str, html: str) -> None:
        """Rich text above the charts of the tab ``title`` (the Acceptance tab: the break-even
        advice and tables); empty hides it."""
        i = next(i for i, (t, _, _) in enumerate(CHART_TABS) if t == title)
        self.notes[i].setText(html)
        self.notes[i].setVisible(bool(html))

    def draw_all(self) -> None:
        """Draw every stale chart now, whatever tab is shown (export, tests)."""
        for name in list(self._stale):
            self._draw(name)

    def _draw_next(self) -> None:
        """Draw one stale chart of the current tab, then come back on the next turn of the event loop."""
        if self._drawing:
            return
        keys = CHART_TABS[self.currentIndex()][1] if self.currentIndex() >= 0 else ()
        pending = [n for n in self.data if n in self._stale and self.data[n].key in keys]
        if not pending:
            return
        self._draw(pending[0])
        if len(pending) > 1:
            self._drawing = True
            QTimer.singleShot(0, self._continue)

    def _continue(self) -> None:
        self._drawing = False
        self._draw_next()

    def _draw(self, name: str) -> None:
        chart = self.data[name]
        widget = self.widgets.get(name)
        if widget is None:
            widget = charts.build(chart)
            widget.setObjectName(f"chart_{name}")
            widget.setContextMenuPolicy(Qt.ContextMenuPolicy.CustomContextMenu)
            widget.customContextMenuRequested.connect(lambda _pos, n=name: self._menu(n))
            self.widgets[name] = widget
            self.hovers[name] = ChartHover(widget, chart, on_hover=self._hovered)
            layout = self._pages[tab_of(chart)]
            # in data order among the tab's charts, after the empty label and the note, before the stretch
            before = [n for n in self.data if self.data[n].key in CHART_TABS[tab_of(chart)][1]]
            drawn = [n for n in before[: before.index(name)] if n in self.widgets]
            layout.insertWidget(2 + len(drawn), widget, 1)
        else:
            charts.fill(widget, chart)
            self.hovers[name].chart = chart
        # the tab's charts share its height, and scroll below a readable minimum
        kind = kind_of(chart)
        least = kind.min_height(chart) if kind is not None else None
        widget.setProperty("least_height", least or min(charts.preferred_size(chart)[1], MIN_CHART_HEIGHT))
        widget.setMinimumHeight(widget.property("least_height"))
        widget.removeEventFilter(self)
        widget.installEventFilter(self)  # resized: is the plot still readable? (fit_height)
        self._stale.discard(name)

    def eventFilter(self, watched: QObject, event: QEvent) -> bool:
        if event.type() == QEvent.Type.Resize and watched in self.widgets.values():
            for delay in (0, 50):  # again once its labels have wrapped to the new width
                QTimer.singleShot(delay, lambda w=watched: self.fit_height(w))
        return False

    def fit_height(self, widget: Any) -> None:
        """A chart's least height: its own, plus what its title, legend and caption take wrapped to a
        narrow panel (:func:`~workbench.gui.charts.wrapped_extra`): the tab scrolls instead of
        squeezing the plot."""
        try:
            least = int(widget.property("least_height") or 0) + charts.wrapped_extra(widget)
            # and never less than its rows take (a plot does not shrink without end: else the caption
            # would fall off the bottom)
            bottom = max((i.sceneBoundingRect().bottom() for i in widget.ci.items), default=0.0)
            overflow = bottom + 10 - widget.viewRect().bottom()
        except RuntimeError:  # deleted meanwhile (new results)
            return
        if overflow > 0:
            least = max(least, widget.height() + math.ceil(overflow))
        if least != widget.minimumHeight():
            widget.setMinimumHeight(least)

    def current_chart(self) -> cd.Chart | None:
        """The chart to export or copy: the one last hovered in this tab, else the tab's first."""
        keys = CHART_TABS[self.currentIndex()][1]
        in_tab = [c for c in self.data.values() if c.key in keys]
        if self.active is not None and self.active in self.data and self.data[self.active].key in keys:
            return self.data[self.active]
        return in_tab[0] if in_tab else None

    def show_tab(self, key: str) -> None:
        for i, (_, keys, _) in enumerate(CHART_TABS):
            if key in keys:
                self.setCurrentIndex(i)

    def _hovered(self, name: str) -> None:
        self.active = name

    def _menu(self, name: str) -> None:
        self.active = name
        chart = self.data.get(name)
        if chart is None:
            return
        menu = QMenu(self)
        menu.addAction("Copy chart", lambda: copy_chart(chart))
        export = self.export
        if export is not None:
            menu.addAction("Export chart as PNG…", lambda: export(chart, "png"))
            menu.addAction("Export chart as SVG…", lambda: export(chart, "svg"))
        menu.exec(QCursor.pos())


def copy_chart(chart: cd.Chart) -> QImage:
    """The chart as the exported PNG (2x), on the clipboard."""
    image = QImage.fromData(charts.png_bytes(chart, notes=True))  # one image, no document to caption it
    QApplication.clipboard().setImage(image)
    return image


def export_chart(chart: cd.Chart, path: Path) -> Path:
    """PNG (2x) or SVG by the suffix of ``path``: what ``workbench export`` writes, with the chart's
    caption under it (a single file has no document to caption it)."""
    if path.suffix.lower() == ".svg":
        return charts.save_svg(chart, path, notes=True)
    return charts.save_png(chart, path, notes=True)


# -- hover ------------------------------------------------------------------------------------------


class ChartHover(QObject):
    """Tooltips with the numbers under the mouse."""

    def __init__(self, widget: Any, chart: cd.Chart, on_hover: Any = None) -> None:
        super().__init__(widget)
        self.widget = widget
        self.chart = chart
        self._on_hover = on_hover
        widget.scene().sigMouseMoved.connect(self._moved)

    def text_at(self, scene_pos: QPointF) -> str | None:
        for plot in charts.plot_items(self.widget):
            if plot.vb.sceneBoundingRect().contains(scene_pos):
                p = plot.vb.mapSceneToView(scene_pos)
                return describe(self.chart, plot, p.x(), p.y())
        return None

    def _moved(self, scene_pos: QPointF) -> None:
        text = self.text_at(scene_pos)
        if text:
            if self._on_hover is not None:
                self._on_hover(self.chart.name)
            QToolTip.showText(QCursor.pos(), text, self.widget)
        else:
            QToolTip.hideText()


def describe(chart: cd.Chart, plot: Any, x: float, y: float) -> str | None:
    """The read-out for the point (x, y) in ``plot``'s data coordinates, or None (nothing there): the
    chart kind's (:mod:`workbench.gui.chartkinds`)."""
    kind = kind_of(chart)
    return kind.describe(chart, plot, x, y) if kind is not None else None
