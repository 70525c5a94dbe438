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
"""

from __future__ import annotations

import math
import statistics
from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from workbench.analysis.stats import fit_line
from workbench.store import TrialRecord

if TYPE_CHECKING:
    from workbench.analysis.paired import PairedEstimate
    from workbench.analysis.summary import GroupSummary

__all__ = [
    "MIN_BUCKET_STEPS",
    "MIN_PLAIN_STEPS",
    "BreakEven",
    "DraftLength",
    "DraftPosition",
    "StepRow",
    "break_even",
    "drafting_advice",
    "pct",
]

#: plain (k = 0) steps a variant needs in a workload for its own target step to be the unit
MIN_PLAIN_STEPS = 5
#: steps a draft length needs for its measured costs to be used in a what-if (else the fitted line)
MIN_BUCKET_STEPS = 5
#: a prediction this far from the measured speed-up is worth a line of advice
PREDICTION_GAP = 0.15

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

    def to_dict(self) -> dict[str, Any]:
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

    def to_dict(self) -> dict[str, Any]:
        return {
            "position": self.position,
            "reached": self.reached,
            "accepted": self.accepted,
            "rate": self.rate,
        }


@dataclass
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
    positions: list[DraftPosition] = field(default_factory=list)
    lengths: list[DraftLength] = field(default_factory=list)
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
    def verdict(self) -> str | None:
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

    def to_dict(self) -> dict[str, Any]:
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
        result.e2e_speedup = e2e.get((variant, workload))
        _end_to_end(result, rows, mine, base_tpot, base_ttft)
        out.append(result)
    return sorted(
        out, key=lambda b: (order.get(b.variant, len(order)), workloads.get(b.workload, len(workloads)))
    )


def _analyse(
    variant: str,
    workload: str,
    rows: list[StepRow],
    trials: Sequence[TrialRecord],
    base_tpot: dict[tuple[Any, Any, Any], float],
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
    )
    result.positions = _positions(rows)
    # T1: the variant's own plain steps, else the paired baseline trial's TPOT
    pair_t1: dict[int, float] = {}
    for t in trials:
        tpot = base_tpot.get((t.workload, t.prompt_id, t.repetition))
        if tpot and t.id is not None:
            pair_t1[t.id] = tpot
    if pair_t1:
        result.baseline_step_ms = statistics.median(pair_t1.values())
    plain_verify = [r[5] for r in plain if r[5] is not None and r[5] > 0]
    if len(plain_verify) >= MIN_PLAIN_STEPS:
        t1_plain = statistics.median(plain_verify)
        unit: dict[int, float] = {t.id: t1_plain for t in trials if t.id is not None}
        result.unit, result.target_step_ms = "plain steps", t1_plain
    elif pair_t1:
        unit = pair_t1
        result.unit, result.target_step_ms = "baseline", result.baseline_step_ms
    else:
        unit = {}
    timed = [r for r in rows if r[5] is not None and r[0] in unit]
    if not timed:
        result.unit = result.target_step_ms = None
        return result
    # per draft length: medians of the costs in target steps
    buckets: dict[int, list[StepRow]] = defaultdict(list)
    for r in rows:
        buckets[r[2]].append(r)
    for k in sorted(buckets):
        these = buckets[k]
        drafts = [(r[4] or 0.0) / unit[r[0]] for r in these if r[0] in unit and r[5] is not None]
        verifies = [r[5] / unit[r[0]] for r in these if r[0] in unit and r[5] is not None]
        result.lengths.append(
            DraftLength(
                k=k,
                steps=len(these),
                proposed=sum(r[2] for r in these),
                accepted=sum(r[3] for r in these),
                draft_cost=statistics.median(drafts) if drafts else None,
                verify_cost=statistics.median(verifies) if verifies else None,
            )
        )
    drafted = [r for r in timed if r[2] > 0]
    if drafted:
        result.draft_cost_per_token = sum((r[4] or 0.0) / unit[r[0]] for r in drafted) / sum(
            r[2] for r in drafted
        )
    # V(k) as a line through the per-length medians, each counted once per step (robust to the odd
    # slow step of a busy machine, which a fit over every step is not)
    medians = [(x.k, x.steps, x.verify_cost) for x in result.lengths if x.verify_cost is not None]
    if medians and not any(k == 0 for k, _, _ in medians):  # anchored where V(0) = 1 by definition
        medians.append((0, max(n for _, n, _ in medians), 1.0))
    slope, intercept = fit_line(
        [k for k, n, _ in medians for _ in range(n)], [v for _, n, v in medians for _ in range(n)]
    )
    if slope is not None and intercept is not None:
        result.verify_fit = (intercept, slope)
    with_cost = [(b, b.cost) for b in result.lengths if b.cost is not None]
    spend = sum(b.steps * cost for b, cost in with_cost)
    if spend > 0:
        result.predicted_speedup = sum(b.steps * b.tokens_per_step for b, _ in with_cost) / spend
    drafted_lengths = [(b, cost) for b, cost in with_cost if b.k > 0]
    if drafted_lengths:
        result.needed = sum(b.steps * (cost - 1) for b, cost in drafted_lengths) / sum(
            b.steps * b.k for b, _ in drafted_lengths
        )
    # time outside draft and verify: the trials' decode time minus the steps' sub-splits
    decode_ms = sum(t.decode_ms or 0.0 for t in trials if t.id in unit)
    inside = sum((r[4] or 0.0) + (r[5] or 0.0) for r in timed)
    per_step_t1 = statistics.median(unit[r[0]] for r in timed)
    if decode_ms > 0 and len(timed) == len(rows):
        result.overhead = max(decode_ms - inside, 0.0) / len(rows) / per_step_t1
    result.best_k, result.best_speedup = _best_length(result)
    return result


def _end_to_end(
    result: BreakEven,
    rows: Sequence[StepRow],
    trials: Sequence[TrialRecord],
    base_tpot: dict[tuple[Any, Any, Any], float],
    base_ttft: dict[tuple[Any, Any, Any], float],
) -> None:
    """The draft's prefill before and after the first token, what a token saves, and the output
    length from which the variant wins e2e (module docstring)."""
    after: dict[int, float] = defaultdict(float)
    for r in rows:
        if r[2] == 0 and r[4]:
            after[r[0]] += r[4]
            result.prefill_steps += 1
    outputs = [t.output_tokens for t in trials if t.output_tokens]
    result.output_tokens = statistics.median(outputs) if outputs else None
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
        return
    result.ttft_extra_ms = statistics.median(extra)
    result.prefill_after_ms = statistics.median([after.get(t.id, 0.0) for t in trials if t.id is not None])
    if not saving:
        return
    cost, gain = statistics.median(fixed), statistics.median(saving)
    result.step_saving_ms = gain
    if cost <= 0:
        result.wins_from = 1
    elif gain > 0:
        result.wins_from = 1 + math.ceil(cost / gain)


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


# -- advice ----------------------------------------------------------------------------------------------


def pct(value: float | None) -> str:
    """A share as ``31 %``; ``> 100 %`` for a break-even no acceptance can reach."""
    if value is None:
        return "–"
    if value > 1:
        return "> 100 %"
    return f"{max(value, 0.0):.0%}".replace("%", " %")


def _x(value: float | None) -> str:
    return "–" if value is None else f"{value:.2f}x"


def _clause(b: BreakEven) -> str:
    """``code (2.80x decode; acceptance 72 % ≥ 31 % needed)``."""
    est = b.measured_speedup
    speed = (
        f"{_x(est.value)} decode"
        if est is not None and est.value is not None
        else (f"{_x(b.predicted_speedup)} predicted")
    )
    if b.acceptance is None or b.needed is None:
        return f"{b.workload} ({speed})"
    sign = "≥" if b.acceptance >= b.needed else "<"
    if b.needed > 1:
        return f"{b.workload} ({speed}: acceptance {pct(b.acceptance)}, no acceptance could pay its costs)"
    return f"{b.workload} ({speed}: acceptance {pct(b.acceptance)} {sign} {pct(b.needed)} needed)"


def _and(items: Iterable[str]) -> str:
    words = list(items)
    return ", ".join(words[:-1]) + " and " + words[-1] if len(words) > 1 else "".join(words)


def drafting_advice(results: Sequence[BreakEven]) -> list[str]:
    """Per speculative variant, where drafting paid and where not (measured, with the acceptance
    against the break-even), then what would do better where it lost, and predictions that missed;
    last, per variant, the output length from which it wins end to end (its draft's prefill counted)."""
    lines = []
    ends: list[str] = []
    for variant in dict.fromkeys(b.variant for b in results):
        mine = [b for b in results if b.variant == variant]
        paid = [b for b in mine if b.verdict == "pays"]
        lost = [b for b in mine if b.verdict == "loses"]
        unclear = [b for b in mine if b.verdict == "unclear"]
        parts = []
        if paid:
            parts.append("drafting paid on " + _and(_clause(b) for b in paid))
        if lost:
            parts.append(("not on " if paid else "drafting did not pay on ") + _and(_clause(b) for b in lost))
        if unclear:
            parts.append("no clear change on " + _and(_clause(b) for b in unclear))
        if parts:
            lines.append(f"{variant}: " + "; ".join(parts) + ".")
        e2e = [clause for b in mine if (clause := _e2e_clause(b))]
        if e2e:
            ends.append(f"{variant} end to end: " + "; ".join(e2e) + ".")
        for b in mine:
            found = hint(b)
            if found:
                lines.append(f"{variant} on {b.workload}: {found}")
    return lines + ends


def _e2e_clause(b: BreakEven) -> str | None:
    """``summarise: wins from 12 output tokens (its outputs: 48; the draft's prefill 2.1 s before the
    first token, 0.1 s after it)``; or why it never does."""
    if b.ttft_extra_ms is None:
        return None
    out = f"its outputs: {b.output_tokens:.0f}" if b.output_tokens is not None else "its outputs: ?"
    before, after = b.ttft_extra_ms, b.prefill_after_ms or 0.0
    spent = f"the draft's prefill {max(before, 0.0) / 1e3:.2f} s before the first token, {after / 1e3:.2f} s after it"
    if b.drafted_steps == 0 and b.prefill_steps:
        return (
            f"{b.workload}: the draft read its prompt on {b.prefill_steps} plain steps, then was given up "
            f"(plain decoding: the rest of its prefill would have cost more than drafting could save in "
            f"the tokens left; {out}, {spent})"
        )
    if b.wins_from is None:
        return f"{b.workload}: never wins e2e (a token saves nothing; {out}, {spent})"
    won = b.output_tokens is not None and b.output_tokens >= b.wins_from
    return (
        f"{b.workload}: {'wins' if won else 'would win'} from {b.wins_from} output tokens on ({out}; {spent})"
    )


def hint(b: BreakEven) -> str | None:
    """What would do better where drafting did not pay, or why the prediction missed."""
    mean_k = b.mean_draft_length
    if b.verdict in ("loses", "unclear") and b.positions and b.best_speedup is not None:
        if b.best_speedup > 1.02:
            if b.best_k is not None and mean_k is not None and b.best_k < mean_k - 0.5:
                return (
                    f"shorter drafts would pay: at k = {b.best_k} the acceptance by position predicts "
                    f"{b.best_speedup:.2f}x (its drafts averaged {mean_k:.1f} tokens; later positions are "
                    "accepted less)."
                )
        else:
            first = b.positions[0].rate
            need = b.needed_at(1)
            plain = (
                f" (it drafted nothing on {b.plain_steps / b.steps:.0%} of its steps already)"
                if b.steps and b.plain_steps >= 0.5 * b.steps
                else ""
            )
            if need is not None and (need > 1 or first >= need):  # the costs, not the acceptance
                draft = f"{b.draft_cost_per_token or 0.0:.2f}"
                return (
                    f"no draft length pays here at this cost: a drafted token costs {draft} target steps to "
                    f"draft, a one-token draft {pct(need)} acceptance to break even; a cheaper draft would "
                    f"pay, else decode plainly (k = 0){plain}."
                )
            why = f" ({pct(need)} needed at k = 1)" if need is not None else ""
            return (
                f"no draft length pays here: even the first draft token is accepted only {pct(first)}{why}; "
                f"decode plainly (k = 0) on prompts like these{plain}."
            )
    est = b.measured_speedup
    if (
        est is not None
        and est.value
        and b.predicted_speedup
        and abs(b.predicted_speedup / est.value - 1) > PREDICTION_GAP
    ):
        reasons = []
        if b.overhead is not None and b.overhead > 0.05:
            reasons.append(f"the loop spends {b.overhead:.2f} target steps per step outside draft and verify")
        if b.unit == "plain steps" and b.baseline_step_ms and b.target_step_ms:
            ratio = b.target_step_ms / b.baseline_step_ms
            if abs(ratio - 1) > 0.05:
                reasons.append(f"its plain step takes {ratio:.2f} times as long as the baseline's")
        because = f": {'; '.join(reasons)}" if reasons else ""
        return f"predicted {b.predicted_speedup:.2f}x from acceptance and costs, measured {est.value:.2f}x{because}."
    return None
