"""What the parts of the quality pass share (:mod:`workbench.run.quality`): the run it scores, its
variants' workers, its notes, and how a part asks a worker for arrays (``score``, ``replay``: written
to ``.npz`` files in a scratch folder, one answer per item).

The parts are the scoring of the lossy variants (:mod:`workbench.run.scoring`), the equivalence check
of the lossless ones (:mod:`workbench.run.equivalence`) and the floor it judges them against
(:mod:`workbench.run.floor`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from workbench.core.literals import QualityStatus
from workbench.run import events as ev
from workbench.run.plan import VariantPlan
from workbench.run.process import WorkerProcess
from workbench.run.recording import RunRecorder
from workbench.spec.parse import Spec

__all__ = ["PassContext", "ask", "folder_in"]


class PassContext:
    """One quality pass's run. ``worker_for(plan)`` returns the variant's loaded worker (loading it
    again when its worker has closed) or None; ``report`` says what is going on."""

    def __init__(
        self,
        spec: Spec,
        recorder: RunRecorder,
        plans: Sequence[VariantPlan],
        *,
        worker_for: Callable[[VariantPlan], WorkerProcess | None],
        report: Callable[[str], None],
        cancelled: Callable[[], bool],
    ) -> None:
        self.spec = spec
        self.recorder = recorder  # every write goes through it; the reads are the store's
        self.store = recorder.store
        assert recorder.run_id is not None, "the run has not started"
        self.run_id = recorder.run_id
        self.plans = {p.variant.name: p for p in plans}
        self.worker_for = worker_for
        self.report = report
        self.cancelled = cancelled
        self.notes: list[str] = []

    def record(self, name: str, status: QualityStatus, reason: str | None) -> None:
        self.recorder.quality({"variant": name, "status": status, "reason": reason})
        if status in ("failed", "not scored"):
            self.note(f"quality: {name} {status}: {reason}")

    def note(self, message: str) -> None:
        self.notes.append(message)
        self.report(message)


def folder_in(scratch: Path) -> Path:
    """A fresh folder in ``scratch`` for one command's answers."""
    folder = scratch / f"v{len(list(scratch.iterdir()))}"
    folder.mkdir()
    return folder


def ask(worker: WorkerProcess, command: dict[str, Any]) -> list[ev.Scored] | str:
    """A ``replay`` or ``score`` command's answers, one per item, in order (or why none came)."""
    (items,) = command.values()
    answers: dict[int, ev.Scored] = {}

    def on_event(event: ev.Event) -> None:
        if isinstance(event, ev.Scored):
            answers[event.item] = event

    outcome = worker.ask(command, on_event)
    if outcome == "died":
        return worker.death()
    if outcome == "cancelled":
        return "cancelled"
    return [answers.get(n, ev.Scored(item=n, error="no answer")) for n in range(len(items))]
