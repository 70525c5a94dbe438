"""One run, analysed: everything the CLI, the export and the GUI show about a run, gathered from the
store into one :class:`RunAnalysis` (statistics, phases, roofline, step-level series).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from workbench.analysis.summary import GroupSummary, summarize

__all__ = ["RunAnalysis", "Timeline", "analyze_run"]


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
    phases: list[Any]  # workbench.analysis.phases.WorkloadPhase, one per workload
    cost_model: Any  # workbench.analysis.phases.CostModel measured on the reference variant (or None)
    roofline: list[Any]  # workbench.analysis.roofline.RooflineRow per variant × workload
    timelines: list[Timeline]  # per workload, one representative prompt, every variant
    accepted_lengths: dict[str, dict[int, int]]  # variant → {accepted draft tokens: steps}

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
        """The run's analysis as JSON-ready data: the one serialiser (``workbench show --json``,
        export's ``summary.json``). ``run`` is the runs row with its environment parsed."""
        return {
            "run": {**self.run, "environment": self.environment},
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

    from workbench.analysis.phases import CostModel, measure_phases
    from workbench.analysis.roofline import roofline_rows
    from workbench.core.errors import WorkbenchError

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
    summaries = summarize(trials, reference, store.server_metrics(run_id), [v["name"] for v in variants])
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
