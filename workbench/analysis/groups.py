"""One run's figures per variant × workload — its table rows (:class:`GroupSummary`, quality attached)
and its experience targets' verdicts — computed one way for every view that shows them: the run alone
(:func:`workbench.analysis.run.analyze_run`: ``show``, the export, the GUI) and the same run beside
another (:func:`workbench.analysis.compare.side_by_side`: ``compare A B --baseline``, the GUI's
compare view). So a run's rows read the same whether it is shown alone or compared: the same trials
(its own disturbed-trial rule, never one decided over two runs' trials together), the same medians,
intervals and goodput.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from workbench.analysis.quality import RunQuality, run_quality
from workbench.analysis.summary import GroupSummary, summarize
from workbench.analysis.targets import Verdict, evaluate
from workbench.spec.targets import Targets
from workbench.store.loaded import LoadedRun
from workbench.store.records import TrialRecord

__all__ = ["RunGroups", "run_groups"]


@dataclass(frozen=True)
class RunGroups:
    """One run's rows: per variant × workload its summary (quality attached) and, where the workload
    has experience targets, its verdict; the run's quality pass (None without one)."""

    summaries: tuple[GroupSummary, ...]
    verdicts: tuple[Verdict, ...]
    quality: RunQuality | None


def run_groups(
    loaded: LoadedRun,
    reference: str | None,
    targets: Mapping[str, Targets],
    *,
    exclude_disturbed: bool | None = None,
) -> RunGroups:
    """The rows of one run (its measured trials): speed-ups paired against ``reference`` (None: none),
    variants in the spec's order, quality attached as each row is built; disturbed trials by the run's
    own rule (``exclude_disturbed`` None: :func:`workbench.analysis.paired.disturbance`'s)."""
    quality = run_quality(loaded)
    summaries = summarize(
        loaded.trials,
        reference,
        loaded.server_windows,
        loaded.variant_names,
        exclude_disturbed=exclude_disturbed,
        step_totals=loaded.step_totals,
        quality=quality,
    )
    return RunGroups(
        tuple(summaries), _target_verdicts(loaded.trials, summaries, targets, exclude_disturbed), quality
    )


def _target_verdicts(
    trials: Sequence[TrialRecord],
    summaries: Sequence[GroupSummary],
    targets: Mapping[str, Targets],
    exclude_disturbed: bool | None,
) -> tuple[Verdict, ...]:
    """A verdict per variant × workload of the workloads the run's spec gives targets, in the
    summaries' order (the spec's variants): an interleaved round may start with any of them."""
    quality = {(s.variant, s.workload): s.quality for s in summaries}
    verdicts = evaluate(trials, targets, exclude_disturbed=exclude_disturbed, quality=quality)
    rank = {(s.workload, s.variant): i for i, s in enumerate(summaries)}
    workloads = {w: i for i, w in enumerate(dict.fromkeys(s.workload for s in summaries))}
    return tuple(
        sorted(
            verdicts,
            key=lambda v: (workloads.get(v.workload, len(workloads)), rank.get((v.workload, v.variant), 0)),
        )
    )
