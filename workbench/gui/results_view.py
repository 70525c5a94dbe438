"""What the Results tab shows: which runs, loading them in the loader's child process, and putting
the :class:`~workbench.gui.loading.ResultsData` that comes back into the window's state
(:class:`~workbench.gui.state.AppState`: ``shown_ids``, ``results``); the title, table, advice, charts
and banner follow its ``resultsChanged``. The exports reuse the same data.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Protocol, TypeVar

from PySide6.QtCore import QObject, QTimer, Signal, SignalInstance
from PySide6.QtWidgets import QLabel, QStackedWidget, QTabWidget, QTextBrowser, QWidget

from workbench.gui.widgets import escape

if TYPE_CHECKING:
    from workbench.gui.chartview import ChartPanel
    from workbench.gui.loading import ResultsData, ResultsLoader
    from workbench.gui.results import SummaryTableModel
    from workbench.gui.state import AppState
    from workbench.gui.widgets import Banner
    from workbench.report.model import Report

__all__ = [
    "CHART_INTERVAL_S",
    "ResultsView",
    "ResultsWindow",
    "advice_html",
    "comparison_table_html",
    "drafting_html",
    "empty_texts",
    "verdict_html",
]

#: during a run the charts are redrawn at most this often (s); the table follows every trial
CHART_INTERVAL_S = 2.0


class ResultsWindow(Protocol):
    """What :class:`ResultsView` uses of the window (:class:`~workbench.gui.main_window.MainWindow`)."""

    state: AppState  # the runs on screen and their results: set here
    loader: ResultsLoader | None  # None until start-up has finished
    tabs: QTabWidget
    results_stack: QStackedWidget
    results_page: QWidget
    results_title: QLabel
    results_env: QLabel
    verdict: QLabel
    table_model: SummaryTableModel
    advice: QTextBrowser
    charts: ChartPanel | None  # None until start-up has finished
    banner: Banner

    @property
    def resultsShown(self) -> SignalInstance: ...  # the window's signal

    def window(self) -> QWidget: ...  # QWidget.window(): this controller's QObject parent
    def show_error(self, title: str, message: str) -> None: ...


class ResultsView(QObject):
    """Loads the runs ``state.shown_ids`` into ``state.results`` and shows them when they change. A
    QObject in the UI thread (a child of the window): results computed in a pool thread reach it
    through a queued signal."""

    _loaded = Signal(int, object)  # generation, ResultsData or the exception

    def __init__(self, window: ResultsWindow) -> None:
        super().__init__(window.window())
        self.window = window
        self._generation = 0
        self._loading = False
        self._reload = False
        self._loaded.connect(self._on_loaded)
        self._refresh_timer = QTimer(self, singleShot=True, interval=300)
        self._refresh_timer.timeout.connect(self.refresh)
        self._charts_at = 0.0
        self._charts_timer = QTimer(self, singleShot=True)
        self._charts_timer.timeout.connect(self.update_charts)
        window.state.resultsChanged.connect(self._show)

    def show_runs(self, run_ids: tuple[int, ...]) -> None:
        w = self.window
        w.state.show_runs(tuple(run_ids))  # the History tab selects a single run (shownRunsChanged)
        w.results_stack.setCurrentWidget(w.results_page)
        w.tabs.setCurrentWidget(w.results_stack)
        self.refresh()

    def schedule_refresh(self) -> None:
        """Reload soon: coalesces bursts of trials landing during a run into one reload."""
        self._refresh_timer.start()

    def refresh(self) -> None:
        """Reload what is on screen from the database, in the loader's worker process."""
        w, state = self.window, self.window.state
        if not state.shown_ids or state.store is None or w.loader is None:
            return
        if self._loading:
            self._reload = True
            return
        self._loading = True
        self._generation += 1
        generation = self._generation

        def done(data: ResultsData | Exception) -> None:  # in a pool thread: queue it to the UI thread
            with contextlib.suppress(RuntimeError):  # the window was closed meanwhile
                self._loaded.emit(generation, data)

        w.loader.submit(state.db_path, state.shown_ids, done)

    def _on_loaded(self, generation: int, data: ResultsData | Exception) -> None:
        self._loading = False
        if self._reload:
            self._reload = False
            self.refresh()
            return
        if generation != self._generation:
            return
        w = self.window
        if isinstance(data, Exception):
            w.show_error("Results", str(data))
            return
        w.state.set_results(data)  # shown by _show; the window's title and actions follow too

    def _show(self, data: ResultsData | None) -> None:
        """The results now in the state, into the title, table, verdict, advice, charts and banner
        (None: nothing new to show; what goes on screen next replaces it)."""
        if data is None:
            return
        from workbench.formatting import host_environment, machine_line

        w = self.window
        w.results_title.setText(data.title)
        w.results_env.setText(
            " · ".join(  # two runs on one machine: said once
                dict.fromkeys(
                    line
                    for line in (machine_line(host_environment(r.get("environment"))) for r in data.runs)
                    if line
                )
            )
            or ""
        )
        w.table_model.set_summaries(data.summaries, {p.workload: p.label for p in data.phases}, data.verdicts)
        verdict = verdict_html(data)
        w.verdict.setText(verdict)
        w.verdict.setVisible(bool(verdict))
        w.advice.setHtml(advice_html(data))
        if w.charts is not None:
            from workbench.charts.acceptance import ACCEPTANCE_TAB
            from workbench.charts.speedup import SPEEDUP_TAB

            w.charts.set_note(ACCEPTANCE_TAB.title, drafting_html(data))
            w.charts.set_note(SPEEDUP_TAB.title, comparison_table_html(data))
            w.charts.set_empty_texts(empty_texts(data))
        self.update_charts()
        if data.failures:
            items = "".join(f"<li>{escape(f)}</li>" for f in data.failures[:5])
            w.banner.show_message(
                f"<b>{len(data.failures)} variant(s) failed</b> — trials they finished are kept; "
                f"the run went on with the next variant.<ul style='margin:2px'>{items}</ul>"
            )
        else:
            w.banner.hide()
        w.resultsShown.emit(data)

    def update_charts(self) -> None:
        """Hand the charts of the results on screen to the chart panel; during a run at most every
        CHART_INTERVAL_S (drawing costs the UI thread tens of milliseconds per chart)."""
        w, results = self.window, self.window.state.results
        if w.charts is None or results is None:
            return
        wait_s = CHART_INTERVAL_S - (time.monotonic() - self._charts_at)
        if w.state.running and wait_s > 0:
            self._charts_timer.start(int(wait_s * 1000))
            return
        self._charts_timer.stop()
        self._charts_at = time.monotonic()
        w.charts.set_charts(results.charts)


_T = TypeVar("_T")


def _cached_report(
    data: ResultsData, source: _T | None, key: str, build: Callable[[_T], Report]
) -> Report | None:
    """``build(source)`` (``source``: one of ``data``'s fields), once per loaded result (kept on it
    as ``key``); None without that source."""
    if source is None:
        return None
    cached: Report | None = getattr(data, key, None)
    if cached is None:
        cached = build(source)
        setattr(data, key, cached)
    return cached


def _report(data: ResultsData) -> Report | None:
    """The run's report (workbench.report.run_report); None for two runs."""
    from workbench.report.run_report import build_run_report

    return _cached_report(data, data.analysis, "_analysis_report", build_run_report)


def _comparison_report(data: ResultsData) -> Report | None:
    """Two runs: the report `workbench compare A B` prints (workbench.report.comparison); None for one run."""
    from workbench.report.comparison import build_comparison_report

    return _cached_report(data, data.two_runs, "_two_runs_report", build_comparison_report)


def empty_texts(data: ResultsData) -> dict[str, str]:
    """Two runs compared: what the chart tabs drawn for one run at a time say (their defaults, such as
    "no speculative variants in this run", would be false); ``{}`` for one run."""
    from workbench.charts.acceptance import ACCEPTANCE_TAB
    from workbench.charts.registry import chart_tabs
    from workbench.charts.speedup import SPEEDUP_TAB

    two = data.two_runs
    if two is None:
        return {}
    a, b = two.ids
    open_one = f"open run {a} or run {b} on its own (History tab) to see them."
    speculative = list(dict.fromkeys(s.variant for s in data.summaries if s.acceptance_rate is not None))
    drafting = f" Speculative variants here: {', '.join(speculative)}." if speculative else ""
    # the tabs whose charts are drawn for one run at a time say so (the chart kinds' list names them)
    return {
        tab.title: f"Comparing runs {a} and {b}: {tab.one_run_only} are drawn for one run at a time — "
        f"{open_one}{drafting if tab is ACCEPTANCE_TAB else ''}"
        for tab in chart_tabs()
        if tab.one_run_only
    } | {
        SPEEDUP_TAB.title: f"Comparing runs {a} and {b}: no variant ran the same workload in both runs with "
        "finished trials (variants are matched by name; the verdict above the table says why)."
    }


def verdict_html(data: ResultsData) -> str:
    """Above the table: the verdict (per workload the fastest variant end to end, what it costs, how
    far to trust it; two runs: per variant × workload the second run faster, slower or no detectable
    change), as every other view words it."""
    from workbench.report.model import render_html

    report = _report(data) or _comparison_report(data)
    return render_html(report, heading=4, sections=["verdict"]) if report is not None else ""


def comparison_table_html(data: ResultsData) -> str:
    """Two runs: above the Speed-up tab's before → after chart, the table `workbench compare A B`
    prints (medians A → B, RUN_B's speed-ups over RUN_A); empty for one run."""
    from workbench.report.model import render_html

    compared = _comparison_report(data)
    return _qt_tables(render_html(compared, heading=3, sections=["table"])) if compared is not None else ""


def drafting_html(data: ResultsData) -> str:
    """Above the Acceptance tab's charts: does drafting pay, on decode and end to end, per speculative
    variant; the break-even tables (one run; empty otherwise)."""
    from workbench.report.model import render_html

    report = _report(data)
    if report is None or report.section("drafting") is None:
        return ""
    return _qt_tables(render_html(report, heading=3, sections=["drafting"]))


def _qt_tables(html: str) -> str:
    """Qt's rich text draws a table's grid only when asked in the tag."""
    return html.replace("<table>", "<table border='1' cellspacing='0' cellpadding='3'>")


def advice_html(data: ResultsData) -> str:
    """The side panel: per workload its measured phase and the advice (one run), or `workbench compare
    A B`'s table (medians A → B, RUN_B's speed-ups over RUN_A), what the results table holds, how the
    runs differ, their disturbed trials and why two runs are not paired (two runs; the verdict per
    variant is above the table)."""
    out = []
    compared = _comparison_report(data)
    if compared is not None:  # `workbench compare A B`'s table and notes, from the same report
        from workbench.report.model import render_html

        assert data.two_runs is not None  # a comparison report: two runs
        a, b = data.two_runs.ids
        rows = (
            f"<p><i>The table: each run's rows as it has them alone (<code>workbench show {a}</code>, "
            f"<code>show {b}</code>): speed-ups against that run's own baseline, paired within the run. "
            "Across the runs: the verdict and the Speed-up tab (the before → after chart and the table of "
            f"<code>workbench compare {a} {b}</code>) — ratios of medians, each run resampled on its own."
            "</i></p>"
        )
        return rows + render_html(compared, heading=3, sections=["notes"])
    report = _report(data)
    if report is not None:  # what show and the exported report say, in the same order and words
        from workbench.report.model import render_html

        out.append(
            _qt_tables(render_html(report, heading=3, sections=["phases", "quality", "targets", "notes"]))
        )
    if not out:
        return "<p><i>Phases and advice appear when the baseline has finished trials.</i></p>"
    return "".join(out)
