"""Sweeps: TTFT against input length, decode tok/s against output length, and a metric against a
swept strategy parameter.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar, TypedDict

from workbench.analysis.stats import bootstrap_median, fit_line
from workbench.charts.base import Axis, Chart, file_stem
from workbench.charts.registry import ChartSpec, Tab, register_chart
from workbench.core.metrics import METRIC_TABLE
from workbench.store import TrialRecord

if TYPE_CHECKING:
    from workbench.analysis.lengths import LengthSeries
    from workbench.analysis.run import RunAnalysis


__all__ = [
    "ParameterSweepChart",
    "SweepChart",
    "SweepRow",
    "SweepSeries",
    "parameter_sweep_charts",
    "sweep_charts",
]


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
    #: the workload the points come from, when the chart has several (one line per workload × variant)
    workload: str | None = None

    @property
    def label(self) -> str:
        return f"{self.variant} · {self.workload}" if self.workload else self.variant


class SweepRow(TypedDict):
    """One point of a sweep chart's data (a row of its CSV)."""

    variant: str
    x: float
    median: float
    ci_lo: float | None
    ci_hi: float | None
    fit_slope: float | None
    fit_intercept: float | None
    workload: str
    x_label: str
    y_label: str
    source: str


@dataclass
class SweepChart(Chart):
    """A metric against a length with CI bands and a fitted line per variant."""

    key: ClassVar[str] = "sweep"
    kind: str = "ttft"  # ttft | decode
    series: tuple[SweepSeries, ...] = ()
    source: str = ""  # the workload the points come from ("all workloads" when no sweep was run)
    x_axis: Axis = Axis("input length", "tokens")
    y_axis: Axis = Axis(METRIC_TABLE["ttft_ms"].label, METRIC_TABLE["ttft_ms"].unit)
    slope_unit: str = "ms per input token"

    @property
    def name(self) -> str:
        return "ttft-vs-input" if self.kind == "ttft" else "decode-vs-output"

    def rows(self) -> Sequence[SweepRow]:
        return [
            {
                "variant": s.variant,
                "x": x,
                "median": y,
                "ci_lo": lo,
                "ci_hi": hi,
                "fit_slope": s.slope,
                "fit_intercept": s.intercept,
                "workload": s.workload or self.source,
                "x_label": self.x_axis.text,
                "y_label": self.y_axis.text,
                "source": self.source,
            }
            for s in self.series
            for x, y, lo, hi in zip(s.x, s.y, s.lo, s.hi, strict=True)
        ]


def _sweep(
    trials: Sequence[TrialRecord],
    x_of: Callable[[TrialRecord], float | None],
    y_key: str,
    series_of: Callable[[TrialRecord], str] = lambda t: t.variant,
) -> list[SweepSeries]:
    """One series per ``series_of`` (the variant, by default): the median of ``y_key`` at each x."""
    by_variant: dict[str, dict[float, list[tuple[float, str]]]] = defaultdict(lambda: defaultdict(list))
    for t in trials:
        x, y = x_of(t), getattr(t, y_key)
        if t.status == "ok" and x is not None and y is not None:
            by_variant[series_of(t)][float(x)].append((float(y), t.prompt_id))
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


def _value_of(values: dict[str, float]) -> Callable[[TrialRecord], float]:
    """A trial's x on a parameter sweep: its variant's value of the swept parameter."""
    return lambda t: values[t.variant]


def _from_lengths(series: LengthSeries, several: bool) -> SweepSeries:
    return SweepSeries(
        series.variant,
        series.x,
        tuple(float(e.value) for e in series.y),  # type: ignore[arg-type]
        tuple(e.lo for e in series.y),
        tuple(e.hi for e in series.y),
        series.slope,
        series.intercept,
        series.workload if several else None,
    )


def sweep_charts(analysis: RunAnalysis) -> list[SweepChart]:
    """TTFT vs input length (from ``sweep-input`` when it ran, else every workload) and decode tok/s vs
    output length (from ``sweep-output``, else every workload), from the analysis's length series
    (:attr:`~workbench.analysis.run.RunAnalysis.lengths`): one line per workload × variant, every
    variant that ran the workload (a single length: a point, no fit)."""
    charts = []
    variants = tuple(analysis.variant_names)
    for kind, sweep in (("ttft", "sweep-input"), ("decode", "sweep-output")):
        own = [s for s in analysis.lengths if s.kind == kind]
        chosen = [s for s in own if s.workload == sweep]
        source = sweep
        if not chosen:
            chosen, source = own, "all workloads"
        if not any(len(s.x) >= 2 for s in chosen):
            continue
        several = len({s.workload for s in chosen}) > 1
        series = tuple(_from_lengths(s, several) for s in chosen)
        note = (
            "One line per workload × variant (a workload at a single length: a point). " if several else ""
        ) + "Medians with bootstrap 95 % CI bands; dashed: least-squares fit (slope in the legend)."
        if kind == "ttft":
            chart = SweepChart(
                title=f"TTFT vs input length ({source})",
                variants=variants,
                kind=kind,
                series=series,
                source=source,
                notes=[note],
            )
        else:
            chart = SweepChart(
                title=f"Decode speed vs output length ({source})",
                variants=variants,
                kind=kind,
                series=series,
                source=source,
                x_axis=Axis("output length", "tokens"),
                y_axis=Axis("decode speed", "tok/s"),
                slope_unit="tok/s per output token",
                notes=[note],
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
        return f"{self.kind}-vs-{file_stem(self.param)}-{file_stem(self.base)}"


def parameter_sweep_charts(analysis: RunAnalysis) -> list[ParameterSweepChart]:
    """For every spec sweep over a numeric parameter: decode tok/s and TTFT against its value."""
    import json

    groups: dict[tuple[str, str], dict[str, float]] = defaultdict(dict)  # (base, param) -> variant -> value
    for v in analysis.variants:
        param = v.sweep_param
        if not param:
            continue
        try:
            value = json.loads(v.sweep_value or "null")
        except ValueError:
            continue
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            continue  # a dtype or model sweep has no axis: the other charts compare those variants
        base = v.name.removesuffix(f" {param}={v.sweep_value}").strip()
        groups[(base, param)][v.name] = float(value)
    charts = []
    for (base, param), values in groups.items():
        if len(values) < 2:
            continue
        for kind, y_key, axis in (
            ("decode", "decode_tokens_per_s", Axis("decode speed", "tok/s")),
            ("ttft", "ttft_ms", Axis(METRIC_TABLE["ttft_ms"].label, METRIC_TABLE["ttft_ms"].unit)),
        ):
            # one series per workload, along the swept parameter's value of each variant
            rows = [t for t in analysis.trials if t.variant in values]
            series = _sweep(rows, _value_of(values), y_key, series_of=lambda t: t.workload)
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


# -- in the list of chart kinds (workbench.charts.registry) ---------------------------------------------

SWEEPS_TAB = Tab(
    "Sweeps",
    30,
    "No sweep data: add the sweep-input or sweep-output workloads.",
    one_run_only="the sweep charts (TTFT vs input, decode vs output length)",
)

register_chart(ChartSpec(SweepChart, SWEEPS_TAB, 60, run=sweep_charts))
register_chart(ChartSpec(ParameterSweepChart, SWEEPS_TAB, 80, run=parameter_sweep_charts))
