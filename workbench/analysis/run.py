"""One run, analysed: everything the CLI, the export and the GUI show about a run, gathered from the
run's rows (:class:`workbench.store.loaded.LoadedRun`, read once by ``Store.load_run``) into one
:class:`RunAnalysis` (statistics, phases, roofline, step-level series). Analysis never reads the store.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import get_args

import numpy as np

from workbench.analysis.compression import CompressionBreakEven, compression_break_even
from workbench.analysis.drafting import BreakEven, break_even
from workbench.analysis.equivalence import RunEquivalence, run_equivalence
from workbench.analysis.groups import run_groups
from workbench.analysis.lengths import LengthSeries, length_series
from workbench.analysis.paired import Disturbance, disturbance, drift
from workbench.analysis.phases import CostModel, WorkloadPhase, measure_phases
from workbench.analysis.quality import RunQuality
from workbench.analysis.roofline import RooflineRow, roofline_rows
from workbench.analysis.summary import GroupSummary
from workbench.analysis.targets import TargetGap, TurnHold, Verdict, turns_held, what_it_takes
from workbench.analysis.turns import TurnSeries, conversation_series
from workbench.analysis.verdict import Trust, WorkloadVerdict, trust, workload_verdicts
from workbench.core.errors import WorkbenchError
from workbench.core.literals import TrialOrder, Workers
from workbench.spec.parse import recorded_auto_repetitions, recorded_targets
from workbench.spec.targets import Targets
from workbench.store.loaded import LoadedRun, representative_trials
from workbench.store.records import RunRecord, TrialRecord, VariantRecord

__all__ = ["Design", "RunAnalysis", "Timeline", "analyze_run"]


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
    needs (docs/analysis.md "How trials are ordered"). Facts only; :mod:`workbench.report` words them."""

    order: TrialOrder  # "sequential" also for runs from before orders
    note: str | None  # why it differs from the spec's order, or how repetitions = "auto" ended
    repetitions: int | None  # measured repetitions that ran
    drift: float | None  # the baseline's last rounds' time over its first rounds' (1.00 = none)
    disturbance: Disturbance
    #: interleaved runs: "per-repetition" (fresh worker processes every repetition) or "one"
    workers: Workers | None = None
    processes: int | None = None  # worker processes the baseline's measured trials came from
    auto: bool = False  # the spec asked for repetitions = "auto" (repeat until the CIs are narrow)

    def to_dict(self) -> dict[str, object]:
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


@dataclass(frozen=True)
class RunAnalysis:
    """Everything the CLI, the report, the charts and the GUI show about one run, built once by
    :func:`analyze_run` and never changed after: the readers only read it."""

    run: RunRecord  # the runs row (spec text included)
    variants: tuple[VariantRecord, ...]  # in the spec's order
    environment: Mapping[str, object]  # the run's environment JSON, parsed
    baseline: str | None  # the reference variant (None: the run has none)
    trials: tuple[TrialRecord, ...]  # measured trials (warm-ups excluded)
    summaries: tuple[GroupSummary, ...]  # per variant × workload, quality attached
    #: the answer first: per workload the fastest variant end to end; how far to trust the run
    workload_verdicts: tuple[WorkloadVerdict, ...]
    trust: Trust
    design: Design
    phases: tuple[WorkloadPhase, ...]  # one per workload, measured on the reference variant
    roofline: tuple[RooflineRow, ...]  # per variant × workload
    timelines: tuple[Timeline, ...]  # per workload, one representative prompt, every variant
    accepted_lengths: Mapping[str, Mapping[int, int]]  # variant → {accepted draft tokens: steps}
    #: experience targets: workload → its targets; a verdict per variant × workload that has targets;
    #: per workload with targets, what would it take (facts)
    targets: Mapping[str, Targets]
    verdicts: tuple[Verdict, ...]
    target_gaps: Mapping[str, TargetGap]
    #: does drafting pay? a BreakEven per speculative variant × workload
    break_even: tuple[BreakEven, ...]
    quality: RunQuality | None  # the run's quality pass, None without one
    #: does prompt compression pay on TTFT? one per compressing variant × workload
    compression: tuple[CompressionBreakEven, ...] = ()
    #: the lossless variants' equivalence checks and the A/A floor, None when the pass checked none
    equivalence: RunEquivalence | None = None
    #: per conversation workload × variant: its turns' figures (TTFT, decode, history, KV held), from
    #: the trials the statistics keep; what the chart, the phases sentence and the JSON read
    conversations: tuple[TurnSeries, ...] = ()
    #: per kind (TTFT vs input length, decode speed vs output length) × workload × variant: the length
    #: sweep series, from the trials the statistics keep
    lengths: tuple[LengthSeries, ...] = ()
    #: per conversation workload with a TTFT target × variant: the turns that hold it
    turn_holds: tuple[TurnHold, ...] = ()

    def turns(self, workload: str, variant: str) -> TurnSeries | None:
        """One variant's per-turn figures on a conversation workload, or None."""
        return next((s for s in self.conversations if (s.workload, s.variant) == (workload, variant)), None)

    def verdict(self, variant: str, workload: str) -> Verdict | None:
        """The targets' :class:`~workbench.analysis.targets.Verdict` of one variant × workload, or None."""
        return next((v for v in self.verdicts if (v.variant, v.workload) == (variant, workload)), None)

    @property
    def cost_model(self) -> CostModel | None:
        """The cost model measured on the reference variant (the one each phase's advice cites)."""
        return self.phases[0].measured if self.phases else None

    @property
    def disturbance(self) -> Disturbance:
        return self.design.disturbance

    @property
    def variant_names(self) -> list[str]:
        names = [v.name for v in self.variants]
        return names + sorted({s.variant for s in self.summaries} - set(names))

    @property
    def device(self) -> str:
        return _device(self.variants, self.baseline)


def analyze_run(
    loaded: LoadedRun,
    baseline: str | None = None,
    *,
    exclude_disturbed: bool | None = None,
) -> RunAnalysis:
    """Everything the reports show about one run, from its rows (:meth:`workbench.store.Store.load_run`).
    ``baseline`` overrides the run's reference variant; ``exclude_disturbed`` None = the default rule
    (disturbed trials left out when they are few)."""
    if not isinstance(loaded, LoadedRun):  # the store is read by its loader, never by analysis
        raise TypeError(f"analyze_run takes a LoadedRun (Store.load_run), not {type(loaded).__name__}")
    run, variants, trials = loaded.run, loaded.variants, loaded.trials
    reference = baseline or run.baseline
    names = {t.variant for t in trials}
    if baseline is not None and baseline not in names:
        raise WorkbenchError(
            f"baseline variant {baseline!r} not in the run ({run.id}); variants: {', '.join(sorted(names))}"
        )
    if reference not in names:
        reference = None
    targets = recorded_targets(run.spec or "")
    # the rows the run has alone and beside another run (analysis.compare.side_by_side): one computation
    groups = run_groups(loaded, reference, targets, exclude_disturbed=exclude_disturbed)
    summaries, verdicts, quality = list(groups.summaries), groups.verdicts, groups.quality
    equivalence = run_equivalence(loaded, reference) if quality is not None else None
    # A batched local variant is the batching lever, whatever strategy decodes it.
    strategies = {v.name: "batching" if (v.batch_size or 1) > 1 else v.strategy or "" for v in variants}
    for t in trials:
        strategies.setdefault(t.variant, t.strategy or "")
    try:
        environment = json.loads(run.environment or "{}")
    except ValueError:
        environment = {}
    ref = reference or (summaries[0].variant if summaries else None)
    design = Design(
        order=_order(run.trial_order),
        note=run.trial_order_note,
        repetitions=run.repetitions,
        drift=drift(trials, ref),
        disturbance=disturbance(trials, exclude_disturbed),
        workers=_workers(run.workers),
        processes=len({t.worker for t in trials if t.variant == ref and t.worker is not None}) or None,
        auto=recorded_auto_repetitions(run.spec or ""),
    )
    device = _device(variants, reference)
    conversations = tuple(conversation_series(_kept(trials, design), [v.name for v in variants]))
    accepted = loaded.accepted_lengths
    return RunAnalysis(
        run=run,
        variants=variants,
        environment=environment,
        baseline=reference,
        trials=tuple(trials),
        summaries=tuple(summaries),
        workload_verdicts=tuple(workload_verdicts(summaries, reference, equivalence)),
        trust=trust(summaries, reference, design),
        design=design,
        phases=tuple(measure_phases(summaries, trials, ref, strategies=strategies, device=device)),
        roofline=tuple(roofline_rows(summaries, variants)),
        timelines=tuple(_timelines(loaded, ref)),
        accepted_lengths=accepted,
        targets=targets,
        verdicts=verdicts,
        target_gaps=what_it_takes(verdicts, trials, ref, strategies),
        break_even=_break_even(loaded, summaries, design, reference) if accepted else (),
        quality=quality,
        compression=tuple(compression_break_even(_kept(trials, design), reference)),
        equivalence=equivalence,
        conversations=conversations,
        lengths=tuple(length_series(_kept(trials, design), [v.name for v in variants])),
        turn_holds=tuple(turns_held(conversations, targets)),
    )


def _kept(trials: Sequence[TrialRecord], design: Design) -> list[TrialRecord]:
    return [t for t in trials if design.disturbance.keeps(t)]


def _order(recorded: str | None) -> TrialOrder:
    """The recorded trial order; a run from before orders were recorded ran sequentially."""
    return next((o for o in get_args(TrialOrder) if o == recorded), "sequential")


def _workers(recorded: str | None) -> Workers | None:
    return next((w for w in get_args(Workers) if w == recorded), None)


def _device(variants: Sequence[VariantRecord], baseline: str | None) -> str:
    """The reference variant's device (else the first variant's); "cpu" when none was recorded."""
    devices = [v.device or "" for v in variants if v.name == baseline] or [v.device or "" for v in variants]
    return devices[0] if devices and devices[0] else "cpu"


def _break_even(
    loaded: LoadedRun, summaries: Sequence[GroupSummary], design: Design, reference: str | None
) -> tuple[BreakEven, ...]:
    """Does drafting pay: per speculative variant × workload, from its steps (the trials the
    statistics use: disturbed ones left out by the same rule)."""
    rule = design.disturbance
    used = [t for t in loaded.trials if t.status == "ok" and not t.warmup and rule.keeps(t)]
    return tuple(break_even(used, loaded.draft_steps, summaries, reference))


def _timelines(loaded: LoadedRun, reference: str | None) -> list[Timeline]:
    """Per workload: the prompt whose reference e2e is the median of the workload's prompts, and for
    every variant its median-e2e repetition of that prompt
    (:func:`workbench.store.loaded.representative_trials`), with its steps."""
    out = []
    for trial in representative_trials(loaded.trials, reference, loaded.variant_names):
        steps = loaded.steps.get(trial.id) if trial.id is not None else None
        if not steps:
            continue
        cumulative = np.cumsum([n for _, n in steps]).tolist()
        out.append(
            Timeline(
                trial.variant,
                trial.workload,
                str(trial.prompt_id),
                trial.repetition,
                trial.input_tokens,
                (0.0, *(t_ms for t_ms, _ in steps)),
                (0, *(int(c) for c in cumulative)),
            )
        )
    return out
