"""Where the time goes, in words: the advice of one workload's measured phase (which levers fit the
phase that dominates, citing the measured numbers, which levers of the run helped and by how much, and
why the measurement disagrees with the prediction made before the run). The figures are
:class:`~workbench.analysis.phases.WorkloadPhase`'s; the words are written here, for the CLI, the
documents, the GUI and the JSON's ``advice`` lists alike.
"""

from __future__ import annotations

from collections.abc import Sequence

from workbench.analysis.phases import CostModel, LeverResult, Prediction, WorkloadPhase
from workbench.analysis.targets import TurnHold
from workbench.analysis.turns import TurnSeries
from workbench.formatting import ci_suffix, fmt, num, percent, times

__all__ = [
    "LEVER_ADVICE",
    "advice",
    "conversation_lines",
    "conversation_text",
    "lever_text",
    "prediction_text",
    "turn_hold_lines",
    "turn_hold_text",
]

#: the levers of each phase, named once (the phases section and each workload's advice)
LEVER_ADVICE = {
    "prefill": "reuse the KV cache of shared prefixes (prefix caching), compress the prompt, trim the context",
    "decode": "batch requests (more tokens per weight read), speculative decoding (several tokens per target "
    "pass), weight quantization (fewer bytes read per token)",
}


def prediction_text(prediction: Prediction) -> str:
    return (
        f"predicted {prediction.label} (prefill ~{percent(prediction.prefill_share)} of e2e) from "
        f"~{fmt(prediction.input_tokens, 0)} input and ~{fmt(prediction.output_tokens, 0)} output tokens"
    )


def lever_text(lever: LeverResult) -> str:
    """``int8 (weight quantization): e2e 1.71x [1.43–2.05], TTFT 0.77x (slower), decode 4.65x``."""
    est = lever.speedup_e2e
    if est is None or est.value is None:
        return f"{lever.variant} ({lever.lever}): no comparable trials"
    ci = ci_suffix(est.lo, est.hi)  # the verdict says "no interval" once
    parts = []
    for name, e in (("TTFT", lever.speedup_ttft), ("decode", lever.speedup_decode)):
        if e is not None and e.value is not None:  # a speed-up below 1 is a phase that got slower
            parts.append(f"{name} {times(e.value)}" + (" (slower)" if e.value < 0.95 else ""))
    split = "".join(f", {part}" for part in parts)
    return f"{lever.variant} ({lever.lever}): e2e {times(est.value)}{ci}{split}"


def advice(phase: WorkloadPhase) -> list[str]:
    """Plain-words advice for one workload, citing the measured numbers."""
    lines = []
    tokens_in = f" at {fmt(phase.input_tokens, 0)} input tokens" if phase.input_tokens else ""
    tokens_out = f" at {fmt(phase.output_tokens, 0)} output tokens" if phase.output_tokens else ""
    slope = (
        f"; TTFT grows {num(phase.ttft_ms_per_input_token, whole=False)} ms per input token"
        if phase.ttft_ms_per_input_token
        else ""
    )
    per_token = (
        f"; {num(phase.decode_ms_per_token, whole=False)} ms per output token (median TPOT, "
        f"{num(1000 / phase.decode_ms_per_token, whole=False)} tok/s)"
        if phase.decode_ms_per_token
        else ""
    )
    prefill_pct, decode_pct = percent(phase.prefill_share), percent(1 - phase.prefill_share)
    if phase.label == "prefill-heavy":
        lines.append(f"Prefill is {prefill_pct} of e2e{tokens_in}{slope}.")
        lines.append(f"Levers for prefill: {LEVER_ADVICE['prefill']}.")
    elif phase.label == "decode-heavy":
        lines.append(f"Decode is {decode_pct} of e2e{tokens_out}{per_token}.")
        lines.append(f"Levers for decode: {LEVER_ADVICE['decode']}.")
    else:
        larger = "decode" if phase.prefill_share < 0.5 else "prefill"
        other = "decode" if larger == "prefill" else "prefill"
        lines.append(
            f"Balanced: prefill {prefill_pct}{tokens_in}, decode {decode_pct}{tokens_out}; both matter, "
            f"{larger} a little more."
        )
        lines.append(f"Start with {larger} levers: {LEVER_ADVICE[larger]}; then {LEVER_ADVICE[other]}.")
    helped = [lever for lever in phase.levers if lever.verdict == "faster"]
    hurt = [lever for lever in phase.levers if lever.verdict == "slower"]
    flat = [lever for lever in phase.levers if lever.verdict == "no clear change"]
    if helped:
        best = max(helped, key=_speedup)
        lines.append("In this run, helped: " + "; ".join(lever_text(x) for x in _by_speedup(helped)) + ".")
        if best.targets not in (phase.label.split("-")[0], "both") and phase.label != "balanced":
            lines.append(
                f"{best.variant} targets {best.targets}, yet it helped this {phase.label} workload: "
                "check which phase it sped up (TTFT vs decode speed-up above)."
            )
    if hurt:
        lines.append("Slower here: " + "; ".join(lever_text(x) for x in _by_speedup(hurt)) + ".")
    if flat:
        lines.append("No significant change: " + "; ".join(lever_text(x) for x in flat) + ".")
    if phase.disagrees and phase.prediction is not None:
        lines.append(_disagreement(phase, phase.prediction, phase.measured))
    return lines


def _speedup(lever: LeverResult) -> float:
    return (lever.speedup_e2e.value if lever.speedup_e2e is not None else None) or 0.0


def _by_speedup(levers: Sequence[LeverResult]) -> list[LeverResult]:
    return sorted(levers, key=lambda lever: -_speedup(lever))


def _disagreement(phase: WorkloadPhase, prediction: Prediction, measured: CostModel | None) -> str:
    """Why the measured label differs from the one predicted before the run: shorter outputs than the
    budget, and/or a decode/prefill cost ratio unlike the default's."""
    reasons = []
    if phase.output_tokens and phase.max_new_tokens and phase.output_tokens < 0.67 * phase.max_new_tokens:
        reasons.append(
            f"outputs stopped at a median {fmt(phase.output_tokens, 0)} of {fmt(phase.max_new_tokens, 0)} "
            "allowed tokens"
        )
    cost = ""
    if measured is not None:
        expected, actual = prediction.model.decode_to_prefill, measured.decode_to_prefill
        cost = (
            f"a decode token costs as much as {num(actual, whole=False)} prompt tokens here (the default assumes "
            f"{num(expected, whole=False)})"
        )
        if actual > 1.5 * expected or actual < expected / 1.5:
            reasons.append(cost)
    if not reasons:
        reasons.append("the share is close to a threshold" + (f"; {cost}" if cost else ""))
        if measured is not None and measured.prefill_fixed_ms > 0:
            reasons.append(
                f"TTFT has a fixed part of {num(measured.prefill_fixed_ms, whole=False)} ms that the default ignores"
            )
    why = "; ".join(reasons)
    return (
        f"Finding: {prediction_text(prediction)}, but measured {phase.label} "
        f"(prefill {percent(phase.prefill_share)}). Why: {why}."
    )


def conversation_text(series: TurnSeries) -> str | None:
    """Where a conversation crosses from decode-heavy to prefill-heavy on the series' variant
    (:attr:`~workbench.analysis.turns.TurnSeries.crossing`: the first turn whose median TTFT reaches its
    median decode time), or that it never does over the turns run."""
    turns = series.points
    if len(turns) < 2:
        return None
    first, last = turns[0], turns[-1]
    name = f"{series.workload} ({series.variant})"
    history = f" ({fmt(last.history_tokens, 0)} tokens of history)" if last.history_tokens is not None else ""
    climb = (
        f"TTFT {num(first.ttft.value)} ms at turn {first.turn}, {num(last.ttft.value)} ms at turn "
        f"{last.turn}{history}"
    )
    crossing = series.crossing
    if crossing is None:
        ttft, decode = last.ttft.value or 0.0, last.decode_ms or 0.0
        share = (
            f" (TTFT {percent(ttft / (ttft + decode))} of e2e at the last turn)" if ttft + decode > 0 else ""
        )
        return f"{name}: {climb}; it stays decode-heavy through turn {last.turn}{share}: decode levers first."
    if crossing == first.turn:
        return f"{name}: {climb}; prefill-heavy from the first turn: prefill levers first."
    point = next(p for p in turns if p.turn == crossing)
    return (
        f"{name}: {climb}; it crosses from decode-heavy to prefill-heavy at turn {crossing}, where the "
        f"TTFT ({num(point.ttft.value)} ms) reaches the decode ({num(point.decode_ms)} ms): from there, "
        "prefill levers (prefix caching) matter most."
    )


def conversation_lines(series: Sequence[TurnSeries], variant: str | None) -> list[str]:
    """:func:`conversation_text` of each conversation workload on ``variant`` (the reference)."""
    return [text for s in series if s.variant == variant and (text := conversation_text(s)) is not None]


def turn_hold_text(holds: Sequence[TurnHold]) -> str | None:
    """One conversation workload's :class:`TurnHold` facts in a line: for how many turns each variant
    keeps the TTFT target, e.g. ``conversation, target TTFT ≤ 1,000 ms at p90: baseline for turns 1–5
    of 8 (turn 6: 1,105 ms); cache for all 8 turns — cache holds it longest.``"""
    if not holds:
        return None
    first = holds[0]
    parts = []
    for h in holds:
        if h.holds_all:
            parts.append(f"{h.variant} for all {h.turns} turns")
        elif h.held == 0:
            parts.append(
                f"{h.variant} misses it from turn 1" + (f" ({num(h.miss_ms)} ms)" if h.miss_ms else "")
            )
        else:
            span = "turn 1" if h.held == 1 else f"turns 1–{h.held}"
            miss = f" (turn {h.held + 1}: {num(h.miss_ms)} ms)" if h.miss_ms is not None else ""
            parts.append(f"{h.variant} for {span} of {h.turns}{miss}")
    line = (
        f"{first.workload}, target TTFT ≤ {num(first.target_ms)} ms at p{fmt(first.percentile, 0)}: "
        + "; ".join(parts)
    )
    best = max(h.held for h in holds)
    leaders = [h.variant for h in holds if h.held == best]
    if len(holds) > 1 and len(leaders) < len(holds):
        line += f" — {' and '.join(leaders)} {'holds' if len(leaders) == 1 else 'hold'} it longest"
    elif len(holds) > 1 and all(h.holds_all for h in holds):
        line += " — every variant holds it over the turns run"
    return line + "."


def turn_hold_lines(holds: Sequence[TurnHold]) -> list[str]:
    """:func:`turn_hold_text` of each conversation workload, in the order of ``holds``."""
    by_workload: dict[str, list[TurnHold]] = {}
    for hold in holds:
        by_workload.setdefault(hold.workload, []).append(hold)
    return [text for group in by_workload.values() if (text := turn_hold_text(group)) is not None]
