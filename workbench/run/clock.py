"""The clock and the memory tracker. The runner is the only user of the clock; strategies never time
themselves. (Devices, which the clock synchronises, are :mod:`workbench.core.device`.)

Every recorded edge is ``device.synchronize()`` followed by ``time.perf_counter_ns()`` (monotonic,
nanosecond resolution). On CUDA the synchronize waits for every queued kernel, so a timestamp means
"the result is available on the host" — the definition TTFT and TPOT need. CUDA events would time
kernels more finely but measure device time, not host-visible latency, so they are not used for the
edges. On CPU there is nothing to wait for.

torch is imported lazily: a variant that needs no model (the fake strategy) never imports it.
"""

from __future__ import annotations

import os
import sys
import time

from workbench.core.device import Device

__all__ = ["Clock", "MemoryTracker"]


class Clock:
    """Monotonic nanoseconds, taken after a device synchronize."""

    def __init__(self, device: Device) -> None:
        self._sync = device.synchronizer()

    def now_ns(self) -> int:
        self._sync()
        return time.perf_counter_ns()


class MemoryTracker:
    """Peak memory of one trial in MB: the CUDA allocator's peak on GPU, the process RSS peak on CPU.

    On Linux the RSS high-water mark (``VmHWM``) is reset before each trial by writing ``5`` to
    ``/proc/self/clear_refs``, so the peak is the trial's, not the process's. Elsewhere the process
    peak since start is reported (``ru_maxrss``), which is why every variant runs in its own worker.
    """

    def __init__(self, device: Device) -> None:
        self._device = device
        self._can_reset_rss = sys.platform.startswith("linux") and os.access("/proc/self/clear_refs", os.W_OK)

    @property
    def kind(self) -> str:
        return "cuda_allocator_peak" if self._device.is_cuda else "process_rss_peak"

    def reset(self) -> None:
        if self._device.is_cuda:
            import torch

            torch.cuda.reset_peak_memory_stats(self._device.index or 0)
        elif self._can_reset_rss:
            try:
                with open("/proc/self/clear_refs", "w") as f:
                    f.write("5")
            except OSError:
                self._can_reset_rss = False

    def peak_mb(self) -> float | None:
        if self._device.is_cuda:
            import torch

            return torch.cuda.max_memory_allocated(self._device.index or 0) / 2**20
        return _rss_peak_mb()


def _rss_peak_mb() -> float | None:
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024
    except OSError:
        pass
    try:
        import resource

        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        # bytes on macOS, kilobytes elsewhere
        return peak / 2**20 if sys.platform == "darwin" else peak / 1024
    except ImportError:  # Windows
        try:
            import psutil

            return psutil.Process().memory_info().peak_wset / 2**20  # type: ignore[attr-defined]  # Windows only
        except Exception:
            return None
