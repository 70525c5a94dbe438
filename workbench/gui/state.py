"""What the window works on, in one typed object: the database open (its path and store), the runs on
screen, the results loaded for them, the run going on. The controllers (:mod:`.run_control`,
:mod:`.results_view`, :mod:`.history_actions`, :mod:`.file_actions`, :mod:`.export_actions`) read and
write it here, never as attributes of the window; the window and the views follow its change signals
(the title, the actions, the History selection, the Results tab, the builder's Run button). A setter
emits its signal only when the value changed.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from PySide6.QtCore import QObject, Signal

if TYPE_CHECKING:
    from workbench.gui.loading import ResultsData
    from workbench.gui.running import RunThread
    from workbench.store import Store

__all__ = ["AppState"]


class AppState(QObject):
    """``storeChanged(Path)``: another database is open (its store may be None: a file a run creates);
    ``shownRunsChanged(tuple[int, ...])``: the runs the Results tab is to show; ``resultsChanged(ResultsData
    | None)``: what it shows now; ``runningChanged(bool)``: a run started or ended."""

    storeChanged = Signal(object)  # Path
    shownRunsChanged = Signal(object)  # tuple[int, ...]
    resultsChanged = Signal(object)  # ResultsData | None
    runningChanged = Signal(bool)

    def __init__(self, db_path: Path, parent: QObject | None = None) -> None:
        super().__init__(parent)
        self._db_path = db_path
        self._store: Store | None = None
        self._shown_ids: tuple[int, ...] = ()
        self._results: ResultsData | None = None
        self._run_thread: RunThread | None = None

    # -- read ------------------------------------------------------------------------------------

    @property
    def db_path(self) -> Path:
        """The results database the window reads (a missing file: created by the first run)."""
        return self._db_path

    @property
    def store(self) -> Store | None:
        """Its open store; None while the file does not exist yet."""
        return self._store

    @property
    def shown_ids(self) -> tuple[int, ...]:
        """The runs the Results tab shows (one, or two compared); () for none."""
        return self._shown_ids

    @property
    def results(self) -> ResultsData | None:
        """What the Results tab shows (loaded for :attr:`shown_ids`); the exports reuse it."""
        return self._results

    @property
    def run_thread(self) -> RunThread | None:
        """The run going on, or None."""
        return self._run_thread

    @property
    def running(self) -> bool:
        return self._run_thread is not None

    # -- write -----------------------------------------------------------------------------------

    def set_store(self, db_path: Path, store: Store | None) -> None:
        """The database now open; closing the one before is the caller's (it may be kept on failure)."""
        changed = db_path != self._db_path or store is not self._store
        self._db_path, self._store = db_path, store
        if changed:
            self.storeChanged.emit(db_path)

    def show_runs(self, run_ids: tuple[int, ...]) -> None:
        """The runs to show; their results follow (:meth:`set_results`) once loaded."""
        run_ids = tuple(run_ids)
        if run_ids != self._shown_ids:
            self._shown_ids = run_ids
            self.shownRunsChanged.emit(run_ids)

    def set_results(self, results: ResultsData | None) -> None:
        if results is not self._results:
            self._results = results
            self.resultsChanged.emit(results)

    def clear_shown(self) -> None:
        """Nothing on screen (another database, the run on screen deleted)."""
        self.show_runs(())
        self.set_results(None)

    def set_running(self, thread: RunThread | None) -> None:
        was = self.running
        self._run_thread = thread
        if self.running != was:
            self.runningChanged.emit(self.running)
