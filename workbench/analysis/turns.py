"""Conversation workloads turn by turn: the one place the per-turn figures are computed.

Per conversation workload × variant, a :class:`TurnSeries`: at each turn the TTFT of the trials the
statistics keep (the run's one disturbed-trial rule, :meth:`~workbench.analysis.paired.Disturbance.keeps`,
the same as the tables'), its median with a bootstrap 95 % CI and its percentiles, the median decode
time, the history's tokens, and the KV cache the variant's session held at the end of the turn (the
trial's ``kv_held_tokens`` / ``kv_held_bytes``, as its strategy reported them; None when its runtime
cannot tell). The conversation chart, the phases sentence, the turn-hold line, the GUI and ``show
--json`` all read these; none of them groups trials by turn itself.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from typing import cast

from workbench.analysis.stats import Estimate, bootstrap_median, fit_line, measured_percentile
from workbench.store.records import TrialRecord

__all__ = ["TurnPoint", "TurnSeries", "conversation_series"]


@dataclass(frozen=True)
class TurnPoint:
    """One turn of one variant on a conversation workload, over its conversations and repetitions."""

    turn: int
    ttfts: tuple[float, ...]  # the kept trials' TTFT (ms), sorted
    ttft: Estimate  # their median, bootstrap 95 % CI
    decode_ms: float | None  # median time after the first token
    history_tokens: float | None  # median prompt tokens before the turn's own message
    #: median KV the session held at the end of the turn (its working cache and every copy it keeps
    #: for later requests); None when no trial of the turn reported it (the runtime cannot tell)
    kv_tokens: float | None = None
    kv_bytes: float | None = None

    @property
    def n(self) -> int:
        return len(self.ttfts)

    def percentile(self, p: float) -> float:
        """The TTFT that ``p`` % of the turn's kept trials reach (inverted CDF, as the targets)."""
        return measured_percentile(self.ttfts, p)

    @property
    def p50(self) -> float:
        return self.percentile(50.0)

    @property
    def p90(self) -> float:
        return self.percentile(90.0)

    @property
    def prefill_heavy(self) -> bool:
        """The median TTFT reaches the median decode time."""
        return self.ttft.value is not None and self.ttft.value >= (self.decode_ms or 0.0)

    def to_dict(self) -> dict[str, object]:
        return {
            "turn": self.turn,
            "n": self.n,
            "ttft_ms": self.ttft.to_dict(),
            "ttft_p50_ms": self.p50,
            "ttft_p90_ms": self.p90,
            "decode_ms": self.decode_ms,
            "history_tokens": self.history_tokens,
            "kv_held_tokens": self.kv_tokens,
            "kv_held_bytes": self.kv_bytes,
        }


@dataclass(frozen=True)
class TurnSeries:
    """One variant's turns of one conversation workload, in order, with the least-squares line of TTFT
    against the turn over every kept trial."""

    workload: str
    variant: str
    points: tuple[TurnPoint, ...]
    slope: float | None  # ms per turn
    intercept: float | None

    @property
    def turns(self) -> tuple[int, ...]:
        return tuple(p.turn for p in self.points)

    @property
    def crossing(self) -> int | None:
        """The first turn whose median TTFT reaches its median decode time (prefill-heavy), or None."""
        return next((p.turn for p in self.points if p.prefill_heavy), None)

    @property
    def kv_reported(self) -> bool:
        """Whether the variant's runtime told the KV it holds (at any turn)."""
        return any(p.kv_tokens is not None for p in self.points)

    def to_dict(self) -> dict[str, object]:
        return {
            "workload": self.workload,
            "variant": self.variant,
            "crossing_turn": self.crossing,
            "fit_slope_ms_per_turn": self.slope,
            "fit_intercept_ms": self.intercept,
            "kv_reported": self.kv_reported,
            "turns": [p.to_dict() for p in self.points],
        }


def _median(values: Sequence[float | int | None]) -> float | None:
    present = [float(v) for v in values if v is not None]
    return float(statistics.median(present)) if present else None


def conversation_series(trials: Sequence[TrialRecord], variants: Sequence[str] = ()) -> list[TurnSeries]:
    """Per conversation workload (its trials carry a ``turn``), in the trials' order, and per variant
    that ran it (``variants``' order first): its turns from the measured, finished trials given with a
    TTFT. ``trials``: those the statistics keep (the run's disturbed-trial rule already applied)."""
    cells: dict[str, dict[str, dict[int, list[TrialRecord]]]] = {}
    for t in trials:
        if t.in_conversation and t.measured and t.ttft_ms is not None:
            turn = cast(int, t.turn)  # a conversation's trial carries its turn
            cells.setdefault(t.workload, {}).setdefault(t.variant, {}).setdefault(turn, []).append(t)
    out = []
    for workload, by_variant in cells.items():
        order = [v for v in variants if v in by_variant] + [v for v in by_variant if v not in variants]
        for variant in order:
            turns = by_variant[variant]
            points = []
            xs: list[float] = []
            ys: list[float] = []
            for turn, rows in sorted(turns.items()):
                ttfts = sorted(float(t.ttft_ms) for t in rows if t.ttft_ms is not None)
                xs += [float(turn)] * len(ttfts)
                ys += ttfts
                points.append(
                    TurnPoint(
                        turn=turn,
                        ttfts=tuple(ttfts),
                        ttft=bootstrap_median(ttfts),
                        decode_ms=_median([t.decode_ms for t in rows]),
                        history_tokens=_median([t.history_tokens for t in rows]),
                        kv_tokens=_median([t.kv_held_tokens for t in rows]),
                        kv_bytes=_median([t.kv_held_bytes for t in rows]),
                    )
                )
            slope, intercept = fit_line(xs, ys)
            out.append(TurnSeries(workload, variant, tuple(points), slope, intercept))
    return out
