"""What the machine did while a trial ran, and whether that disturbed it (docs/analysis.md
"Disturbed trials").

The worker watches each unit of trials (:class:`MachineWatch`, outside the timed region's hot path:
two reads of ``/proc`` per unit): its own CPU time against the wall time, the time its threads spent
**runnable but waiting for a CPU** (the second field of ``/proc/<pid>/task/<tid>/schedstat``, summed
over its threads: on Linux the kernel counts it exactly), the 1-minute load average, and on CUDA the
GPU's SM clock and temperature through NVML when ``pynvml`` is installed.

A trial is **disturbed** (:func:`judge`) when

- its threads waited for a CPU for more than :data:`WAIT_SHARE_LIMIT` of the time they ran, and at
  least :data:`WAIT_MIN_MS` (``cpu_wait_ms > max(0.10 × cpu_ms, 5 ms)``): another program held the
  cores the model needed; on a quiet machine the share is about 1 %;
- or a compiled variant (``compile``) compiled a graph while it ran (``recompiles``: torch.compile
  recompiling for a shape or a guard its warm-up did not see): the trial timed the compiler;
- or torch.compile fell back to eager in its worker (``eager_fallbacks``: dynamo's recompile limit
  hit, during it or before it in that process): the trial did not time the compiled graphs alone;
- or a CUDA graph was recorded while it ran (``cudagraph_records``: ``reduce-overhead``'s graphs
  re-recorded, e.g. for an input at a new address): the trial timed the recording;
- or, on CUDA, NVML says the clocks were held down (power cap, thermal or hardware slowdown, power
  brake, or a violation counter grew) while it ran;
- or, where NVML cannot say why (``gpu_throttle`` NULL), the SM clock after the unit fell below
  :data:`CLOCK_DROP_LIMIT` of the highest clock this variant ran at in the run.

Elsewhere (macOS, Windows: no ``schedstat``) the wait is unknown and recorded as NULL; CPU time and
the load average are still recorded, and a trial is judged on the clock rule alone.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from typing import Any

from workbench.formatting import count, percent
from workbench.store.records import TrialRecord

__all__ = ["CLOCK_DROP_LIMIT", "WAIT_MIN_MS", "WAIT_SHARE_LIMIT", "MachineWatch", "judge"]

#: a trial whose threads waited for a CPU longer than this share of their CPU time is disturbed
WAIT_SHARE_LIMIT = 0.10
#: ... and at least this long (ms): a few milliseconds of waiting do not move a trial
WAIT_MIN_MS = 5.0
#: a trial that ran at an SM clock below this share of the variant's highest is disturbed
CLOCK_DROP_LIMIT = 0.90


def _run_queue_wait_ns() -> int | None:
    """Nanoseconds this process's threads have spent runnable, waiting for a CPU (Linux)."""
    total = 0
    try:
        tasks = os.listdir("/proc/self/task")
    except OSError:
        return None
    for tid in tasks:
        try:
            with open(f"/proc/self/task/{tid}/schedstat", encoding="ascii") as f:
                total += int(f.read().split()[1])
        except (OSError, IndexError, ValueError):
            continue  # a thread that ended meanwhile
    return total


def _cpu_s() -> float:
    return time.process_time()  # every thread of the process, at the clock's resolution


@dataclass
class _Mark:
    wall: float
    cpu: float
    wait: int | None
    gpu: Any


class MachineWatch:
    """Start a mark before a unit of trials; :meth:`figures` gives the columns for its trials.

    ``cuda_index``: the variant's CUDA ordinal, whose GPU is found in NVML by UUID / PCI bus id
    (:func:`workbench.run.nvml.handle_for_cuda`); ``nvml`` and ``handle`` give both directly (tests'
    stand-ins)."""

    def __init__(self, cuda_index: int | None = None, *, nvml: Any = None, handle: Any = None) -> None:
        self._nvml: Any = nvml
        self._handle: Any = handle
        if cuda_index is not None and nvml is None:
            from workbench.run.nvml import handle_for_cuda, load

            loaded = load()
            if loaded is not None:
                try:
                    import torch

                    self._handle = handle_for_cuda(loaded, torch.cuda.get_device_properties(cuda_index))
                except Exception:
                    self._handle = None
                self._nvml = loaded if self._handle is not None else None
        self._throttle: Any = None
        if self._nvml is not None:
            from workbench.run.nvml import Throttle

            self._throttle = Throttle(self._nvml, self._handle)

    def _clock(self) -> int | None:
        if self._nvml is None:
            return None
        try:
            return int(self._nvml.nvmlDeviceGetClockInfo(self._handle, self._nvml.NVML_CLOCK_SM))
        except Exception:
            return None

    def mark(self) -> _Mark:
        gpu = self._throttle.mark() if self._throttle is not None else None
        return _Mark(time.perf_counter(), _cpu_s(), _run_queue_wait_ns(), gpu)

    def figures(self, start: _Mark) -> dict[str, Any]:
        """``cpu_ms``, ``cpu_wait_ms``, ``load_avg`` since ``start``; on CUDA ``gpu_clock_mhz`` and
        ``gpu_temp_c`` read at the end (right after the unit's last synchronise: a read at its start
        could catch the clock an idle GPU drops to) and ``gpu_throttle`` between the two."""
        wait = _run_queue_wait_ns()
        clock = self._clock()
        out: dict[str, Any] = {
            "cpu_ms": (_cpu_s() - start.cpu) * 1000,
            "cpu_wait_ms": (wait - start.wait) / 1e6 if wait is not None and start.wait is not None else None,
            "load_avg": os.getloadavg()[0] if hasattr(os, "getloadavg") else None,
        }
        if self._nvml is not None:
            out["gpu_clock_mhz"] = clock
            if self._throttle is not None and start.gpu is not None:
                out["gpu_throttle"] = self._throttle.between(start.gpu, self._throttle.mark())
            try:
                out["gpu_temp_c"] = int(
                    self._nvml.nvmlDeviceGetTemperature(self._handle, self._nvml.NVML_TEMPERATURE_GPU)
                )
            except Exception:
                out["gpu_temp_c"] = None
        return out


def judge(trial: TrialRecord, best_clock_mhz: float | None = None) -> str | None:
    """Why a trial was disturbed (one line), or None. ``best_clock_mhz``: the highest SM clock the
    variant ran at so far in the run."""
    if trial.recompiles:
        return f"torch.compile compiled {trial.recompiles} graph(s) while it ran: its time includes compiling"
    if trial.eager_fallbacks:
        return (
            f"torch.compile fell back to eager for {trial.eager_fallbacks} frame(s) in its worker (its "
            "recompile limit hit): it did not run the compiled graphs alone"
        )
    if trial.cudagraph_records:
        return (
            f"{trial.cudagraph_records} CUDA graph(s) recorded while it ran (a re-record): its time "
            "includes recording"
        )
    cpu, wait = trial.cpu_ms, trial.cpu_wait_ms
    if cpu is not None and wait is not None and wait > max(WAIT_SHARE_LIMIT * cpu, WAIT_MIN_MS):
        return f"waited {count(wait)} ms for a CPU while it ran {count(cpu)} ms on one"
    if trial.gpu_throttle:
        return f"GPU clocks held down while it ran: {trial.gpu_throttle}"
    clock = trial.gpu_clock_mhz
    if (
        trial.gpu_throttle is None
        and clock is not None
        and best_clock_mhz
        and clock < CLOCK_DROP_LIMIT * best_clock_mhz
    ):
        return f"GPU clock {clock} MHz, {percent(clock / best_clock_mhz)} of the {count(best_clock_mhz)} MHz it ran at"
    return None
