"""Per variant × workload: medians with bootstrap CIs of every metric, and speed-ups against the
baseline variant as ratios of medians with their CIs (the statistics themselves are in
:mod:`workbench.analysis.stats`).

Warm-up trials and failed trials are excluded from every statistic (they are stored and counted).
Bootstrap resampling is stratified by prompt: a workload's prompts differ (chat turn 1 vs turn 6) far
more than repetitions of one prompt do, and every variant ran the same prompts.
"""

from __future__ import annotations

import dataclasses
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from workbench.analysis.paired import (
    Pair,
    PairedEstimate,
    disturbance,
    match_trials,
    metric_value,
    metric_values,
    paired_speedup,
    paired_trials,
)
from workbench.analysis.quality import GroupQuality, RunQuality, group_quality
from workbench.analysis.stats import Estimate, bootstrap_median, speedup
from workbench.core.literals import TimingScope
from workbench.core.metrics import METRIC_TABLE, TRIAL_METRICS, Metric
from workbench.store.loaded import ServerWindowRecord, StepTotals
from workbench.store.records import TrialRecord

__all__ = [
    "METRICS",
    "GroupSummary",
    "ServerFigures",
    "server_summary",
    "speedup_of",
    "summarize",
    "throughput",
    "unpaired_speedup",
]

#: metric column → its metric (label, unit, higher_is_better): the metrics measured on every trial,
#: from the metric table (:mod:`workbench.core.metrics`)
METRICS: dict[str, Metric] = {key: METRIC_TABLE[key] for key in TRIAL_METRICS}


@dataclass(frozen=True)
class ServerFigures:
    """A served variant's own figures over a group's measured windows (:func:`server_summary`):
    request-weighted means of its latencies, its requests, its speculative acceptance, and the
    client's mean TTFT beside the server's (the gap: network, HTTP and queueing)."""

    windows: int
    ttft_ms: float | None = None
    itl_ms: float | None = None
    tpot_ms: float | None = None
    e2e_ms: float | None = None
    queue_ms: float | None = None
    prefill_ms: float | None = None
    decode_ms: float | None = None
    requests: int = 0
    other_requests: int = 0  # requests of other clients in the windows
    acceptance_rate: float | None = None
    mean_accepted_length: float | None = None
    client_ttft_mean_ms: float | None = None
    ttft_gap_ms: float | None = None

    def to_dict(self) -> dict[str, object]:
        return dataclasses.asdict(self)

    def figure(self, name: str) -> float | None:
        """One figure by its name (a ``server_metrics`` mean, ``client_ttft_mean_ms`` ...)."""
        value: float | None = getattr(self, name)
        return value


@dataclass(frozen=True)
class GroupSummary:
    variant: str
    workload: str
    n_ok: int
    n_failed: int
    metrics: Mapping[str, Estimate] = field(default_factory=dict)
    # Speed-ups over the baseline: paired (same prompt, same round) where the trials pair up, else
    # a ratio of medians (``method`` says which); each with its CI and minimum detectable effect.
    speedup_e2e: PairedEstimate | None = None  # baseline e2e / variant e2e
    speedup_ttft: PairedEstimate | None = None  # baseline TTFT / variant TTFT
    speedup_decode: PairedEstimate | None = None  # variant decode tok/s / baseline decode tok/s
    prompts: int = 0  # distinct prompts among the trials the statistics use (per repetition)
    n_disturbed: int = 0  # measured trials flagged disturbed (left out when ``disturbed_excluded``)
    disturbed_excluded: bool = False
    matches_baseline: float | None = None  # fraction of greedy outputs equal to the baseline's
    match_fraction: float | None = None  # mean share of output tokens equal to the baseline's
    acceptance_rate: float | None = None  # accepted / proposed draft tokens (speculative strategies)
    mean_accepted_length: float | None = None  # 1 + accepted / steps with a draft: tokens per verify
    draft_share: float | None = None  # drafting's share of decode time (sum of steps' draft_ms / decode_ms)
    verify_share: float | None = None  # verification's share of decode time
    significant: bool | None = None  # e2e speed-up CI excludes 1
    timing_scope: TimingScope | None = None  # client: a server's client (network + queueing included)
    concurrency: int = 1  # parallel streams
    throughput_tokens_per_s: float | None = None  # aggregate output tokens/s (all streams together)
    server: ServerFigures | None = None  # the server's own figures (server_metrics), when it has any
    #: the quality pass (workbench.analysis.quality.GroupQuality): scored with its figures, or
    #: "reference" | "lossless" | "not scored" | "failed" with the reason; None when the run had no
    #: quality pass (or the variant no outcome in it)
    quality: GroupQuality | None = None

    def to_dict(self) -> dict[str, object]:
        data: dict[str, object] = {
            "variant": self.variant,
            "workload": self.workload,
            "n_ok": self.n_ok,
            "n_failed": self.n_failed,
            "prompts": self.prompts,
            "timing_scope": self.timing_scope,
            "concurrency": self.concurrency,
            "throughput_tokens_per_s": self.throughput_tokens_per_s,
            "server": self.server.to_dict() if self.server else None,
            "matches_baseline": self.matches_baseline,
            "match_fraction": self.match_fraction,
            "acceptance_rate": self.acceptance_rate,
            "mean_accepted_length": self.mean_accepted_length,
            "draft_share": self.draft_share,
            "verify_share": self.verify_share,
            "significant": self.significant,
            "n_disturbed": self.n_disturbed,
            "disturbed_excluded": self.disturbed_excluded,
            "quality": self.quality.to_dict() if self.quality else None,
        }
        for name, est in self.metrics.items():
            data[name] = est.to_dict()
        for name, paired in (
            ("speedup_e2e", self.speedup_e2e),
            ("speedup_ttft", self.speedup_ttft),
            ("speedup_decode", self.speedup_decode),
        ):
            data[name] = paired.to_dict() if paired else None
        return data


def summarize(
    trials: Sequence[TrialRecord],
    baseline: str | None,
    server_windows: Sequence[ServerWindowRecord] = (),
    variant_order: Sequence[str] = (),
    *,
    exclude_disturbed: bool | None = None,
    step_totals: Mapping[int, StepTotals] | None = None,
    quality: RunQuality | None = None,
) -> list[GroupSummary]:
    """Per (variant, workload): variants in ``variant_order`` (the spec's; interleaved runs start each
    round with a different one), then any others as their first trials come, workloads as they come.
    ``step_totals``: per trial id, the sums of its steps' ``draft_ms``/``verify_ms``
    (``LoadedRun.step_totals``), for drafting's and verification's shares of decode time;
    ``server_windows`` rows of ``server_metrics`` (the server's own figures, for endpoint variants);
    ``quality`` the run's quality pass, each row's part attached as it is built.
    ``exclude_disturbed``: leave disturbed trials out of every statistic (None: the default rule of
    :func:`workbench.analysis.paired.disturbance`, out when they are few)."""
    rule = disturbance(trials, exclude_disturbed)
    totals = step_totals or {}
    groups: dict[tuple[str, str], list[TrialRecord]] = defaultdict(list)
    for t in trials:
        if not t.warmup:
            groups[(t.variant, t.workload)].append(t)
    # without an order given: as the variants first appear, warm-ups included (they run in spec order)
    rank = {name: i for i, name in enumerate(dict.fromkeys([*variant_order, *(t.variant for t in trials)]))}
    seen = {k: i for i, k in enumerate(groups)}
    keys = sorted(groups, key=lambda k: (rank.get(k[0], len(rank)), seen[k]))
    # the ok trials each group's statistics use
    used = {k: [r for r in groups[k] if r.status == "ok" and rule.keeps(r)] for k in keys}
    summaries = []
    for variant, workload in keys:
        rows, ok = groups[(variant, workload)], used[(variant, workload)]
        matches = [r.matches_baseline for r in ok if r.matches_baseline is not None]
        fractions = [r.match_fraction for r in ok if r.match_fraction is not None]
        proposed = sum(r.draft_tokens_proposed or 0 for r in ok)
        accepted = sum(r.draft_tokens_accepted or 0 for r in ok)
        draft_steps = sum(r.draft_steps or 0 for r in ok)
        scopes = {r.timing_scope for r in rows} - {None}
        windows = [w for w in server_windows if (w.variant, w.workload) == (variant, workload)]
        sub = [(r, totals[r.id]) for r in ok if r.id is not None and r.id in totals]
        timed = [(r, s) for r, s in sub if s.draft_ms is not None or s.verify_ms is not None]
        decode_ms = sum(r.decode_ms or 0.0 for r, _ in timed)
        shared = timed and decode_ms > 0
        base = used.get((baseline, workload)) if baseline is not None and variant != baseline else None
        speedups = _speedups(base, ok)
        e2e = speedups[0]
        summaries.append(
            GroupSummary(
                variant=variant,
                workload=workload,
                n_ok=len(ok),
                n_failed=sum(r.status == "failed" for r in rows),
                n_disturbed=sum(bool(r.disturbed) for r in rows if r.status == "ok"),
                disturbed_excluded=rule.excluded,
                metrics=_medians(ok),
                prompts=len({r.prompt_id for r in ok}),
                matches_baseline=sum(matches) / len(matches) if matches else None,
                match_fraction=sum(fractions) / len(fractions) if fractions else None,
                acceptance_rate=accepted / proposed if proposed else None,
                mean_accepted_length=1 + accepted / draft_steps if draft_steps else None,
                timing_scope="client" if "client" in scopes else (scopes.pop() if scopes else None),
                concurrency=max((r.concurrency or 1 for r in rows), default=1),
                throughput_tokens_per_s=throughput(ok),
                server=server_summary(windows, ok),
                draft_share=sum(s.draft_ms or 0.0 for _, s in timed) / decode_ms if shared else None,
                verify_share=sum(s.verify_ms or 0.0 for _, s in timed) / decode_ms if shared else None,
                speedup_e2e=e2e,
                speedup_ttft=speedups[1],
                speedup_decode=speedups[2],
                significant=_significant(e2e),
                quality=group_quality(quality, variant, workload),
            )
        )
    return summaries


def _speedups(
    base: Sequence[TrialRecord] | None, mine: Sequence[TrialRecord]
) -> tuple[PairedEstimate | None, PairedEstimate | None, PairedEstimate | None]:
    """A group's e2e, TTFT and decode speed-ups over the baseline's trials of its workload (``base``;
    None or empty: no baseline there, or the group is the baseline)."""
    if not base:
        return None, None, None
    pairs = match_trials(base, mine)  # once for the three metrics
    return (
        speedup_of(base, mine, "e2e_ms", higher_is_better=False, pairs=pairs),
        speedup_of(base, mine, "ttft_ms", higher_is_better=False, pairs=pairs),
        speedup_of(base, mine, "decode_tokens_per_s", higher_is_better=True, pairs=pairs),
    )


def _significant(e2e: Estimate | None) -> bool | None:
    """Whether an e2e speed-up's CI excludes 1 (None: no interval)."""
    if e2e is None or e2e.lo is None or e2e.hi is None:
        return None
    return not (e2e.lo <= 1.0 <= e2e.hi)


def _medians(ok: Sequence[TrialRecord]) -> dict[str, Estimate]:
    """Each metric's median with its CI over the group's trials, resampled within prompts (one tuple
    of prompts for every metric: the strata are grouped once)."""
    keys = tuple(prompt_keys(ok))
    return {m: bootstrap_median(metric_values(ok, m), keys) for m in METRICS}


def speedup_of(
    reference: Sequence[TrialRecord],
    variant: Sequence[TrialRecord],
    metric: str,
    *,
    higher_is_better: bool,
    pairs: Sequence[Pair] | None = None,
) -> PairedEstimate | None:
    """The variant's speed-up on ``metric``: paired when at least two of its trials have a partner
    of the same (workload, prompt, repetition) in the reference, else a ratio of medians (trials that
    do not pair up: e.g. failures on one side only)."""
    a, b, strata, clusters = paired_trials(reference, variant, metric, pairs=pairs)
    if len(a) >= 2:
        return paired_speedup(a, b, strata, higher_is_better=higher_is_better, clusters=clusters)
    return unpaired_speedup(reference, variant, metric, higher_is_better=higher_is_better)


def unpaired_speedup(
    reference: Sequence[TrialRecord], variant: Sequence[TrialRecord], metric: str, *, higher_is_better: bool
) -> PairedEstimate | None:
    """The variant's speed-up on ``metric`` as a ratio of medians, its bootstrap 95 % CI resampling
    each side on its own (within prompts), ``method`` "unpaired": for trials that do not pair up — and
    for two runs, which never pair (the machine may have changed between them; the same computation as
    :func:`workbench.analysis.compare.compare_runs`)."""
    num, den = (variant, reference) if higher_is_better else (reference, variant)
    est = speedup(
        [metric_value(r, metric) for r in num],
        [metric_value(r, metric) for r in den],
        prompt_keys(num),
        prompt_keys(den),
    )
    if est is None:
        return None
    return PairedEstimate(est.value, est.lo, est.hi, est.n, None, "unpaired")


def throughput(ok: Sequence[TrialRecord]) -> float | None:
    """Aggregate output tokens per second. Sequential trials: all tokens over the sum of their e2e
    times. Parallel streams: all tokens over the wall time of each group (first start → last end,
    from ``group_offset_ms`` + ``e2e_ms``) — the figure that grows with concurrency when a server
    batches."""
    tokens = sum(r.output_tokens or 0 for r in ok)
    spans: dict[int | None, tuple[float, float]] = {}
    seconds = 0.0
    for r in ok:
        if r.e2e_ms is None:
            continue
        if r.group_offset_ms is None or (r.concurrency or 1) == 1:
            seconds += r.e2e_ms / 1000
            continue
        start, end = r.group_offset_ms, r.group_offset_ms + r.e2e_ms
        lo, hi = spans.get(r.concurrent_group, (start, end))
        spans[r.concurrent_group] = (min(lo, start), max(hi, end))
    seconds += sum(hi - lo for lo, hi in spans.values()) / 1000
    return tokens / seconds if seconds > 0 and tokens else None


#: server_metrics columns averaged over windows, weighted by how many requests each mean covers
_SERVER_MEANS = ("ttft_ms", "itl_ms", "tpot_ms", "e2e_ms", "queue_ms", "prefill_ms", "decode_ms")


def server_summary(windows: Sequence[ServerWindowRecord], ok: Sequence[TrialRecord]) -> ServerFigures | None:
    """The server's own figures over a group's measured windows: request-weighted means of its
    latencies (its histograms give sums and counts, hence means, not medians), speculative-decoding
    acceptance from its counters, and the client's mean TTFT beside the server's: the gap is
    network, HTTP and queueing in front of the engine."""
    windows = [w for w in windows if not w.warmup]
    if not windows:
        return None
    means: dict[str, float | None] = {}
    for column in _SERVER_MEANS:
        pairs = [
            (value, (w.ttft_count if column == "ttft_ms" else w.requests) or 1)
            for w in windows
            if (value := getattr(w, column)) is not None
        ]
        weight = sum(n for _, n in pairs)
        means[column] = sum(v * n for v, n in pairs) / weight if weight else None
    requests = sum(w.requests or 0 for w in windows)
    drafts = sum(w.spec_drafts or 0 for w in windows)
    proposed = sum(w.spec_draft_tokens or 0 for w in windows)
    accepted = sum(w.spec_accepted_tokens or 0 for w in windows)
    client = [r.ttft_ms for r in ok if r.ttft_ms is not None]
    client_ttft = sum(client) / len(client) if client else None
    server_ttft = means["ttft_ms"]
    return ServerFigures(
        windows=len(windows),
        ttft_ms=server_ttft,
        itl_ms=means["itl_ms"],
        tpot_ms=means["tpot_ms"],
        e2e_ms=means["e2e_ms"],
        queue_ms=means["queue_ms"],
        prefill_ms=means["prefill_ms"],
        decode_ms=means["decode_ms"],
        requests=requests,
        other_requests=max(requests - sum(w.trials or 0 for w in windows), 0),
        acceptance_rate=accepted / proposed if proposed else None,
        mean_accepted_length=1 + accepted / drafts if drafts else None,
        client_ttft_mean_ms=client_ttft,
        ttft_gap_ms=client_ttft - server_ttft
        if client_ttft is not None and server_ttft is not None
        else None,
    )


def prompt_keys(rows: Sequence[TrialRecord]) -> list[str]:
    return [r.prompt_id for r in rows]
