"""File → Open…, Open database…, Save spec (as…), the sample run, a run's spec back into the builder,
and files dropped onto the window: a ``.toml`` is a spec for the builder, anything else a results
database.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from PySide6.QtWidgets import QFileDialog, QStackedWidget, QStatusBar, QTabWidget, QWidget

if TYPE_CHECKING:
    from PySide6.QtGui import QDropEvent

    from workbench.gui.builder import ExperimentBuilder
    from workbench.gui.history_actions import HistoryActions
    from workbench.gui.results_view import ResultsView
    from workbench.gui.state import AppState
    from workbench.gui.widgets import WelcomePage

__all__ = ["DB_SUFFIXES", "FileActions", "FileWindow", "dropped_path", "sample_copy_path"]

DB_SUFFIXES = (".db", ".sqlite", ".sqlite3")


class FileWindow(Protocol):
    """What :class:`FileActions` uses of the window (:class:`~workbench.gui.main_window.MainWindow`)."""

    state: AppState  # its shown runs emptied here when another database is opened
    builder: ExperimentBuilder | None  # None until start-up has finished
    tabs: QTabWidget
    results_stack: QStackedWidget
    welcome: WelcomePage
    history_actions: HistoryActions
    results_view: ResultsView

    def window(self) -> QWidget: ...  # QWidget.window(): the parent of the dialogs
    def statusBar(self) -> QStatusBar: ...
    def show_error(self, title: str, message: str) -> None: ...
    def show_tab(self, name: str) -> None: ...
    def log_line(self, line: str) -> None: ...
    def open_store(self, path: Path, *, create: bool, quiet: bool = False) -> bool: ...
    def last_dir(self) -> str: ...
    def remember_dir(self, path: Path) -> None: ...


class FileActions:
    """The file actions of ``window`` (its builder, database, settings' last folder)."""

    def __init__(self, window: FileWindow) -> None:
        self.window = window

    def open_dialog(self, *_: object) -> None:
        path, _filter = QFileDialog.getOpenFileName(
            self.window.window(),
            "Open a spec or a results database",
            self.window.last_dir(),
            "Specs and results (*.toml *.db *.sqlite *.sqlite3);;Specs (*.toml);;Results databases (*.db *.sqlite *.sqlite3);;All files (*)",
        )
        if path:
            self.open_path(Path(path))

    def open_database_dialog(self, *_: object) -> None:
        path, _filter = QFileDialog.getOpenFileName(
            self.window.window(),
            "Open a results database",
            self.window.last_dir(),
            "Results databases (*.db *.sqlite *.sqlite3);;All files (*)",
        )
        if path:
            self.open_database(Path(path))

    def open_path(self, path: Path) -> bool:
        """A ``.toml`` goes into the builder; anything else is opened as a results database."""
        self.window.remember_dir(path)
        if path.suffix.lower() == ".toml":
            return self.open_spec(path)
        return self.open_database(path)

    def open_database(self, path: Path) -> bool:
        w = self.window
        if w.state.running:
            w.show_error(
                "Open database", f"A run is writing to {w.state.db_path}; wait for it or cancel it first."
            )
            return False
        if not path.exists():
            w.show_error("Open database", f"no results database at {path}")
            return False
        if not w.open_store(path, create=False):
            return False
        w.state.clear_shown()  # the other database's runs and their results leave the screen
        runs = w.history_actions.refresh()
        if runs:
            w.results_view.show_runs((runs[-1]["id"],))
        else:
            w.results_stack.setCurrentWidget(w.welcome)
            w.tabs.setCurrentWidget(w.results_stack)
        w.log_line(f"opened {path}")
        return True

    def open_sample(self, *_: object) -> bool:
        """Open the sample run that ships with the app (``resources/sample/demo.db``, one run of
        ``workbench demo``) from a copy in the user-data folder, made afresh when the shipped one is newer."""
        import shutil

        from workbench.core.resources import resource_path

        w = self.window
        source, copy = resource_path("sample", "demo.db"), sample_copy_path()  # as gui.smoke.sample_db
        if not source.is_file():
            w.show_error("Open the sample run", f"the sample database is missing ({source})")
            return False
        try:
            if not copy.is_file() or copy.stat().st_mtime < source.stat().st_mtime:
                copy.parent.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(source, copy)
        except OSError as exc:
            w.show_error("Open the sample run", f"cannot copy the sample to {copy}: {exc.strerror or exc}")
            return False
        return self.open_database(copy)

    def edit_run_spec(self, run_id: object = None) -> bool:
        """The spec a run was made from (``runs.spec``, as written) into the builder, to change and run
        again. ``run_id``: the run (default: the one on screen)."""
        from workbench.core.errors import WorkbenchError
        from workbench.gui.draft import SpecDraft

        w = self.window
        shown, store = w.state.shown_ids, w.state.store
        if not isinstance(run_id, int) or isinstance(run_id, bool):  # a menu's "checked" is no run
            run_id = shown[0] if len(shown) == 1 else None
        if run_id is None or store is None or w.builder is None:
            w.show_error("Edit the run's spec", "Open a run first (History, or the Results tab).")
            return False
        try:
            run = store.resolve_run(run_id)
            text = run.get("spec") or ""
            if not text.strip():
                raise WorkbenchError(f"run {run_id} has no stored spec")
            draft = SpecDraft.from_text(text, base_dir=Path.cwd())
        except WorkbenchError as exc:
            w.show_error("Edit the run's spec", str(exc))
            return False
        draft.path = None  # not a file of the user's: Save asks where
        w.builder.set_draft(draft)
        w.show_tab("experiment")
        w.log_line(
            f"the spec of run {run_id} ({run.get('name')}) is in the builder; relative paths in it are "
            f"taken from {Path.cwd()}"
        )
        return True

    def open_spec(self, path: Path) -> bool:
        from workbench.core.errors import WorkbenchError
        from workbench.gui.draft import SpecDraft

        w = self.window
        if w.builder is None:  # before start-up has finished: no builder to open it in
            return False
        try:
            draft = SpecDraft.load(path)
        except WorkbenchError as exc:
            w.show_error("Open spec", str(exc))
            return False
        w.builder.set_draft(draft)
        w.show_tab("experiment")
        w.log_line(f"opened spec {path}")
        return True

    def save_spec(self, *_: object) -> None:
        builder = self.window.builder
        if builder is None:
            return
        if builder.draft.path is None:
            self.save_spec_as()
        else:
            self.save_to(builder.draft.path)

    def save_spec_as(self, *_: object) -> None:
        w = self.window
        if w.builder is None:
            return
        draft = w.builder.draft
        start = str(draft.path or Path(w.last_dir()) / f"{_slug(draft.name)}.toml")
        path, _filter = QFileDialog.getSaveFileName(w.window(), "Save spec", start, "Specs (*.toml)")
        if path:
            if not path.endswith(".toml"):
                path += ".toml"
            self.save_to(Path(path))

    def save_to(self, path: Path) -> bool:
        from workbench.core.errors import WorkbenchError

        w = self.window
        if w.builder is None:  # before start-up has finished: no spec to save
            return False
        try:
            w.builder.draft.save(path)
        except WorkbenchError as exc:
            w.show_error("Save spec", str(exc))
            return False
        w.remember_dir(path)
        w.statusBar().showMessage(f"Saved {path}", 5000)
        w.log_line(f"saved spec {path}")
        return True


def sample_copy_path() -> Path:
    """Where the sample run is copied to be opened: beside the default results database (the shipped
    one may sit in a read-only folder, and SQLite writes beside a database it opens)."""
    from workbench.store.paths import default_db_path

    return default_db_path().parent / "sample-demo.db"


def dropped_path(event: QDropEvent) -> Path | None:
    """The first local spec or database file a drag carries, else None."""
    mime = event.mimeData()
    if not mime.hasUrls():
        return None
    for url in mime.urls():
        if url.isLocalFile():
            path = Path(url.toLocalFile())
            if path.suffix.lower() in (".toml", *DB_SUFFIXES):
                return path
    return None


def _slug(name: str) -> str:
    return "".join(c if c.isalnum() or c in "-_" else "-" for c in name).strip("-").lower() or "experiment"
