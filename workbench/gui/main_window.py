"""The main window: its frame (tabs, status bar, banner), start-up, opening a database, settings,
drag-and-drop and closing; its menus and actions are built by :mod:`.menus`.

What the window works on — the database open, the runs on screen and their results, the run going
on — is its :class:`~workbench.gui.state.AppState` (``window.state``): the controllers write it, and
the window (title, actions), the History selection, the Results tab and the builder follow its
signals. What the actions do lives beside it, one module per responsibility, each a controller that
gets the window: :mod:`.run_control` (run, demo, cancel, the run thread's reports),
:mod:`.results_view` (loading and showing the runs on screen), :mod:`.export_actions`,
:mod:`.history_actions` (rename, delete, the list of runs) and :mod:`.file_actions` (open, save,
drop). Each controller names what it uses of the window in a Protocol beside it (``RunWindow``,
``ResultsWindow``, ``ExportWindow``, ``HistoryWindow``, ``FileWindow``), so that mypy checks every
use; the window satisfies them all. The window holds the controllers (``window.run_control``,
``window.results_view``...): menus, buttons, the app, the smoke test and the tests call their methods
directly (``window.run_control.start_run()``).

Start-up is in two steps so that the window is on screen fast: the constructor builds the frame with
Qt only; after the first paint, :meth:`MainWindow._finish_startup` builds the parts that import the
rest of the workbench (spec parser, strategy registry, analysis) and opens the database.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from PySide6.QtCore import QEvent, Qt, QTimer, Signal
from PySide6.QtGui import QAction, QCloseEvent, QDragEnterEvent, QDropEvent, QFont, QPaintEvent
from PySide6.QtWidgets import (
    QDialog,
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
    QVBoxLayout,
    QWidget,
)

from workbench.gui import MAIN_TABS
from workbench.gui.export_actions import ExportActions
from workbench.gui.file_actions import FileActions, dropped_path
from workbench.gui.glossary import TERMS
from workbench.gui.history_actions import HistoryActions
from workbench.gui.menus import build_menus
from workbench.gui.results_view import ResultsView
from workbench.gui.run_control import RunControl
from workbench.gui.settings import GuiSettings
from workbench.gui.state import AppState
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
    # the actions that what is on screen enables or not (set by menus.build_menus)
    open_action: QAction
    open_db_action: QAction
    save_action: QAction
    save_as_action: QAction
    export_data_action: QAction
    export_action: QAction
    copy_chart_action: QAction
    export_report_action: QAction
    export_all_action: QAction
    run_action: QAction
    cancel_action: QAction
    demo_action: QAction
    sample_action: QAction
    edit_spec_action: QAction
    project_action: QAction

    def __init__(
        self,
        db_path: Path,
        *,
        settings: GuiSettings | None = None,
        viewer: str | None = None,
        open_run: str | None = "latest",
    ) -> None:
        super().__init__()
        self.state = AppState(db_path, self)  # the database, the runs on screen, the run going on
        self.settings = settings
        self.viewer = viewer
        self.builder: ExperimentBuilder | None = None  # from the end of start-up
        self.loader: ResultsLoader | None = None  # from the end of start-up
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
        self._follow_state()
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

    def _follow_state(self) -> None:
        """The window's title and actions and the History selection follow the state (the Results tab
        follows it in :class:`~workbench.gui.results_view.ResultsView`, the builder's Run button from
        the end of start-up)."""
        state = self.state
        state.storeChanged.connect(lambda path: self.setWindowTitle(window_title(path)))
        state.resultsChanged.connect(self._results_changed)
        state.runningChanged.connect(lambda _running: self.update_actions())
        state.shownRunsChanged.connect(self._select_shown)

    def _results_changed(self, _results: ResultsData | None) -> None:
        self.update_actions()
        self.update_title()

    def _select_shown(self, run_ids: tuple[int, ...]) -> None:
        """A single run on screen is the one selected in the History tab."""
        if len(run_ids) == 1:
            self.history.select_run(run_ids[0])

    # -- the state, read-only (for tests and scripts; the code reads and writes ``self.state``) ------

    @property
    def db_path(self) -> Path:
        return self.state.db_path

    @property
    def store(self) -> Store | None:
        return self.state.store

    @property
    def results(self) -> ResultsData | None:
        return self.state.results

    @property
    def shown_ids(self) -> tuple[int, ...]:
        return self.state.shown_ids

    @property
    def run_thread(self) -> RunThread | None:
        return self.state.run_thread

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
        """The menu bar (File, Run, View, Help) and the window's actions (:mod:`.menus`)."""
        build_menus(self, TOP_TABS)
        self.update_actions()

    # -- start-up --------------------------------------------------------------------------------

    def paintEvent(self, event: QPaintEvent) -> None:
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
        self.state.runningChanged.connect(self.builder.set_running)
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
        self.open_store(self.state.db_path, create=False)
        runs, store = self.history_actions.refresh(), self.state.store
        if runs and self._open_run and store is not None:  # runs: from the store
            try:
                run = store.resolve_run(self._open_run)
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
            self.state.set_store(path, None)  # created by the first run (the title follows)
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
        if self.state.store is not None:
            self.state.store.close()
        self.state.set_store(path, store)  # the title follows; the run's name once it is on screen
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

    def show_glossary(self) -> QDialog:
        """Help → Glossary, scrolling (returned for tests)."""
        return glossary_dialog(self, TERMS)

    def show_about(self) -> None:
        from workbench import __version__

        QMessageBox.about(
            self,
            "About Workbench",
            f"<b>Workbench {__version__}</b><br>Compare LLM inference optimizations on your own hardware: "
            f"where the time goes, prefill vs decode.<br><br>Results database: {escape(str(self.state.db_path))}"
            + (f"<br><br>{escape(self.viewer)}" if self.viewer else ""),
        )

    def update_actions(self) -> None:
        """Enable what makes sense now (ready, running, a run or a chart on screen)."""
        running, results = self.state.running, self.state.results
        self.run_action.setEnabled(self.is_ready and not running and not self.viewer)
        self.demo_action.setEnabled(self.is_ready and not running and not self.viewer)
        self.cancel_action.setEnabled(running)
        has_run = results is not None and len(results.run_ids) == 1
        compared = results is not None and results.two_runs is not None
        has_chart = results is not None and bool(results.charts)
        for a in (self.export_data_action, self.export_report_action, self.export_all_action):
            a.setEnabled(has_run or compared)  # two runs: their comparison (compare A B --out)
        self.export_action.setEnabled(has_chart)
        self.copy_chart_action.setEnabled(has_chart)
        self.project_action.setEnabled(has_run)
        self.edit_spec_action.setEnabled(has_run and self.builder is not None)

    def update_title(self) -> None:
        """The window title names the run(s) on screen and the database file."""
        results = self.state.results
        runs = results.runs if results is not None and self.state.shown_ids else ()
        self.setWindowTitle(window_title(self.state.db_path, runs))

    def show_projection(self, *_: object) -> ProjectionDialog | None:
        """The what-if dialog on the run on screen (returned for tests; shown modeless)."""
        from workbench.gui.projection_dialog import ProjectionDialog

        if self.state.results is None:
            return None
        dialog = ProjectionDialog(self.state.results.trials, self)
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
        if self.state.running:
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
        if self.state.store is not None:
            self.state.store.close()
            self.state.set_store(self.state.db_path, None)
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
