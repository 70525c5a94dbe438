"""Running from the window: start a run (the builder's spec, or one given), the demo, cancel, and
what the run thread reports (run created, progress, done, error, finished) put into the status bar,
the log and the results on screen. The run itself is :class:`~workbench.gui.running.RunThread`.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from PySide6.QtCore import QObject, SignalInstance
from PySide6.QtWidgets import QApplication, QLabel, QProgressBar, QPushButton, QWidget

from workbench.formatting import duration, plus_minus

if TYPE_CHECKING:
    from workbench.gui.builder import ExperimentBuilder
    from workbench.gui.history_actions import HistoryActions
    from workbench.gui.results_view import ResultsView
    from workbench.gui.running import ProgressInfo
    from workbench.gui.state import AppState
    from workbench.gui.widgets import Banner
    from workbench.run.execute import RunResult
    from workbench.spec.parse import Spec

__all__ = ["RunControl", "RunWindow"]


class RunWindow(Protocol):
    """What :class:`RunControl` uses of the window (:class:`~workbench.gui.main_window.MainWindow`)."""

    is_ready: bool
    viewer: str | None  # why this install cannot run (viewer mode), or None
    state: AppState  # the run going on: set here
    builder: ExperimentBuilder | None  # None until start-up has finished
    banner: Banner
    progress: QProgressBar
    progress_label: QLabel
    cancel_btn: QPushButton
    history_actions: HistoryActions
    results_view: ResultsView

    @property
    def runFinished(self) -> SignalInstance: ...  # the window's signal

    def window(self) -> QWidget: ...  # QWidget.window(): the parent of the run thread
    def show_error(self, title: str, message: str) -> None: ...
    def show_tab(self, name: str) -> None: ...
    def log_line(self, line: str) -> None: ...
    def open_store(self, path: Path, *, create: bool, quiet: bool = False) -> bool: ...


class RunControl(QObject):
    """One run at a time, ``state.run_thread`` while it goes on (the window's actions and the builder's
    Run button follow ``state.runningChanged``). A QObject in the UI thread (a child of the window), so
    that the run thread's signals connected to its methods are queued to the UI thread."""

    def __init__(self, window: RunWindow) -> None:
        super().__init__(window.window())
        self.window = window

    def start_run(self, *_: object, spec: Spec | None = None) -> bool:
        w = self.window
        builder = w.builder  # None only before start-up has finished (not is_ready)
        if w.state.running or not w.is_ready or builder is None:
            return False
        if w.viewer:
            w.show_error("Run", w.viewer)
            return False
        if spec is None:
            spec = builder.validate()
            if builder.refusal:  # a mistake in the spec, or a single variant (nothing to compare)
                w.show_tab("experiment")
                w.show_error("Run", builder.refusal)
                return False
            assert spec is not None  # no refusal: the spec is valid
        from workbench.gui.running import RunThread

        db_path = w.state.db_path
        thread = RunThread(spec, db_path, w.window())
        thread.runCreated.connect(self._on_run_created)
        thread.progressed.connect(self._on_progress)
        thread.logged.connect(w.log_line)
        thread.completed.connect(self._on_completed)
        thread.errored.connect(self._on_run_error)
        thread.finished.connect(self._on_thread_finished)
        w.banner.hide()
        w.progress.setRange(0, 0)
        w.progress.show()
        w.cancel_btn.setEnabled(True)
        w.cancel_btn.setText("Cancel")
        w.cancel_btn.show()
        w.progress_label.setText(f"Starting '{spec.name}'…")
        w.log_line(f"— run '{spec.name}' into {db_path}")
        w.state.set_running(thread)  # the builder's Run button and the window's actions follow
        thread.start()
        return True

    def run_demo(self, *_: object) -> None:
        from workbench.core.resources import resource_path
        from workbench.gui.draft import SpecDraft

        w = self.window
        if w.viewer:
            w.show_error("Run the demo", w.viewer)
            return
        if w.builder is None:  # before start-up has finished: start_run refuses too
            return
        draft = SpecDraft.load(resource_path("specs", "demo.toml"))
        draft.path = None  # not the user's file: Save asks where
        w.builder.set_draft(draft)
        self.start_run()

    def cancel_run(self, *_: object) -> None:
        thread = self.window.state.run_thread
        if thread is None:
            return
        w = self.window
        again = thread.cancel_requested
        thread.cancel()
        w.cancel_btn.setText("Stop now")
        w.cancel_btn.setToolTip("Kill the worker at once (the trial in progress is lost)")
        w.progress_label.setText(
            "Stopping at once…"
            if again
            else "Cancelling: finishing at the next token (press again to stop now)…"
        )
        w.log_line("— cancel requested" + (" again: killing the worker" if again else ""))

    def stop_run_and_wait(self, timeout_ms: int = 20_000) -> None:
        """Cancel the run in progress and wait for it; after ``timeout_ms`` kill its worker."""
        thread = self.window.state.run_thread
        if thread is None:
            return
        thread.cancel()
        if not thread.wait(timeout_ms):
            thread.cancel()  # a second cancel kills the worker
            thread.wait()
        QApplication.processEvents()

    # -- what the run thread reports (queued to the UI thread) ------------------------------------

    def _on_run_created(self, run_id: int) -> None:
        w = self.window
        if w.state.store is None:
            w.open_store(w.state.db_path, create=False)
        w.history_actions.refresh()
        w.results_view.show_runs((run_id,))

    def _on_progress(self, info: ProgressInfo) -> None:
        w = self.window
        w.progress.setRange(0, max(info.total, 1))
        w.progress.setValue(info.done)
        parts = [f"{info.done}/{info.total} trials"]
        if info.failed:
            parts.append(f"{info.failed} failed")
        if info.eta_s is not None:
            parts.append(f"ETA {duration(info.eta_s, clock=True)}")
        if info.ci_target is not None:  # repetitions = "auto": the interval narrowing, live
            now = plus_minus(info.interval, 1) if info.interval is not None else "not yet known"
            parts.append(f"widest CI {now} (target {plus_minus(info.ci_target, 0)})")
        if info.message:
            parts.append(info.message)
        w.progress_label.setText(" · ".join(parts))
        w.log_line(info.message)
        if info.trial_landed and info.run_id is not None and info.run_id in w.state.shown_ids:
            w.results_view.schedule_refresh()

    def _on_completed(self, result: RunResult) -> None:
        w = self.window
        text = f"Run {result.run_id} {result.status}: {result.ok} ok, {result.failed} failed"
        if result.cancelled:
            text += f", {result.cancelled} cancelled"
        if result.skipped:
            text += f", {result.skipped} sweep points beyond the context skipped"
        if result.error is not None:
            text += f" — {result.error}"
        w.progress_label.setText(text)
        w.log_line(f"— {text}")
        w.runFinished.emit(result)

    def _on_run_error(self, message: str) -> None:
        w = self.window
        thread = w.state.run_thread
        started = thread is not None and thread.run_id is not None
        w.progress_label.setText(message if started else f"Run not started: {message}")
        w.log_line(f"— error: {message}")
        w.show_error("Run", message)
        w.runFinished.emit(message)

    def _on_thread_finished(self) -> None:
        w = self.window
        thread = w.state.run_thread
        w.progress.hide()
        w.cancel_btn.hide()
        w.state.set_running(None)  # the builder's Run button and the window's actions follow
        if thread is not None:
            thread.deleteLater()
        w.history_actions.refresh()
        w.results_view.refresh()
