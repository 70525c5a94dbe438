"""Devices and the clock. The runner is the only user of the clock; strategies never time themselves.

Every recorded edge is ``device.synchronize()`` followed by ``time.perf_counter_ns()`` (monotonic,
nanosecond resolution). On CUDA the synchronize waits for every queued kernel, so a timestamp means
"the result is available on the host" — the definition TTFT and TPOT need. CUDA events would time
kernels more finely but measure device time, not host-visible latency, so they are not used for the
edges. On CPU there is nothing to wait for.

torch is imported lazily: a variant that needs no model (the fake strategy) never imports it.
"""

from __future__ import annotations

import importlib.util
import os
import re
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass

from .errors import SpecError

__all__ = ["Clock", "Device", "MemoryTracker", "resolve_device"]

_DEVICE_RE = re.compile(r"^(auto|cpu|mps|cuda(:\d+)?)$")


@dataclass(frozen=True)
class Device:
    """A resolved device: ``cpu``, ``mps`` or ``cuda`` with an index."""

    type: str
    index: int | None = None

    def __str__(self) -> str:
        return f"{self.type}:{self.index}" if self.index is not None else self.type

    @property
    def is_cuda(self) -> bool:
        return self.type == "cuda"

    def synchronizer(self) -> Callable[[], None]:
        """A zero-argument function that blocks until queued device work is done."""
        if self.type == "cuda":
            import torch

            index = self.index or 0
            return lambda: torch.cuda.synchronize(index)
        if self.type == "mps":
            import torch

            return torch.mps.synchronize
        return _noop


def _noop() -> None:
    return None


def check_device_name(value: str) -> str:
    if not _DEVICE_RE.match(value):
        raise SpecError(f"device must be auto, cpu, mps, cuda or cuda:N, got {value!r}")
    return value


def resolve_device(name: str, *, needs_torch: bool = True) -> Device:
    """Turn a spec's ``device`` value into a :class:`Device` available here.

    ``auto`` picks CUDA, then MPS, then the CPU — falling back to the CPU cleanly when torch has no
    GPU support. Asking explicitly for a device that is not here is an error naming what is.
    """
    check_device_name(name)
    if not needs_torch or importlib.util.find_spec("torch") is None:
        if name in ("auto", "cpu"):
            return Device("cpu")
        raise SpecError(f"device {name!r} needs torch, which is not installed")
    import torch

    cuda = torch.cuda.is_available()
    mps = getattr(torch.backends, "mps", None) is not None and torch.backends.mps.is_available()
    if name == "auto":
        if cuda:
            return Device("cuda", torch.cuda.current_device())
        if mps:
            return Device("mps")
        return Device("cpu")
    if name == "cpu":
        return Device("cpu")
    if name == "mps":
        if not mps:
            raise SpecError("device 'mps' asked for, but this machine has no Apple GPU available to torch")
        return Device("mps")
    index = int(name.split(":", 1)[1]) if ":" in name else 0
    if not cuda:
        raise SpecError(
            f"device {name!r} asked for, but torch sees no CUDA GPU here "
            f'(torch {torch.__version__}; a CPU-only build?). Use device = "auto" to fall back to the CPU.'
        )
    if index >= torch.cuda.device_count():
        raise SpecError(
            f"device {name!r} asked for, but only {torch.cuda.device_count()} CUDA device(s) exist"
        )
    return Device("cuda", index)


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

            return psutil.Process().memory_info().peak_wset / 2**20
        except Exception:
            return None
