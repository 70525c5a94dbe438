"""Prompt compression's break-even in words (the facts: :mod:`workbench.analysis.compression`)."""

from __future__ import annotations

from collections.abc import Sequence

from workbench.analysis.compression import CompressionBreakEven
from workbench.formatting import fixed, ms_text, percent, significant, tokens

__all__ = ["compression_line", "compression_lines"]


def compression_line(b: CompressionBreakEven) -> str:
    """e.g. ``compressed on rag: kept 50% of 1,043 prompt tokens, asked 50%; compressing took 812 ms
    (0.778 ms per prompt token) — it costs 1.30 of the prefill it saves here: it pays only with a
    compressor at least 1.30x cheaper, or when the compressed prompt is reused``."""
    asked = f", asked {percent(b.requested_rate)}" if b.requested_rate is not None else ""
    line = (
        f"{b.variant} on {b.workload}: kept {percent(b.achieved_rate)} of {tokens(b.input_tokens)} prompt "
        f"tokens{asked}; compressing took {ms_text(b.compress_ms)} "
        f"({significant(b.compress_ms_per_token)} ms per prompt token)"
    )
    if b.cost_fraction is None:
        return line + " — no reference prefill to weigh it against"
    cost = fixed(b.cost_fraction, 2)
    if b.cost_fraction >= 1:
        return line + (
            f" — it costs {cost} of the prefill it saves here: it pays only with a compressor at least "
            f"{cost}x cheaper, or when the compressed prompt is reused"
        )
    above = f"above {tokens(b.break_even_tokens)} tokens" if b.break_even_tokens else "of any length"
    return line + f" — it costs {cost} of the prefill it saves: it pays on prompts {above} at this ratio"


def compression_lines(results: Sequence[CompressionBreakEven]) -> list[str]:
    return [compression_line(b) for b in results]
