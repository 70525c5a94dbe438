"""Running an experiment from the GUI: the CLI's :class:`~workbench.run.execute.RunExecutor` in a QThread.

The models run in the executor's worker processes (one per variant), never in the GUI process, which
therefore never imports torch. This thread only waits on the workers' event pipes and writes the
results database (the single writer); the UI thread hears about it through queued signals and reads
the database with its own connection. Preflight (which may probe the Hugging Face hub for a few
seconds) runs here too, so nothing model-related ever blocks the event loop.
"""

from __future__ import annotations

import time
import traceback
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from PySide6.QtCore import QThread, Signal

from workbench.core.errors import WorkbenchError
from workbench.spec.parse import Spec

__all__ = ["ProgressInfo", "RunThread"]


@dataclass(frozen=True)
class ProgressInfo:
    """A snapshot of the executor's progress, safe to hand across threads."""

    run_id: int | None
    total: int
    done: int
    failed: int
    variant: str
    message: str
    elapsed_s: float
    trial_landed: bool  # a trial was recorded since the last snapshot
    #: ``repetitions = "auto"``: the widest speed-up CI so far (±, a fraction) and the target
    interval: float | None = None
    ci_target: float | None = None

    @property
    def eta_s(self) -> float | None:
        """Remaining time at the average pace so far (model loading included)."""
        if self.done <= 0 or self.done >= self.total:
            return None
        return self.elapsed_s / self.done * (self.total - self.done)


class RunThread(QThread):
    """Runs one spec into the database at ``db_path``. Signals arrive in the UI thread (queued)."""

    runCreated = Signal(int)
    progressed = Signal(object)  # ProgressInfo
    logged = Signal(str)
    completed = Signal(object)  # RunResult
    errored = Signal(str)  # one line: bad input, or the unexpected error

    def __init__(self, spec: Spec, db_path: Path, parent: Any = None) -> None:
        super().__init__(parent)
        self.spec = spec
        self.db_path = db_path
        self.run_id: int | None = None
        self._executor: Any = None
        self._cancel_requested = False
        self._start = 0.0
        self._last_done = 0
        # imported here, in the UI thread: two threads importing at once can deadlock (see
        # loading.ResultsLoader); what the executor imports later, it imports in the thread
        import workbench.run.execute
        import workbench.store.db  # noqa: F401

    def cancel(self) -> None:
        """Stop at the next step of the current trial; asked twice, kill the worker at once."""
        self._cancel_requested = True
        executor = self._executor
        if executor is not None:
            executor.cancel()

    @property
    def cancel_requested(self) -> bool:
        return self._cancel_requested

    def run(self) -> None:  # in the thread
        from workbench.run.execute import RunExecutor, preflight_spec
        from workbench.store import Store

        self._start = time.monotonic()
        store = None
        try:
            preflight_spec(self.spec)
            if self._cancel_requested:
                self.errored.emit("cancelled before the run started; nothing was recorded")
                return
            store = Store(self.db_path, create=True)
            self._executor = RunExecutor(
                self.spec, store, on_progress=self._on_progress, on_log=self.logged.emit
            )
            if self._cancel_requested:
                self._executor.cancel()
            result = self._executor.run()
            self.completed.emit(result)
        except WorkbenchError as exc:
            self.errored.emit(str(exc))
        except Exception as exc:  # a bug, a full disk...: say it in one line, keep the details in the log
            self.logged.emit(traceback.format_exc())
            self.errored.emit(f"the run stopped on an unexpected error: {type(exc).__name__}: {exc}")
        finally:
            if store is not None:
                store.close()

    def _on_progress(self, progress: Any) -> None:  # in the thread, from the executor
        executor = self._executor
        if executor is not None and executor.run_id is not None and self.run_id is None:
            self.run_id = executor.run_id
            self.runCreated.emit(self.run_id)
        landed = progress.done > self._last_done
        self._last_done = progress.done
        self.progressed.emit(
            ProgressInfo(
                run_id=self.run_id,
                total=progress.total,
                done=progress.done,
                failed=progress.failed,
                variant=progress.variant,
                message=progress.message,
                elapsed_s=time.monotonic() - self._start,
                trial_landed=landed,
                interval=progress.interval,
                ci_target=executor.spec.ci_target
                if executor is not None and executor.spec.auto_repetitions
                else None,
            )
        )
