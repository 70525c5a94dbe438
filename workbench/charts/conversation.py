"""A conversation workload's chart: TTFT against the turn, one line per variant with CI bands — the
baseline's climbing as the history it prefills grows, a prefix cache's flatter where it reuses the
previous turn's prompt — and under it the KV cache each variant holds at the end of the turn (the
tokens it kept of the prompt plus its answer, times the model's KV bytes per token): what the history
costs in memory, and what trimming or compressing the context saves of it."""

from __future__ import annotations

import operator
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

from workbench.charts.base import Axis, file_stem
from workbench.charts.sweeps import SweepChart, _sweep
from workbench.store import TrialRecord

if TYPE_CHECKING:
    from workbench.analysis.run import RunAnalysis

__all__ = ["ConversationChart", "KvSeries", "conversation_charts", "kv_series"]

#: bytes in a MiB (the KV cache's axis)
MIB = 2**20


@dataclass(frozen=True)
class KvSeries:
    """One variant's KV cache at the end of each turn (MiB): the median over its trials of the prompt
    tokens it kept (``input_tokens - trimmed_tokens``) plus the answer's, times its KV bytes per token."""

    variant: str
    x: tuple[float, ...]
    mib: tuple[float, ...]


@dataclass
class ConversationChart(SweepChart):
    """TTFT (median, bootstrap 95 % CI) at each turn of a conversation workload, per variant; under it
    the KV cache per variant (:class:`KvSeries`; empty when no variant recorded its KV bytes)."""

    key: ClassVar[str] = "conversation"
    x_axis: Axis = Axis("turn")
    slope_unit: str = "ms per turn"
    kv_cache: tuple[KvSeries, ...] = ()
    kv_axis: Axis = Axis("KV cache", "MiB")

    @property
    def name(self) -> str:
        return f"ttft-vs-turn-{file_stem(self.source)}"

    def rows(self) -> list[dict[str, Any]]:
        kv = {(s.variant, x): mib for s in self.kv_cache for x, mib in zip(s.x, s.mib, strict=True)}
        return [{**row, "kv_cache_mib": kv.get((row["variant"], row["x"]))} for row in super().rows()]


def kv_series(trials: Sequence[TrialRecord], kv_bytes: Mapping[str, float | None]) -> list[KvSeries]:
    """Per variant with KV bytes per token recorded (``kv_bytes``: variant → bytes), its KV cache at
    the end of each turn (ok trials with token counts)."""
    cells: dict[str, dict[float, list[float]]] = {}
    for t in trials:
        per_token = kv_bytes.get(t.variant)
        if t.status != "ok" or t.turn is None or not per_token or t.input_tokens is None:
            continue
        kept = t.input_tokens - (t.trimmed_tokens or 0) + (t.output_tokens or 0)
        cells.setdefault(t.variant, {}).setdefault(float(t.turn), []).append(kept * per_token / MIB)
    return [
        KvSeries(variant, tuple(sorted(turns)), tuple(statistics.median(turns[x]) for x in sorted(turns)))
        for variant, turns in cells.items()
    ]


def conversation_charts(analysis: RunAnalysis) -> list[ConversationChart]:
    """One chart per conversation workload (its trials carry a ``turn``) with two turns or more."""
    charts = []
    workloads = dict.fromkeys(t.workload for t in analysis.trials if t.turn is not None)
    kv_bytes = {v.name: v.kv_bytes_per_token for v in analysis.variants}
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
                kv_cache=tuple(kv_series(trials, kv_bytes)),
                notes=[
                    "Each turn resends the history (the baseline's own answers, the same for every "
                    "variant). Medians over conversations and repetitions with bootstrap 95 % CI bands; "
                    "dashed: least-squares fit (slope in the legend). Below: the KV cache each variant "
                    "holds at the end of the turn (the prompt tokens it kept plus its answer, times its "
                    "KV bytes per token)."
                ],
            )
        )
    return charts
