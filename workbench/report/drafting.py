"""Does drafting pay? The break-even tables of the speculative variants (analysis.drafting.BreakEven
each), shared by `workbench show`, the Markdown/HTML report and the GUI's Acceptance tab."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from workbench.analysis.drafting import pct
from workbench.report.formatting import fmt, ratio, times

__all__ = ["DRAFTING_NOTE", "break_even_table", "draft_length_table", "pct"]

Table = tuple[list[str], list[list[str]]]

#: what the tables' figures mean, under them
DRAFTING_NOTE = (
    "Costs in target steps (T1: the variant's own plain-step verify, else the baseline's TPOT on the same "
    "prompts): draft per drafted token, verify(k) fitted, other = the loop's time outside both, per step. "
    "A step drafting k tokens costs D(k) + V(k) and yields 1 + accepted tokens, so drafting "
    "breaks even at acceptance (D(k) + V(k) − 1) / k; 'needed' is that for the variant's mix of draft "
    "lengths. Predicted = tokens / Σ (D + V) over its steps; measured = the paired decode speed-up vs the "
    "baseline. Acceptance by position i = of the steps drafting ≥ i tokens, the share accepting the first i. "
    "Draft prefill = its prefill before the first token (TTFT over the baseline's) + after it (a cache "
    "copy, catch-up chunks: draft_ms of plain steps), per trial; e2e wins from = the output length from "
    "which the variant's e2e beats the baseline's (that prefill against what each token saves)."
)


def break_even_table(results: Sequence[Any]) -> Table:
    """One row per speculative variant × workload: its draft lengths, acceptance against the
    break-even, costs, predicted and measured speed-ups, the best fixed length."""
    rows = []
    for b in results:
        fit = b.verify_fit
        verify = f"{fmt(fit[0], 2)} {'−' if fit[1] < 0 else '+'} {fmt(abs(fit[1]), 2)}·k" if fit else "–"
        unit = "–"
        if b.target_step_ms is not None:
            unit = f"{fmt(b.target_step_ms, 1)} ({'plain' if b.unit == 'plain steps' else 'baseline'})"
        best = f"{b.best_k} ({times(b.best_speedup)})" if b.best_k is not None else "–"
        prefill = "–"
        if b.ttft_extra_ms is not None:
            prefill = f"{fmt(max(b.ttft_extra_ms, 0.0), 0)} + {fmt(b.prefill_after_ms or 0.0, 0)}"
        wins = "–" if b.ttft_extra_ms is None else "never" if b.wins_from is None else f"{b.wins_from} tok"
        rows.append(
            [
                b.variant,
                b.workload,
                f"{b.drafted_steps} + {b.plain_steps}",
                fmt(b.mean_draft_length, 1),
                pct(b.acceptance),
                pct(b.needed),
                fmt(b.draft_cost_per_token, 2),
                verify,
                fmt(b.overhead, 2),
                unit,
                times(b.predicted_speedup),
                ratio(b.measured_speedup) or "–",
                best,
                prefill,
                wins,
            ]
        )
    headers = ["variant", "workload", "steps+plain", "mean k", "accepted", "needed"]
    headers += ["draft/tok", "verify(k)", "other", "T1 ms", "predicted", "measured", "best k"]
    headers += ["draft prefill ms", "e2e wins from"]
    return headers, rows


def draft_length_table(results: Sequence[Any], min_steps: int = 1) -> Table:
    """Per variant × workload × draft length (lengths with at least ``min_steps`` steps): the
    acceptance there and at that position, the costs, the break-even and what that length predicts."""
    rows = []
    for b in results:
        positions = {p.position: p for p in b.positions}
        for x in b.lengths:
            if x.k == 0 or x.steps < min_steps:
                continue
            at = positions.get(x.k)
            rows.append(
                [
                    b.variant,
                    b.workload,
                    str(x.k),
                    str(x.steps),
                    pct(at.rate) if at is not None else "–",
                    pct(x.acceptance),
                    pct(x.break_even),
                    fmt(x.tokens_per_step, 2),
                    fmt(x.draft_cost, 2),
                    fmt(x.verify_cost, 2),
                    times(x.speedup),
                ]
            )
    headers = ["variant", "workload", "k", "steps", "at position k", "accepted", "needed"]
    return [*headers, "tokens/step", "D(k)", "V(k)", "predicted"], rows
