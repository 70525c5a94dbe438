"""What the app remembers between starts: window geometry, the last database, the last folder, the
results table's columns.

An INI file in the platform's user-config folder (``$WORKBENCH_GUI_SETTINGS`` overrides the path, which
the tests use so that they never touch a developer's settings).
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from PySide6.QtCore import QByteArray, QSettings

__all__ = ["GuiSettings", "settings_path"]


def settings_path() -> Path:
    if os.environ.get("WORKBENCH_GUI_SETTINGS"):
        return Path(os.environ["WORKBENCH_GUI_SETTINGS"]).expanduser()
    from platformdirs import user_config_dir

    return Path(user_config_dir("workbench", appauthor=False)) / "gui.ini"


class GuiSettings:
    def __init__(self, path: Path | None = None) -> None:
        self.path = path or settings_path()
        self._q = QSettings(str(self.path), QSettings.Format.IniFormat)

    def _bytes(self, key: str) -> QByteArray | None:
        value = self._q.value(key)
        return value if isinstance(value, QByteArray) and not value.isEmpty() else None

    @property
    def geometry(self) -> QByteArray | None:
        return self._bytes("window/geometry")

    @geometry.setter
    def geometry(self, value: QByteArray) -> None:
        self._q.setValue("window/geometry", value)

    @property
    def window_state(self) -> QByteArray | None:
        return self._bytes("window/state")

    @window_state.setter
    def window_state(self, value: QByteArray) -> None:
        self._q.setValue("window/state", value)

    def splitter(self, name: str) -> QByteArray | None:
        return self._bytes(f"splitters/{name}")

    def set_splitter(self, name: str, value: QByteArray) -> None:
        self._q.setValue(f"splitters/{name}", value)

    @property
    def last_db(self) -> Path | None:
        value = self._q.value("files/last_db")
        return Path(value) if value else None

    @last_db.setter
    def last_db(self, value: Path) -> None:
        self._q.setValue("files/last_db", str(value))

    @property
    def last_dir(self) -> str:
        return str(self._q.value("files/last_dir") or Path.home())

    @last_dir.setter
    def last_dir(self, value: str | Path) -> None:
        self._q.setValue("files/last_dir", str(value))

    @property
    def table_columns(self) -> list[str] | None:
        """The results table's visible columns (None: never chosen, the first-read ones)."""
        value = self._q.value("table/columns")
        if not value:
            return None
        try:
            names = json.loads(str(value))
        except ValueError:
            return None
        return [str(n) for n in names] if isinstance(names, list) else None

    @table_columns.setter
    def table_columns(self, names: list[str]) -> None:
        self._q.setValue("table/columns", json.dumps(list(names)))

    def sync(self) -> None:
        self._q.sync()
