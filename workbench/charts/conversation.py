"""A conversation workload's chart: TTFT against the turn, one line per variant with CI bands — the
baseline's climbing as the history it prefills grows, a prefix cache's flatter where it reuses the
previous turn's prompt."""

from __future__ import annotations

import operator
from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar

from workbench.charts.base import Axis, file_stem
from workbench.charts.sweeps import SweepChart, _sweep

if TYPE_CHECKING:
    from workbench.analysis.run import RunAnalysis

__all__ = ["ConversationChart", "conversation_charts"]


@dataclass
class ConversationChart(SweepChart):
    """TTFT (median, bootstrap 95 % CI) at each turn of a conversation workload, per variant."""

    key: ClassVar[str] = "conversation"
    x_axis: Axis = Axis("turn")
    slope_unit: str = "ms per turn"

    @property
    def name(self) -> str:
        return f"ttft-vs-turn-{file_stem(self.source)}"


def conversation_charts(analysis: RunAnalysis) -> list[ConversationChart]:
    """One chart per conversation workload (its trials carry a ``turn``) with two turns or more."""
    charts = []
    workloads = dict.fromkeys(t.workload for t in analysis.trials if t.turn is not None)
    for workload in workloads:
        trials = [t for t in analysis.trials if t.workload == workload and t.turn is not None]
        series = _sweep(trials, operator.attrgetter("turn"), "ttft_ms")
        if not series:
            continue
        charts.append(
            ConversationChart(
                title=f"TTFT turn by turn ({workload})",
                variants=tuple(analysis.variant_names),
                kind="ttft",
                series=tuple(series),
                source=workload,
                notes=[
                    "Each turn resends the history (the baseline's own answers, the same for every "
                    "variant). Medians over conversations and repetitions with bootstrap 95 % CI bands; "
                    "dashed: least-squares fit (slope in the legend)."
                ],
            )
        )
    return charts
