"""Paired speed-ups: a variant against the baseline from pairs of trials of the same prompt in the same
round (docs/analysis.md "Paired statistics").

Two trials of one (workload, prompt, repetition) ran seconds apart when the run was interleaved, so
whatever the machine did then touched both; their ratio cancels it, and the ratios' spread is the
noise that is left. The speed-up is the geometric mean of the per-pair ratios
(``exp(mean(log(ref / variant)))`` for times, ``variant / ref`` for rates), with a bootstrap 95 % CI
that resamples pairs within each prompt (the prompts are fixed; their repetitions are the sample).
Above :data:`NORMAL_FROM` pairs the bootstrap distribution of that mean is normal to within its own
Monte-Carlo error, so its exact moments are used instead of resampling (what keeps a 10,000-trial run
fast).

The **minimum detectable effect** is the smallest true speed-up this run's noise would find
significant 4 times in 5 (95 % two-sided, 80 % power): ``exp(2.80 × SE) − 1`` of the mean log-ratio.

Disturbed trials (:mod:`workbench.run.disturbance`) are left out of the pairs by default when they are
few (at most :data:`EXCLUDE_DISTURBED_UP_TO` of the measured trials) and spread over the variants (none
has more than :data:`SELF_DISTURBED_SHARE` of its own disturbed): a pair with a disturbed trial is
dropped whole, so both variants lose the same rounds. When more are disturbed, dropping them would
leave a biased remainder; and a variant that is disturbed most of the time disturbs itself (more
threads than cores), so its slowness is real. Then they stay in and the output says so.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Hashable, Sequence
from dataclasses import asdict, dataclass
from itertools import compress
from operator import attrgetter

import numpy as np
import numpy.typing as npt

from workbench.analysis.stats import BOOTSTRAP_RESAMPLES, SEED, Estimate, t_quantile
from workbench.store.records import TrialRecord

__all__ = [
    "EXCLUDE_DISTURBED_UP_TO",
    "NORMAL_FROM",
    "SELF_DISTURBED_SHARE",
    "Disturbance",
    "PairedEstimate",
    "disturbance",
    "drift",
    "match_trials",
    "mde_with",
    "metric_value",
    "metric_values",
    "paired_speedup",
    "paired_trials",
    "pairs_needed",
    "widest_ci",
]

#: from this many pairs the CI comes from the exact bootstrap moments instead of resampling
NORMAL_FROM = 400
#: disturbed trials are excluded by default when they are at most this share of the measured ones...
EXCLUDE_DISTURBED_UP_TO = 0.25
#: ... and no variant has more than this share of its own disturbed (then it disturbs itself: e.g.
#: more threads than cores; its slowness is real and must stay in)
SELF_DISTURBED_SHARE = 0.5
_Z95, _Z80 = 1.959964, 0.841621


@dataclass(frozen=True)
class PairedEstimate(Estimate):
    """A speed-up from paired trials: geometric mean of the per-pair ratios, its bootstrap 95 % CI,
    the number of pairs (``n``), and the minimum detectable effect at this run's noise (a fraction).
    ``method`` "unpaired": a ratio of medians, for trials that do not pair up."""

    mde: float | None = None
    method: str = "paired"
    #: worker-process pairs the pairs came from, when more than one (the CI is then clustered on them)
    clusters: int | None = None
    #: the t quantiles' degrees of freedom, for clustered pairs
    df: int | None = None
    #: clustered pairs: how far one process pair's mean log-ratio strays beyond what its own pairs
    #: explain (``τ``, as a fraction: 0.05 = two processes 5 % apart) — the process-to-process spread —
    #: and how much a pair varies within its process pair (``s_w``)
    process_sd: float | None = None
    pair_sd: float | None = None

    @property
    def half_width(self) -> float | None:
        """The CI's half-width as a fraction of the estimate (±)."""
        if self.value is None or self.lo is None or self.hi is None or self.value <= 0:
            return None
        return max(self.hi / self.value - 1, 1 - self.lo / self.value)

    def to_dict(self) -> dict[str, object]:
        return {**asdict(self), "half_width": self.half_width}


def metric_value(trial: TrialRecord, metric: str) -> float | None:
    """One trial's figure named ``metric``: a column of its record, or ``decode_phase_ms`` (e2e − TTFT:
    the decode phase as the caller sees it), computed from two of them."""
    if metric == "decode_phase_ms":
        e2e, ttft = trial.e2e_ms, trial.ttft_ms
        return e2e - ttft if e2e is not None and ttft is not None else None
    value: float | None = getattr(trial, metric)
    return value


def metric_values(trials: Sequence[TrialRecord], metric: str) -> list[float | None]:
    """:func:`metric_value` of each trial, in order."""
    if metric == "decode_phase_ms":
        return [metric_value(t, metric) for t in trials]
    return list(map(attrgetter(metric), trials))


#: a pair of trials: the reference's and the variant's of the same (workload, prompt, repetition)
Pair = tuple[TrialRecord, TrialRecord]


def match_trials(reference: Sequence[TrialRecord], variant: Sequence[TrialRecord]) -> list[Pair]:
    """The variant's trials with a partner of the same (workload, prompt, repetition) in the
    reference, in the variant's order: what :func:`paired_trials` pairs, whatever the metric."""
    ref = {(t.workload, t.prompt_id, t.repetition): t for t in reference}
    pairs = []
    for t in variant:
        r = ref.get((t.workload, t.prompt_id, t.repetition))
        if r is not None:
            pairs.append((r, t))
    return pairs


def pair_values(
    reference: Sequence[TrialRecord], variant: Sequence[TrialRecord], metric: str
) -> tuple[list[float], list[float], list[str]]:
    """(reference values, variant values, prompt of each pair) for the trials both sides have of the
    same (workload, prompt, repetition), both with a positive ``metric``."""
    a, b, strata, _ = paired_trials(reference, variant, metric)
    return a, b, strata


def paired_trials(
    reference: Sequence[TrialRecord],
    variant: Sequence[TrialRecord],
    metric: str,
    *,
    pairs: Sequence[Pair] | None = None,
) -> tuple[list[float], list[float], list[str], list[tuple[int, int] | None]]:
    """:func:`pair_values` and each pair's cluster: the two worker processes that ran it
    (``(reference worker, variant worker)``; None where a trial does not say, as in older runs).
    ``pairs``: :func:`match_trials` of the same two, when the caller has them (several metrics)."""
    if pairs is None:
        pairs = match_trials(reference, variant)
    if not pairs:
        return [], [], [], []
    refs, mine = [r for r, _ in pairs], [t for _, t in pairs]
    x = np.array(metric_values(refs, metric), dtype=float)  # None reads NaN: not > 0
    y = np.array(metric_values(mine, metric), dtype=float)
    with np.errstate(invalid="ignore"):
        keep = (x > 0) & (y > 0)
    kept = keep.tolist()
    strata = [t.prompt_id for t in compress(mine, kept)]
    clusters = [
        None if r.worker is None or t.worker is None else (r.worker, t.worker)
        for r, t in compress(pairs, kept)
    ]
    return x[keep].tolist(), y[keep].tolist(), strata, clusters


def paired_speedup(
    reference: Sequence[float],
    variant: Sequence[float],
    strata: Sequence[Hashable],
    *,
    higher_is_better: bool,
    clusters: Sequence[Hashable] | None = None,
    resamples: int = BOOTSTRAP_RESAMPLES,
) -> PairedEstimate | None:
    """The variant's speed-up over the reference from aligned pairs (see the module docstring);
    ``clusters``: the worker-process pair of each pair (:func:`paired_trials`)."""
    a, b = np.asarray(reference, dtype=float), np.asarray(variant, dtype=float)
    if a.size == 0:
        return None
    d = np.log(b / a) if higher_is_better else np.log(a / b)
    mean = float(d.mean())
    n = int(d.size)
    if n < 2:
        return PairedEstimate(math.exp(mean), n=n)
    groups: dict[Hashable, list[float]] = defaultdict(list)
    for value, key in zip(d.tolist(), strata, strict=True):
        groups[key].append(value)
    arrays = [np.asarray(g) for g in groups.values()]
    if all(g.size < 2 for g in arrays):  # one pair per prompt: nothing says how much a pair varies
        return PairedEstimate(math.exp(mean), n=n)
    # the bootstrap variance of the stratified mean: sum over prompts of (n_s/n)^2 * var_s / n_s
    se = math.sqrt(sum((g.size / n) ** 2 * float(g.var()) / g.size for g in arrays))
    labels = set(clusters or ())
    if len(labels) >= 2 and None not in labels:
        return _clustered(d, strata, clusters, se)  # type: ignore[arg-type]
    if se == 0.0:
        return PairedEstimate(math.exp(mean), math.exp(mean), math.exp(mean), n, 0.0)
    if n >= NORMAL_FROM:
        lo, hi = mean - _Z95 * se, mean + _Z95 * se
    else:
        rng = np.random.default_rng(SEED)
        total = np.zeros(resamples)
        for g in arrays:
            total += g[rng.integers(0, g.size, size=(resamples, g.size))].sum(axis=1)
        lo, hi = np.percentile(total / n, [2.5, 97.5])
    return PairedEstimate(
        math.exp(mean), math.exp(float(lo)), math.exp(float(hi)), n, math.exp((_Z95 + _Z80) * se) - 1
    )


def _clustered(
    d: npt.NDArray[np.float64], strata: Sequence[Hashable], clusters: Sequence[Hashable], iid_se: float
) -> PairedEstimate:
    """The speed-up when its pairs come from several worker-process pairs (``workers =
    "per-repetition"``). Two processes of one variant can differ by several per cent for minutes (a
    process's memory placement, its thread pool's state after a contended stretch), and that moves
    every pair they ran alike, which pairing cannot cancel. So the variance of the mean log-ratio is
    split (one-way random effects over the process pairs, on each pair's log-ratio less its prompt's
    mean): what varies within a process pair (``s_w²``, pooled) and, estimated by the method of
    moments, what varies between them (``τ²``, 0 when the process pairs agree as well as their own
    pairs do): ``V = s_w² / n + τ² / G``. The CI and MDE use Student's t with Welch-Satterthwaite's
    degrees of freedom: about ``G − 1`` when the processes differ (few processes, a wide interval:
    three of them cannot tell a slow process from a slow variant), the pairs' own when they do not."""
    n = int(d.size)
    mean = float(d.mean())
    by_prompt: dict[Hashable, list[int]] = defaultdict(list)
    for i, key in enumerate(strata):
        by_prompt[key].append(i)
    e = d.copy()
    for idx in by_prompt.values():
        e[idx] -= d[idx].mean()
    by_cluster: dict[Hashable, list[int]] = defaultdict(list)
    for i, label in enumerate(clusters):
        by_cluster[label].append(i)
    g = len(by_cluster)
    means = {label: float(e[idx].mean()) for label, idx in by_cluster.items()}
    within = sum(float(((e[idx] - means[label]) ** 2).sum()) for label, idx in by_cluster.items())
    df_w = n - g - (len(by_prompt) - 1)
    between = sum(len(idx) * means[label] ** 2 for label, idx in by_cluster.items()) / (g - 1)
    s_w2 = within / df_w if df_w > 0 else 0.0
    tau2 = max(0.0, (between - s_w2) / (n / g)) if df_w > 0 else between / (n / g)
    v_w, v_b = s_w2 / n, tau2 / g
    var = v_w + v_b
    process_sd, pair_sd = math.expm1(math.sqrt(tau2)), math.expm1(math.sqrt(s_w2))
    if var <= 0.0:
        return PairedEstimate(
            math.exp(mean),
            math.exp(mean),
            math.exp(mean),
            n,
            0.0,
            clusters=g,
            process_sd=process_sd,
            pair_sd=pair_sd,
        )
    terms = (v_w**2 / df_w if df_w > 0 else 0.0) + (v_b**2 / (g - 1))
    # Welch-Satterthwaite's df is a real number, floored to an integer for t; with one variance
    # component zero it is exactly df_w in exact arithmetic, which floating point lands a few ULPs
    # either side of: floored as it comes, the df (and so the CI) would depend on the BLAS kernel
    df = max(1, math.floor(var**2 / terms * (1 + 1e-9))) if terms > 0 else max(1, df_w)
    se = max(math.sqrt(var), iid_se)
    t95, t80 = t_quantile(0.975, df), t_quantile(0.8, df)
    return PairedEstimate(
        math.exp(mean),
        math.exp(mean - t95 * se),
        math.exp(mean + t95 * se),
        n,
        math.exp((t95 + t80) * se) - 1,
        clusters=g,
        df=df,
        process_sd=process_sd,
        pair_sd=pair_sd,
    )


def _quantiles(df: int | None) -> float:
    """The MDE's multiplier of the standard error: z's, or t's at ``df`` degrees of freedom."""
    if df is None:
        return _Z95 + _Z80
    return t_quantile(0.975, max(1, df)) + t_quantile(0.8, max(1, df))


def mde_with(est: PairedEstimate, pairs: int) -> float | None:
    """The minimum detectable effect ``est``'s noise would give with ``pairs`` pairs instead of its
    own ``est.n`` (the standard error shrinks with the square root of the pairs; with clustered
    pairs the process pairs grow in proportion, and so do the t quantiles' degrees of freedom)."""
    if est.mde is None or est.n < 2 or pairs < 1:
        return None
    se = math.log1p(est.mde) / _quantiles(est.df)
    df = None if est.df is None else max(1, round(est.df * pairs / est.n))
    return math.expm1(_quantiles(df) * se * math.sqrt(est.n / pairs))


def pairs_needed(est: PairedEstimate, effect: float) -> int | None:
    """How many pairs it takes to detect a speed-up of ``effect`` (0.05 = 5 %) at ``est``'s noise."""
    if est.mde is None or est.n < 2 or effect <= 0:
        return None
    if est.clusters is None:
        return max(2, math.ceil(est.n * (math.log1p(est.mde) / math.log1p(effect)) ** 2))
    pairs = max(2, est.n // max(1, est.clusters))  # one more cluster at a time
    step = pairs
    while (mde := mde_with(est, pairs)) is not None and mde > effect and pairs < 1000 * est.n:
        pairs += step
    return pairs


@dataclass(frozen=True)
class Disturbance:
    """How many measured trials were disturbed, and whether the statistics leave them out."""

    disturbed: int
    measured: int
    excluded: bool
    reasons: tuple[str, ...] = ()  # a few examples
    kept_because: str | None = None  # why they stay in, when they do

    def to_dict(self) -> dict[str, object]:
        return asdict(self)

    def keeps(self, trial: TrialRecord) -> bool:
        """Whether the statistics use ``trial`` (False for a disturbed one when they are left out)."""
        return not (self.excluded and trial.disturbed)


def disturbance(trials: Sequence[TrialRecord], exclude: bool | None = None) -> Disturbance:
    """Count the disturbed measured trials; ``exclude`` None = the default rule (few: excluded)."""
    measured = [t for t in trials if t.status == "ok" and not t.warmup]
    bad = [t for t in measured if t.disturbed]
    kept = "asked for" if exclude is False else None
    if exclude is None:
        per_variant: dict[str, list[int]] = defaultdict(lambda: [0, 0])
        for t in measured:
            per_variant[t.variant][0] += bool(t.disturbed)
            per_variant[t.variant][1] += 1
        selfish = [v for v, (b, n) in per_variant.items() if b > SELF_DISTURBED_SHARE * n]
        if selfish:
            kept = (
                f"most of {selfish[0]}'s trials: it disturbs itself, e.g. more threads than cores, so its "
                "slowness is real"
            )
        elif len(bad) > EXCLUDE_DISTURBED_UP_TO * len(measured):
            kept = "too many to leave out: rerun on a quieter machine"
        exclude = bool(bad) and kept is None
    reasons = tuple(dict.fromkeys(str(t.disturbance or "") for t in bad[:3]))
    return Disturbance(len(bad), len(measured), bool(exclude and bad), reasons, None if exclude else kept)


def drift(trials: Sequence[TrialRecord], variant: str | None, metric: str = "e2e_ms") -> float | None:
    """How the machine's speed moved over the run, seen on one variant (the baseline): the median of
    its last quarter of rounds over its first quarter's, each trial taken relative to the median of
    its own prompt (so the prompt mix cancels). 1.00 = no drift; 1.10 = the last rounds took 10 %
    longer. None with fewer than 4 rounds."""
    rows = [
        t
        for t in trials
        if t.variant == variant and t.status == "ok" and not t.warmup and metric_value(t, metric)
    ]
    if len({(t.repetition, t.round) for t in rows}) < 4:
        return None
    by_prompt: dict[Hashable, list[float]] = defaultdict(list)
    for t in rows:
        by_prompt[(t.workload, t.prompt_id)].append(metric_value(t, metric) or 0.0)  # truthy in ``rows``
    medians = {k: float(np.median(v)) for k, v in by_prompt.items()}
    ordered = sorted(rows, key=lambda t: (t.round is None, t.round or 0, t.started_at or ""))
    relative = [(metric_value(t, metric) or 0.0) / medians[(t.workload, t.prompt_id)] for t in ordered]
    quarter = max(1, len(relative) // 4)
    first, last = float(np.median(relative[:quarter])), float(np.median(relative[-quarter:]))
    return last / first if first > 0 else None


def usable(trials: Sequence[TrialRecord], exclude_disturbed: bool | None = None) -> list[TrialRecord]:
    """The measured ok trials the speed-ups use: disturbed ones left out when the rule says so."""
    rule = disturbance(trials, exclude_disturbed)
    return [t for t in trials if t.status == "ok" and not t.warmup and rule.keeps(t)]


def widest_ci(trials: Sequence[TrialRecord], baseline: str) -> float | None:
    """The widest half-width (a fraction) among the paired e2e and decode speed-ups of every variant
    against ``baseline``, per workload; None when no speed-up has a CI yet (``repetitions = "auto"``)."""
    rows = usable(trials)
    groups: dict[tuple[str, str], list[TrialRecord]] = defaultdict(list)
    for t in rows:
        groups[(t.variant, t.workload)].append(t)
    widest: float | None = None
    for (variant, workload), mine in groups.items():
        base = groups.get((baseline, workload))
        if variant == baseline or not base:
            continue
        for metric, higher in (("e2e_ms", False), ("decode_tokens_per_s", True)):
            a, b, strata, clusters = paired_trials(base, mine, metric)
            est = paired_speedup(a, b, strata, higher_is_better=higher, clusters=clusters)
            width = est.half_width if est is not None else None
            if width is None:
                if metric == "e2e_ms":
                    return None  # not enough pairs yet
                continue
            widest = width if widest is None else max(widest, width)
    return widest
