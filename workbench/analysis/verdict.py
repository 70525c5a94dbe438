"""The answer first: per workload, which variant is fastest end to end, what it costs, and how far the
run lets a person trust it. Facts only (which variant, its estimates, the costs that apply); the words
are :mod:`workbench.report.run_report`'s.

The rule (docs/analysis.md "The verdict"): the best is the variant with the highest paired e2e
speed-up. A variant the data cannot tell from it — their e2e intervals overlap and their e2e medians
lie within the run's minimum detectable effect of each other — is *tied* with it: the report says
"tie", not a winner, and names the rule's pick only when asked. The others inside the best's
interval are "as fast". Every one of them carries its costs (:func:`variant_costs`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol

from workbench.core.literals import TrialOrder

if TYPE_CHECKING:
    from workbench.analysis.equivalence import Equivalence, RunEquivalence
    from workbench.analysis.paired import PairedEstimate
    from workbench.analysis.quality import GroupQuality
    from workbench.analysis.summary import GroupSummary

__all__ = [
    "MEMORY_COST",
    "TIE_WITHOUT_INTERVAL",
    "TTFT_REGRESSION",
    "Trust",
    "WorkloadVerdict",
    "tied",
    "trust",
    "variant_costs",
    "workload_verdicts",
]

#: a TTFT speed-up below this is a cost worth naming (a first token more than ~5 % later)
TTFT_REGRESSION = 0.95
#: a median peak memory more than this share above the baseline's is a cost worth naming
MEMORY_COST = 0.05
#: without intervals (one repetition): speed-ups this close (a ratio) are "as fast", and e2e medians
#: this close a tie — the data says nothing finer
TIE_WITHOUT_INTERVAL = 0.05


@dataclass(frozen=True)
class Costs:
    """What a variant costs against the baseline (:func:`variant_costs`); None: no such cost."""

    ttft: PairedEstimate | None = None  # its TTFT speed-up, when below TTFT_REGRESSION
    output: float | None = None  # the share of outputs identical to the baseline's, when below 1
    quality: GroupQuality | None = None  # its quality figures, when scored
    equivalence: Equivalence | None = None  # a lossless variant's check, when its outputs differ
    memory_mb: float | None = None  # its extra median peak memory, when above MEMORY_COST

    def to_dict(self) -> dict[str, object]:
        return {
            "ttft": self.ttft.to_dict() if self.ttft is not None else None,
            "output_match": self.output,
            "quality": self.quality.to_dict() if self.quality is not None else None,
            "equivalence": _equivalence_dict(self.equivalence),
            "memory_mb": self.memory_mb,
        }


@dataclass(frozen=True)
class WorkloadVerdict:
    """One workload's answer. ``best``: the variant with the highest e2e speed-up over the baseline
    (a ``GroupSummary``), None when no variant could be compared; ``beats``: its speed-up is above 1
    (its CI's lower end, when it has a CI); ``close``: other variants whose speed-up lies inside the
    best's CI (or within 5 % of it without one) and not tied with it: the data cannot order them;
    ``tie``: variants tied with the best (:func:`tied`) — then the best is only the rule's pick."""

    workload: str
    baseline: str | None
    best: GroupSummary | None = None
    close: tuple[GroupSummary, ...] = ()
    #: the best's costs (:func:`variant_costs`)
    costs: Costs = field(default_factory=Costs)
    compared: int = 0  # variants with a speed-up on this workload
    #: the variants tied with the best (the best not included), highest speed-up first
    tie: tuple[GroupSummary, ...] = ()
    #: the costs of each variant in ``tie`` and ``close``, by name
    alternatives: Mapping[str, Costs] = field(default_factory=dict)

    @property
    def interval(self) -> bool:
        est = self.best.speedup_e2e if self.best is not None else None
        return est is not None and est.lo is not None and est.hi is not None

    @property
    def beats(self) -> bool | None:
        """True: faster than the baseline (CI above 1); False: not faster (CI below or value ≤ 1);
        None: the CI contains 1 (no detectable difference)."""
        est = self.best.speedup_e2e if self.best is not None else None
        if est is None or est.value is None:
            return None
        if est.lo is None or est.hi is None:
            return est.value > 1
        if est.lo > 1:
            return True
        return False if est.hi < 1 else None

    def to_dict(self) -> dict[str, object]:
        est = self.best.speedup_e2e if self.best is not None else None
        return {
            "workload": self.workload,
            "baseline": self.baseline,
            # on a tie: the rule's pick (the highest paired e2e speed-up), which the text names
            # only when asked (`show --pick`)
            "best": self.best.variant if self.best is not None else None,
            "speedup_e2e": est.to_dict() if est is not None else None,
            "beats_baseline": self.beats,
            "interval": self.interval,
            "tie": [s.variant for s in self.tied] if self.tie else [],
            "close": [s.variant for s in self.close],
            "costs": self.costs.to_dict(),
            "alternatives": {
                s.variant: {
                    "speedup_e2e": s.speedup_e2e.to_dict() if s.speedup_e2e is not None else None,
                    "e2e_ms": s.metrics["e2e_ms"].value if "e2e_ms" in s.metrics else None,
                    "costs": self.alternatives.get(s.variant, Costs()).to_dict(),
                }
                for s in [*self.tie, *self.close]
            },
        }

    @property
    def tied(self) -> list[GroupSummary]:
        """The best and the variants tied with it (empty when there is no tie)."""
        return [self.best, *self.tie] if self.best is not None and self.tie else []


def _equivalence_dict(check: Equivalence | None) -> dict[str, object] | None:
    if check is None:
        return None
    judged = check.judged
    return {
        "status": check.status,
        "checked": "replay" if judged is not None else "teacher-forced (old)",
        "positions": judged.positions if judged is not None else None,
        "near_ties": judged.near_ties if judged is not None else None,
        "kld": check.kld,
        "floor_kld": check.floor.kld if check.floor is not None else None,
        "divergences": len(check.divergences),
        "tie_explained": check.explained,
    }


def variant_costs(
    summary: GroupSummary, reference: GroupSummary | None, check: Equivalence | None = None
) -> Costs:
    """What a variant costs against the baseline (``reference``, its row on the same workload):
    "ttft" (its TTFT speed-up, when below :data:`TTFT_REGRESSION`), "output" (share of outputs
    identical to the baseline's, when below 1 and not explained by the rounding of half precision),
    "quality" (the quality figures), "equivalence" (a lossless variant's ``check`` when its outputs
    differ: numerically equivalent — then not "output" — or not), "memory_mb" (how much more median
    peak memory than the baseline, when more than :data:`MEMORY_COST` of the baseline's)."""
    ttft = summary.speedup_ttft
    equivalent = check is not None and check.status == "equivalent"
    matches = summary.matches_baseline
    mine = summary.metrics["peak_memory_mb"].value if "peak_memory_mb" in summary.metrics else None
    base = (
        reference.metrics["peak_memory_mb"].value
        if reference is not None and "peak_memory_mb" in reference.metrics
        else None
    )
    return Costs(
        ttft=ttft if ttft is not None and ttft.value is not None and ttft.value < TTFT_REGRESSION else None,
        output=matches if not equivalent and matches is not None and matches < 1 else None,
        quality=summary.quality
        if summary.quality is not None and summary.quality.status == "scored"
        else None,
        equivalence=check if check is not None and check.status != "identical" else None,
        memory_mb=mine - base if mine is not None and base and mine - base > MEMORY_COST * base else None,
    )


def tied(best: GroupSummary, other: GroupSummary) -> bool:
    """True when the data cannot tell ``other`` from ``best``: their e2e speed-ups' intervals overlap
    and their e2e medians lie within the larger of their minimum detectable effects of each other
    (without intervals: speed-ups and medians within :data:`TIE_WITHOUT_INTERVAL`)."""
    a, b = best.speedup_e2e, other.speedup_e2e
    if a is None or b is None or a.value is None or b.value is None:
        return False
    if None in (a.lo, a.hi, b.lo, b.hi):
        overlap = b.value >= a.value / (1 + TIE_WITHOUT_INTERVAL)
    else:
        overlap = a.lo <= b.hi and b.lo <= a.hi  # type: ignore[operator]
    ma = best.metrics["e2e_ms"].value if "e2e_ms" in best.metrics else None
    mb = other.metrics["e2e_ms"].value if "e2e_ms" in other.metrics else None
    if not overlap or not ma or not mb:
        return False
    mdes = [m for m in (a.mde, b.mde) if m is not None]
    return abs(mb / ma - 1) <= (max(mdes) if mdes else TIE_WITHOUT_INTERVAL)


def workload_verdicts(
    summaries: Sequence[GroupSummary], baseline: str | None, equivalence: RunEquivalence | None = None
) -> list[WorkloadVerdict]:
    """One :class:`WorkloadVerdict` per workload, in the summaries' order. ``equivalence``: the
    lossless variants' checks; one found numerically equivalent does not have "output differs" as a
    cost."""
    checks = equivalence.variants if equivalence is not None else {}
    out = []
    for workload in dict.fromkeys(s.workload for s in summaries):
        speedups = {  # variant → its e2e speed-up, where it has one
            s.variant: s.speedup_e2e.value
            for s in summaries
            if s.workload == workload
            and s.variant != baseline
            and s.speedup_e2e is not None
            and s.speedup_e2e.value is not None
        }
        reference = next((s for s in summaries if s.workload == workload and s.variant == baseline), None)
        rows = [s for s in summaries if s.workload == workload and s.variant in speedups]
        verdict = WorkloadVerdict(workload, baseline, compared=len(rows))
        if rows:
            best = max(rows, key=lambda s: speedups[s.variant])
            value = speedups[best.variant]
            est = best.speedup_e2e
            lo = est.lo if est is not None and est.lo is not None else value / (1 + TIE_WITHOUT_INTERVAL)
            verdict = dataclasses.replace(verdict, best=best)
            others = sorted((s for s in rows if s is not best), key=lambda s: -speedups[s.variant])
            # a tie for the lead; below the baseline there is no lead to share
            ties = tuple(s for s in others if tied(best, s)) if verdict.beats else ()
            tie = {s.variant for s in ties}
            close = tuple(s for s in others if speedups[s.variant] >= lo and s.variant not in tie)
            verdict = dataclasses.replace(
                verdict,
                tie=ties,
                close=close,
                costs=variant_costs(best, reference, checks.get(best.variant)),
                alternatives={
                    s.variant: variant_costs(s, reference, checks.get(s.variant)) for s in [*ties, *close]
                },
            )
        out.append(verdict)
    return out


@dataclass(frozen=True)
class Trust:
    """How far the run's speed-ups can be trusted: how many repetitions of how many prompts ran,
    whether the speed-ups have intervals, the widest and narrowest e2e minimum detectable effect, the disturbed trials, the
    drift, the order."""

    repetitions: int | None
    intervals: bool  # some e2e speed-up has a CI
    mde: tuple[float, float] | None  # (smallest, largest) e2e MDE over the variant × workload rows
    disturbed: int
    disturbed_excluded: bool
    drift: float | None
    order: TrialOrder | None
    note: str | None = None  # how repetitions = "auto" ended, or why the order differs
    auto: bool = False  # the run repeated until its CIs were narrow (repetitions = "auto")
    #: workload → the prompts each repetition measured (the most any variant ran on it)
    prompts: Mapping[str, int] = field(default_factory=dict)

    def to_dict(self) -> dict[str, object]:
        return {
            "repetitions": self.repetitions,
            "intervals": self.intervals,
            "mde": list(self.mde) if self.mde else None,
            "disturbed": self.disturbed,
            "disturbed_excluded": self.disturbed_excluded,
            "drift": self.drift,
            "order": self.order,
            "note": self.note,
            "auto": self.auto,
            "prompts": self.prompts,
        }


class DesignFacts(Protocol):
    """What the trust reads of a run's design (``analysis.run.Design``)."""

    @property
    def repetitions(self) -> int | None: ...
    @property
    def drift(self) -> float | None: ...
    @property
    def order(self) -> TrialOrder: ...
    @property
    def note(self) -> str | None: ...
    @property
    def auto(self) -> bool: ...


def trust(
    summaries: Sequence[GroupSummary], baseline: str | None, design: DesignFacts | None = None
) -> Trust:
    """The :class:`Trust` of a run (``design``: its ``analysis.run.Design``, None for runs side by side)."""
    ests = [s.speedup_e2e for s in summaries if s.variant != baseline and s.speedup_e2e is not None]
    mdes = [e.mde for e in ests if e.mde is not None]
    return Trust(
        repetitions=design.repetitions if design is not None else None,
        intervals=any(e.lo is not None for e in ests),
        mde=(min(mdes), max(mdes)) if mdes else None,
        disturbed=sum(s.n_disturbed for s in summaries),
        disturbed_excluded=any(s.disturbed_excluded for s in summaries),
        drift=design.drift if design is not None else None,
        order=design.order if design is not None else None,
        note=design.note if design is not None else None,
        auto=design.auto if design is not None else False,
        prompts=_prompts(summaries),
    )


def _prompts(summaries: Sequence[GroupSummary]) -> dict[str, int]:
    out: dict[str, int] = {}
    for s in summaries:
        out[s.workload] = max(out.get(s.workload, 0), s.prompts)
    return {w: n for w, n in out.items() if n}
