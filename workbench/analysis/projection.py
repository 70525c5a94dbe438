"""What-if projections: TTFT and e2e of a variant at an input and output length it did not run, from
straight lines fitted to its measured trials, with the fits' uncertainty.

- **TTFT vs input**: least squares of TTFT on input tokens over the variant's measured trials (every
  workload; ``sweep-input`` is what gives the line a range of lengths).
- **Time vs output**: least squares of the time after the first token (e2e − TTFT) on output tokens − 1
  (``sweep-output`` gives the range): its slope is the decode cost per token.
- **e2e** = the two added. The interval is the 95 % confidence interval of the fitted lines at that
  point (Student's t on the residuals; the two fits' variances added), i.e. where the *typical*
  request of that shape lands; single requests scatter around it. A length beyond the measured range
  is an extrapolation and is flagged as one.
- The interval is taken **on a log scale** (the delta method: the standard error of log y is
  ``se / y``), ``y × exp(±t × se / y)``: a time is positive, and so is every bound. Where the line is
  well determined (``se`` small against ``y``) this is ``y ± t × se`` to within a fraction of the
  width; where it is not, the interval is wide and lopsided upwards instead of reaching below 0
  ms. A line that itself reaches 0 ms or below at the length asked gives no projection.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np

from workbench.analysis.stats import Estimate
from workbench.store.records import TrialRecord

__all__ = [
    "CauseKind",
    "LinearFit",
    "Projection",
    "ProjectionCause",
    "decode_fit",
    "default_lengths",
    "fit",
    "project",
    "ttft_fit",
]

#: Student's t, two-sided 95 %, by degrees of freedom (normal beyond 30)
_T975 = (
    12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228,
    2.201, 2.179, 2.160, 2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086,
    2.080, 2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048, 2.045, 2.042,
)  # fmt: skip


def t975(df: int) -> float:
    return _T975[df - 1] if 1 <= df <= len(_T975) else 1.96


def positive_interval(value: float, se: float, df: int) -> Estimate:
    """``value``'s 95 % interval from its standard error, on a log scale: ``value × exp(±t × se /
    value)`` (the delta method), positive like the time it bounds."""
    k = t975(df) * se / value
    return Estimate(value, value * math.exp(-k), value * math.exp(k), df + 2)


@dataclass(frozen=True)
class LinearFit:
    """``y ≈ intercept + slope × x``, least squares, with what its uncertainty needs."""

    slope: float
    intercept: float
    n: int
    x_mean: float
    sxx: float  # Σ (x − mean)²
    residual_sd: float  # √(Σ residual² / (n − 2)); 0 for n = 2
    x_min: float
    x_max: float

    def value(self, x: float) -> float:
        return self.intercept + self.slope * x

    def stderr(self, x: float) -> float | None:
        """Standard error of the fitted line at ``x`` (None when n < 3: no residual to learn from)."""
        if self.n < 3:
            return None
        return self.residual_sd * math.sqrt(1 / self.n + (x - self.x_mean) ** 2 / self.sxx)

    def at(self, x: float) -> Estimate:
        """The line at ``x`` with its 95 % confidence interval, on a log scale (never below 0; see the
        module docstring); no value where the line is at or below 0."""
        y, se = self.value(x), self.stderr(x)
        if y <= 0:
            return Estimate(None, n=self.n)
        if se is None:
            return Estimate(y, n=self.n)
        return positive_interval(y, se, self.n - 2)

    def solve(self, y: float) -> float | None:
        """The x at which the line reaches ``y`` (None for a flat or falling line)."""
        return (y - self.intercept) / self.slope if self.slope > 0 else None

    def extrapolated(self, x: float) -> bool:
        span = self.x_max - self.x_min
        return x < self.x_min - 0.05 * span or x > self.x_max + 0.05 * span

    def to_dict(self) -> dict[str, object]:
        return {
            "slope": self.slope,
            "intercept": self.intercept,
            "n": self.n,
            "residual_sd": self.residual_sd,
            "x_min": self.x_min,
            "x_max": self.x_max,
        }


def fit(xs: Sequence[float], ys: Sequence[float]) -> LinearFit | None:
    """Least squares of ``ys`` on ``xs``; None when x does not vary."""
    x, y = np.asarray(xs, dtype=float), np.asarray(ys, dtype=float)
    if x.size < 2 or float(np.ptp(x)) == 0:
        return None
    x_mean = float(x.mean())
    sxx = float(((x - x_mean) ** 2).sum())
    slope = float(((x - x_mean) * (y - y.mean())).sum() / sxx)
    intercept = float(y.mean() - slope * x_mean)
    residuals = y - (intercept + slope * x)
    sd = math.sqrt(float((residuals**2).sum()) / (x.size - 2)) if x.size > 2 else 0.0
    return LinearFit(slope, intercept, int(x.size), x_mean, sxx, sd, float(x.min()), float(x.max()))


def _ok(trials: Sequence[TrialRecord], variant: str | None) -> list[TrialRecord]:
    return [
        t for t in trials if t.status == "ok" and not t.warmup and (variant is None or t.variant == variant)
    ]


def ttft_fit(trials: Sequence[TrialRecord], variant: str | None = None) -> LinearFit | None:
    """TTFT (ms) against input tokens over ``variant``'s measured trials."""
    points = [
        (t.input_tokens, t.ttft_ms) for t in _ok(trials, variant) if t.input_tokens and t.ttft_ms is not None
    ]
    return fit([x for x, _ in points], [y for _, y in points])


def decode_fit(trials: Sequence[TrialRecord], variant: str | None = None) -> LinearFit | None:
    """The time after the first token (e2e − TTFT, ms) against output tokens − 1."""
    points = [
        (t.output_tokens - 1, t.e2e_ms - t.ttft_ms)
        for t in _ok(trials, variant)
        if t.output_tokens and t.e2e_ms is not None and t.ttft_ms is not None
    ]
    return fit([x for x, _ in points], [y for _, y in points])


#: why a projection is partial or uncertain
CauseKind = Literal[
    "input-extrapolated",
    "output-extrapolated",
    "no-ttft-fit",
    "no-decode-fit",
    "ttft-not-positive",
    "decode-not-positive",
]


@dataclass(frozen=True)
class ProjectionCause:
    """One reason a projection is extrapolated or missing a part, with the measured range of lengths
    (tokens; for the extrapolations) it lies outside of."""

    kind: CauseKind
    measured: tuple[float, float] | None = None


@dataclass(frozen=True)
class Projection:
    """One variant at ``input_tokens`` in, ``output_tokens`` out: projected, not measured."""

    variant: str
    input_tokens: float
    output_tokens: float
    ttft: Estimate | None
    decode: Estimate | None  # the time after the first token
    e2e: Estimate | None
    ttft_line: LinearFit | None
    decode_line: LinearFit | None
    #: extrapolations and missing fits (worded by :func:`workbench.report.targets.projection_notes`)
    causes: tuple[ProjectionCause, ...] = ()

    def to_dict(self) -> dict[str, object]:
        def est(e: Estimate | None) -> dict[str, object] | None:
            return e.to_dict() if e is not None else None

        return {
            "variant": self.variant,
            "input_tokens": self.input_tokens,
            "output_tokens": self.output_tokens,
            "predicted": True,
            "ttft_ms": est(self.ttft),
            "decode_phase_ms": est(self.decode),
            "e2e_ms": est(self.e2e),
            "ttft_fit": self.ttft_line.to_dict() if self.ttft_line else None,
            "decode_fit": self.decode_line.to_dict() if self.decode_line else None,
        }


def project(
    trials: Sequence[TrialRecord], variant: str, input_tokens: float, output_tokens: float
) -> Projection:
    """TTFT, the time after the first token and e2e of ``variant`` at these lengths, from its trials."""
    t_line, d_line = ttft_fit(trials, variant), decode_fit(trials, variant)
    causes: list[ProjectionCause] = []
    ttft: Estimate | None = None
    decode: Estimate | None = None
    e2e: Estimate | None = None

    if t_line is None:
        causes.append(ProjectionCause("no-ttft-fit"))
    else:
        ttft = t_line.at(input_tokens)
        if t_line.extrapolated(input_tokens):
            causes.append(ProjectionCause("input-extrapolated", (t_line.x_min, t_line.x_max)))
        if ttft.value is None:
            causes.append(ProjectionCause("ttft-not-positive"))
    steps = max(output_tokens - 1, 0.0)
    if steps == 0:
        # one output token: no step after the first, so no time after it; nothing to fit or extrapolate
        # (the fitted line's intercept is ~0 ± noise there, and could even fall below 0)
        decode = Estimate(0.0, 0.0, 0.0, n=d_line.n if d_line is not None else 0)
    elif d_line is None:
        causes.append(ProjectionCause("no-decode-fit"))
    else:
        decode = d_line.at(steps)
        if d_line.extrapolated(steps):  # the fit is over steps after the first: output tokens − 1
            causes.append(ProjectionCause("output-extrapolated", (d_line.x_min + 1, d_line.x_max + 1)))
        if decode.value is None:
            causes.append(ProjectionCause("decode-not-positive"))
    if steps == 0 and ttft is not None and ttft.value is not None:
        e2e = ttft  # e2e is the first token's time
    elif ttft is not None and decode is not None and ttft.value is not None and decode.value is not None:
        assert t_line is not None and d_line is not None
        value = ttft.value + decode.value
        se_t, se_d = t_line.stderr(input_tokens), d_line.stderr(steps)
        if se_t is None or se_d is None:
            e2e = Estimate(value, n=min(ttft.n, decode.n))
        else:
            # the two fits' variances added, on the log scale of the sum (never below 0)
            e2e = positive_interval(value, math.hypot(se_t, se_d), min(t_line.n, d_line.n) - 2)
    return Projection(variant, input_tokens, output_tokens, ttft, decode, e2e, t_line, d_line, tuple(causes))


def default_lengths(trials: Sequence[TrialRecord]) -> tuple[int, int] | None:
    """The input and output length a what-if starts at: the largest inside every variant's measured
    range (the smallest of the variants' longest), so that no projection is an extrapolation until
    one is asked for; where a length did not vary, the longest measured. None without finished trials."""
    rows = _ok(trials, None)
    if not rows:
        return None
    variants = list(dict.fromkeys(t.variant for t in rows))
    inputs = [line.x_max for v in variants if (line := ttft_fit(rows, v)) is not None]
    outputs = [line.x_max + 1 for v in variants if (line := decode_fit(rows, v)) is not None]
    longest_in = max((t.input_tokens or 0 for t in rows), default=0)
    longest_out = max((t.output_tokens or 0 for t in rows), default=0)
    return (
        max(1, round(min(inputs) if inputs else longest_in)),
        max(1, round(min(outputs) if outputs else longest_out)),
    )
