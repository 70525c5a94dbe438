"""The CLI's plain-text tables outside the run report (:mod:`.run_report`): the noise floor of an A/A
run. ``text_table`` lays out any table (:func:`workbench.report.model.text_table`)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from workbench.formatting import mde_text, plus_minus, ratio
from workbench.report.model import TableRows, text_table

if TYPE_CHECKING:
    from workbench.analysis.summary import GroupSummary

__all__ = ["NOISE_REPETITIONS", "noise_table", "text_table"]

#: repetition counts the noise table projects the detectable effect to
NOISE_REPETITIONS = (3, 5, 10, 20)


def noise_table(summaries: Sequence[GroupSummary], prompts: dict[str, int]) -> TableRows:
    """An A/A run's noise floor (``analysis.summary.GroupSummary`` of the copy against the original):
    per workload and metric the A/A speed-up with its CI (± half-width), the minimum detectable
    effect now and at :data:`NOISE_REPETITIONS`, and what the CI is made of: the process-to-process
    spread (``process ±``: how far a pair of worker processes strays beyond its own trials) and a
    pair's own noise (``pair ±``); ``prompts``: workload → prompts per repetition."""
    from workbench.analysis.paired import mde_with

    rows = []
    for s in summaries:
        for label, est in (("e2e", s.speedup_e2e), ("TTFT", s.speedup_ttft), ("decode", s.speedup_decode)):
            if est is None:
                continue
            width = est.half_width
            per_rep = prompts.get(s.workload) or 1
            row = [s.workload, label, ratio(est), plus_minus(width), mde_text(est)]
            row += [plus_minus(mde_with(est, n * per_rep)) for n in NOISE_REPETITIONS]
            row += [plus_minus(est.process_sd), plus_minus(est.pair_sd)]
            rows.append(row)
    headers = ["workload", "metric", "A/A speed-up", "CI ±", "MDE now"]
    headers += [f"MDE at {n} reps" for n in NOISE_REPETITIONS]
    return [*headers, "process ±", "pair ±"], rows
