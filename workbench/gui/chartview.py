"""The charts of the run on screen, in tabs, drawn by the chart module (the same code as ``workbench
export``: what the window shows is what the PNG/SVG files show), with hover read-outs, copy and export.

Hovering a bar (or a point, or a moment on a timeline) shows its numbers in a tooltip. The read-out
comes from the chart's data, not from the pixels: a bar's row is found by its position among the
rows of the plot (row k is the k-th variant × workload of the chart's data, in drawing order).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pyqtgraph as pg
from PySide6.QtCore import QObject, QPointF, Qt, QTimer
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
from workbench.gui import charts
from workbench.spec.targets import TARGET_METRICS

__all__ = ["CHART_TABS", "ChartHover", "ChartPanel", "copy_chart", "describe", "export_chart"]

#: tab title, the chart keys it holds, and what it says when the run has none of them
CHART_TABS: list[tuple[str, tuple[str, ...], str]] = [
    ("Headline", ("headline",), "No finished trials yet."),
    ("Timeline", ("timeline",), "No token timelines: no trial finished with steps recorded."),
    ("Sweeps", ("sweep",), "No sweep data: add the sweep-input or sweep-output workloads."),
    (
        "Speed-up",
        ("speedup", "before-after"),
        "No speed-ups: the run needs a baseline variant and another variant.",
    ),
    (
        "Quality",
        ("quality",),
        "No quality figures: the run scored no lossy variant (a quality pass needs a baseline and a variant "
        "that changes the weights or the arithmetic; docs/metrics.md, Quality).",
    ),
    (
        "Acceptance",
        ("accepted-length", "draft-positions"),
        "No speculative variants (speculative, prompt-lookup) in this run.",
    ),
    ("Memory", ("memory", "roofline"), "No memory figures recorded."),
    (
        "Targets",
        ("targets",),
        "No experience targets: no workload of this run has targets (docs/targets.md).",
    ),
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

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("chartTabs")
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
        widget.setMinimumHeight(min(charts.preferred_size(chart)[1], MIN_CHART_HEIGHT))
        self._stale.discard(name)

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
        window: Any = self.window()  # the main window, which owns exporting
        menu.addAction("Export chart as PNG…", lambda: window.export_chart(chart, "png"))
        menu.addAction("Export chart as SVG…", lambda: window.export_chart(chart, "svg"))
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


def _rows(plot: Any) -> list[float]:
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


def _row_at(plot: Any, y: float, half: float = 0.45) -> int | None:
    for k, row in enumerate(_rows(plot)):
        if abs(y - row) <= half:
            return k
    return None


def _ms(value: float | None) -> str:
    return "–" if value is None else f"{value:,.1f} ms" if value < 100 else f"{value:,.0f} ms"


def _ratio(value: float | None, lo: float | None, hi: float | None) -> str:
    if value is None:
        return "–"
    ci = f" [{lo:.2f}–{hi:.2f}]" if lo is not None and hi is not None else ""
    return f"{value:.2f}x{ci}"


def describe(chart: cd.Chart, plot: Any, x: float, y: float) -> str | None:
    """The read-out for the point (x, y) in ``plot``'s data coordinates, or None (nothing there)."""
    if isinstance(chart, cd.HeadlineChart):
        bars = [(g, b) for g in chart.groups for b in g.bars]
        k = _row_at(plot, y, 0.33)
        if k is None or k >= len(bars) or not 0 <= x <= bars[k][1].total_ms:
            return None
        group, bar = bars[k]
        part = "prefill" if x <= bar.prefill_ms else "decode"
        lines = [
            f"<b>{bar.variant}</b> on <b>{group.workload}</b> ({bar.n} trials, medians)",
            ("<u>" if part == "prefill" else "")
            + f"prefill (TTFT): {_ms(bar.prefill_ms)}"
            + ("</u>" if part == "prefill" else ""),
            ("<u>" if part == "decode" else "")
            + f"decode (after the first token): {_ms(bar.decode_ms)}"
            + ("</u>" if part == "decode" else ""),
            f"total {_ms(bar.total_ms)}, prefill {bar.prefill_share:.0%}",
        ]
        if group.label:
            lines.append(group.label)
        return "<br>".join(lines)
    if isinstance(chart, cd.SpeedupChart):
        e2e = [p for w in chart.workloads for p in chart.points if p.metric == "e2e" and p.workload == w]
        k = _row_at(plot, y)
        if k is None or k >= len(e2e):
            return None
        p = e2e[k]
        lines = [f"<b>{p.variant}</b> on <b>{p.workload}</b> vs {chart.baseline}"]
        for q in chart.points:
            if q.variant == p.variant and q.workload == p.workload:
                sig = "" if q.significant else " (not significant)" if q.lo is not None else ""
                lines.append(f"{q.metric} speed-up: {_ratio(q.value, q.lo, q.hi)}{sig}")
        return "<br>".join(lines)
    if isinstance(chart, cd.MemoryChart):
        k = _row_at(plot, y, 0.31)
        if k is None or k >= len(chart.bars) or not 0 <= x <= chart.bars[k].peak_mb:
            return None
        b = chart.bars[k]
        kind = {"cuda_allocator_peak": "CUDA allocator peak", "process_rss_peak": "worker process RSS peak"}
        weights = f"<br>weights {b.weights_mb:,.0f} MB" if b.weights_mb else ""
        return f"<b>{b.variant}</b><br>peak {b.peak_mb:,.0f} MB ({kind.get(b.kind, b.kind)}){weights}"
    if isinstance(chart, cd.RooflineChart):
        rows = [r for w in chart.workloads for r in chart.rows_ if r.workload == w]
        k = _row_at(plot, y, 0.4)
        if k is None or k >= len(rows):
            return None
        r = rows[k]
        fraction = f" = {r.fraction:.0%} of the limit" if r.fraction is not None else ""
        limit = f"{r.limit_tokens_per_s:,.1f}" if r.limit_tokens_per_s else "–"
        decode = f"{r.decode_tokens_per_s:,.1f}" if r.decode_tokens_per_s else "–"
        bandwidth = f", {r.bandwidth_gbs:,.1f} GB/s" if r.bandwidth_gbs else ""
        return (
            f"<b>{r.variant}</b> on <b>{r.workload}</b><br>decode {decode} tok/s{fraction}<br>"
            f"memory-bandwidth limit {limit} tok/s{bandwidth}"
        )
    if isinstance(chart, cd.TargetsChart):
        target_bars = [tb for w in chart.workloads for tb in chart.bars if tb.workload == w]
        k = _row_at(plot, y, 0.4)
        if k is None or k >= len(target_bars):
            return None
        tb = target_bars[k]
        lines = [f"<b>{tb.variant}</b> on <b>{tb.workload}</b>: {tb.status}", tb.label]
        for metric, status, measured, target in tb.checks:
            label, unit, higher = TARGET_METRICS[metric]
            value = "no data" if measured is None else f"{measured:,.4g} {unit}"
            lines.append(
                f"{label} p{tb.percentile:g}: {value} vs {'≥' if higher else '≤'} {target:,.4g} {unit} ({status})"
            )
        return "<br>".join(lines)
    if isinstance(chart, cd.AcceptanceChart):
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
        return f"<b>{variants[i]}</b><br>{length} token(s) per verify step: {share:.0f} % of steps ({steps})"
    if isinstance(chart, cd.DraftPositionChart):
        position = round(x)
        rows = [
            (s, s.rates[s.positions.index(position)], s.reached[s.positions.index(position)])
            for s in chart.series
            if position in s.positions
        ]
        if not rows or abs(x - position) > 0.3 or not -5 <= y <= 105:
            return None
        lines = [f"<b>draft position {position}</b>"]
        lines += [f"{s.variant} on {s.workload}: {rate:.0f} % accepted (of {n} steps)" for s, rate, n in rows]
        return "<br>".join(lines)
    if isinstance(chart, cd.TimelineChart):
        lines = []
        for s in chart.series:
            done = [n for t, n in zip(s.t_ms, s.tokens, strict=True) if t <= x]
            if s.t_ms and x <= s.t_ms[-1] * 1.05:
                lines.append(f"{s.variant}: {done[-1] if done else 0} tokens")
        if not lines or x < 0:
            return None
        return f"<b>at {_ms(x)}</b> ({chart.workload}/{chart.prompt_id})<br>" + "<br>".join(lines)
    if isinstance(chart, cd.SweepChart):
        xs = sorted({v for s in chart.series for v in s.x})
        if not xs:
            return None
        nearest = min(xs, key=lambda v: abs(v - x))
        if abs(nearest - x) > 0.1 * (xs[-1] - xs[0] or nearest or 1):
            return None
        unit = chart.y_axis.unit
        lines = [f"<b>{chart.x_axis.label} {nearest:,.0f} {chart.x_axis.unit}</b>"]
        for s in chart.series:
            if nearest in s.x:
                i = s.x.index(nearest)
                ci = (
                    f" [{s.lo[i]:,.1f}–{s.hi[i]:,.1f}]" if s.lo[i] is not None and s.hi[i] is not None else ""
                )
                lines.append(f"{s.variant}: {s.y[i]:,.1f}{ci} {unit}")
        return "<br>".join(lines)
    return None
