"""The parent's side of each variant's worker: start it, wait for its model, run a unit of its trials
on it and record what it sends, and lose the variant when it cannot load or its worker dies.

The executor (:mod:`workbench.run.execute`) decides which unit runs when (its designs) and keeps the
control (cancel, failure, when to stop); :class:`Workers` does what one unit, one load or one lost
worker asks: the worker processes are :mod:`workbench.run.process`'s, what the parent knows of each
variant :mod:`workbench.run.state`'s, every store write :mod:`workbench.run.recording`'s. A variant
that cannot load or whose worker dies has every trial of it that did not finish recorded failed, with
the reason; the run goes on with the others.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

from workbench.run import events as ev
from workbench.run.design import Unit
from workbench.run.process import WorkerPool, WorkerProcess
from workbench.run.recording import Progress, RunRecorder
from workbench.run.state import VariantState

__all__ = ["Workers"]


class Workers:
    """The workers of one run's variants (``states``, one per variant, set when the run starts).
    ``report`` says what is going on; ``cancelled`` says whether the run is cancelled."""

    def __init__(
        self,
        pool: WorkerPool,
        recorder: RunRecorder,
        progress: Progress,
        *,
        report: Callable[[str], None],
        cancelled: Callable[[], bool],
    ) -> None:
        self._pool = pool
        self._recorder = recorder
        self.progress = progress
        self._report = report
        self._cancelled = cancelled
        self.states: list[VariantState] = []
        self.active: WorkerProcess | None = None  # the worker loading or running a unit now
        self._positions: dict[int | None, int] = {}  # units dispatched per round so far
        self.restarts_left = 0  # workers = "per-repetition": fresh starts still planned

    def start(self, state: VariantState, *, spawn: bool = False) -> WorkerProcess:
        """Start the variant's next worker process (it loads the model meanwhile): forked by the
        pool's fork server when it can, unless ``spawn``."""
        variant = state.plan.variant
        self.progress.variant = variant.name
        self._report(f"loading {variant.name}")
        job = {"variant": variant.to_dict(), "trials": [t.to_dict() for t in state.plan.trials]}
        worker = self._pool.start(variant.name, variant.python, job, number=state.loads, spawn=spawn)
        state.worker = worker
        state.loads += 1
        return worker

    def load(
        self, state: VariantState, *, record: bool = True, started: WorkerProcess | None = None
    ) -> WorkerProcess | None:
        """Start the variant's worker (or take ``started``, begun by :meth:`start`) and wait for its
        model to load. None when it cannot (the variant's trials are then failed with the reason;
        with ``record = False``, for the untimed quality pass, only the worker is closed)."""
        variant = state.plan.variant
        worker = started if started is not None else self.start(state)
        self.active = worker
        try:
            event = worker.wait_loaded(self._pool.load_timeout(worker))
            if worker.forked and not isinstance(event, ev.Loaded) and not self._cancelled():
                # a runtime that did not survive the fork: this variant's workers are spawned
                why = event.error if isinstance(event, ev.LoadFailed) else worker.death()
                self._pool.distrust(variant.name, why)
                state.close()
                worker = self.active = self.start(state, spawn=True)
                event = worker.wait_loaded()
        finally:
            self.active = None
        if isinstance(event, ev.Loaded):
            if record:
                self._recorder.loaded(variant, event, forked=worker.forked)
            return worker
        if not record:
            state.close()
            return None
        if isinstance(event, ev.LoadFailed):
            reason = f"could not load variant '{variant.name}': {event.error}"
        elif self._cancelled():
            state.close()
            return None
        else:
            reason = worker.death()
        self.lose(state, reason)
        return None

    def dispatch(self, unit: Unit) -> bool:
        """Run one unit on its variant's worker and record what it sends. False once the run is
        cancelled; a worker that dies fails only its own variant."""
        if self._cancelled():
            return False
        state = self.states[unit.variant]
        worker = state.worker
        if state.dead or worker is None:
            return True
        self.progress.variant = state.plan.variant.name
        position = self._positions[unit.round] = self._positions.get(unit.round, -1) + 1
        self.active = worker
        try:
            outcome = worker.run(unit.trials, lambda event: self._on_event(state, event, position))
        finally:
            self.active = None
        if outcome == "done":
            return True
        if outcome == "died" and self._cancelled():  # killed by the cancel in the middle of its unit
            self._killed_in(state, unit)
        if self._cancelled():
            return False
        reason = worker.death()
        if outcome == "cancelled":  # it stopped as if cancelled, but nobody cancelled the run
            reason = (
                f"worker process for '{state.plan.variant.name}' stopped its trial on a signal this "
                f"run did not send (SIGINT or SIGTERM from outside); {reason.split(': ', 1)[-1]}"
            )
        self.lose(state, reason)
        return True

    def _killed_in(self, state: VariantState, unit: Unit) -> None:
        """A cancel killed the worker (asked twice, or it did not stop within the grace time) before
        it reported the unit's trials: they are recorded ``cancelled``, as a trial stopped at a step is."""
        rest = state.unreported(unit.trials)
        state.cancelled += len(rest)
        reason = (
            "cancelled: its worker was killed before it reached a step (it had not stopped within the "
            "grace time, or the cancel was asked twice)"
        )
        self._recorder.never_ran(state.plan.variant, rest, reason, status="cancelled")

    def _on_event(self, state: VariantState, event: ev.Event, position: int) -> None:
        if isinstance(event, ev.TrialDone):
            record = state.received_trial(event, position)
            if event.status == "cancelled" and not self._cancelled():  # the run sends its cancel after
                # it is set: this one came from outside (the worker's variant is failed for it)
                record = dataclasses.replace(
                    record,
                    error="stopped by a signal this run did not send (SIGINT or SIGTERM from outside)",
                )
            plan = state.plan.trials[event.index]
            state.trial_ids[event.index] = self._recorder.trial(
                state.plan.variant, plan, event.status, record, event.steps
            )
        elif isinstance(event, ev.ServerMetrics):
            ids = [state.trial_ids.get(i) for i in event.trials]
            self._recorder.server_metrics(state.plan.variant, event, ids)

    def close_all(self) -> None:
        for state in self.states:  # all asked first: they shut down side by side
            if state.worker is not None:
                state.worker.request_close()
        for state in self.states:
            state.close()

    def lose(self, state: VariantState, reason: str) -> None:
        """The variant could not load or its worker died: close it, mark it dead, and record every
        trial of it that did not finish as failed, with the reason."""
        state.close()
        state.fail(reason)
        plan = state.plan
        # its warm-ups in the fresh processes of the repetitions to come will not run
        self.progress.total -= sum(t.warmup for t in plan.trials) * self.restarts_left
        self._recorder.never_ran(plan.variant, state.unreported(range(len(plan.trials))), reason)

    def account_missing(self) -> None:
        """A run that ends without a cancel or a failure of its own has run every trial of its live
        variants, or recorded why not: a variant with trials neither received nor recorded is failed
        here, with them, so that the run can never read ``ok`` with trials missing."""
        for state in self.states:
            if state.dead or state.complete:
                continue
            missing = len(state.plan.trials) - len(state.received) + state.cancelled
            self.lose(
                state,
                f"the run ended without {missing} of its trials, and no reason was recorded for them "
                "(the worker stopped or was lost without a cancel)",
            )
