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
from collections.abc import Callable

from workbench.core.device import Device

__all__ = ["Clock", "MemoryTracker", "gpu_memory"]


class Clock:
    """Monotonic nanoseconds, taken after a device synchronize."""

    def __init__(self, device: Device) -> None:
        self._sync = device.synchronizer()

    def now_ns(self) -> int:
        self._sync()
        return time.perf_counter_ns()


class MemoryTracker:
    """Peak memory of one trial in MB; ``kind`` says what was measured (``variants.memory_kind``).

    - ``cuda_allocator_peak``: torch's CUDA allocator peak, reset before each trial: a model torch holds
      (not the CUDA context).
    - ``cuda_allocator_peak+runtime_draft``: the same plus the device memory a runtime draft (llama.cpp,
      ONNX Runtime GenAI beside a torch target) took at its load, which torch's allocator never sees.
    - ``nvml_process``: a runtime that allocates outside torch on CUDA (llama.cpp, ONNX Runtime GenAI):
      the process's GPU memory as NVML lists it, read after the trial, minus what the process held
      before its load (the CUDA context: torch's peak lacks it too). Those runtimes keep their
      buffers (KV cache, compute buffers, arenas) allocated, so after the trial is their peak.
    - ``device_used_delta``: the same without NVML (or where its process ids are not this process's,
      as inside a container): the device's used memory now minus before the load
      (``cudaMemGetInfo``). **Device-wide**: another process's allocations count too, and with
      several variants resident (interleaved order) so does every one loaded after this one, so it
      is labelled and kept out of the cross-variant comparison (:mod:`workbench.charts.memory`).
    - ``process_rss_peak``: on CPU, the process RSS peak; on Linux the high-water mark (``VmHWM``) is
      reset before each trial by writing ``5`` to ``/proc/self/clear_refs``, so the peak is the
      trial's, not the process's. Elsewhere the process peak since start is reported (``ru_maxrss``),
      which is why every variant runs in its own worker.
    """

    def __init__(
        self,
        device: Device,
        kind: str | None = None,
        *,
        free_before_mb: float | None = None,
        process_mb: Callable[[], float | None] | None = None,
        outside_torch_mb: float | None = None,
    ) -> None:
        self._device = device
        self._kind = kind or ("cuda_allocator_peak" if device.is_cuda else "process_rss_peak")
        self._free_before_mb = free_before_mb
        self._process_mb = process_mb
        self._outside_torch_mb = outside_torch_mb or 0.0
        if self._kind == "cuda_allocator_peak" and outside_torch_mb:
            self._kind = "cuda_allocator_peak+runtime_draft"
        self._can_reset_rss = sys.platform.startswith("linux") and os.access("/proc/self/clear_refs", os.W_OK)

    @property
    def kind(self) -> str:
        return self._kind

    def reset(self) -> None:
        if self._kind.startswith("cuda_allocator_peak"):
            import torch

            torch.cuda.reset_peak_memory_stats(self._device.index or 0)
        elif self._kind == "process_rss_peak" and self._can_reset_rss:
            try:
                with open("/proc/self/clear_refs", "w") as f:
                    f.write("5")
            except OSError:
                self._can_reset_rss = False

    def peak_mb(self) -> float | None:
        if self._kind.startswith("cuda_allocator_peak"):
            import torch

            peak = torch.cuda.max_memory_allocated(self._device.index or 0) / 2**20
            return peak + self._outside_torch_mb
        if self._kind == "nvml_process":
            return self._process_mb() if self._process_mb is not None else None
        if self._kind == "device_used_delta":
            return self._used_since_load()
        return _rss_peak_mb()

    def footprint_mb(self) -> float | None:
        """What the variant holds now (after its load): torch's reserve, or as :meth:`peak_mb` reads."""
        if self._kind.startswith("cuda_allocator_peak"):
            import torch

            return torch.cuda.memory_reserved(self._device.index or 0) / 2**20 + self._outside_torch_mb
        return self.peak_mb()

    def _used_since_load(self) -> float | None:
        if self._free_before_mb is None:
            return None
        import torch

        free = torch.cuda.mem_get_info(self._device.index or 0)[0] / 2**20
        return max(0.0, self._free_before_mb - free)


def gpu_memory(
    device: Device,
    free_before_mb: float | None,
    *,
    process_before_mb: float | None = None,
    outside_torch_mb: float | None = None,
) -> MemoryTracker:
    """The tracker for a loaded variant: on CUDA, torch's allocator when it holds the model (any
    memory allocated through it after the load; plus ``outside_torch_mb``, a runtime draft's device
    memory taken at its load), else the process's memory per NVML (the GPU matched by UUID / PCI bus
    id) less ``process_before_mb``, what it held before the load, else the device's used memory
    since before the load. The readings before the load are taken once the CUDA context exists."""
    if not device.is_cuda:
        return MemoryTracker(device)
    import torch

    index = device.index or 0
    if torch.cuda.memory_allocated(index) > 0:
        return MemoryTracker(device, outside_torch_mb=outside_torch_mb)
    from workbench.run.nvml import handle_for_cuda, load, process_used_mb

    nvml = load()
    handle = handle_for_cuda(nvml, torch.cuda.get_device_properties(index)) if nvml is not None else None
    pid = os.getpid()
    if handle is not None and process_used_mb(nvml, handle, pid) is not None:
        before = process_before_mb or 0.0

        def added() -> float | None:
            used = process_used_mb(nvml, handle, pid)
            return None if used is None else max(0.0, used - before)

        return MemoryTracker(device, "nvml_process", process_mb=added)
    return MemoryTracker(device, "device_used_delta", free_before_mb=free_before_mb)


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
