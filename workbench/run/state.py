"""What the parent knows about one variant during a run: its worker, the trials received so far, the
repetitions it has finished, and at the end its status.

The executor (:mod:`workbench.run.execute`) keeps one :class:`VariantState` per variant and changes it
as the worker's events arrive; the recorder (:mod:`workbench.run.recording`) writes what it decides.
"""

from __future__ import annotations

import collections
import dataclasses
from collections.abc import Iterable
from typing import Any

from workbench.run import events as ev
from workbench.run.disturbance import judge
from workbench.run.plan import TrialPlan, VariantPlan
from workbench.run.process import WorkerProcess
from workbench.store import TrialRecord

__all__ = ["VariantState"]


class VariantState:
    """What the parent knows about one variant during the run."""

    def __init__(self, plan: VariantPlan) -> None:
        self.plan = plan
        self.worker: WorkerProcess | None = None
        self.received: set[int] = set()  # indices of its trials recorded (or failed) so far
        self.trial_ids: dict[int, int | None] = {}
        #: measured trials per repetition (what "a repetition is finished" means)
        self.per_repetition = collections.Counter(t.repetition for t in plan.trials if not t.warmup)
        self.dead = False  # failed to load or died: its remaining trials are failed
        self.error: str | None = None
        self.best_clock: float | None = None  # highest GPU clock seen (disturbance rule)
        self.stopped_early = False  # repetitions = "auto" ended the run before its cap
        self.loads = 0  # worker processes started so far (the trials' `worker` is this less one)
        self.cancelled = 0  # of its trials recorded, those a cancel stopped

    def fail(self, reason: str) -> None:
        self.dead = True
        self.error = reason

    def close(self) -> None:
        """Close its worker, if it has one."""
        if self.worker is not None:
            self.worker.close()
            self.worker = None

    def unreported(self, indices: Iterable[int]) -> list[TrialPlan]:
        """Those of its trials (``indices`` into its plan) its worker has not reported, counted as
        received from now on: the parent records them itself (never run, or cancelled)."""
        rest = [i for i in indices if i not in self.received]
        self.received.update(rest)
        return [self.plan.trials[i] for i in rest]

    def received_trial(self, event: ev.TrialDone, position: int) -> TrialRecord:
        """Its worker sent a trial: counted as received, and returned as the parent completes it:
        its ``position`` in the round (None for a warm-up), the worker number and the disturbance
        verdict (:func:`~workbench.run.disturbance.judge`, against the highest GPU clock so far)."""
        self.received.add(event.index)
        self.cancelled += event.status == "cancelled"
        warmup = self.plan.trials[event.index].warmup
        record = dataclasses.replace(
            event.trial, round_position=None if warmup else position, worker=self.loads - 1
        )
        why = judge(record, self.best_clock)
        if record.gpu_clock_mhz:
            self.best_clock = max(self.best_clock or 0, record.gpu_clock_mhz)
        return dataclasses.replace(record, disturbed=int(why is not None), disturbance=why)

    def repetitions(self) -> int:
        """Repetitions it has finished (each of their measured trials received), counted from the first."""
        trials = self.plan.trials
        done = collections.Counter(trials[i].repetition for i in self.received if not trials[i].warmup)
        reps = 0
        while self.per_repetition.get(reps) and done[reps] == self.per_repetition[reps]:
            reps += 1
        return reps

    @property
    def complete(self) -> bool:
        """Every trial of it run to its end and recorded (or not needed: ``repetitions = "auto"``
        stopped early)."""
        return self.stopped_early or (len(self.received) == len(self.plan.trials) and not self.cancelled)

    def final_status(self, cancelled: bool, run_error: str | None = None) -> dict[str, Any]:
        if self.dead:
            return {"status": "failed", "error": self.error}
        if self.complete:
            return {"status": "ok"}
        if cancelled and run_error is None:
            return {"status": "cancelled"}
        return {"status": "failed", "error": run_error}
