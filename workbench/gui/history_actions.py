"""The History tab's actions on the database: list its runs, rename one, delete one (asking first; not
the run in progress). Opening and comparing runs is the Results tab's (:mod:`.results_view`); the
panel itself is :class:`~workbench.gui.history.HistoryPanel`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

from PySide6.QtWidgets import QInputDialog, QMessageBox, QStackedWidget, QWidget

if TYPE_CHECKING:
    from workbench.gui.history import HistoryPanel
    from workbench.gui.results_view import ResultsView
    from workbench.gui.state import AppState
    from workbench.gui.widgets import WelcomePage

__all__ = ["HistoryActions", "HistoryWindow"]


class HistoryWindow(Protocol):
    """What :class:`HistoryActions` uses of the window (:class:`~workbench.gui.main_window.MainWindow`)."""

    state: AppState  # the runs on screen and their results: emptied here when that run is deleted
    history: HistoryPanel
    results_stack: QStackedWidget
    welcome: WelcomePage
    results_view: ResultsView

    def window(self) -> QWidget: ...  # QWidget.window(): the parent of the dialogs
    def show_error(self, title: str, message: str) -> None: ...
    def log_line(self, line: str) -> None: ...


class HistoryActions:
    """The history actions of ``window`` (its state's store and runs on screen, its ``history`` panel)."""

    def __init__(self, window: HistoryWindow) -> None:
        self.window = window

    def refresh(self) -> list[dict[str, Any]]:
        """The runs in the database, into the History tab; returns them (oldest first)."""
        w, state = self.window, self.window.state
        runs = state.store.runs() if state.store is not None else []
        w.history.set_runs(runs, f"{state.db_path}  ·  {len(runs)} run(s)")
        return runs

    def rename_run(self, run_id: int, name: str | None = None) -> bool:
        w, store = self.window, self.window.state.store
        if store is None:
            return False
        run = store.resolve_run(run_id)
        if name is None:
            name, ok = QInputDialog.getText(
                w.window(), "Rename run", f"New name for run {run_id}:", text=run["name"]
            )
            if not ok:
                return False
        name = name.strip()
        if not name:
            w.show_error("Rename run", "A run needs a name.")
            return False
        store.rename_run(run_id, name)
        self.refresh()
        if run_id in w.state.shown_ids:
            w.results_view.refresh()
        return True

    def delete_run(self, run_id: int, *, confirm: bool = True) -> bool:
        w, state = self.window, self.window.state
        store, thread = state.store, state.run_thread
        if store is None:
            return False
        if thread is not None and thread.run_id == run_id:
            w.show_error("Delete run", "This run is still running; cancel it first.")
            return False
        run = store.resolve_run(run_id)
        if confirm:
            answer = QMessageBox.question(
                w.window(),
                "Delete run",
                f"Delete run {run_id} '{run['name']}' and all its trials from {state.db_path.name}? "
                "This cannot be undone.",
                QMessageBox.StandardButton.Yes | QMessageBox.StandardButton.Cancel,
                QMessageBox.StandardButton.Cancel,
            )
            if answer != QMessageBox.StandardButton.Yes:
                return False
        store.delete_run(run_id)
        w.log_line(f"deleted run {run_id} '{run['name']}'")
        runs = self.refresh()
        if run_id in state.shown_ids:
            state.clear_shown()  # the window's title and actions follow
            if runs:
                w.results_view.show_runs((runs[-1]["id"],))
            else:
                w.results_stack.setCurrentWidget(w.welcome)
        return True
