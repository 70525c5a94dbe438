"""Run a spec: plan it, start one worker process per variant, record every event in the store.

This process is the single writer of the results database; the workers only measure. One worker per
variant gives each model a clean process (clean memory peaks) and confines a crash to its variant:
the trials already received are committed, the rest of that variant is recorded ``failed`` with the
reason, and the run goes on with the next variant. ``cancel()`` (thread-safe; the CLI wires Ctrl-C
to it, the GUI its Cancel button) stops the current trial at its next step and keeps what finished.

Used by the CLI and the GUI alike; it never imports torch.
"""

from __future__ import annotations

import collections
import dataclasses
import json
import os
import signal
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

from workbench import __version__
from workbench.analysis.paired import widest_ci
from workbench.core.config import model_source_fields
from workbench.core.errors import StrategyError, WorkbenchError
from workbench.core.variant import Variant
from workbench.run import events as ev
from workbench.run.design import Block, Unit, block_schedule, interleaved_schedule, sequential_schedule
from workbench.run.disturbance import judge
from workbench.run.interpreter import child_environment, command, probe
from workbench.run.plan import TrialPlan, VariantPlan, plan_run
from workbench.spec.parse import AUTO_MIN_REPETITIONS, Spec
from workbench.store import Store

__all__ = ["Progress", "RunExecutor", "RunResult", "run_spec"]

#: seconds a worker gets to stop after a cancel before it is killed
CANCEL_GRACE_S = 15.0
#: interleaving loads the next variant only if the device's free memory is at least this many times
#: the largest footprint loaded so far (weights plus what trials add: KV cache, activations)
RESIDENT_MARGIN = 1.5


@dataclass
class Progress:
    """What a progress display needs; passed to ``on_progress`` after every event."""

    total: int  # trials planned (warm-ups included)
    done: int = 0
    failed: int = 0
    variant: str = ""
    message: str = ""
    last_trial: dict[str, Any] | None = None


@dataclass
class RunResult:
    run_id: int
    status: str  # ok | partial | failed | cancelled
    ok: int = 0
    failed: int = 0
    cancelled: int = 0
    skipped: int = 0
    errors: list[str] = field(default_factory=list)


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
        self.progress = Progress(total=sum(len(p.trials) for p in self.plans))
        self._on_progress = on_progress or (lambda p: None)
        self._on_log = on_log or (lambda line: None)
        self._python = python
        self._cancel = threading.Event()
        self._lock = threading.Lock()
        self._workers: set[_Worker] = set()  # every live worker process (several when interleaving)
        self._active: _Worker | None = None  # the one loading or running a unit now
        self._state: list[_VariantState] = []
        self._environment: dict[str, Any] = {}
        self._host_elsewhere = False  # the environment's host was seen from another interpreter
        self._positions: dict[int | None, int] = {}  # units dispatched per round so far
        self._checked = 0  # repetitions = "auto": the repetition count last looked at
        self.run_id: int | None = None

    # -- control ---------------------------------------------------------------------------------

    def cancel(self) -> None:
        """Ask the run to stop (thread-safe): the running trial stops at its next step, idle workers
        close. Asked twice, the workers are killed at once."""
        again = self._cancel.is_set()
        self._cancel.set()
        with self._lock:
            procs = [w.proc for w in self._workers]
        for proc in procs:
            if proc.poll() is None:
                if again:
                    proc.kill()
                else:
                    _interrupt(proc)

    @property
    def _proc(self) -> subprocess.Popen[str] | None:
        """The process of the worker loading or running a unit now (None between units)."""
        active = self._active
        return active.proc if active is not None else None

    @property
    def cancelled(self) -> bool:
        return self._cancel.is_set()

    # -- the run ---------------------------------------------------------------------------------

    def run(self) -> RunResult:
        preflight_spec(self.spec)
        self.store.reap_stale_runs()
        self.run_id = run_id = self.store.create_run(
            name=self.spec.name,
            spec_text=self.spec.text,
            baseline=self.spec.baseline_variant,
            version=__version__,
        )
        result = RunResult(run_id=run_id, status="running")
        for plan in self.plans:
            v = plan.variant
            self.store.add_variant(
                run_id,
                {
                    "name": v.name,
                    "strategy": v.strategy,
                    "model": v.model,
                    "dtype": v.dtype,
                    "device": v.device,
                    "params": v.params,
                    "concurrency": v.concurrency,
                    "batch_size": v.batch_size,
                    "threads": v.threads,
                    "python": v.python,
                    "sweep_param": v.sweep_param,
                    "sweep_value": json.dumps(v.sweep_value) if v.sweep_param else None,
                },
            )
        self._state = [_VariantState(plan) for plan in self.plans]
        self._result = result
        try:
            order = self.spec.order
            if order == "interleaved" and len(self.plans) > 1:
                note = self._run_interleaved()
                if note is not None:  # the variants do not all fit: counterbalanced blocks instead
                    order = "blocks"
                    self.store.update_run(run_id, {"trial_order_note": note})
                    self._report(note)
            if order == "blocks":
                self._run_blocks(block_schedule(self.plans, self.spec.seed))
            elif order == "sequential" or len(self.plans) == 1:
                self._run_blocks(sequential_schedule(self.plans))
            workers = self.spec.workers if order == "interleaved" and len(self.plans) > 1 else None
            self.store.update_run(
                run_id,
                {"trial_order": order, "repetitions": self._repetitions_done(), "workers": workers},
            )
        finally:
            self._close_all()
            for state in self._state:
                self.store.update_variant(run_id, state.plan.variant.name, state.final_status(self.cancelled))
            result.status = _final_status(result, self.cancelled)
            if self._environment:
                self.store.set_environment(run_id, self._environment)
            self.store.finish_run(run_id, result.status)
            if result.status in ("ok", "partial"):
                mark_matches_baseline(self.store, run_id, self.spec.baseline_variant)
        return result

    # -- the designs ------------------------------------------------------------------------------

    def _run_interleaved(self) -> str | None:
        """Every variant loaded at once, then warm-ups, then the rounds. Returns a note (and runs
        nothing) when the variants cannot all be resident."""
        warmups, rounds = interleaved_schedule(self.plans, self.spec.seed)
        largest = 0.0
        for state in self._state:
            if self.cancelled:
                return None
            worker = self._load(state)
            if worker is None:
                continue
            loaded = worker.loaded
            if loaded is not None and loaded.footprint_mb is not None:
                largest = max(largest, loaded.footprint_mb)
            if state is self._state[-1] or loaded is None or loaded.free_mb is None:
                continue
            need = largest * RESIDENT_MARGIN
            if loaded.free_mb < need:
                resident = sum(s.worker is not None for s in self._state)
                self._close_all()
                return (
                    f"interleaving needs every variant loaded at once: {loaded.free_mb / 1024:.1f} GB free "
                    f"on {loaded.device} after {resident} of "
                    f"{len(self._state)}, the next may need ~{need / 1024:.1f} GB; ran in counterbalanced "
                    'blocks instead (order = "blocks")'
                )
        for unit in warmups:
            if not self._dispatch(unit):
                return None
        repetition = rounds[0].repetition if rounds else None
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
        self._close_all()
        for state in self._state:
            if self.cancelled:
                return False
            if not state.dead:
                self._load(state)
        for unit in warmups:
            self.progress.total += len(unit.trials)
            if not self._dispatch(unit):
                return False
        return True

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
        paired speed-up's CI is within ±``ci_target`` (at least AUTO_MIN_REPETITIONS repetitions)."""
        if not self.spec.auto_repetitions or self.cancelled:
            return False
        done = self._repetitions_done()
        if done == self._checked or done < AUTO_MIN_REPETITIONS:
            return False
        self._checked = done
        trials = self.store.trials(self.run_id, status="ok")  # type: ignore[arg-type]
        widest = widest_ci(trials, self.spec.baseline_variant)
        if widest is None:
            return False
        if widest <= self.spec.ci_target:
            note = (
                f'repetitions = "auto": stopped after {done} repetitions, every speed-up CI within '
                f"±{widest:.1%} (target ±{self.spec.ci_target:.0%})"
            )
            self.store.update_run(self.run_id, {"trial_order_note": note})  # type: ignore[arg-type]
            self._report(note)
            skipped = sum(len(s.plan.trials) - len(s.received) for s in self._state if not s.dead)
            self.progress.total -= skipped
            for state in self._state:
                state.stopped_early = True
            return True
        self._report(f"after {done} repetitions the widest speed-up CI is ±{widest:.1%}: adding a round")
        if done == self.spec.repetitions:
            note = (
                f'repetitions = "auto": reached the cap of {done} repetitions with a speed-up CI of '
                f"±{widest:.1%} (target ±{self.spec.ci_target:.0%}; raise max_repetitions)"
            )
            self.store.update_run(self.run_id, {"trial_order_note": note})  # type: ignore[arg-type]
        return False

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

    # -- one worker -------------------------------------------------------------------------------

    def _load(self, state: _VariantState) -> _Worker | None:
        """Start the variant's worker and wait for its model to load. None when it cannot (the
        variant's trials are then failed with the reason)."""
        variant = state.plan.variant
        self.progress.variant = variant.name
        self._report(f"loading {variant.name}")
        worker = _Worker(self, state)
        state.worker = worker
        state.loads += 1
        self._active = worker
        try:
            event = worker.wait_loaded()
        finally:
            self._active = None
        if isinstance(event, ev.Loaded):
            self._on_loaded(state, event)
            return worker
        if isinstance(event, ev.LoadFailed):
            reason = f"could not load variant '{variant.name}': {event.error}"
        elif self.cancelled:
            self._close(state)
            return None
        else:
            reason = worker.death()
        self._close(state)
        state.fail(reason)
        self._fail_rest(state.plan, state.received, reason, self._result)
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
            outcome = worker.run(unit, lambda event: self._on_event(state, event, position))
        finally:
            self._active = None
        if outcome == "done":
            return True
        if outcome == "cancelled" or self.cancelled:
            return False
        reason = worker.death()
        self._close(state)
        state.fail(reason)
        self._fail_rest(state.plan, state.received, reason, self._result)
        return True

    def _on_loaded(self, state: _VariantState, event: ev.Loaded) -> None:
        variant = state.plan.variant
        loaded = event.variant_fields()
        environment = event.environment
        # The machine: as a worker in the workbench's own interpreter saw it (one in another Python
        # environment has other libraries); the first variant's until one of those loads.
        if "host" not in self._environment or (self._host_elsewhere and variant.python is None):
            self._environment["host"] = environment
            self._host_elsewhere = variant.python is not None
        entry = dict(loaded)
        if "torch_threads" in environment:  # per variant: its `threads` may differ
            entry["torch_threads"] = environment["torch_threads"]
        if variant.python is not None:  # another Python environment: its own libraries
            entry.update(
                python=variant.python,
                python_version=environment.get("python"),
                packages=environment.get("packages", {}),
            )
        self._environment.setdefault("variants", {})[variant.name] = entry
        server = json.dumps(loaded["server"]) if loaded["server"] is not None else None
        packages = json.dumps(environment["packages"]) if environment.get("packages") else None
        self.store.update_variant(
            self.run_id,  # type: ignore[arg-type]
            variant.name,
            {**loaded, "server": server, "packages": packages, "status": "loaded"},
        )
        where = ""
        if variant.python is not None:
            libraries = ", ".join(
                f"{name} {environment.get('packages', {})[name]}"
                for name in ("transformers", "torch")
                if name in environment.get("packages", {})
            )
            where = f" (python {variant.python}{': ' + libraries if libraries else ''})"
        self._report(f"{variant.name} loaded on {event.device} in {event.load_ms / 1000:.1f} s{where}")

    def _on_event(self, state: _VariantState, event: ev.Event, position: int) -> None:
        if isinstance(event, ev.TrialDone):
            state.received.add(event.index)
            trial = state.plan.trials[event.index]
            row = {
                **event.trial,
                "round_position": None if trial.warmup else position,
                "worker": state.loads - 1,
            }
            why = judge(row, state.best_clock)
            if row.get("gpu_clock_mhz"):
                state.best_clock = max(state.best_clock or 0, row["gpu_clock_mhz"])
            row.update(disturbed=int(why is not None), disturbance=why)
            done = dataclasses.replace(event, trial=row)
            state.trial_ids[event.index] = self._record_trial(state.plan, trial, done, self._result)
        elif isinstance(event, ev.ServerMetrics):
            ids = [state.trial_ids.get(i) for i in event.trials]
            self.store.add_server_metrics(
                self.run_id,  # type: ignore[arg-type]
                {
                    "variant": state.plan.variant.name,
                    "workload": event.workload,
                    "warmup": int(event.warmup),
                    "trials": len(ids),
                    "trial_id": ids[0] if len(ids) == 1 else None,
                    **event.figures,
                },
            )

    def _close(self, state: _VariantState) -> None:
        if state.worker is not None:
            state.worker.close()
            state.worker = None

    def _close_all(self) -> None:
        for state in getattr(self, "_state", []):
            self._close(state)

    def _record_trial(
        self, plan: VariantPlan, trial: TrialPlan, event: ev.TrialDone, result: RunResult
    ) -> int | None:
        status = event.status
        if status == "skipped":  # a sweep point beyond the model's context: capped, not recorded
            result.skipped += 1
            self.progress.done += 1
            self._report(f"skipped {trial.workload}/{trial.prompt.id}: {event.trial.get('error')}")
            return None
        v = plan.variant
        row = {"variant": v.name, "strategy": v.strategy, "model": v.model, **event.trial}
        trial_id = self.store.add_trial(self.run_id, row, event.steps)  # type: ignore[arg-type]
        if not trial.warmup or status != "ok":
            setattr(result, status, getattr(result, status) + 1)
        if status == "failed":
            result.errors.append(f"{v.name}/{trial.workload}/{trial.prompt.id}: {row.get('error')}")
            self.progress.failed += 1
        self.progress.done += 1
        self.progress.last_trial = row
        label = f"{v.name} {trial.workload}/{trial.prompt.id}" + (" (warm-up)" if trial.warmup else "")
        if status == "ok":
            self._report(
                f"{label}: TTFT {row['ttft_ms']:.0f} ms, {row['output_tokens']} tokens, "
                f"e2e {row['e2e_ms']:.0f} ms"
            )
        else:
            self._report(f"{label}: {status} {row.get('error') or ''}".rstrip())
        return trial_id

    def _fail_rest(self, plan: VariantPlan, received: set[int], reason: str, result: RunResult) -> None:
        """Record every trial of the variant that did not finish as failed, with the reason."""
        v = plan.variant
        for index, trial in enumerate(plan.trials):
            if index in received:
                continue
            received.add(index)
            self.store.add_trial(
                self.run_id,  # type: ignore[arg-type]
                {
                    "variant": v.name,
                    "strategy": v.strategy,
                    "model": v.model,
                    "workload": trial.workload,
                    "prompt_id": trial.prompt.id,
                    "repetition": trial.repetition,
                    "warmup": int(trial.warmup),
                    "max_new_tokens": trial.max_new_tokens,
                    "seed": trial.seed,
                    "temperature": trial.temperature,
                    "status": "failed",
                    "error": reason,
                },
            )
            result.failed += 1
            self.progress.failed += 1
            self.progress.done += 1
        result.errors.append(reason)
        self._report(reason)

    def _report(self, message: str) -> None:
        self.progress.message = message
        self._on_progress(self.progress)


class _VariantState:
    """What the parent knows about one variant during the run."""

    def __init__(self, plan: VariantPlan) -> None:
        self.plan = plan
        self.worker: _Worker | None = None
        self.received: set[int] = set()  # indices of its trials recorded (or failed) so far
        self.trial_ids: dict[int, int | None] = {}
        #: measured trials per repetition (what "a repetition is finished" means)
        self.per_repetition = collections.Counter(t.repetition for t in plan.trials if not t.warmup)
        self.dead = False  # failed to load or died: its remaining trials are failed
        self.error: str | None = None
        self.best_clock: float | None = None  # highest GPU clock seen (disturbance rule)
        self.stopped_early = False  # repetitions = "auto" ended the run before its cap
        self.loads = 0  # worker processes started so far (the trials' `worker` is this less one)

    def fail(self, reason: str) -> None:
        self.dead = True
        self.error = reason

    def final_status(self, cancelled: bool) -> dict[str, Any]:
        if self.dead:
            return {"status": "failed", "error": self.error}
        if self.stopped_early or len(self.received) == len(self.plan.trials):
            return {"status": "ok"}
        return {"status": "cancelled" if cancelled else "failed"}


class _Worker:
    """One variant's worker process, seen from the parent: the job goes in as the first line, then
    one command per unit; its events are read until the unit is done."""

    def __init__(self, executor: RunExecutor, state: _VariantState) -> None:
        self._executor = executor
        self.state = state
        self.loaded: ev.Loaded | None = None
        self.stderr_tail: collections.deque[str] = collections.deque(maxlen=40)
        self.returncode: int | None = None
        kwargs: dict[str, Any] = {}
        if os.name == "nt":
            kwargs["creationflags"] = subprocess.CREATE_NEW_PROCESS_GROUP  # type: ignore[attr-defined]
        else:
            kwargs["start_new_session"] = True  # the terminal's Ctrl-C reaches only us; we forward it
        python = state.plan.variant.python  # None: the workbench's own (another: isolated)
        self.proc = subprocess.Popen(
            command(python, "workbench.run.worker")
            if python
            else [executor._python, "-m", "workbench.run.worker"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            encoding="utf-8",
            errors="replace",
            bufsize=1,
            # which of the variant's processes this is (0 = the first)
            env={**child_environment(), "WORKBENCH_WORKER": str(state.loads)},
            **kwargs,
        )
        with executor._lock:
            executor._workers.add(self)
        if executor.cancelled:  # cancelled while starting
            _interrupt(self.proc)
        self._reader = threading.Thread(target=self._pump_stderr, daemon=True)
        self._reader.start()
        plan = state.plan
        self._send({"variant": plan.variant.to_dict(), "trials": [t.to_dict() for t in plan.trials]})

    def _send(self, message: dict[str, Any]) -> bool:
        assert self.proc.stdin is not None
        try:
            self.proc.stdin.write(json.dumps(message) + "\n")
            self.proc.stdin.flush()
            return True
        except (BrokenPipeError, OSError, ValueError):
            return False

    def _events(self) -> Iterator[ev.Event]:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            try:
                yield ev.parse_event(line)
            except (json.JSONDecodeError, ev.EventError):
                self._executor._on_log(line.rstrip())

    def wait_loaded(self) -> ev.Event | None:
        """Loaded, LoadFailed, or None when the process ended first."""
        for event in self._events():
            if isinstance(event, ev.Loaded):
                self.loaded = event
                return event
            if isinstance(event, ev.LoadFailed):
                return event
        return None

    def run(self, unit: Unit, on_event: Callable[[ev.Event], None]) -> str:
        """Run ``unit``: ``"done"``, ``"cancelled"``, or ``"died"`` (the process ended)."""
        if not self._send({"run": list(unit.trials)}):
            return "died"
        for event in self._events():
            if isinstance(event, ev.UnitDone):
                return "done"
            if isinstance(event, ev.Cancelled):
                return "cancelled"
            if isinstance(event, ev.Finished):
                return "died"
            on_event(event)
        return "died"

    def close(self) -> None:
        """Tell the worker to close its session and end; wait for it (killed after a grace time when
        cancelled, or when it does not end)."""
        if self.proc.poll() is None:
            self._send({"close": True})
            try:
                assert self.proc.stdin is not None
                self.proc.stdin.close()
            except OSError:
                pass
            for event in self._events():  # drain: Finished, or the rest of a cancelled unit
                if isinstance(event, ev.Finished):
                    break
        try:
            self._reap()
        finally:
            with self._executor._lock:
                self._executor._workers.discard(self)

    def _reap(self) -> None:
        """Wait for the process to end (killed after the grace time) and for its stderr to drain."""
        try:
            self.returncode = self.proc.wait(timeout=CANCEL_GRACE_S)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.returncode = self.proc.wait()
        self._reader.join(timeout=5)

    def death(self) -> str:
        """Why the process ended, with its last line of output."""
        self._reap()
        assert self.returncode is not None
        name = self.state.plan.variant.name
        reason = f"worker process for '{name}' died: {describe_exit(self.returncode)}"
        tail = [line for line in self.stderr_tail if line.strip()]
        if tail:
            reason += f"; last output: {tail[-1].strip()[:300]}"
        return reason

    def _pump_stderr(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            self.stderr_tail.append(line)
            self._executor._on_log(line.rstrip("\n"))


def preflight_spec(spec: Spec) -> None:
    """Refuse, before anything is recorded, variants that cannot run here: a strategy that is not
    available (torch missing, no GPU...) or a model that cannot be had (an uncached hub id while
    offline, a folder without weights). Raises a :class:`~workbench.core.errors.WorkbenchError`."""
    from workbench.core import registry
    from workbench.sources import parse_source, preflight

    elsewhere: dict[str, list[Variant]] = {}  # variants whose worker runs in another interpreter
    for v in spec.variants:
        strategy_cls = registry.get(v.strategy_ref or v.strategy)
        if v.python is not None:  # its strategy is checked where it will run
            elsewhere.setdefault(v.python, []).append(v)
        else:
            strategy = strategy_cls()
            reason = strategy.available()
            if reason:
                raise StrategyError(
                    f"variant '{v.name}': strategy '{v.strategy}' is not available here: {reason}"
                )
            try:
                strategy.preflight(v)
            except WorkbenchError as exc:
                raise type(exc)(f"variant '{v.name}': {exc}") from None
        sources = [v.model] if strategy_cls.requires_model else []
        sources += [getattr(v.config, name) for name in model_source_fields(v.config)]
        for source in sources:
            try:
                preflight(parse_source(source))
            except WorkbenchError as exc:
                raise type(exc)(f"variant '{v.name}': {exc}") from None
    for python, variants in elsewhere.items():
        probe(python, variants)


def run_spec(spec: Spec, store: Store, **kwargs: Any) -> RunResult:
    return RunExecutor(spec, store, **kwargs).run()


def _interrupt(proc: subprocess.Popen[str]) -> None:
    try:
        if os.name == "nt":
            proc.send_signal(signal.CTRL_BREAK_EVENT)  # type: ignore[attr-defined]
        else:
            proc.send_signal(signal.SIGINT)
    except (ProcessLookupError, OSError):
        pass


def _final_status(result: RunResult, cancelled: bool) -> str:
    if cancelled:
        return "cancelled"
    if result.failed == 0:
        return "ok"
    return "partial" if result.ok > 0 else "failed"


def describe_exit(returncode: int) -> str:
    if returncode < 0:
        try:
            name = signal.Signals(-returncode).name
        except ValueError:
            name = f"signal {-returncode}"
        hint = {
            "SIGKILL": " (killed: out of memory, or stopped from outside)",
            "SIGSEGV": " (segmentation fault in native code)",
            "SIGABRT": " (aborted by native code)",
        }.get(name, "")
        return f"killed by {name}{hint}"
    return f"exit code {returncode}"


def mark_matches_baseline(store: Store, run_id: int, baseline: str) -> None:
    """Compare each greedy trial's output with the baseline variant's for the same (workload, prompt,
    repetition): ``matches_baseline`` (identical tokens), ``first_divergence`` (index of the first
    differing token, NULL when identical) and ``match_fraction`` (share of equal positions over the
    longer output). When either side has no token ids (a server that streamed text; rows from before
    ids were stored) the texts are compared, character by character. The baseline's own trials stay
    NULL (it is the reference); so do sampled trials."""
    trials = store.trials(run_id, status="ok")
    reference = {
        (t["workload"], t["prompt_id"], t["repetition"]): t for t in trials if t["variant"] == baseline
    }
    updates = []
    for t in trials:
        if t["variant"] == baseline or t["temperature"]:
            continue
        ref = reference.get((t["workload"], t["prompt_id"], t["repetition"]))
        if ref is not None:
            by_ids = bool(t.get("output_token_ids")) and bool(ref.get("output_token_ids"))
            updates.append((t["id"], compare_outputs(_tokens(t, by_ids), _tokens(ref, by_ids))))
    if updates:
        store.set_baseline_comparison(updates)


def _tokens(trial: dict[str, Any], by_ids: bool) -> list[Any]:
    if by_ids:
        return json.loads(trial["output_token_ids"])
    return list(trial.get("output_text") or "")


def compare_outputs(output: Sequence[Any], reference: Sequence[Any]) -> dict[str, Any]:
    first = next((i for i, (a, b) in enumerate(zip(output, reference, strict=False)) if a != b), None)
    if first is None and len(output) != len(reference):
        first = min(len(output), len(reference))
    longest = max(len(output), len(reference))
    equal = sum(a == b for a, b in zip(output, reference, strict=False))
    return {
        "matches_baseline": int(first is None),
        "first_divergence": first,
        "match_fraction": equal / longest if longest else 1.0,
    }
