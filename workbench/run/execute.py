"""Run a spec: plan it, start one worker process per variant, record every event in the store.

This process is the single writer of the results database; the workers only measure. One worker per
variant gives each model a clean process (clean memory peaks) and confines a crash to its variant:
the trials already received are committed, the rest of that variant is recorded ``failed`` with the
reason, and the run goes on with the next variant. ``cancel()`` (thread-safe; the CLI wires Ctrl-C,
SIGTERM and SIGHUP to it, the GUI its Cancel button) stops the current trial at its next step and
keeps what finished; a worker that has not stopped within the grace time is killed. A result that
cannot be stored stops the run: its workers are killed and the run is recorded ``failed`` with the
reason (:mod:`workbench.run.recording`).

:class:`RunExecutor` keeps the designs (interleaved rounds, counterbalanced blocks, sequential) and
the control (cancel, failure, when to stop); what it knows of each variant is
:mod:`workbench.run.state`'s, starting, loading and running a unit on each variant's worker (and
losing it) :mod:`workbench.run.workers`'s, the conversations' anchoring before the measured trials
:mod:`workbench.run.anchor`'s, whether ``repetitions = "auto"`` stops (the CI target, the cap, the
budget) :mod:`workbench.run.stopping`'s, the worker processes :mod:`workbench.run.process`'s, every
store write :mod:`workbench.run.recording`'s, the checks before a run and before each load
:mod:`workbench.run.preflight`'s.

Used by the CLI and the GUI alike; it never imports torch.
"""

from __future__ import annotations

import sys
import threading
from collections.abc import Callable, Sequence
from typing import Any

from workbench.core.errors import StoreError, describe_exception
from workbench.run.anchor import Anchoring
from workbench.run.design import (
    Block,
    Unit,
    block_schedule,
    interleaved_schedule,
    planned_trials,
    sequential_schedule,
)
from workbench.run.passcontext import PassContext
from workbench.run.plan import VariantPlan, anchor_plans, plan_run
from workbench.run.preflight import Residency, preflight_spec
from workbench.run.process import Proc, WorkerPool, WorkerProcess
from workbench.run.quality import QualityPass, quality_wanted
from workbench.run.recording import Progress, RunRecorder, RunResult
from workbench.run.state import VariantState
from workbench.run.stopping import AutoRepetitions
from workbench.run.workers import Workers
from workbench.spec.parse import Spec
from workbench.store import Store

# preflight_spec: the CLI and the GUI check a spec with it before they run it here
__all__ = ["Progress", "RunExecutor", "RunResult", "preflight_spec", "run_spec"]


class RunExecutor:
    def __init__(
        self,
        spec: Spec,
        store: Store,
        *,
        on_progress: Callable[[Progress], None] | None = None,
        on_log: Callable[[str], None] | None = None,
        python: str = sys.executable,
    ) -> None:
        self.spec = spec
        self.store = store
        self.plans = plan_run(spec)
        self.progress = Progress(total=planned_trials(spec, self.plans))
        self._on_progress = on_progress or (lambda p: None)
        self._cancel = threading.Event()
        self._pool = WorkerPool(python=python, on_log=on_log or (lambda line: None))
        self._recorder = RunRecorder(store, self.progress, self._report)
        self._workers = Workers(
            self._pool, self._recorder, self.progress, report=self._report, cancelled=lambda: self.cancelled
        )
        self._auto = AutoRepetitions(spec, store)  # repetitions = "auto": stop or go on
        self.run_id: int | None = None

    # -- control ---------------------------------------------------------------------------------

    def cancel(self) -> None:
        """Ask the run to stop (thread-safe): the running trial stops at its next step, idle workers
        close. Asked twice, the workers are killed at once."""
        again = self._cancel.is_set()
        self._cancel.set()
        self._pool.stop(kill=again)

    @property
    def _proc(self) -> Proc | None:
        """The process of the worker loading or running a unit now (None between units)."""
        active = self._workers.active
        return active.proc if active is not None else None

    @property
    def cancelled(self) -> bool:
        return self._cancel.is_set()

    @property
    def _state(self) -> list[VariantState]:
        """What the parent knows of each variant (:class:`~workbench.run.workers.Workers`' states)."""
        return self._workers.states

    # -- the run ---------------------------------------------------------------------------------

    def run(self) -> RunResult:
        preflight_spec(self.spec)
        recorder = self._recorder
        self.run_id = recorder.start(self.spec, self.plans)
        result = recorder.result
        self._auto.start()
        self._workers.states = [VariantState(plan) for plan in self.plans]
        try:
            if self._anchor():
                self._run_designs()
        except StoreError as exc:  # a result could not be stored: the run stops, recorded failed
            self._fail(f"a result could not be stored, so the run stopped: {exc}")
        except Exception as exc:  # a bug: the record says so, then the traceback
            self._fail(f"the run stopped on an unexpected error: {describe_exception(exc)}")
            raise
        finally:
            self._workers.close_all()
            self._pool.shutdown()
            # a cancel that came after the last trial (while the workers closed) cancelled nothing
            cancelled = self.cancelled and not all(s.complete for s in self._state)
            if not self.cancelled and result.error is None:
                self._workers.account_missing()
            recorder.finish(
                {s.plan.variant.name: s.final_status(cancelled, result.error) for s in self._state},
                result.final_status(cancelled, lost=not all(s.complete for s in self._state)),
                self.spec.baseline_variant,
            )
        return result

    def _run_designs(self) -> None:
        """The measured trials in the spec's design, then the quality pass."""
        recorder = self._recorder
        order = self.spec.order
        if order == "interleaved" and len(self.plans) > 1:
            note = self._run_interleaved()
            if note is not None:  # the variants do not all fit: counterbalanced blocks instead
                order = "blocks"
                recorder.note(note)
                blocks = block_schedule(self.plans, self.spec.seed)
                self.progress.total = self.progress.done + sum(len(u.trials) for b in blocks for u in b.units)
                self._report(note)
        if order == "blocks":
            self._run_blocks(block_schedule(self.plans, self.spec.seed))
        elif order == "sequential" or len(self.plans) == 1:
            self._run_blocks(sequential_schedule(self.plans))
        workers = self.spec.workers if order == "interleaved" and len(self.plans) > 1 else None
        recorder.design(order, self._repetitions_done(), workers)
        if not self.cancelled and quality_wanted(self.spec):
            self._quality()

    def _anchor(self) -> bool:
        """Conversation workloads: the baseline answers every conversation before any measured trial
        (:class:`~workbench.run.anchor.Anchoring`), and every variant's turns get those answers as
        history (:func:`~workbench.run.plan.anchor_plans`). False when the run cannot go on (the
        baseline could not answer, or a cancel)."""
        prompts = Anchoring(
            self.spec,
            self._recorder,
            self._workers,
            prepare_forks=lambda state: self._prepare_forks(state, wait=False),
            report=self._report,
            fail=self._fail,
            cancelled=lambda: self.cancelled,
        ).run()
        if prompts is None:
            return False
        if not prompts:  # no conversation workload
            return True
        before = planned_trials(self.spec, self.plans)
        self.plans = anchor_plans(self.plans, prompts, warmup_max_new_tokens=self.spec.warmup_max_new_tokens)
        # the anchored turns' lengths get their own warm-ups: the total follows
        self.progress.total += planned_trials(self.spec, self.plans) - before
        for state, plan in zip(self._state, self.plans, strict=True):
            state.plan = plan
        return True

    # -- the designs ------------------------------------------------------------------------------

    def _run_interleaved(self) -> str | None:
        """Every variant loaded at once, then warm-ups, then the rounds. Returns a note (and runs
        nothing) when the variants cannot all be resident."""
        warmups, rounds = interleaved_schedule(self.plans, self.spec.seed)
        residency = Residency()
        for state in self._state:
            if self.cancelled:
                return None
            worker = self._workers.load(state)
            if worker is None:
                continue
            resident = sum(s.worker is not None for s in self._state)
            note = residency.check(worker.loaded, resident, len(self._state), last=state is self._state[-1])
            if note is not None:
                self._workers.close_all()
                return note
            self._prepare_forks(state, wait=False)  # its fork server imports while the next one loads
        for state in self._state:  # every server ready before anything is timed
            self._prepare_forks(state, wait=True)
        for unit in warmups:
            if not self._workers.dispatch(unit):
                return None
        repetition = rounds[0].repetition if rounds else None
        if self.spec.workers == "per-repetition":
            self._workers.restarts_left = len({u.repetition for u in rounds}) - 1
        for unit in rounds:
            fresh = unit.repetition != repetition and self.spec.workers == "per-repetition"
            if fresh and not self._restart(warmups):
                return None
            repetition = unit.repetition
            if not self._workers.dispatch(unit) or self._enough():
                break
        return None

    def _prepare_forks(self, state: VariantState, *, wait: bool) -> None:
        """With fresh workers per repetition and more than one repetition to come, start the fork
        server ``state``'s later workers come from (``wait``: and wait until it is ready), in the
        untimed time of a load or of the anchoring instead of at the first restart."""
        if (
            self.spec.workers == "per-repetition"
            and self.spec.order == "interleaved"
            and len(self.plans) > 1
            and self.spec.repetitions > 1
            and not state.dead
            and not self.cancelled
        ):
            self._pool.prepare([state.plan.variant.name], wait=wait)

    def _restart(self, warmups: Sequence[Unit]) -> bool:
        """Fresh workers for the next repetition (``workers = "per-repetition"``): every live worker
        closes, then each variant loads again and runs its warm-ups again (recorded as warm-ups), so
        no trial of the new repetition runs in a process that ran the last one. False once
        cancelled."""
        self._report("next repetition: fresh worker processes")
        self._workers.restarts_left -= 1
        # the fork servers the fresh workers come from (the first restart only): they import while
        # the old workers shut down, side by side
        alive = [s.plan.variant.name for s in self._state if not s.dead]
        self._pool.prepare(alive, wait=False)
        self._workers.close_all()
        self._pool.prepare(alive)
        # every variant's fresh worker loads side by side (nothing is timed meanwhile; the fit in
        # memory was checked at the first load): a restart costs the slowest load, not their sum
        started = {id(s): self._workers.start(s) for s in self._state if not s.dead and not self.cancelled}
        for state in self._state:
            if id(state) in started:
                self._workers.load(state, started=started[id(state)])
        if self.cancelled:
            return False
        # its warm-ups are counted in the progress total from the start (planned_trials)
        return all(self._workers.dispatch(unit) for unit in warmups)

    def _run_blocks(self, blocks: list[Block]) -> None:
        """One variant loaded at a time: each block loads it, runs its units and closes it."""
        for block in blocks:
            state = self._state[block.variant]
            if self.cancelled or state.dead:
                continue
            if self._workers.load(state) is None:
                continue
            for unit in block.units:
                if not self._workers.dispatch(unit):
                    break
                if self._enough():
                    state.close()
                    return
            state.close()

    def _enough(self) -> bool:
        """``repetitions = "auto"``: whether to stop after the repetitions finished so far
        (:class:`~workbench.run.stopping.AutoRepetitions` decides)."""
        if not self.spec.auto_repetitions or self.cancelled:
            return False
        assert self.run_id is not None
        verdict = self._auto.after(self.run_id, self._repetitions_done())
        if verdict is None:
            return False
        self.progress.interval = verdict.widest
        if verdict.stop is not None:
            return self._stop(verdict.stop)
        if verdict.going_on is not None:
            self._report(verdict.going_on)
        if verdict.capped is not None:
            self._recorder.note(verdict.capped)
        return False

    def _stop(self, note: str) -> bool:
        """``repetitions = "auto"`` ends the run here: the record says why."""
        self._recorder.note(note)
        self._report(note)
        self.progress.total = self.progress.done  # the rest is not run
        for state in self._state:
            state.stopped_early = True
        return True

    def _repetitions_done(self) -> int:
        """Repetitions every live variant has finished (each of its measured trials received)."""
        return min((s.repetitions() for s in self._state if not s.dead), default=0)

    def _quality(self) -> None:
        """The quality pass (:mod:`workbench.run.quality`), untimed, after every measured trial: on the
        workers still loaded (an interleaved run's last ones), loading a closed variant again."""

        def worker_for(plan: VariantPlan) -> WorkerProcess | None:
            state = next(s for s in self._state if s.plan is plan)
            worker = state.worker
            if worker is not None and worker.proc.poll() is None:
                return worker
            state.close()
            return self._workers.load(state, record=False)

        context = PassContext(
            self.spec,
            self._recorder,
            self.plans,
            worker_for=worker_for,
            report=self._report,
            cancelled=lambda: self.cancelled,
        )
        QualityPass(context).run(dead=[s.plan.variant.name for s in self._state if s.dead])

    # -- failing, reporting ---------------------------------------------------------------------------

    def _fail(self, reason: str) -> None:
        """The run fails as a whole: recorded so, and its workers killed (nothing they would send
        could be stored)."""
        self._recorder.fault(reason)
        self._pool.stop(kill=True)

    def _report(self, message: str) -> None:
        self.progress.message = message
        self._on_progress(self.progress)


def run_spec(spec: Spec, store: Store, **kwargs: Any) -> RunResult:
    return RunExecutor(spec, store, **kwargs).run()
