"""Experience targets, judged: per variant × workload, does the measured percentile meet each target
(with its bootstrap CI and the margin), what share of requests met every target (**goodput**), and —
for a missed target — what would it take: the phase that misses, how far each lever measured in the
run gets, and (a prediction, from the fitted lines) the input or output length at which it would hold.

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
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from workbench.analysis.paired import disturbance, metric_value
from workbench.analysis.phases import LEVERS
from workbench.analysis.projection import LinearFit, decode_fit, ttft_fit
from workbench.analysis.stats import BOOTSTRAP_RESAMPLES, Estimate
from workbench.spec.targets import QUALITY_TARGETS, TARGET_METRICS, Targets
from workbench.store import TrialRecord

__all__ = [
    "Check",
    "Verdict",
    "bootstrap_percentile",
    "evaluate",
    "measured_percentile",
    "what_it_takes",
]

_SEED = 20261201


def _num(value: float) -> str:
    """1,290 · 500 · 77.5 · 0.0484: whole numbers without decimals, else the phases' precision."""
    if float(value).is_integer() or abs(value) >= 100:
        return f"{value:,.0f}"
    return f"{value:.1f}" if abs(value) >= 10 else f"{value:.3g}"


#: the phase a target lives in (e2e: whichever dominates the workload)
PHASE_OF = {
    "ttft_ms": "prefill",
    "tpot_ms": "decode",
    "itl_p90_ms": "decode",
    "itl_p99_ms": "decode",
    "decode_tokens_per_s": "decode",
    "e2e_ms": "both",
}


def measured_percentile(
    values: Sequence[float] | np.ndarray, percentile: float, higher_is_better: bool = False
) -> float:
    """The value that ``percentile`` % of ``values`` reach: the inverted-CDF percentile (a lower-is-better
    metric), or its mirror image (higher is better: the value at least that share reach or exceed)."""
    a = np.asarray(values, dtype=float)
    if higher_is_better:
        return -float(np.percentile(-a, percentile, method="inverted_cdf"))
    return float(np.percentile(a, percentile, method="inverted_cdf"))


def bootstrap_percentile(
    values: Sequence[float | None],
    strata: Sequence[Any],
    percentile: float,
    higher_is_better: bool = False,
    *,
    resamples: int = BOOTSTRAP_RESAMPLES,
) -> Estimate:
    """:func:`measured_percentile` with a bootstrap 95 % CI, resampling within each stratum (prompt)."""
    groups: dict[Any, list[float]] = defaultdict(list)
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
        return TARGET_METRICS[self.metric][2]

    @property
    def status(self) -> str:
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

    @property
    def label(self) -> str:
        if self.metric in QUALITY_TARGETS:
            return "KLD mean" if self.metric == "kld_max" else "same top"
        return f"{TARGET_METRICS[self.metric][0]} p{_num(self.percentile)}"

    @property
    def limit_text(self) -> str:
        _, unit, higher = TARGET_METRICS[self.metric]
        if self.metric == "same_top_min":
            return f"≥ {self.target:.0%}"
        return f"{'≥' if higher else '≤'} {_num(self.target)} {unit}".rstrip()

    def measured_text(self, ci: bool = True) -> str:
        est, unit = self.measured, TARGET_METRICS[self.metric][1]
        if est.value is None:
            return "no data"
        if self.metric in QUALITY_TARGETS:
            shown = (lambda v: f"{v:.1%}") if self.metric == "same_top_min" else (lambda v: f"{v:.3g}")
            bounds = (
                f" [{shown(est.lo)}–{shown(est.hi)}]"
                if ci and est.lo is not None and est.hi is not None
                else ""
            )
            return f"{shown(est.value)}{bounds}"
        text = f"{_num(est.value)} {unit}"
        if ci and est.lo is not None and est.hi is not None:
            text += f" [{_num(est.lo)}–{_num(est.hi)}]"
        return text

    def describe(self) -> str:
        """e.g. ``TTFT p90 412 ms [380–450] vs ≤ 500 ms: met, 18 % headroom``."""
        if self.status == "no data" and self.metric in QUALITY_TARGETS:
            return f"{self.label} vs {self.limit_text}: no data (the quality pass did not score this variant here)"
        if self.status == "no data":
            return f"{self.label} vs {self.limit_text}: no data (this variant has no {TARGET_METRICS[self.metric][0]})"
        margin = self.margin or 0.0
        how = f"{margin:.0%} headroom" if margin >= 0 else f"{-margin:.0%} over"
        if self.higher_is_better and margin < 0:
            how = f"{-margin:.0%} short"
        unsure = " (the CI straddles the target)" if self.confident is False else ""
        return f"{self.label} {self.measured_text()} vs {self.limit_text}: {self.status}, {how}{unsure}"

    def to_dict(self) -> dict[str, Any]:
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


@dataclass
class Verdict:
    """Every target of one variant × workload, and the goodput."""

    variant: str
    workload: str
    targets: Targets
    checks: list[Check] = field(default_factory=list)
    requests: int = 0  # measured requests (failed included)
    good: int = 0  # requests that met every target

    @property
    def goodput(self) -> float | None:
        if not self.requests or any(c.status == "no data" for c in self.checks):
            return None
        return self.good / self.requests

    @property
    def status(self) -> str:
        """``met`` (every target), ``missed`` (any), ``unknown`` (none missed, some without data)."""
        statuses = {c.status for c in self.checks}
        if "missed" in statuses:
            return "missed"
        return "unknown" if "no data" in statuses or not self.checks else "met"

    @property
    def missed(self) -> list[Check]:
        return [c for c in self.checks if c.status == "missed"]

    def short(self) -> str:
        """e.g. ``met 2/2 · goodput 90 %`` or ``missed TTFT · goodput 40 %``."""
        met = sum(c.status == "met" for c in self.checks)
        head = (
            f"met {met}/{len(self.checks)}"
            if self.status == "met"
            else "missed " + ", ".join(TARGET_METRICS[c.metric][0] for c in self.missed)
            if self.status == "missed"
            else f"met {met}/{len(self.checks)}, no data for the rest"
        )
        gp = self.goodput
        return head + (f" · goodput {gp:.0%}" if gp is not None else "")

    def to_dict(self) -> dict[str, Any]:
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
    return value >= target if TARGET_METRICS[metric][2] else value <= target


def evaluate(
    trials: Sequence[TrialRecord],
    targets: Mapping[str, Targets],
    *,
    exclude_disturbed: bool | None = None,
    quality: dict[tuple[str, str], dict[str, Any] | None] | None = None,
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
        verdict = Verdict(variant, workload, wanted, requests=len(rows))
        timing = [(m, v) for m, v in wanted.limits if m not in QUALITY_TARGETS]
        for metric, limit in wanted.limits:
            if metric in QUALITY_TARGETS:
                verdict.checks.append(
                    _quality_check(metric, limit, wanted.percentile, quality.get((variant, workload)))
                )
                continue
            values = [metric_value(r, metric) for r in ok]
            measured = bootstrap_percentile(values, prompts, wanted.percentile, TARGET_METRICS[metric][2])
            share = sum(_meets(r, metric, limit) for r in rows) / len(rows) if rows else None
            verdict.checks.append(Check(metric, limit, wanted.percentile, measured, share))
        good_enough = all(c.met for c in verdict.checks if c.metric in QUALITY_TARGETS)
        verdict.good = (
            sum(r.status == "ok" and all(_meets(r, m, v) for m, v in timing) for r in rows)
            if good_enough
            else 0
        )
        verdicts.append(verdict)
    return verdicts


def _quality_check(metric: str, limit: float, percentile: float, quality: dict[str, Any] | None) -> Check:
    """A quality target judged on the variant's figures on the workload: the baseline and lossless
    variants keep the baseline's predictions (KLD 0, same top 100 %); unscored ones have no data."""
    status = (quality or {}).get("status")
    if status in ("reference", "lossless"):
        value: float | None = 0.0 if metric == "kld_max" else 1.0
        measured = Estimate(value, value, value, 1)
    elif status == "scored":
        assert quality is not None
        key, ci_key = ("kld_mean", "kld_ci") if metric == "kld_max" else ("same_top", "same_top_ci")
        ci = quality.get(ci_key)
        measured = Estimate(
            quality[key], ci[0] if ci else None, ci[1] if ci else None, quality.get("positions") or 0
        )
    else:
        measured = Estimate(None, n=0)
    return Check(metric, limit, percentile, measured, None)


# -- what would it take -------------------------------------------------------------------------------


def what_it_takes(
    verdicts: Sequence[Verdict],
    trials: Sequence[TrialRecord],
    reference: str | None,
    strategies: dict[str, str] | None = None,
) -> dict[str, list[str]]:
    """Per workload with targets: which variants meet them, and for each target the reference variant
    misses — the phase that misses it, what each lever measured in the run reaches (measured), and
    the input or output length at which it would hold (a prediction from the reference's fitted
    lines, marked as one)."""
    strategies = strategies or {}
    out: dict[str, list[str]] = {}
    for workload in dict.fromkeys(v.workload for v in verdicts):
        group = [v for v in verdicts if v.workload == workload]
        ref = next((v for v in group if v.variant == reference), group[0])
        ref_trials = [t for t in trials if t.variant == ref.variant and t.status == "ok"]
        rows = [t for t in ref_trials if t.workload == workload and not t.warmup]
        t_line, d_line = _lines(ref_trials)
        lines = [_who_meets(group, ref.targets)]
        for check in ref.missed:
            if check.metric in QUALITY_TARGETS:  # a property of the variant, not of a phase
                continue
            lines.append(_miss_line(ref.variant, check, rows))
            lines.append(_levers_line(check, ref, group, strategies))
            prediction = _length_line(check, rows, t_line, d_line)
            if prediction:
                lines.append(prediction)
        out[workload] = lines
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


def _who_meets(group: Sequence[Verdict], targets: Targets) -> str:
    meets = [v for v in group if v.status == "met"]
    parts = [f"Targets ({targets.source}): {targets.describe()}."]
    if meets:
        parts.append(
            "Met by "
            + ", ".join(f"{v.variant} (goodput {v.goodput:.0%})" for v in meets if v.goodput is not None)
        )
    else:
        parts.append("No variant meets every target")
    misses = [v for v in group if v.status == "missed"]
    if misses:
        parts[-1] += "; missed by " + ", ".join(
            f"{v.variant} ({', '.join(TARGET_METRICS[c.metric][0] for c in v.missed)})" for v in misses
        )
    unknown = [v.variant for v in group if v.status == "unknown"]
    if unknown:
        parts[-1] += "; no data to judge " + ", ".join(unknown)
    return " ".join(parts[:1]) + " " + parts[1] + "."


def _phase_word(check: Check, rows: Sequence[TrialRecord]) -> str:
    kind = PHASE_OF[check.metric]
    if kind == "prefill":
        return "prefill-bound (TTFT is the prefill)"
    if kind == "decode":
        return "decode-bound (the time per token is the decode)"
    timed = [(t.ttft_ms, t.e2e_ms) for t in rows if t.ttft_ms is not None and t.e2e_ms is not None]
    if not timed:
        return "e2e: both phases"
    prefill = float(np.median([ttft for ttft, _ in timed]))
    decode = float(np.median([e2e - ttft for ttft, e2e in timed]))
    share = prefill / (prefill + decode) if prefill + decode > 0 else 0.0
    bound = "prefill" if share >= 0.5 else "decode"
    return (
        f"{bound}-bound: prefill {_num(prefill)} ms + decode {_num(decode)} ms (medians, prefill {share:.0%})"
    )


def _miss_line(variant: str, check: Check, rows: Sequence[TrialRecord]) -> str:
    value = check.measured.value or 0.0
    factor = value / check.target if not check.higher_is_better else check.target / value if value else 0
    return (
        f"{variant}: {check.label} {check.measured_text()} vs {check.limit_text} "
        f"({factor:.2f} times the limit): {_phase_word(check, rows)}."
    )


def _levers_line(check: Check, ref: Verdict, group: Sequence[Verdict], strategies: dict[str, str]) -> str:
    """How far each other variant of the run gets on this target: its own measured percentile."""
    parts = []
    ref_value = check.measured.value
    for v in group:
        if v.variant == ref.variant:
            continue
        other = next((c for c in v.checks if c.metric == check.metric), None)
        if other is None or other.measured.value is None or not ref_value:
            continue
        lever = LEVERS.get(strategies.get(v.variant, ""), (strategies.get(v.variant) or "", ""))[0]
        name = f"{v.variant} ({lever})" if lever and lever != v.variant else v.variant
        # a speed-up (> 1: better), whichever way the metric points: x is never a time ratio
        value = other.measured.value
        speedup = value / ref_value if check.higher_is_better else ref_value / value if value else None
        verdict = "meets it" if other.status == "met" else "still misses"
        gain = f" ({speedup:.2f}x)" if speedup is not None else ""
        parts.append(f"{name} {other.measured_text(ci=False)}{gain}, {verdict}")
    if not parts:
        return "No other variant was measured on this workload: add variants with levers for that phase."
    return "Levers measured here: " + "; ".join(parts) + "."


def _length_line(
    check: Check, rows: Sequence[TrialRecord], t_line: LinearFit | None, d_line: LinearFit | None
) -> str | None:
    """Prediction: the input (TTFT) or output (e2e) length at which the target would hold."""
    # (input tokens, output tokens, the metric) of each request that has all three
    sized = [
        (t.input_tokens, t.output_tokens, metric_value(t, check.metric))
        for t in rows
        if t.input_tokens and t.output_tokens and metric_value(t, check.metric) is not None
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
        fit_text = f"fit TTFT ≈ {_num(t_line.intercept)} ms + {_num(t_line.slope)} ms × input tokens"
        if limit is None or limit < 1:
            return (
                f"Prediction: no input length brings {check.label} under {_num(check.target)} ms "
                f"({fit_text}): it needs a prefill lever or a faster device."
            )
        return (
            f"Prediction: {check.label} would hold with inputs up to ~{_tokens(limit)} tokens (now up to "
            f"{_tokens(inp)} at p{_num(p)}; {fit_text})."
        )
    if check.metric == "e2e_ms" and t_line is not None and d_line is not None:

        def line(i: int, o: int) -> float:
            return t_line.value(i) + d_line.value(o - 1)

        tail = _tail([v / line(i, o) for i, o, v in sized if line(i, o) > 0], p)
        goal = check.target / tail
        budget = d_line.solve(goal - t_line.value(inp))
        inputs = t_line.solve(goal - d_line.value(out - 1))
        fit_text = (
            f"fits: TTFT {_num(t_line.slope)} ms per input token, {_num(d_line.slope)} ms per output token"
        )
        options = []
        if budget is not None and budget >= 1:
            options.append(f"cap the output at ~{_tokens(budget + 1)} tokens (now up to {_tokens(out)})")
        if inputs is not None and inputs >= 1:
            options.append(f"keep the input under ~{_tokens(inputs)} tokens (now up to {_tokens(inp)})")
        if not options:
            return (
                f"Prediction: no input or output length alone brings {check.label} under "
                f"{_num(check.target)} ms ({fit_text}): it needs a lever."
            )
        return f"Prediction: {check.label} would hold if you " + " or ".join(options) + f" ({fit_text})."
    if PHASE_OF[check.metric] == "decode" and d_line is not None:
        return (
            f"Prediction: lengths do not fix this: decode costs {_num(d_line.slope)} ms per output token "
            "at every output length in the fit; it needs a decode lever (speculative decoding, "
            "quantization, batching) or a faster device."
        )
    return None


def _tokens(value: float) -> str:
    return f"{round(value):,}"


def _tail(ratios: Sequence[float], percentile: float) -> float:
    """Measured / fitted at the percentile: how far above the line the p-th request sits (≥ 1)."""
    return max(measured_percentile(ratios, percentile), 1.0) if ratios else 1.0
