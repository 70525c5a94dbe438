"""Starting the app: ``workbench gui`` (and the analysts' packaged viewer) end up in :func:`run_gui`.

``--screenshot OUT.png`` opens the latest run, waits until it is rendered, saves the window and exits:
the README's picture and a cheap end-to-end check of the whole window. ``WORKBENCH_GUI_PROBE=startup``
makes the app print the time its window was first painted and quit (``benchmarks/gui_startup.py``).
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path
from typing import Any

from PySide6.QtCore import QEvent, QObject, QTimer, QtMsgType, qInstallMessageHandler
from PySide6.QtGui import QIcon
from PySide6.QtWidgets import QApplication

from workbench.core.errors import WorkbenchError
from workbench.core.resources import resource_path
from workbench.gui import TAB_NAMES

__all__ = ["SCREENSHOT_SIZE", "TAB_NAMES", "dispose", "make_app", "run_gui", "save_screenshot"]

SCREENSHOT_SIZE = (1400, 900)


def check_display() -> None:
    """Fail with one line rather than let Qt abort the process when there is no display."""
    if sys.platform.startswith("linux") and not (
        os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY") or os.environ.get("QT_QPA_PLATFORM")
    ):
        raise WorkbenchError(
            "no display (DISPLAY and WAYLAND_DISPLAY are unset); run it on a desktop, use "
            "`--screenshot OUT.png` to render headless, or set QT_QPA_PLATFORM=offscreen"
        )


#: Qt messages that say nothing to a user (the offscreen platform's, when rendering headless)
_QUIET = ("This plugin does not support propagateSizeHints()",)


def _qt_messages(mode: QtMsgType, context: Any, message: str) -> None:
    if message not in _QUIET:
        sys.stderr.write(message + "\n")


def make_app(argv: list[str] | None = None) -> QApplication:
    qInstallMessageHandler(_qt_messages)
    app = QApplication.instance()
    if app is None:
        app = QApplication(argv if argv is not None else [sys.argv[0]])
    app.setApplicationName("Workbench")
    app.setOrganizationName("workbench")
    app.setApplicationDisplayName("Workbench")
    app.setWindowIcon(QIcon(str(resource_path("icons", "workbench.png"))))
    if getattr(sys, "frozen", False):
        app.setDesktopFileName("workbench-viewer")  # the packaged viewer's .desktop entry (Wayland)
    return app  # type: ignore[return-value]


def resolve_gui_db(db: Path | None, settings: Any) -> Path:
    """``--db``, then ``$WORKBENCH_DB``, then the database opened last time, then the default."""
    from workbench.store.paths import resolve_db_path

    if db is not None or os.environ.get("WORKBENCH_DB"):
        return resolve_db_path(db)
    last = settings.last_db if settings is not None else None
    if last is not None and last.exists():
        return last
    return resolve_db_path(None)


def run_gui(
    db: Path | None = None,
    *,
    screenshot: Path | None = None,
    tab: str | None = None,
    run: str = "latest",
    viewer: bool = False,
) -> int:
    """Open the main window; returns the exit code."""
    from workbench.gui.main_window import MainWindow, viewer_reason
    from workbench.gui.settings import GuiSettings

    if tab is not None and tab not in TAB_NAMES:
        raise WorkbenchError(f"unknown tab {tab!r}; tabs: {', '.join(TAB_NAMES)}")
    if screenshot is not None:
        os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")
        if screenshot.suffix.lower() not in (".png", ".jpg", ".jpeg"):
            raise WorkbenchError(f"--screenshot writes a .png (or .jpg), got {screenshot.name}")
    else:
        check_display()
    probe = os.environ.get("WORKBENCH_GUI_PROBE") == "startup"
    app = make_app()
    settings = None if screenshot is not None else GuiSettings()
    db_path = resolve_gui_db(db, settings)
    if screenshot is not None and not db_path.exists():
        raise WorkbenchError(f"no results database at {db_path}")
    if screenshot is not None and db_path.exists():  # not a database, or not ours: one line, exit 2
        from workbench.store import Store

        Store(db_path, create=False).close()
    window = MainWindow(db_path, settings=settings, viewer=viewer_reason(viewer), open_run=run)
    if screenshot is not None:
        return _screenshot(app, window, screenshot, tab)
    window.restore_settings()
    if probe:
        _StartupProbe(window)
    window.show()
    if tab is not None:
        window.ready.connect(lambda: window.show_tab(tab))
    code = app.exec()
    dispose(window)
    return code


def dispose(window: Any) -> None:
    """Close the window and delete it now, while the QApplication lives: left to the interpreter's
    shutdown, pyqtgraph's items and the application can be destroyed in the wrong order (a segfault
    after the work is done)."""
    from shiboken6 import Shiboken

    if Shiboken.isValid(window):
        window.close()
        Shiboken.delete(window)
    QApplication.processEvents()


class _StartupProbe(QObject):
    """Prints ``visible <unix time>`` once the window's first paint is done, then ``ready <unix time>``
    once start-up has finished and the run it opens is on screen, and quits."""

    def __init__(self, window: Any) -> None:
        super().__init__(window)
        self._window = window
        self._painted = False
        window.installEventFilter(self)
        self._poll = QTimer(self, interval=5)
        self._poll.timeout.connect(self._check_ready)

    def eventFilter(self, watched: QObject, event: QEvent) -> bool:
        if event.type() == QEvent.Type.Paint and not self._painted:
            self._painted = True
            QTimer.singleShot(0, self._visible)  # runs once this paint has been delivered
        return False

    def _visible(self) -> None:
        print(f"visible {time.time():.6f}", flush=True)
        self._poll.start()

    def _check_ready(self) -> None:
        w = self._window
        if w.is_ready and (not w.shown_ids or w.results is not None):
            self._poll.stop()
            print(f"ready {time.time():.6f}", flush=True)
            QApplication.instance().quit()  # type: ignore[union-attr]


def _screenshot(app: QApplication, window: Any, out: Path, tab: str | None) -> int:
    window.resize(*SCREENSHOT_SIZE)
    window.show()
    window.finish_startup()
    if window.last_message:
        raise WorkbenchError(window.last_message)
    if window.shown_ids:
        _wait_for(app, lambda: window.results is not None, timeout_s=60)
    if tab is not None:
        window.show_tab(tab)
    save_screenshot(app, window, out)
    dispose(window)
    return 0


def save_screenshot(app: QApplication, window: Any, out: Path) -> None:
    for _ in range(3):  # let layouts and deferred paints settle
        app.processEvents()
    out.parent.mkdir(parents=True, exist_ok=True)
    if not window.grab().save(str(out)):
        raise WorkbenchError(f"cannot write {out}")


def _wait_for(app: QApplication, condition: Any, *, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            raise WorkbenchError("timed out waiting for the results to load")
        app.processEvents()
        time.sleep(0.01)
