"""The runner: executes one variant's trials and owns the clock. Runs inside the worker process.

For every trial: tokenize (not timed) → check the context → reset the memory peak → device sync,
``t0`` → ``session.generate(request, probe)``, where every ``probe.step`` is a device sync plus a
timestamp → device sync, ``t_end`` → metrics from the steps. One timing path for every strategy.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from .errors import describe_exception
from .metrics import StepRecord, trial_metrics
from .plan import TrialPlan
from .strategy import Cancelled, Prompt, Request, Session
from .timing import Clock, Device, MemoryTracker

__all__ = ["TrialResult", "TrialRunner", "encode_prompt"]


class _Probe:
    """The runner's probe. Its hot path is one sync, one clock read and one list append."""

    __slots__ = ("_cancelled", "_clock", "_t0", "records", "tokens")

    def __init__(self, clock: Clock, t0_ns: int, cancelled: Callable[[], bool]) -> None:
        self._clock = clock
        self._t0 = t0_ns
        self._cancelled = cancelled
        self.records: list[tuple[int, int, int, int, float | None, float | None]] = []
        self.tokens: list[int] = []

    def step(
        self,
        token_ids: Any,
        *,
        draft_proposed: int = 0,
        draft_accepted: int = 0,
        draft_ms: float | None = None,
        verify_ms: float | None = None,
    ) -> None:
        t = self._clock.now_ns()
        self.records.append((t, len(token_ids), draft_proposed, draft_accepted, draft_ms, verify_ms))
        self.tokens.extend(int(i) for i in token_ids)
        if self._cancelled():
            raise Cancelled

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

    status: str  # ok | failed | cancelled | skipped
    row: dict[str, Any]
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
        self, session: Session, device: Device, *, cancelled: Callable[[], bool] = lambda: False
    ) -> None:
        self.session = session
        self.device = device
        self.clock = Clock(device)
        self.memory = MemoryTracker(device)
        self._cancelled = cancelled

    def run(self, plan: TrialPlan) -> TrialResult:
        row: dict[str, Any] = {
            "workload": plan.workload,
            "prompt_id": plan.prompt.id,
            "repetition": plan.repetition,
            "warmup": int(plan.warmup),
            "max_new_tokens": plan.max_new_tokens,
            "seed": plan.seed,
            "temperature": plan.temperature,
            "started_at": _utc_now(),
        }
        try:
            input_ids = encode_prompt(self.session, plan.prompt)
        except Exception as exc:
            return self._failed(
                row, f"could not tokenize prompt {plan.prompt.id!r}: {describe_exception(exc)}"
            )
        row["input_tokens"] = len(input_ids)
        context = self.session.context_length
        if context is not None and len(input_ids) + plan.max_new_tokens > context:
            reason = (
                f"prompt {plan.prompt.id!r} has {len(input_ids)} tokens + {plan.max_new_tokens} new tokens, "
                f"more than the model's context of {context}"
            )
            # A sweep point beyond the context is capped (skipped), not an error of the user's.
            return TrialResult(
                "skipped" if plan.prompt.input_tokens else "failed",
                {**row, "status": "failed", "error": reason},
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
        self.memory.reset()
        t0 = self.clock.now_ns()
        probe = _Probe(self.clock, t0, self._cancelled)
        try:
            output = self.session.generate(request, probe)
        except Cancelled:
            return TrialResult("cancelled", {**row, "status": "cancelled", "error": "run cancelled"}, [])
        except Exception as exc:
            self._recover(exc)
            return self._failed(row, describe_exception(exc))
        t_end = self.clock.now_ns()
        peak_mb = self.memory.peak_mb()
        if list(output.token_ids) != probe.tokens:
            return self._failed(
                row,
                f"strategy contract broken: {len(probe.tokens)} tokens reported through the probe, "
                f"{len(output.token_ids)} returned",
            )
        steps = probe.steps()
        metrics = trial_metrics(steps, len(input_ids))
        row.update(metrics.to_row())
        row.update(
            status="ok",
            e2e_ms=(t_end - t0) / 1e6,
            peak_memory_mb=peak_mb,
            output_text=output.text,
            output_token_ids=json.dumps(list(output.token_ids)),
            finish_reason=output.finish_reason,
            cached_tokens=int(output.cached_tokens),
            trimmed_tokens=int(output.trimmed_tokens),
        )
        return TrialResult("ok", row, [s.to_row() for s in steps])

    def _failed(self, row: dict[str, Any], error: str) -> TrialResult:
        return TrialResult("failed", {**row, "status": "failed", "error": error}, [])

    def _recover(self, exc: Exception) -> None:
        """After a CUDA OOM the allocator cache holds the failed trial's memory; free it."""
        if self.device.is_cuda and "OutOfMemory" in type(exc).__name__:
            import torch

            torch.cuda.empty_cache()


def _utc_now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime()) + "Z"
