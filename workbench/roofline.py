"""The memory-bandwidth roofline of decode: how fast decoding could go if reading bytes were all it did.

Each decode step reads every weight once and the KV cache so far, so with memory bandwidth ``B``

    decode tok/s ≤ B / (weight bytes + KV-cache bytes at that length)

(one token per step; a speculative step yields several tokens per weight read, so speculative variants
can exceed this single-token limit, which is exactly their point).

The bandwidth is *measured* where the run happens (the worker process, before the model loads): a
device-to-device copy on CUDA, a multi-threaded numpy copy on CPU, about 0.2 s; the best figure seen is
cached per machine and device in the workbench cache folder (``bandwidth.json``: a busy machine only
lowers a measurement, so a low one never sticks) and stored with the run's
variants (``variants.memory_bandwidth_gbs``, and the run's environment JSON). The analysis then needs no
torch: the viewer computes limits from what was stored. ``$WORKBENCH_BANDWIDTH_GBS`` overrides the
measurement (a datasheet figure, or a test's known value).
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

__all__ = [
    "ENV_OVERRIDE",
    "Bandwidth",
    "RooflineRow",
    "device_bandwidth",
    "kv_bytes_per_token",
    "measure_bandwidth",
    "roofline_rows",
    "roofline_tokens_per_s",
]

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


def kv_bytes_per_token(shape: dict[str, Any] | None) -> float | None:
    """KV-cache bytes one token adds: keys and values, in every layer, for every KV head."""
    if not shape:
        return None
    try:
        return float(2 * shape["layers"] * shape["kv_heads"] * shape["head_dim"] * shape["bytes_per_element"])
    except (KeyError, TypeError):
        return None


def roofline_tokens_per_s(
    bandwidth_gbs: float | None,
    weights_mb: float | None,
    kv_bytes_per_token: float | None = None,
    context_tokens: float = 0.0,
) -> float | None:
    """The bandwidth limit of decode tok/s at ``context_tokens`` tokens in the KV cache; ``None`` when
    the bandwidth or the weights are unknown."""
    if not bandwidth_gbs or not weights_mb:
        return None
    bytes_per_token = weights_mb * 2**20 + (kv_bytes_per_token or 0.0) * max(context_tokens, 0.0)
    return bandwidth_gbs * 1e9 / bytes_per_token


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
    from .environment import _cpu_model

    what = _cpu_model()
    if device.startswith("cuda") and "torch" in sys.modules:
        import torch

        index = int(device.split(":")[1]) if ":" in device else 0
        what = torch.cuda.get_device_name(index)
    return f"{platform.node()}|{device}|{what}"


def _cache_path() -> Path:
    from .models import cache_dir

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


@dataclass(frozen=True)
class RooflineRow:
    """One variant on one workload against its bandwidth limit."""

    variant: str
    workload: str
    decode_tokens_per_s: float | None  # measured median
    limit_tokens_per_s: float | None
    bandwidth_gbs: float | None
    weights_mb: float | None
    kv_mb: float | None  # KV cache read per token at the median context
    context_tokens: float  # median input + half the median output: the average decode position

    @property
    def fraction(self) -> float | None:
        """Measured decode tok/s as a share of the limit (above 1 for speculative variants)."""
        if not self.decode_tokens_per_s or not self.limit_tokens_per_s:
            return None
        return self.decode_tokens_per_s / self.limit_tokens_per_s

    def to_dict(self) -> dict[str, Any]:
        return {
            "variant": self.variant,
            "workload": self.workload,
            "decode_tokens_per_s": self.decode_tokens_per_s,
            "limit_tokens_per_s": self.limit_tokens_per_s,
            "fraction_of_limit": self.fraction,
            "bandwidth_gbs": self.bandwidth_gbs,
            "weights_mb": self.weights_mb,
            "kv_mb": self.kv_mb,
            "context_tokens": self.context_tokens,
        }


def roofline_rows(summaries: Any, variants: list[dict[str, Any]]) -> list[RooflineRow]:
    """Per variant × workload (``summaries`` from :func:`workbench.analysis.summarize`; ``variants``:
    rows of the ``variants`` table, with the bandwidth, weights and KV size recorded at load)."""
    by_name = {v["name"]: v for v in variants}
    rows = []
    for s in summaries:
        v = by_name.get(s.variant, {})
        context = (s.metrics["input_tokens"].value or 0.0) + (s.metrics["output_tokens"].value or 0.0) / 2
        kv = v.get("kv_bytes_per_token")
        rows.append(
            RooflineRow(
                variant=s.variant,
                workload=s.workload,
                decode_tokens_per_s=s.metrics["decode_tokens_per_s"].value,
                limit_tokens_per_s=roofline_tokens_per_s(
                    v.get("memory_bandwidth_gbs"), v.get("weights_mb"), kv, context
                ),
                bandwidth_gbs=v.get("memory_bandwidth_gbs"),
                weights_mb=v.get("weights_mb"),
                kv_mb=kv * context / 2**20 if kv else None,
                context_tokens=context,
            )
        )
    return rows
