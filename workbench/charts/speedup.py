"""Speed-ups against the baseline variant, with their confidence intervals."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar

from workbench.charts.base import Axis, Chart, Row
from workbench.charts.registry import ChartSpec, Tab, register_chart

if TYPE_CHECKING:
    from workbench.analysis.run import RunAnalysis


__all__ = ["SpeedupChart", "SpeedupPoint", "speedup_chart"]


# -- (iv) speed-ups -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class SpeedupPoint:
    workload: str
    variant: str
    metric: str  # e2e | ttft | decode
    value: float
    lo: float | None
    hi: float | None

    @property
    def significant(self) -> bool:
        return self.lo is not None and self.hi is not None and not (self.lo <= 1.0 <= self.hi)


@dataclass
class SpeedupChart(Chart):
    """e2e speed-up vs the baseline per variant × workload, with bootstrap 95 % CI whiskers."""

    key: ClassVar[str] = "speedup"
    baseline: str = ""
    points: tuple[SpeedupPoint, ...] = ()
    x_axis: Axis = Axis("e2e speed-up vs the baseline (×, > 1 is faster)")

    def rows(self) -> list[Row]:
        return [
            {
                "workload": p.workload,
                "variant": p.variant,
                "metric": p.metric,
                "speedup": p.value,
                "ci_lo": p.lo,
                "ci_hi": p.hi,
                "significant": p.significant,
                **self.reference(),
            }
            for p in self.points
        ]

    def reference(self) -> Row:
        """What the speed-ups are over, as the CSV's last columns."""
        return {"baseline": self.baseline}

    @property
    def workloads(self) -> list[str]:
        return list(dict.fromkeys(p.workload for p in self.points))

    @property
    def has_intervals(self) -> bool:
        """Whether any e2e point has a CI (none with one trial per prompt: one repetition)."""
        return any(p.lo is not None and p.hi is not None for p in self.points if p.metric == "e2e")


def speedup_chart(analysis: RunAnalysis) -> SpeedupChart | None:
    points = []
    for s in analysis.summaries:
        for metric, est in (("e2e", s.speedup_e2e), ("ttft", s.speedup_ttft), ("decode", s.speedup_decode)):
            if est is not None and est.value is not None:
                points.append(SpeedupPoint(s.workload, s.variant, metric, est.value, est.lo, est.hi))
    if not any(p.metric == "e2e" for p in points):
        return None
    chart = SpeedupChart(
        title=f"Speed-up vs {analysis.baseline}",
        variants=tuple(analysis.variant_names),
        baseline=analysis.baseline or "",
        points=tuple(points),
    )
    what = (
        "Each point: the geometric mean of the e2e time ratios of paired trials (the same prompt, the "
        "same round, baseline over variant)."
    )
    if chart.has_intervals:
        chart.notes = [
            f"{what} Whiskers: bootstrap 95 % CI. Filled: the CI excludes 1 (faster or slower for sure); "
            "hollow: not significant. Dashed: 1 (as fast as the baseline)."
        ]
    else:
        chart.notes = [
            f"{what} One repetition: no interval, so no point is known to be faster or slower — run "
            'with repetitions = 3 (or "auto") to know. Dashed: 1 (as fast as the baseline).'
        ]
    return chart


# -- in the list of chart kinds (workbench.charts.registry) ---------------------------------------------

SPEEDUP_TAB = Tab("Speed-up", 50, "No speed-ups: the run needs a baseline variant and another variant.")

register_chart(ChartSpec(SpeedupChart, SPEEDUP_TAB, 20, run=speedup_chart))
