"""Every write a run makes to the store, in one place: the run and its variants when it starts, each
variant as it loads, each trial as it arrives (and the trials a dead variant never ran), the server's
own figures, the notes on the design, the quality pass's rows (:mod:`workbench.run.quality`), and at
the end the statuses, the machine's environment and the outputs' fidelity against the baseline
(:mod:`workbench.analysis.fidelity`).

A run's status is written last, so a run reads ``ok`` only once everything else of it is stored. A
write that fails (a full disk, a size limit, a database that refuses an insert) makes the run
``failed`` with the reason (:meth:`RunRecorder.fault`): that status and reason are written first when
the run closes, then whatever else can still be written (docs/architecture.md, "What a run's status
promises").

The parent process is the single writer of the results database; :class:`RunRecorder` is its pen,
and it keeps the tallies that go with the writes: the run's :class:`RunResult` and the
:class:`Progress` a display shows (each recorded trial is reported through ``report``). The executor
(:mod:`workbench.run.execute`) decides what happens; this module writes it down.
"""

from __future__ import annotations

import dataclasses
import json
import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from workbench import __version__
from workbench.analysis.fidelity import baseline_comparisons
from workbench.core.errors import StoreError
from workbench.core.literals import RunStatus, TrialOrder, TrialOutcome, TrialStatus, Workers
from workbench.core.variant import Variant
from workbench.formatting import count, duration
from workbench.run import events as ev
from workbench.run.plan import TrialPlan, VariantPlan
from workbench.spec.parse import Spec
from workbench.store import Store, TrialRecord

__all__ = ["Progress", "RunRecorder", "RunResult"]


@dataclass
class Progress:
    """What a progress display needs; passed to ``on_progress`` after every event."""

    total: int  # trials planned (warm-ups included)
    done: int = 0
    failed: int = 0
    variant: str = ""
    message: str = ""
    last_trial: TrialRecord | None = None  # as stored
    #: ``repetitions = "auto"``: the widest speed-up CI's half-width (a fraction) after the last
    #: repetition looked at; None before the first look or when no CI exists yet
    interval: float | None = None


@dataclass
class RunResult:
    run_id: int
    status: RunStatus
    ok: int = 0
    failed: int = 0
    cancelled: int = 0
    skipped: int = 0
    errors: list[str] = field(default_factory=list)
    #: why the run failed as a whole (a result that could not be stored...); None when it ended as
    #: planned, whatever its trials did
    error: str | None = None

    def final_status(self, cancelled: bool, lost: bool = False) -> RunStatus:
        """The run's status once it has ended (``cancelled``: a cancel stopped trials it needed;
        ``lost``: a planned trial of some variant is not there as run to its end, whatever the
        reason: a worker stopped by a signal nobody in the run sent, a variant that died). ``ok``
        only when every planned trial ran to its end and none failed."""
        if self.error is not None:  # the run failed as a whole
            return "failed"
        if cancelled:
            return "cancelled"
        if self.failed == 0 and not lost:
            return "ok"
        return "partial" if self.ok > 0 else "failed"


class RunRecorder:
    """One run's writes. :meth:`start` creates the run; every other method writes to it."""

    def __init__(self, store: Store, progress: Progress, report: Callable[[str], None]) -> None:
        self.store = store
        self.progress = progress
        self._report = report
        self.run_id: int | None = None
        self.result = RunResult(run_id=0, status="running")
        #: the run's environment: the host and, per variant, what its worker saw (written at the end)
        self.environment: dict[str, Any] = {}
        self._host_elsewhere = False  # the environment's host was seen from another interpreter
        #: per compiled variant: its later (fresh) workers' compile times, ms, in order
        self._recompiles: dict[str, list[float]] = {}

    @property
    def _run(self) -> int:
        assert self.run_id is not None, "the run has not started"
        return self.run_id

    def start(self, spec: Spec, plans: Sequence[VariantPlan]) -> int:
        """Close runs a dead process left ``running``, create this one and its variants (pending)."""
        self.store.reap_stale_runs()
        self.run_id = self.store.create_run(
            name=spec.name, spec_text=spec.text, baseline=spec.baseline_variant, version=__version__
        )
        self.result = RunResult(run_id=self.run_id, status="running")
        try:
            self._add_variants(plans)
        except StoreError as exc:  # the run exists: it is closed as failed before the error goes on
            self.fault(f"the run's variants could not be stored: {exc}")
            self.finish({}, "failed", spec.baseline_variant)
            raise
        return self.run_id

    def _add_variants(self, plans: Sequence[VariantPlan]) -> None:
        assert self.run_id is not None
        for plan in plans:
            v = plan.variant
            self.store.add_variant(
                self.run_id,
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
                    "compile": v.compile,
                    "sweep_param": v.sweep_param,
                    "sweep_value": json.dumps(v.sweep_value) if v.sweep_param else None,
                },
            )

    def loaded(self, variant: Variant, event: ev.Loaded, *, forked: bool = False) -> None:
        """The variant is loaded: what it reported about itself, and the machine as its worker saw it;
        then reported (``forked``: its worker was forked from a fork server)."""
        loaded = event.variant_fields()
        first = self.environment.get("variants", {}).get(variant.name)
        if first is not None:  # a fresh worker: the load time stays the first (cold) one's, and what
            # a fresh worker does not measure again (the memory bandwidth) the first one's
            loaded["load_ms"] = first["load_ms"]
            # so does the compile time (inductor's caches are warm for a fresh worker): the fresh
            # workers' own compiles are kept apart, their median in ``recompile_ms``
            if event.compile_ms is not None:
                later = self._recompiles.setdefault(variant.name, [])
                later.append(event.compile_ms)
                loaded["recompile_ms"] = statistics.median(later)
            loaded["compile_ms"] = first["compile_ms"]
            loaded.update({k: v for k, v in first.items() if k in loaded and loaded[k] is None})
        environment = event.environment
        # The machine: as a worker in the workbench's own interpreter saw it (one in another Python
        # environment has other libraries); the first variant's until one of those loads.
        if "host" not in self.environment or (self._host_elsewhere and variant.python is None):
            self.environment["host"] = environment
            self._host_elsewhere = variant.python is not None
        else:
            # a CPU variant's worker reads nothing of the GPU (it creates no CUDA context): the first
            # CUDA variant's worker describes it
            host = self.environment["host"]
            if "gpu" in environment and "gpu" not in host:
                host.update({k: v for k, v in environment.items() if k.startswith(("gpu", "cuda"))})
        entry = dict(loaded)
        if variant.name in self._recompiles:
            entry["recompile_ms_workers"] = list(self._recompiles[variant.name])
        if "torch_threads" in environment:  # per variant: its `threads` may differ
            entry["torch_threads"] = environment["torch_threads"]
        if variant.python is not None:  # another Python environment: its own libraries
            entry.update(
                python=variant.python,
                python_version=environment.get("python"),
                packages=environment.get("packages", {}),
            )
        self.environment.setdefault("variants", {})[variant.name] = entry
        server = json.dumps(loaded["server"]) if loaded["server"] is not None else None
        packages = json.dumps(environment["packages"]) if environment.get("packages") else None
        self.store.update_variant(
            self._run, variant.name, {**loaded, "server": server, "packages": packages, "status": "loaded"}
        )
        where = ""
        if variant.python is not None:
            versions = environment.get("packages", {})
            libraries = ", ".join(
                f"{name} {versions[name]}" for name in ("transformers", "torch") if name in versions
            )
            where = f" (python {variant.python}{': ' + libraries if libraries else ''})"
        elif forked:
            where = " (forked)"
        if event.compile_ms is not None:
            again = " again" if first is not None else ""
            where += f", compiled ({variant.compile}){again} in {duration(event.compile_ms / 1000, 1)}"
        self._report(f"{variant.name} loaded on {event.device} in {duration(event.load_ms / 1000, 1)}{where}")

    def trial(
        self,
        variant: Variant,
        plan: TrialPlan,
        status: TrialOutcome,
        trial: TrialRecord,
        steps: Sequence[dict[str, Any]],
    ) -> int | None:
        """Write one trial of ``variant`` that its worker sent (and its steps), count it and report it.
        Returns its id; None for a trial ``skipped`` (a sweep point beyond the model's context: capped,
        not recorded)."""
        result, progress = self.result, self.progress
        if status == "skipped":
            result.skipped += 1
            progress.done += 1
            self._report(f"skipped {plan.workload}/{plan.prompt.id}: {trial.error}")
            return None
        record = dataclasses.replace(
            trial,
            run_id=self._run,
            variant=variant.name,
            strategy=variant.strategy,
            model=variant.model,
            turn=plan.turn,
            history_tokens=plan.history_tokens,
        )
        record = dataclasses.replace(record, id=self.store.add_trial(self._run, record, steps))
        if not plan.warmup or status != "ok":
            setattr(result, status, getattr(result, status) + 1)
        if status == "failed":
            result.errors.append(f"{variant.name}/{plan.workload}/{plan.prompt.id}: {record.error}")
            progress.failed += 1
        progress.done += 1
        progress.last_trial = record
        label = f"{variant.name} {plan.workload}/{plan.prompt.id}" + (" (warm-up)" if plan.warmup else "")
        if status == "ok":
            self._report(
                f"{label}: TTFT {count(record.ttft_ms)} ms, {record.output_tokens} tokens, "
                f"e2e {count(record.e2e_ms)} ms"
            )
        else:
            self._report(f"{label}: {status} {record.error or ''}".rstrip())
        return record.id

    def conversation_turns(self, answered: Sequence[ev.Anchored]) -> None:
        """The baseline's answers every variant's conversation turns get as history."""
        self.store.add_conversation_turns(
            self._run,
            [
                {
                    "workload": a.workload,
                    "conversation": a.conversation,
                    "turn": k,
                    "answer": answer,
                    "history_tokens": tokens,
                }
                for a in answered
                for k, (answer, tokens) in enumerate(zip(a.answers, a.history_tokens, strict=True), start=1)
            ],
        )

    def never_ran(
        self, variant: Variant, trials: Sequence[TrialPlan], reason: str, status: TrialStatus = "failed"
    ) -> None:
        """Write each of ``trials`` as ``status`` with ``reason``, count them and report the reason:
        failed when its worker could not load or died first, cancelled when a cancel killed its worker
        in the middle of them."""
        for trial in trials:
            record = TrialRecord.failed(
                reason,
                variant=variant.name,
                strategy=variant.strategy,
                model=variant.model,
                workload=trial.workload,
                prompt_id=trial.prompt.id,
                repetition=trial.repetition,
                warmup=trial.warmup,
                max_new_tokens=trial.max_new_tokens,
                seed=trial.seed,
                temperature=trial.temperature,
            )
            self.store.add_trial(self._run, dataclasses.replace(record, status=status))
        setattr(self.result, status, getattr(self.result, status) + len(trials))
        if status == "failed":
            self.progress.failed += len(trials)
            self.result.errors.append(reason)
        self.progress.done += len(trials)
        self._report(reason)

    def server_metrics(self, variant: Variant, event: ev.ServerMetrics, ids: Sequence[int | None]) -> None:
        """A served variant's own figures over a group of trials (``ids``: the stored trials')."""
        self.store.add_server_metrics(
            self._run,
            {
                "variant": variant.name,
                "workload": event.workload,
                "warmup": int(event.warmup),
                "trials": len(ids),
                "trial_id": ids[0] if len(ids) == 1 else None,
                **event.figures,
            },
        )

    def quality(
        self,
        variant: dict[str, Any],
        *,
        reference: Sequence[dict[str, Any]] = (),
        positions: Sequence[dict[str, Any]] = (),
    ) -> None:
        """One variant's quality-pass outcome with its per-position rows (:mod:`workbench.run.quality`)."""
        self.store.add_quality(self._run, variant, reference=reference, positions=positions)

    def equivalence(self, variant: dict[str, Any], rows: Sequence[dict[str, Any]]) -> None:
        """A lossless variant's equivalence check (:mod:`workbench.run.equivalence`)."""
        self.store.add_equivalence(self._run, variant, rows)

    def note(self, text: str) -> None:
        """Why the run's design differs from the spec's, or how ``repetitions = "auto"`` ended."""
        self.store.update_run(self._run, {"trial_order_note": text})

    def design(self, order: TrialOrder, repetitions: int, workers: Workers | None) -> None:
        """The design that ran: the order, the measured repetitions, the workers' policy."""
        self.store.update_run(
            self._run, {"trial_order": order, "repetitions": repetitions, "workers": workers}
        )

    def fault(self, reason: str) -> None:
        """The run fails as a whole (the first reason is kept): :meth:`finish` records it ``failed``."""
        if self.result.error is None:
            self.result.error = reason
            self._report(reason)

    def finish(self, variants: dict[str, dict[str, Any]], status: RunStatus, baseline: str) -> None:
        """The end: each variant's final status, the environment, for a run with finished trials the
        outputs compared with the baseline's, and last the run's ``status``. After a :meth:`fault`,
        or when one of these writes fails, the run is closed ``failed`` instead (:meth:`_close_failed`)."""
        if self.result.error is None:
            try:
                for name, values in variants.items():
                    self.store.update_variant(self._run, name, values)
                if self.environment:
                    self.store.set_environment(self._run, self.environment)
                if status in ("ok", "partial"):
                    ok = self.store.trials(self._run, status="ok")
                    if updates := baseline_comparisons(ok, baseline):
                        self.store.set_baseline_comparison(updates)
                self.store.finish_run(self._run, status)
                self.result.status = status
                return
            except StoreError as exc:
                self.fault(f"the run's results could not be stored: {exc}")
        self._close_failed(variants)

    def _close_failed(self, variants: dict[str, dict[str, Any]]) -> None:
        """Close a run that failed as a whole: its status and reason first (once more after a WAL
        checkpoint, which lets a log stopped by a size limit start again), then what else can still
        be written. A record that cannot be closed at all reads ``running`` until the next command
        that opens the database closes it as failed (:meth:`Store.reap_stale_runs`)."""
        result = self.result
        result.status = "failed"
        assert result.error is not None
        for attempt in range(2):
            try:
                self.store.finish_run(self._run, "failed", error=result.error)
                break
            except StoreError as exc:
                if attempt:
                    result.error += f"; the record could not be closed either ({exc})"
                    return
                self.store.checkpoint()
        try:
            for name, values in variants.items():
                self.store.update_variant(self._run, name, values)
            if self.environment:
                self.store.set_environment(self._run, self.environment)
        except StoreError:
            pass  # the run's status and reason are stored: that is what a reader needs
