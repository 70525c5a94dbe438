"""Does drafting pay? The break-even analysis of speculative variants (a draft model, prompt lookup),
from the steps they recorded (docs/analysis.md "Does drafting pay?").

Every decode step of a draft → verify loop records how many draft tokens it proposed (``k``, which
may vary per step and may be 0: a plain step), how many were accepted, and the time of the draft
(``draft_ms``) and of the verify pass (``verify_ms``). In units of ``T1``, the target's one-token
decoding step:

    D(k) = draft_ms / T1          the draft's cost (≈ k · c_d for a draft model, ≈ 0 for prompt lookup)
    V(k) = verify_ms / T1         the target's pass over k + 1 tokens (V(0) = 1 by definition of T1)
    tokens per step = 1 + accepted = 1 + r · k        for an acceptance rate r = accepted / proposed

so a step at draft length ``k`` is worth ``(1 + r·k) / (D(k) + V(k))`` plain steps, and drafting
breaks even at the acceptance

    r*(k) = (D(k) + V(k) − 1) / k

(model-free: no assumption about how acceptance falls along the draft). Over a variant's own mix of
draft lengths the needed acceptance is ``Σ n_k (D(k) + V(k) − 1) / Σ n_k k`` (``n_k`` steps at
length ``k``), the figure its measured acceptance (Σ accepted / Σ proposed) is compared with.

``T1`` is the median ``verify_ms`` of the variant's own plain steps (k = 0: the verify of one
token *is* a target step: prompt lookup finding nothing, adaptive drafting backing off, the budget
leaving no room) when it has at least :data:`MIN_PLAIN_STEPS` of them in the workload, else the
TPOT of the baseline's trial of the same prompt in the same round (the pairs of
:mod:`workbench.analysis.paired`). D and V per draft length are medians over its steps; ``c_d`` =
Σ draft / Σ proposed; V(k) is also fitted as a line ``a + b·k`` through the per-length medians
(weighted by their steps; without plain steps anchored at V(0) = 1, as heavily as its best-measured
length), which prices the lengths a what-if needs but the variant hardly drafted.

The **predicted** speed-up = Σ tokens / Σ (D(k_s) + V(k_s)) over the variant's decode steps: its
measured acceptance and per-length costs, nothing else. The **measured** one is the paired decode
speed-up against the baseline; the gap between them is the loop's time outside draft and verify
(``overhead``: decode time − Σ draft − Σ verify, per step in T1) and, when T1 comes from the
variant's own plain steps, the difference between its target step and the baseline's.

**End to end**, the draft's prefill counts too: the part before the first token (a draft that reads
the prompt itself: ``ttft_extra_ms``, the variant's TTFT minus the paired baseline trial's) and the
part after it (a copy of the target's cache, a catch-up prefill read in chunks: the ``draft_ms`` of
its plain steps, ``prefill_after_ms`` per trial). With ``F`` = both (median per trial) and ``S`` =
the baseline's TPOT minus the variant's decode time per token without the after-part (median), the
variant's e2e beats the baseline's from ``wins_from = 1 + ⌈F / S⌉`` output tokens on (1 when ``F ≤ 0``,
never when ``S ≤ 0``): a straight line in the output length, the figure to read against the
workload's output length (``output_tokens``).

The acceptance **by draft position** ``i`` is P(accepted ≥ i | proposed ≥ i): of the steps that
drafted at least ``i`` tokens, the share that accepted the first ``i``. It predicts a fixed draft
length's tokens per step, ``1 + Σ_{i ≤ k} p_i``, hence the best fixed ``k`` (``best_k``).

Facts only (``BreakEven.verdict``, ``BreakEven.hint``): :mod:`workbench.report.drafting` words them.
"""

from __future__ import annotations

import math
import statistics
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Literal

from workbench.analysis.stats import fit_line
from workbench.store.records import TrialRecord

if TYPE_CHECKING:
    from workbench.analysis.paired import PairedEstimate
    from workbench.analysis.summary import GroupSummary

__all__ = [
    "MIN_BUCKET_STEPS",
    "MIN_PLAIN_STEPS",
    "BreakEven",
    "DraftHint",
    "DraftLength",
    "DraftPosition",
    "DraftingVerdict",
    "HintKind",
    "StepRow",
    "break_even",
]

#: plain (k = 0) steps a variant needs in a workload for its own target step to be the unit
MIN_PLAIN_STEPS = 5
#: steps a draft length needs for its measured costs to be used in a what-if (else the fitted line)
MIN_BUCKET_STEPS = 5
#: a prediction this far from the measured speed-up is worth a line of advice
PREDICTION_GAP = 0.15

#: does drafting pay (:attr:`BreakEven.verdict`): the measured speed-up's CI above 1, below it, or
#: straddling it (the prediction's side of 1 without a measurement)
DraftingVerdict = Literal["pays", "loses", "unclear"]
#: where drafting did not pay, what would do better; or why the prediction missed (:class:`DraftHint`)
HintKind = Literal["shorter-drafts", "draft-cost", "low-acceptance", "prediction-gap"]

#: one step as :meth:`workbench.store.Store.draft_steps` returns it:
#: (trial id, tokens, proposed, accepted, draft_ms, verify_ms)
StepRow = tuple[int, int, int, int, float | None, float | None]


@dataclass(frozen=True)
class DraftLength:
    """The steps that proposed ``k`` draft tokens, and what they cost (in target steps)."""

    k: int
    steps: int
    proposed: int
    accepted: int
    draft_cost: float | None  # median draft_ms / T1
    verify_cost: float | None  # median verify_ms / T1

    @property
    def acceptance(self) -> float | None:
        return self.accepted / self.proposed if self.proposed else None

    @property
    def tokens_per_step(self) -> float:
        return 1 + self.accepted / self.steps if self.steps else 1.0

    @property
    def cost(self) -> float | None:
        """D(k) + V(k): one step, in target steps."""
        if self.verify_cost is None:
            return None
        return (self.draft_cost or 0.0) + self.verify_cost

    @property
    def break_even(self) -> float | None:
        """The acceptance at which this length's step is worth exactly its cost (may be < 0: it always
        pays, or > 1: it never can)."""
        cost = self.cost
        return (cost - 1) / self.k if cost is not None and self.k > 0 else None

    @property
    def speedup(self) -> float | None:
        """Predicted speed-up of steps at this length over plain decoding: tokens per step / cost."""
        cost = self.cost
        return self.tokens_per_step / cost if cost else None

    def to_dict(self) -> dict[str, object]:
        return {
            "k": self.k,
            "steps": self.steps,
            "proposed": self.proposed,
            "accepted": self.accepted,
            "acceptance": self.acceptance,
            "tokens_per_step": self.tokens_per_step,
            "draft_cost": self.draft_cost,
            "verify_cost": self.verify_cost,
            "cost": self.cost,
            "break_even": self.break_even,
            "predicted_speedup": self.speedup,
        }


@dataclass(frozen=True)
class DraftPosition:
    """Of the steps that drafted at least ``position`` tokens, how many accepted the first ``position``."""

    position: int
    reached: int
    accepted: int

    @property
    def rate(self) -> float:
        return self.accepted / self.reached if self.reached else 0.0

    def to_dict(self) -> dict[str, object]:
        return {
            "position": self.position,
            "reached": self.reached,
            "accepted": self.accepted,
            "rate": self.rate,
        }


@dataclass(frozen=True)
class DraftHint:
    """What would do better where drafting did not pay (or paid unclearly), or why the prediction
    missed the measured speed-up:

    - ``shorter-drafts``: a fixed draft shorter than its mean pays (``BreakEven.best_k``,
      ``best_speedup``, ``mean_draft_length``);
    - ``draft-cost``: no draft length pays at this cost: even a one-token draft needs more
      acceptance (``needed_first``) than no acceptance, or than the first position's
      (``first_rate``) which it reaches: a cheaper draft would pay, else plain decoding;
    - ``low-acceptance``: no draft length pays: even the first draft token is accepted too rarely;
    - ``prediction-gap``: the prediction is more than :data:`PREDICTION_GAP` off the measurement;
      ``overhead`` (the loop's time outside draft and verify, per step in T1, when > 0.05) and
      ``step_ratio`` (its plain step over the baseline's, when more than 5 % off 1) say why.
    """

    kind: HintKind
    first_rate: float | None = None  # acceptance at draft position 1
    needed_first: float | None = None  # the acceptance a one-token draft needs to break even
    plain_share: float | None = None  # the share of its steps that drafted nothing, when ≥ half
    overhead: float | None = None
    step_ratio: float | None = None


@dataclass(frozen=True)
class BreakEven:
    """One speculative variant on one workload: acceptance, costs, break-even, predicted vs measured."""

    variant: str
    workload: str
    unit: str | None  # where T1 comes from: "plain steps" | "baseline" | None (no timings)
    target_step_ms: float | None  # T1 (median)
    baseline_step_ms: float | None  # the baseline's median TPOT on the same prompts, when there is one
    steps: int  # decode steps (after the first token)
    plain_steps: int  # of those, steps that drafted nothing (k = 0)
    proposed: int
    accepted: int
    tokens: int  # tokens the decode steps delivered
    positions: tuple[DraftPosition, ...] = ()
    lengths: tuple[DraftLength, ...] = ()
    draft_cost_per_token: float | None = None  # c_d: Σ draft / Σ proposed, in T1
    verify_fit: tuple[float, float] | None = None  # V(k) ≈ intercept + slope·k
    overhead: float | None = None  # decode time outside draft and verify, per step, in T1
    needed: float | None = None  # the acceptance that breaks even for this mix of draft lengths
    predicted_speedup: float | None = None
    measured_speedup: PairedEstimate | None = None  # paired decode speed-up against the baseline
    best_k: int | None = None  # the fixed draft length the positions and costs predict best
    best_speedup: float | None = None
    # end to end: the draft's prefill before the first token and after it, what a token saves
    ttft_extra_ms: float | None = None  # median variant TTFT − paired baseline TTFT
    prefill_after_ms: float | None = None  # median per trial: draft_ms of plain steps (copy, catch-up)
    prefill_steps: int = 0  # plain steps that did draft prefill work (catch-up chunks, a cache copy)
    step_saving_ms: float | None = None  # baseline TPOT − the variant's per token without the after-part
    wins_from: int | None = None  # output tokens from which its e2e beats the baseline's (None: never)
    output_tokens: float | None = None  # median output tokens of its trials
    e2e_speedup: PairedEstimate | None = None  # the paired e2e speed-up, for the verdict's context

    @property
    def acceptance(self) -> float | None:
        return self.accepted / self.proposed if self.proposed else None

    @property
    def drafted_steps(self) -> int:
        return self.steps - self.plain_steps

    @property
    def mean_draft_length(self) -> float | None:
        return self.proposed / self.drafted_steps if self.drafted_steps else None

    def cost_at(self, k: int) -> float | None:
        """D(k) + V(k) in target steps: measured at that length when it has at least
        :data:`MIN_BUCKET_STEPS` steps, else from ``c_d`` and the fitted verify line."""
        bucket = next((x for x in self.lengths if x.k == k), None)
        if bucket is not None and bucket.steps >= MIN_BUCKET_STEPS and bucket.cost is not None:
            return bucket.cost
        if self.verify_fit is None:
            return bucket.cost if bucket is not None else None
        return self.verify_fit[0] + self.verify_fit[1] * k + (self.draft_cost_per_token or 0.0) * k

    def needed_at(self, k: int) -> float | None:
        """The acceptance a fixed draft of ``k`` tokens needs to break even (:meth:`cost_at`)."""
        cost = self.cost_at(k)
        return (cost - 1) / k if cost is not None and k > 0 else None

    @property
    def verdict(self) -> DraftingVerdict | None:
        """``pays`` / ``loses`` / ``unclear``: from the measured speed-up's CI (its value when it has
        none), else from the prediction; None when neither is known."""
        est = self.measured_speedup
        if est is not None and est.value is not None:
            if est.lo is not None and est.hi is not None:
                return "pays" if est.lo > 1 else "loses" if est.hi < 1 else "unclear"
            return "pays" if est.value > 1 else "loses"
        if self.predicted_speedup is not None:
            return "pays" if self.predicted_speedup > 1 else "loses"
        return None

    @property
    def hint(self) -> DraftHint | None:
        """What would do better where drafting did not pay, or why the prediction missed (None:
        nothing to add); :func:`workbench.report.drafting.hint_text` words it."""
        return _hint(self)

    def to_dict(self) -> dict[str, object]:
        est = self.measured_speedup
        return {
            "variant": self.variant,
            "workload": self.workload,
            "unit": self.unit,
            "target_step_ms": self.target_step_ms,
            "baseline_step_ms": self.baseline_step_ms,
            "steps": self.steps,
            "plain_steps": self.plain_steps,
            "proposed": self.proposed,
            "accepted": self.accepted,
            "tokens": self.tokens,
            "acceptance": self.acceptance,
            "mean_draft_length": self.mean_draft_length,
            "draft_cost_per_token": self.draft_cost_per_token,
            "verify_fit": (
                {"intercept": self.verify_fit[0], "slope": self.verify_fit[1]} if self.verify_fit else None
            ),
            "overhead": self.overhead,
            "needed": self.needed,
            "predicted_speedup": self.predicted_speedup,
            "measured_speedup": est.to_dict() if est is not None else None,
            "verdict": self.verdict,
            "best_k": self.best_k,
            "best_speedup": self.best_speedup,
            "ttft_extra_ms": self.ttft_extra_ms,
            "prefill_after_ms": self.prefill_after_ms,
            "prefill_steps": self.prefill_steps,
            "step_saving_ms": self.step_saving_ms,
            "wins_from": self.wins_from,
            "output_tokens": self.output_tokens,
            "e2e_speedup": self.e2e_speedup.to_dict() if self.e2e_speedup is not None else None,
            "positions": [p.to_dict() for p in self.positions],
            "lengths": [b.to_dict() for b in self.lengths],
        }


def break_even(
    trials: Sequence[TrialRecord],
    steps: Iterable[StepRow],
    summaries: Sequence[GroupSummary] = (),
    baseline: str | None = None,
) -> list[BreakEven]:
    """One :class:`BreakEven` per variant × workload whose steps drafted anything. ``trials``: the
    measured trials the statistics use (ok, not warm-ups, disturbed ones left out by the run's rule);
    ``steps``: the decode steps of the draft → verify loops (:data:`StepRow`; steps of other trials
    are ignored); ``summaries``: for the measured (paired) decode speed-ups; ``baseline``: the
    reference variant, whose TPOT is the unit when a variant has too few plain steps."""
    by_id = {t.id: t for t in trials}
    groups: dict[tuple[str, str], list[StepRow]] = defaultdict(list)
    for trial_id, n_tokens, proposed, accepted, draft_ms, verify_ms in steps:
        t = by_id.get(trial_id)
        if t is not None:
            groups[(t.variant, t.workload)].append(
                (trial_id, int(n_tokens or 0), int(proposed or 0), int(accepted or 0), draft_ms, verify_ms)
            )
    base_tpot = {
        (t.workload, t.prompt_id, t.repetition): t.tpot_ms
        for t in trials
        if t.variant == baseline and t.tpot_ms
    }
    base_ttft = {
        (t.workload, t.prompt_id, t.repetition): t.ttft_ms
        for t in trials
        if t.variant == baseline and t.ttft_ms is not None
    }
    speedups = {(s.variant, s.workload): s.speedup_decode for s in summaries}
    e2e = {(s.variant, s.workload): s.speedup_e2e for s in summaries}
    order = {name: i for i, name in enumerate(dict.fromkeys(s.variant for s in summaries))}
    workloads = {name: i for i, name in enumerate(dict.fromkeys(s.workload for s in summaries))}
    out = []
    for (variant, workload), rows in groups.items():
        # a variant that drafted, or whose draft did prefill work on plain steps and then gave up
        if variant == baseline or not any(r[2] > 0 or (r[2] == 0 and r[4]) for r in rows):
            continue
        mine = [t for t in trials if (t.variant, t.workload) == (variant, workload)]
        result = _analyse(variant, workload, rows, mine, base_tpot, speedups.get((variant, workload)))
        result = replace(result, e2e_speedup=e2e.get((variant, workload)))
        out.append(_end_to_end(result, rows, mine, base_tpot, base_ttft))
    return sorted(
        out, key=lambda b: (order.get(b.variant, len(order)), workloads.get(b.workload, len(workloads)))
    )


def _analyse(
    variant: str,
    workload: str,
    rows: list[StepRow],
    trials: Sequence[TrialRecord],
    base_tpot: dict[tuple[str, str, int], float],
    measured: PairedEstimate | None,
) -> BreakEven:
    plain = [r for r in rows if r[2] == 0]
    result = BreakEven(
        variant=variant,
        workload=workload,
        unit=None,
        target_step_ms=None,
        baseline_step_ms=None,
        steps=len(rows),
        plain_steps=len(plain),
        proposed=sum(r[2] for r in rows),
        accepted=sum(r[3] for r in rows),
        tokens=sum(r[1] for r in rows),
        measured_speedup=measured,
        positions=tuple(_positions(rows)),
    )
    # T1: the variant's own plain steps, else the paired baseline trial's TPOT
    pair_t1: dict[int, float] = {}
    for t in trials:
        tpot = base_tpot.get((t.workload, t.prompt_id, t.repetition))
        if tpot and t.id is not None:
            pair_t1[t.id] = tpot
    if pair_t1:
        result = replace(result, baseline_step_ms=statistics.median(pair_t1.values()))
    plain_verify = [r[5] for r in plain if r[5] is not None and r[5] > 0]
    if len(plain_verify) >= MIN_PLAIN_STEPS:
        t1_plain = statistics.median(plain_verify)
        unit: dict[int, float] = {t.id: t1_plain for t in trials if t.id is not None}
        result = replace(result, unit="plain steps", target_step_ms=t1_plain)
    elif pair_t1:
        unit = pair_t1
        result = replace(result, unit="baseline", target_step_ms=result.baseline_step_ms)
    else:
        unit = {}
    timed = [r for r in rows if r[5] is not None and r[0] in unit]
    if not timed:
        return replace(result, unit=None, target_step_ms=None)
    # per draft length: medians of the costs in target steps
    buckets: dict[int, list[StepRow]] = defaultdict(list)
    for r in rows:
        buckets[r[2]].append(r)
    lengths = []
    for k in sorted(buckets):
        these = buckets[k]
        drafts = [(r[4] or 0.0) / unit[r[0]] for r in these if r[0] in unit and r[5] is not None]
        verifies = [r[5] / unit[r[0]] for r in these if r[0] in unit and r[5] is not None]
        lengths.append(
            DraftLength(
                k=k,
                steps=len(these),
                proposed=sum(r[2] for r in these),
                accepted=sum(r[3] for r in these),
                draft_cost=statistics.median(drafts) if drafts else None,
                verify_cost=statistics.median(verifies) if verifies else None,
            )
        )
    result = replace(result, lengths=tuple(lengths))
    drafted = [r for r in timed if r[2] > 0]
    if drafted:
        per_token = sum((r[4] or 0.0) / unit[r[0]] for r in drafted) / sum(r[2] for r in drafted)
        result = replace(result, draft_cost_per_token=per_token)
    # V(k) as a line through the per-length medians, each counted once per step (robust to the odd
    # slow step of a busy machine, which a fit over every step is not)
    medians = [(x.k, x.steps, x.verify_cost) for x in result.lengths if x.verify_cost is not None]
    if medians and not any(k == 0 for k, _, _ in medians):  # anchored where V(0) = 1 by definition
        medians.append((0, max(n for _, n, _ in medians), 1.0))
    slope, intercept = fit_line(
        [k for k, n, _ in medians for _ in range(n)], [v for _, n, v in medians for _ in range(n)]
    )
    if slope is not None and intercept is not None:
        result = replace(result, verify_fit=(intercept, slope))
    with_cost = [(b, b.cost) for b in result.lengths if b.cost is not None]
    spend = sum(b.steps * cost for b, cost in with_cost)
    if spend > 0:
        result = replace(
            result, predicted_speedup=sum(b.steps * b.tokens_per_step for b, _ in with_cost) / spend
        )
    drafted_lengths = [(b, cost) for b, cost in with_cost if b.k > 0]
    if drafted_lengths:
        needed = sum(b.steps * (cost - 1) for b, cost in drafted_lengths) / sum(
            b.steps * b.k for b, _ in drafted_lengths
        )
        result = replace(result, needed=needed)
    # time outside draft and verify: the trials' decode time minus the steps' sub-splits
    decode_ms = sum(t.decode_ms or 0.0 for t in trials if t.id in unit)
    inside = sum((r[4] or 0.0) + (r[5] or 0.0) for r in timed)
    per_step_t1 = statistics.median(unit[r[0]] for r in timed)
    if decode_ms > 0 and len(timed) == len(rows):
        result = replace(result, overhead=max(decode_ms - inside, 0.0) / len(rows) / per_step_t1)
    best_k, best_speedup = _best_length(result)
    return replace(result, best_k=best_k, best_speedup=best_speedup)


def _end_to_end(
    result: BreakEven,
    rows: Sequence[StepRow],
    trials: Sequence[TrialRecord],
    base_tpot: dict[tuple[str, str, int], float],
    base_ttft: dict[tuple[str, str, int], float],
) -> BreakEven:
    """``result`` with the draft's prefill before and after the first token, what a token saves, and
    the output length from which the variant wins e2e (module docstring)."""
    after: dict[int, float] = defaultdict(float)
    prefill_steps = 0
    for r in rows:
        if r[2] == 0 and r[4]:
            after[r[0]] += r[4]
            prefill_steps += 1
    outputs = [t.output_tokens for t in trials if t.output_tokens]
    result = replace(
        result,
        prefill_steps=result.prefill_steps + prefill_steps,
        output_tokens=statistics.median(outputs) if outputs else None,
    )
    extra, fixed, saving = [], [], []
    for t in trials:
        key = (t.workload, t.prompt_id, t.repetition)
        base = base_ttft.get(key)
        if t.id is None or base is None or t.ttft_ms is None:
            continue
        pre = after.get(t.id, 0.0)
        extra.append(t.ttft_ms - base)
        fixed.append(t.ttft_ms - base + pre)
        tpot = base_tpot.get(key)
        if tpot and t.decode_ms is not None and (t.output_tokens or 0) > 1:
            saving.append(tpot - (t.decode_ms - pre) / (t.output_tokens - 1))  # type: ignore[operator]
    if not extra:
        return result
    result = replace(
        result,
        ttft_extra_ms=statistics.median(extra),
        prefill_after_ms=statistics.median([after.get(t.id, 0.0) for t in trials if t.id is not None]),
    )
    if not saving:
        return result
    cost, gain = statistics.median(fixed), statistics.median(saving)
    wins_from = 1 if cost <= 0 else 1 + math.ceil(cost / gain) if gain > 0 else None
    return replace(result, step_saving_ms=gain, wins_from=wins_from)


def _positions(rows: Sequence[StepRow]) -> list[DraftPosition]:
    longest = max((r[2] for r in rows), default=0)
    reached = [0] * (longest + 1)
    accepted = [0] * (longest + 1)
    for r in rows:
        for i in range(1, r[2] + 1):
            reached[i] += 1
        for i in range(1, min(r[3], r[2]) + 1):
            accepted[i] += 1
    return [DraftPosition(i, reached[i], accepted[i]) for i in range(1, longest + 1) if reached[i]]


def _best_length(result: BreakEven) -> tuple[int | None, float | None]:
    """The fixed draft length with the highest predicted speed-up: tokens per step from the
    acceptance by position, the cost from :meth:`BreakEven.cost_at`."""
    best: tuple[int | None, float | None] = (None, None)
    expected = 1.0
    for p in result.positions:
        if p.reached < MIN_BUCKET_STEPS:
            break
        expected += p.rate
        cost = result.cost_at(p.position)
        if cost is None or cost <= 0:
            continue
        speedup = expected / cost
        if best[1] is None or speedup > best[1]:
            best = (p.position, speedup)
    return best


# -- advice ---------------------------------------------------------------------------------------------


def _hint(b: BreakEven) -> DraftHint | None:
    """:attr:`BreakEven.hint`: what would do better where drafting did not pay, or why the prediction
    missed."""
    mean_k = b.mean_draft_length
    if b.verdict in ("loses", "unclear") and b.positions and b.best_speedup is not None:
        if b.best_speedup > 1.02:
            if b.best_k is not None and mean_k is not None and b.best_k < mean_k - 0.5:
                return DraftHint("shorter-drafts")
        else:
            first = b.positions[0].rate
            need = b.needed_at(1)
            plain = b.plain_steps / b.steps if b.steps and b.plain_steps >= 0.5 * b.steps else None
            if need is not None and (need > 1 or first >= need):  # the costs, not the acceptance
                return DraftHint("draft-cost", first, need, plain)
            return DraftHint("low-acceptance", first, need, plain)
    est = b.measured_speedup
    if (
        est is not None
        and est.value
        and b.predicted_speedup
        and abs(b.predicted_speedup / est.value - 1) > PREDICTION_GAP
    ):
        overhead = b.overhead if b.overhead is not None and b.overhead > 0.05 else None
        ratio = None
        if b.unit == "plain steps" and b.baseline_step_ms and b.target_step_ms:
            ratio = b.target_step_ms / b.baseline_step_ms
            if abs(ratio - 1) <= 0.05:
                ratio = None
        return DraftHint("prediction-gap", overhead=overhead, step_ratio=ratio)
    return None
