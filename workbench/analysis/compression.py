"""Does prompt compression pay on TTFT? Its break-even, measured on paired trials.

Compressing is itself a prefill (the compressor reads the whole prompt), so it pays only when it
costs less than the target's prefill it saves. Per compressing variant × workload, each of its trials
is paired with the reference variant's trial of the same (workload, prompt, repetition)
(:func:`workbench.analysis.paired.match_trials`; the disturbed-trial rule of the tables applies
before), and per pair:

- ``saved = TTFT_ref − (TTFT_var − compress_ms)``: the prefill time the shorter prompt saved,
  measured (the variant's TTFT less its compression is the prefill of what was left);
- ``cost = compress_ms``.

From the pairs: ``saved_ms`` (their mean) and ``cost_fraction = mean(cost) / mean(saved)`` — what
compressing costs per millisecond of prefill it saves at the run's prompt lengths; at or above 1 it
does not pay at this ratio on this hardware. Both carry a 95 % bootstrap interval that resamples
pairs within each prompt (the prompts are fixed, their repetitions are the sample), as the paired
speed-ups do (:mod:`.paired`); none with one pair per prompt.

The **break-even length**: lines fitted to the pairs against the prompt length (``saved = s0 + s1 n``,
``cost = c0 + c1 n``) cross where the net gain ``(s0 − c0) + (s1 − c1) n`` is 0 (:func:`crossing`):
above ``n*`` it pays (``s1 > c1``), or below it (``s1 < c1``), or at every length, or at none. It
is computed only from prompts of at least two lengths and with both slopes positive (a slope that
is not: noise, or too narrow a range); otherwise ``no_break_even`` says why. Its interval comes from
the same resamples (a resample whose lines cross on the other side counts as 0 or ∞ tokens).

The parts compression may not drop (``trials.compress_protected``): where they exceed the budget
the kept share stays above the one asked, and ``protected_parts`` says which part held how many
tokens (the median over those trials).
"""

from __future__ import annotations

import dataclasses
import json
import math
import statistics
from collections import defaultdict
from collections.abc import Hashable, Mapping, Sequence
from dataclasses import dataclass, field, fields, replace
from typing import Literal

import numpy as np
import numpy.typing as npt

from workbench.analysis.paired import match_trials
from workbench.analysis.stats import BOOTSTRAP_RESAMPLES, SEED
from workbench.formatting import tokens
from workbench.store.records import TrialRecord

__all__ = [
    "CompressionBreakEven",
    "Crossing",
    "compression_break_even",
    "crossing",
    "fit",
    "paired_saving",
]

#: below this share of resamples with both slopes positive the break-even gets no interval
MIN_RESAMPLES_FITTED = 0.9

CrossingKind = Literal["above", "below", "any", "never"]


def paired_saving(ref_ttft_ms: float, ttft_ms: float, compress_ms: float) -> float:
    """The prefill time one pair measured as saved: the reference's TTFT less the variant's prefill
    (its TTFT less its compression)."""
    return ref_ttft_ms - (ttft_ms - compress_ms)


def fit(xs: Sequence[float], ys: Sequence[float]) -> tuple[float, float] | None:
    """Least-squares intercept and slope of ``y`` against ``x``; None when ``x`` does not vary."""
    x, y = np.asarray(xs, dtype=float), np.asarray(ys, dtype=float)
    if x.size < 2:
        return None
    dx = x - x.mean()
    sxx = float((dx * dx).sum())
    if sxx == 0.0:
        return None
    slope = float((dx * (y - y.mean())).sum()) / sxx
    return float(y.mean()) - slope * float(x.mean()), slope


@dataclass(frozen=True)
class Crossing:
    """Where the fitted saving meets the fitted cost: compression pays ``above`` / ``below`` ``tokens``
    prompt tokens, at ``any`` length (``tokens`` None), or at ``never`` a length."""

    kind: CrossingKind
    tokens: float | None = None


def crossing(s0: float, s1: float, c0: float, c1: float) -> Crossing | None:
    """The break-even of the lines ``saved = s0 + s1 n`` and ``cost = c0 + c1 n`` over prompt lengths
    ``n > 0``; None when a slope is not positive (the lines cannot say)."""
    if s1 <= 0 or c1 <= 0:
        return None
    g0, g1 = s0 - c0, s1 - c1  # the net gain's line
    if g1 == 0:
        return Crossing("any" if g0 > 0 else "never")
    n = -g0 / g1
    if g1 > 0:
        return Crossing("any") if n <= 0 else Crossing("above", n)
    return Crossing("never") if n <= 0 else Crossing("below", n)


@dataclass(frozen=True)
class CompressionBreakEven:
    variant: str
    workload: str
    trials: int
    input_tokens: float  # the prompts' median length (the target's tokens)
    requested_rate: float | None  # the share of the prompt asked to be kept (median)
    achieved_rate: float  # the share kept (median)
    compress_ms: float  # median compression time
    compress_ms_per_token: float  # median compress_ms / input_tokens
    prefill_ms_per_token: float | None  # the reference's median TTFT / input_tokens (None: no trials)
    # -- measured on pairs with the reference's trials
    pairs: int = 0
    saved_ms: float | None = None  # mean prefill time saved per pair (paired_saving)
    saved_ms_lo: float | None = None
    saved_ms_hi: float | None = None
    cost_fraction: float | None = None  # mean compress_ms / mean saved_ms (None: nothing saved)
    cost_fraction_lo: float | None = None
    cost_fraction_hi: float | None = None
    # -- the break-even length, from lines fitted to the pairs
    break_even: CrossingKind | None = None  # None: not computed (no_break_even says why)
    break_even_tokens: float | None = None  # n* for "above" / "below"
    break_even_lo: float | None = None  # its interval (math.inf: no finite bound)
    break_even_hi: float | None = None
    no_break_even: str | None = None
    #: the share of the bootstrap resamples whose lines both rose (an interval needs MIN_RESAMPLES_FITTED)
    break_even_fitted: float | None = None
    lengths: tuple[float, float] | None = None  # the shortest and longest paired prompt
    # -- what it could not drop (trials.compress_protected)
    budget_tokens: float | None = None  # median budget (rate × input_tokens, or target_tokens)
    over_budget: int = 0  # trials whose kept parts alone exceeded the budget
    protected_parts: Mapping[str, float] = field(default_factory=dict)  # median tokens per kept part

    @property
    def pays(self) -> bool | None:
        return None if self.cost_fraction is None else self.cost_fraction < 1.0

    def to_dict(self) -> dict[str, object]:
        """The fields as JSON takes them: an interval's end with no finite bound (∞) as None."""
        return {
            k: None if isinstance(v, float) and math.isinf(v) else v
            for k, v in dataclasses.asdict(self).items()
        }

    def with_cheaper_compressor(self, times: float) -> float | None:
        """The cost fraction a compressor ``times`` cheaper would have."""
        return None if self.cost_fraction is None else self.cost_fraction / times


def _protected(trial: TrialRecord) -> dict[str, int]:
    if not trial.compress_protected:
        return {}
    try:
        data = json.loads(trial.compress_protected)
    except ValueError:
        return {}
    return {str(k): int(v) for k, v in data.items()} if isinstance(data, dict) else {}


def _budget(trial: TrialRecord) -> float | None:
    if trial.compress_rate is None or not trial.input_tokens:
        return None
    return trial.compress_rate * trial.input_tokens


def _resample_index(strata: Sequence[Hashable], resamples: int) -> npt.NDArray[np.float64] | None:
    """``[resamples, pairs]`` indices: each resample draws each prompt's pairs from its own, with
    replacement; None when no prompt has two pairs (nothing says how a pair varies)."""
    groups: dict[Hashable, list[int]] = defaultdict(list)
    for i, key in enumerate(strata):
        groups[key].append(i)
    if all(len(g) < 2 for g in groups.values()):
        return None
    rng = np.random.default_rng(SEED)
    cols = [np.asarray(g)[rng.integers(0, len(g), size=(resamples, len(g)))] for g in groups.values()]
    return np.concatenate(cols, axis=1)


def _lines(
    x: npt.NDArray[np.float64], y: npt.NDArray[np.float64]
) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.float64]]:
    """Row-wise least-squares intercepts and slopes (NaN where a row's ``x`` does not vary)."""
    mx, my = x.mean(axis=1, keepdims=True), y.mean(axis=1, keepdims=True)
    sxx = ((x - mx) ** 2).sum(axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        slope = np.where(sxx > 0, ((x - mx) * (y - my)).sum(axis=1) / sxx, np.nan)
    return my[:, 0] - slope * mx[:, 0], slope


def _on_side(c: Crossing | None, kind: CrossingKind) -> float | None:
    """A resample's crossing as tokens on the estimate's side: ``above`` (pays above n; at any length
    = 0, never / only below = ∞), or ``below`` (pays below n; never = 0, any / only above = ∞)."""
    if c is None:
        return None
    if kind in ("above", "any"):
        return {"above": c.tokens, "any": 0.0}.get(c.kind, math.inf)
    return {"below": c.tokens, "never": 0.0}.get(c.kind, math.inf)


def _quantile(values: list[float], q: float) -> float:
    """The ``q`` quantile without interpolation (the values may hold ∞)."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, math.ceil(q * len(ordered)) - 1))]


@dataclass(frozen=True)
class _Paired:
    """The paired figures of one variant × workload (the fields of :class:`CompressionBreakEven` of
    the same names)."""

    pairs: int = 0
    saved_ms: float | None = None
    saved_ms_lo: float | None = None
    saved_ms_hi: float | None = None
    cost_fraction: float | None = None
    cost_fraction_lo: float | None = None
    cost_fraction_hi: float | None = None
    break_even: CrossingKind | None = None
    break_even_tokens: float | None = None
    break_even_lo: float | None = None
    break_even_hi: float | None = None
    no_break_even: str | None = None
    break_even_fitted: float | None = None
    lengths: tuple[float, float] | None = None


def _paired(
    n: list[float],
    saved: list[float],
    cost: list[float],
    strata: list[str],
    resamples: int,
) -> _Paired:
    """The paired figures of one variant × workload (the fields of :class:`CompressionBreakEven`)."""
    mean_saved, mean_cost = statistics.fmean(saved), statistics.fmean(cost)
    out = _Paired(
        pairs=len(saved),
        lengths=(min(n), max(n)),
        saved_ms=mean_saved,
        cost_fraction=mean_cost / mean_saved if mean_saved > 0 else None,
    )
    # the break-even
    kind: CrossingKind | None = None
    saved_line, cost_line = fit(n, saved), fit(n, cost)
    if saved_line is None or cost_line is None:
        out = replace(
            out,
            no_break_even=(
                f"the prompts have one length ({tokens(n[0])} tokens): a break-even length needs prompts of "
                "different lengths"
            ),
        )
    elif cost_line[1] <= 0:
        out = replace(
            out,
            no_break_even=(
                "the compression time fitted against the prompt length does not grow with it (slope ≤ 0: "
                "noise, or too narrow a range of lengths)"
            ),
        )
    elif saved_line[1] <= 0:
        out = replace(
            out,
            no_break_even=(
                "the prefill time saved, fitted against the prompt length, does not grow with it (slope "
                "≤ 0: noise, or too narrow a range of lengths)"
            ),
        )
    else:
        c = crossing(saved_line[0], saved_line[1], cost_line[0], cost_line[1])
        assert c is not None  # both slopes positive
        kind = c.kind
        out = replace(out, break_even=c.kind, break_even_tokens=c.tokens)
    # the intervals
    index = _resample_index(strata, resamples)
    if index is None:
        return out
    s, k, x = np.asarray(saved)[index], np.asarray(cost)[index], np.asarray(n, dtype=float)[index]
    ms, mk = s.mean(axis=1), k.mean(axis=1)
    lo, hi = (float(v) for v in np.percentile(ms, [2.5, 97.5]))
    out = replace(out, saved_ms_lo=lo, saved_ms_hi=hi)
    if out.cost_fraction is not None:
        ratios = [float(a / b) if b > 0 else math.inf for a, b in zip(mk, ms, strict=True)]
        out = replace(
            out, cost_fraction_lo=_quantile(ratios, 0.025), cost_fraction_hi=_quantile(ratios, 0.975)
        )
    if kind is not None:
        s0, s1 = _lines(x, s)
        c0, c1 = _lines(x, k)
        sides = [_on_side(crossing(*map(float, line)), kind) for line in zip(s0, s1, c0, c1, strict=True)]
        fitted = [v for v in sides if v is not None]
        out = replace(out, break_even_fitted=len(fitted) / len(sides))
        if len(fitted) >= MIN_RESAMPLES_FITTED * len(sides):
            out = replace(out, break_even_lo=_quantile(fitted, 0.025), break_even_hi=_quantile(fitted, 0.975))
    return out


def compression_break_even(
    trials: Sequence[TrialRecord], reference: str | None, *, resamples: int = BOOTSTRAP_RESAMPLES
) -> list[CompressionBreakEven]:
    """Per variant × workload with ``compress_ms`` recorded (ok, measured trials: the caller has left
    out what the tables leave out)."""
    used = [t for t in trials if t.status == "ok" and not t.warmup]
    groups: dict[tuple[str, str], list[TrialRecord]] = {}
    for t in used:
        if t.compress_ms is not None and t.input_tokens:
            groups.setdefault((t.variant, t.workload), []).append(t)
    out = []
    for (variant, workload), mine in groups.items():
        refs = [t for t in used if t.variant == reference and t.workload == workload]
        base = [float(t.ttft_ms) / t.input_tokens for t in refs if t.ttft_ms is not None and t.input_tokens]
        n, saved, cost, strata = [], [], [], []
        for r, t in match_trials(refs, mine):
            if r.ttft_ms is None or t.ttft_ms is None or t.compress_ms is None:
                continue
            n.append(float(t.input_tokens or 0))
            saved.append(paired_saving(r.ttft_ms, t.ttft_ms, t.compress_ms))
            cost.append(t.compress_ms)
            strata.append(t.prompt_id)
        paired = (
            _paired(n, saved, cost, strata, resamples)
            if saved
            else _Paired(
                no_break_even="no trial of the reference variant ran the same prompt and repetition"
                if reference is not None and reference != variant
                else "no reference variant to pair with"
            )
        )
        budgets = [b for t in mine if (b := _budget(t)) is not None]
        over = [t for t in mine if (b := _budget(t)) is not None and sum(_protected(t).values()) > b]
        names = sorted({k for t in over for k in _protected(t)})
        out.append(
            CompressionBreakEven(
                variant=variant,
                workload=workload,
                trials=len(mine),
                input_tokens=statistics.median(float(t.input_tokens or 0) for t in mine),
                requested_rate=(
                    statistics.median(t.compress_rate for t in mine if t.compress_rate is not None)
                    if any(t.compress_rate is not None for t in mine)
                    else None
                ),
                achieved_rate=statistics.median(
                    1.0 - (t.trimmed_tokens or 0) / (t.input_tokens or 1) for t in mine
                ),
                compress_ms=statistics.median(float(t.compress_ms or 0.0) for t in mine),
                compress_ms_per_token=statistics.median(
                    float(t.compress_ms or 0.0) / (t.input_tokens or 1) for t in mine
                ),
                prefill_ms_per_token=statistics.median(base) if base else None,
                budget_tokens=statistics.median(budgets) if budgets else None,
                over_budget=len(over),
                protected_parts={k: statistics.median(_protected(t).get(k, 0) for t in over) for k in names},
                **{f.name: getattr(paired, f.name) for f in fields(paired)},
            )
        )
    return out
