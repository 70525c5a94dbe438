"""Memory: each variant's weights and peak memory."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar

from workbench.charts.base import Axis, Chart, Row, RunView
from workbench.charts.registry import ChartSpec, Tab, register_chart

if TYPE_CHECKING:
    from workbench.charts.views import TwoRunsView

__all__ = ["DEVICE_WIDE", "MEMORY_LABELS", "MemoryBar", "MemoryChart", "memory_chart", "memory_groups"]


# -- (vi) memory and roofline ----------------------------------------------------------------------------


#: what each ``memory_kind`` measured, as a bar's label says it (short) and the notes (long)
MEMORY_LABELS = {
    "cuda_allocator_peak": "torch allocator peak",
    "cuda_allocator_peak+runtime_draft": "torch allocator peak + runtime draft",
    "process_rss_peak": "process RSS peak",
    "nvml_process": "process GPU memory (NVML)",
    "device_used_delta": "device-wide GPU memory (NVML/cudaMemGetInfo)",
}
_MEMORY_KIND = {
    "cuda_allocator_peak": "torch's CUDA allocator peak (not the CUDA context)",
    "cuda_allocator_peak+runtime_draft": "torch's CUDA allocator peak plus the device memory the "
    "runtime draft (llama.cpp / ONNX Runtime GenAI) took at its load",
    "process_rss_peak": "worker process RSS peak (includes the Python/torch runtime)",
    "nvml_process": "the process's GPU memory per NVML after the trial, less what it held before its "
    "load (every allocator; not the CUDA context)",
    "device_used_delta": "GPU memory used on the whole device since before the load: other processes' "
    "and every variant loaded after it count too",
}
#: kinds measured device-wide: kept out of the comparison between variants
DEVICE_WIDE = frozenset({"device_used_delta"})


@dataclass(frozen=True)
class MemoryBar:
    variant: str
    peak_mb: float
    weights_mb: float | None
    kind: str  # a key of MEMORY_LABELS (variants.memory_kind)

    @property
    def label(self) -> str:
        return MEMORY_LABELS.get(self.kind, self.kind)

    @property
    def scope(self) -> str:
        """``device`` for a device-wide figure (not comparable across variants), else ``process``."""
        return "device" if self.kind in DEVICE_WIDE else "process"


def memory_groups(bars: tuple[MemoryBar, ...]) -> list[tuple[str, list[str]]]:
    """The bars' variants in the groups a chart shows: the compared ones (per-process figures), then
    the device-wide ones apart, under a header that says they are not compared."""
    compared = [b.variant for b in bars if b.scope == "process"]
    apart = [b.variant for b in bars if b.scope == "device"]
    groups = [("", compared)] if compared else []
    if apart:
        groups.append(("device-wide (other variants resident count too): not compared", apart))
    return groups


@dataclass
class MemoryChart(Chart):
    key: ClassVar[str] = "memory"
    bars: tuple[MemoryBar, ...] = ()
    x_axis: Axis = Axis("memory", "MB")

    def rows(self) -> list[Row]:
        return [
            {
                "variant": b.variant,
                "peak_memory_mb": b.peak_mb,
                "weights_mb": b.weights_mb,
                "memory_kind": b.kind,
                "memory_label": b.label,
                "memory_scope": b.scope,
            }
            for b in self.bars
        ]


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
    device_wide = [b.variant for b in bars if b.scope == "device"]
    return MemoryChart(
        title="Peak memory and weights",
        variants=tuple(analysis.variant_names),
        bars=bars,
        notes=[
            "Light: weights. Full bar: peak memory during a trial (the highest median over workloads).",
            *(f"Peak = {kind}." for kind in kinds),
            *(
                [
                    f"Device-wide, shown apart and not compared: {', '.join(device_wide)} (its process "
                    "could not be told apart on the GPU)."
                ]
                if device_wide
                else []
            ),
        ],
    )


# -- in the list of chart kinds (workbench.charts.registry) ---------------------------------------------

MEMORY_TAB = Tab("Memory", 80, "No memory figures recorded.")


def _of_two_runs(view: TwoRunsView) -> MemoryChart | None:
    return memory_chart(view.side)  # both runs' variants side by side, a colour per name


register_chart(ChartSpec(MemoryChart, MEMORY_TAB, 110, run=memory_chart, two_runs=_of_two_runs))
