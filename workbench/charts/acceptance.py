"""Speculative decoding: how many draft tokens each verify step accepted."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar

from workbench.charts.base import Axis, Chart

__all__ = ["AcceptanceChart", "acceptance_chart"]


# -- (v) accepted length --------------------------------------------------------------------------------


@dataclass
class AcceptanceChart(Chart):
    """Share of verify steps that yielded 1, 2, … tokens (accepted draft tokens + the target's own)."""

    key: ClassVar[str] = "accepted-length"
    counts: dict[str, dict[int, int]] = field(default_factory=dict)  # variant → {tokens per step: steps}
    x_axis: Axis = Axis("tokens per verify step", "tokens")
    y_axis: Axis = Axis("share of verify steps", "%")

    def shares(self, variant: str) -> dict[int, float]:
        counts = self.counts.get(variant, {})
        total = sum(counts.values())
        return {k: 100 * v / total for k, v in sorted(counts.items())} if total else {}

    def mean_length(self, variant: str) -> float | None:
        counts = self.counts.get(variant, {})
        total = sum(counts.values())
        return sum(k * v for k, v in counts.items()) / total if total else None

    def rows(self) -> list[dict[str, Any]]:
        return [
            {"variant": v, "tokens_per_step": k, "steps": n, "share_pct": self.shares(v)[k]}
            for v, counts in self.counts.items()
            for k, n in sorted(counts.items())
        ]


def acceptance_chart(analysis: Any) -> AcceptanceChart | None:
    if not analysis.accepted_lengths:
        return None
    counts = {
        v: {accepted + 1: n for accepted, n in sorted(by.items())}
        for v, by in analysis.accepted_lengths.items()
    }
    order = [v for v in analysis.variant_names if v in counts]
    return AcceptanceChart(
        title="Accepted length per verify step (speculative variants)",
        variants=tuple(analysis.variant_names),
        counts={v: counts[v] for v in order},
        notes=[
            "Tokens per verify step = accepted draft tokens + the target's own token; the legend's mean is "
            "the mean accepted length."
        ],
    )
