"""What the charts of two runs compared are built from (:class:`TwoRunsView`), read once for the GUI's
compare view and ``compare A B --out`` alike."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from workbench.analysis.compare import SideBySide, TwoRuns
    from workbench.analysis.run import RunAnalysis
    from workbench.store import LoadedRun

__all__ = ["TwoRunsView", "two_runs_view"]


@dataclass(frozen=True)
class TwoRunsView:
    """Two runs compared: RUN_B against RUN_A (``two``, variants matched by name), both runs side by
    side each as it is alone (``side``, names tagged ``RUN:name``) and each run's own analysis
    (``alone``: RUN_A's, RUN_B's)."""

    two: TwoRuns
    side: SideBySide
    alone: tuple[RunAnalysis, RunAnalysis]


def two_runs_view(
    run_a: LoadedRun,
    run_b: LoadedRun,
    *,
    two: TwoRuns | None = None,
    exclude_disturbed: bool | None = None,
) -> TwoRunsView:
    """Two runs as the store loaded them (:meth:`workbench.store.Store.load_run`), for their charts; ``two``: their comparison when the caller has it."""
    from workbench.analysis.compare import compare_two_runs, side_by_side
    from workbench.analysis.run import analyze_run

    if two is None:
        two = compare_two_runs(run_a, run_b, exclude_disturbed=exclude_disturbed)
    # each run's rows as it has them alone (`workbench show A`, `show B`); what holds across the runs is
    # the one comparison `workbench compare A B` reports
    side = side_by_side([run_a, run_b], each_alone=True, exclude_disturbed=exclude_disturbed)
    alone = (
        analyze_run(run_a, exclude_disturbed=exclude_disturbed),
        analyze_run(run_b, exclude_disturbed=exclude_disturbed),
    )
    return TwoRunsView(two, side, alone)
