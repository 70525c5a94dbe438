"""Does prompt compression pay on TTFT? Its break-even, like drafting's (:mod:`.drafting`).

Compressing is itself a prefill (the compressor reads the whole prompt), so it pays only when what it
costs per prompt token is less than the target's prefill it saves. Per compressing variant ×
workload, from the trials (``compress_ms``, ``trimmed_tokens``, ``input_tokens``) and the reference
variant's TTFT on the same workload:

- ``c``: the compressor's cost per prompt token (ms): the median of ``compress_ms / n``;
- ``p``: the target's prefill cost per prompt token: the median of the reference's ``TTFT / n``;
- ``r``: the achieved kept share (median of ``1 - trimmed / input``);
- ``cost_fraction = c / (p (1 - r))``: what compressing costs for each millisecond of prefill it
  saves, at the run's prompt lengths. At or above 1 it does not pay at this ratio on this hardware —
  unless the compressor is ``cost_fraction`` times cheaper, or the compressed prompt is reused (a
  prefix cache serves it again without compressing again).
- ``n*``: where the prompts differ in length, lines fitted to both (``compress_ms = c0 + c' n``,
  ``TTFT = p0 + p' n``) give the prompt length above which compression gains,
  ``c0 / (p' (1 - r) - c')``; ``None`` when it never does (``p' (1 - r) <= c'``) or the lengths or the
  fits (a slope that is not positive: noise) cannot say.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import dataclass

from workbench.store.records import TrialRecord

__all__ = ["CompressionBreakEven", "compression_break_even"]


@dataclass(frozen=True)
class CompressionBreakEven:
    variant: str
    workload: str
    trials: int
    input_tokens: float  # the prompts' median length (the target's tokens)
    requested_rate: float | None  # the share of the prompt asked to be kept (median)
    achieved_rate: float  # the share kept (median)
    compress_ms: float  # median compression time
    compress_ms_per_token: float  # c
    compress_fixed_ms: float  # c0, the fitted fixed part (0 when the prompts have one length)
    prefill_ms_per_token: float | None  # p, the reference's (None: no reference trials)
    cost_fraction: float | None  # c / (p (1 - r)): compression's cost per ms of prefill saved
    break_even_tokens: float | None  # n*: prompts longer than this gain on TTFT (None: never)

    @property
    def pays(self) -> bool | None:
        return None if self.cost_fraction is None else self.cost_fraction < 1.0

    def with_cheaper_compressor(self, times: float) -> float | None:
        """The cost fraction a compressor ``times`` cheaper would have."""
        return None if self.cost_fraction is None else self.cost_fraction / times


def _line(points: Sequence[tuple[float, float]]) -> tuple[float, float]:
    """Intercept and slope of ``y`` against ``x`` (least squares); one length only: through 0."""
    xs = [x for x, _ in points]
    if len(set(xs)) < 2:
        return 0.0, statistics.median(y / x for x, y in points if x > 0)
    mx, my = statistics.fmean(xs), statistics.fmean(y for _, y in points)
    sxx = sum((x - mx) ** 2 for x in xs)
    slope = sum((x - mx) * (y - my) for x, y in points) / sxx
    return my - slope * mx, slope


def compression_break_even(
    trials: Sequence[TrialRecord], reference: str | None
) -> list[CompressionBreakEven]:
    """Per variant × workload with ``compress_ms`` recorded (ok, measured trials)."""
    used = [t for t in trials if t.status == "ok" and not t.warmup]
    groups: dict[tuple[str, str], list[TrialRecord]] = {}
    for t in used:
        if t.compress_ms is not None and t.input_tokens:
            groups.setdefault((t.variant, t.workload), []).append(t)
    out = []
    for (variant, workload), mine in groups.items():
        points = [(float(t.input_tokens or 0), float(t.compress_ms or 0.0)) for t in mine]
        c = statistics.median(y / x for x, y in points)
        achieved = statistics.median(1.0 - (t.trimmed_tokens or 0) / (t.input_tokens or 1) for t in mine)
        requested = [t.compress_rate for t in mine if t.compress_rate is not None]
        base = [
            (float(t.input_tokens or 0), float(t.ttft_ms))
            for t in used
            if t.variant == reference and t.workload == workload and t.ttft_ms is not None and t.input_tokens
        ]
        p = statistics.median(y / x for x, y in base) if base else None
        saved = p * (1.0 - achieved) if p is not None else None
        fraction = c / saved if saved is not None and saved > 0 else None
        c0, c_slope = _line(points)
        n_star = None
        if base and len({x for x, _ in points}) > 1 and len({x for x, _ in base}) > 1:
            p_slope = _line(base)[1]
            gain = p_slope * (1.0 - achieved) - c_slope
            if c_slope > 0 and p_slope > 0 and gain > 0:
                n_star = max(c0, 0.0) / gain
        out.append(
            CompressionBreakEven(
                variant=variant,
                workload=workload,
                trials=len(mine),
                input_tokens=statistics.median(float(t.input_tokens or 0) for t in mine),
                requested_rate=statistics.median(requested) if requested else None,
                achieved_rate=achieved,
                compress_ms=statistics.median(float(t.compress_ms or 0.0) for t in mine),
                compress_ms_per_token=c,
                compress_fixed_ms=max(c0, 0.0),
                prefill_ms_per_token=p,
                cost_fraction=fraction,
                break_even_tokens=n_star,
            )
        )
    return out
