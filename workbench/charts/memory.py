"""Memory: each variant's weights and peak memory."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, ClassVar

from workbench.charts.base import Axis, Chart, RunView

__all__ = ["MemoryBar", "MemoryChart", "memory_chart"]


# -- (vi) memory and roofline ----------------------------------------------------------------------------


@dataclass(frozen=True)
class MemoryBar:
    variant: str
    peak_mb: float
    weights_mb: float | None
    kind: str  # cuda_allocator_peak | process_rss_peak | nvml_process | device_used_delta


@dataclass
class MemoryChart(Chart):
    key: ClassVar[str] = "memory"
    bars: tuple[MemoryBar, ...] = ()
    x_axis: Axis = Axis("memory", "MB")

    def rows(self) -> list[dict[str, Any]]:
        return [
            {
                "variant": b.variant,
                "peak_memory_mb": b.peak_mb,
                "weights_mb": b.weights_mb,
                "memory_kind": b.kind,
            }
            for b in self.bars
        ]


_MEMORY_KIND = {
    "cuda_allocator_peak": "CUDA allocator peak",
    "process_rss_peak": "worker process RSS peak (includes the Python/torch runtime)",
    "nvml_process": "the process's GPU memory per NVML after the trial (every allocator, the CUDA context)",
    "device_used_delta": "GPU memory used on the device since before the load (device-wide)",
}


def memory_chart(analysis: RunView) -> MemoryChart | None:
    variants = {v.name: v for v in analysis.variants}
    peaks: dict[str, float] = {}
    for s in analysis.summaries:
        peak = s.metrics["peak_memory_mb"].value
        if peak is not None:
            peaks[s.variant] = max(peaks.get(s.variant, 0.0), peak)
    if not peaks:
        return None
    bars = tuple(
        MemoryBar(
            name,
            peaks[name],
            variants[name].weights_mb or None if name in variants else None,
            (variants[name].memory_kind or "") if name in variants else "",
        )
        for name in analysis.variant_names
        if name in peaks
    )
    kinds = sorted({_MEMORY_KIND.get(b.kind, b.kind) for b in bars if b.kind})
    return MemoryChart(
        title="Peak memory and weights",
        variants=tuple(analysis.variant_names),
        bars=bars,
        notes=[
            "Light: weights. Full bar: peak memory during a trial (the highest median over workloads).",
            *(f"Peak = {kind}." for kind in kinds),
        ],
    )
