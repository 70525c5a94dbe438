"""Two runs compared: per variant × workload, RUN_B's speed-up over RUN_A (the before → after change
of each variant, matched by name), with its bootstrap 95 % CI."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar

from workbench.charts.base import Axis, Row
from workbench.charts.registry import ChartSpec, register_chart
from workbench.charts.speedup import SPEEDUP_TAB, SpeedupChart, SpeedupPoint

if TYPE_CHECKING:
    from workbench.analysis.compare import RunComparison
    from workbench.charts.views import TwoRunsView


__all__ = ["BeforeAfterChart", "before_after_chart"]


@dataclass
class BeforeAfterChart(SpeedupChart):
    """RUN_B over RUN_A per variant (by name, without the ``RUN:`` tag) × workload: drawn like the
    speed-up chart, one row per variant, the line at 1 = no change."""

    key: ClassVar[str] = "before-after"
    run_a: int = 0
    run_b: int = 0

    def reference(self) -> Row:
        return {"run_a": self.run_a, "run_b": self.run_b}


def before_after_chart(
    comparisons: Sequence[RunComparison], run_a: int, run_b: int, variant_names: Sequence[str] = ()
) -> BeforeAfterChart | None:
    """From :func:`workbench.analysis.compare.compare_two_runs`'s comparisons (``RunComparison``);
    ``variant_names``: every variant of both runs in run order (``TwoRuns.variant_names``), which
    gives each variant the colour it has in the runs side by side. None when nothing was compared."""
    points = []
    for c in comparisons:
        for metric, est in (("e2e", c.speedup_e2e), ("ttft", c.speedup_ttft), ("decode", c.speedup_decode)):
            if est is not None and est.value is not None:
                points.append(SpeedupPoint(c.workload, c.variant, metric, est.value, est.lo, est.hi))
    if not any(p.metric == "e2e" for p in points):
        return None
    return BeforeAfterChart(
        title=f"Run {run_b} against run {run_a}, per variant (matched by name)",
        variants=tuple(dict.fromkeys([*variant_names, *(c.variant for c in comparisons)])),
        baseline=f"run {run_a}",
        points=tuple(points),
        x_axis=Axis(f"e2e speed-up of run {run_b} over run {run_a} (> 1: run {run_b} is faster)"),
        run_a=run_a,
        run_b=run_b,
        notes=[
            f"Each variant's change from run {run_a} to run {run_b}: the ratio of its e2e medians in the "
            "two runs. Whiskers: bootstrap 95 % CI (none with one trial per prompt). Filled: the CI "
            "excludes 1; hollow: no detectable change. Two runs are not paired round by round."
        ],
    )


# -- in the list of chart kinds (workbench.charts.registry) ---------------------------------------------


def _of_two_runs(view: TwoRunsView) -> BeforeAfterChart | None:
    # each variant's before → after change, not every variant against the first run's baseline
    return before_after_chart(view.two.comparisons, *view.two.ids, view.two.variant_names)


register_chart(ChartSpec(BeforeAfterChart, SPEEDUP_TAB, 25, two_runs=_of_two_runs))
