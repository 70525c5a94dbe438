"""A metric against a length, per workload × variant: TTFT against the prompt's tokens, decode speed
against the answer's. The one place these series are computed (the sweep charts, the GUI and the export
read them), from the trials the statistics keep (the run's disturbed-trial rule).

One series per workload and variant — never one line through two workloads' points (a conversation's
turns and a report's prompt are not one population: a fit through both mixes their slopes) — and every
variant that ran the workload has one, even at a single length (a point, no fit).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from workbench.analysis.stats import Estimate, bootstrap_median, fit_line
from workbench.store.records import TrialRecord

__all__ = ["LENGTH_METRICS", "LengthSeries", "length_series"]

LengthKind = Literal["ttft", "decode"]

#: what each kind plots: (x: the trial's length column, y: the metric)
LENGTH_METRICS: dict[LengthKind, tuple[str, str]] = {
    "ttft": ("input_tokens", "ttft_ms"),
    "decode": ("output_tokens", "decode_tokens_per_s"),
}


@dataclass(frozen=True)
class LengthSeries:
    """One variant's ``kind`` metric on one workload at each length it ran: medians with bootstrap 95 %
    CIs, and the least-squares line over every kept trial (None at a single length)."""

    kind: LengthKind
    workload: str
    variant: str
    x: tuple[float, ...]
    y: tuple[Estimate, ...]
    slope: float | None
    intercept: float | None


def length_series(trials: Sequence[TrialRecord], variants: Sequence[str] = ()) -> list[LengthSeries]:
    """Per kind, workload (in the trials' order) and variant (``variants``' order first) that has
    measured, finished trials with both figures. ``trials``: those the statistics keep."""
    out = []
    for kind, (x_key, y_key) in LENGTH_METRICS.items():
        cells: dict[str, dict[str, dict[float, list[float]]]] = {}
        for t in trials:
            x, y = getattr(t, x_key), getattr(t, y_key)
            if t.measured and x is not None and y is not None:
                cells.setdefault(t.workload, {}).setdefault(t.variant, {}).setdefault(float(x), []).append(
                    float(y)
                )
        for workload, by_variant in cells.items():
            order = [v for v in variants if v in by_variant] + [v for v in by_variant if v not in variants]
            for variant in order:
                points = by_variant[variant]
                xs = sorted(points)
                slope, intercept = fit_line(
                    [x for x in xs for _ in points[x]], [v for x in xs for v in points[x]]
                )
                out.append(
                    LengthSeries(
                        kind,
                        workload,
                        variant,
                        tuple(xs),
                        tuple(bootstrap_median(points[x]) for x in xs),
                        slope,
                        intercept,
                    )
                )
    return out
