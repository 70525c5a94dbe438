"""The device's memory bandwidth, measured where the run happens (the worker process, before the
model loads), for the decode roofline (``workbench.analysis.roofline``).

A device-to-device copy on CUDA, a multi-threaded numpy copy on CPU, about 0.2 s; the best figure seen
is cached per machine and device in the workbench cache folder (``bandwidth.json``: a busy machine only
lowers a measurement, so a low one never sticks) and stored with the run's variants
(``variants.memory_bandwidth_gbs``, and the run's environment JSON). ``$WORKBENCH_BANDWIDTH_GBS``
overrides the measurement (a datasheet figure, or a test's known value).
"""

from __future__ import annotations

import concurrent.futures
import json
import os
import platform
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = ["ENV_OVERRIDE", "Bandwidth", "device_bandwidth", "measure_bandwidth"]

ENV_OVERRIDE = "WORKBENCH_BANDWIDTH_GBS"
_CACHE_FILE = "bandwidth.json"
_CPU_BUFFER_BYTES = 128 * 2**20  # larger than (nearly) any last-level cache: the copy streams from DRAM
_CUDA_BUFFER_BYTES = 1024 * 2**20
_BUDGET_S = 0.2


@dataclass(frozen=True)
class Bandwidth:
    gbs: float  # GB/s (1e9 bytes), bytes read + bytes written per second
    method: str  # how it was obtained
    cached: bool = False


def measure_bandwidth(device: str = "cpu") -> Bandwidth:
    """Measure copy bandwidth on ``device`` (``cpu``, ``cuda``, ``cuda:1``, ``mps``) in about 0.2 s."""
    kind = device.split(":")[0]
    if kind == "cuda":
        return _measure_cuda(device)
    if kind == "mps":
        return _measure_torch_device(device)
    return _measure_cpu()


def _measure_cpu() -> Bandwidth:
    import numpy as np

    threads = max(1, min(os.cpu_count() or 1, 16))
    src = np.ones(_CPU_BUFFER_BYTES // 8, dtype=np.float64)
    dst = np.empty_like(src)
    chunks = np.array_split(np.arange(src.size), threads)
    bounds = [(int(c[0]), int(c[-1]) + 1) for c in chunks if c.size]

    def copy(bound: tuple[int, int]) -> None:
        np.copyto(dst[bound[0] : bound[1]], src[bound[0] : bound[1]])  # releases the GIL

    best = float("inf")
    with concurrent.futures.ThreadPoolExecutor(threads) as pool:
        list(pool.map(copy, bounds))  # warm-up: page faults, thread start
        deadline = time.perf_counter() + _BUDGET_S
        while time.perf_counter() < deadline:
            t0 = time.perf_counter()
            list(pool.map(copy, bounds))
            best = min(best, time.perf_counter() - t0)
    return Bandwidth(2 * src.nbytes / best / 1e9, f"numpy copy, {threads} threads, best of repeated 128 MiB")


def _measure_cuda(device: str) -> Bandwidth:
    import torch

    dev = torch.device(device)
    # the events are recorded on the current stream of the *current* device: make it ``device``
    with torch.cuda.device(dev):
        src = torch.empty(_CUDA_BUFFER_BYTES, dtype=torch.uint8, device=dev)
        dst = torch.empty_like(src)
        dst.copy_(src)  # warm-up
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        best = float("inf")
        deadline = time.perf_counter() + _BUDGET_S
        while time.perf_counter() < deadline:
            start.record()
            dst.copy_(src)
            end.record()
            end.synchronize()
            best = min(best, start.elapsed_time(end) / 1000)
        del src, dst
        torch.cuda.empty_cache()
    return Bandwidth(2 * _CUDA_BUFFER_BYTES / best / 1e9, "CUDA device-to-device copy, 1 GiB, CUDA events")


def _measure_torch_device(device: str) -> Bandwidth:
    import torch

    dev = torch.device(device)
    src = torch.empty(_CPU_BUFFER_BYTES, dtype=torch.uint8, device=dev)
    dst = torch.empty_like(src)
    sync = torch.mps.synchronize if dev.type == "mps" else (lambda: None)
    dst.copy_(src)
    sync()
    best = float("inf")
    deadline = time.perf_counter() + _BUDGET_S
    while time.perf_counter() < deadline:
        t0 = time.perf_counter()
        dst.copy_(src)
        sync()
        best = min(best, time.perf_counter() - t0)
    return Bandwidth(2 * _CPU_BUFFER_BYTES / best / 1e9, f"torch copy on {dev.type}, 128 MiB")


def _machine_key(device: str) -> str:
    """What the cache is keyed by: this host, the device, and what it is (a swapped GPU re-measures)."""
    from workbench.run.environment import _cpu_model

    what = _cpu_model()
    if device.startswith("cuda") and "torch" in sys.modules:
        import torch

        index = int(device.split(":")[1]) if ":" in device else 0
        what = torch.cuda.get_device_name(index)
    return f"{platform.node()}|{device}|{what}"


def _cache_path() -> Path:
    from workbench.sources import cache_dir

    return cache_dir() / _CACHE_FILE


def device_bandwidth(device: str = "cpu") -> Bandwidth:
    """The bandwidth of ``device`` on this machine: ``$WORKBENCH_BANDWIDTH_GBS`` if set, else the best of
    this measurement and the cached ones. Other work on the machine can only make a copy slower, so the
    highest figure seen is the closest to what the hardware can do; a measurement taken while the
    machine was busy never sticks. Measuring costs about 0.2 s per variant. A cache that cannot be read
    or written is ignored."""
    override = os.environ.get(ENV_OVERRIDE)
    if override:
        try:
            return Bandwidth(float(override), f"${ENV_OVERRIDE}")
        except ValueError:
            pass
    key = _machine_key(device)
    path = _cache_path()
    cache: dict[str, Any] = {}
    try:
        cache = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        cache = {}
    cache = cache if isinstance(cache, dict) else {}
    entry = cache.get(key)
    measured = measure_bandwidth(device)
    if isinstance(entry, dict) and float(entry.get("gbs", 0)) >= measured.gbs:
        return Bandwidth(float(entry["gbs"]), entry.get("method", ""), cached=True)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        cache[key] = {"gbs": measured.gbs, "method": measured.method, "measured_at": time.time()}
        tmp = path.with_suffix(".tmp")
        tmp.write_text(json.dumps(cache, indent=2), encoding="utf-8")
        tmp.replace(path)
    except OSError:
        pass
    return measured
