"""One run's rows, read once: :class:`LoadedRun` is everything :mod:`workbench.analysis` reads of a run
(:meth:`workbench.store.Store.load_run` builds it), so analysis computes from these records and never
opens the store. The rows are typed here once, as the tables' columns are (``tests/test_store.py``
holds the records whose table is read whole equal to its columns).

Steps stay few: a run's every step is millions of rows, so the record holds only what analysis uses of
them — per trial the sums of its sub-timed steps (:class:`StepTotals`), per variant the accepted draft
lengths, the draft → verify steps (speculative runs only), and the step series of the few trials a
timeline can show (:func:`representative_trials`, for every variant that may be the reference).
"""

from __future__ import annotations

import statistics
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import ClassVar

from workbench.store.records import RunRecord, TrialRecord, VariantRecord, _Row

__all__ = [
    "DraftStep",
    "EquivalencePositionRecord",
    "FloorRecord",
    "LoadedRun",
    "QualityPositionRecord",
    "QualityVariantRecord",
    "ReferenceRecord",
    "ServerWindowRecord",
    "StepTotals",
    "representative_trials",
]

#: one measured step of a draft → verify loop: (trial id, n_tokens, draft_proposed, draft_accepted,
#: draft_ms, verify_ms)
DraftStep = tuple[int, int, int, int, "float | None", "float | None"]


@dataclass(frozen=True)
class ServerWindowRecord(_Row):
    """One ``server_metrics`` row: a server's own figures over a window of trials."""

    table: ClassVar[str] = "server_metrics"

    id: int | None = None
    run_id: int | None = None
    variant: str = ""
    workload: str = ""
    warmup: int | None = None
    trials: int | None = None
    trial_id: int | None = None
    source: str | None = None
    requests: int | None = None
    ttft_ms: float | None = None
    ttft_count: int | None = None
    itl_ms: float | None = None
    tpot_ms: float | None = None
    e2e_ms: float | None = None
    queue_ms: float | None = None
    prefill_ms: float | None = None
    decode_ms: float | None = None
    prompt_tokens: int | None = None
    generation_tokens: int | None = None
    spec_drafts: int | None = None
    spec_draft_tokens: int | None = None
    spec_accepted_tokens: int | None = None
    spec_accepted_per_pos: str | None = None
    extra: str | None = None


@dataclass(frozen=True)
class QualityVariantRecord(_Row):
    """One ``quality_variants`` row: a variant's quality-pass outcome (scored, or why not)."""

    table: ClassVar[str] = "quality_variants"

    id: int | None = None
    run_id: int | None = None
    variant: str = ""
    status: str = ""  # reference | scored | lossless | not scored | failed
    reason: str | None = None
    method: str | None = None  # full | top-k
    positions: int | None = None
    score_ms: float | None = None
    shape: str | None = None  # a lossless variant's score shape (the old check)
    checked: str | None = None  # replay; None: the old check, or none
    unchecked: str | None = None  # JSON list: what the replay could not check


@dataclass(frozen=True)
class QualityPositionRecord:
    """One scored position of a variant (a ``quality_positions`` row, as analysis reads it)."""

    variant: str
    source: str
    workload: str
    prompt_id: str
    position: int
    nll_base: float
    nll: float
    kld: float
    delta_p: float
    same_top: int
    token_id: int | None = None
    top_id: int | None = None  # the variant's most likely token


@dataclass(frozen=True)
class FloorRecord:
    """One ``quality_floor`` row: the A/A floor of one shape at one scored position."""

    shape: str
    workload: str
    prompt_id: str
    position: int
    kld: float
    top_shift: float


@dataclass(frozen=True)
class ReferenceRecord:
    """One ``quality_reference`` row of the baseline's greedy outputs (top-k as little-endian bytes)."""

    workload: str
    prompt_id: str
    position: int
    token_id: int
    logprob: float
    top_ids: bytes
    top_logprobs: bytes


@dataclass(frozen=True)
class EquivalencePositionRecord(_Row):
    """One ``equivalence_positions`` row: a lossless variant's judged position."""

    table: ClassVar[str] = "equivalence_positions"

    id: int | None = None
    run_id: int | None = None
    variant: str = ""
    workload: str = ""
    prompt_id: str = ""
    source: str | None = None
    output: int | None = None
    position: int | None = None
    token_id: int | None = None
    pass_start: int | None = None
    pass_tokens: int | None = None
    cached: int | None = None
    base_top_id: int | None = None
    gap: float | None = None
    floor_shift: float | None = None
    floor_kld: float | None = None
    own_top_id: int | None = None
    own_gap: float | None = None
    own_shift: float | None = None
    own_kld: float | None = None
    verdict: str = ""


@dataclass(frozen=True)
class StepTotals:
    """A trial's sub-timed steps summed: drafting's and verification's time (None: not timed)."""

    draft_ms: float | None
    verify_ms: float | None


@dataclass(frozen=True)
class LoadedRun:
    """One run's rows, as analysis reads them (:meth:`workbench.store.Store.load_run`)."""

    run: RunRecord
    variants: tuple[VariantRecord, ...]  # in the spec's order
    trials: tuple[TrialRecord, ...]  # in the order recorded, warm-ups excluded
    warmups: tuple[TrialRecord, ...]  # the warm-up trials (stored, never in a statistic)
    server_windows: tuple[ServerWindowRecord, ...]  # measured windows (warm-ups excluded)
    step_totals: Mapping[int, StepTotals]  # per trial id with sub-timed steps
    accepted_lengths: Mapping[str, Mapping[int, int]]  # variant → {accepted draft tokens: steps}
    draft_steps: tuple[DraftStep, ...]  # the draft → verify steps (empty without accepted lengths)
    #: per trial id a timeline can show: its steps' (t_ms, n_tokens), in order
    steps: Mapping[int, tuple[tuple[float, int], ...]]
    quality_variants: tuple[QualityVariantRecord, ...] = ()
    quality_positions: tuple[QualityPositionRecord, ...] = ()
    quality_floor: tuple[FloorRecord, ...] = ()
    quality_reference: tuple[ReferenceRecord, ...] = ()  # the baseline's greedy outputs ("output")
    equivalence_positions: tuple[EquivalencePositionRecord, ...] = ()

    @property
    def id(self) -> int:
        return self.run.id

    @property
    def variant_names(self) -> list[str]:
        return [v.name for v in self.variants]


def representative_trials(
    trials: Sequence[TrialRecord], reference: str | None, order: Sequence[str] = ()
) -> list[TrialRecord]:
    """The trials a run's timeline shows: per workload, the prompt whose ``reference`` e2e is the
    median of the workload's prompts (every variant's when the reference has none there), and for
    every variant (``order`` first, then as they come) its median-e2e repetition of that prompt."""
    ok = [t for t in trials if t.status == "ok" and t.e2e_ms is not None]

    def e2e(t: TrialRecord) -> float:
        return t.e2e_ms or 0.0  # never None in ``ok``

    out = []
    for workload in dict.fromkeys(t.workload for t in ok):
        rows = [t for t in ok if t.workload == workload]
        ref_rows = [t for t in rows if t.variant == reference] or rows
        by_prompt: dict[str, list[float]] = defaultdict(list)
        for t in ref_rows:
            by_prompt[t.prompt_id].append(e2e(t))
        ranked = sorted(by_prompt, key=lambda p: float(statistics.median(by_prompt[p])))
        prompt = ranked[(len(ranked) - 1) // 2]
        for variant in dict.fromkeys(
            [*(v for v in order if any(t.variant == v for t in rows)), *(t.variant for t in rows)]
        ):
            reps = sorted((t for t in rows if t.variant == variant and t.prompt_id == prompt), key=e2e)
            if reps:
                out.append(reps[(len(reps) - 1) // 2])
    return out


def timeline_candidates(trials: Sequence[TrialRecord], order: Sequence[str]) -> list[int]:
    """The ids of every trial :func:`representative_trials` may pick, whichever variant (or none) is
    the reference: the steps :meth:`~workbench.store.Store.load_run` reads."""
    ids: dict[int, None] = {}
    for reference in [None, *dict.fromkeys(t.variant for t in trials)]:
        ids.update((t.id, None) for t in representative_trials(trials, reference, order) if t.id is not None)
    return list(ids)


def accepted_by_variant(rows: Iterable[tuple[str, int, int]]) -> dict[str, dict[int, int]]:
    """``(variant, accepted, steps)`` rows as variant → {accepted draft tokens: steps}."""
    out: dict[str, dict[int, int]] = {}
    for variant, accepted, steps in rows:
        out.setdefault(variant, {})[int(accepted)] = int(steps)
    return out
