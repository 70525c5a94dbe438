"""The main window: its frame (tabs, status bar, banner), menus and actions, start-up, the database it
has open, settings, drag-and-drop and closing.

What the actions do lives beside it, one module per responsibility, each a controller that gets the
window: :mod:`.run_control` (run, demo, cancel, the run thread's reports), :mod:`.results_view`
(loading and showing the runs on screen), :mod:`.export_actions`, :mod:`.history_actions` (rename,
delete, the list of runs) and :mod:`.file_actions` (open, save, drop). Each controller names what it
uses of the window in a Protocol beside it (``RunWindow``, ``ResultsWindow``, ``ExportWindow``,
``HistoryWindow``, ``FileWindow``), so that mypy checks every use; the window satisfies them all. The
window holds the controllers (``window.run_control``, ``window.results_view``...): menus, buttons,
the app, the smoke test and the tests call their methods directly (``window.run_control.start_run()``).

Start-up is in two steps so that the window is on screen fast: the constructor builds the frame with
Qt only; after the first paint, :meth:`MainWindow._finish_startup` builds the parts that import the
rest of the workbench (spec parser, strategy registry, analysis) and opens the database.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from PySide6.QtCore import QEvent, Qt, QTimer, Signal
from PySide6.QtGui import QAction, QCloseEvent, QDragEnterEvent, QDropEvent, QFont, QKeySequence
from PySide6.QtWidgets import (
    QLabel,
    QMainWindow,
    QMenu,
    QMessageBox,
    QPlainTextEdit,
    QProgressBar,
    QPushButton,
    QSplitter,
    QStackedWidget,
    QTabWidget,
    QTextBrowser,
    QVBoxLayout,
    QWidget,
)

from workbench.gui import MAIN_TABS
from workbench.gui.export_actions import ExportActions
from workbench.gui.file_actions import FileActions, dropped_path
from workbench.gui.glossary import TERMS
from workbench.gui.history_actions import HistoryActions
from workbench.gui.results_view import ResultsView
from workbench.gui.run_control import RunControl
from workbench.gui.settings import GuiSettings
from workbench.gui.widgets import LOG_PLACEHOLDER, Banner, WelcomePage, escape, glossary_dialog, window_title

if TYPE_CHECKING:
    from workbench.gui.builder import ExperimentBuilder
    from workbench.gui.chartview import ChartPanel
    from workbench.gui.loading import ResultsData, ResultsLoader
    from workbench.gui.projection_dialog import ProjectionDialog
    from workbench.gui.running import RunThread
    from workbench.store import Store

__all__ = ["MainWindow", "viewer_reason"]

TOP_TABS = MAIN_TABS  # the main tabs, as --tab names them


def chart_tab_names() -> dict[str, str]:
    """--tab names of the chart tabs → a chart key shown in that tab (the chart kinds' list)."""
    from workbench.charts.registry import chart_tabs, kinds_in

    return {tab.name: kinds_in(tab)[0] for tab in chart_tabs()}


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


class MainWindow(QMainWindow):
    """``ready`` fires once start-up has finished; ``resultsShown`` after the results view updated.

    Satisfies the controllers' Protocols (:class:`~workbench.gui.run_control.RunWindow`,
    :class:`~workbench.gui.results_view.ResultsWindow`, :class:`~workbench.gui.export_actions.ExportWindow`,
    :class:`~workbench.gui.history_actions.HistoryWindow`, :class:`~workbench.gui.file_actions.FileWindow`).
    """

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
        self.store: Store | None = None
        self.builder: ExperimentBuilder | None = None  # from the end of start-up
        self.loader: ResultsLoader | None = None  # from the end of start-up
        self.results: ResultsData | None = None  # what the Results tab shows
        self.shown_ids: tuple[int, ...] = ()
        self.run_thread: RunThread | None = None  # while a run goes on (run_control sets it)
        self.is_ready = False
        self.last_message = ""  # the last error or notice shown in a message box (for tests and logs)
        self._open_run = open_run
        self._started = False
        self._ask_before_closing = True  # about a run in progress (not on a quit signal)
        self.run_control = RunControl(self)
        self.results_view = ResultsView(self)
        self.export_actions = ExportActions(self)
        self.history_actions = HistoryActions(self)
        self.file_actions = FileActions(self)
        self.setWindowTitle(window_title(db_path))
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
        self.log.setPlaceholderText(LOG_PLACEHOLDER)  # never blank: what it will show, and how
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
        self.cancel_btn.clicked.connect(self.run_control.cancel_run)
        self.statusBar().addWidget(self.progress_label, 1)
        self.statusBar().addPermanentWidget(self.progress)
        self.statusBar().addPermanentWidget(self.cancel_btn)

        self.welcome.demo_btn.clicked.connect(self.run_control.run_demo)
        self.welcome.sample_btn.clicked.connect(self.file_actions.open_sample)
        self.welcome.build_btn.clicked.connect(lambda: self.show_tab("experiment"))
        self.welcome.open_btn.clicked.connect(self.file_actions.open_database_dialog)
        self.history.openRequested.connect(lambda run_id: self.results_view.show_runs((run_id,)))
        self.history.compareRequested.connect(lambda a, b: self.results_view.show_runs((a, b)))
        self.history.renameRequested.connect(self.history_actions.rename_run)
        self.history.deleteRequested.connect(self.history_actions.delete_run)
        self.history.editSpecRequested.connect(self.file_actions.edit_run_spec)
        self.resultsShown.connect(lambda _data: self.update_title())

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
        # the answer first: per workload the fastest variant end to end, its cost, how far to trust it
        self.verdict = QLabel()
        self.verdict.setObjectName("verdict")
        self.verdict.setWordWrap(True)
        self.verdict.setTextFormat(Qt.TextFormat.RichText)
        self.verdict.setTextInteractionFlags(Qt.TextInteractionFlag.TextSelectableByMouse)
        self.verdict.setStyleSheet("QLabel#verdict{background:#f3f7ff;border:1px solid #c9d8f0;padding:6px}")
        self.verdict.hide()
        # the chart panel, built after the first paint (pyqtgraph is slow to import)
        self.charts: ChartPanel | None = None
        self.table_model = SummaryTableModel(self)
        self.table = make_table_view(self.table_model, settings=self.settings)
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
        layout.addWidget(self.verdict)
        layout.addWidget(self.results_split, 1)
        return page

    def _build_actions(self) -> None:
        """The menu bar (File, Run, View, Help) and the window's actions, with their shortcuts."""
        menu = self.menuBar()
        self._build_file_menu(menu.addMenu("&File"))
        self._build_run_menu(menu.addMenu("&Run"))
        self._build_view_menu(menu.addMenu("&View"))
        self._build_help_menu(menu.addMenu("&Help"))
        self.update_actions()

    def _action(self, text: str, slot: Any, shortcut: Any = None, tip: str = "") -> QAction:
        """An action of the window (its shortcut works wherever the focus is) that calls ``slot``."""
        a = QAction(text, self)
        if shortcut is not None:
            a.setShortcut(QKeySequence(shortcut))
        if tip:
            a.setStatusTip(tip)
            a.setToolTip(tip)
        a.triggered.connect(slot)
        self.addAction(a)
        return a

    def _build_file_menu(self, file_menu: QMenu) -> None:
        action, files, exports = self._action, self.file_actions, self.export_actions
        self.open_action = action(
            "&Open…",
            files.open_dialog,
            QKeySequence.StandardKey.Open,
            "Open a spec (.toml) or a results database (.db)",
        )
        self.open_db_action = action("Open &database…", files.open_database_dialog)
        self.save_action = action("&Save spec", files.save_spec, QKeySequence.StandardKey.Save)
        self.save_as_action = action("Save spec &as…", files.save_spec_as, QKeySequence.StandardKey.SaveAs)
        self.export_data_action = action(
            "Export run &data (CSV)…",
            exports.export_data,
            tip="trials.csv, steps.csv, summary.csv, phases.csv, summary.json and every chart's data",
        )
        self.export_action = action(
            "&Export chart…",
            exports.export_current_chart,
            "Ctrl+E",
            "The chart on screen as PNG (2x) or SVG",
        )
        self.copy_chart_action = action(
            "&Copy chart",
            exports.copy_current_chart,
            "Ctrl+Shift+C",
            "The chart on screen, as an image",
        )
        self.export_report_action = action(
            "Export &report (HTML)…",
            exports.export_report,
            tip="One self-contained page: charts, tables, advice",
        )
        self.export_all_action = action(
            "Export &all…",
            exports.export_all,
            tip="Everything `workbench export` writes, into a folder",
        )
        quit_action = action("&Quit", self.close, QKeySequence.StandardKey.Quit)
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

    def _build_run_menu(self, run_menu: QMenu) -> None:
        action, runs, files = self._action, self.run_control, self.file_actions
        self.run_action = action("&Run", runs.start_run, "Ctrl+R", "Run the experiment in the builder")
        self.cancel_action = action(
            "&Cancel run", runs.cancel_run, "Esc", "Stop at the next token; keep finished trials"
        )
        self.cancel_action.setEnabled(False)
        self.demo_action = action("Run the &demo comparison", runs.run_demo)
        self.sample_action = action(
            "Open the &sample run",
            files.open_sample,
            tip="The demo's run that ships with Workbench",
        )
        self.edit_spec_action = action(
            "&Edit this run's spec",
            files.edit_run_spec,
            tip="The spec the run on screen was made from, in the builder: change it and run again",
        )
        self.project_action = action(
            "&What if… (project lengths)",
            self.show_projection,
            tip="TTFT and e2e at an input/output length the run did not try, from its fitted lines",
        )
        for a in (
            self.run_action,
            self.cancel_action,
            None,
            self.edit_spec_action,
            self.demo_action,
            self.sample_action,
            None,
            self.project_action,
        ):
            run_menu.addSeparator() if a is None else run_menu.addAction(a)

    def _build_view_menu(self, view_menu: QMenu) -> None:
        """The main tabs, Ctrl+1 to Ctrl+4."""
        for i, name in enumerate(TOP_TABS):
            view_menu.addAction(
                self._action(name.capitalize(), lambda _=False, n=name: self.show_tab(n), f"Ctrl+{i + 1}")
            )

    def _build_help_menu(self, help_menu: QMenu) -> None:
        help_menu.addAction(self._action("&Glossary", self.show_glossary))
        help_menu.addAction(self._action("&About Workbench", self.show_about))

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
        self.loader.warm_up()  # its child imports the analysis while the rest is built here (a thread: imported here)
        from workbench.gui.builder import ExperimentBuilder

        self.builder = ExperimentBuilder()
        self.builder.setObjectName("builder")
        self.builder.set_viewer_reason(self.viewer)
        self.builder.runRequested.connect(self.run_control.start_run)
        self.builder.save_btn.clicked.connect(self.file_actions.save_spec_as)
        experiment_layout = self.experiment_page.layout()
        assert experiment_layout is not None  # set in _build_ui
        experiment_layout.addWidget(self.builder)
        from workbench.gui.chartview import ChartPanel

        self.charts = ChartPanel(export=self.export_actions.export_chart)
        self.results_split.insertWidget(0, self.charts)
        self.results_split.setStretchFactor(0, 3)
        self.results_split.setStretchFactor(1, 2)
        self.results_split.setSizes([500, 300])
        self.bottom_split.setSizes([950, 400])  # the table's first-read columns fit beside the advice
        if self.settings is not None:
            for name, splitter in (("results", self.results_split), ("bottom", self.bottom_split)):
                state = self.settings.splitter(name)
                if state is not None:
                    splitter.restoreState(state)
        self.open_store(self.db_path, create=False)
        runs = self.history_actions.refresh()
        if runs and self._open_run and self.store is not None:  # runs: from the store
            try:
                run = self.store.resolve_run(self._open_run)
            except Exception as exc:  # StoreError: an id that is not there
                self.show_error("Open run", str(exc))
            else:
                self.results_view.show_runs((run["id"],))
        if not runs:
            self.results_stack.setCurrentWidget(self.welcome)
            self.tabs.setCurrentWidget(self.results_stack)
        self.is_ready = True
        self.update_actions()
        self.ready.emit()

    # -- database ---------------------------------------------------------------------------------

    def open_store(self, path: Path, *, create: bool, quiet: bool = False) -> bool:
        """Make ``path`` the database the window reads (a missing one: created by the first run)."""
        from workbench.core.errors import WorkbenchError
        from workbench.store import Store

        if not path.exists() and not create:
            self.db_path, self.store = path, None  # created by the first run
            self.setWindowTitle(window_title(path))
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
        self.setWindowTitle(window_title(path))  # the run's name follows once it is on screen
        if self.settings is not None:
            self.settings.last_db = path.resolve()
        return True

    # -- small things ----------------------------------------------------------------------------

    def show_tab(self, name: str) -> None:
        """A main tab (``experiment``...) or a chart tab (``headline``, ``timeline``...)."""
        if name in (chart_tabs := chart_tab_names()):
            self.tabs.setCurrentWidget(self.results_stack)
            if self.charts is not None:
                self.charts.show_tab(chart_tabs[name])
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

    def show_glossary(self) -> Any:
        """Help → Glossary, scrolling (returned for tests)."""
        return glossary_dialog(self, TERMS)

    def show_about(self) -> None:
        from workbench import __version__

        QMessageBox.about(
            self,
            "About Workbench",
            f"<b>Workbench {__version__}</b><br>Compare LLM inference optimizations on your own hardware: "
            f"where the time goes, prefill vs decode.<br><br>Results database: {escape(str(self.db_path))}"
            + (f"<br><br>{escape(self.viewer)}" if self.viewer else ""),
        )

    def update_actions(self) -> None:
        """Enable what makes sense now (ready, running, a run or a chart on screen)."""
        running = self.run_thread is not None
        self.run_action.setEnabled(self.is_ready and not running and not self.viewer)
        self.demo_action.setEnabled(self.is_ready and not running and not self.viewer)
        self.cancel_action.setEnabled(running)
        has_run = self.results is not None and len(self.results.run_ids) == 1
        compared = self.results is not None and getattr(self.results, "two_runs", None) is not None
        has_chart = self.results is not None and bool(self.results.charts)
        for a in (self.export_data_action, self.export_report_action, self.export_all_action):
            a.setEnabled(has_run or compared)  # two runs: their comparison (compare A B --out)
        self.export_action.setEnabled(has_chart)
        self.copy_chart_action.setEnabled(has_chart)
        self.project_action.setEnabled(has_run)
        self.edit_spec_action.setEnabled(has_run and self.builder is not None)

    def update_title(self) -> None:
        """The window title names the run(s) on screen and the database file."""
        runs = self.results.runs if self.results is not None and self.shown_ids else ()
        self.setWindowTitle(window_title(self.db_path, runs))

    def show_projection(self, *_: Any) -> ProjectionDialog | None:
        """The what-if dialog on the run on screen (returned for tests; shown modeless)."""
        from workbench.gui.projection_dialog import ProjectionDialog

        if self.results is None:
            return None
        dialog = ProjectionDialog(self.results.trials, self)
        dialog.show()
        return dialog

    def last_dir(self) -> str:
        """Where file dialogs start: the folder used last."""
        return self.settings.last_dir if self.settings is not None else str(Path.cwd())

    def remember_dir(self, path: Path) -> None:
        if self.settings is not None:
            self.settings.last_dir = str(path.resolve().parent)

    # -- Qt events -------------------------------------------------------------------------------

    def dragEnterEvent(self, event: QDragEnterEvent) -> None:
        if dropped_path(event) is not None:
            event.acceptProposedAction()
        else:
            event.ignore()

    def dropEvent(self, event: QDropEvent) -> None:
        path = dropped_path(event)
        if path is None:
            event.ignore()
            return
        event.acceptProposedAction()
        # after the drop returns: a message box inside a drop handler upsets some platforms
        QTimer.singleShot(0, lambda: self.file_actions.open_path(path))

    def changeEvent(self, event: QEvent) -> None:
        super().changeEvent(event)
        if event.type() == QEvent.Type.PaletteChange and self.banner.isVisible():
            self.banner.show_message(self.banner.label.text())  # recolour for light/dark

    def closeEvent(self, event: QCloseEvent) -> None:
        if self.run_thread is not None:
            if self._ask_before_closing:
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
            self.run_control.stop_run_and_wait()
        self.save_settings()
        if self.loader is not None:
            self.loader.close()
        if self.store is not None:
            self.store.close()
            self.store = None
        super().closeEvent(event)

    def close_now(self) -> None:
        """Close without asking (on a quit signal): a run in progress is cancelled (its finished trials
        are kept), then what closing always does: settings saved, the loader's child stopped."""
        self._ask_before_closing = False
        self.close()

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
