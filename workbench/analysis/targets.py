"""Experience targets, judged: per variant × workload, does the measured percentile meet each target
(with its bootstrap CI and the margin), what share of requests met every target (**goodput**), and —
for a missed target — what would it take: the phase that misses, how far each lever measured in the
run gets, and (a prediction, from the fitted lines) the input or output length at which it would hold.
Facts only: :mod:`workbench.report.targets` words them.

Definitions (``docs/targets.md``):

- The measured p-th percentile is the *inverted CDF* one: the smallest measured value that at least
  p % of the requests reach (for decode tok/s, a lower limit: the largest value that at least p % of
  them reach or exceed). So "p90 ≤ target" holds exactly when at least 90 % of the requests met the
  target; a value equal to the target meets it. Its CI: 2,000 bootstrap resamples within each prompt
  (as every other CI here); none with one trial per prompt.
- Margin: how far the percentile is from the target, as a share of the target; positive = headroom,
  negative = over the limit.
- Goodput: the share of the measured requests (failed ones included: they did not get the
  experience) that met every target. Disturbed trials are left out as from every other statistic. A request without a figure for a targeted metric (one output
  token has no TPOT) is not counted as meeting it; a variant with no figure at all for a targeted
  metric gets a ``no data`` check and no goodput (it cannot be judged, which is not a miss).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

import numpy as np

from workbench.analysis.paired import disturbance, metric_value
from workbench.analysis.phases import strategy_lever
from workbench.analysis.projection import LinearFit, decode_fit, ttft_fit
from workbench.analysis.stats import BOOTSTRAP_RESAMPLES, Estimate, measured_percentile
from workbench.spec.targets import QUALITY_TARGETS, TARGET_METRICS, Targets
from workbench.store.records import TrialRecord

if TYPE_CHECKING:
    from workbench.analysis.quality import GroupQuality
    from workbench.analysis.turns import TurnSeries

__all__ = [
    "Check",
    "CheckStatus",
    "LengthPrediction",
    "LeverReach",
    "Phase",
    "PhaseSplit",
    "TargetGap",
    "TargetMiss",
    "TurnHold",
    "Verdict",
    "VerdictStatus",
    "bootstrap_percentile",
    "evaluate",
    "measured_percentile",
    "turns_held",
    "what_it_takes",
]

_SEED = 20261201

#: a target's outcome: met, missed, or no figure to judge it by
CheckStatus = Literal["met", "missed", "no data"]
#: a variant × workload's: every target met, any missed, or none missed but some without data
VerdictStatus = Literal["met", "missed", "unknown"]
#: the phase a target lives in: prefill, decode, or both (an e2e target)
Phase = Literal["prefill", "decode", "both"]

#: the phase a target lives in (e2e: whichever dominates the workload)
PHASE_OF: dict[str, Phase] = {
    "ttft_ms": "prefill",
    "tpot_ms": "decode",
    "itl_p90_ms": "decode",
    "itl_p99_ms": "decode",
    "decode_tokens_per_s": "decode",
    "e2e_ms": "both",
}


def bootstrap_percentile(
    values: Sequence[float | None],
    strata: Sequence[Hashable],
    percentile: float,
    higher_is_better: bool = False,
    *,
    resamples: int = BOOTSTRAP_RESAMPLES,
) -> Estimate:
    """:func:`measured_percentile` with a bootstrap 95 % CI, resampling within each stratum (prompt)."""
    groups: dict[Hashable, list[float]] = defaultdict(list)
    for value, key in zip(values, strata, strict=True):
        if value is not None:
            groups[key].append(float(value))
    arrays = [np.asarray(v) for v in groups.values()]
    n = sum(a.size for a in arrays)
    if n == 0:
        return Estimate(None, n=0)
    point = measured_percentile(np.concatenate(arrays), percentile, higher_is_better)
    if all(a.size < 2 for a in arrays):
        return Estimate(point, n=n)
    rng = np.random.default_rng(_SEED)
    sample = np.concatenate([a[rng.integers(0, a.size, size=(resamples, a.size))] for a in arrays], axis=1)
    sign = -1.0 if higher_is_better else 1.0
    boot = sign * np.percentile(sign * sample, percentile, axis=1, method="inverted_cdf")
    lo, hi = np.percentile(boot, [2.5, 97.5])
    return Estimate(point, float(lo), float(hi), n)


@dataclass(frozen=True)
class Check:
    """One target of one variant × workload."""

    metric: str
    target: float
    percentile: float
    measured: Estimate  # the percentile, with its CI
    share_meeting: float | None  # share of the measured requests that met this target

    @property
    def higher_is_better(self) -> bool:
        return TARGET_METRICS[self.metric].higher_is_better

    @property
    def status(self) -> CheckStatus:
        """``met``, ``missed`` or ``no data`` (the variant has no figure for this metric)."""
        value = self.measured.value
        if value is None:
            return "no data"
        ok = value >= self.target if self.higher_is_better else value <= self.target
        return "met" if ok else "missed"

    @property
    def met(self) -> bool | None:
        return None if self.status == "no data" else self.status == "met"

    @property
    def margin(self) -> float | None:
        """(target − measured) / target for an upper limit, (measured − target) / target for a lower
        one: positive = headroom, negative = how far over."""
        value = self.measured.value
        if value is None:
            return None
        diff = value - self.target if self.higher_is_better else self.target - value
        return diff / self.target

    @property
    def confident(self) -> bool | None:
        """The whole CI lies on the verdict's side of the target (None: no CI)."""
        lo, hi = self.measured.lo, self.measured.hi
        if lo is None or hi is None:
            return None
        above = lo > self.target if not self.higher_is_better else hi < self.target
        below = hi <= self.target if not self.higher_is_better else lo >= self.target
        return below if self.status == "met" else above

    def to_dict(self) -> dict[str, object]:
        return {
            "metric": self.metric,
            "target": self.target,
            "percentile": self.percentile,
            "higher_is_better": self.higher_is_better,
            "measured": self.measured.to_dict(),
            "status": self.status,
            "met": self.met,
            "margin": self.margin,
            "confident": self.confident,
            "share_meeting": self.share_meeting,
        }


@dataclass(frozen=True)
class Verdict:
    """Every target of one variant × workload, and the goodput."""

    variant: str
    workload: str
    targets: Targets
    checks: tuple[Check, ...] = ()
    requests: int = 0  # measured requests (failed included)
    good: int = 0  # requests that met every target

    @property
    def goodput(self) -> float | None:
        if not self.requests or any(c.status == "no data" for c in self.checks):
            return None
        return self.good / self.requests

    @property
    def status(self) -> VerdictStatus:
        """``met`` (every target), ``missed`` (any), ``unknown`` (none missed, some without data)."""
        statuses = {c.status for c in self.checks}
        if "missed" in statuses:
            return "missed"
        return "unknown" if "no data" in statuses or not self.checks else "met"

    @property
    def missed(self) -> list[Check]:
        return [c for c in self.checks if c.status == "missed"]

    def to_dict(self) -> dict[str, object]:
        return {
            "variant": self.variant,
            "workload": self.workload,
            "targets": self.targets.to_dict(),
            "status": self.status,
            "checks": [c.to_dict() for c in self.checks],
            "goodput": self.goodput,
            "requests": self.requests,
            "good_requests": self.good,
        }


def _meets(row: TrialRecord, metric: str, target: float) -> bool:
    value = metric_value(row, metric)
    if value is None:
        return False
    return value >= target if TARGET_METRICS[metric].higher_is_better else value <= target


def evaluate(
    trials: Sequence[TrialRecord],
    targets: Mapping[str, Targets],
    *,
    exclude_disturbed: bool | None = None,
    quality: Mapping[tuple[str, str], GroupQuality | None] | None = None,
) -> list[Verdict]:
    """A :class:`Verdict` per variant × workload whose workload has targets, in run order. ``trials``:
    trial rows (warm-ups and cancelled or skipped trials are left out here; disturbed ones as every
    other statistic does: ``exclude_disturbed`` None = the default rule of
    :func:`workbench.analysis.paired.disturbance`). ``quality``: each (variant, workload)'s
    ``GroupSummary.quality``, for the quality targets (``kld_max``, ``same_top_min``): a request is
    good when it meets every timing target and its variant meets the quality targets there."""
    quality = quality or {}
    rule = disturbance(trials, exclude_disturbed)
    groups: dict[tuple[str, str], list[TrialRecord]] = defaultdict(list)
    for t in trials:
        if t.warmup or t.status not in ("ok", "failed"):
            continue
        if not rule.keeps(t):
            continue
        groups[(t.variant, t.workload)].append(t)
    verdicts = []
    for (variant, workload), rows in groups.items():
        wanted = targets.get(workload)
        if not wanted:
            continue
        ok = [r for r in rows if r.status == "ok"]
        prompts = [r.prompt_id for r in ok]
        timing = [(m, v) for m, v in wanted.limits if m not in QUALITY_TARGETS]
        checks: list[Check] = []
        for metric, limit in wanted.limits:
            if metric in QUALITY_TARGETS:
                checks.append(
                    _quality_check(metric, limit, wanted.percentile, quality.get((variant, workload)))
                )
                continue
            values = [metric_value(r, metric) for r in ok]
            measured = bootstrap_percentile(
                values, prompts, wanted.percentile, TARGET_METRICS[metric].higher_is_better
            )
            share = sum(_meets(r, metric, limit) for r in rows) / len(rows) if rows else None
            checks.append(Check(metric, limit, wanted.percentile, measured, share))
        good_enough = all(c.met for c in checks if c.metric in QUALITY_TARGETS)
        good = (
            sum(r.status == "ok" and all(_meets(r, m, v) for m, v in timing) for r in rows)
            if good_enough
            else 0
        )
        verdicts.append(Verdict(variant, workload, wanted, tuple(checks), requests=len(rows), good=good))
    return verdicts


def _quality_check(metric: str, limit: float, percentile: float, quality: GroupQuality | None) -> Check:
    """A quality target judged on the variant's figures on the workload: the baseline and lossless
    variants keep the baseline's predictions (KLD 0, same top 100 %); unscored ones have no data."""
    status = quality.status if quality is not None else None
    figures = quality.figures if quality is not None else None
    if status in ("reference", "lossless"):
        value: float | None = 0.0 if metric == "kld_max" else 1.0
        measured = Estimate(value, value, value, 1)
    elif figures is not None:
        kld = metric == "kld_max"
        ci = figures.kld_ci if kld else figures.same_top_ci
        measured = Estimate(
            figures.kld_mean if kld else figures.same_top,
            ci[0] if ci else None,
            ci[1] if ci else None,
            figures.positions or 0,
        )
    else:
        measured = Estimate(None, n=0)
    return Check(metric, limit, percentile, measured, None)


# -- what would it take -------------------------------------------------------------------------------


@dataclass(frozen=True)
class PhaseSplit:
    """An e2e target's reference requests: the median prefill (TTFT) and decode (e2e − TTFT)."""

    bound: Literal["prefill", "decode"]  # the phase with at least half of the time
    prefill_ms: float
    decode_ms: float
    prefill_share: float  # prefill / (prefill + decode)


@dataclass(frozen=True)
class LeverReach:
    """Another variant of the run on a target the reference misses: its own measured percentile."""

    variant: str
    lever: str  # the lever its strategy declares (Strategy.lever), else the strategy; "" when unknown
    check: Check  # its check of the same target
    speedup: float | None  # against the reference (> 1: better, whichever way the metric points)


@dataclass(frozen=True)
class LengthPrediction:
    """From the reference's fitted lines (a prediction, not a measurement): ``input`` — the input
    length up to which a TTFT target would hold; ``e2e`` — the output cap or the input length at
    which an e2e target would; ``decode`` — lengths cannot fix a decode target (the cost per output
    token is the same at every length). A limit is None where no length (≥ 1 token) brings it under."""

    kind: Literal["input", "e2e", "decode"]
    ttft_line: LinearFit | None  # TTFT ≈ intercept + slope × input tokens
    decode_line: LinearFit | None  # decode ≈ slope per output token
    input_limit: float | None = None  # tokens
    output_limit: float | None = None  # tokens (e2e)
    inputs_now: float | None = None  # the requests' input length at the target's percentile
    outputs_now: float | None = None  # their output length at the percentile (e2e)


@dataclass(frozen=True)
class TargetMiss:
    """A target the reference variant misses on a workload, and what would it take."""

    variant: str  # the reference variant
    check: Check
    factor: float  # how many times the limit it measured (the limit over it, for a lower limit)
    phase: Phase  # the phase the target lives in
    split: PhaseSplit | None  # an e2e target: which phase dominates (None: no timed requests)
    levers: tuple[LeverReach, ...]  # the run's other variants on this target
    prediction: LengthPrediction | None


@dataclass(frozen=True)
class TargetGap:
    """One workload with targets: every variant's verdict and each target the reference misses."""

    workload: str
    targets: Targets
    verdicts: tuple[Verdict, ...]  # every variant's on this workload, in run order
    misses: tuple[TargetMiss, ...]  # the reference's missed timing targets (quality ones left out)


def what_it_takes(
    verdicts: Sequence[Verdict],
    trials: Sequence[TrialRecord],
    reference: str | None,
    strategies: dict[str, str] | None = None,
) -> dict[str, TargetGap]:
    """Per workload with targets: which variants meet them, and for each target the reference variant
    misses — the phase that misses it, what each lever measured in the run reaches (measured), and
    the input or output length at which it would hold (a prediction from the reference's fitted
    lines). :func:`workbench.report.targets.target_advice` words it."""
    strategies = strategies or {}
    out: dict[str, TargetGap] = {}
    for workload in dict.fromkeys(v.workload for v in verdicts):
        group = [v for v in verdicts if v.workload == workload]
        ref = next((v for v in group if v.variant == reference), group[0])
        ref_trials = [t for t in trials if t.variant == ref.variant and t.status == "ok"]
        rows = [t for t in ref_trials if t.workload == workload and not t.warmup]
        t_line, d_line = _lines(ref_trials)
        misses = tuple(
            TargetMiss(
                ref.variant,
                check,
                _factor(check),
                PHASE_OF[check.metric],
                _split(check, rows),
                _levers(check, ref, group, strategies),
                _length(check, rows, t_line, d_line),
            )
            for check in ref.missed
            if check.metric not in QUALITY_TARGETS  # a property of the variant, not of a phase
        )
        out[workload] = TargetGap(workload, ref.targets, tuple(group), misses)
    return out


def _lines(trials: Sequence[TrialRecord]) -> tuple[LinearFit | None, LinearFit | None]:
    """The reference variant's fitted lines over the whole run; where its lengths did not vary, a line
    through the origin with the median per-token cost (TTFT / input tokens, TPOT), as the phases'
    cost model does."""
    t_line, d_line = ttft_fit(trials), decode_fit(trials)
    ok = [t for t in trials if not t.warmup]
    if t_line is None:
        per = [t.ttft_ms / t.input_tokens for t in ok if t.ttft_ms and t.input_tokens]
        t_line = _through_origin(per)
    if d_line is None:
        d_line = _through_origin([t.tpot_ms for t in ok if t.tpot_ms])
    return t_line, d_line


def _through_origin(slopes: Sequence[float]) -> LinearFit | None:
    if not slopes:
        return None
    return LinearFit(float(np.median(slopes)), 0.0, 0, 0.0, 0.0, 0.0, 0.0, 0.0)


def _factor(check: Check) -> float:
    """How many times the limit the measured percentile is (the limit over it, for a lower limit)."""
    value = check.measured.value or 0.0
    if not check.higher_is_better:
        return value / check.target
    return check.target / value if value else 0.0


def _split(check: Check, rows: Sequence[TrialRecord]) -> PhaseSplit | None:
    """An e2e target: the median prefill and decode of the reference's requests (None for a target of
    one phase, or without timed requests)."""
    if PHASE_OF[check.metric] != "both":
        return None
    timed = [(t.ttft_ms, t.e2e_ms) for t in rows if t.ttft_ms is not None and t.e2e_ms is not None]
    if not timed:
        return None
    prefill = float(np.median([ttft for ttft, _ in timed]))
    decode = float(np.median([e2e - ttft for ttft, e2e in timed]))
    share = prefill / (prefill + decode) if prefill + decode > 0 else 0.0
    return PhaseSplit("prefill" if share >= 0.5 else "decode", prefill, decode, share)


def _levers(
    check: Check, ref: Verdict, group: Sequence[Verdict], strategies: dict[str, str]
) -> tuple[LeverReach, ...]:
    """How far each other variant of the run gets on this target: its own measured percentile."""
    found = []
    ref_value = check.measured.value
    for v in group:
        if v.variant == ref.variant:
            continue
        other = next((c for c in v.checks if c.metric == check.metric), None)
        if other is None or other.measured.value is None or not ref_value:
            continue
        strategy = strategies.get(v.variant) or ""
        lever = strategy_lever(strategy)[0] or strategy
        # a speed-up (> 1: better), whichever way the metric points: x is never a time ratio
        value = other.measured.value
        speedup = value / ref_value if check.higher_is_better else ref_value / value if value else None
        found.append(LeverReach(v.variant, lever, other, speedup))
    return tuple(found)


def _length(
    check: Check, rows: Sequence[TrialRecord], t_line: LinearFit | None, d_line: LinearFit | None
) -> LengthPrediction | None:
    """Prediction: the input (TTFT) or output (e2e) length at which the target would hold."""
    # (input tokens, output tokens, the metric) of each request that has all three
    sized = [
        (t.input_tokens, t.output_tokens, value)
        for t in rows
        if t.input_tokens and t.output_tokens and (value := metric_value(t, check.metric)) is not None
    ]
    if not sized or check.measured.value is None:
        return None
    p = check.percentile
    inp = measured_percentile([i for i, _, _ in sized], p)
    out = measured_percentile([o for _, o, _ in sized], p)
    if check.metric == "ttft_ms" and t_line is not None:
        # each request against the line: the spread at the percentile (noise, and what length misses)
        tail = _tail([v / t_line.value(i) for i, _, v in sized if t_line.value(i) > 0], p)
        limit = t_line.solve(check.target / tail)
        return LengthPrediction(
            "input",
            t_line,
            None,
            input_limit=limit if limit is not None and limit >= 1 else None,
            inputs_now=inp,
        )
    if check.metric == "e2e_ms" and t_line is not None and d_line is not None:

        def line(i: int, o: int) -> float:
            return t_line.value(i) + d_line.value(o - 1)

        tail = _tail([v / line(i, o) for i, o, v in sized if line(i, o) > 0], p)
        goal = check.target / tail
        budget = d_line.solve(goal - t_line.value(inp))
        inputs = t_line.solve(goal - d_line.value(out - 1))
        return LengthPrediction(
            "e2e",
            t_line,
            d_line,
            input_limit=inputs if inputs is not None and inputs >= 1 else None,
            output_limit=budget + 1 if budget is not None and budget >= 1 else None,
            inputs_now=inp,
            outputs_now=out,
        )
    if PHASE_OF[check.metric] == "decode" and d_line is not None:
        return LengthPrediction("decode", None, d_line)
    return None


def _tail(ratios: Sequence[float], percentile: float) -> float:
    """Measured / fitted at the percentile: how far above the line the p-th request sits (≥ 1)."""
    return max(measured_percentile(ratios, percentile), 1.0) if ratios else 1.0


# -- conversations: how many turns a variant holds the TTFT target --------------------------------


@dataclass(frozen=True)
class TurnHold:
    """On a conversation workload with a TTFT target, one variant's turns 1..``held`` whose TTFT
    percentile (over its conversations and repetitions at that turn) meets the target; ``miss_ms``: the
    percentile at the first turn that misses it (None when every turn held)."""

    workload: str
    variant: str
    target_ms: float
    percentile: float
    turns: int  # the turns run
    held: int
    miss_ms: float | None = None

    @property
    def holds_all(self) -> bool:
        return self.held == self.turns


def turns_held(series: Sequence[TurnSeries], targets: Mapping[str, Targets]) -> list[TurnHold]:
    """Per conversation workload with a TTFT target × variant that ran it (``series``: the run's
    per-turn figures, :func:`workbench.analysis.turns.conversation_series`): how many turns, from the
    first, meet the target at its percentile (a turn with no TTFT counts as a miss)."""
    holds = []
    for s in series:
        target = targets.get(s.workload)
        limit = target.limit("ttft_ms") if target else None
        if target is None or limit is None or not s.points:
            continue
        points = {p.turn: p for p in s.points}
        held, miss = 0, None
        for turn in range(1, max(points) + 1):
            point = points.get(turn)
            value = point.percentile(target.percentile) if point is not None and point.n else None
            if value is None or value > limit:
                miss = value
                break
            held = turn
        holds.append(TurnHold(s.workload, s.variant, limit, target.percentile, max(points), held, miss))
    return holds
