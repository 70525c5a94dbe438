"""Running from the window: start a run (the builder's spec, or one given), the demo, cancel, and
what the run thread reports (run created, progress, done, error, finished) put into the status bar,
the log and the results on screen. The run itself is :class:`~workbench.gui.running.RunThread`.
"""

from __future__ import annotations

from typing import Any

from PySide6.QtCore import QObject
from PySide6.QtWidgets import QApplication

__all__ = ["RunControl"]


class RunControl(QObject):
    """One run at a time, ``run_thread`` while it goes on. A QObject in the UI thread, so that the run
    thread's signals connected to its methods are queued to the UI thread."""

    def __init__(self, window: Any) -> None:
        super().__init__(window)
        self.window = window
        self.run_thread: Any = None  # the RunThread while a run goes on

    def start_run(self, *_: Any, spec: Any = None) -> bool:
        w = self.window
        if self.run_thread is not None or not w.is_ready:
            return False
        if w.viewer:
            w.show_error("Run", w.viewer)
            return False
        if spec is None:
            spec = w.builder.validate()
            if w.builder.refusal:  # a mistake in the spec, or a single variant (nothing to compare)
                w.show_tab("experiment")
                w.show_error("Run", w.builder.refusal)
                return False
        from workbench.gui.running import RunThread

        thread = RunThread(spec, w.db_path, w)
        thread.runCreated.connect(self._on_run_created)
        thread.progressed.connect(self._on_progress)
        thread.logged.connect(w.log_line)
        thread.completed.connect(self._on_completed)
        thread.errored.connect(self._on_run_error)
        thread.finished.connect(self._on_thread_finished)
        self.run_thread = thread
        w.banner.hide()
        w.builder.set_running(True)
        w.progress.setRange(0, 0)
        w.progress.show()
        w.cancel_btn.setEnabled(True)
        w.cancel_btn.setText("Cancel")
        w.cancel_btn.show()
        w.progress_label.setText(f"Starting '{spec.name}'…")
        w.log_line(f"— run '{spec.name}' into {w.db_path}")
        w.update_actions()
        thread.start()
        return True

    def run_demo(self, *_: Any) -> None:
        from workbench.core.resources import resource_path
        from workbench.gui.draft import SpecDraft

        w = self.window
        if w.viewer:
            w.show_error("Run the demo", w.viewer)
            return
        draft = SpecDraft.load(resource_path("specs", "demo.toml"))
        draft.path = None  # not the user's file: Save asks where
        w.builder.set_draft(draft)
        self.start_run()

    def cancel_run(self, *_: Any) -> None:
        if self.run_thread is None:
            return
        w = self.window
        again = self.run_thread.cancel_requested
        self.run_thread.cancel()
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
        thread = self.run_thread
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
        if w.store is None:
            w.open_store(w.db_path, create=False)
        w.refresh_history()
        w.show_runs((run_id,))

    def _on_progress(self, info: Any) -> None:
        from workbench.gui.running import format_eta

        w = self.window
        w.progress.setRange(0, max(info.total, 1))
        w.progress.setValue(info.done)
        parts = [f"{info.done}/{info.total} trials"]
        if info.failed:
            parts.append(f"{info.failed} failed")
        eta = format_eta(info.eta_s)
        if eta:
            parts.append(f"ETA {eta}")
        if info.ci_target is not None:  # repetitions = "auto": the interval narrowing, live
            now = f"±{info.interval:.1%}" if info.interval is not None else "not yet known"
            parts.append(f"widest CI {now} (target ±{info.ci_target:.0%})")
        if info.message:
            parts.append(info.message)
        w.progress_label.setText(" · ".join(parts))
        w.log_line(info.message)
        if info.trial_landed and info.run_id is not None and info.run_id in w.shown_ids:
            w.results_view.schedule_refresh()

    def _on_completed(self, result: Any) -> None:
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
        w.progress_label.setText(f"Run not started: {message}" if self.run_thread.run_id is None else message)
        w.log_line(f"— error: {message}")
        w.show_error("Run", message)
        w.runFinished.emit(message)

    def _on_thread_finished(self) -> None:
        w = self.window
        thread, self.run_thread = self.run_thread, None
        if thread is not None:
            thread.deleteLater()
        w.progress.hide()
        w.cancel_btn.hide()
        w.builder.set_running(False)
        w.update_actions()
        w.refresh_history()
        w.refresh_results()
