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
import json
import os
import signal
import subprocess
import sys
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import IO, Any

from workbench import __version__
from workbench.core.config import model_source_fields
from workbench.core.errors import StrategyError, WorkbenchError
from workbench.run import events as ev
from workbench.run.plan import TrialPlan, VariantPlan, plan_run
from workbench.spec.parse import Spec
from workbench.store import Store

__all__ = ["Progress", "RunExecutor", "RunResult", "run_spec"]

#: seconds a worker gets to stop after a cancel before it is killed
CANCEL_GRACE_S = 15.0


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
        self._proc: subprocess.Popen[str] | None = None
        self._lock = threading.Lock()
        self.run_id: int | None = None

    # -- control ---------------------------------------------------------------------------------

    def cancel(self) -> None:
        """Ask the run to stop (thread-safe). Asked twice, the worker is killed at once."""
        again = self._cancel.is_set()
        self._cancel.set()
        with self._lock:
            proc = self._proc
        if proc is not None and proc.poll() is None:
            if again:
                proc.kill()
            else:
                _interrupt(proc)

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
                    "sweep_param": v.sweep_param,
                    "sweep_value": json.dumps(v.sweep_value) if v.sweep_param else None,
                },
            )
        environment: dict[str, Any] = {}
        try:
            for plan in self.plans:
                if self.cancelled:
                    self.store.update_variant(run_id, plan.variant.name, {"status": "cancelled"})
                    continue
                self._run_variant(plan, result, environment)
        finally:
            result.status = _final_status(result, self.cancelled)
            if environment:
                self.store.set_environment(run_id, environment)
            self.store.finish_run(run_id, result.status)
            if result.status in ("ok", "partial"):
                mark_matches_baseline(self.store, run_id, self.spec.baseline_variant)
        return result

    def _run_variant(self, plan: VariantPlan, result: RunResult, environment: dict[str, Any]) -> None:
        variant = plan.variant
        run_id = self.run_id
        assert run_id is not None
        self.progress.variant = variant.name
        self._report(f"loading {variant.name}")
        job = {"variant": variant.to_dict(), "trials": [t.to_dict() for t in plan.trials]}
        proc = self._start_worker()
        stderr_tail: collections.deque[str] = collections.deque(maxlen=40)
        reader = threading.Thread(target=self._pump_stderr, args=(proc.stderr, stderr_tail), daemon=True)
        reader.start()
        received: set[int] = set()
        trial_ids: dict[int, int | None] = {}
        finished = load_failed = False
        try:
            assert proc.stdin is not None and proc.stdout is not None
            try:
                proc.stdin.write(json.dumps(job))
                proc.stdin.close()
            except BrokenPipeError:
                pass
            for line in proc.stdout:
                try:
                    event = ev.parse_event(line)
                except (json.JSONDecodeError, ev.EventError):
                    self._on_log(line.rstrip())
                    continue
                if isinstance(event, ev.Loaded):
                    loaded = event.variant_fields()
                    environment.setdefault("host", event.environment)
                    environment.setdefault("variants", {})[variant.name] = loaded
                    if "torch_threads" in event.environment:  # per variant: its `threads` may differ
                        environment["variants"][variant.name] = {
                            **loaded,
                            "torch_threads": event.environment["torch_threads"],
                        }
                    server = json.dumps(loaded["server"]) if loaded["server"] is not None else None
                    self.store.update_variant(
                        run_id, variant.name, {**loaded, "server": server, "status": "loaded"}
                    )
                    self._report(f"{variant.name} loaded on {event.device} in {event.load_ms / 1000:.1f} s")
                elif isinstance(event, ev.LoadFailed):
                    load_failed = True
                    self._fail_rest(
                        plan, received, f"could not load variant '{variant.name}': {event.error}", result
                    )
                elif isinstance(event, ev.TrialDone):
                    received.add(event.index)
                    trial_ids[event.index] = self._record_trial(plan, plan.trials[event.index], event, result)
                elif isinstance(event, ev.ServerMetrics):
                    ids = [trial_ids.get(i) for i in event.trials]
                    self.store.add_server_metrics(
                        run_id,
                        {
                            "variant": variant.name,
                            "workload": event.workload,
                            "warmup": int(event.warmup),
                            "trials": len(ids),
                            "trial_id": ids[0] if len(ids) == 1 else None,
                            **event.figures,
                        },
                    )
                elif isinstance(event, ev.Finished):
                    finished = True
        except BaseException:
            proc.kill()  # this process failed (e.g. the disk is full): do not leave the worker running
            raise
        finally:
            returncode = self._wait(proc)
            reader.join(timeout=5)
        if load_failed:
            self.store.update_variant(run_id, variant.name, {"status": "failed", "error": result.errors[-1]})
            return
        if finished:
            self.store.update_variant(run_id, variant.name, {"status": "ok"})
            return
        if self.cancelled:
            self.store.update_variant(run_id, variant.name, {"status": "cancelled"})
            return
        reason = f"worker process for '{variant.name}' died: {describe_exit(returncode)}"
        tail = [line for line in stderr_tail if line.strip()]
        if tail:
            reason += f"; last output: {tail[-1].strip()[:300]}"
        self._fail_rest(plan, received, reason, result)
        self.store.update_variant(run_id, variant.name, {"status": "failed", "error": reason})

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

    # -- process plumbing ------------------------------------------------------------------------

    def _start_worker(self) -> subprocess.Popen[str]:
        kwargs: dict[str, Any] = {}
        if os.name == "nt":
            kwargs["creationflags"] = subprocess.CREATE_NEW_PROCESS_GROUP  # type: ignore[attr-defined]
        else:
            kwargs["start_new_session"] = True  # the terminal's Ctrl-C reaches only us; we forward it
        env = {**os.environ, "PYTHONUNBUFFERED": "1", "TOKENIZERS_PARALLELISM": "false"}
        proc = subprocess.Popen(
            [self._python, "-m", "workbench.run.worker"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            encoding="utf-8",
            errors="replace",
            bufsize=1,
            env=env,
            **kwargs,
        )
        with self._lock:
            self._proc = proc
        if self.cancelled:  # cancelled while starting
            _interrupt(proc)
        return proc

    def _wait(self, proc: subprocess.Popen[str]) -> int:
        try:
            return proc.wait(timeout=CANCEL_GRACE_S if self.cancelled else None)
        except subprocess.TimeoutExpired:
            proc.kill()
            return proc.wait()
        finally:
            with self._lock:
                self._proc = None

    def _pump_stderr(self, stream: IO[str], tail: collections.deque[str]) -> None:
        for line in stream:
            tail.append(line)
            self._on_log(line.rstrip("\n"))

    def _report(self, message: str) -> None:
        self.progress.message = message
        self._on_progress(self.progress)


def preflight_spec(spec: Spec) -> None:
    """Refuse, before anything is recorded, variants that cannot run here: a strategy that is not
    available (torch missing, no GPU...) or a model that cannot be had (an uncached hub id while
    offline, a folder without weights). Raises a :class:`~workbench.core.errors.WorkbenchError`."""
    from workbench.core import registry
    from workbench.spec.sources import parse_source, preflight

    for v in spec.variants:
        strategy_cls = registry.get(v.strategy_ref or v.strategy)
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
