"""The answer first: per workload, which variant is fastest end to end, what it costs, and how far the
run lets a person trust it. Facts only (which variant, its estimates, the costs that apply); the words
are :mod:`workbench.report.run_report`'s.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from workbench.core.literals import TrialOrder

if TYPE_CHECKING:
    from workbench.analysis.equivalence import Equivalence, RunEquivalence
    from workbench.analysis.summary import GroupSummary

__all__ = ["TTFT_REGRESSION", "Trust", "WorkloadVerdict", "trust", "workload_verdicts"]

#: a TTFT speed-up below this is a cost worth naming (a first token more than ~5 % later)
TTFT_REGRESSION = 0.95


@dataclass
class WorkloadVerdict:
    """One workload's answer. ``best``: the variant with the highest e2e speed-up over the baseline
    (a ``GroupSummary``), None when no variant could be compared; ``beats``: its speed-up is above 1
    (its CI's lower end, when it has a CI); ``close``: other variants whose speed-up lies inside the
    best's CI (or within 5 % of it without one): the data cannot order them."""

    workload: str
    baseline: str | None
    best: GroupSummary | None = None
    close: list[GroupSummary] = field(default_factory=list)
    #: the best's costs: "ttft" (its TTFT speed-up, when below :data:`TTFT_REGRESSION`), "output"
    #: (share of outputs identical to the baseline's, when below 1 and not explained by the rounding
    #: of half precision), "quality" (the quality figures), "equivalence" (a lossless variant's check
    #: when its outputs differ: numerically equivalent — then not "output" — or not)
    costs: dict[str, Any] = field(default_factory=dict)
    compared: int = 0  # variants with a speed-up on this workload

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

    def to_dict(self) -> dict[str, Any]:
        est = self.best.speedup_e2e if self.best is not None else None
        return {
            "workload": self.workload,
            "baseline": self.baseline,
            "best": self.best.variant if self.best is not None else None,
            "speedup_e2e": est.to_dict() if est is not None else None,
            "beats_baseline": self.beats,
            "interval": self.interval,
            "close": [s.variant for s in self.close],
            "costs": {
                "ttft": self.costs["ttft"].to_dict() if "ttft" in self.costs else None,
                "output_match": self.costs.get("output"),
                "quality": self.costs.get("quality"),
                "equivalence": _equivalence_dict(self.costs.get("equivalence")),
            },
        }


def _equivalence_dict(check: Equivalence | None) -> dict[str, Any] | None:
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
        rows = [s for s in summaries if s.workload == workload and s.variant in speedups]
        verdict = WorkloadVerdict(workload, baseline, compared=len(rows))
        if rows:
            best = max(rows, key=lambda s: speedups[s.variant])
            value = speedups[best.variant]
            est = best.speedup_e2e
            lo = est.lo if est is not None and est.lo is not None else value / 1.05
            verdict.best = best
            verdict.close = sorted(
                (s for s in rows if s is not best and speedups[s.variant] >= lo),
                key=lambda s: -speedups[s.variant],
            )
            ttft = best.speedup_ttft
            if ttft is not None and ttft.value is not None and ttft.value < TTFT_REGRESSION:
                verdict.costs["ttft"] = ttft
            check = checks.get(best.variant)
            if check is not None and check.status != "identical":
                verdict.costs["equivalence"] = check
            equivalent = check is not None and check.status == "equivalent"
            if not equivalent and best.matches_baseline is not None and best.matches_baseline < 1:
                verdict.costs["output"] = best.matches_baseline
            if best.quality and best.quality.get("status") == "scored":
                verdict.costs["quality"] = best.quality
        out.append(verdict)
    return out


@dataclass
class Trust:
    """How far the run's speed-ups can be trusted: how many repetitions ran, whether the speed-ups
    have intervals, the widest and narrowest e2e minimum detectable effect, the disturbed trials, the
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

    def to_dict(self) -> dict[str, Any]:
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
    )
