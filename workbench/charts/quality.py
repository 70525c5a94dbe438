"""Speed against quality: each variant × workload's speed-up (e2e, decode) against its KLD from the
baseline, with CIs on both axes and the Pareto front (no other point is both faster and closer)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar

from workbench.charts.base import Axis, Chart, Row
from workbench.charts.registry import ChartSpec, Tab, register_chart

if TYPE_CHECKING:
    from workbench.analysis.run import RunAnalysis


__all__ = ["QualityChart", "QualityPoint", "pareto_front", "quality_chart"]


@dataclass(frozen=True)
class QualityPoint:
    workload: str
    variant: str
    metric: str  # e2e | decode
    speedup: float
    lo: float | None
    hi: float | None
    #: mean KLD from the baseline; 0 for the baseline and lossless variants (their greedy output is
    #: the baseline's by construction)
    kld: float
    kld_lo: float | None
    kld_hi: float | None
    same_top: float | None
    status: str  # reference | scored | lossless
    pareto: bool = False


def pareto_front(points: list[QualityPoint]) -> set[int]:
    """Indices of the points no other point beats on both axes (faster and no farther, or as fast and
    closer): the trade-offs worth choosing from."""
    front = set()
    for i, p in enumerate(points):
        dominated = any(
            (q.speedup >= p.speedup and q.kld <= p.kld) and (q.speedup > p.speedup or q.kld < p.kld)
            for j, q in enumerate(points)
            if j != i
        )
        if not dominated:
            front.add(i)
    return front


@dataclass
class QualityChart(Chart):
    """Speed-up (y) against KLD from the baseline (x, log scale), two panels: e2e and decode."""

    key: ClassVar[str] = "quality"
    baseline: str = ""
    points: tuple[QualityPoint, ...] = ()
    x_axis: Axis = Axis("KLD from the baseline (nats per token, log scale; lower is closer)")
    y_axis: Axis = Axis("speed-up vs the baseline (> 1 is faster)")

    def rows(self) -> list[Row]:
        return [
            {
                "workload": p.workload,
                "variant": p.variant,
                "metric": p.metric,
                "speedup": p.speedup,
                "ci_lo": p.lo,
                "ci_hi": p.hi,
                "kld": p.kld,
                "kld_ci_lo": p.kld_lo,
                "kld_ci_hi": p.kld_hi,
                "same_top": p.same_top,
                "status": p.status,
                "pareto": p.pareto,
                "baseline": self.baseline,
            }
            for p in self.points
        ]

    @property
    def workloads(self) -> list[str]:
        return list(dict.fromkeys(p.workload for p in self.points))


def quality_chart(analysis: RunAnalysis) -> QualityChart | None:
    """The chart when some variant was scored; None otherwise."""
    if not any(s.quality is not None and s.quality.status == "scored" for s in analysis.summaries):
        return None
    points: list[QualityPoint] = []
    for metric in ("e2e", "decode"):
        for workload in dict.fromkeys(s.workload for s in analysis.summaries):
            here: list[QualityPoint] = []
            for s in analysis.summaries:
                q = s.quality
                if s.workload != workload or q is None or q.status not in ("reference", "scored", "lossless"):
                    continue
                if q.status == "reference":
                    here.append(
                        QualityPoint(
                            workload, s.variant, metric, 1.0, None, None, 0.0, None, None, 1.0, "reference"
                        )
                    )
                    continue
                est = s.speedup_e2e if metric == "e2e" else s.speedup_decode
                if est is None or est.value is None:
                    continue
                scored = q.figures
                ci = scored.kld_ci if scored else None
                here.append(
                    QualityPoint(
                        workload,
                        s.variant,
                        metric,
                        est.value,
                        est.lo,
                        est.hi,
                        scored.kld_mean if scored else 0.0,
                        ci[0] if ci else None,
                        ci[1] if ci else None,
                        scored.same_top if scored else 1.0,
                        q.status,
                    )
                )
            front = pareto_front(here)
            points += [QualityPoint(**{**p.__dict__, "pareto": i in front}) for i, p in enumerate(here)]
    speed_ci = "bootstrap 95 % CI" if any(p.lo is not None for p in points) else "one repetition: no interval"
    return QualityChart(
        title=f"Speed vs quality (vs {analysis.baseline})",
        variants=tuple(analysis.variant_names),
        baseline=analysis.baseline or "",
        points=tuple(points),
        notes=[
            "Each point: one variant on one workload. Up is faster (paired geometric mean of the speed-ups, "
            f"{speed_ci}); left is closer to the baseline's predictions (mean KLD per token, CI over "
            "prompts); the baseline and lossless variants sit on the left edge (KLD 0). Filled and joined: "
            "the Pareto front of each workload (no other variant is both faster and closer)."
        ],
    )


# -- in the list of chart kinds (workbench.charts.registry) ---------------------------------------------

QUALITY_TAB = Tab(
    "Quality",
    60,
    "No quality figures: the run scored no lossy variant (a quality pass needs a baseline and a variant "
    "that changes the weights or the arithmetic; docs/metrics.md, Quality).",
    one_run_only="the quality figures (KLD, same top vs the run's own baseline)",
)

register_chart(ChartSpec(QualityChart, QUALITY_TAB, 30, run=quality_chart))
