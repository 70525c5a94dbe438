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
the control (cancel, stopping ``repetitions = "auto"``); the worker processes are
:mod:`workbench.run.process`'s, every store write is :mod:`workbench.run.recording`'s, the checks
before a run and before each load :mod:`workbench.run.preflight`'s.

Used by the CLI and the GUI alike; it never imports torch.
"""

from __future__ import annotations

import collections
import dataclasses
import sys
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any

from workbench.analysis.paired import widest_ci
from workbench.core.errors import StoreError, describe_exception
from workbench.core.variant import Variant
from workbench.run import events as ev
from workbench.run.design import Block, Unit, block_schedule, interleaved_schedule, sequential_schedule
from workbench.run.disturbance import judge
from workbench.run.plan import VariantPlan, plan_run
from workbench.run.preflight import Residency, preflight_spec
from workbench.run.process import Proc, WorkerPool, WorkerProcess
from workbench.run.quality import QualityPass, quality_wanted
from workbench.run.recording import Progress, RunRecorder, RunResult
from workbench.spec.parse import AUTO_MIN_REPETITIONS, Spec
from workbench.store import Store

# preflight_spec: the CLI and the GUI check a spec with it before they run it here
__all__ = [
    "Progress",
    "RunExecutor",
    "RunResult",
    "expected_duration",
    "planned_trials",
    "preflight_spec",
    "run_spec",
]


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
        self._active: WorkerProcess | None = None  # the worker loading or running a unit now
        self._state: list[_VariantState] = []
        self._recorder = RunRecorder(store, self.progress, self._report)
        self._positions: dict[int | None, int] = {}  # units dispatched per round so far
        self._checked = 0  # repetitions = "auto": the repetition count last looked at
        self._started = time.monotonic()
        #: repetitions = "auto": when each repetition was finished (monotonic seconds), the first entry
        #: the run's start
        self._finished_at: list[float] = []
        self._restarts_left = 0  # workers = "per-repetition": fresh starts still planned
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
        active = self._active
        return active.proc if active is not None else None

    @property
    def cancelled(self) -> bool:
        return self._cancel.is_set()

    # -- the run ---------------------------------------------------------------------------------

    def run(self) -> RunResult:
        preflight_spec(self.spec)
        recorder = self._recorder
        self.run_id = recorder.start(self.spec, self.plans)
        result = recorder.result
        self._started = time.monotonic()
        self._finished_at = [self._started]
        self._state = [_VariantState(plan) for plan in self.plans]
        try:
            order = self.spec.order
            if order == "interleaved" and len(self.plans) > 1:
                note = self._run_interleaved()
                if note is not None:  # the variants do not all fit: counterbalanced blocks instead
                    order = "blocks"
                    recorder.note(note)
                    blocks = block_schedule(self.plans, self.spec.seed)
                    self.progress.total = self.progress.done + sum(
                        len(u.trials) for b in blocks for u in b.units
                    )
                    self._report(note)
            if order == "blocks":
                self._run_blocks(block_schedule(self.plans, self.spec.seed))
            elif order == "sequential" or len(self.plans) == 1:
                self._run_blocks(sequential_schedule(self.plans))
            workers = self.spec.workers if order == "interleaved" and len(self.plans) > 1 else None
            recorder.design(order, self._repetitions_done(), workers)
            if not self.cancelled and quality_wanted(self.spec):
                self._quality()
        except StoreError as exc:  # a result could not be stored: the run stops, recorded failed
            self._fail(f"a result could not be stored, so the run stopped: {exc}")
        except Exception as exc:  # a bug: the record says so, then the traceback
            self._fail(f"the run stopped on an unexpected error: {describe_exception(exc)}")
            raise
        finally:
            self._close_all()
            self._pool.shutdown()
            # a cancel that came after the last trial (while the workers closed) cancelled nothing
            cancelled = self.cancelled and not all(s.complete for s in self._state)
            recorder.finish(
                {s.plan.variant.name: s.final_status(cancelled, result.error) for s in self._state},
                _final_status(result, cancelled),
                self.spec.baseline_variant,
            )
        return result

    # -- the designs ------------------------------------------------------------------------------

    def _run_interleaved(self) -> str | None:
        """Every variant loaded at once, then warm-ups, then the rounds. Returns a note (and runs
        nothing) when the variants cannot all be resident."""
        warmups, rounds = interleaved_schedule(self.plans, self.spec.seed)
        residency = Residency()
        for state in self._state:
            if self.cancelled:
                return None
            worker = self._load(state)
            if worker is None:
                continue
            resident = sum(s.worker is not None for s in self._state)
            note = residency.check(worker.loaded, resident, len(self._state), last=state is self._state[-1])
            if note is not None:
                self._close_all()
                return note
        for unit in warmups:
            if not self._dispatch(unit):
                return None
        repetition = rounds[0].repetition if rounds else None
        if self.spec.workers == "per-repetition":
            self._restarts_left = len({u.repetition for u in rounds}) - 1
        for unit in rounds:
            fresh = unit.repetition != repetition and self.spec.workers == "per-repetition"
            if fresh and not self._restart(warmups):
                return None
            repetition = unit.repetition
            if not self._dispatch(unit) or self._enough():
                break
        return None

    def _restart(self, warmups: Sequence[Unit]) -> bool:
        """Fresh workers for the next repetition (``workers = "per-repetition"``): every live worker
        closes, then each variant loads again and runs its warm-ups again (recorded as warm-ups), so
        no trial of the new repetition runs in a process that ran the last one. False once
        cancelled."""
        self._report("next repetition: fresh worker processes")
        self._restarts_left -= 1
        # the fork servers the fresh workers come from (the first restart only): they import while
        # the old workers shut down, side by side
        alive = [s.plan.variant.name for s in self._state if not s.dead]
        self._pool.prepare(alive, wait=False)
        self._close_all()
        self._pool.prepare(alive)
        # every variant's fresh worker loads side by side (nothing is timed meanwhile; the fit in
        # memory was checked at the first load): a restart costs the slowest load, not their sum
        started = {id(s): self._start(s) for s in self._state if not s.dead and not self.cancelled}
        for state in self._state:
            if id(state) in started:
                self._load(state, started=started[id(state)])
        if self.cancelled:
            return False
        # its warm-ups are counted in the progress total from the start (planned_trials)
        return all(self._dispatch(unit) for unit in warmups)

    def _run_blocks(self, blocks: list[Block]) -> None:
        """One variant loaded at a time: each block loads it, runs its units and closes it."""
        for block in blocks:
            state = self._state[block.variant]
            if self.cancelled or state.dead:
                continue
            if self._load(state) is None:
                continue
            for unit in block.units:
                if not self._dispatch(unit):
                    break
                if self._enough():
                    self._close(state)
                    return
            self._close(state)

    def _enough(self) -> bool:
        """``repetitions = "auto"``: after each repetition that every variant finished, stop once every
        paired speed-up's CI is within ±``ci_target`` (at least AUTO_MIN_REPETITIONS repetitions), or
        when one more repetition would end after the ``budget`` (as long as the last one took)."""
        if not self.spec.auto_repetitions or self.cancelled:
            return False
        done = self._repetitions_done()
        if done == self._checked:
            return False
        now = time.monotonic()
        self._finished_at += [now] * (done - self._checked)
        self._checked = done
        if done < AUTO_MIN_REPETITIONS:
            return False
        trials = self.store.trials(self.run_id, status="ok")  # type: ignore[arg-type]
        widest = widest_ci(trials, self.spec.baseline_variant)
        target = f"target ±{_percent(self.spec.ci_target)}"
        budget = self.spec.budget_s
        elapsed = now - self._started
        self.progress.interval = widest
        if widest is not None and widest <= self.spec.ci_target:
            return self._stop(
                f'repetitions = "auto": stopped after {done} repetitions in {_minutes(elapsed)}, every '
                f"speed-up CI within ±{widest:.1%} ({target})"
            )
        width = f"±{widest:.1%}" if widest is not None else "not known yet"
        if budget is not None and done < self.spec.repetitions:
            last = self._finished_at[-1] - self._finished_at[-2]
            if elapsed + last > budget:
                return self._stop(
                    f'repetitions = "auto": stopped after {done} repetitions in {_minutes(elapsed)}: the '
                    f"budget of {_minutes(budget)} was spent (another repetition takes about "
                    f"{_minutes(last)}) with the widest speed-up CI {width} ({target})"
                )
        self._report(f"after {done} repetitions the widest speed-up CI is {width} ({target}): adding a round")
        if done == self.spec.repetitions:
            note = (
                f'repetitions = "auto": reached the cap of {done} repetitions in {_minutes(elapsed)} with '
                f"a speed-up CI of {width} ({target}; raise max_repetitions)"
            )
            self._recorder.note(note)
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
        counts = []
        for state in self._state:
            if state.dead:
                continue
            trials = state.plan.trials
            done = collections.Counter(trials[i].repetition for i in state.received if not trials[i].warmup)
            per_rep = state.per_repetition
            reps = 0
            while per_rep.get(reps) and done[reps] == per_rep[reps]:
                reps += 1
            counts.append(reps)
        return min(counts, default=0)

    def _quality(self) -> None:
        """The quality pass (:mod:`workbench.run.quality`), untimed, after every measured trial: on the
        workers still loaded (an interleaved run's last ones), loading a closed variant again."""
        baseline = next(s for s in self._state if s.plan.variant.name == self.spec.baseline_variant)
        if baseline.dead:
            self._report("quality: not scored: the baseline failed")
            return

        def worker_for(plan: VariantPlan) -> WorkerProcess | None:
            state = next(s for s in self._state if s.plan is plan)
            worker = state.worker
            if worker is not None and worker.proc.poll() is None:
                return worker
            self._close(state)
            return self._load(state, record=False)

        assert self.run_id is not None
        QualityPass(
            self.spec,
            self.store,
            self.run_id,
            self.plans,
            worker_for=worker_for,
            report=self._report,
            cancelled=lambda: self.cancelled,
        ).run(dead=[s.plan.variant.name for s in self._state if s.dead])

    # -- one worker -------------------------------------------------------------------------------

    def _start(self, state: _VariantState, *, spawn: bool = False) -> WorkerProcess:
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

    def _load(
        self, state: _VariantState, *, record: bool = True, started: WorkerProcess | None = None
    ) -> WorkerProcess | None:
        """Start the variant's worker (or take ``started``, begun by :meth:`_start`) and wait for its
        model to load. None when it cannot (the variant's trials are then failed with the reason;
        with ``record = False``, for the untimed quality pass, only the worker is closed)."""
        variant = state.plan.variant
        worker = started if started is not None else self._start(state)
        self._active = worker
        try:
            event = worker.wait_loaded(self._pool.load_timeout(worker))
            if worker.forked and not isinstance(event, ev.Loaded) and not self.cancelled:
                # a runtime that did not survive the fork: this variant's workers are spawned
                why = event.error if isinstance(event, ev.LoadFailed) else worker.death()
                self._pool.distrust(variant.name, why)
                self._close(state)
                worker = self._active = self._start(state, spawn=True)
                event = worker.wait_loaded()
        finally:
            self._active = None
        if isinstance(event, ev.Loaded):
            if record:
                self._recorder.loaded(variant, event)
                self._report_loaded(variant, event, forked=worker.forked)
            return worker
        if not record:
            self._close(state)
            return None
        if isinstance(event, ev.LoadFailed):
            reason = f"could not load variant '{variant.name}': {event.error}"
        elif self.cancelled:
            self._close(state)
            return None
        else:
            reason = worker.death()
        self._lose(state, reason)
        return None

    def _dispatch(self, unit: Unit) -> bool:
        """Run one unit on its variant's worker and record what it sends. False once the run is
        cancelled; a worker that dies fails only its own variant."""
        if self.cancelled:
            return False
        state = self._state[unit.variant]
        worker = state.worker
        if state.dead or worker is None:
            return True
        self.progress.variant = state.plan.variant.name
        position = self._positions[unit.round] = self._positions.get(unit.round, -1) + 1
        self._active = worker
        try:
            outcome = worker.run(unit.trials, lambda event: self._on_event(state, event, position))
        finally:
            self._active = None
        if outcome == "done":
            return True
        if outcome == "died" and self.cancelled:  # killed by the cancel in the middle of its unit
            self._killed_in(state, unit)
        if outcome == "cancelled" or self.cancelled:
            return False
        reason = worker.death()
        self._lose(state, reason)
        return True

    def _killed_in(self, state: _VariantState, unit: Unit) -> None:
        """A cancel killed the worker (asked twice, or it did not stop within the grace time) before
        it reported the unit's trials: they are recorded ``cancelled``, as a trial stopped at a step is."""
        rest = [i for i in unit.trials if i not in state.received]
        state.received.update(rest)
        state.cancelled += len(rest)
        reason = (
            "cancelled: its worker was killed before it reached a step (it had not stopped within the "
            "grace time, or the cancel was asked twice)"
        )
        plan = state.plan
        self._recorder.never_ran(plan.variant, [plan.trials[i] for i in rest], reason, status="cancelled")

    def _report_loaded(self, variant: Variant, event: ev.Loaded, *, forked: bool = False) -> None:
        where = ""
        if variant.python is not None:
            packages = event.environment.get("packages", {})
            libraries = ", ".join(
                f"{name} {packages[name]}" for name in ("transformers", "torch") if name in packages
            )
            where = f" (python {variant.python}{': ' + libraries if libraries else ''})"
        elif forked:
            where = " (forked)"
        self._report(f"{variant.name} loaded on {event.device} in {event.load_ms / 1000:.1f} s{where}")

    def _on_event(self, state: _VariantState, event: ev.Event, position: int) -> None:
        if isinstance(event, ev.TrialDone):
            state.received.add(event.index)
            state.cancelled += event.status == "cancelled"
            plan = state.plan.trials[event.index]
            record = dataclasses.replace(
                event.trial, round_position=None if plan.warmup else position, worker=state.loads - 1
            )
            why = judge(record, state.best_clock)
            if record.gpu_clock_mhz:
                state.best_clock = max(state.best_clock or 0, record.gpu_clock_mhz)
            record = dataclasses.replace(record, disturbed=int(why is not None), disturbance=why)
            state.trial_ids[event.index] = self._recorder.trial(
                state.plan.variant, plan, event.status, record, event.steps
            )
        elif isinstance(event, ev.ServerMetrics):
            ids = [state.trial_ids.get(i) for i in event.trials]
            self._recorder.server_metrics(state.plan.variant, event, ids)

    def _close(self, state: _VariantState) -> None:
        if state.worker is not None:
            state.worker.close()
            state.worker = None

    def _close_all(self) -> None:
        for state in self._state:  # all asked first: they shut down side by side
            if state.worker is not None:
                state.worker.request_close()
        for state in self._state:
            self._close(state)

    def _fail(self, reason: str) -> None:
        """The run fails as a whole: recorded so, and its workers killed (nothing they would send
        could be stored)."""
        self._recorder.fault(reason)
        self._pool.stop(kill=True)

    def _lose(self, state: _VariantState, reason: str) -> None:
        """The variant could not load or its worker died: close it, mark it dead, and record every
        trial of it that did not finish as failed, with the reason."""
        self._close(state)
        state.fail(reason)
        plan = state.plan
        # its warm-ups in the fresh processes of the repetitions to come will not run
        self.progress.total -= sum(t.warmup for t in plan.trials) * self._restarts_left
        rest = [i for i in range(len(plan.trials)) if i not in state.received]
        state.received.update(rest)
        self._recorder.never_ran(plan.variant, [plan.trials[i] for i in rest], reason)

    def _report(self, message: str) -> None:
        self.progress.message = message
        self._on_progress(self.progress)


class _VariantState:
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


def planned_trials(spec: Spec, plans: Sequence[VariantPlan]) -> int:
    """Every trial the run will record, counted before it starts: the plans' trials, and the warm-ups
    every fresh worker runs again (``workers = "per-repetition"``: each repetition after the first;
    in blocks: each block). ``repetitions = "auto"`` counts up to its cap, and lowers the total when
    it stops."""
    if spec.order == "blocks":
        return sum(len(u.trials) for b in block_schedule(plans, spec.seed) for u in b.units)
    total = sum(len(p.trials) for p in plans)
    if spec.order == "interleaved" and len(plans) > 1 and spec.workers == "per-repetition":
        reps = len({t.repetition for p in plans for t in p.trials if not t.warmup})
        total += sum(t.warmup for p in plans for t in p.trials) * max(0, reps - 1)
    return total


def expected_duration(store: Store, spec: Spec, planned: int) -> tuple[float, str] | None:
    """How long the run should take, before it starts: the last finished run of the same spec (its
    text) in ``store``, its time per trial recorded (warm-ups included) times ``planned``; with
    ``repetitions = "auto"`` (``planned`` is then the cap's) that run's own time. None when there is no
    such run."""
    rows = store.query(
        """
        select r.id, r.started_at, r.finished_at,
          (select count(*) from trials t where t.run_id = r.id) as recorded
        from runs r
        where r.spec = ? and r.status in ('ok', 'partial') and r.finished_at is not null
        order by r.id desc limit 1
        """,
        [spec.text],
    )
    if not rows or not rows[0]["recorded"]:
        return None
    row = rows[0]
    try:
        took = _iso(row["finished_at"]) - _iso(row["started_at"])
    except ValueError:
        return None
    basis = f"run {row['id']} of this spec here took {_minutes(took)}"
    if spec.auto_repetitions:  # it stops where the last one did, near enough: on the target or the budget
        return took, basis
    return took / row["recorded"] * planned, basis


def _iso(text: str) -> float:
    import datetime

    return datetime.datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()


def _percent(fraction: float) -> str:
    """A target as a person wrote it: 3%, 2.5%, 0.01%."""
    return f"{fraction * 100:.4g}%"


def _minutes(seconds: float) -> str:
    """A duration as a person reads it: "48 s", "4.2 min"."""
    return f"{seconds:.0f} s" if seconds < 90 else f"{seconds / 60:.1f} min"


def run_spec(spec: Spec, store: Store, **kwargs: Any) -> RunResult:
    return RunExecutor(spec, store, **kwargs).run()


def _final_status(result: RunResult, cancelled: bool) -> str:
    if result.error is not None:  # the run failed as a whole
        return "failed"
    if cancelled:
        return "cancelled"
    if result.failed == 0:
        return "ok"
    return "partial" if result.ok > 0 else "failed"
