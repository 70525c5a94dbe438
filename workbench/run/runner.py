"""The runner: executes one variant's trials and owns the clock. Runs inside the worker process.

For every trial: tokenize (not timed) → check the context → reset the memory peak → device sync,
``t0`` → ``session.generate(request, probe)``, where every ``probe.step`` is a device sync plus a
timestamp → device sync, ``t_end`` → metrics from the steps. One timing path for every strategy.

A variant with ``concurrency = N`` (strategies that serve parallel requests: ``endpoint``) runs a
group of trials as N parallel streams (:meth:`TrialRunner.run_group`): N threads, each calling
``generate`` with its own probe on the same clock, so every stream is timed exactly like a
sequential trial; the strategy still only generates. A variant with ``batch_size = N`` runs groups of
N trials as one batch (:meth:`TrialRunner.run_batch`): one clock start, one ``generate_batch`` call
with a probe per request.
"""

from __future__ import annotations

import dataclasses
import json
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from workbench.core.device import Device
from workbench.core.errors import describe_exception
from workbench.core.literals import TrialOutcome
from workbench.core.strategy import Cancelled, Output, Prompt, Request, Session, Trace
from workbench.run.clock import Clock, MemoryTracker
from workbench.run.metrics import StepRecord, trial_metrics
from workbench.run.plan import TrialPlan
from workbench.store.records import TrialRecord

__all__ = ["TrialResult", "TrialRunner", "encode_prompt"]


class _Probe:
    """The runner's probe. Its hot path is one sync, one clock read and one list append."""

    __slots__ = ("_cancelled", "_clock", "_t0", "counted", "marks", "records", "t_end", "tokens")
    trace: Trace | None = None  # timed trials are never traced (Probe.trace: the quality pass's replay)

    def __init__(self, clock: Clock, t0_ns: int, cancelled: Callable[[], bool]) -> None:
        self._clock = clock
        self._t0 = t0_ns
        self._cancelled = cancelled
        self.records: list[tuple[int, int, int, int, float | None, float | None]] = []
        self.tokens: list[int] = []
        self.counted = False  # some step was reported as a count (ids unknown)
        self.t_end: int | None = None
        self.marks: dict[str, int] = {}  # a sub-phase's end (probe.mark): clock reading

    def step(
        self,
        token_ids: Any = (),
        *,
        n_tokens: int | None = None,
        draft_proposed: int = 0,
        draft_accepted: int = 0,
        draft_ms: float | None = None,
        verify_ms: float | None = None,
    ) -> None:
        t = self._clock.now_ns()
        if n_tokens is None:
            n_tokens = len(token_ids)
            self.tokens.extend(int(i) for i in token_ids)
        else:
            self.counted = True
        self.records.append((t, n_tokens, draft_proposed, draft_accepted, draft_ms, verify_ms))
        if self._cancelled():
            raise Cancelled

    def recount(self, n_tokens: Sequence[int]) -> None:
        if self.tokens:
            raise ValueError("recount() is for steps reported with n_tokens, not with token ids")
        if len(n_tokens) != len(self.records):
            raise ValueError(f"recount() got {len(n_tokens)} counts for {len(self.records)} steps")
        self.counted = True
        self.records = [(r[0], int(n), *r[2:]) for r, n in zip(self.records, n_tokens, strict=True) if n > 0]

    def mark(self, phase: str) -> None:
        self.marks[phase] = self._clock.now_ns()

    def end(self) -> None:
        self.t_end = self._clock.now_ns()

    def steps(self) -> list[StepRecord]:
        return [
            StepRecord(
                idx=i,
                t_ms=(t - self._t0) / 1e6,
                n_tokens=n,
                draft_proposed=p,
                draft_accepted=a,
                draft_ms=dm,
                verify_ms=vm,
            )
            for i, (t, n, p, a, dm, vm) in enumerate(self.records)
        ]


@dataclass
class TrialResult:
    """A finished (or failed, or skipped) trial, ready for the store."""

    status: TrialOutcome
    record: TrialRecord  # without the variant's fields: the parent adds them
    steps: list[dict[str, Any]]


def encode_prompt(session: Session, prompt: Prompt) -> list[int]:
    """Tokenize a prompt; for the input-length sweep, cut (repeating the text if short) to exactly
    ``prompt.input_tokens`` tokens."""
    if prompt.input_tokens is None:
        return list(session.encode(prompt))
    want = prompt.input_tokens
    text = prompt.prompt or ""
    copies = 1
    ids = list(session.encode(Prompt(id=prompt.id, prompt=text)))
    while len(ids) < want and text:
        copies *= 2
        ids = list(session.encode(Prompt(id=prompt.id, prompt="\n\n".join([text] * copies))))
    return ids[:want]


class TrialRunner:
    def __init__(
        self,
        session: Session,
        device: Device,
        *,
        cancelled: Callable[[], bool] = lambda: False,
        memory: MemoryTracker | None = None,
    ) -> None:
        self.session = session
        self.device = device
        self.clock = Clock(device)
        self.memory = memory or MemoryTracker(device)
        self._cancelled = cancelled

    def run(self, plan: TrialPlan) -> TrialResult:
        """One trial, alone: tokenize (untimed), then time ``generate``."""
        prepared = self._prepare(plan)
        if isinstance(prepared, TrialResult):
            return prepared
        return self._measure(*prepared, track_memory=True)

    def run_group(
        self,
        plans: Sequence[TrialPlan],
        concurrency: int,
        on_result: Callable[[int, TrialResult], None],
        *,
        group: int | None = None,
    ) -> None:
        """Run ``plans`` as up to ``concurrency`` parallel streams (closed loop: a stream that finishes
        starts the next trial), calling ``on_result(index, result)`` as each finishes (serialized).

        Every prompt is tokenized first (untimed), then N threads each take the next trial, read the
        clock and call ``session.generate`` with a probe of its own: each stream is timed by this
        runner's clock exactly like a sequential trial. ``group_offset_ms`` records when each trial
        started relative to the group, so the group's aggregate tokens/s can be recomputed.
        """
        lock = threading.Lock()
        ready = self._prepare_all(plans, on_result)
        pending = iter(ready)
        errors: list[BaseException] = []
        group_t0 = self.clock.now_ns()

        def stream() -> None:
            try:
                while not self._cancelled() and not errors:
                    with lock:
                        item = next(pending, None)
                    if item is None:
                        return
                    index, record, request = item
                    record = dataclasses.replace(record, concurrency=concurrency, concurrent_group=group)
                    result = self._measure(record, request, track_memory=False, group_t0=group_t0)
                    with lock:
                        on_result(index, result)
            except BaseException as exc:  # e.g. the parent stopped reading: re-raised below
                errors.append(exc)

        threads = [
            threading.Thread(target=stream, name=f"stream-{i}", daemon=True)
            for i in range(min(concurrency, len(ready)))
        ]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        if errors:
            raise errors[0]

    def _prepare_all(
        self, plans: Sequence[TrialPlan], on_result: Callable[[int, TrialResult], None]
    ) -> list[tuple[int, TrialRecord, Request]]:
        """Tokenize every plan (untimed); a plan that cannot run is reported through ``on_result`` at
        once, the others come back as (index, record, request)."""
        ready: list[tuple[int, TrialRecord, Request]] = []
        for index, plan in enumerate(plans):
            prepared = self._prepare(plan)
            if isinstance(prepared, TrialResult):
                on_result(index, prepared)
            else:
                ready.append((index, *prepared))
        return ready

    def _prepare(self, plan: TrialPlan) -> tuple[TrialRecord, Request] | TrialResult:
        record = TrialRecord(
            workload=plan.workload,
            prompt_id=plan.prompt.id,
            repetition=plan.repetition,
            round=plan.round,
            warmup=int(plan.warmup),
            max_new_tokens=plan.max_new_tokens,
            seed=plan.seed,
            temperature=plan.temperature,
            started_at=_utc_now(),
            timing_scope=self.session.timing_scope,
            concurrency=1,
            batch_size=1,
        )
        try:
            input_ids = encode_prompt(self.session, plan.prompt)
        except Exception as exc:
            return self._failed(
                record, f"could not tokenize prompt {plan.prompt.id!r}: {describe_exception(exc)}"
            )
        record = dataclasses.replace(record, input_tokens=len(input_ids))
        context = self.session.context_length
        if context is not None and len(input_ids) + plan.max_new_tokens > context:
            reason = (
                f"prompt {plan.prompt.id!r} has {len(input_ids)} tokens + {plan.max_new_tokens} new tokens, "
                f"more than the model's context of {context}"
            )
            # A sweep point beyond the context is capped (skipped), not an error of the user's.
            return TrialResult(
                "skipped" if plan.prompt.input_tokens else "failed",
                dataclasses.replace(record, status="failed", error=reason),
                [],
            )
        request = Request(
            prompt=plan.prompt,
            input_ids=tuple(input_ids),
            max_new_tokens=plan.max_new_tokens,
            temperature=plan.temperature,
            top_p=plan.top_p,
            top_k=plan.top_k,
            seed=plan.seed,
            ignore_eos=plan.ignore_eos,
            stop=plan.stop,
        )
        return record, request

    def _measure(
        self, record: TrialRecord, request: Request, *, track_memory: bool, group_t0: int | None = None
    ) -> TrialResult:
        # Only an in-process model's memory is the worker's; a client's RSS says nothing about a server.
        track_memory = track_memory and self.session.timing_scope == "in-process"
        if track_memory:
            self.memory.reset()
        t0 = self.clock.now_ns()
        if group_t0 is not None:
            record = dataclasses.replace(record, group_offset_ms=(t0 - group_t0) / 1e6)
        probe = _Probe(self.clock, t0, self._cancelled)
        try:
            output = self.session.generate(request, probe)
        except Cancelled:
            return _cancelled(record)
        except Exception as exc:
            self._recover(exc)
            return self._failed(record, describe_exception(exc))
        t_end = probe.t_end if probe.t_end is not None else self.clock.now_ns()
        peak_mb = self.memory.peak_mb() if track_memory else None
        return self._finish(record, probe, output, t0, t_end, peak_mb)

    def run_batch(
        self,
        plans: Sequence[TrialPlan],
        on_result: Callable[[int, TrialResult], None],
        *,
        group: int | None = None,
    ) -> None:
        """Run ``plans`` as one batch (a variant's ``batch_size``): every prompt tokenized first (untimed),
        then one clock start for all, ``session.generate_batch`` with one probe per request, so each
        request's TTFT and TPOT are its own as a user of the batch sees them, and the group's aggregate
        tokens/s is recomputable (``concurrent_group``, ``group_offset_ms`` = 0). A request's ``e2e_ms``
        ends at its last token (a request that stopped early does not wait for the batch)."""
        ready = self._prepare_all(plans, on_result)
        if not ready:
            return
        ready = [
            (
                index,
                dataclasses.replace(
                    record,
                    concurrency=len(ready),
                    batch_size=len(ready),
                    concurrent_group=group,
                    group_offset_ms=0.0,
                ),
                request,
            )
            for index, record, request in ready
        ]
        self.memory.reset()
        t0 = self.clock.now_ns()
        probes = [_Probe(self.clock, t0, self._cancelled) for _ in ready]
        try:
            outputs = self.session.generate_batch([request for _, _, request in ready], probes)
        except Cancelled:
            for index, record, _ in ready:
                on_result(index, _cancelled(record))
            return
        except Exception as exc:
            self._recover(exc)
            for index, record, _ in ready:
                on_result(index, self._failed(record, describe_exception(exc)))
            return
        t_end = self.clock.now_ns()
        peak_mb = self.memory.peak_mb()  # the batch's peak, the same for each of its requests
        for (index, record, _), probe, output in zip(ready, probes, outputs, strict=True):
            end = probe.records[-1][0] if probe.records else t_end
            on_result(index, self._finish(record, probe, output, t0, end, peak_mb))

    def _finish(
        self, record: TrialRecord, probe: _Probe, output: Output, t0: int, t_end: int, peak_mb: float | None
    ) -> TrialResult:
        if probe.counted:
            if output.token_ids:
                return self._failed(
                    record,
                    "strategy contract broken: steps were reported as counts (n_tokens) but token ids "
                    "were returned",
                )
        elif list(output.token_ids) != probe.tokens:
            return self._failed(
                record,
                f"strategy contract broken: {len(probe.tokens)} tokens reported through the probe, "
                f"{len(output.token_ids)} returned",
            )
        input_tokens = output.input_tokens if output.input_tokens is not None else record.input_tokens
        assert input_tokens is not None  # set by _prepare
        steps = probe.steps()
        metrics = trial_metrics(steps, input_tokens)
        record = dataclasses.replace(
            record,
            input_tokens=input_tokens,
            **metrics.to_row(),
            status="ok",
            e2e_ms=(t_end - t0) / 1e6,
            peak_memory_mb=peak_mb,
            output_text=output.text,
            output_token_ids=json.dumps(list(output.token_ids)) if not probe.counted else None,
            finish_reason=output.finish_reason,
            token_count_source=output.token_count_source,
            cached_tokens=int(output.cached_tokens),
            trimmed_tokens=int(output.trimmed_tokens),
            compress_ms=(probe.marks["compress"] - t0) / 1e6 if "compress" in probe.marks else None,
            compress_rate=output.compress_rate,
            kv_held_tokens=output.kv_held_tokens,
            kv_held_bytes=output.kv_held_bytes,
            compress_protected=(
                json.dumps(output.compress_protected) if output.compress_protected is not None else None
            ),
        )
        return TrialResult("ok", record, [s.to_row() for s in steps])

    def _failed(self, record: TrialRecord, error: str) -> TrialResult:
        return TrialResult("failed", dataclasses.replace(record, status="failed", error=error), [])

    def _recover(self, exc: Exception) -> None:
        """After a CUDA OOM the allocator cache holds the failed trial's memory; free it."""
        if self.device.is_cuda and "OutOfMemory" in type(exc).__name__:
            import torch

            torch.cuda.empty_cache()


def _cancelled(record: TrialRecord) -> TrialResult:
    return TrialResult(
        "cancelled", dataclasses.replace(record, status="cancelled", error="run cancelled"), []
    )


def _utc_now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime()) + "Z"
