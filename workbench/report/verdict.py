"""The verdict of a run's report, said first: per workload the fastest variant end to end (or a tie),
what it costs against the baseline (its slower first token, its outputs, its memory), and how far to
trust it (repetitions × prompts, paired, the smallest change it can detect). Part of
:func:`workbench.report.run_report.build_run_report`; runs side by side word their verdict here too.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from workbench.analysis.summary import GroupSummary
from workbench.analysis.verdict import TIE_WITHOUT_INTERVAL, Costs, Trust, WorkloadVerdict
from workbench.formatting import fmt, kld_text, ms, percent, plus_minus, ratio
from workbench.report.model import Bullets, Section, Text

__all__ = [
    "AUTO_HINT",
    "ONE_REPETITION",
    "PICK_RULE",
    "WIDE_MDE",
    "longer_text",
    "prompts_text",
    "trust_lines",
    "verdict_line",
    "verdict_section",
]

#: a fixed-repetition run whose widest e2e MDE is above this cannot see the changes most levers make
#: (5–30 %): the trust line says how to narrow it
WIDE_MDE = 0.10
AUTO_HINT = (
    'Narrower: `repetitions = "auto"` (with `ci_target`, `budget`) repeats until every CI is within target.'
)

#: what the verdict says when the speed-ups have no interval
ONE_REPETITION = (
    'One repetition: no interval — run with `repetitions = 3` (or "auto") to know how sure these are.'
)


# -- figures in words ---------------------------------------------------------------------------


def longer_text(speedup: float) -> str:
    """A TTFT speed-up below 1 as the time it adds: 0.68x → ``47 % longer``; 0.3x → ``3.3 times as long``."""
    factor = 1 / speedup
    return f"{percent(factor - 1)} longer" if factor < 2 else f"{fmt(factor, 1)} times as long"


# -- the verdict --------------------------------------------------------------------------------


def _costs(summary: GroupSummary | None, costs: Costs) -> list[str]:
    """A variant's costs against the baseline (:func:`workbench.analysis.verdict.variant_costs`) in
    words: its slower first token, its outputs (identical share, KLD or the equivalence check), its
    extra memory."""
    out = []
    if costs.ttft is not None and costs.ttft.value is not None:
        out.append(f"TTFT {longer_text(costs.ttft.value)}")
    quality = costs.quality.figures if costs.quality is not None else None
    if costs.equivalence is not None:
        from workbench.report.equivalence import equivalence_text

        out.append(equivalence_text(costs.equivalence))
        if costs.output is not None:
            out.append(f"{percent(costs.output)} of outputs identical")
    elif quality is not None:
        bound = "≥ " if quality.method == "top-k" else ""
        what = f"{percent(costs.output)} of outputs identical" if costs.output is not None else "same output"
        out.append(f"{what}, KLD {bound}{kld_text(quality.kld_mean)}")
    elif costs.output is not None:
        out.append(f"output differs ({percent(costs.output)} of outputs identical)")
    elif summary is not None and summary.matches_baseline == 1:
        out.append("same output")
    if costs.memory_mb is not None:
        out.append(f"peak memory +{fmt(costs.memory_mb, 0)} MB")
    return out


#: the rule that names one variant of a tie, when asked (``show --pick``)
PICK_RULE = "the highest paired e2e speed-up"


def _with_costs(v: WorkloadVerdict, s: GroupSummary) -> str:
    """An alternative to the best with what it costs: ``int4-ort (TTFT 2.6 times as long, …)``."""
    costs = _costs(s, v.alternatives.get(s.variant, Costs()))
    return s.variant + (f" ({', '.join(costs)})" if costs else "")


def _tie_line(name: str, v: WorkloadVerdict, pick: bool) -> str:
    """A tie for the lead, each variant with its speed-up and costs, the medians that make it a tie,
    and the rule's pick only when asked."""
    assert v.best is not None
    entries = []
    for s in v.tied:
        costs = v.costs if s is v.best else v.alternatives.get(s.variant, Costs())
        said = _costs(s, costs)
        entries.append(f"{s.variant} {ratio(s.speedup_e2e)}" + (f" ({', '.join(said)})" if said else ""))
    medians = [s.metrics["e2e_ms"].value or 0.0 for s in v.tied]  # a tie has every median
    mdes = [m for s in v.tied if s.speedup_e2e is not None and (m := s.speedup_e2e.mde) is not None]
    lo, hi = min(medians), max(medians)
    within = (
        f"within the MDE {plus_minus(max(mdes), 0)}"
        if mdes
        else f"within {percent(TIE_WITHOUT_INTERVAL)} (no interval)"
    )
    each = [ms(m) for m in medians]
    head = (
        f"{name} tie: {', '.join(entries)} — e2e medians {', '.join(each[:-1])} and {each[-1]} ms, "
        f"{percent(hi / lo - 1)} apart, {within}"
    )
    if v.close:
        head += "; as fast: " + ", ".join(_with_costs(v, s) for s in v.close[:2])
        head += " …" if len(v.close) > 2 else ""
    if pick:
        head += f"; picked by {PICK_RULE}: {v.best.variant}"
    return head


def verdict_line(v: WorkloadVerdict, width: int, *, pick: bool = False) -> str:
    """``chat: speculative 1.65x [1.50–1.80]* e2e — same output; as fast: int4-ort (TTFT 47% longer)``;
    on a tie ``chat: tie: A 1.62x […]* (costs), B 1.60x […]* (costs) — e2e medians …``; ``pick``: on a tie, also name
    the variant :data:`PICK_RULE` picks."""
    name = f"{v.workload + ':':<{width + 1}}"
    if v.best is None:
        return f"{name} no variant to compare with {v.baseline or 'a baseline'}"
    est = v.best.speedup_e2e
    speed = ratio(est)
    if v.beats is False:
        return f"{name} {v.baseline} stays fastest: the best variant, {v.best.variant}, is {speed} e2e"
    if v.tie:
        return _tie_line(name, v, pick)
    head = f"{name} {v.best.variant} {speed} e2e"
    if v.beats is None:
        head += " (no detectable difference)"
    costs = _costs(v.best, v.costs)
    if costs:
        head += " — " + ", ".join(costs)
    if v.close and v.beats is not None:  # inside the winner's interval: the data cannot order them
        head += "; as fast: " + ", ".join(_with_costs(v, s) for s in v.close[:2])
        head += " …" if len(v.close) > 2 else ""
    return head


def prompts_text(prompts: Mapping[str, int]) -> str:
    """The prompts each repetition measured: ``5 prompts``; per workload when they differ,
    ``8 prompts (conversation), 1 prompt (summarise-short)``."""

    def n(count: int) -> str:
        return f"{count} prompt{'s' if count != 1 else ''}"

    if len(set(prompts.values())) == 1:
        return n(next(iter(prompts.values())))
    return ", ".join(f"{n(count)} ({workload})" for workload, count in prompts.items())


def trust_lines(t: Trust) -> list[str]:
    """How far to trust the speed-ups, in a line or two: repetitions × prompts, paired, the MDE."""
    prompts = prompts_text(t.prompts) if t.prompts else ""
    if not t.intervals:
        first = ONE_REPETITION + (f" Measured: {prompts} × 1 repetition." if prompts else "")
    else:
        reps = f"{t.repetitions} repetitions" if t.repetitions else "several repetitions"
        mde = ""
        if t.mde:
            lo, hi = t.mde
            mde = f"; smallest e2e change it can detect (MDE) {plus_minus(lo, 0)}" + (
                f" to {plus_minus(hi, 0)}" if hi - lo >= 0.005 else ""
            )
        first = f"Trust: {reps}{' × ' + prompts if prompts else ''}, paired{mde}."
        if t.mde and t.mde[1] > WIDE_MDE and not t.auto:
            first += f" {AUTO_HINT}"
    more = []
    if t.disturbed:
        trials = "trial" if t.disturbed == 1 else "trials"
        more.append(f"{t.disturbed} {trials} disturbed ({'left out' if t.disturbed_excluded else 'kept'})")
    if t.drift is not None and abs(t.drift - 1) > 0.05:
        more.append(
            f"the machine's speed drifted (the baseline's last rounds took {fmt(t.drift, 2)} times as long as its first)"
        )
    if t.order == "sequential":
        more.append("trials ran sequentially, not interleaved: drift lands on one variant")
    return [first] + ([("Note: " + "; ".join(more) + ".")] if more else [])


def verdict_section(
    verdicts: Sequence[WorkloadVerdict], trust: Trust, baseline: str | None, *, pick: bool = False
) -> Section:
    """The answer first: per workload the fastest variant end to end (``verdicts``) — or a tie, with
    the rule's pick only with ``pick`` — then how far to trust it."""
    section = Section("verdict", f"Verdict (fastest end to end, vs {baseline or 'the baseline'})")
    if not verdicts:
        return section.add(Text("No finished trials to judge."))
    width = max(len(v.workload) for v in verdicts)
    section.add(Bullets([verdict_line(v, width, pick=pick) for v in verdicts], strong=True))
    for line in trust_lines(trust):
        section.add(Text(line))
    return section
