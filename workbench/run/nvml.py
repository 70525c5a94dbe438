"""NVIDIA's management library (NVML, through ``pynvml`` when installed): what the CUDA runtime
cannot say without a CUDA context, or at all.

- the GPU a CUDA ordinal names, matched by **UUID**, else **PCI bus id**, never by index: NVML counts
  every GPU of the machine in PCI order, CUDA only the visible ones (``CUDA_VISIBLE_DEVICES``) in its
  own order (``CUDA_DEVICE_ORDER``), so ``cuda:0`` need not be NVML's device 0;
- the GPU's name, driver, clocks and power limit for the environment record (no CUDA context);
- the GPU memory one process holds (what a runtime other than torch allocated: llama.cpp, ONNX Runtime);
- why the clocks were held down between two marks: the clock-event ("throttle") reasons and the
  power / thermal violation counters, idle ignored (:class:`Throttle`).

Every call is guarded: no ``pynvml``, no driver, an unsupported query reads as ``None``.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from typing import Any

from workbench.formatting import count

__all__ = [
    "REASONS",
    "Throttle",
    "gpu_facts",
    "handle_for_cuda",
    "load",
    "process_used_mb",
    "reasons_text",
]

#: NVML clock-event reason bits (``nvmlClocksEventReason*``, formerly ``ClocksThrottleReason*``) that
#: mean the GPU was held below the clocks it could run at. ``GpuIdle`` (0x1) is not one: an idle GPU
#: clocks down by design; application-clock and display settings are configuration, not a disturbance.
REASONS = {
    0x4: "software power cap",
    0x8: "hardware slowdown",
    0x10: "sync boost",
    0x20: "software thermal slowdown",
    0x40: "hardware thermal slowdown",
    0x80: "power brake",
}
IDLE = 0x1
#: NVML performance policies whose violation counters (ns held below the requested clock) are read
_POLICIES = {0: "power", 1: "thermal"}


def load() -> Any:
    """``pynvml``, initialised; ``None`` when it is not installed or no driver answers."""
    try:
        import pynvml

        pynvml.nvmlInit()
        return pynvml
    except Exception:
        return None


def _text(value: Any) -> str:
    return value.decode() if isinstance(value, bytes) else str(value)


def _call(nvml: Any, name: str, *args: Any) -> Any:
    fn = getattr(nvml, name, None)
    if fn is None:
        return None
    try:
        return fn(*args)
    except Exception:
        return None


def handle_for_cuda(nvml: Any, props: Any) -> Any:
    """The NVML handle of the GPU whose torch device properties are ``props``: by UUID, else by PCI
    bus id; ``None`` when neither matches (never guessed from the index)."""
    uuid = getattr(props, "uuid", None)
    if uuid is not None:
        text = str(uuid)
        for candidate in (text, f"GPU-{text}"):
            handle = _call(nvml, "nvmlDeviceGetHandleByUUID", candidate)
            if handle is None:
                handle = _call(nvml, "nvmlDeviceGetHandleByUUID", candidate.encode())
            if handle is not None:
                return handle
    bus = getattr(props, "pci_bus_id", None)
    if bus is not None:
        domain, device = getattr(props, "pci_domain_id", 0), getattr(props, "pci_device_id", 0)
        busid = f"{domain:08X}:{bus:02X}:{device:02X}.0"
        for key in (busid, busid.encode()):
            handle = _call(nvml, "nvmlDeviceGetHandleByPciBusId", key)
            if handle is not None:
                return handle
    return None


def gpu_facts(nvml: Any, handle: Any) -> dict[str, Any]:
    """Name, driver, PCI bus id, UUID, clocks (current and maximum, MHz) and power limit (W) of one
    GPU, for the environment record; what NVML cannot answer is left out."""
    facts: dict[str, Any] = {}
    name = _call(nvml, "nvmlDeviceGetName", handle)
    if name is not None:
        facts["gpu"] = _text(name)
    driver = _call(nvml, "nvmlSystemGetDriverVersion")
    if driver is not None:
        facts["cuda_driver"] = _text(driver)
    uuid = _call(nvml, "nvmlDeviceGetUUID", handle)
    if uuid is not None:
        facts["gpu_uuid"] = _text(uuid)
    pci = _call(nvml, "nvmlDeviceGetPciInfo", handle)
    if pci is not None and getattr(pci, "busId", None) is not None:
        facts["gpu_pci_bus_id"] = _text(pci.busId)
    sm, mem = getattr(nvml, "NVML_CLOCK_SM", 1), getattr(nvml, "NVML_CLOCK_MEM", 2)
    for key, fn, clock in (
        ("gpu_sm_clock_max_mhz", "nvmlDeviceGetMaxClockInfo", sm),
        ("gpu_mem_clock_max_mhz", "nvmlDeviceGetMaxClockInfo", mem),
        ("gpu_sm_clock_mhz", "nvmlDeviceGetClockInfo", sm),
        ("gpu_app_sm_clock_mhz", "nvmlDeviceGetApplicationsClock", sm),
    ):
        value = _call(nvml, fn, handle, clock)
        if value is not None:
            facts[key] = int(value)
    limit = _call(nvml, "nvmlDeviceGetEnforcedPowerLimit", handle)
    if limit is not None:
        facts["gpu_power_limit_w"] = round(int(limit) / 1000)
    return facts


def process_used_mb(nvml: Any, handle: Any, pid: int) -> float | None:
    """GPU memory ``pid`` holds on this GPU (MB) as NVML counts it (every allocator, the CUDA
    context included); ``None`` when NVML does not say (no such process listed, or not allowed)."""
    for name in ("nvmlDeviceGetComputeRunningProcesses_v3", "nvmlDeviceGetComputeRunningProcesses"):
        processes = _call(nvml, name, handle)
        if processes is None:
            continue
        for process in processes:
            if int(getattr(process, "pid", -1)) == pid:
                used = getattr(process, "usedGpuMemory", None)
                return None if used is None else int(used) / 2**20
        return None
    return None


def reasons_text(bits: int) -> list[str]:
    """The names of the disturbing reasons in a clock-event bitmask (idle and settings ignored)."""
    return [name for bit, name in REASONS.items() if bits & bit]


@dataclass(frozen=True)
class _Counters:
    reasons: int | None
    violations: dict[str, int]


class Throttle:
    """What held one GPU's clocks down between two marks: the clock-event reasons read at the end
    (right after the unit's last synchronise; idle ignored), and the growth of the power and thermal violation counters (nanoseconds the
    clocks were held below the requested ones) in between: the counters see a throttle that came
    and went mid-trial, which two reads of the clock cannot."""

    def __init__(self, nvml: Any, handle: Any) -> None:
        self._nvml = nvml
        self._handle = handle

    def mark(self) -> _Counters:
        reasons = _call(self._nvml, "nvmlDeviceGetCurrentClocksEventReasons", self._handle)
        if reasons is None:
            reasons = _call(self._nvml, "nvmlDeviceGetCurrentClocksThrottleReasons", self._handle)
        violations = {}
        for policy, name in _POLICIES.items():
            status = _call(self._nvml, "nvmlDeviceGetViolationStatus", self._handle, policy)
            with contextlib.suppress(AttributeError, TypeError, ValueError):
                violations[name] = int(status.violationTime)
        return _Counters(None if reasons is None else int(reasons), violations)

    def between(self, start: _Counters, end: _Counters) -> str | None:
        """``""`` when nothing held the clocks down between the marks, else the reasons (one line),
        ``None`` when NVML answered neither query (unknown)."""
        if start.reasons is None and end.reasons is None and not (start.violations and end.violations):
            return None
        seen = reasons_text(end.reasons or 0)  # the end: the last unit's reasons are stale at the start
        for name, before in start.violations.items():
            after = end.violations.get(name)
            if after is not None and after > before:
                seen.append(f"{name} violation {count((after - before) / 1e6)} ms")
        return ", ".join(seen)
