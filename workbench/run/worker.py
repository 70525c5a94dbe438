"""The worker process: loads one variant and runs its trials when told, streaming events to the parent.

Started as ``python -m workbench.run.worker`` by :mod:`workbench.run.process` (the CLI and the GUI use the
same path). The job (one variant and its planned trials) arrives as the first JSON line on stdin; then
each further line is a command: run these trials (one group), or close (or one of the untimed
commands beside the trials, :mod:`workbench.run.untimed`'s: the conversations' ``anchor``, the quality
pass's ``encode``, ``score`` and ``replay``). The parent decides the order
in time (:mod:`workbench.run.design`): with interleaving, several workers are loaded at once and take
turns, the idle ones blocked on their pipe.
Events leave as JSON lines on the process's *original* stdout; everything else that writes to
stdout (libraries, C code) is redirected to stderr first, so nothing can corrupt the event stream.

A crash (CUDA OOM that kills the process, a segfault, SIGKILL) ends only this process: the parent
has already committed every trial it received and records the rest of this variant as failed.
SIGINT/SIGTERM ask for cancellation: the current trial stops at its next step.
"""

from __future__ import annotations

import dataclasses
import json
import os
import signal
import sys
import time
from collections.abc import Iterator
from typing import Any, TextIO

from workbench.core.literals import TrialOutcome
from workbench.run import events as ev
from workbench.run import untimed
from workbench.run.disturbance import MachineWatch

__all__ = ["main"]


class _Events:
    def __init__(self, stream: TextIO) -> None:
        self._stream = stream

    def emit(self, event: ev.Event) -> None:
        self._stream.write(event.to_json() + "\n")
        self._stream.flush()


def _claim_stdout() -> TextIO:
    """Keep the real stdout for events; point fd 1 (and sys.stdout) at stderr."""
    events_fd = os.dup(1)
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    return os.fdopen(events_fd, "w", buffering=1, encoding="utf-8")


def main(runner: int | None = None) -> int:
    """The worker; ``runner``: the run's process when it is not this one's parent (a forked worker,
    whose parent is the fork server)."""
    from workbench.core.lifetime import die_with_parent, end_with

    parent = os.getppid()
    # SIGTERM (= cancel) when the run's process dies: no orphaned trial. A forked worker watches the
    # run's process itself, not its parent: a fork server that dies (the OOM killer's pick) must not
    # take the workers it forked with it
    watched = end_with(runner) if runner is not None else None
    if watched is False:
        return 1
    if watched is None:
        die_with_parent()  # the kernel sends it when the parent dies
    events = _Events(_claim_stdout())
    cancel = {"requested": False}

    def on_signal(signum: int, frame: Any) -> None:
        if cancel["requested"]:  # asked twice: stop now
            raise KeyboardInterrupt
        cancel["requested"] = True

    signal.signal(signal.SIGINT, on_signal)
    if hasattr(signal, "SIGTERM"):
        signal.signal(signal.SIGTERM, on_signal)
    if hasattr(signal, "SIGBREAK"):  # Windows: CTRL_BREAK_EVENT from the parent
        signal.signal(signal.SIGBREAK, on_signal)

    if os.getppid() != parent:  # the parent died before the death signal was armed
        return 1
    job = json.loads(sys.stdin.readline())
    hide_gpus_from(job)  # before the strategies' imports: a runtime may start CUDA when it loads
    events.emit(ev.Started(pid=os.getpid()))
    try:
        return _run(job, events, lambda: cancel["requested"])
    except KeyboardInterrupt:
        events.emit(ev.Cancelled())
        return 130
    except BrokenPipeError:  # the parent is gone: nobody is listening
        os._exit(1)


def hide_gpus_from(job: dict[str, Any]) -> None:
    """A ``device = "cpu"`` variant's worker sees no GPU (``CUDA_VISIBLE_DEVICES=""``), set before
    anything is imported: a runtime built with CUDA starts it whatever it is asked to offload
    (llama.cpp keeps CPU-layer weights in the first GPU's pinned host buffer and starts a backend per
    GPU even with ``n_gpu_layers = 0``), and a CUDA context costs the GPU's memory and the CPU's time."""
    if str(job.get("variant", {}).get("device", "")) == "cpu":
        os.environ["CUDA_VISIBLE_DEVICES"] = ""


def _set_threads(threads: int) -> None:
    """The variant's ``threads``: torch's intra-op pool (where torch is installed) and the variable
    OpenMP-based runtimes read when they start."""
    os.environ["OMP_NUM_THREADS"] = str(threads)
    try:
        import torch
    except ImportError:
        return
    torch.set_num_threads(threads)


def _run(job: dict[str, Any], events: _Events, cancelled: Any) -> int:
    # Imported here so that a failing import is reported as a load failure, not a silent crash.
    from workbench.core import registry
    from workbench.core.device import resolve_device
    from workbench.core.errors import WorkbenchError, describe_exception
    from workbench.run.clock import gpu_memory
    from workbench.run.environment import snapshot
    from workbench.run.plan import TrialPlan
    from workbench.run.runner import TrialRunner
    from workbench.spec.parse import variant_from_dict

    try:
        variant = variant_from_dict(job["variant"])
        strategy_cls = registry.get(variant.strategy_ref or variant.strategy)
        strategy = strategy_cls()
        reason = strategy.available()
        if reason:
            raise WorkbenchError(f"strategy '{variant.strategy}' is not available here: {reason}")
        if variant.threads is not None:
            _set_threads(variant.threads)
        device = resolve_device(variant.device, needs_torch=strategy_cls.requires_model)
        # before the model takes memory and caches; once per variant (its first worker): a fresh
        # worker's would only repeat it
        first = os.environ.get("WORKBENCH_WORKER", "0") == "0"
        bandwidth = _bandwidth(str(device)) if first else None
        # after the CUDA context exists and the probe's blocks are gone: what the load adds
        free_before, process_before = _cuda_baseline(device)
        sync = device.synchronizer()
        t0 = time.perf_counter()
        session = strategy.load(variant, device)
        sync()  # work the load queued (torchao's quantize kernels...) belongs to the load
        load_ms = (time.perf_counter() - t0) * 1000
        # inside the try: a CUDA initialisation error is the variant's load failure, not a dead worker
        environment = snapshot(device)
        trials = [TrialPlan.from_dict(raw) for raw in job["trials"]]
        compile_ms = _prepare(session, variant, trials, sync)
        client = session.timing_scope != "in-process"
        memory = (
            None
            if client
            else gpu_memory(
                device,
                free_before,
                process_before_mb=process_before,
                outside_torch_mb=getattr(session, "outside_torch_mb", None),
            )
        )
        runner = TrialRunner(session, device, cancelled=cancelled, memory=memory)
        footprint, free = _memory(device, runner.memory) if not client else (None, None)
    except Exception as exc:
        message = str(exc) if isinstance(exc, WorkbenchError) else describe_exception(exc)
        events.emit(ev.LoadFailed(error=message))
        return 1
    events.emit(
        ev.Loaded(
            device="remote" if client else str(device),
            dtype=session.dtype or variant.dtype,
            load_ms=load_ms,
            compile_ms=compile_ms,
            weights_mb=session.weights_mb,
            context_length=session.context_length,
            memory_kind=None if client else runner.memory.kind,
            memory_bandwidth_gbs=bandwidth,
            kv_bytes_per_token=session.kv_bytes_per_token,
            model_shape=json.dumps(session.model_shape) if session.model_shape else None,
            server=session.server_info,
            backend=session.backend,
            environment=environment,
            footprint_mb=footprint,
            free_mb=free,
            # the first worker's imports, for the fork server (the later workers are not asked)
            modules=sorted(sys.modules) if first else None,
        )
    )
    watch = MachineWatch(device.index or 0 if device.is_cuda else None)
    compiled = CompileWatch(variant)
    for command in _commands(sys.stdin):
        if command.get("close"):
            break
        if cancelled():
            events.emit(ev.Cancelled())
            return 130
        if "encode" in command:
            untimed.encode(session, trials, command["encode"], events)
            events.emit(ev.UnitDone(trials=[]))
            continue
        if "anchor" in command:
            if not untimed.anchor(runner, command["anchor"], events, cancelled):
                events.emit(ev.Cancelled())
                return 130
            events.emit(ev.UnitDone(trials=[]))
            continue
        if "replay" in command:
            if not untimed.replay(session, trials, command["replay"], events, cancelled):
                events.emit(ev.Cancelled())
                return 130
            events.emit(ev.UnitDone(trials=[]))
            continue
        if "score" in command:
            if not untimed.score(session, command["score"], events, cancelled):
                events.emit(ev.Cancelled())
                return 130
            events.emit(ev.UnitDone(trials=[]))
            continue
        group = [int(i) for i in command["run"]]
        # a group is named by its first trial: unique in the variant however many processes run it
        status = _run_group(session, runner, variant, trials, group, group[0], events, watch, compiled)
        if "cancelled" in status or cancelled():
            events.emit(ev.Cancelled())
            return 130
        events.emit(ev.UnitDone(trials=group))
    session.close()
    events.emit(ev.Finished())
    return 0


def _prepare(session: Any, variant: Any, trials: list[Any], sync: Any) -> float | None:
    """A compiled variant's :meth:`Session.prepare` with the run's prompt lengths and largest output,
    before the first trial: its compiling time (ms), None for an eager variant. ``sync`` (the
    device's synchronizer) ends the clock: work the compile queued on a GPU (its warm-up steps, a
    CUDA graph's capture) belongs to the compile, as it does to the load."""
    if variant.compile is None:
        return None
    from workbench.run.runner import encode_prompt

    lengths = sorted({len(encode_prompt(session, t.prompt)) for t in trials})
    sync()  # nothing of the load's still queued
    t0 = time.perf_counter()
    session.prepare(lengths, max((t.max_new_tokens for t in trials), default=1))
    sync()
    return (time.perf_counter() - t0) * 1000


class CompileWatch:
    """What torch.compile did in this worker process, read after each trial of a compiled variant
    (all None for an eager one): the graphs it compiled (dynamo's counter), the frames it gave up
    compiling and runs eagerly from then on (its recompile limit hit: dynamo's count of that
    "unimplemented" case), and the CUDA graphs recorded (``reduce-overhead``: torch's CUDA-graph
    trees announce each recording through dynamo's callback handler, which this listens to)."""

    def __init__(self, variant: Any) -> None:
        self.active = variant.compile is not None and "torch._dynamo" in sys.modules
        self.recorded = 0
        if self.active:
            try:
                from torch._dynamo.callback import CallbackTrigger, callback_handler
            except ImportError:  # a torch without the hook: recordings are not counted
                self._recording = None
            else:
                self._recording = CallbackTrigger.CUDAGRAPH_RECORDING
                callback_handler.register_start_callback(self._started)

    def _started(self, args: Any) -> None:
        if getattr(args, "callback_trigger", None) is self._recording:
            self.recorded += 1

    def read(self) -> tuple[int, int, int] | None:
        """(graphs compiled, frames fallen back to eager, CUDA graphs recorded) in this process so
        far; None for an eager variant."""
        if not self.active:
            return None
        from torch._dynamo.utils import counters

        fallbacks = sum(
            n
            for case, n in counters["unimplemented"].items()
            if "recompile limit" in case.lower() or "cache size limit" in case.lower()
        )
        return int(counters["stats"]["unique_graphs"]), int(fallbacks), self.recorded


def _commands(stream: TextIO) -> Iterator[dict[str, Any]]:
    """The parent's commands after the job, one JSON line each: ``{"run": [indices]}`` runs those
    trials as one group, ``{"encode": {...}}`` / ``{"score": [...]}`` / ``{"replay": [...]}`` serve the quality pass
    (untimed, after the trials), ``{"close": true}`` (or the end of the stream) ends the worker. Between
    commands the worker is blocked on this read: an idle worker costs no CPU."""
    for line in stream:
        if line.strip():
            yield json.loads(line)


def _run_group(
    session: Any,
    runner: Any,
    variant: Any,
    trials: list[Any],
    group: list[int],
    number: int,
    events: _Events,
    watch: MachineWatch,
    compiled: CompileWatch,
) -> set[TrialOutcome]:
    """Run one group of trials (one trial, a batch or parallel streams) and emit their results, each
    with what the machine did meanwhile (and for a compiled variant, what torch.compile did: a
    recompile, a fallback to eager or a CUDA-graph recording inside a trial makes it disturbed:
    :func:`~workbench.run.disturbance.judge`). Returns the statuses seen."""
    # The server's own counters before and after each group (untimed; endpoint strategies only).
    before = _server_call(session.server_snapshot)
    results: dict[int, TrialOutcome] = {}
    mark = watch.mark()
    last = [compiled.read()]

    def emit(position: int, result: Any) -> None:
        index = group[position]
        results[index] = result.status
        now, then = compiled.read(), last[0]
        last[0] = now
        compile_figures: dict[str, int | None] = {}
        if now is not None and then is not None:
            compile_figures = {
                "recompiles": now[0] - then[0],
                "eager_fallbacks": now[1],  # since the process started: it runs eagerly from then on
                "cudagraph_records": now[2] - then[2],
            }
        trial = dataclasses.replace(result.record, **watch.figures(mark), **compile_figures)
        events.emit(ev.TrialDone(index=index, status=result.status, trial=trial, steps=result.steps))

    if variant.batch_size > 1:
        runner.run_batch([trials[i] for i in group], emit, group=number)
    elif variant.concurrency == 1:
        emit(0, runner.run(trials[group[0]]))
    else:
        runner.run_group([trials[i] for i in group], variant.concurrency, emit, group=number)
    if before is not None:
        reached = sum(status == "ok" for status in results.values())
        figures = _server_call(session.server_figures, before, reached)
        if figures:
            first = trials[group[0]]
            events.emit(
                ev.ServerMetrics(
                    trials=[i for i in group if i in results],
                    workload=first.workload,
                    warmup=first.warmup,
                    figures=figures,
                )
            )
    return set(results.values())


def _cuda_baseline(device: Any) -> tuple[float | None, float | None]:
    """Before the load, on CUDA: the device's free memory and this process's GPU memory per NVML (MB;
    ``None`` when unknown or not CUDA), read once the CUDA context exists and the bandwidth probe's
    cached blocks are released, so that the ``device_used_delta`` and ``nvml_process`` figures hold
    what the load and the trials added: not the context, which torch's allocator peak lacks too."""
    if not device.is_cuda:
        return None, None
    try:
        import torch

        torch.cuda.init()
        torch.cuda.empty_cache()
        free = float(torch.cuda.mem_get_info(device.index or 0)[0]) / 2**20
    except Exception:
        return None, None
    from workbench.run.nvml import handle_for_cuda, load, process_used_mb

    nvml = load()
    if nvml is None:
        return free, None
    try:
        handle = handle_for_cuda(nvml, torch.cuda.get_device_properties(device.index or 0))
    except Exception:
        return free, None
    return free, process_used_mb(nvml, handle, os.getpid()) if handle is not None else None


def _memory(device: Any, memory: Any) -> tuple[float | None, float | None]:
    """(this process's footprint, the device's free memory) in MB, after the model loaded: what the
    parent needs to decide whether another variant fits beside it. On CUDA the footprint is what the
    memory tracker's kind reads now (torch's reserve, or the process's GPU memory for a runtime that
    allocates outside torch: llama.cpp, ONNX Runtime)."""
    try:
        if device.is_cuda:
            import torch

            free, _ = torch.cuda.mem_get_info(device.index or 0)
            return memory.footprint_mb(), free / 2**20
        import psutil

        return psutil.Process().memory_info().rss / 2**20, psutil.virtual_memory().available / 2**20
    except Exception:  # unknown: the parent then trusts that the variants fit
        return None, None


def _server_call(fn: Any, *args: Any) -> Any:
    """Server-side metrics are extra information: a failure to read them never fails a trial."""
    from workbench.core.errors import describe_exception

    try:
        return fn(*args)
    except Exception as exc:
        print(f"server metrics not read: {describe_exception(exc)}", file=sys.stderr, flush=True)
        return None


def _bandwidth(device: str) -> float | None:
    """The device's memory bandwidth (cached per machine); never fails a run."""
    from workbench.run.bandwidth import device_bandwidth

    try:
        return device_bandwidth(device).gbs
    except Exception as exc:  # a measurement problem must not stop the experiment
        print(f"workbench: memory bandwidth not measured: {exc}", file=sys.stderr)
        return None


if __name__ == "__main__":
    sys.exit(main())
