"""Speculative decoding: how many draft tokens each verify step accepted, and the acceptance at each
draft position (from the break-even analysis, :mod:`workbench.analysis.drafting`)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, ClassVar

from workbench.charts.base import Axis, Chart, Row
from workbench.charts.registry import ChartSpec, Tab, register_chart

if TYPE_CHECKING:
    from workbench.analysis.drafting import BreakEven
    from workbench.analysis.run import RunAnalysis


__all__ = [
    "AcceptanceChart",
    "DraftPositionChart",
    "PositionSeries",
    "acceptance_chart",
    "draft_position_chart",
]


# -- (v) accepted length --------------------------------------------------------------------------------


@dataclass
class AcceptanceChart(Chart):
    """Share of verify steps that yielded 1, 2, … tokens (accepted draft tokens + the target's own)."""

    key: ClassVar[str] = "accepted-length"
    counts: dict[str, dict[int, int]] = field(default_factory=dict)  # variant → {tokens per step: steps}
    x_axis: Axis = Axis("tokens per verify step")
    y_axis: Axis = Axis("share of verify steps", "%")

    def shares(self, variant: str) -> dict[int, float]:
        counts = self.counts.get(variant, {})
        total = sum(counts.values())
        return {k: 100 * v / total for k, v in sorted(counts.items())} if total else {}

    def mean_length(self, variant: str) -> float | None:
        counts = self.counts.get(variant, {})
        total = sum(counts.values())
        return sum(k * v for k, v in counts.items()) / total if total else None

    def rows(self) -> list[Row]:
        return [
            {"variant": v, "tokens_per_step": k, "steps": n, "share_pct": self.shares(v)[k]}
            for v, counts in self.counts.items()
            for k, n in sorted(counts.items())
        ]


def acceptance_chart(analysis: RunAnalysis) -> AcceptanceChart | None:
    if not analysis.accepted_lengths:
        return None
    counts = {
        v: {accepted + 1: n for accepted, n in sorted(by.items())}
        for v, by in analysis.accepted_lengths.items()
    }
    order = [v for v in analysis.variant_names if v in counts]
    return AcceptanceChart(
        title="Accepted length per verify step (speculative variants, all workloads pooled)",
        variants=tuple(analysis.variant_names),
        counts={v: counts[v] for v in order},
        notes=[
            "Tokens per verify step = accepted draft tokens + the target's own token; the legend's mean is "
            "the mean accepted length. Each variant's steps on every workload pooled: the acceptance per "
            "workload is in the next chart and the table above."
        ],
    )


# -- (v b) acceptance by draft position -------------------------------------------------------------------


@dataclass(frozen=True)
class PositionSeries:
    """One speculative variant on one workload: the acceptance at each draft position, and the
    acceptance its mix of draft lengths needed to break even (None without timings)."""

    variant: str
    workload: str
    positions: tuple[int, ...]
    rates: tuple[float, ...]  # % of the steps drafting >= i tokens that accepted the first i
    reached: tuple[int, ...]  # those steps
    acceptance: float | None  # accepted / proposed, %
    needed: float | None  # break-even acceptance for its mix of lengths, %
    #: the variant's measured speed-ups on the workload (decode, end to end): drafting can pay on decode
    #: and still lose end to end (a draft's prefill lengthens the TTFT)
    speedup_decode: float | None = None
    speedup_e2e: float | None = None


@dataclass
class DraftPositionChart(Chart):
    """Acceptance by draft position, per speculative variant × workload (docs/analysis.md "Does
    drafting pay?")."""

    key: ClassVar[str] = "draft-positions"
    series: tuple[PositionSeries, ...] = ()
    workloads: tuple[str, ...] = ()
    x_axis: Axis = Axis("draft position")
    y_axis: Axis = Axis("accepted at that position", "%")

    def rows(self) -> list[Row]:
        return [
            {
                "variant": s.variant,
                "workload": s.workload,
                "position": p,
                "accepted_pct": r,
                "steps_reaching": n,
                "acceptance_pct": s.acceptance,
                "needed_pct": s.needed,
                "speedup_decode": s.speedup_decode,
                "speedup_e2e": s.speedup_e2e,
            }
            for s in self.series
            for p, r, n in zip(s.positions, s.rates, s.reached, strict=True)
        ]


def draft_position_chart(analysis: RunAnalysis) -> DraftPositionChart | None:
    results = [b for b in analysis.break_even if b.positions]
    if not results:
        return None

    def share(value: float | None) -> float | None:
        return None if value is None else 100 * value

    summaries = {(s.variant, s.workload): s for s in analysis.summaries}

    def speedup(b: BreakEven, attr: str) -> float | None:
        est = getattr(summaries.get((b.variant, b.workload)), attr, None)
        return None if est is None else est.value

    return DraftPositionChart(
        title="Acceptance by draft position (speculative variants)",
        variants=tuple(analysis.variant_names),
        workloads=tuple(dict.fromkeys(b.workload for b in results)),
        series=tuple(
            PositionSeries(
                b.variant,
                b.workload,
                tuple(p.position for p in b.positions),
                tuple(100 * p.rate for p in b.positions),
                tuple(p.reached for p in b.positions),
                share(b.acceptance),
                share(b.needed),
                speedup(b, "speedup_decode"),
                speedup(b, "speedup_e2e"),
            )
            for b in results
        ),
        notes=[
            "Of the steps that drafted at least i tokens, the share that accepted the first i (a line per "
            "variant, a dash pattern and a marker per workload). Drafting pays when the acceptance over the drafted "
            "tokens beats the 'needed' of the legend: the break-even of the variant's measured draft and "
            "verify costs. That is decode only: the legend's e2e speed-up says whether the variant "
            "is faster for the whole request (a draft's own prefill lengthens the TTFT)."
        ],
    )


# -- in the list of chart kinds (workbench.charts.registry) ---------------------------------------------

ACCEPTANCE_TAB = Tab(
    "Acceptance",
    70,
    "No speculative variants (speculative, prompt-lookup) in this run.",
    one_run_only="drafting's acceptance and break-even",
)

register_chart(ChartSpec(DraftPositionChart, ACCEPTANCE_TAB, 90, run=draft_position_chart))
register_chart(ChartSpec(AcceptanceChart, ACCEPTANCE_TAB, 100, run=acceptance_chart))
