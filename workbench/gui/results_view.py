"""What the Results tab shows: which runs, loading them in the loader's child process, and putting
the :class:`~workbench.gui.loading.ResultsData` that comes back into the title, table, advice, charts
and banner. The window holds that data (``window.results``); the exports reuse it.
"""

from __future__ import annotations

import contextlib
import time
from typing import Any

from PySide6.QtCore import QObject, QTimer, Signal

from workbench.gui.widgets import escape

__all__ = ["CHART_INTERVAL_S", "ResultsView", "advice_html", "drafting_html"]

#: during a run the charts are redrawn at most this often (s); the table follows every trial
CHART_INTERVAL_S = 2.0


class ResultsView(QObject):
    """Loads and shows the runs ``window.shown_ids``. A QObject in the UI thread: results computed
    in a pool thread reach it through a queued signal."""

    _loaded = Signal(int, object)  # generation, ResultsData or the exception

    def __init__(self, window: Any) -> None:
        super().__init__(window)
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

    def show_runs(self, run_ids: tuple[int, ...]) -> None:
        w = self.window
        w.shown_ids = tuple(run_ids)
        w.results_stack.setCurrentWidget(w.results_page)
        w.tabs.setCurrentWidget(w.results_stack)
        if len(run_ids) == 1:
            w.history.select_run(run_ids[0])
        self.refresh()

    def schedule_refresh(self) -> None:
        """Reload soon: coalesces bursts of trials landing during a run into one reload."""
        self._refresh_timer.start()

    def refresh(self) -> None:
        """Reload what is on screen from the database, in the loader's worker process."""
        w = self.window
        if not w.shown_ids or w.store is None or w.loader is None:
            return
        if self._loading:
            self._reload = True
            return
        self._loading = True
        self._generation += 1
        generation = self._generation

        def done(data: Any) -> None:  # in a pool thread: queue it to the UI thread
            with contextlib.suppress(RuntimeError):  # the window was closed meanwhile
                self._loaded.emit(generation, data)

        w.loader.submit(w.db_path, w.shown_ids, done)

    def _on_loaded(self, generation: int, data: Any) -> None:
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
        from workbench.report.formatting import host_environment, machine_line

        w.results = data
        w.results_title.setText(data.title)
        w.results_env.setText(
            " · ".join(
                line
                for line in (machine_line(host_environment(r.get("environment"))) for r in data.runs)
                if line
            )
            or ""
        )
        w.table_model.set_summaries(
            data.summaries, {p.workload: p.label for p in data.phases}, getattr(data, "verdicts", ())
        )
        w.advice.setHtml(advice_html(data))
        if w.charts is not None:
            w.charts.set_note("Acceptance", drafting_html(data))
        self.update_charts()
        if data.failures:
            items = "".join(f"<li>{escape(f)}</li>" for f in data.failures[:5])
            w.banner.show_message(
                f"<b>{len(data.failures)} variant(s) failed</b> — trials they finished are kept; "
                f"the run went on with the next variant.<ul style='margin:2px'>{items}</ul>"
            )
        else:
            w.banner.hide()
        w.update_actions()
        w.resultsShown.emit(data)

    def update_charts(self) -> None:
        """Hand the charts of the results on screen to the chart panel; during a run at most every
        CHART_INTERVAL_S (drawing costs the UI thread tens of milliseconds per chart)."""
        w = self.window
        if w.charts is None or w.results is None:
            return
        wait_s = CHART_INTERVAL_S - (time.monotonic() - self._charts_at)
        if w.run_thread is not None and wait_s > 0:
            self._charts_timer.start(int(wait_s * 1000))
            return
        self._charts_timer.stop()
        self._charts_at = time.monotonic()
        w.charts.set_charts(w.results.charts)


def drafting_html(data: Any) -> str:
    """Above the Acceptance tab's charts: does drafting pay? The break-even table per speculative
    variant × workload, the costs per draft length, and the advice (one run; empty otherwise)."""
    from workbench.analysis.drafting import MIN_BUCKET_STEPS
    from workbench.report.drafting import DRAFTING_NOTE, break_even_table, draft_length_table

    analysis = data.analysis
    results = getattr(analysis, "break_even", None) if analysis is not None else None
    if not results:
        return ""

    def table(headers: list[str], rows: list[list[str]]) -> str:
        head = "".join(f"<th>{escape(h)}</th>" for h in headers)
        body = "".join("<tr>" + "".join(f"<td>{escape(str(c))}</td>" for c in row) + "</tr>" for row in rows)
        return f"<table border='1' cellspacing='0' cellpadding='3'><tr>{head}</tr>{body}</table>"

    out = ["<h3>Does drafting pay?</h3>"]
    if analysis.drafting_advice:
        out.append(
            "<ul>" + "".join(f"<li>{escape(line)}</li>" for line in analysis.drafting_advice) + "</ul>"
        )
    out.append(table(*break_even_table(results)))
    headers, rows = draft_length_table(results, MIN_BUCKET_STEPS)
    if rows:
        out.append(f"<p>Per draft length (at least {MIN_BUCKET_STEPS} steps):</p>")
        out.append(table(headers, rows))
    out.append(f"<p><i>{escape(DRAFTING_NOTE)}</i></p>")
    return "".join(out)


def advice_html(data: Any) -> str:
    """The side panel: per workload its measured phase and the advice (one run), or RUN_B against RUN_A
    with variants matched by name (two runs)."""
    out = []
    if data.comparisons or data.unmatched:
        a, b = data.runs[0]["id"], data.runs[1]["id"]
        out.append(
            f"<h3>Run {b} against run {a}</h3><p>Variants matched by name; &gt; 1 is faster in run {b}.</p>"
        )
        for r in data.comparisons:
            est = r.speedup_e2e
            ratio = "–" if est is None or est.value is None else f"{est.value:.2f}x"
            if est is not None and est.lo is not None:
                ratio += f" [{est.lo:.2f}–{est.hi:.2f}]" + (" *" if r.significant else "")
            out.append(f"<p><b>{escape(r.variant)}</b> on {escape(r.workload)}: e2e {ratio}</p>")
        if data.unmatched:
            out.append(f"<p><i>Not matched: {escape(', '.join(data.unmatched))}</i></p>")
        return "".join(out)
    quality = data.analysis.quality if data.analysis is not None else None
    if quality is not None:  # the cost beside the speed, first
        from workbench.report.quality import quality_lines, tradeoff_lines

        out.append("<h3>Quality beside speed</h3>")
        lines = [f"<b>{escape(line)}</b>" for line in tradeoff_lines(data.analysis.summaries, quality)]
        lines += [escape(line) for line in quality_lines(quality)]
        out.append("<ul>" + "".join(f"<li>{line}</li>" for line in lines) + "</ul>")
    design = data.analysis.design if data.analysis is not None else None
    if design is not None:
        out.append("<h3>How the trials ran</h3>")
        out.append("<ul>" + "".join(f"<li>{escape(line)}</li>" for line in design.lines()) + "</ul>")
    advice = getattr(data, "target_advice", {}) or {}
    if advice:  # experience targets: who meets them, and what would it take
        out.append("<h3>Experience targets</h3>")
        for workload, lines in advice.items():
            out.append(f"<p><b>{escape(workload)}</b></p><ul>")
            out += [
                f"<li>{'<i>' + escape(line) + '</i>' if line.startswith('Prediction:') else escape(line)}</li>"
                for line in lines
            ]
            out.append("</ul>")
    for p in data.phases:
        out.append(f"<h3>{escape(p.workload)} — {escape(p.headline)}</h3>")
        if p.prediction is not None:
            verdict = "differs — a finding in itself" if p.disagrees else "agrees"
            out.append(f"<p><i>Predicted before the run: {escape(p.prediction.label)} ({verdict}).</i></p>")
        if p.advice:
            out.append("<ul>" + "".join(f"<li>{escape(line)}</li>" for line in p.advice) + "</ul>")
    if not out:
        return "<p><i>Phases and advice appear when the baseline has finished trials.</i></p>"
    return "".join(out)
