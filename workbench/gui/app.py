"""Starting the app: ``workbench gui`` (and the analysts' packaged viewer) end up in :func:`run_gui`.

``--screenshot OUT.png`` opens the latest run, waits until it is rendered, saves the window and exits:
the README's picture and a cheap end-to-end check of the whole window. ``WORKBENCH_GUI_PROBE=startup``
makes the app print the time its window was first painted and quit (``benchmarks/gui_startup.py``).

SIGTERM and SIGINT (Ctrl+C in its terminal) quit the app the way File → Quit does (:class:`QuitOnSignals`),
so that closing the window stops the loader's child process; exit code 0.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from PySide6.QtCore import QEvent, QObject, QSocketNotifier, QTimer, QtMsgType, qInstallMessageHandler
from PySide6.QtGui import QIcon
from PySide6.QtWidgets import QApplication

from workbench.core.errors import WorkbenchError
from workbench.core.resources import resource_path
from workbench.gui import tab_names

if TYPE_CHECKING:
    from PySide6.QtWidgets import QWidget

    from workbench.gui.main_window import MainWindow
    from workbench.gui.settings import GuiSettings

__all__ = [
    "SCREENSHOT_SIZE",
    "QuitOnSignals",
    "dispose",
    "make_app",
    "run_gui",
    "save_screenshot",
]

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
    app = cast("QApplication | None", QApplication.instance())
    if app is None:
        app = QApplication(argv if argv is not None else [sys.argv[0]])
    app.setApplicationName("Workbench")
    app.setOrganizationName("workbench")
    app.setApplicationDisplayName("Workbench")
    app.setWindowIcon(QIcon(str(resource_path("icons", "workbench.png"))))
    if getattr(sys, "frozen", False):
        app.setDesktopFileName("workbench-viewer")  # the packaged viewer's .desktop entry (Wayland)
    return app


def resolve_gui_db(db: Path | None, settings: GuiSettings | None) -> Path:
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

    if tab is not None and tab not in tab_names():
        raise WorkbenchError(f"unknown tab {tab!r}; tabs: {', '.join(tab_names())}")
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
    quit_on_signals = QuitOnSignals(window)
    try:
        window.show()
        if tab is not None:
            window.ready.connect(lambda: window.show_tab(tab))
        code = app.exec()
        dispose(window)
    finally:
        quit_on_signals.restore()
    return code


def dispose(window: QWidget) -> None:
    """Close the window and delete it now, while the QApplication lives: left to the interpreter's
    shutdown, pyqtgraph's items and the application can be destroyed in the wrong order (a segfault
    after the work is done)."""
    from shiboken6 import Shiboken

    if Shiboken.isValid(window):
        window.close()
        Shiboken.delete(window)
    QApplication.processEvents()


class QuitOnSignals(QObject):
    """While it is installed, SIGTERM and SIGINT close ``window`` without asking — a run in progress
    is cancelled, its finished trials kept — and quit the event loop, so that the normal way out
    (``closeEvent``, :func:`dispose`, ``ResultsLoader.close``) stops the children. A second signal
    takes the default action: the process ends at once (the children then end by their parent-death
    signal).

    Qt's event loop calls no Python code by itself, so a Python signal handler would wait for the next
    event that does. The C-level handler therefore also writes the signal number into a socket
    (``signal.set_wakeup_fd``) that a QSocketNotifier watches: the loop wakes and runs the handler at
    once, with no polling timer. Only in the main thread (where Python delivers signals); elsewhere
    it installs nothing.
    """

    def __init__(self, window: MainWindow) -> None:
        super().__init__()
        self.window = window
        self.received: int | None = None
        self._previous: dict[int, Any] = {}
        self._previous_fd: int | None = None
        self._sockets: tuple[socket.socket, socket.socket] | None = None
        if threading.current_thread() is not threading.main_thread():
            return
        read, write = socket.socketpair()
        for sock in (read, write):
            sock.setblocking(False)
        self._sockets = (read, write)
        self._previous_fd = signal.set_wakeup_fd(write.fileno(), warn_on_full_buffer=False)
        self._notifier = QSocketNotifier(read.fileno(), QSocketNotifier.Type.Read, self)
        self._notifier.activated.connect(self._drain)
        for name in ("SIGTERM", "SIGINT"):
            signum = getattr(signal, name, None)
            if signum is not None:
                self._previous[signum] = signal.signal(signum, self._on_signal)

    def _on_signal(self, signum: int, _frame: Any) -> None:
        # Runs between two Python bytecodes of the main thread, maybe in the middle of a slot: the
        # quitting itself waits for the event loop.
        self.received = signum
        for other in self._previous:
            signal.signal(other, signal.SIG_DFL)
        QTimer.singleShot(0, self._quit)

    def _drain(self) -> None:
        if self._sockets is not None:
            with contextlib.suppress(OSError):  # BlockingIOError: nothing (more) to read
                while self._sockets[0].recv(64):
                    pass

    def _quit(self) -> None:
        from shiboken6 import Shiboken

        if Shiboken.isValid(self.window):
            self.window.close_now()
        QApplication.quit()

    def restore(self) -> None:
        """Put back the handlers and the wakeup fd that were there before."""
        if self._sockets is None:
            return
        self._notifier.setEnabled(False)
        for signum, previous in self._previous.items():
            signal.signal(signum, previous if previous is not None else signal.SIG_DFL)
        signal.set_wakeup_fd(self._previous_fd if self._previous_fd is not None else -1)
        for sock in self._sockets:
            sock.close()
        self._sockets = None


class _StartupProbe(QObject):
    """Prints ``visible <unix time>`` once the window's first paint is done, then ``ready <unix time>``
    once start-up has finished and the run it opens is on screen, and quits."""

    def __init__(self, window: MainWindow) -> None:
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
        if w.is_ready and (not w.state.shown_ids or w.state.results is not None):
            self._poll.stop()
            print(f"ready {time.time():.6f}", flush=True)
            QApplication.instance().quit()  # type: ignore[union-attr]


def _screenshot(app: QApplication, window: MainWindow, out: Path, tab: str | None) -> int:
    window.resize(*SCREENSHOT_SIZE)
    window.show()
    window.finish_startup()
    if window.last_message:
        raise WorkbenchError(window.last_message)
    if window.state.shown_ids:
        wait_for(app, lambda: window.state.results is not None, timeout_s=60)
    if tab is not None:
        window.show_tab(tab)
    save_screenshot(app, window, out)
    dispose(window)
    return 0


def save_screenshot(app: QApplication, window: QWidget, out: Path) -> None:
    for _ in range(3):  # let layouts and deferred paints settle
        app.processEvents()
    out.parent.mkdir(parents=True, exist_ok=True)
    if not window.grab().save(str(out)):
        raise WorkbenchError(f"cannot write {out}")


def wait_for(app: QApplication, condition: Callable[[], object], *, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            raise WorkbenchError("timed out waiting for the results to load")
        app.processEvents()
        time.sleep(0.01)
