"""File → Open…, Open database…, Save spec (as…), and files dropped onto the window: a ``.toml`` is a
spec for the builder, anything else a results database.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from PySide6.QtWidgets import QFileDialog

__all__ = ["DB_SUFFIXES", "FileActions", "dropped_path"]

DB_SUFFIXES = (".db", ".sqlite", ".sqlite3")


class FileActions:
    """The file actions of ``window`` (its builder, database, settings' last folder)."""

    def __init__(self, window: Any) -> None:
        self.window = window

    def open_dialog(self, *_: Any) -> None:
        path, _filter = QFileDialog.getOpenFileName(
            self.window,
            "Open a spec or a results database",
            self.window.last_dir(),
            "Specs and results (*.toml *.db *.sqlite *.sqlite3);;Specs (*.toml);;Results databases (*.db *.sqlite *.sqlite3);;All files (*)",
        )
        if path:
            self.open_path(Path(path))

    def open_database_dialog(self, *_: Any) -> None:
        path, _filter = QFileDialog.getOpenFileName(
            self.window,
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
        if w.run_thread is not None:
            w.show_error("Open database", f"A run is writing to {w.db_path}; wait for it or cancel it first.")
            return False
        if not path.exists():
            w.show_error("Open database", f"no results database at {path}")
            return False
        if not w.open_store(path, create=False):
            return False
        w.shown_ids = ()
        runs = w.refresh_history()
        if runs:
            w.show_runs((runs[-1]["id"],))
        else:
            w.results_stack.setCurrentWidget(w.welcome)
            w.tabs.setCurrentWidget(w.results_stack)
        w.log_line(f"opened {path}")
        return True

    def open_spec(self, path: Path) -> bool:
        from workbench.core.errors import WorkbenchError
        from workbench.gui.draft import SpecDraft

        w = self.window
        try:
            draft = SpecDraft.load(path)
        except WorkbenchError as exc:
            w.show_error("Open spec", str(exc))
            return False
        w.builder.set_draft(draft)
        w.show_tab("experiment")
        w.log_line(f"opened spec {path}")
        return True

    def save_spec(self, *_: Any) -> None:
        builder = self.window.builder
        if builder is None:
            return
        if builder.draft.path is None:
            self.save_spec_as()
        else:
            self.save_to(builder.draft.path)

    def save_spec_as(self, *_: Any) -> None:
        w = self.window
        if w.builder is None:
            return
        draft = w.builder.draft
        start = str(draft.path or Path(w.last_dir()) / f"{_slug(draft.name)}.toml")
        path, _filter = QFileDialog.getSaveFileName(w, "Save spec", start, "Specs (*.toml)")
        if path:
            if not path.endswith(".toml"):
                path += ".toml"
            self.save_to(Path(path))

    def save_to(self, path: Path) -> bool:
        from workbench.core.errors import WorkbenchError

        w = self.window
        try:
            w.builder.draft.save(path)
        except WorkbenchError as exc:
            w.show_error("Save spec", str(exc))
            return False
        w.remember_dir(path)
        w.statusBar().showMessage(f"Saved {path}", 5000)
        w.log_line(f"saved spec {path}")
        return True


def dropped_path(event: Any) -> Path | None:
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
