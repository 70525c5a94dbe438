"""A conversation workload's chart: TTFT against the turn, one line per variant with CI bands — the
baseline's climbing as the history it prefills grows, a prefix cache's flatter where it reuses the
previous turn's prompt — and under it the KV cache each variant's session held at the end of the turn
(as its strategy reported it: a prefix cache's kept copies of earlier prompts included): what the
history costs in memory. The turns' history tokens label the x axis.

Every figure is the analysis's (:class:`~workbench.analysis.turns.TurnSeries`, built from the trials
the statistics keep); this module only lays them out. Two runs compared: :func:`compare_conversation_charts`
overlays each run's lines (before: dashed, after: solid).
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar

from workbench.charts.base import Axis, file_stem
from workbench.charts.registry import ChartSpec, Tab, register_chart
from workbench.charts.sweeps import SweepChart, SweepRow, SweepSeries
from workbench.formatting import count, tokens

if TYPE_CHECKING:
    from workbench.analysis.run import RunAnalysis
    from workbench.analysis.turns import TurnSeries
    from workbench.charts.views import TwoRunsView

__all__ = [
    "ConversationChart",
    "ConversationRow",
    "KvSeries",
    "compare_conversation_charts",
    "conversation_charts",
    "kv_series",
]


class ConversationRow(SweepRow):
    """One turn of a variant (a row of the chart's CSV): the sweep's point, the history's tokens and the
    KV cache held (None: not reported)."""

    history_tokens: float | None
    kv_held_mib: float | None
    kv_held_tokens: float | None


#: bytes in a MiB (the KV cache's axis)
MIB = 2**20


@dataclass(frozen=True)
class KvSeries:
    """One variant's KV cache held at the end of each turn: the median over its kept trials of the
    tokens and the bytes its session held (:attr:`~workbench.analysis.turns.TurnPoint.kv_tokens`)."""

    variant: str
    x: tuple[float, ...]
    mib: tuple[float, ...]
    tokens: tuple[float, ...]


@dataclass
class ConversationChart(SweepChart):
    """TTFT (median, bootstrap 95 % CI) at each turn of a conversation workload, per variant; under it
    the KV cache each variant held (:class:`KvSeries`; empty when no variant's runtime reported it)."""

    key: ClassVar[str] = "conversation"
    x_axis: Axis = Axis("turn")
    slope_unit: str = "ms per turn"
    kv_cache: tuple[KvSeries, ...] = ()
    kv_axis: Axis = Axis("KV held", "MiB")
    #: turn → the history's prompt tokens before the turn's own message (median; the same anchored
    #: history for every variant)
    history: tuple[tuple[int, float | None], ...] = ()
    #: variants whose runtime cannot tell the KV it holds: no line, never a zero
    kv_unknown: tuple[str, ...] = ()
    #: two runs compared: the series of the earlier run (drawn dashed under the later run's)
    before: tuple[str, ...] = ()

    @property
    def name(self) -> str:
        return f"ttft-vs-turn-{file_stem(self.source)}"

    @property
    def turn_labels(self) -> list[tuple[float, str]]:
        """The x axis's ticks: each turn, with its history's tokens under it when known."""
        turns = sorted({x for s in self.series for x in s.x})
        history = dict(self.history)
        return [
            (x, count(x) if history.get(int(x)) is None else f"{count(x)}\n{tokens(history[int(x)])} tok")
            for x in turns
        ]

    def rows(self) -> list[ConversationRow]:
        kv = {
            (s.variant, x): (mib, tok)
            for s in self.kv_cache
            for x, mib, tok in zip(s.x, s.mib, s.tokens, strict=True)
        }
        history = dict(self.history)
        return [
            {
                **row,
                "history_tokens": history.get(int(row["x"])),
                "kv_held_mib": kv.get((row["variant"], row["x"]), (None, None))[0],
                "kv_held_tokens": kv.get((row["variant"], row["x"]), (None, None))[1],
            }
            for row in super().rows()
        ]


def _sweep_series(series: TurnSeries, name: str, *, fit: bool = True) -> SweepSeries:
    return SweepSeries(
        name,
        tuple(float(p.turn) for p in series.points),
        tuple(float(p.ttft.value or 0.0) for p in series.points),
        tuple(p.ttft.lo for p in series.points),
        tuple(p.ttft.hi for p in series.points),
        series.slope if fit else None,
        series.intercept if fit else None,
    )


def kv_series(series: TurnSeries, name: str | None = None) -> KvSeries | None:
    """The KV held at each turn of ``series`` (MiB), or None when its runtime reported none."""
    points = [p for p in series.points if p.kv_bytes is not None and p.kv_tokens is not None]
    if not points:
        return None
    return KvSeries(
        name or series.variant,
        tuple(float(p.turn) for p in points),
        tuple(float(p.kv_bytes or 0.0) / MIB for p in points),
        tuple(float(p.kv_tokens or 0.0) for p in points),
    )


def _history(series: Sequence[TurnSeries]) -> tuple[tuple[int, float | None], ...]:
    turns: dict[int, list[float]] = {}
    for s in series:
        for p in s.points:
            if p.history_tokens is not None:
                turns.setdefault(p.turn, []).append(p.history_tokens)
    return tuple((turn, float(statistics.median(values))) for turn, values in sorted(turns.items()))


_NOTE = (
    "Each turn resends the history (the baseline's own answers, the same for every variant; its tokens "
    "under each turn). Medians over conversations and repetitions — the trials the tables use — with "
    "bootstrap 95 % CI bands; dashed: least-squares fit (slope in the legend). Below: the KV cache each "
    "variant's session held when the turn's answer was done, as its strategy reported it (a prefix "
    "cache's kept copies of earlier prompts included)."
)


def _unknown_note(names: Sequence[str], every: bool) -> str:
    """Why a variant has no KV line: never drawn as a zero."""
    if every:
        return (
            "No KV figures: no variant recorded the KV cache it held (a run recorded before the workbench "
            "recorded it, or runtimes that cannot tell: llama.cpp, ONNX Runtime, an endpoint) — not a zero."
        )
    return (
        f"No KV figure for {', '.join(names)}: its runtime or strategy does not report the KV cache it "
        "holds — not a zero."
    )


def _chart(
    workload: str,
    series: Sequence[tuple[str, TurnSeries]],
    variants: Sequence[str],
    *,
    title: str,
    before: Sequence[str] = (),
    extra_note: str | None = None,
) -> ConversationChart | None:
    lines = [_sweep_series(s, name, fit=not before) for name, s in series if s.points]
    if not lines or max(len(s.x) for s in lines) < 2:
        return None
    kv = [k for name, s in series if (k := kv_series(s, name)) is not None]
    unknown = tuple(name for name, s in series if not s.kv_reported)
    notes = [_NOTE if not before else _NOTE.replace("; dashed: least-squares fit (slope in the legend)", "")]
    if unknown:
        notes.append(_unknown_note(unknown, every=len(unknown) == len(series)))
    if extra_note:
        notes.append(extra_note)
    return ConversationChart(
        title=title,
        variants=tuple(variants),
        kind="ttft",
        series=tuple(lines),
        source=workload,
        kv_cache=tuple(kv),
        history=(history := _history([s for _, s in series])),
        x_axis=Axis("turn — under it, the history's prompt tokens") if history else Axis("turn"),
        kv_unknown=unknown,
        before=tuple(before),
        notes=notes,
    )


def conversation_charts(analysis: RunAnalysis) -> list[ConversationChart]:
    """One chart per conversation workload with two turns or more, from the analysis's per-turn
    figures (:attr:`~workbench.analysis.run.RunAnalysis.conversations`)."""
    charts = []
    for workload in dict.fromkeys(s.workload for s in analysis.conversations):
        series = [(s.variant, s) for s in analysis.conversations if s.workload == workload]
        chart = _chart(workload, series, analysis.variant_names, title=f"TTFT turn by turn ({workload})")
        if chart is not None:
            charts.append(chart)
    return charts


def compare_conversation_charts(a: RunAnalysis, b: RunAnalysis) -> list[ConversationChart]:
    """Two runs compared: per conversation workload both ran, every variant's turns in each run on one
    chart, named ``RUN:variant`` (one colour per variant name; the earlier run dashed)."""
    charts = []
    workloads = [
        w
        for w in dict.fromkeys(s.workload for s in a.conversations)
        if any(s.workload == w for s in b.conversations)
    ]
    for workload in workloads:
        series = [(f"{a.run.id}:{s.variant}", s) for s in a.conversations if s.workload == workload]
        series += [(f"{b.run.id}:{s.variant}", s) for s in b.conversations if s.workload == workload]
        names = [name for name, _ in series]
        # each run's variants in its own order, tagged: a variant keeps its colour of the single run
        variants = [f"{a.run.id}:{v}" for v in a.variant_names] + [f"{b.run.id}:{v}" for v in b.variant_names]
        chart = _chart(
            workload,
            series,
            variants,
            title=f"TTFT turn by turn ({workload}): run {a.run.id} → run {b.run.id}",
            before=names[: sum(s.workload == workload for s in a.conversations)],
            extra_note=f"Dashed with hollow markers: run {a.run.id} (before); solid: run {b.run.id} (after). "
            "Each run's own trials and disturbed-trial rule.",
        )
        if chart is not None:
            charts.append(chart)
    return charts


# -- in the list of chart kinds (workbench.charts.registry) ---------------------------------------------

CONVERSATION_TAB = Tab(
    "Conversation",
    40,
    'No conversation workload in this run: add one (kind = "conversation", or the built-in '
    '"conversation"; docs/spec.md) to see TTFT and the KV cache turn by turn.',
    one_run_only="a conversation's turns (when both runs ran the same conversation workload: overlaid)",
)


def _of_two_runs(view: TwoRunsView) -> list[ConversationChart]:
    # a conversation workload both runs ran: each run's turns, before (dashed) and after, on one chart
    return compare_conversation_charts(*view.alone)


register_chart(
    ChartSpec(ConversationChart, CONVERSATION_TAB, 70, run=conversation_charts, two_runs=_of_two_runs)
)
