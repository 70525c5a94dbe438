"""The main window: experiment builder, results (charts + table), history, log; running and files.

Start-up is in two steps so that the window is on screen fast: the constructor builds the frame with
Qt only; after the first paint, :meth:`MainWindow._finish_startup` builds the parts that import the
rest of the workbench (spec parser, strategy registry, analysis) and opens the database.
"""

from __future__ import annotations

import contextlib
import os
import sys
import time
from pathlib import Path
from typing import Any

from PySide6.QtCore import QEvent, QObject, Qt, QTimer, Signal
from PySide6.QtGui import QAction, QCloseEvent, QDragEnterEvent, QDropEvent, QFont, QKeySequence, QPalette
from PySide6.QtWidgets import (
    QApplication,
    QFileDialog,
    QFrame,
    QHBoxLayout,
    QInputDialog,
    QLabel,
    QMainWindow,
    QMessageBox,
    QPlainTextEdit,
    QProgressBar,
    QPushButton,
    QSplitter,
    QStackedWidget,
    QTabWidget,
    QTextBrowser,
    QToolButton,
    QVBoxLayout,
    QWidget,
)

from workbench.gui.glossary import TERMS
from workbench.gui.settings import GuiSettings

__all__ = ["MainWindow", "viewer_reason"]

DB_SUFFIXES = (".db", ".sqlite", ".sqlite3")
#: during a run the charts are redrawn at most this often (s); the table follows every trial
CHART_INTERVAL_S = 2.0
TOP_TABS = ("experiment", "results", "history", "log")
#: --tab names of the chart tabs → a chart key shown in that tab
CHART_TAB_NAMES = {
    "headline": "headline",
    "timeline": "timeline",
    "sweeps": "sweep",
    "speedup": "speedup",
    "acceptance": "accepted-length",
    "memory": "memory",
}


def viewer_reason(force: bool = False) -> str | None:
    """Why this install cannot run experiments (viewer mode), or None when it can."""
    import importlib.util

    if getattr(sys, "frozen", False):
        return (
            "This packaged viewer opens, compares and exports result databases. To run experiments, "
            "install Workbench with the engine: pip install 'llm-workbench[engine]'."
        )
    if force or os.environ.get("WORKBENCH_VIEWER"):
        return (
            "This is the viewer: it opens, compares and exports result databases. To run experiments, "
            "install the engine: pip install 'llm-workbench[engine]'."
        )
    if importlib.util.find_spec("torch") is None:
        return (
            "Running experiments needs the engine (torch and transformers): install torch for your "
            "hardware, then pip install 'llm-workbench[engine]'. Opening, comparing and exporting "
            "results works without it."
        )
    return None


class _Relay(QObject):
    """Carries results computed in the thread pool back to the UI thread (queued signal)."""

    loaded = Signal(int, object)


class Banner(QFrame):
    """A strip above the tabs for what must not be missed (a worker crash), with a close button."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        self.setObjectName("banner")
        self.label = QLabel()
        self.label.setWordWrap(True)
        self.label.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        close = QToolButton()
        close.setText("✕")
        close.setAutoRaise(True)
        close.setToolTip("Hide")
        close.clicked.connect(self.hide)
        layout = QHBoxLayout(self)
        layout.setContentsMargins(10, 6, 6, 6)
        layout.addWidget(self.label, 1)
        layout.addWidget(close, 0, Qt.AlignmentFlag.AlignTop)
        self.hide()

    def show_message(self, html: str) -> None:
        dark = self.palette().color(QPalette.ColorRole.Window).lightness() < 128
        bg, fg, edge = ("#4a1f1c", "#fde0dc", "#e57373") if dark else ("#fdecea", "#611a15", "#e57373")
        self.setStyleSheet(
            f"#banner {{ background: {bg}; border: 1px solid {edge}; border-radius: 4px; }}"
            f"#banner QLabel {{ color: {fg}; }}"
        )
        self.label.setText(html)
        self.show()


class WelcomePage(QWidget):
    """First start (no runs yet): what the app is for, and the demo one click away."""

    def __init__(self, parent: QWidget | None = None) -> None:
        super().__init__(parent)
        title = QLabel("Where does the time go — prefill or decode?")
        font = title.font()
        font.setPointSizeF(font.pointSizeF() * 1.6)
        font.setBold(True)
        title.setFont(font)
        text = QLabel(
            "Workbench runs the same prompts through variants of a model — baseline, quantized, "
            "speculative decoding, prompt lookup… — on this machine, and shows for each one how long "
            "it reads the prompt (<b>prefill</b>, the time to the first token) and how fast it writes "
            "(<b>decode</b>, tokens per second). The demo compares four variants of a small model on "
            "chat, summarising and code prompts in a few minutes on a laptop CPU."
        )
        text.setWordWrap(True)
        text.setMaximumWidth(720)
        self.demo_btn = QPushButton("Run the demo comparison")
        self.demo_btn.setObjectName("demoButton")
        self.demo_btn.setDefault(True)
        self.demo_btn.setMinimumHeight(36)
        self.build_btn = QPushButton("Build an experiment")
        self.open_btn = QPushButton("Open a results database…")
        self.note = QLabel()
        self.note.setWordWrap(True)
        self.note.setMaximumWidth(720)
        self.note.hide()
        buttons = QHBoxLayout()
        for b in (self.demo_btn, self.build_btn, self.open_btn):
            buttons.addWidget(b)
        buttons.addStretch(1)
        inner = QVBoxLayout()
        inner.addWidget(title)
        inner.addSpacing(8)
        inner.addWidget(text)
        inner.addSpacing(16)
        inner.addLayout(buttons)
        inner.addWidget(self.note)
        layout = QVBoxLayout(self)
        layout.addStretch(1)
        row = QHBoxLayout()
        row.addStretch(1)
        row.addLayout(inner)
        row.addStretch(1)
        layout.addLayout(row)
        layout.addStretch(2)

    def set_viewer_reason(self, reason: str | None) -> None:
        self.demo_btn.setEnabled(reason is None)
        self.note.setText(reason or "")
        self.note.setVisible(bool(reason))


class MainWindow(QMainWindow):
    """``ready`` fires once start-up has finished; ``resultsShown`` after the results view updated."""

    ready = Signal()
    resultsShown = Signal(object)  # ResultsData
    runFinished = Signal(object)  # RunResult, or an error message (str)

    def __init__(
        self,
        db_path: Path,
        *,
        settings: GuiSettings | None = None,
        viewer: str | None = None,
        open_run: str | None = "latest",
    ) -> None:
        super().__init__()
        self.db_path = db_path
        self.settings = settings
        self.viewer = viewer
        self.store: Any = None
        self.builder: Any = None
        self.loader: Any = None  # loading.ResultsLoader, from the end of start-up
        self.run_thread: Any = None
        self.results: Any = None  # the ResultsData on screen
        self.shown_ids: tuple[int, ...] = ()
        self.is_ready = False
        self.last_message = ""  # the last error or notice shown in a message box (for tests and logs)
        self._open_run = open_run
        self._started = False
        self._generation = 0
        self._loading = False
        self._reload = False
        self._relay = _Relay(self)
        self._relay.loaded.connect(self._on_loaded)
        self._refresh_timer = QTimer(self, singleShot=True, interval=300)
        self._refresh_timer.timeout.connect(self.refresh_results)
        self._charts_at = 0.0
        self._charts_timer = QTimer(self, singleShot=True)
        self._charts_timer.timeout.connect(self._update_charts)
        self.setWindowTitle("Workbench")
        self.setAcceptDrops(True)
        self._build_ui()
        self._build_actions()
        self.resize(1280, 820)

    # -- frame -----------------------------------------------------------------------------------

    def _build_ui(self) -> None:
        self.banner = Banner()
        self.tabs = QTabWidget()
        self.tabs.setObjectName("mainTabs")
        self.tabs.setDocumentMode(True)
        self.experiment_page = QWidget()
        QVBoxLayout(self.experiment_page)
        self.welcome = WelcomePage()
        self.welcome.set_viewer_reason(self.viewer)
        self.results_page = self._build_results_page()
        self.results_stack = QStackedWidget()
        self.results_stack.addWidget(self.welcome)
        self.results_stack.addWidget(self.results_page)
        from workbench.gui.history import HistoryPanel

        self.history = HistoryPanel()
        self.log = QPlainTextEdit()
        self.log.setObjectName("log")
        self.log.setReadOnly(True)
        self.log.setMaximumBlockCount(20_000)
        self.log.setFont(QFont("monospace"))
        self.tabs.addTab(self.experiment_page, "Experiment")
        self.tabs.addTab(self.results_stack, "Results")
        self.tabs.addTab(self.history, "History")
        self.tabs.addTab(self.log, "Log")
        central = QWidget()
        layout = QVBoxLayout(central)
        layout.setContentsMargins(6, 6, 6, 0)
        layout.addWidget(self.banner)
        layout.addWidget(self.tabs, 1)
        self.setCentralWidget(central)

        self.progress = QProgressBar()
        self.progress.setObjectName("runProgress")
        self.progress.setMaximumWidth(260)
        self.progress.setFormat("%v / %m trials")
        self.progress.hide()
        self.progress_label = QLabel()
        self.cancel_btn = QPushButton("Cancel")
        self.cancel_btn.setObjectName("cancelButton")
        self.cancel_btn.setToolTip("Stop at the next token; finished trials are kept (Esc)")
        self.cancel_btn.hide()
        self.cancel_btn.clicked.connect(self.cancel_run)
        self.statusBar().addWidget(self.progress_label, 1)
        self.statusBar().addPermanentWidget(self.progress)
        self.statusBar().addPermanentWidget(self.cancel_btn)

        self.welcome.demo_btn.clicked.connect(self.run_demo)
        self.welcome.build_btn.clicked.connect(lambda: self.show_tab("experiment"))
        self.welcome.open_btn.clicked.connect(self.open_database_dialog)
        self.history.openRequested.connect(lambda run_id: self.show_runs((run_id,)))
        self.history.compareRequested.connect(lambda a, b: self.show_runs((a, b)))
        self.history.renameRequested.connect(self.rename_run)
        self.history.deleteRequested.connect(self.delete_run)

    def _build_results_page(self) -> QWidget:
        from workbench.gui.results import SummaryTableModel, make_table_view

        page = QWidget()
        self.results_title = QLabel()
        self.results_title.setObjectName("resultsTitle")
        font = self.results_title.font()
        font.setBold(True)
        font.setPointSizeF(font.pointSizeF() * 1.2)
        self.results_title.setFont(font)
        self.results_env = QLabel()
        self.results_env.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.charts: Any = None  # the ChartPanel, built after the first paint (pyqtgraph is slow to import)
        self.table_model = SummaryTableModel(self)
        self.table = make_table_view(self.table_model)
        self.table.setObjectName("resultsTable")
        self.advice = QTextBrowser()
        self.advice.setObjectName("advice")
        self.bottom_split = QSplitter(Qt.Orientation.Horizontal)
        self.bottom_split.addWidget(self.table)
        self.bottom_split.addWidget(self.advice)
        self.bottom_split.setStretchFactor(0, 3)
        self.bottom_split.setStretchFactor(1, 2)
        self.results_split = QSplitter(Qt.Orientation.Vertical)
        self.results_split.addWidget(self.bottom_split)
        layout = QVBoxLayout(page)
        layout.addWidget(self.results_title)
        layout.addWidget(self.results_env)
        layout.addWidget(self.results_split, 1)
        return page

    def _build_actions(self) -> None:
        def action(text: str, slot: Any, shortcut: Any = None, tip: str = "") -> QAction:
            a = QAction(text, self)
            if shortcut is not None:
                a.setShortcut(QKeySequence(shortcut))
            if tip:
                a.setStatusTip(tip)
                a.setToolTip(tip)
            a.triggered.connect(slot)
            self.addAction(a)
            return a

        self.open_action = action(
            "&Open…",
            self.open_dialog,
            QKeySequence.StandardKey.Open,
            "Open a spec (.toml) or a results database (.db)",
        )
        self.open_db_action = action("Open &database…", self.open_database_dialog)
        self.save_action = action("&Save spec", self.save_spec, QKeySequence.StandardKey.Save)
        self.save_as_action = action("Save spec &as…", self.save_spec_as, QKeySequence.StandardKey.SaveAs)
        self.export_data_action = action(
            "Export run &data (CSV)…",
            self.export_data,
            tip="trials.csv, steps.csv, summary.csv, phases.csv, summary.json and every chart's data",
        )
        self.export_action = action(
            "&Export chart…", self.export_current_chart, "Ctrl+E", "The chart on screen as PNG (2x) or SVG"
        )
        self.copy_chart_action = action(
            "&Copy chart", self.copy_current_chart, "Ctrl+Shift+C", "The chart on screen, as an image"
        )
        self.export_report_action = action(
            "Export &report (HTML)…",
            self.export_report,
            tip="One self-contained page: charts, tables, advice",
        )
        self.export_all_action = action(
            "Export &all…", self.export_all, tip="Everything `workbench export` writes, into a folder"
        )
        quit_action = action("&Quit", self.close, QKeySequence.StandardKey.Quit)
        self.run_action = action("&Run", self.start_run, "Ctrl+R", "Run the experiment in the builder")
        self.cancel_action = action(
            "&Cancel run", self.cancel_run, "Esc", "Stop at the next token; keep finished trials"
        )
        self.cancel_action.setEnabled(False)
        self.demo_action = action("Run the &demo comparison", self.run_demo)
        glossary_action = action("&Glossary", self.show_glossary)
        about_action = action("&About Workbench", self.show_about)

        menu = self.menuBar()
        file_menu = menu.addMenu("&File")
        for a in (
            self.open_action,
            self.open_db_action,
            None,
            self.save_action,
            self.save_as_action,
            None,
            self.export_action,
            self.copy_chart_action,
            self.export_report_action,
            self.export_data_action,
            self.export_all_action,
            None,
            quit_action,
        ):
            file_menu.addSeparator() if a is None else file_menu.addAction(a)
        run_menu = menu.addMenu("&Run")
        for a in (self.run_action, self.cancel_action, None, self.demo_action):
            run_menu.addSeparator() if a is None else run_menu.addAction(a)
        view_menu = menu.addMenu("&View")
        for i, name in enumerate(TOP_TABS):
            view_menu.addAction(
                action(name.capitalize(), lambda _=False, n=name: self.show_tab(n), f"Ctrl+{i + 1}")
            )
        help_menu = menu.addMenu("&Help")
        help_menu.addAction(glossary_action)
        help_menu.addAction(about_action)
        self._update_actions()

    # -- start-up --------------------------------------------------------------------------------

    def paintEvent(self, event: Any) -> None:
        super().paintEvent(event)
        if not self._started:  # the frame is on screen: now the parts that take a while to import
            self._started = True
            QTimer.singleShot(0, self._finish_startup)

    def finish_startup(self) -> None:
        """Build the rest now (tests and ``--screenshot`` call it instead of waiting for a paint)."""
        if not self.is_ready:
            self._started = True
            self._finish_startup()

    def _finish_startup(self) -> None:
        if self.is_ready:
            return
        from workbench.gui.loading import ResultsLoader

        self.loader = ResultsLoader()
        self.loader.warm_up()  # its worker imports the analysis while the rest is built here
        from workbench.gui.builder import ExperimentBuilder

        self.builder = ExperimentBuilder()
        self.builder.setObjectName("builder")
        self.builder.set_viewer_reason(self.viewer)
        self.builder.runRequested.connect(self.start_run)
        self.builder.save_btn.clicked.connect(self.save_spec_as)
        self.experiment_page.layout().addWidget(self.builder)
        from workbench.gui.chartview import ChartPanel

        self.charts = ChartPanel()
        self.results_split.insertWidget(0, self.charts)
        self.results_split.setStretchFactor(0, 3)
        self.results_split.setStretchFactor(1, 2)
        self.results_split.setSizes([500, 300])
        self.bottom_split.setSizes([800, 450])
        if self.settings is not None:
            for name, splitter in (("results", self.results_split), ("bottom", self.bottom_split)):
                state = self.settings.splitter(name)
                if state is not None:
                    splitter.restoreState(state)
        self._open_store(self.db_path, create=False)
        runs = self.refresh_history()
        if runs and self._open_run:
            try:
                run = self.store.resolve_run(self._open_run)
            except Exception as exc:  # StoreError: an id that is not there
                self.show_error("Open run", str(exc))
            else:
                self.show_runs((run["id"],))
        if not runs:
            self.results_stack.setCurrentWidget(self.welcome)
            self.tabs.setCurrentWidget(self.results_stack)
        self.is_ready = True
        self._update_actions()
        self.ready.emit()

    # -- database --------------------------------------------------------------------------------

    def _open_store(self, path: Path, *, create: bool, quiet: bool = False) -> bool:
        from workbench.core.errors import WorkbenchError
        from workbench.store import Store

        if not path.exists() and not create:
            self.db_path, self.store = path, None  # created by the first run
            return True
        try:
            store = Store(path, create=create)
            store.reap_stale_runs()
        except WorkbenchError as exc:
            if not quiet:
                self.show_error("Open database", str(exc))
            else:
                self.log_line(f"cannot open {path}: {exc}")
            return False
        if self.store is not None:
            self.store.close()
        self.db_path, self.store = path, store
        if self.settings is not None:
            self.settings.last_db = path.resolve()
        return True

    def open_database(self, path: Path) -> bool:
        if self.run_thread is not None:
            self.show_error(
                "Open database", f"A run is writing to {self.db_path}; wait for it or cancel it first."
            )
            return False
        if not path.exists():
            self.show_error("Open database", f"no results database at {path}")
            return False
        if not self._open_store(path, create=False):
            return False
        self.shown_ids = ()
        runs = self.refresh_history()
        if runs:
            self.show_runs((runs[-1]["id"],))
        else:
            self.results_stack.setCurrentWidget(self.welcome)
            self.tabs.setCurrentWidget(self.results_stack)
        self.log_line(f"opened {path}")
        return True

    def refresh_history(self) -> list[dict[str, Any]]:
        runs = self.store.runs() if self.store is not None else []
        self.history.set_runs(runs, f"{self.db_path}  ·  {len(runs)} run(s)")
        return runs

    # -- results ---------------------------------------------------------------------------------

    def show_runs(self, run_ids: tuple[int, ...]) -> None:
        self.shown_ids = tuple(run_ids)
        self.results_stack.setCurrentWidget(self.results_page)
        self.tabs.setCurrentWidget(self.results_stack)
        if len(run_ids) == 1:
            self.history.select_run(run_ids[0])
        self.refresh_results()

    def refresh_results(self) -> None:
        """Reload what is on screen from the database, in the loader's worker process."""
        if not self.shown_ids or self.store is None or self.loader is None:
            return
        if self._loading:
            self._reload = True
            return
        self._loading = True
        self._generation += 1
        generation = self._generation

        def done(data: Any) -> None:  # in a pool thread: queue it to the UI thread
            with contextlib.suppress(RuntimeError):  # the window was closed meanwhile
                self._relay.loaded.emit(generation, data)

        self.loader.submit(self.db_path, self.shown_ids, done)

    def _on_loaded(self, generation: int, data: Any) -> None:
        self._loading = False
        if self._reload:
            self._reload = False
            self.refresh_results()
            return
        if generation != self._generation:
            return
        if isinstance(data, Exception):
            self.show_error("Results", str(data))
            return
        from workbench.report.formatting import host_environment, machine_line

        self.results = data
        self.results_title.setText(data.title)
        self.results_env.setText(
            " · ".join(
                line
                for line in (machine_line(host_environment(r.get("environment"))) for r in data.runs)
                if line
            )
            or ""
        )
        self.table_model.set_summaries(data.summaries, {p.workload: p.label for p in data.phases})
        self.advice.setHtml(advice_html(data))
        self._update_charts()
        if data.failures:
            items = "".join(f"<li>{_escape(f)}</li>" for f in data.failures[:5])
            self.banner.show_message(
                f"<b>{len(data.failures)} variant(s) failed</b> — trials they finished are kept; "
                f"the run went on with the next variant.<ul style='margin:2px'>{items}</ul>"
            )
        else:
            self.banner.hide()
        self._update_actions()
        self.resultsShown.emit(data)

    def _update_charts(self) -> None:
        """Hand the charts of the results on screen to the chart panel; during a run at most every
        CHART_INTERVAL_S (drawing costs the UI thread tens of milliseconds per chart)."""
        if self.charts is None or self.results is None:
            return
        wait_s = CHART_INTERVAL_S - (time.monotonic() - self._charts_at)
        if self.run_thread is not None and wait_s > 0:
            self._charts_timer.start(int(wait_s * 1000))
            return
        self._charts_timer.stop()
        self._charts_at = time.monotonic()
        self.charts.set_charts(self.results.charts)

    # -- running ---------------------------------------------------------------------------------

    def start_run(self, *_: Any, spec: Any = None) -> bool:
        if self.run_thread is not None or not self.is_ready:
            return False
        if self.viewer:
            self.show_error("Run", self.viewer)
            return False
        if spec is None:
            spec = self.builder.validate()
            if spec is None:
                self.show_tab("experiment")
                self.show_error("Run", f"The experiment has a mistake: {self.builder.error}")
                return False
        from workbench.gui.running import RunThread

        thread = RunThread(spec, self.db_path, self)
        thread.runCreated.connect(self._on_run_created)
        thread.progressed.connect(self._on_progress)
        thread.logged.connect(self.log_line)
        thread.completed.connect(self._on_completed)
        thread.errored.connect(self._on_run_error)
        thread.finished.connect(self._on_thread_finished)
        self.run_thread = thread
        self.banner.hide()
        self.builder.set_running(True)
        self.progress.setRange(0, 0)
        self.progress.show()
        self.cancel_btn.setEnabled(True)
        self.cancel_btn.setText("Cancel")
        self.cancel_btn.show()
        self.progress_label.setText(f"Starting '{spec.name}'…")
        self.log_line(f"— run '{spec.name}' into {self.db_path}")
        self._update_actions()
        thread.start()
        return True

    def run_demo(self) -> None:
        from workbench.core.resources import resource_path
        from workbench.gui.draft import SpecDraft

        if self.viewer:
            self.show_error("Run the demo", self.viewer)
            return
        draft = SpecDraft.load(resource_path("specs", "demo.toml"))
        draft.path = None  # not the user's file: Save asks where
        self.builder.set_draft(draft)
        self.start_run()

    def cancel_run(self) -> None:
        if self.run_thread is None:
            return
        again = self.run_thread.cancel_requested
        self.run_thread.cancel()
        self.cancel_btn.setText("Stop now")
        self.cancel_btn.setToolTip("Kill the worker at once (the trial in progress is lost)")
        self.progress_label.setText(
            "Stopping at once…"
            if again
            else "Cancelling: finishing at the next token (press again to stop now)…"
        )
        self.log_line("— cancel requested" + (" again: killing the worker" if again else ""))

    def _on_run_created(self, run_id: int) -> None:
        if self.store is None:
            self._open_store(self.db_path, create=False)
        self.refresh_history()
        self.show_runs((run_id,))

    def _on_progress(self, info: Any) -> None:
        from workbench.gui.running import format_eta

        self.progress.setRange(0, max(info.total, 1))
        self.progress.setValue(info.done)
        parts = [f"{info.done}/{info.total} trials"]
        if info.failed:
            parts.append(f"{info.failed} failed")
        eta = format_eta(info.eta_s)
        if eta:
            parts.append(f"ETA {eta}")
        if info.message:
            parts.append(info.message)
        self.progress_label.setText(" · ".join(parts))
        self.log_line(info.message)
        if info.trial_landed and info.run_id is not None and info.run_id in self.shown_ids:
            self._refresh_timer.start()  # coalesces bursts of trials into one reload

    def _on_completed(self, result: Any) -> None:
        text = f"Run {result.run_id} {result.status}: {result.ok} ok, {result.failed} failed"
        if result.cancelled:
            text += f", {result.cancelled} cancelled"
        if result.skipped:
            text += f", {result.skipped} sweep points beyond the context skipped"
        self.progress_label.setText(text)
        self.log_line(f"— {text}")
        self.runFinished.emit(result)

    def _on_run_error(self, message: str) -> None:
        self.progress_label.setText(
            f"Run not started: {message}" if self.run_thread.run_id is None else message
        )
        self.log_line(f"— error: {message}")
        self.show_error("Run", message)
        self.runFinished.emit(message)

    def _on_thread_finished(self) -> None:
        thread, self.run_thread = self.run_thread, None
        if thread is not None:
            thread.deleteLater()
        self.progress.hide()
        self.cancel_btn.hide()
        self.builder.set_running(False)
        self._update_actions()
        self.refresh_history()
        self.refresh_results()

    # -- files -----------------------------------------------------------------------------------

    def open_dialog(self) -> None:
        path, _ = QFileDialog.getOpenFileName(
            self,
            "Open a spec or a results database",
            self._last_dir(),
            "Specs and results (*.toml *.db *.sqlite *.sqlite3);;Specs (*.toml);;Results databases (*.db *.sqlite *.sqlite3);;All files (*)",
        )
        if path:
            self.open_path(Path(path))

    def open_database_dialog(self) -> None:
        path, _ = QFileDialog.getOpenFileName(
            self,
            "Open a results database",
            self._last_dir(),
            "Results databases (*.db *.sqlite *.sqlite3);;All files (*)",
        )
        if path:
            self.open_database(Path(path))

    def open_path(self, path: Path) -> bool:
        """A ``.toml`` goes into the builder; anything else is opened as a results database."""
        self._remember_dir(path)
        if path.suffix.lower() == ".toml":
            return self.open_spec(path)
        return self.open_database(path)

    def open_spec(self, path: Path) -> bool:
        from workbench.core.errors import WorkbenchError
        from workbench.gui.draft import SpecDraft

        try:
            draft = SpecDraft.load(path)
        except WorkbenchError as exc:
            self.show_error("Open spec", str(exc))
            return False
        self.builder.set_draft(draft)
        self.show_tab("experiment")
        self.log_line(f"opened spec {path}")
        return True

    def save_spec(self) -> None:
        if self.builder is None:
            return
        if self.builder.draft.path is None:
            self.save_spec_as()
        else:
            self._save_to(self.builder.draft.path)

    def save_spec_as(self) -> None:
        if self.builder is None:
            return
        draft = self.builder.draft
        start = str(draft.path or Path(self._last_dir()) / f"{_slug(draft.name)}.toml")
        path, _ = QFileDialog.getSaveFileName(self, "Save spec", start, "Specs (*.toml)")
        if path:
            if not path.endswith(".toml"):
                path += ".toml"
            self._save_to(Path(path))

    def _save_to(self, path: Path) -> bool:
        from workbench.core.errors import WorkbenchError

        try:
            self.builder.draft.save(path)
        except WorkbenchError as exc:
            self.show_error("Save spec", str(exc))
            return False
        self._remember_dir(path)
        self.statusBar().showMessage(f"Saved {path}", 5000)
        self.log_line(f"saved spec {path}")
        return True

    def _chart_or_complain(self) -> Any:
        chart = self.charts.current_chart() if self.charts is not None and self.results is not None else None
        if chart is None:
            self.show_error("Export chart", "No chart on screen: open a run with finished trials first.")
        return chart

    def export_current_chart(self, *_: Any, path: Path | None = None) -> Path | None:
        chart = self._chart_or_complain()
        if chart is None:
            return None
        return self.export_chart(chart, "png", path=path)

    def export_chart(self, chart: Any, kind: str = "png", *, path: Path | None = None) -> Path | None:
        """Ask where (PNG or SVG, by the filter chosen), then write exactly what `workbench export` does."""
        from workbench.gui.chartview import export_chart

        if path is None:
            filters = "PNG image, 2x (*.png);;SVG image (*.svg)"
            selected = "SVG image (*.svg)" if kind == "svg" else "PNG image, 2x (*.png)"
            start = str(Path(self._last_dir()) / f"{chart.name}.{kind}")
            chosen, used = QFileDialog.getSaveFileName(self, "Export chart", start, filters, selected)
            if not chosen:
                return None
            path = Path(chosen)
            if path.suffix.lower() not in (".png", ".svg"):
                path = path.with_suffix(".svg" if used.startswith("SVG") else ".png")
        try:
            with _busy():
                written = export_chart(chart, path)
        except OSError as exc:
            self.show_error("Export chart", f"cannot write {path}: {exc.strerror or exc}")
            return None
        self._remember_dir(path)
        self.statusBar().showMessage(f"Wrote {written}", 8000)
        self.log_line(f"exported chart {chart.name} to {written}")
        return written

    def copy_current_chart(self) -> bool:
        from workbench.gui.chartview import copy_chart

        chart = self._chart_or_complain()
        if chart is None:
            return False
        with _busy():
            copy_chart(chart)
        self.statusBar().showMessage(f"Copied the {chart.title or chart.name} chart", 5000)
        return True

    def export_report(self, *_: Any, path: Path | None = None) -> Path | None:
        """The HTML report of the run on screen (what `workbench export --format html` writes)."""
        from workbench.gui import charts as qt_charts
        from workbench.report.documents import html_report

        analysis = self._single_analysis("Export report")
        if analysis is None:
            return None
        if path is None:
            start = str(Path(self._last_dir()) / f"report-run{analysis.run['id']}.html")
            chosen, _ = QFileDialog.getSaveFileName(self, "Export report", start, "HTML page (*.html)")
            if not chosen:
                return None
            path = Path(chosen if chosen.endswith((".html", ".htm")) else chosen + ".html")
        try:
            with _busy():
                pngs = {c.name: qt_charts.png_bytes(c) for c in self.results.charts}
                path.write_text(html_report(analysis, pngs, self.results.charts), encoding="utf-8")
        except OSError as exc:
            self.show_error("Export report", f"cannot write {path}: {exc.strerror or exc}")
            return None
        self._remember_dir(path)
        self.statusBar().showMessage(f"Wrote {path}", 8000)
        self.log_line(f"exported the report of run {analysis.run['id']} to {path}")
        return path

    def export_all(self, *_: Any, out_dir: Path | None = None) -> list[Path]:
        """Everything `workbench export RUN --out DIR` writes (charts, data, Markdown, HTML)."""
        from workbench.core.errors import WorkbenchError
        from workbench.gui import charts as qt_charts
        from workbench.report.export import export_run

        analysis = self._single_analysis("Export")
        if analysis is None or self.store is None:
            return []
        if out_dir is None:
            chosen = QFileDialog.getExistingDirectory(self, "Export the run into", self._last_dir())
            if not chosen:
                return []
            out_dir = Path(chosen)
        try:
            with _busy():
                # the analysis and charts the Results tab holds: nothing is analysed again here
                written, _notes = export_run(
                    self.store,
                    analysis.run["id"],
                    out_dir,
                    renderer=qt_charts,
                    analysis=analysis,
                    charts=self.results.charts,
                )
        except WorkbenchError as exc:
            self.show_error("Export", str(exc))
            return []
        self._remember_dir(out_dir / "x")
        self.statusBar().showMessage(f"Wrote {len(written)} files to {out_dir}", 8000)
        self.log_line(f"exported run {analysis.run['id']} to {out_dir}: {len(written)} files")
        return written

    def _single_analysis(self, title: str) -> Any:
        if self.results is None or self.results.analysis is None:
            self.show_error(
                title, "Open one run first (History tab); a comparison of two runs is not a report."
            )
            return None
        return self.results.analysis

    def export_data(self, *_: Any, out_dir: Path | None = None) -> list[Path]:
        from workbench.core.errors import WorkbenchError
        from workbench.report.export import export_data

        if self.results is None or len(self.results.run_ids) != 1 or self.store is None:
            self.show_error("Export", "Open a run first (History tab).")
            return []
        if out_dir is None:
            chosen = QFileDialog.getExistingDirectory(self, "Export the run's data into", self._last_dir())
            if not chosen:
                return []
            out_dir = Path(chosen)
        try:
            written = export_data(self.store, self.results.run_ids[0], out_dir)
        except WorkbenchError as exc:
            self.show_error("Export", str(exc))
            return []
        self._remember_dir(out_dir / "x")
        self.statusBar().showMessage(f"Wrote {', '.join(p.name for p in written)} to {out_dir}", 8000)
        return written

    # -- history actions -------------------------------------------------------------------------

    def rename_run(self, run_id: int, name: str | None = None) -> bool:
        if self.store is None:
            return False
        run = self.store.resolve_run(run_id)
        if name is None:
            name, ok = QInputDialog.getText(
                self, "Rename run", f"New name for run {run_id}:", text=run["name"]
            )
            if not ok:
                return False
        name = name.strip()
        if not name:
            self.show_error("Rename run", "A run needs a name.")
            return False
        self.store.rename_run(run_id, name)
        self.refresh_history()
        if run_id in self.shown_ids:
            self.refresh_results()
        return True

    def delete_run(self, run_id: int, *, confirm: bool = True) -> bool:
        if self.store is None:
            return False
        if self.run_thread is not None and self.run_thread.run_id == run_id:
            self.show_error("Delete run", "This run is still running; cancel it first.")
            return False
        run = self.store.resolve_run(run_id)
        if confirm:
            answer = QMessageBox.question(
                self,
                "Delete run",
                f"Delete run {run_id} '{run['name']}' and all its trials from {self.db_path.name}? "
                "This cannot be undone.",
                QMessageBox.StandardButton.Yes | QMessageBox.StandardButton.Cancel,
                QMessageBox.StandardButton.Cancel,
            )
            if answer != QMessageBox.StandardButton.Yes:
                return False
        self.store.delete_run(run_id)
        self.log_line(f"deleted run {run_id} '{run['name']}'")
        runs = self.refresh_history()
        if run_id in self.shown_ids:
            self.shown_ids = ()
            self.results = None
            if runs:
                self.show_runs((runs[-1]["id"],))
            else:
                self.results_stack.setCurrentWidget(self.welcome)
        self._update_actions()
        return True

    # -- small things ----------------------------------------------------------------------------

    def show_tab(self, name: str) -> None:
        """A main tab (``experiment``...) or a chart tab (``headline``, ``timeline``...)."""
        if name in CHART_TAB_NAMES:
            self.tabs.setCurrentWidget(self.results_stack)
            if self.charts is not None:
                self.charts.show_tab(CHART_TAB_NAMES[name])
            return
        pages = {
            "experiment": self.experiment_page,
            "results": self.results_stack,
            "history": self.history,
            "log": self.log,
        }
        self.tabs.setCurrentWidget(pages[name])

    def show_error(self, title: str, message: str) -> None:
        """One clear sentence in a message box that does not block (no traceback, ever)."""
        self.last_message = message
        box = QMessageBox(QMessageBox.Icon.Warning, title, message, QMessageBox.StandardButton.Ok, self)
        box.setAttribute(Qt.WidgetAttribute.WA_DeleteOnClose)
        box.setObjectName("errorBox")
        box.open()

    def log_line(self, line: str) -> None:
        if line:
            self.log.appendPlainText(line)

    def show_glossary(self) -> None:
        text = "".join(f"<p><b>{term}</b> — {_escape(sentence)}</p>" for term, sentence in TERMS.items())
        box = QMessageBox(QMessageBox.Icon.NoIcon, "Glossary", text, QMessageBox.StandardButton.Ok, self)
        box.setTextFormat(Qt.TextFormat.RichText)
        box.open()

    def show_about(self) -> None:
        from workbench import __version__

        QMessageBox.about(
            self,
            "About Workbench",
            f"<b>Workbench {__version__}</b><br>Compare LLM inference optimizations on your own hardware: "
            f"where the time goes, prefill vs decode.<br><br>Results database: {_escape(str(self.db_path))}"
            + (f"<br><br>{_escape(self.viewer)}" if self.viewer else ""),
        )

    def _update_actions(self) -> None:
        running = self.run_thread is not None
        self.run_action.setEnabled(self.is_ready and not running and not self.viewer)
        self.demo_action.setEnabled(self.is_ready and not running and not self.viewer)
        self.cancel_action.setEnabled(running)
        has_run = self.results is not None and len(self.results.run_ids) == 1
        has_chart = self.results is not None and bool(self.results.charts)
        for a in (self.export_data_action, self.export_report_action, self.export_all_action):
            a.setEnabled(has_run)
        self.export_action.setEnabled(has_chart)
        self.copy_chart_action.setEnabled(has_chart)

    def _last_dir(self) -> str:
        return self.settings.last_dir if self.settings is not None else str(Path.cwd())

    def _remember_dir(self, path: Path) -> None:
        if self.settings is not None:
            self.settings.last_dir = str(path.resolve().parent)

    # -- Qt events -------------------------------------------------------------------------------

    def dragEnterEvent(self, event: QDragEnterEvent) -> None:
        if _dropped_path(event) is not None:
            event.acceptProposedAction()
        else:
            event.ignore()

    def dropEvent(self, event: QDropEvent) -> None:
        path = _dropped_path(event)
        if path is None:
            event.ignore()
            return
        event.acceptProposedAction()
        # after the drop returns: a message box inside a drop handler upsets some platforms
        QTimer.singleShot(0, lambda: self.open_path(path))

    def changeEvent(self, event: QEvent) -> None:
        super().changeEvent(event)
        if event.type() == QEvent.Type.PaletteChange and self.banner.isVisible():
            self.banner.show_message(self.banner.label.text())  # recolour for light/dark

    def closeEvent(self, event: QCloseEvent) -> None:
        if self.run_thread is not None:
            answer = QMessageBox.question(
                self,
                "Quit",
                "A run is in progress. Cancel it and quit? Finished trials are kept.",
                QMessageBox.StandardButton.Yes | QMessageBox.StandardButton.No,
                QMessageBox.StandardButton.No,
            )
            if answer != QMessageBox.StandardButton.Yes:
                event.ignore()
                return
            self.stop_run_and_wait()
        self.save_settings()
        if self.loader is not None:
            self.loader.close()
        if self.store is not None:
            self.store.close()
            self.store = None
        super().closeEvent(event)

    def stop_run_and_wait(self, timeout_ms: int = 20_000) -> None:
        thread = self.run_thread
        if thread is None:
            return
        thread.cancel()
        if not thread.wait(timeout_ms):
            thread.cancel()  # a second cancel kills the worker
            thread.wait()
        QApplication.processEvents()

    def save_settings(self) -> None:
        if self.settings is None:
            return
        self.settings.geometry = self.saveGeometry()
        self.settings.window_state = self.saveState()
        self.settings.set_splitter("results", self.results_split.saveState())
        self.settings.set_splitter("bottom", self.bottom_split.saveState())
        self.settings.sync()

    def restore_settings(self) -> None:
        if self.settings is None:
            return
        if self.settings.geometry is not None:
            self.restoreGeometry(self.settings.geometry)
        if self.settings.window_state is not None:
            self.restoreState(self.settings.window_state)


@contextlib.contextmanager
def _busy() -> Any:
    """A wait cursor while the UI thread renders (chart export draws with Qt, so it runs here)."""
    QApplication.setOverrideCursor(Qt.CursorShape.WaitCursor)
    try:
        yield
    finally:
        QApplication.restoreOverrideCursor()


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
            out.append(f"<p><b>{_escape(r.variant)}</b> on {_escape(r.workload)}: e2e {ratio}</p>")
        if data.unmatched:
            out.append(f"<p><i>Not matched: {_escape(', '.join(data.unmatched))}</i></p>")
        return "".join(out)
    for p in data.phases:
        out.append(f"<h3>{_escape(p.workload)} — {_escape(p.headline)}</h3>")
        if p.prediction is not None:
            verdict = "differs — a finding in itself" if p.disagrees else "agrees"
            out.append(f"<p><i>Predicted before the run: {_escape(p.prediction.label)} ({verdict}).</i></p>")
        if p.advice:
            out.append("<ul>" + "".join(f"<li>{_escape(line)}</li>" for line in p.advice) + "</ul>")
    if not out:
        return "<p><i>Phases and advice appear when the baseline has finished trials.</i></p>"
    return "".join(out)


def _dropped_path(event: Any) -> Path | None:
    mime = event.mimeData()
    if not mime.hasUrls():
        return None
    for url in mime.urls():
        if url.isLocalFile():
            path = Path(url.toLocalFile())
            if path.suffix.lower() in (".toml", *DB_SUFFIXES):
                return path
    return None


def _escape(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")


def _slug(name: str) -> str:
    return "".join(c if c.isalnum() or c in "-_" else "-" for c in name).strip("-").lower() or "experiment"
