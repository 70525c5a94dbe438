"""Output fidelity: does a variant generate what the baseline generates?

Each greedy trial's output is compared with the baseline variant's for the same (workload, prompt,
repetition) and the verdict is written into the trial's row: ``matches_baseline`` (identical
tokens), ``first_divergence`` (index of the first differing token, NULL when identical) and
``match_fraction`` (share of equal positions over the longer output).

Recorded, not computed on read: the run's recorder writes :func:`baseline_comparisons` once, when a
run that has finished trials ends (status ok or partial), and the three columns then hold the
verdict. They are a contract of the ``trials`` table that analysts' SQL reads without the workbench
in between, so they must be in the file; the summaries read them back from the rows like any other
column. Computing them on every read would leave that SQL without them and repeat, on every `show`,
a comparison whose inputs never change once the run has ended.
"""

from __future__ import annotations

import json
from collections.abc import Sequence

from workbench.store.records import TrialRecord

__all__ = ["baseline_comparisons", "compare_outputs"]

#: a trial's verdict against the baseline: matches_baseline, first_divergence, match_fraction
Comparison = dict[str, "int | float | None"]


def baseline_comparisons(trials: Sequence[TrialRecord], baseline: str) -> list[tuple[int, Comparison]]:
    """Compare the run's greedy ok trials (``trials``) with the baseline's: per trial id its verdict,
    for the recorder to write. When either side has no token ids (a server that streamed text; rows
    from before ids were stored) the texts are compared, character by character. The baseline's own
    trials get none (they stay NULL: it is the reference); nor do sampled trials."""
    trials = [t for t in trials if t.status == "ok"]
    reference = {(t.workload, t.prompt_id, t.repetition): t for t in trials if t.variant == baseline}
    updates = []
    for t in trials:
        if t.variant == baseline or t.temperature:
            continue
        ref = reference.get((t.workload, t.prompt_id, t.repetition))
        if ref is not None and t.id is not None:
            by_ids = bool(t.output_token_ids) and bool(ref.output_token_ids)
            updates.append((t.id, compare_outputs(_tokens(t, by_ids), _tokens(ref, by_ids))))
    return updates


def _tokens(trial: TrialRecord, by_ids: bool) -> Sequence[int | str]:
    if by_ids:
        tokens: list[int] = json.loads(trial.output_token_ids or "[]")
        return tokens
    return list(trial.output_text or "")


def compare_outputs(output: Sequence[int | str], reference: Sequence[int | str]) -> Comparison:
    """``matches_baseline``, ``first_divergence`` and ``match_fraction`` of one output against the
    reference's (token ids, or characters)."""
    first = next((i for i, (a, b) in enumerate(zip(output, reference, strict=False)) if a != b), None)
    if first is None and len(output) != len(reference):
        first = min(len(output), len(reference))
    longest = max(len(output), len(reference))
    equal = sum(a == b for a, b in zip(output, reference, strict=False))
    return {
        "matches_baseline": int(first is None),
        "first_divergence": first,
        "match_fraction": equal / longest if longest else 1.0,
    }
