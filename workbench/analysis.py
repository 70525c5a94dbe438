"""From recorded trials to answers: medians with bootstrap CIs per variant × workload, and speed-ups
against the baseline variant as ratios of medians with their CIs.

Warm-up trials and failed trials are excluded from every statistic (they are stored and counted).
Bootstrap resampling is stratified by prompt: a workload's prompts differ (chat turn 1 vs turn 6) far
more than repetitions of one prompt do, and every variant ran the same prompts.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np

__all__ = [
    "METRICS",
    "Estimate",
    "GroupSummary",
    "RunAnalysis",
    "RunComparison",
    "Timeline",
    "analyze_run",
    "bootstrap_median",
    "compare_runs",
    "server_summary",
    "speedup",
    "summarize",
    "throughput",
]

#: metric column → (label, unit, higher_is_better)
METRICS: dict[str, tuple[str, str, bool]] = {
    "ttft_ms": ("TTFT", "ms", False),
    "prefill_tokens_per_s": ("prefill", "tok/s", True),
    "tpot_ms": ("TPOT", "ms", False),
    "decode_tokens_per_s": ("decode", "tok/s", True),
    "e2e_ms": ("e2e", "ms", False),
    "decode_phase_ms": ("after TTFT", "ms", False),  # e2e − TTFT: the decode phase as the caller sees it
    "itl_p50_ms": ("ITL p50", "ms", False),
    "itl_p90_ms": ("ITL p90", "ms", False),
    "itl_p99_ms": ("ITL p99", "ms", False),
    "peak_memory_mb": ("peak mem", "MB", False),
    "input_tokens": ("in", "tok", False),
    "output_tokens": ("out", "tok", False),
}

BOOTSTRAP_RESAMPLES = 2000
_SEED = 20261130  # fixed: the same data always gives the same interval


@dataclass(frozen=True)
class Estimate:
    """A median with its bootstrap 95 % confidence interval (``lo``/``hi`` are ``None`` for n < 2)."""

    value: float | None
    lo: float | None = None
    hi: float | None = None
    n: int = 0

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class GroupSummary:
    variant: str
    workload: str
    n_ok: int
    n_failed: int
    metrics: dict[str, Estimate] = field(default_factory=dict)
    speedup_e2e: Estimate | None = None  # baseline e2e / variant e2e
    speedup_ttft: Estimate | None = None  # baseline TTFT / variant TTFT
    speedup_decode: Estimate | None = None  # variant decode tok/s / baseline decode tok/s
    matches_baseline: float | None = None  # fraction of greedy outputs equal to the baseline's
    match_fraction: float | None = None  # mean share of output tokens equal to the baseline's
    acceptance_rate: float | None = None  # accepted / proposed draft tokens (speculative strategies)
    mean_accepted_length: float | None = None  # 1 + accepted / steps with a draft: tokens per verify
    draft_share: float | None = None  # drafting's share of decode time (sum of steps' draft_ms / decode_ms)
    verify_share: float | None = None  # verification's share of decode time
    significant: bool | None = None  # e2e speed-up CI excludes 1
    timing_scope: str | None = None  # in-process | client (a server's client: network + queueing included)
    concurrency: int = 1  # parallel streams
    throughput_tokens_per_s: float | None = None  # aggregate output tokens/s (all streams together)
    server: dict[str, Any] | None = None  # the server's own figures (server_metrics), when it has any

    def to_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            "variant": self.variant,
            "workload": self.workload,
            "n_ok": self.n_ok,
            "n_failed": self.n_failed,
            "timing_scope": self.timing_scope,
            "concurrency": self.concurrency,
            "throughput_tokens_per_s": self.throughput_tokens_per_s,
            "server": self.server,
            "matches_baseline": self.matches_baseline,
            "match_fraction": self.match_fraction,
            "acceptance_rate": self.acceptance_rate,
            "mean_accepted_length": self.mean_accepted_length,
            "draft_share": self.draft_share,
            "verify_share": self.verify_share,
            "significant": self.significant,
        }
        for name, est in self.metrics.items():
            data[name] = est.to_dict()
        for name in ("speedup_e2e", "speedup_ttft", "speedup_decode"):
            est = getattr(self, name)
            data[name] = est.to_dict() if est else None
        return data


def _strata(values: Sequence[float | None], strata: Sequence[Any] | None) -> list[np.ndarray]:
    """Group non-missing values by stratum (the prompt): one array per stratum."""
    groups: dict[Any, list[float]] = defaultdict(list)
    keys = strata if strata is not None else [None] * len(values)
    for value, key in zip(values, keys, strict=True):
        if value is not None:
            groups[key].append(float(value))
    return [np.asarray(v, dtype=float) for v in groups.values()]


def _resampled_medians(groups: list[np.ndarray], resamples: int, rng: np.random.Generator) -> np.ndarray:
    """Medians of ``resamples`` bootstrap samples, drawn with replacement *within* each stratum, so
    that every resample holds the same prompts as the data (prompts differ far more than repetitions
    of one prompt; resampling across them would measure the prompt mix, not the variant)."""
    parts = [g[rng.integers(0, g.size, size=(resamples, g.size))] for g in groups]
    return np.median(np.concatenate(parts, axis=1), axis=1)


def bootstrap_median(
    values: Sequence[float | None],
    strata: Sequence[Any] | None = None,
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
    samples = _resampled_medians(groups, resamples, np.random.default_rng(_SEED))
    lo, hi = np.percentile(samples, [2.5, 97.5])
    return Estimate(median, float(lo), float(hi), n)


def speedup(
    numerator: Sequence[float | None],
    denominator: Sequence[float | None],
    numerator_strata: Sequence[Any] | None = None,
    denominator_strata: Sequence[Any] | None = None,
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
    rng = np.random.default_rng(_SEED)
    ra, rb = _resampled_medians(a, resamples, rng), _resampled_medians(b, resamples, rng)
    ratios = ra[rb > 0] / rb[rb > 0]
    lo, hi = np.percentile(ratios, [2.5, 97.5])
    return Estimate(value, float(lo), float(hi), min(na, nb))


def summarize(
    trials: Sequence[dict[str, Any]],
    baseline: str | None,
    server_windows: Sequence[dict[str, Any]] = (),
) -> list[GroupSummary]:
    """Per (variant, workload), in the order they were run. ``trials`` are rows of the ``trials`` table,
    optionally with ``draft_ms``/``verify_ms``: the sums of their steps' (:meth:`Store.step_totals`);
    ``server_windows`` rows of ``server_metrics`` (the server's own figures, for endpoint variants)."""
    groups: dict[tuple[str, str], list[dict[str, Any]]] = defaultdict(list)
    for t in trials:
        if not t.get("warmup"):
            groups[(t["variant"], t["workload"])].append(t)
    summaries = []
    for (variant, workload), rows in groups.items():
        ok = [_derived(r) for r in rows if r["status"] == "ok"]
        summary = GroupSummary(
            variant=variant,
            workload=workload,
            n_ok=len(ok),
            n_failed=sum(r["status"] == "failed" for r in rows),
            metrics={m: bootstrap_median([r.get(m) for r in ok], _prompts(ok)) for m in METRICS},
        )
        matches = [r["matches_baseline"] for r in ok if r.get("matches_baseline") is not None]
        summary.matches_baseline = sum(matches) / len(matches) if matches else None
        fractions = [r["match_fraction"] for r in ok if r.get("match_fraction") is not None]
        summary.match_fraction = sum(fractions) / len(fractions) if fractions else None
        proposed = sum(r.get("draft_tokens_proposed") or 0 for r in ok)
        accepted = sum(r.get("draft_tokens_accepted") or 0 for r in ok)
        draft_steps = sum(r.get("draft_steps") or 0 for r in ok)
        if proposed:
            summary.acceptance_rate = accepted / proposed
        if draft_steps:
            summary.mean_accepted_length = 1 + accepted / draft_steps
        scopes = {r.get("timing_scope") for r in rows} - {None}
        summary.timing_scope = "client" if "client" in scopes else (scopes.pop() if scopes else None)
        summary.concurrency = max((r.get("concurrency") or 1 for r in rows), default=1)
        summary.throughput_tokens_per_s = throughput(ok)
        windows = [w for w in server_windows if (w["variant"], w["workload"]) == (variant, workload)]
        summary.server = server_summary(windows, ok)
        timed = [r for r in ok if r.get("draft_ms") is not None or r.get("verify_ms") is not None]
        decode_ms = sum(r.get("decode_ms") or 0.0 for r in timed)
        if timed and decode_ms > 0:
            summary.draft_share = sum(r.get("draft_ms") or 0.0 for r in timed) / decode_ms
            summary.verify_share = sum(r.get("verify_ms") or 0.0 for r in timed) / decode_ms
        summaries.append(summary)
    if baseline is not None:
        reference = {
            workload: [r for r in rows if r["status"] == "ok"]
            for (variant, workload), rows in groups.items()
            if variant == baseline
        }
        for s in summaries:
            base = reference.get(s.workload)
            if not base or s.variant == baseline:
                continue
            ok = [r for r in groups[(s.variant, s.workload)] if r["status"] == "ok"]
            pb, po = _prompts(base), _prompts(ok)
            s.speedup_e2e = speedup([r["e2e_ms"] for r in base], [r["e2e_ms"] for r in ok], pb, po)
            s.speedup_ttft = speedup([r["ttft_ms"] for r in base], [r["ttft_ms"] for r in ok], pb, po)
            s.speedup_decode = speedup(
                [r["decode_tokens_per_s"] for r in ok], [r["decode_tokens_per_s"] for r in base], po, pb
            )
            if s.speedup_e2e and s.speedup_e2e.lo is not None:
                s.significant = not (s.speedup_e2e.lo <= 1.0 <= s.speedup_e2e.hi)  # type: ignore[operator]
    return summaries


def throughput(ok: Sequence[dict[str, Any]]) -> float | None:
    """Aggregate output tokens per second. Sequential trials: all tokens over the sum of their e2e
    times. Parallel streams: all tokens over the wall time of each group (first start → last end,
    from ``group_offset_ms`` + ``e2e_ms``) — the figure that grows with concurrency when a server
    batches."""
    tokens = sum(r.get("output_tokens") or 0 for r in ok)
    spans: dict[Any, tuple[float, float]] = {}
    seconds = 0.0
    for r in ok:
        if r.get("e2e_ms") is None:
            continue
        if r.get("group_offset_ms") is None or (r.get("concurrency") or 1) == 1:
            seconds += r["e2e_ms"] / 1000
            continue
        start, end = r["group_offset_ms"], r["group_offset_ms"] + r["e2e_ms"]
        lo, hi = spans.get(r.get("concurrent_group"), (start, end))
        spans[r.get("concurrent_group")] = (min(lo, start), max(hi, end))
    seconds += sum(hi - lo for lo, hi in spans.values()) / 1000
    return tokens / seconds if seconds > 0 and tokens else None


#: server_metrics columns averaged over windows, weighted by how many requests each mean covers
_SERVER_MEANS = ("ttft_ms", "itl_ms", "tpot_ms", "e2e_ms", "queue_ms", "prefill_ms", "decode_ms")


def server_summary(windows: Sequence[dict[str, Any]], ok: Sequence[dict[str, Any]]) -> dict[str, Any] | None:
    """The server's own figures over a group's measured windows: request-weighted means of its
    latencies (its histograms give sums and counts, hence means, not medians), speculative-decoding
    acceptance from its counters, and the client's mean TTFT beside the server's: the gap is
    network, HTTP and queueing in front of the engine."""
    windows = [w for w in windows if not w.get("warmup")]
    if not windows:
        return None
    out: dict[str, Any] = {"windows": len(windows)}
    for column in _SERVER_MEANS:
        weight_col = "ttft_count" if column == "ttft_ms" else "requests"
        pairs = [(w[column], w.get(weight_col) or 1) for w in windows if w.get(column) is not None]
        weight = sum(n for _, n in pairs)
        out[column] = sum(v * n for v, n in pairs) / weight if weight else None
    requests = sum(w.get("requests") or 0 for w in windows)
    out["requests"] = requests
    out["other_requests"] = max(requests - sum(w.get("trials") or 0 for w in windows), 0)
    drafts = sum(w.get("spec_drafts") or 0 for w in windows)
    proposed = sum(w.get("spec_draft_tokens") or 0 for w in windows)
    accepted = sum(w.get("spec_accepted_tokens") or 0 for w in windows)
    out["acceptance_rate"] = accepted / proposed if proposed else None
    out["mean_accepted_length"] = 1 + accepted / drafts if drafts else None
    client = [r["ttft_ms"] for r in ok if r.get("ttft_ms") is not None]
    out["client_ttft_mean_ms"] = sum(client) / len(client) if client else None
    if out["client_ttft_mean_ms"] is not None and out["ttft_ms"] is not None:
        out["ttft_gap_ms"] = out["client_ttft_mean_ms"] - out["ttft_ms"]
    else:
        out["ttft_gap_ms"] = None
    return out


def _derived(row: dict[str, Any]) -> dict[str, Any]:
    """A trial row plus the figures computed from its columns."""
    e2e, ttft = row.get("e2e_ms"), row.get("ttft_ms")
    return {**row, "decode_phase_ms": e2e - ttft if e2e is not None and ttft is not None else None}


def _prompts(rows: Sequence[dict[str, Any]]) -> list[Any]:
    return [r.get("prompt_id") for r in rows]


# -- one run, analysed: what the CLI, the export and the GUI show ---------------------------------------


@dataclass(frozen=True)
class Timeline:
    """One trial's tokens over time: cumulative tokens at each step (prefill is the wait before the
    first step; a speculative step adds several tokens at once)."""

    variant: str
    workload: str
    prompt_id: str
    repetition: int
    input_tokens: int | None
    t_ms: tuple[float, ...]
    tokens: tuple[int, ...]


@dataclass
class RunAnalysis:
    run: dict[str, Any]  # the runs row (spec text included)
    variants: list[dict[str, Any]]  # the variants rows
    environment: dict[str, Any]
    baseline: str | None
    trials: list[dict[str, Any]]  # measured trials (warm-ups excluded), with step totals
    summaries: list[GroupSummary]
    phases: list[Any]  # workbench.phases.WorkloadPhase, one per workload
    cost_model: Any  # workbench.phases.CostModel measured on the reference variant (or None)
    roofline: list[Any]  # workbench.roofline.RooflineRow per variant × workload
    timelines: list[Timeline]  # per workload, one representative prompt, every variant
    accepted_lengths: dict[str, dict[int, int]]  # variant → {accepted draft tokens: steps}
    _charts: list[Any] | None = field(default=None, repr=False, compare=False)

    @property
    def variant_names(self) -> list[str]:
        names = [v["name"] for v in self.variants]
        return names + sorted({s.variant for s in self.summaries} - set(names))

    @property
    def device(self) -> str:
        devices = [v.get("device") or "" for v in self.variants if v["name"] == self.baseline] or [
            v.get("device") or "" for v in self.variants
        ]
        return devices[0] if devices and devices[0] else "cpu"

    def charts(self) -> list[Any]:
        """Every chart this run has data for (``workbench.chartdata`` objects), headline first."""
        from .chartdata import run_charts

        if self._charts is None:
            self._charts = run_charts(self)
        return list(self._charts)

    def to_dict(self) -> dict[str, Any]:
        run = {k: v for k, v in self.run.items() if k != "environment"}
        return {
            "run": run,
            "environment": self.environment,
            "variants": self.variants,
            "baseline": self.baseline,
            "summary": [s.to_dict() for s in self.summaries],
            "phases": [p.to_dict() for p in self.phases],
            "roofline": [r.to_dict() for r in self.roofline],
            "accepted_lengths": self.accepted_lengths,
        }


def analyze_run(store: Any, run_ref: str | int | None, baseline: str | None = None) -> RunAnalysis:
    """Everything the reports show about one run. ``baseline`` overrides the run's reference variant."""
    import json

    from .errors import WorkbenchError
    from .phases import CostModel, measure_phases
    from .roofline import roofline_rows

    run = store.resolve_run(run_ref)
    run_id = run["id"]
    variants = store.variants(run_id)
    totals = store.step_totals(run_id)
    trials = []
    for t in store.trials(run_id):
        extra = totals.get(t["id"])
        trials.append({**t, "draft_ms": extra["draft_ms"], "verify_ms": extra["verify_ms"]} if extra else t)
    reference = baseline or run.get("baseline")
    names = {t["variant"] for t in trials}
    if baseline is not None and baseline not in names:
        raise WorkbenchError(
            f"baseline variant {baseline!r} not in run {run_id}; variants: {', '.join(sorted(names))}"
        )
    if reference not in names:
        reference = None
    summaries = summarize(trials, reference, store.server_metrics(run_id))
    # A batched local variant is the batching lever, whatever strategy decodes it.
    strategies = {
        v["name"]: "batching" if (v.get("batch_size") or 1) > 1 else v["strategy"] for v in variants
    }
    for t in trials:
        strategies.setdefault(t["variant"], t.get("strategy") or "")
    try:
        environment = json.loads(run.get("environment") or "{}")
    except ValueError:
        environment = {}
    analysis = RunAnalysis(
        run=run,
        variants=variants,
        environment=environment,
        baseline=reference,
        trials=trials,
        summaries=summaries,
        phases=[],
        cost_model=None,
        roofline=roofline_rows(summaries, variants),
        timelines=[],
        accepted_lengths={},
    )
    ref = reference or (summaries[0].variant if summaries else None)
    ok_ref = [t for t in trials if t["variant"] == ref and t["status"] == "ok"]
    analysis.cost_model = CostModel.from_trials(ok_ref, source=f"measured in run {run_id} on {ref}")
    analysis.phases = measure_phases(summaries, trials, ref, strategies=strategies, device=analysis.device)
    analysis.timelines = _timelines(store, trials, ref)
    for row in store.accepted_lengths(run_id):
        analysis.accepted_lengths.setdefault(row["variant"], {})[int(row["accepted"])] = int(row["steps"])
    return analysis


def _timelines(store: Any, trials: Sequence[dict[str, Any]], reference: str | None) -> list[Timeline]:
    """Per workload: the prompt whose reference e2e is the median of the workload's prompts, and for
    every variant its median-e2e repetition of that prompt."""
    ok = [t for t in trials if t["status"] == "ok" and t.get("e2e_ms") is not None]
    out = []
    for workload in dict.fromkeys(t["workload"] for t in ok):
        rows = [t for t in ok if t["workload"] == workload]
        ref_rows = [t for t in rows if t["variant"] == reference] or rows
        by_prompt: dict[Any, list[float]] = defaultdict(list)
        for t in ref_rows:
            by_prompt[t["prompt_id"]].append(t["e2e_ms"])
        ranked = sorted(by_prompt, key=lambda p: float(np.median(by_prompt[p])))
        prompt = ranked[(len(ranked) - 1) // 2]
        for variant in dict.fromkeys(t["variant"] for t in rows):
            reps = sorted(
                (t for t in rows if t["variant"] == variant and t["prompt_id"] == prompt),
                key=lambda t: t["e2e_ms"],
            )
            if not reps:
                continue
            trial = reps[(len(reps) - 1) // 2]
            steps = store.steps(trial["id"])
            if not steps:
                continue
            cumulative = np.cumsum([s["n_tokens"] for s in steps]).tolist()
            out.append(
                Timeline(
                    variant,
                    workload,
                    str(prompt),
                    trial["repetition"],
                    trial.get("input_tokens"),
                    (0.0, *(s["t_ms"] for s in steps)),
                    (0, *(int(c) for c in cumulative)),
                )
            )
    return out


@dataclass
class RunComparison:
    """One variant × workload measured in two runs (matched by name): RUN_B against RUN_A."""

    variant: str
    workload: str
    run_a: int
    run_b: int
    a: dict[str, Estimate]  # e2e_ms, ttft_ms, tpot_ms, decode_tokens_per_s medians in RUN_A
    b: dict[str, Estimate]
    speedup_e2e: Estimate | None  # A e2e / B e2e: > 1 when RUN_B is faster
    speedup_ttft: Estimate | None
    speedup_decode: Estimate | None  # B decode tok/s / A decode tok/s

    @property
    def significant(self) -> bool | None:
        est = self.speedup_e2e
        if est is None or est.lo is None or est.hi is None:
            return None
        return not (est.lo <= 1.0 <= est.hi)

    def to_dict(self) -> dict[str, Any]:
        return {
            "variant": self.variant,
            "workload": self.workload,
            "run_a": self.run_a,
            "run_b": self.run_b,
            "a": {k: v.to_dict() for k, v in self.a.items()},
            "b": {k: v.to_dict() for k, v in self.b.items()},
            "speedup_e2e": self.speedup_e2e.to_dict() if self.speedup_e2e else None,
            "speedup_ttft": self.speedup_ttft.to_dict() if self.speedup_ttft else None,
            "speedup_decode": self.speedup_decode.to_dict() if self.speedup_decode else None,
            "significant": self.significant,
        }


_COMPARED = ("e2e_ms", "ttft_ms", "tpot_ms", "decode_tokens_per_s")


def compare_runs(
    trials_a: Sequence[dict[str, Any]], trials_b: Sequence[dict[str, Any]], run_a: int, run_b: int
) -> tuple[list[RunComparison], list[str]]:
    """Variants matched by name across two runs (e.g. before and after a driver or library upgrade),
    per workload both ran: RUN_B's speed-ups over RUN_A with bootstrap CIs (stratified by prompt).
    Returns the comparisons and the variant names found in only one run."""

    def groups(trials: Sequence[dict[str, Any]]) -> dict[tuple[str, str], list[dict[str, Any]]]:
        out: dict[tuple[str, str], list[dict[str, Any]]] = defaultdict(list)
        for t in trials:
            if t["status"] == "ok" and not t.get("warmup"):
                out[(t["variant"], t["workload"])].append(t)
        return out

    ga, gb = groups(trials_a), groups(trials_b)
    results = []
    for key, rows_a in ga.items():
        rows_b = gb.get(key)
        if not rows_b:
            continue
        pa, pb = _prompts(rows_a), _prompts(rows_b)

        def col(rows: list[dict[str, Any]], name: str) -> list[Any]:
            return [r.get(name) for r in rows]

        results.append(
            RunComparison(
                variant=key[0],
                workload=key[1],
                run_a=run_a,
                run_b=run_b,
                a={m: bootstrap_median(col(rows_a, m), pa) for m in _COMPARED},
                b={m: bootstrap_median(col(rows_b, m), pb) for m in _COMPARED},
                speedup_e2e=speedup(col(rows_a, "e2e_ms"), col(rows_b, "e2e_ms"), pa, pb),
                speedup_ttft=speedup(col(rows_a, "ttft_ms"), col(rows_b, "ttft_ms"), pa, pb),
                speedup_decode=speedup(
                    col(rows_b, "decode_tokens_per_s"), col(rows_a, "decode_tokens_per_s"), pb, pa
                ),
            )
        )
    names_a = {t["variant"] for t in trials_a}
    names_b = {t["variant"] for t in trials_b}
    unmatched = [f"{n} (only in run {run_a})" for n in sorted(names_a - names_b)]
    unmatched += [f"{n} (only in run {run_b})" for n in sorted(names_b - names_a)]
    return results, unmatched
