"""Per-token timelines: tokens against time for one representative prompt, one line per variant."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar

from workbench.charts.base import Axis, Chart, Row, file_stem
from workbench.charts.registry import ChartSpec, Tab, register_chart
from workbench.formatting import tokens

if TYPE_CHECKING:
    from workbench.analysis.run import RunAnalysis, Timeline


__all__ = ["TimelineChart", "timeline_charts"]


# -- (ii) token timeline ---------------------------------------------------------------------------------


@dataclass
class TimelineChart(Chart):
    """Cumulative tokens vs time for one prompt, one line per variant: prefill is the flat start, a
    speculative step is a jump of several tokens."""

    key: ClassVar[str] = "timeline"
    workload: str = ""
    prompt_id: str = ""
    series: tuple[Timeline, ...] = ()  # one per variant
    x_axis: Axis = Axis("time since the request", "ms")
    y_axis: Axis = Axis("tokens generated")

    @property
    def name(self) -> str:
        return f"timeline-{file_stem(self.workload)}"

    def rows(self) -> list[Row]:
        return [
            {
                "variant": s.variant,
                "workload": s.workload,
                "prompt_id": s.prompt_id,
                "step": i,
                "t_ms": t,
                "tokens": n,
            }
            for s in self.series
            for i, (t, n) in enumerate(zip(s.t_ms, s.tokens, strict=True))
        ]


def timeline_charts(analysis: RunAnalysis) -> list[TimelineChart]:
    charts = []
    variants = tuple(analysis.variant_names)
    for workload in dict.fromkeys(t.workload for t in analysis.timelines):
        series = tuple(t for t in analysis.timelines if t.workload == workload)
        first = series[0]
        tokens_in = f", {tokens(first.input_tokens)} input tokens" if first.input_tokens else ""
        charts.append(
            TimelineChart(
                title=f"Tokens over time — {workload} (prompt {first.prompt_id}{tokens_in})",
                variants=variants,
                workload=workload,
                prompt_id=first.prompt_id,
                series=series,
                notes=[
                    "Flat start: prefill (until the first token). Steps of several tokens: speculative decoding."
                ],
            )
        )
    return charts


# -- in the list of chart kinds (workbench.charts.registry) ---------------------------------------------

TIMELINE_TAB = Tab(
    "Timeline",
    20,
    "No token timelines: no trial finished with steps recorded.",
    one_run_only="the token timelines",
)

register_chart(ChartSpec(TimelineChart, TIMELINE_TAB, 50, run=timeline_charts))
