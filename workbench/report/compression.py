"""Prompt compression's break-even in words (the facts: :mod:`workbench.analysis.compression`)."""

from __future__ import annotations

from collections.abc import Sequence

from workbench.analysis.compression import CompressionBreakEven
from workbench.formatting import (
    ci_suffix,
    fixed,
    interval,
    ms_text,
    percent,
    significant,
    span,
    times,
    tokens,
)

__all__ = ["compression_line", "compression_lines"]


def _kept(b: CompressionBreakEven) -> str:
    """What it kept, and where the parts it may not drop held it above the budget: which parts and
    how many tokens."""
    asked = f", asked {percent(b.requested_rate)}" if b.requested_rate is not None else ""
    text = f"kept {percent(b.achieved_rate)} of {tokens(b.input_tokens)} prompt tokens{asked}"
    if not b.over_budget:
        return text
    parts = sorted(b.protected_parts.items(), key=lambda kv: -kv[1])
    held = ", ".join(f"{name} {tokens(n)}" for name, n in parts if n)
    budget = f" above the {tokens(b.budget_tokens)}-token budget" if b.budget_tokens is not None else ""
    return (
        f"{text} — on {b.over_budget} of {b.trials} trials the parts it may not drop alone were{budget} "
        f"(median tokens: {held})"
    )


def _break_even(b: CompressionBreakEven) -> str:
    if b.break_even is None:
        return f"no break-even length can be computed: {b.no_break_even}" if b.no_break_even else ""
    fitted = (
        f" (lines fitted over {span(b.lengths[0], b.lengths[1], tokens)}-token prompts)" if b.lengths else ""
    )
    ci = interval(b.break_even_lo, b.break_even_hi, tokens)
    if not ci and b.break_even_fitted is not None:
        fitted += (
            f"; no interval: only {percent(b.break_even_fitted)} of the resampled pairs gave both lines a "
            "rising slope (too noisy)"
        )
    n = b.break_even_tokens
    if n is not None and b.lengths and not b.lengths[0] <= n <= b.lengths[1]:
        fitted += "; outside the measured lengths: an extrapolation"
    if b.break_even == "above":
        return f"break-even: it pays on prompts above {tokens(n or 0)} tokens{ci}{fitted}"
    if b.break_even == "below":
        return f"break-even: it pays only on prompts below {tokens(n or 0)} tokens{ci}{fitted}"
    if b.break_even == "any":
        return (
            "break-even: it pays at any length — the fitted saving exceeds the compression time at every "
            f"prompt length{ci and ' (the length above which it pays, 95% interval:' + ci + ')'}{fitted}"
        )
    return (
        "break-even: it pays at no length — the fitted compression time exceeds the saving at every "
        f"prompt length{ci and ' (crossing' + ci + ')'}{fitted}"
    )


def compression_line(b: CompressionBreakEven) -> str:
    """e.g. ``compressed on rag: kept 50% of 1,043 prompt tokens, asked 50%; compressing took 812 ms
    (0.778 ms per prompt token) and saved 624 ms of prefill [590–660] (12 pairs, measured) — it costs
    1.30 [1.21–1.40] of the prefill it saves here: it pays only with a compressor at least 1.30x
    cheaper, or when the compressed prompt is reused; break-even: it pays on prompts above 2,150
    tokens [1,700–3,900] (lines fitted over 1,046–1,246-token prompts)``."""
    line = (
        f"{b.variant} on {b.workload}: {_kept(b)}; compressing took {ms_text(b.compress_ms)} "
        f"({significant(b.compress_ms_per_token)} ms per prompt token)"
    )
    if b.saved_ms is None:
        why = f": {b.no_break_even}" if b.no_break_even else ""
        return line + f" — no paired reference trials to weigh it against{why}"
    saved = (
        f" and saved {ms_text(b.saved_ms)} of prefill{ci_suffix(b.saved_ms_lo, b.saved_ms_hi, 0, grouped=True)} "
        f"(mean of {b.pairs} pairs, measured)"
    )
    line += saved
    end = _break_even(b)
    end = f"; {end}" if end else ""
    if b.cost_fraction is None:
        return line + " — it saved no prefill time here: it does not pay" + end
    cost = fixed(b.cost_fraction, 2)
    cost += ci_suffix(b.cost_fraction_lo, b.cost_fraction_hi)  # an end where a resample saved nothing: ∞
    if b.cost_fraction >= 1:
        return line + (
            f" — it costs {cost} of the prefill it saves here: it pays only with a compressor at least "
            f"{times(b.cost_fraction)} cheaper, or when the compressed prompt is reused{end}"
        )
    return line + f" — it costs {cost} of the prefill it saves: it pays at these prompt lengths{end}"


def compression_lines(results: Sequence[CompressionBreakEven]) -> list[str]:
    return [compression_line(b) for b in results]
