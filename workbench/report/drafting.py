"""Does drafting pay? The break-even tables of the speculative variants (analysis.drafting.BreakEven
each), shared by `workbench show`, the Markdown/HTML report and the GUI's Acceptance tab, and the
advice in words: where drafting paid, what would do better where it did not, from which output length
it wins end to end."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from workbench.analysis.drafting import BreakEven
from workbench.formatting import count, duration, fixed, fmt, percent, ratio, spaced_percent, times
from workbench.report.model import TableRows

__all__ = ["DRAFTING_NOTE", "break_even_table", "draft_length_table", "drafting_advice", "hint_text"]


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


def break_even_table(results: Sequence[BreakEven]) -> TableRows:
    """One row per speculative variant × workload: its draft lengths, acceptance against the
    break-even, costs, predicted and measured speed-ups, the best fixed length."""
    rows = []
    for b in results:
        fit = b.verify_fit
        verify = f"{fixed(fit[0], 2)} {'−' if fit[1] < 0 else '+'} {fixed(abs(fit[1]), 2)}·k" if fit else "–"
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
                spaced_percent(b.acceptance),
                spaced_percent(b.needed),
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


def draft_length_table(results: Sequence[BreakEven], min_steps: int = 1) -> TableRows:
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
                    spaced_percent(at.rate) if at is not None else "–",
                    spaced_percent(x.acceptance),
                    spaced_percent(x.break_even),
                    fmt(x.tokens_per_step, 2),
                    fmt(x.draft_cost, 2),
                    fmt(x.verify_cost, 2),
                    times(x.speedup),
                ]
            )
    headers = ["variant", "workload", "k", "steps", "at position k", "accepted", "needed"]
    return [*headers, "tokens/step", "D(k)", "V(k)", "predicted"], rows


# -- advice ----------------------------------------------------------------------------------------------


def _clause(b: BreakEven) -> str:
    """``code (2.80x decode; acceptance 72 % ≥ 31 % needed)``."""
    est = b.measured_speedup
    speed = (
        f"{times(est.value)} decode"
        if est is not None and est.value is not None
        else (f"{times(b.predicted_speedup)} predicted")
    )
    if b.acceptance is None or b.needed is None:
        return f"{b.workload} ({speed})"
    sign = "≥" if b.acceptance >= b.needed else "<"
    if b.needed > 1:
        return f"{b.workload} ({speed}: acceptance {spaced_percent(b.acceptance)}, no acceptance could pay its costs)"
    return f"{b.workload} ({speed}: acceptance {spaced_percent(b.acceptance)} {sign} {spaced_percent(b.needed)} needed)"


def _and(items: Iterable[str]) -> str:
    words = list(items)
    return ", ".join(words[:-1]) + " and " + words[-1] if len(words) > 1 else "".join(words)


def drafting_advice(results: Sequence[BreakEven]) -> list[str]:
    """Per speculative variant, where drafting paid and where not (measured, with the acceptance
    against the break-even), then what would do better where it lost, and predictions that missed;
    last, per variant, the output length from which it wins end to end (its draft's prefill counted)."""
    lines = []
    ends: list[str] = []
    for variant in dict.fromkeys(b.variant for b in results):
        mine = [b for b in results if b.variant == variant]
        paid = [b for b in mine if b.verdict == "pays"]
        lost = [b for b in mine if b.verdict == "loses"]
        unclear = [b for b in mine if b.verdict == "unclear"]
        parts = []
        if paid:
            parts.append("drafting paid on " + _and(_clause(b) for b in paid))
        if lost:
            parts.append(("not on " if paid else "drafting did not pay on ") + _and(_clause(b) for b in lost))
        if unclear:
            parts.append("no clear change on " + _and(_clause(b) for b in unclear))
        if parts:
            lines.append(f"{variant}: " + "; ".join(parts) + ".")
        e2e = [clause for b in mine if (clause := _e2e_clause(b))]
        if e2e:
            ends.append(f"{variant} end to end: " + "; ".join(e2e) + ".")
        for b in mine:
            found = hint_text(b)
            if found:
                lines.append(f"{variant} on {b.workload}: {found}")
    return lines + ends


def _e2e_clause(b: BreakEven) -> str | None:
    """``summarise: wins from 12 output tokens (its outputs: 48; the draft's prefill 2.10 s before the
    first token, 0.10 s after it)``; or why it never does."""
    if b.ttft_extra_ms is None:
        return None
    out = f"its outputs: {count(b.output_tokens)}" if b.output_tokens is not None else "its outputs: ?"
    before, after = b.ttft_extra_ms, b.prefill_after_ms or 0.0
    spent = (
        f"the draft's prefill {duration(max(before, 0.0) / 1e3, 2)} before the first token, "
        f"{duration(after / 1e3, 2)} after it"
    )
    if b.drafted_steps == 0 and b.prefill_steps:
        return (
            f"{b.workload}: the draft read its prompt on {b.prefill_steps} plain steps, then was given up "
            f"(plain decoding: the rest of its prefill would have cost more than drafting could save in "
            f"the tokens left; {out}, {spent})"
        )
    if b.wins_from is None:
        return f"{b.workload}: never wins e2e (a token saves nothing; {out}, {spent})"
    won = b.output_tokens is not None and b.output_tokens >= b.wins_from
    return (
        f"{b.workload}: {'wins' if won else 'would win'} from {b.wins_from} output tokens on ({out}; {spent})"
    )


def hint_text(b: BreakEven) -> str | None:
    """:attr:`~workbench.analysis.drafting.BreakEven.hint` in words: what would do better where
    drafting did not pay, or why the prediction missed."""
    found = b.hint
    if found is None:
        return None
    plain = (
        f" (it drafted nothing on {percent(found.plain_share)} of its steps already)"
        if found.plain_share is not None
        else ""
    )
    if found.kind == "shorter-drafts":
        return (
            f"shorter drafts would pay: at k = {b.best_k} the acceptance by position predicts "
            f"{times(b.best_speedup)} (its drafts averaged {fixed(b.mean_draft_length or 0.0, 1)} tokens; "
            "later positions are accepted less)."
        )
    if found.kind == "draft-cost":
        return (
            f"no draft length pays here at this cost: a drafted token costs "
            f"{fixed(b.draft_cost_per_token or 0.0, 2)} target steps to draft, a one-token draft "
            f"{spaced_percent(found.needed_first)} acceptance to break even; a cheaper draft would pay, else decode "
            f"plainly (k = 0){plain}."
        )
    if found.kind == "low-acceptance":
        why = (
            f" ({spaced_percent(found.needed_first)} needed at k = 1)"
            if found.needed_first is not None
            else ""
        )
        return (
            f"no draft length pays here: even the first draft token is accepted only {spaced_percent(found.first_rate)}"
            f"{why}; decode plainly (k = 0) on prompts like these{plain}."
        )
    reasons = []
    if found.overhead is not None:
        reasons.append(
            f"the loop spends {fixed(found.overhead, 2)} target steps per step outside draft and verify"
        )
    if found.step_ratio is not None:
        reasons.append(f"its plain step takes {fixed(found.step_ratio, 2)} times as long as the baseline's")
    because = f": {'; '.join(reasons)}" if reasons else ""
    est = b.measured_speedup
    measured = est.value if est is not None else None
    return f"predicted {times(b.predicted_speedup)} from acceptance and costs, measured {times(measured)}{because}."
