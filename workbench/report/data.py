"""A run's analysis as JSON-ready data: the one serialiser of ``workbench show --json``, ``noise --json``
and the export's ``summary.json`` (and the rows of its ``phases.csv``). The figures are the
analysis's own ``to_dict``; the worded parts (each workload's advice, what would it take, the drafting
advice) are written by the report modules, as every other view writes them. Every figure is rounded
here, where the data is made, to :data:`~workbench.formatting.SIGNIFICANT` significant digits
(:func:`~workbench.formatting.meaningful`): what a run measured, not the last bits of how this
machine's numpy computed it — the same JSON on every machine.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from workbench.analysis.phases import WorkloadPhase
from workbench.analysis.run import RunAnalysis
from workbench.analysis.summary import GroupSummary
from workbench.analysis.targets import Verdict
from workbench.formatting import meaningful
from workbench.report.compression import compression_lines
from workbench.report.drafting import drafting_advice
from workbench.report.model import JSONObject
from workbench.report.phases import advice, conversation_lines, turn_hold_lines
from workbench.report.targets import target_advice

__all__ = ["phase_data", "run_data", "summary_rows"]


def phase_data(phase: WorkloadPhase) -> JSONObject:
    """One workload's phase with its advice (``phases`` in the JSON, a row of ``phases.csv``)."""
    return meaningful({**phase.to_dict(), "advice": advice(phase)})


def summary_rows(summaries: Sequence[GroupSummary], verdicts: Sequence[Verdict]) -> list[JSONObject]:
    """Per variant × workload: the summary and its experience targets' ``targets`` and ``goodput``
    keys (None without targets)."""
    by_key = {(v.variant, v.workload): v for v in verdicts}
    rows = []
    for s in summaries:
        verdict = by_key.get((s.variant, s.workload))
        rows.append(
            {
                **s.to_dict(),
                "targets": verdict.to_dict() if verdict is not None else None,
                "goodput": verdict.goodput if verdict is not None else None,
            }
        )
    return meaningful(rows)


def run_data(analysis: RunAnalysis) -> JSONObject:
    """The run's analysis as JSON-ready data; ``run`` is the runs row with its environment parsed."""
    verdicts = analysis.verdicts
    data: JSONObject = {
        # the answer first: per workload the fastest variant end to end and its costs; the trust
        "verdict": [v.to_dict() for v in analysis.workload_verdicts],
        "trust": analysis.trust.to_dict(),
        "run": {**analysis.run.to_row(), "environment": analysis.environment},
        "environment": analysis.environment,
        "variants": [v.to_row() for v in analysis.variants],
        "baseline": analysis.baseline,
        "summary": summary_rows(analysis.summaries, verdicts),
        "phases": [phase_data(p) for p in analysis.phases],
        "roofline": [r.to_dict() for r in analysis.roofline],
        "accepted_lengths": analysis.accepted_lengths,
        # per variant × workload with targets: the checks; per workload → variant: the goodput
        "targets": [v.to_dict() for v in verdicts],
        "goodput": {
            w: {v.variant: v.goodput for v in verdicts if v.workload == w}
            for w in dict.fromkeys(v.workload for v in verdicts)
        },
        "target_advice": target_advice(analysis.target_gaps),
        "design": analysis.design.to_dict(),
        # per speculative variant × workload: acceptance by position, costs, break-even (docs/analysis.md)
        "break_even": [b.to_dict() for b in analysis.break_even],
        "drafting_advice": drafting_advice(analysis.break_even),
        # per variant: scored / lossless / not scored (why); the figures per variant × workload
        "quality": analysis.quality.to_dict() if analysis.quality else None,
        # per lossless variant: identical / numerically equivalent / unexplained, beside the A/A floor
        "equivalence": _equivalence(analysis),
    }
    if analysis.conversations:  # conversation workloads: per variant, its figures turn by turn
        data["conversations"] = [s.to_dict() for s in analysis.conversations]
        reference = analysis.baseline or (analysis.phases[0].variant if analysis.phases else None)
        data["conversation_advice"] = conversation_lines(analysis.conversations, reference)
    if analysis.turn_holds:  # conversation workloads with a TTFT target: the turns each variant holds it
        data["turn_holds"] = [dataclasses.asdict(h) for h in analysis.turn_holds]
        data["turn_hold_advice"] = turn_hold_lines(analysis.turn_holds)
    if analysis.compression:  # runs with a prompt-compression variant: its break-even (docs/analysis.md)
        data["compression"] = [b.to_dict() for b in analysis.compression]
        data["compression_advice"] = compression_lines(analysis.compression)
    return meaningful(data)


def _equivalence(analysis: RunAnalysis) -> JSONObject | None:
    from workbench.report.equivalence import equivalence_data, floor_line

    checked = analysis.equivalence
    if checked is None:
        return None
    floor = checked.floor
    return {
        "floor": None
        if floor is None
        else {
            "dtype": floor.dtype,
            "kld": floor.kld,
            # the old check's run-wide near-tie margin; a replayed run judges each position by its own
            "margin": None if floor.per_position else floor.margin,
            "per_position": floor.per_position,
            "shapes": [vars(s) for s in floor.shapes],
            "text": floor_line(floor),
        },
        "variants": {name: equivalence_data(c) for name, c in checked.variants.items()},
    }
