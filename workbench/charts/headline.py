"""The headline chart: prefill and decode time stacked per variant, grouped by workload. A bar is
the variant's median e2e — the main table's, so bars rank variants as the table and the verdict do —
split at its median TTFT (the sum of the two phases' own medians would be another number, and can
rank close variants the other way)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar

from workbench.charts.base import Axis, Chart, Row
from workbench.charts.registry import ChartSpec, Tab, register_chart
from workbench.formatting import percent

if TYPE_CHECKING:
    from workbench.analysis.phases import WorkloadPhase
    from workbench.analysis.run import RunAnalysis
    from workbench.analysis.summary import GroupSummary
    from workbench.charts.views import TwoRunsView

__all__ = ["HeadlineBar", "HeadlineChart", "HeadlineGroup", "headline_chart", "phase_caption"]


def phase_caption(phase: WorkloadPhase) -> str:
    """A workload's group label in the headline chart, e.g. ``decode-heavy: prefill 12% of e2e``."""
    return f"{phase.label}: prefill {percent(phase.prefill_share)} of e2e"


# -- (i) the headline: where the time goes, per variant × workload -----------------------------------


@dataclass(frozen=True)
class HeadlineBar:
    variant: str
    prefill_ms: float  # median TTFT
    decode_ms: float  # the rest of the median e2e: median e2e − median TTFT (after the first token)
    n: int  # measured trials
    compress_ms: float | None = None  # prompt compression: the median part of the TTFT spent compressing

    @property
    def total_ms(self) -> float:
        """The median e2e (the main table's e2e ms)."""
        return self.prefill_ms + self.decode_ms

    @property
    def prefill_share(self) -> float:
        return self.prefill_ms / self.total_ms if self.total_ms > 0 else 0.0


@dataclass(frozen=True)
class HeadlineGroup:
    workload: str
    bars: tuple[HeadlineBar, ...]
    label: str = ""  # e.g. "decode-heavy: prefill 12 % of e2e" (the phase classification)


@dataclass
class HeadlineChart(Chart):
    """Horizontal stacked bars: the median e2e per variant split into prefill (the median TTFT) and
    decode (the rest), grouped by workload, one shared time axis. The prefill segment is a light shade of the variant's colour, decode the full one."""

    key: ClassVar[str] = "headline"
    groups: tuple[HeadlineGroup, ...] = ()
    x_axis: Axis = Axis("time per request, median", "ms")

    def rows(self) -> list[Row]:
        compressed = any(b.compress_ms is not None for g in self.groups for b in g.bars)
        return [
            {
                "workload": g.workload,
                "variant": b.variant,
                "prefill_ms": b.prefill_ms,
                "decode_ms": b.decode_ms,
                "total_ms": b.total_ms,
                "prefill_share": b.prefill_share,
                "n": b.n,
                "phase": g.label,
                **({"compress_ms": b.compress_ms} if compressed else {}),
            }
            for g in self.groups
            for b in g.bars
        ]


def headline_chart(
    summaries: Sequence[GroupSummary],
    labels: dict[str, str] | None = None,
    compress: Mapping[tuple[str, str], float] | None = None,
) -> HeadlineChart:
    """From :func:`workbench.analysis.summary.summarize` output: per variant × workload a bar of its
    median e2e, split at its median TTFT; ``labels`` maps a workload to its phase
    text; ``compress`` (variant, workload) to the median time a prompt-compressing variant spent
    compressing, drawn as the first part of its prefill."""
    variants: dict[str, None] = {}
    groups: dict[str, list[HeadlineBar]] = {}
    for s in summaries:
        variants.setdefault(s.variant)
        prefill, e2e = s.metrics["ttft_ms"].value, s.metrics["e2e_ms"].value
        if prefill is None or e2e is None:
            continue
        # the rest of the median e2e, so the bar is the table's e2e (never below 0: the median e2e is
        # at least the median TTFT of the same trials)
        decode = max(e2e - prefill, 0.0)
        squeezed = (compress or {}).get((s.variant, s.workload))
        bar = HeadlineBar(s.variant, prefill, decode, s.n_ok, min(squeezed, prefill) if squeezed else None)
        groups.setdefault(s.workload, []).append(bar)
    return HeadlineChart(
        title="Where the time goes: prefill (TTFT) vs decode",
        variants=tuple(variants),
        groups=tuple(
            HeadlineGroup(workload, tuple(bars), (labels or {}).get(workload, ""))
            for workload, bars in groups.items()
        ),
        notes=[
            "A bar is the median e2e (the table's). Light: the median TTFT (prefill). Dark: the rest of "
            "the median e2e (decode, after the first token)."
            + (" Lightest: compressing the prompt (part of the prefill)." if compress else "")
        ],
    )


# -- in the list of chart kinds (workbench.charts.registry) ---------------------------------------------

HEADLINE_TAB = Tab("Headline", 10, "No finished trials yet.")


def _of_run(analysis: RunAnalysis) -> HeadlineChart | None:
    labels = {p.workload: phase_caption(p) for p in analysis.phases}
    compress = {(b.variant, b.workload): b.compress_ms for b in analysis.compression}
    chart = headline_chart(analysis.summaries, labels, compress)
    return chart if chart.groups else None


def _of_two_runs(view: TwoRunsView) -> HeadlineChart | None:
    chart = headline_chart(view.side.summaries)  # both runs' variants side by side, each as alone
    return chart if chart.groups else None


register_chart(ChartSpec(HeadlineChart, HEADLINE_TAB, 10, run=_of_run, two_runs=_of_two_runs))
