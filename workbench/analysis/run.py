"""One run, analysed: everything the CLI, the export and the GUI show about a run, gathered from the
store into one :class:`RunAnalysis` (statistics, phases, roofline, step-level series).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from workbench.analysis.paired import Disturbance, disturbance, drift
from workbench.analysis.quality import attach_quality, run_quality
from workbench.analysis.summary import GroupSummary, summarize
from workbench.store import TrialRecord

if TYPE_CHECKING:
    from workbench.analysis.drafting import BreakEven
    from workbench.analysis.targets import TargetGap

__all__ = ["Design", "RunAnalysis", "Timeline", "analyze_run", "target_keys"]


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


@dataclass(frozen=True)
class Design:
    """How the run's trials were ordered in time and what disturbed them: the context every speed-up
    needs (docs/analysis.md "How trials are ordered")."""

    order: str  # interleaved | blocks | sequential ("sequential" also for runs from before orders)
    note: str | None  # why it differs from the spec's order, or how repetitions = "auto" ended
    repetitions: int | None  # measured repetitions that ran
    drift: float | None  # the baseline's last rounds' time over its first rounds' (1.00 = none)
    disturbance: Disturbance
    #: interleaved runs: "per-repetition" (fresh worker processes every repetition) or "one"
    workers: str | None = None
    processes: int | None = None  # worker processes the baseline's measured trials came from
    auto: bool = False  # the spec asked for repetitions = "auto" (repeat until the CIs are narrow)

    def to_dict(self) -> dict[str, Any]:
        return {
            "order": self.order,
            "note": self.note,
            "repetitions": self.repetitions,
            "drift": self.drift,
            "disturbed": self.disturbance.to_dict(),
            "workers": self.workers,
            "processes": self.processes,
            "auto": self.auto,
        }

    def lines(self) -> list[str]:
        """What `show` and the report say about the design, one line each."""
        what = {
            "interleaved": "interleaved (all variants loaded, trials round by round in a balanced order, "
            "paired by prompt and round)",
            "blocks": "counterbalanced blocks (one variant loaded at a time, A B B A over passes of "
            "repetitions; speed-ups paired by prompt and repetition)",
            "sequential": "sequential: each variant's trials in one go, so the machine's drift lands on "
            'whichever variant ran then (interleaving is the default: order = "interleaved")',
        }[self.order]
        out = [f"Order: {what}."]
        if self.workers == "per-repetition" and (self.processes or 0) > 1:
            out.append(
                f"Workers: fresh processes every repetition ({self.processes} per variant); the CIs "
                "count process pairs, not just trials, since two processes of one variant can differ "
                "by a few per cent."
            )
        elif self.workers == "one":
            out.append(
                'Workers: one process per variant for the whole run (workers = "one"): a slow process '
                "would look like a slow variant."
            )
        if self.note:
            out.append(self.note[:1].upper() + self.note[1:] + ".")
        if self.drift is not None:
            out.append(
                f"Drift: the baseline's last rounds took {self.drift:.2f} times as long as its first "
                + (
                    "(the machine's speed moved during the run)."
                    if abs(self.drift - 1) > 0.05
                    else "(steady)."
                )
            )
        line = self.disturbance.line()
        if line:
            out.append(line[:1].upper() + line[1:] + ".")
        return out


@dataclass
class RunAnalysis:
    run: dict[str, Any]  # the runs row (spec text included)
    variants: list[dict[str, Any]]  # the variants rows
    environment: dict[str, Any]
    baseline: str | None
    trials: list[TrialRecord]  # measured trials (warm-ups excluded)
    summaries: list[GroupSummary]
    phases: list[Any]  # workbench.analysis.phases.WorkloadPhase, one per workload
    cost_model: Any  # workbench.analysis.phases.CostModel measured on the reference variant (or None)
    roofline: list[Any]  # workbench.analysis.roofline.RooflineRow per variant × workload
    timelines: list[Timeline]  # per workload, one representative prompt, every variant
    accepted_lengths: dict[str, dict[int, int]]  # variant → {accepted draft tokens: steps}
    design: Design | None = None

    # experience targets (workbench.analysis.targets): workload → spec.targets.Targets, a Verdict per
    # variant × workload that has targets, and per workload "what would it take" (a TargetGap: in
    # words by workbench.report.targets.target_advice)
    targets: dict[str, Any] = field(default_factory=dict)
    verdicts: list[Any] = field(default_factory=list)
    target_gaps: dict[str, TargetGap] = field(default_factory=dict)

    # does drafting pay? (workbench.analysis.drafting) a BreakEven per speculative variant × workload
    # (in words by workbench.report.drafting.drafting_advice)
    break_even: list[BreakEven] = field(default_factory=list)

    # quality beside speed (workbench.analysis.quality): the run's quality pass, None without one
    quality: Any = None

    def verdict(self, variant: str, workload: str) -> Any:
        """The targets' :class:`~workbench.analysis.targets.Verdict` of one variant × workload, or None."""
        return next((v for v in self.verdicts if (v.variant, v.workload) == (variant, workload)), None)

    @property
    def disturbance(self) -> Disturbance | None:
        return self.design.disturbance if self.design else None

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

    def to_dict(self) -> dict[str, Any]:
        """The run's analysis as JSON-ready data, its figures: ``workbench show --json`` and export's
        ``summary.json`` are this with the advice in words added (``target_advice`` after ``goodput``,
        ``drafting_advice`` after ``break_even``: :func:`workbench.report.run_json.analysis_dict`).
        ``run`` is the runs row with its environment parsed."""
        from workbench.analysis.verdict import trust, workload_verdicts

        return {
            # the answer first: per workload the fastest variant end to end and its costs; the trust
            "verdict": [v.to_dict() for v in workload_verdicts(self.summaries, self.baseline)],
            "trust": trust(self.summaries, self.baseline, self.design).to_dict(),
            "run": {**self.run, "environment": self.environment},
            "environment": self.environment,
            "variants": self.variants,
            "baseline": self.baseline,
            "summary": [
                {**s.to_dict(), **target_keys(self.verdict(s.variant, s.workload))} for s in self.summaries
            ],
            "phases": [p.to_dict() for p in self.phases],
            "roofline": [r.to_dict() for r in self.roofline],
            "accepted_lengths": self.accepted_lengths,
            # per variant × workload with targets: the checks; per workload → variant: the goodput
            "targets": [v.to_dict() for v in self.verdicts],
            "goodput": {
                w: {v.variant: v.goodput for v in self.verdicts if v.workload == w}
                for w in dict.fromkeys(v.workload for v in self.verdicts)
            },
            "design": self.design.to_dict() if self.design else None,
            # per speculative variant × workload: acceptance by position, costs, break-even (docs/analysis.md)
            "break_even": [b.to_dict() for b in self.break_even],
            # per variant: scored / lossless / not scored (why); the figures per variant × workload
            "quality": self.quality.to_dict() if self.quality else None,
        }


def target_keys(verdict: Any) -> dict[str, Any]:
    """The ``targets`` and ``goodput`` keys a summary row carries in JSON (None without targets)."""
    return {
        "targets": verdict.to_dict() if verdict is not None else None,
        "goodput": verdict.goodput if verdict is not None else None,
    }


def analyze_run(
    store: Any,
    run_ref: str | int | None,
    baseline: str | None = None,
    *,
    exclude_disturbed: bool | None = None,
) -> RunAnalysis:
    """Everything the reports show about one run. ``baseline`` overrides the run's reference variant;
    ``exclude_disturbed`` None = the default rule (disturbed trials left out when they are few)."""
    import json

    from workbench.analysis.phases import CostModel, measure_phases
    from workbench.analysis.roofline import roofline_rows
    from workbench.core.errors import WorkbenchError
    from workbench.spec.parse import recorded_auto_repetitions

    run = store.resolve_run(run_ref)
    run_id = run["id"]
    variants = store.variants(run_id)
    totals = store.step_totals(run_id)
    trials = store.trials(run_id)
    reference = baseline or run.get("baseline")
    names = {t.variant for t in trials}
    if baseline is not None and baseline not in names:
        raise WorkbenchError(
            f"baseline variant {baseline!r} not in the run ({run_id}); variants: {', '.join(sorted(names))}"
        )
    if reference not in names:
        reference = None
    summaries = summarize(
        trials,
        reference,
        store.server_metrics(run_id),
        [v["name"] for v in variants],
        exclude_disturbed=exclude_disturbed,
        step_totals=totals,
    )
    # A batched local variant is the batching lever, whatever strategy decodes it.
    strategies = {
        v["name"]: "batching" if (v.get("batch_size") or 1) > 1 else v["strategy"] for v in variants
    }
    for t in trials:
        strategies.setdefault(t.variant, t.strategy or "")
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
    analysis.quality = run_quality(store, run_id)
    attach_quality(summaries, analysis.quality)
    ref = reference or (summaries[0].variant if summaries else None)
    analysis.design = Design(
        order=run.get("trial_order") or "sequential",
        note=run.get("trial_order_note"),
        repetitions=run.get("repetitions"),
        drift=drift(trials, ref),
        disturbance=disturbance(trials, exclude_disturbed),
        workers=run.get("workers"),
        processes=len({t.worker for t in trials if t.variant == ref and t.worker is not None}) or None,
        auto=recorded_auto_repetitions(run.get("spec") or ""),
    )
    ok_ref = [t for t in trials if t.variant == ref and t.status == "ok"]
    analysis.cost_model = CostModel.from_trials(ok_ref, source=f"measured in run {run_id} on {ref}")
    analysis.phases = measure_phases(summaries, trials, ref, strategies=strategies, device=analysis.device)
    analysis.timelines = _timelines(store, trials, ref, [v["name"] for v in variants])
    _judge_targets(analysis, strategies, ref, exclude_disturbed)
    for row in store.accepted_lengths(run_id):
        analysis.accepted_lengths.setdefault(row["variant"], {})[int(row["accepted"])] = int(row["steps"])
    if analysis.accepted_lengths:
        _break_even(analysis, store, reference)
    return analysis


def _break_even(analysis: RunAnalysis, store: Any, reference: str | None) -> None:
    """Does drafting pay: per speculative variant × workload, from its steps (the trials the
    statistics use: disturbed ones left out by the same rule)."""
    from workbench.analysis.drafting import break_even

    rule = analysis.disturbance
    used = [
        t for t in analysis.trials if t.status == "ok" and not t.warmup and (rule is None or rule.keeps(t))
    ]
    analysis.break_even = break_even(
        used, store.draft_steps(analysis.run["id"]), analysis.summaries, reference
    )


def _judge_targets(
    analysis: RunAnalysis, strategies: dict[str, str], reference: str | None, exclude_disturbed: bool | None
) -> None:
    """Verdicts and "what would it take" for the workloads the run's spec gives targets."""
    from workbench.analysis.targets import evaluate, what_it_takes
    from workbench.spec.parse import recorded_targets

    analysis.targets = recorded_targets(analysis.run.get("spec") or "")
    quality = {(s.variant, s.workload): s.quality for s in analysis.summaries}
    verdicts = evaluate(
        analysis.trials, analysis.targets, exclude_disturbed=exclude_disturbed, quality=quality
    )
    # in the summaries' order (the spec's variants): an interleaved round may start with any of them
    rank = {(s.workload, s.variant): i for i, s in enumerate(analysis.summaries)}
    workloads = {w: i for i, w in enumerate(dict.fromkeys(s.workload for s in analysis.summaries))}
    analysis.verdicts = sorted(
        verdicts,
        key=lambda v: (workloads.get(v.workload, len(workloads)), rank.get((v.workload, v.variant), 0)),
    )
    analysis.target_gaps = what_it_takes(analysis.verdicts, analysis.trials, reference, strategies)


def _timelines(
    store: Any, trials: Sequence[TrialRecord], reference: str | None, order: Sequence[str] = ()
) -> list[Timeline]:
    """Per workload: the prompt whose reference e2e is the median of the workload's prompts, and for
    every variant its median-e2e repetition of that prompt."""
    ok = [t for t in trials if t.status == "ok" and t.e2e_ms is not None]

    def e2e(t: TrialRecord) -> float:
        return t.e2e_ms or 0.0  # never None in ``ok``

    out = []
    for workload in dict.fromkeys(t.workload for t in ok):
        rows = [t for t in ok if t.workload == workload]
        ref_rows = [t for t in rows if t.variant == reference] or rows
        by_prompt: dict[Any, list[float]] = defaultdict(list)
        for t in ref_rows:
            by_prompt[t.prompt_id].append(e2e(t))
        ranked = sorted(by_prompt, key=lambda p: float(np.median(by_prompt[p])))
        prompt = ranked[(len(ranked) - 1) // 2]
        for variant in dict.fromkeys(
            [*(v for v in order if any(t.variant == v for t in rows)), *(t.variant for t in rows)]
        ):
            reps = sorted(
                (t for t in rows if t.variant == variant and t.prompt_id == prompt),
                key=e2e,
            )
            if not reps:
                continue
            trial = reps[(len(reps) - 1) // 2]
            steps = store.steps(trial.id)
            if not steps:
                continue
            cumulative = np.cumsum([s["n_tokens"] for s in steps]).tolist()
            out.append(
                Timeline(
                    variant,
                    workload,
                    str(prompt),
                    trial.repetition,
                    trial.input_tokens,
                    (0.0, *(s["t_ms"] for s in steps)),
                    (0, *(int(c) for c in cumulative)),
                )
            )
    return out
