"""Target attainment: per workload with experience targets, each variant's goodput (the share of its
requests that met every target) against the share each target asks for (its percentile), with
which targets it met."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar

from workbench.charts.base import Axis, Chart, Row, RunView
from workbench.charts.registry import ChartSpec, Tab, register_chart
from workbench.formatting import percent
from workbench.spec.targets import TARGET_METRICS

if TYPE_CHECKING:
    from workbench.charts.views import TwoRunsView

__all__ = ["TargetBar", "TargetsChart", "targets_chart"]


@dataclass(frozen=True)
class TargetBar:
    workload: str
    variant: str
    goodput: float | None  # 0..1; None: a targeted metric has no data for this variant
    percentile: float  # the share (in %) each target asks for
    status: str  # met | missed | unknown
    checks: tuple[tuple[str, str, float | None, float], ...]  # (metric, status, measured, target)

    @property
    def label(self) -> str:
        """e.g. ``goodput 80 % · TTFT ✓ · TPOT ✗``."""
        marks = " · ".join(
            f"{TARGET_METRICS[m].label} {'✓' if s == 'met' else '✗' if s == 'missed' else '?'}"
            for m, s, _, _ in self.checks
        )
        head = "no data" if self.goodput is None else f"goodput {percent(self.goodput)}"
        return f"{head} · {marks}" if marks else head


@dataclass
class TargetsChart(Chart):
    """Horizontal bars of goodput per variant, grouped by workload; a dashed mark at the percentile."""

    key: ClassVar[str] = "targets"
    bars: tuple[TargetBar, ...] = ()
    x_axis: Axis = Axis("requests that met every target (goodput)", "%")

    @property
    def workloads(self) -> list[str]:
        return list(dict.fromkeys(b.workload for b in self.bars))

    def group_title(self, workload: str, targets: str = "") -> str:
        return f"{workload} — {targets}" if targets else workload

    def rows(self) -> list[Row]:
        return [
            {
                "workload": b.workload,
                "variant": b.variant,
                "goodput": b.goodput,
                "verdict": b.status,
                "percentile": b.percentile,
                "metric": metric,
                "target": target,
                "measured": measured,
                "status": status,
            }
            for b in self.bars
            for metric, status, measured, target in b.checks
        ]


def targets_chart(analysis: RunView) -> TargetsChart | None:
    """The run's target attainment (None when no workload of the run has targets)."""
    verdicts = list(analysis.verdicts)
    if not verdicts:
        return None
    order = list(dict.fromkeys(v.workload for v in verdicts))
    bars = tuple(
        TargetBar(
            v.workload,
            v.variant,
            v.goodput,
            v.targets.percentile,
            v.status,
            tuple((c.metric, c.status, c.measured.value, c.target) for c in v.checks),
        )
        for v in sorted(verdicts, key=lambda v: order.index(v.workload))
    )
    targets = {v.workload: v.targets.describe() for v in verdicts}
    return TargetsChart(
        title="Target attainment per variant",
        variants=tuple(analysis.variant_names),
        bars=bars,
        notes=[
            "Goodput: the share of a variant's requests that met every target of the workload. "
            "Dashed: the share each target asks for (its percentile). ✓/✗: each target met or missed at "
            "that percentile. Targets: " + "; ".join(f"{w}: {t}" for w, t in targets.items()) + "."
        ],
    )


# -- in the list of chart kinds (workbench.charts.registry) ---------------------------------------------

TARGETS_TAB = Tab(
    "Targets", 90, "No experience targets: no workload of this run has targets (docs/targets.md)."
)


def _of_two_runs(view: TwoRunsView) -> TargetsChart | None:
    return targets_chart(view.side)


register_chart(ChartSpec(TargetsChart, TARGETS_TAB, 40, run=targets_chart, two_runs=_of_two_runs))
