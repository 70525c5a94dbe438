"""What each chart shows — series, labels, units — as plain data, without Qt.

The chart module (:mod:`workbench.gui.charts`) draws these objects with pyqtgraph, for the GUI and for
headless export alike, so the GUI never draws a chart differently from an exported file. Keeping the
shaping here means the CSV of every chart and the tests of its numbers need no Qt, and the viewer-only
install (no ``gui`` extra) can still export the data behind each chart.

Every chart has a ``key`` (the file stem on export), a ``title``, the ``variants`` it shows (in run
order, which fixes their colours) and ``rows()``: its data in long format, one dict per plotted value,
which is exactly what its CSV holds.
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

from .analysis import bootstrap_median
from .phases import fit_line

__all__ = [
    "OKABE_ITO",
    "AcceptanceChart",
    "Axis",
    "Chart",
    "HeadlineBar",
    "HeadlineChart",
    "HeadlineGroup",
    "MemoryChart",
    "RooflineChart",
    "SpeedupChart",
    "SweepChart",
    "SweepSeries",
    "TimelineChart",
    "acceptance_chart",
    "headline_chart",
    "lighten",
    "memory_chart",
    "roofline_chart",
    "run_charts",
    "speedup_chart",
    "sweep_charts",
    "timeline_charts",
    "variant_colours",
]

#: Okabe & Ito's colour-blind-safe palette, ordered for white backgrounds: blue first (the baseline
#: usually runs first), yellow late (weak on white), black last.
OKABE_ITO: tuple[str, ...] = (
    "#0072B2",  # blue
    "#E69F00",  # orange
    "#009E73",  # bluish green
    "#D55E00",  # vermillion
    "#CC79A7",  # reddish purple
    "#56B4E9",  # sky blue
    "#F0E442",  # yellow
    "#000000",  # black
)


def variant_colours(variants: Iterable[str]) -> dict[str, str]:
    """One colour per variant, by position in run order: the same variant gets the same colour in
    every chart of a run (and in the report's tables). Past eight variants the palette repeats."""
    return {name: OKABE_ITO[i % len(OKABE_ITO)] for i, name in enumerate(dict.fromkeys(variants))}


def lighten(colour: str, amount: float = 0.55) -> str:
    """``colour`` (``#rrggbb``) mixed with white: the prefill shade of a variant's colour."""
    r, g, b = (int(colour[i : i + 2], 16) for i in (1, 3, 5))
    r, g, b = (round(c + (255 - c) * amount) for c in (r, g, b))
    return f"#{r:02x}{g:02x}{b:02x}"


@dataclass(frozen=True)
class Axis:
    label: str
    unit: str = ""

    @property
    def text(self) -> str:
        return f"{self.label} ({self.unit})" if self.unit else self.label


@dataclass
class Chart:
    """Base of every chart's data. Subclasses set ``key`` and implement ``rows``."""

    key: ClassVar[str] = ""
    title: str = ""
    variants: tuple[str, ...] = ()
    notes: list[str] = field(default_factory=list)  # caption lines under the chart

    def rows(self) -> list[dict[str, Any]]:
        raise NotImplementedError

    @property
    def name(self) -> str:
        """File stem on export (``headline``, ``timeline-chat``...)."""
        return self.key

    @property
    def colours(self) -> dict[str, str]:
        return variant_colours(self.variants)


# -- (i) the headline: where the time goes, per variant × workload -----------------------------------


@dataclass(frozen=True)
class HeadlineBar:
    variant: str
    prefill_ms: float  # median TTFT
    decode_ms: float  # median of e2e − TTFT (everything after the first token)
    n: int  # measured trials

    @property
    def total_ms(self) -> float:
        return self.prefill_ms + self.decode_ms

    @property
    def prefill_share(self) -> float:
        return self.prefill_ms / self.total_ms if self.total_ms > 0 else 0.0


@dataclass(frozen=True)
class HeadlineGroup:
    workload: str
    bars: tuple[HeadlineBar, ...]
    label: str = ""  # e.g. "decode-heavy: prefill 12 % of e2e" (the phase classification)


@dataclass
class HeadlineChart(Chart):
    """Horizontal stacked bars: prefill (TTFT) and decode time per variant, grouped by workload, one
    shared time axis. The prefill segment is a light shade of the variant's colour, decode the full one."""

    key: ClassVar[str] = "headline"
    groups: tuple[HeadlineGroup, ...] = ()
    x_axis: Axis = Axis("time per request, median", "ms")

    def rows(self) -> list[dict[str, Any]]:
        return [
            {
                "workload": g.workload,
                "variant": b.variant,
                "prefill_ms": b.prefill_ms,
                "decode_ms": b.decode_ms,
                "total_ms": b.total_ms,
                "prefill_share": b.prefill_share,
                "n": b.n,
                "phase": g.label,
            }
            for g in self.groups
            for b in g.bars
        ]


def headline_chart(summaries: Sequence[Any], labels: dict[str, str] | None = None) -> HeadlineChart:
    """From :func:`workbench.analysis.summarize` output; ``labels`` maps a workload to its phase text."""
    variants: dict[str, None] = {}
    groups: dict[str, list[HeadlineBar]] = {}
    for s in summaries:
        variants.setdefault(s.variant)
        prefill, decode = s.metrics["ttft_ms"].value, s.metrics["decode_phase_ms"].value
        if prefill is None or decode is None:
            continue
        groups.setdefault(s.workload, []).append(HeadlineBar(s.variant, prefill, decode, s.n_ok))
    return HeadlineChart(
        title="Where the time goes: prefill (TTFT) vs decode",
        variants=tuple(variants),
        groups=tuple(
            HeadlineGroup(workload, tuple(bars), (labels or {}).get(workload, ""))
            for workload, bars in groups.items()
        ),
        notes=["Light: prefill (time to first token). Dark: decode (first token to the end). Medians."],
    )


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]+", "-", text).strip("-") or "x"


# -- (ii) token timeline ---------------------------------------------------------------------------------


@dataclass
class TimelineChart(Chart):
    """Cumulative tokens vs time for one prompt, one line per variant: prefill is the flat start, a
    speculative step is a jump of several tokens."""

    key: ClassVar[str] = "timeline"
    workload: str = ""
    prompt_id: str = ""
    series: tuple[Any, ...] = ()  # workbench.analysis.Timeline, one per variant
    x_axis: Axis = Axis("time since the request", "ms")
    y_axis: Axis = Axis("tokens generated", "tokens")

    @property
    def name(self) -> str:
        return f"timeline-{_slug(self.workload)}"

    def rows(self) -> list[dict[str, Any]]:
        return [
            {
                "variant": s.variant,
                "workload": s.workload,
                "prompt_id": s.prompt_id,
                "step": i,
                "t_ms": t,
                "tokens": n,
            }
            for s in self.series
            for i, (t, n) in enumerate(zip(s.t_ms, s.tokens, strict=True))
        ]


def timeline_charts(analysis: Any) -> list[TimelineChart]:
    charts = []
    variants = tuple(analysis.variant_names)
    for workload in dict.fromkeys(t.workload for t in analysis.timelines):
        series = tuple(t for t in analysis.timelines if t.workload == workload)
        first = series[0]
        tokens_in = f", {first.input_tokens:,} input tokens" if first.input_tokens else ""
        charts.append(
            TimelineChart(
                title=f"Tokens over time — {workload} (prompt {first.prompt_id}{tokens_in})",
                variants=variants,
                workload=workload,
                prompt_id=first.prompt_id,
                series=series,
                notes=[
                    "Flat start: prefill (until the first token). Steps of several tokens: speculative decoding."
                ],
            )
        )
    return charts


# -- (iii) length sweeps -------------------------------------------------------------------------------


@dataclass(frozen=True)
class SweepSeries:
    variant: str
    x: tuple[float, ...]
    y: tuple[float, ...]  # medians
    lo: tuple[float | None, ...]  # bootstrap 95 % CI
    hi: tuple[float | None, ...]
    slope: float | None  # least-squares fit over every trial
    intercept: float | None


@dataclass
class SweepChart(Chart):
    """A metric against a length with CI bands and a fitted line per variant."""

    key: ClassVar[str] = "sweep"
    kind: str = "ttft"  # ttft | decode
    series: tuple[SweepSeries, ...] = ()
    source: str = ""  # the workload the points come from ("all workloads" when no sweep was run)
    x_axis: Axis = Axis("input length", "tokens")
    y_axis: Axis = Axis("TTFT", "ms")
    slope_unit: str = "ms per input token"

    @property
    def name(self) -> str:
        return "ttft-vs-input" if self.kind == "ttft" else "decode-vs-output"

    def rows(self) -> list[dict[str, Any]]:
        return [
            {
                "variant": s.variant,
                "x": x,
                "median": y,
                "ci_lo": lo,
                "ci_hi": hi,
                "fit_slope": s.slope,
                "fit_intercept": s.intercept,
                "x_label": self.x_axis.text,
                "y_label": self.y_axis.text,
                "source": self.source,
            }
            for s in self.series
            for x, y, lo, hi in zip(s.x, s.y, s.lo, s.hi, strict=True)
        ]


def _sweep(trials: Sequence[dict[str, Any]], x_key: str, y_key: str) -> list[SweepSeries]:
    by_variant: dict[str, dict[float, list[tuple[float, Any]]]] = defaultdict(lambda: defaultdict(list))
    for t in trials:
        x, y = t.get(x_key), t.get(y_key)
        if t["status"] == "ok" and x is not None and y is not None:
            by_variant[t["variant"]][float(x)].append((float(y), t.get("prompt_id")))
    out = []
    for variant, points in by_variant.items():
        if len(points) < 2:
            continue
        xs = sorted(points)
        estimates = [bootstrap_median([v for v, _ in points[x]]) for x in xs]
        slope, intercept = fit_line([x for x in xs for _ in points[x]], [v for x in xs for v, _ in points[x]])
        out.append(
            SweepSeries(
                variant,
                tuple(xs),
                tuple(float(e.value) for e in estimates),  # type: ignore[arg-type]
                tuple(e.lo for e in estimates),
                tuple(e.hi for e in estimates),
                slope,
                intercept,
            )
        )
    return out


def sweep_charts(analysis: Any) -> list[SweepChart]:
    """TTFT vs input length (from ``sweep-input`` when it ran, else every workload's prompts) and decode
    tok/s vs output length (from ``sweep-output``, else every trial)."""
    charts = []
    variants = tuple(analysis.variant_names)
    for kind, sweep, x_key, y_key in (
        ("ttft", "sweep-input", "input_tokens", "ttft_ms"),
        ("decode", "sweep-output", "output_tokens", "decode_tokens_per_s"),
    ):
        trials = [t for t in analysis.trials if t["workload"] == sweep]
        source = sweep
        if not trials:
            trials, source = analysis.trials, "all workloads"
        series = _sweep(trials, x_key, y_key)
        if not series:
            continue
        if kind == "ttft":
            chart = SweepChart(
                title=f"TTFT vs input length ({source})",
                variants=variants,
                kind=kind,
                series=tuple(series),
                source=source,
                notes=[
                    "Medians with bootstrap 95 % CI bands; dashed: least-squares fit (slope in the legend)."
                ],
            )
        else:
            chart = SweepChart(
                title=f"Decode speed vs output length ({source})",
                variants=variants,
                kind=kind,
                series=tuple(series),
                source=source,
                x_axis=Axis("output length", "tokens"),
                y_axis=Axis("decode speed", "tok/s"),
                slope_unit="tok/s per output token",
                notes=[
                    "Medians with bootstrap 95 % CI bands; dashed: least-squares fit (slope in the legend)."
                ],
            )
        charts.append(chart)
    return charts


# -- (iii b) a swept variant parameter (spec ``sweep``) -----------------------------------------------


@dataclass
class ParameterSweepChart(SweepChart):
    """A metric against the value of a swept variant parameter (``sweep = {num_draft_tokens = [...]}``):
    one line per workload, medians with CI bands and a fitted line."""

    key: ClassVar[str] = "parameter-sweep"
    param: str = ""
    base: str = ""  # the variant name the sweep expanded from

    @property
    def name(self) -> str:
        return f"{self.kind}-vs-{_slug(self.param)}-{_slug(self.base)}"


def parameter_sweep_charts(analysis: Any) -> list[ParameterSweepChart]:
    """For every spec sweep over a numeric parameter: decode tok/s and TTFT against its value."""
    import json

    groups: dict[tuple[str, str], dict[str, float]] = defaultdict(dict)  # (base, param) -> variant -> value
    for v in analysis.variants:
        param = v.get("sweep_param")
        if not param:
            continue
        try:
            value = json.loads(v.get("sweep_value") or "null")
        except ValueError:
            continue
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            continue  # a dtype or model sweep has no axis: the other charts compare those variants
        base = v["name"].removesuffix(f" {param}={v.get('sweep_value')}").strip()
        groups[(base, param)][v["name"]] = float(value)
    charts = []
    for (base, param), values in groups.items():
        if len(values) < 2:
            continue
        for kind, y_key, axis in (
            ("decode", "decode_tokens_per_s", Axis("decode speed", "tok/s")),
            ("ttft", "ttft_ms", Axis("TTFT", "ms")),
        ):
            rows = [
                {**t, "variant": t["workload"], "_x": values[t["variant"]]}
                for t in analysis.trials
                if t["variant"] in values
            ]
            series = _sweep(rows, "_x", y_key)
            if not series:
                continue
            workloads = tuple(s.variant for s in series)
            charts.append(
                ParameterSweepChart(
                    title=f"{axis.label[:1].upper()}{axis.label[1:]} vs {param} ({base})",
                    variants=workloads,
                    kind=kind,
                    series=tuple(series),
                    source=base,
                    x_axis=Axis(param, ""),
                    y_axis=axis,
                    slope_unit=f"{axis.unit} per unit of {param}",
                    param=param,
                    base=base,
                    notes=[
                        "One line per workload: medians with bootstrap 95 % CI bands; dashed: least-squares fit."
                    ],
                )
            )
    return charts


# -- (iv) speed-ups -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class SpeedupPoint:
    workload: str
    variant: str
    metric: str  # e2e | ttft | decode
    value: float
    lo: float | None
    hi: float | None

    @property
    def significant(self) -> bool:
        return self.lo is not None and self.hi is not None and not (self.lo <= 1.0 <= self.hi)


@dataclass
class SpeedupChart(Chart):
    """e2e speed-up vs the baseline per variant × workload, with bootstrap 95 % CI whiskers."""

    key: ClassVar[str] = "speedup"
    baseline: str = ""
    points: tuple[SpeedupPoint, ...] = ()
    x_axis: Axis = Axis("e2e speed-up vs the baseline (> 1 is faster)", "×")

    def rows(self) -> list[dict[str, Any]]:
        return [
            {
                "workload": p.workload,
                "variant": p.variant,
                "metric": p.metric,
                "speedup": p.value,
                "ci_lo": p.lo,
                "ci_hi": p.hi,
                "significant": p.significant,
                "baseline": self.baseline,
            }
            for p in self.points
        ]

    @property
    def workloads(self) -> list[str]:
        return list(dict.fromkeys(p.workload for p in self.points))


def speedup_chart(analysis: Any) -> SpeedupChart | None:
    points = []
    for s in analysis.summaries:
        for metric, est in (("e2e", s.speedup_e2e), ("ttft", s.speedup_ttft), ("decode", s.speedup_decode)):
            if est is not None and est.value is not None:
                points.append(SpeedupPoint(s.workload, s.variant, metric, est.value, est.lo, est.hi))
    if not any(p.metric == "e2e" for p in points):
        return None
    return SpeedupChart(
        title=f"Speed-up vs {analysis.baseline}",
        variants=tuple(analysis.variant_names),
        baseline=analysis.baseline or "",
        points=tuple(points),
        notes=[
            "Ratio of medians. Whiskers: bootstrap 95 % CI. Filled: the CI excludes 1 (significant); hollow: not."
        ],
    )


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


# -- (vi) memory and roofline ----------------------------------------------------------------------------


@dataclass(frozen=True)
class MemoryBar:
    variant: str
    peak_mb: float
    weights_mb: float | None
    kind: str  # cuda_allocator_peak | process_rss_peak


@dataclass
class MemoryChart(Chart):
    key: ClassVar[str] = "memory"
    bars: tuple[MemoryBar, ...] = ()
    x_axis: Axis = Axis("memory", "MB")

    def rows(self) -> list[dict[str, Any]]:
        return [
            {
                "variant": b.variant,
                "peak_memory_mb": b.peak_mb,
                "weights_mb": b.weights_mb,
                "memory_kind": b.kind,
            }
            for b in self.bars
        ]


_MEMORY_KIND = {
    "cuda_allocator_peak": "CUDA allocator peak",
    "process_rss_peak": "worker process RSS peak (includes the Python/torch runtime)",
}


def memory_chart(analysis: Any) -> MemoryChart | None:
    variants = {v["name"]: v for v in analysis.variants}
    peaks: dict[str, float] = {}
    for s in analysis.summaries:
        peak = s.metrics["peak_memory_mb"].value
        if peak is not None:
            peaks[s.variant] = max(peaks.get(s.variant, 0.0), peak)
    if not peaks:
        return None
    bars = tuple(
        MemoryBar(
            name,
            peaks[name],
            variants.get(name, {}).get("weights_mb") or None,
            variants.get(name, {}).get("memory_kind") or "",
        )
        for name in analysis.variant_names
        if name in peaks
    )
    kinds = sorted({_MEMORY_KIND.get(b.kind, b.kind) for b in bars if b.kind})
    return MemoryChart(
        title="Peak memory and weights",
        variants=tuple(analysis.variant_names),
        bars=bars,
        notes=[
            "Light: weights. Full bar: peak memory during a trial (the highest median over workloads).",
            *(f"Peak = {kind}." for kind in kinds),
        ],
    )


@dataclass
class RooflineChart(Chart):
    """Measured decode tok/s per variant × workload against the memory-bandwidth limit."""

    key: ClassVar[str] = "roofline"
    rows_: tuple[Any, ...] = ()  # workbench.roofline.RooflineRow
    bandwidth_gbs: float | None = None
    x_axis: Axis = Axis("decode speed", "tok/s")

    def rows(self) -> list[dict[str, Any]]:
        return [r.to_dict() for r in self.rows_]

    @property
    def workloads(self) -> list[str]:
        return list(dict.fromkeys(r.workload for r in self.rows_))


def roofline_chart(analysis: Any) -> RooflineChart | None:
    rows = tuple(r for r in analysis.roofline if r.limit_tokens_per_s and r.decode_tokens_per_s)
    if not rows:
        return None
    bandwidths = sorted({round(r.bandwidth_gbs, 1) for r in rows if r.bandwidth_gbs})
    bw = ", ".join(f"{b:g}" for b in bandwidths)
    return RooflineChart(
        title="Decode speed vs the memory-bandwidth limit",
        variants=tuple(analysis.variant_names),
        rows_=rows,
        bandwidth_gbs=bandwidths[0] if bandwidths else None,
        notes=[
            f"Dashed outline: the limit = memory bandwidth ({bw} GB/s, recorded with the run) ÷ bytes read per "
            "token (weights + KV cache at the median length). Speculative variants can pass it (several "
            "tokens per weight read); others only when the copy benchmark understates what the model's reads "
            "reach."
        ],
    )


def run_charts(analysis: Any) -> list[Chart]:
    """Every chart a run has data for, in report order."""
    labels = {p.workload: p.headline for p in analysis.phases}
    charts: list[Chart | None] = [headline_chart(analysis.summaries, labels)]
    charts.append(speedup_chart(analysis))
    charts.extend(timeline_charts(analysis))
    charts.extend(sweep_charts(analysis))
    charts.extend(parameter_sweep_charts(analysis))
    charts.append(acceptance_chart(analysis))
    charts.append(memory_chart(analysis))
    charts.append(roofline_chart(analysis))
    return [c for c in charts if c is not None and (not isinstance(c, HeadlineChart) or c.groups)]
