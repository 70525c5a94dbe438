"""Statistics primitives (a leaf: numpy only): medians with bootstrap confidence intervals,
ratios of medians, a least-squares line.

Bootstrap resampling is stratified by prompt: a workload's prompts differ (chat turn 1 vs turn 6) far
more than repetitions of one prompt do, and every variant ran the same prompts. The seed is fixed: the
same data always gives the same interval.

From :data:`EXACT_FROM` values on, the bootstrap distribution of the median is computed instead of
sampled: a resample's median is at most ``x`` exactly when at least half its values are, and the
number of a stratum's resampled values at most ``x`` is binomial (``n_s`` draws, the stratum's share
at most ``x``), independently per stratum. The sum of those binomials is normal to far better than
the Monte-Carlo error of 2,000 resamples at these sizes, so the percentile interval comes from that
distribution directly — the same interval, without resampling thousands of times (what keeps a
10,000-trial run's analysis within seconds; ``benchmarks/analysis_scale.py`` checks the agreement).
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from dataclasses import asdict, dataclass
from math import erf, sqrt

import numpy as np
import numpy.typing as npt

__all__ = [
    "BOOTSTRAP_RESAMPLES",
    "SEED",
    "Estimate",
    "bootstrap_median",
    "fit_line",
    "measured_percentile",
    "speedup",
    "t_quantile",
]

BOOTSTRAP_RESAMPLES = 2000
#: from this many values on, the median's bootstrap distribution is computed, not sampled
EXACT_FROM = 400
SEED = 20261130  # fixed: the same data always gives the same interval


@dataclass(frozen=True)
class Estimate:
    """A median with its bootstrap 95 % confidence interval (``lo``/``hi`` are ``None`` for n < 2)."""

    value: float | None
    lo: float | None = None
    hi: float | None = None
    n: int = 0

    def to_dict(self) -> dict[str, object]:
        return asdict(self)


def _strata(
    values: Sequence[float | None], strata: Sequence[Hashable] | None
) -> list[npt.NDArray[np.float64]]:
    """Group non-missing values by stratum (the prompt): one array per stratum, the strata in the
    order their first value comes, each stratum's values in their order."""
    present = [v is not None for v in values]
    if not any(present):
        return []
    data = np.array(values, dtype=float)  # None reads NaN: left out by ``present``
    if strata is None:
        return [data[np.asarray(present)]]
    if len(strata) != len(values):
        raise ValueError(f"{len(values)} values but {len(strata)} strata")
    mask = np.asarray(present)
    codes, data = _codes(strata)[mask], data[mask]
    # numbered again in the order of the first value present of each
    numbers, first, inverse = np.unique(codes, return_index=True, return_inverse=True)
    renumber = np.empty(numbers.size, dtype=np.int64)
    renumber[np.argsort(first)] = np.arange(numbers.size)
    codes = renumber[inverse.ravel()]
    order = np.argsort(codes, kind="stable")
    return np.split(data[order], np.cumsum(np.bincount(codes))[:-1])


#: the last tuple of strata :func:`_codes` numbered, and its numbers (the summaries pass one tuple
#: of prompts for every metric of a group: they are numbered once; a tuple cannot change since)
_last_codes: tuple[tuple[Hashable, ...], npt.NDArray[np.int64]] | None = None


def _codes(strata: Sequence[Hashable]) -> npt.NDArray[np.int64]:
    """Each stratum's number, in the order the strata first come."""
    global _last_codes
    last = _last_codes
    if last is not None and last[0] is strata:
        return last[1]
    index: dict[Hashable, int] = {}
    codes = np.array([index.setdefault(k, len(index)) for k in strata], dtype=np.int64)
    if isinstance(strata, tuple):
        _last_codes = (strata, codes)
    return codes


def _resampled_medians(
    groups: list[npt.NDArray[np.float64]], resamples: int, rng: np.random.Generator
) -> npt.NDArray[np.float64]:
    """Medians of ``resamples`` bootstrap samples, drawn with replacement *within* each stratum, so
    that every resample holds the same prompts as the data (prompts differ far more than repetitions
    of one prompt; resampling across them would measure the prompt mix, not the variant)."""
    parts = [g[rng.integers(0, g.size, size=(resamples, g.size))] for g in groups]
    return np.median(np.concatenate(parts, axis=1), axis=1)


def _median_z(
    groups: list[npt.NDArray[np.float64]],
) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.float64]]:
    """The sorted pooled values and, at each, the standard score of "a resample's median is at most
    that value" (:func:`_median_distribution` is its normal probability)."""
    pool = np.concatenate(groups)
    order = np.argsort(pool, kind="stable")
    values = pool[order]
    n = values.size
    sizes = np.array([g.size for g in groups])
    label = np.repeat(np.arange(len(groups)), sizes)[order]  # each sorted value's stratum
    # Counted along the sorted pool, with c_s the values of stratum s at most x and n_s its size:
    # mean = sum c_s (the pooled values at most x), var = sum c_s (1 - c_s / n_s) = mean - sum c_s² / n_s,
    # where sum c_s² / n_s grows by (2 r + 1) / n_s at the value of rank r in its stratum: one running
    # sum for all strata, read at the last of equal values.
    by_stratum = np.argsort(label, kind="stable")
    rank = np.empty(n)
    rank[by_stratum] = np.arange(n) - np.repeat(np.cumsum(sizes) - sizes, sizes)
    squares = np.cumsum((2 * rank + 1) / sizes[label])
    last = np.searchsorted(values, values, side="right") - 1
    mean = (last + 1).astype(float)
    var = mean - squares[last]
    var[var < 1e-6] = 0.0  # every stratum wholly at most x or above it (else var >= 1/2): rounding
    need = n / 2 + 0.5  # at least half the resample at most x (a continuity-corrected middle)
    sd = np.sqrt(var)
    with np.errstate(divide="ignore", invalid="ignore"):
        z = np.where(sd > 0, (mean - need) / np.where(sd > 0, sd, 1), np.where(mean >= need, np.inf, -np.inf))
    return values, z


def _phi(v: float) -> float:
    """The standard normal distribution function (``±inf``: 1 or 0)."""
    return 0.5 * (1 + erf(v / sqrt(2))) if np.isfinite(v) else float(v > 0)


def _median_distribution(
    groups: list[npt.NDArray[np.float64]],
) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.float64]]:
    """The stratified bootstrap distribution of the pooled median: the sorted pooled values and, at
    each, the probability that a resample's median is at most that value (see the module docstring)."""
    values, z = _median_z(groups)
    cdf = np.fromiter((_phi(v) for v in z), float, values.size)
    return values, np.maximum.accumulate(cdf)


def _median_quantiles(groups: list[npt.NDArray[np.float64]], qs: Sequence[float]) -> list[float]:
    """:func:`_quantiles` of :func:`_median_distribution`, with the normal probability computed only
    where it can reach each ``q``: from the first value whose score is within a margin of the
    quantile's (below it, the probability is below ``q`` by far more than rounding) — the same
    values, without a probability for each of thousands."""
    values, z = _median_z(groups)
    out = []
    for q in qs:
        near = np.flatnonzero(z >= _normal_quantile(q) - 1e-6)
        pick = values.size - 1
        for i in near[:1].tolist():
            while i < values.size - 1 and _phi(float(z[i])) < q:
                i += 1
            pick = i
        out.append(float(values[pick]))
    return out


def _normal_quantile(q: float) -> float:
    """The standard normal quantile of ``q`` (to 1e-9: bisection on :func:`_phi`)."""
    lo, hi = -40.0, 40.0
    for _ in range(100):
        mid = (lo + hi) / 2
        if _phi(mid) < q:
            lo = mid
        else:
            hi = mid
    return lo


def _quantiles(
    values: npt.NDArray[np.float64], cdf: npt.NDArray[np.float64], qs: Sequence[float]
) -> list[float]:
    """The smallest value whose cumulative probability reaches each of ``qs``."""
    return [float(values[min(int(np.searchsorted(cdf, q, side="left")), values.size - 1)]) for q in qs]


def _sample_medians(
    groups: list[npt.NDArray[np.float64]], resamples: int, rng: np.random.Generator
) -> npt.NDArray[np.float64]:
    """``resamples`` bootstrap medians: drawn from the computed distribution for large samples,
    else by resampling."""
    if sum(g.size for g in groups) >= EXACT_FROM:
        values, cdf = _median_distribution(groups)
        picks = np.searchsorted(cdf, rng.random(resamples), side="left")
        return values[np.minimum(picks, values.size - 1)]
    return _resampled_medians(groups, resamples, rng)


def bootstrap_median(
    values: Sequence[float | None],
    strata: Sequence[Hashable] | None = None,
    *,
    resamples: int = BOOTSTRAP_RESAMPLES,
) -> Estimate:
    """Median with a bootstrap 95 % CI, resampling within ``strata`` (e.g. prompt ids) when given."""
    groups = _strata(values, strata)
    n = sum(g.size for g in groups)
    if n == 0:
        return Estimate(None, n=0)
    median = float(np.median(np.concatenate(groups)))
    if all(g.size < 2 for g in groups):
        return Estimate(median, n=n)
    if n >= EXACT_FROM:
        lo, hi = _median_quantiles(groups, (0.025, 0.975))
        return Estimate(median, lo, hi, n)
    samples = _resampled_medians(groups, resamples, np.random.default_rng(SEED))
    lo, hi = np.percentile(samples, [2.5, 97.5])
    return Estimate(median, float(lo), float(hi), n)


def speedup(
    numerator: Sequence[float | None],
    denominator: Sequence[float | None],
    numerator_strata: Sequence[Hashable] | None = None,
    denominator_strata: Sequence[Hashable] | None = None,
    *,
    resamples: int = BOOTSTRAP_RESAMPLES,
) -> Estimate | None:
    """median(numerator) / median(denominator), with a bootstrap CI resampling both groups (within
    strata when given)."""
    a, b = _strata(numerator, numerator_strata), _strata(denominator, denominator_strata)
    na, nb = sum(g.size for g in a), sum(g.size for g in b)
    if na == 0 or nb == 0:
        return None
    med_b = float(np.median(np.concatenate(b)))
    if med_b == 0:
        return None
    value = float(np.median(np.concatenate(a))) / med_b
    if all(g.size < 2 for g in a) or all(g.size < 2 for g in b):
        return Estimate(value, n=min(na, nb))
    rng = np.random.default_rng(SEED)
    ra, rb = _sample_medians(a, resamples, rng), _sample_medians(b, resamples, rng)
    ratios = ra[rb > 0] / rb[rb > 0]
    lo, hi = np.percentile(ratios, [2.5, 97.5])
    return Estimate(value, float(lo), float(hi), min(na, nb))


def measured_percentile(
    values: Sequence[float] | npt.NDArray[np.float64], percentile: float, higher_is_better: bool = False
) -> float:
    """The value that ``percentile`` % of ``values`` reach: the inverted-CDF percentile (a lower-is-better
    metric), or its mirror image (higher is better: the value at least that share reach or exceed)."""
    a = np.asarray(values, dtype=float)
    if higher_is_better:
        return -float(np.percentile(-a, percentile, method="inverted_cdf"))
    return float(np.percentile(a, percentile, method="inverted_cdf"))


def fit_line(xs: Sequence[float], ys: Sequence[float]) -> tuple[float | None, float | None]:
    """Least-squares slope and intercept; ``(None, None)`` when x does not vary."""
    x, y = np.asarray(xs, dtype=float), np.asarray(ys, dtype=float)
    if x.size < 2 or float(np.ptp(x)) == 0:
        return None, None
    slope, intercept = np.polyfit(x, y, 1)
    return float(slope), float(intercept)


# Student's t quantiles for 1-30 degrees of freedom (two-sided 95 %, and the 80 % power term)
_T975 = (12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179, 2.160, 2.145,
         2.131, 2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048,
         2.045, 2.042)  # fmt: skip
_T80 = (1.376, 1.061, 0.978, 0.941, 0.920, 0.906, 0.896, 0.889, 0.883, 0.879, 0.876, 0.873, 0.870, 0.868,
        0.866, 0.865, 0.863, 0.862, 0.861, 0.860, 0.859, 0.858, 0.858, 0.857, 0.856, 0.856, 0.855, 0.855,
        0.854, 0.854)  # fmt: skip
_Z = {0.975: 1.959964, 0.8: 0.841621}


def t_quantile(p: float, df: int) -> float:
    """Student's t quantile for ``p`` = 0.975 or 0.8 at ``df`` degrees of freedom (a table to 30,
    the Cornish-Fisher expansion beyond: within 0.001 of the exact value there)."""
    if p not in _Z:
        raise ValueError(f"t_quantile knows p = 0.975 and 0.8, not {p}")
    if df < 1:
        raise ValueError(f"degrees of freedom must be at least 1, got {df}")
    if df <= 30:
        return (_T975 if p == 0.975 else _T80)[df - 1]
    z = _Z[p]
    return z + (z**3 + z) / (4 * df) + (5 * z**5 + 16 * z**3 + 3 * z) / (96 * df**2)
