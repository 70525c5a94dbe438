"""One run's report, built once from its analysis: the verdict first (per workload the fastest variant
end to end, what it costs, how far to trust it), then the main table, the phases, whether drafting
paid (decode and end to end), quality, the experience targets and the notes. ``show``/``run``/``demo``
print it (:func:`~workbench.report.model.render_text`), the export writes it as Markdown and HTML, the
GUI shows it in its panel: every view words a finding the same way, here.

Notation: ``x`` is always a speed-up over the baseline (> 1 is faster); a ratio of times is written as
times ("1.5 times as long") or as a percentage ("47 % longer").
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from workbench.analysis.compare import SideBySide
from workbench.analysis.run import RunAnalysis
from workbench.analysis.targets import Verdict
from workbench.analysis.verdict import TIE_WITHOUT_INTERVAL, Costs, Trust, WorkloadVerdict
from workbench.charts.memory import DEVICE_WIDE, MEMORY_LABELS
from workbench.formatting import (
    fmt,
    host_environment,
    kld_text,
    libraries,
    machine_line,
    ms,
    percent,
    plus_minus,
    ratio,
    times,
)
from workbench.report.columns import COLUMNS
from workbench.report.design import design_lines
from workbench.report.model import Bullets, Figure, Report, Section, Table, Text
from workbench.report.phases import LEVER_ADVICE, advice, conversation_lines, turn_hold_lines
from workbench.report.quality import (
    QUALITY_NOTE,
    quality_lines,
    quality_table,
    tradeoff_lines,
)
from workbench.report.targets import target_advice

__all__ = [
    "LEGEND",
    "ONE_REPETITION",
    "build_run_report",
    "main_table",
    "share_text",
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

#: the legend under the main table
LEGEND = (
    "Medians. x = speed-up over the baseline (> 1 is faster): geometric mean of the ratios of paired "
    "trials (same prompt, same round) [bootstrap 95 % CI], * when the CI excludes 1."
)


# -- figures in words ---------------------------------------------------------------------------


def longer_text(speedup: float) -> str:
    """A TTFT speed-up below 1 as the time it adds: 0.68x → ``47 % longer``; 0.3x → ``3.3 times as long``."""
    factor = 1 / speedup
    return f"{percent(factor - 1)} longer" if factor < 2 else f"{fmt(factor, 1)} times as long"


def share_text(share: float, label: str) -> str:
    """A prefill share at the precision that agrees with its label: 40.5 % is "balanced" (the rule:
    decode-heavy ≤ 40 %), so it is written 40.5 %, not 40 %."""
    from workbench.analysis.phases import classify

    text = percent(share)
    if classify(float(text.rstrip("%")) / 100) != label:
        text = percent(share, 1)
    return text


def _tokens(value: float | None) -> str:
    return "?" if value is None else fmt(value, 0)


# -- the verdict --------------------------------------------------------------------------------


def _costs(summary: Any, costs: Costs) -> list[str]:
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


def _with_costs(v: WorkloadVerdict, s: Any) -> str:
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


# -- the main table -----------------------------------------------------------------------------

#: the main table's columns shown only with --wide (the documents and the GUI's chooser have them all);
#: a served variant's client and server TTFT and parallel streams' columns stay: they appear only
#: where they are the point
WIDE = frozenset(
    COLUMNS[key].short
    for key in (
        "n",
        "input_tokens",
        "output_tokens",
        "tpot_ms",
        "mde",
        "acceptance",
        "same_top",
        "peak_memory_mb",
        "draft_verify",
    )
)


def main_table(summaries: Sequence[Any], *, title: str = "") -> Table:
    """Per variant × workload: medians and speed-ups; the columns a person reads first, the rest
    (:data:`WIDE`) for ``--wide`` and the documents. Its columns are :data:`~workbench.report.columns.COLUMNS`
    (short labels; the TTFT and decode speed-ups without their intervals)."""
    served = any(s.server for s in summaries)
    parallel = any(s.concurrency > 1 for s in summaries)
    scored = any(s.quality for s in summaries)
    speculative = any(
        s.acceptance_rate is not None or bool(s.server and s.server.acceptance_rate) for s in summaries
    )
    keys = ["variant", "workload", "n", "input_tokens", "output_tokens", "ttft_ms"]
    keys += ["client_ttft_mean_ms", "server_ttft_mean_ms"] if served else []
    keys += ["tpot_ms", "decode_tokens_per_s", "e2e_ms"]
    keys += ["concurrency", "throughput_tokens_per_s"] if parallel else []
    keys += ["speedup_e2e", "mde", "speedup_ttft", "speedup_decode", "match"]
    keys += ["acceptance", "draft_verify"] if speculative else []
    keys += ["peak_memory_mb"]
    keys += ["kld", "same_top"] if scored else []
    columns = [COLUMNS[key] for key in keys]
    rows = [[c.text(s, brief=True) for c in columns] for s in summaries]
    return Table([c.short for c in columns], rows, title=title, wide=WIDE)


# -- phases -------------------------------------------------------------------------------------


def phases_section(analysis: RunAnalysis) -> Section:
    section = Section("phases", "")
    phases = analysis.phases
    if not phases:
        return section
    section.title = f"Where the time goes (measured on {phases[0].variant})"
    width = max(len(p.workload) for p in phases)
    lines, marked = [], set()
    for p in phases:
        line = (
            f"{p.workload + ':':<{width + 1}}  {p.label}: prefill {share_text(p.prefill_share, p.label)} of e2e "
            f"({_tokens(p.input_tokens)} in, {_tokens(p.output_tokens)} out tokens)"
        )
        if p.prediction is not None:
            guess = f"{p.prediction.label} ({percent(p.prediction.prefill_share)})"
            line += f"; predicted {guess}" + (" — see the finding" if p.disagrees else ", as measured")
        lines.append(line)
    section.add(Bullets(lines))
    groups: dict[str, list[str]] = {}
    for p in phases:
        groups.setdefault(p.label, []).append(p.workload)
    levers = []
    for label, workloads in groups.items():
        which = ", ".join(workloads)
        if label == "balanced":
            levers.append(f"Balanced ({which}): both phases matter — decode levers and prefill levers.")
        else:
            phase = label.split("-")[0]
            levers.append(f"Levers for {phase} ({which}): {LEVER_ADVICE[phase]}.")
    section.add(Bullets(levers))
    detail, i = [], 0
    for p in phases:
        for line in advice(p):
            if line.startswith(("Levers for", "Start with")):  # said once above
                continue
            if line.startswith("Finding:"):
                marked.add(i)
            detail.append(f"{p.workload}: {line}")
            i += 1
    section.add(Bullets(detail, detail=True, marked=frozenset(marked)))
    baseline = analysis.baseline or phases[0].variant
    chats = conversation_lines(analysis.conversations, baseline)
    chats += turn_hold_lines(analysis.turn_holds)
    if chats:
        section.add(Bullets(chats))
    section.add(Figure("headline"))
    return section


# -- drafting -----------------------------------------------------------------------------------


def _series(values: Sequence[str]) -> str:
    return " / ".join(values)


def drafting_section(analysis: RunAnalysis) -> Section:
    """Per speculative variant: decode AND e2e speed-ups per workload, acceptance against the
    break-even, and where the draft's prefill eats the gain, the output length from which it pays."""
    from workbench.analysis.drafting import MIN_BUCKET_STEPS
    from workbench.report.drafting import DRAFTING_NOTE, break_even_table, draft_length_table, hint_text

    section = Section("drafting", "Does drafting pay? (decode and end to end)")
    results = analysis.break_even
    if not results:
        return section
    by_key = {(s.variant, s.workload): s for s in analysis.summaries}
    workloads = list(dict.fromkeys(b.workload for b in results))
    section.title += f" — {_series(workloads)}"
    lines, hints = [], []
    for variant in dict.fromkeys(b.variant for b in results):
        mine = [b for b in results if b.variant == variant]
        rows = [by_key.get((b.variant, b.workload)) for b in mine]
        decode = [ratio(s.speedup_decode, interval=False) if s else "?" for s in rows]
        e2e = [ratio(s.speedup_e2e, interval=False) if s else "?" for s in rows]
        acc = [b.acceptance for b in mine if b.acceptance is not None]
        need = [b.needed for b in mine if b.needed is not None]
        paid = [b.workload for b in mine if b.verdict == "pays"]
        lost = [b.workload for b in mine if b.verdict == "loses"]
        unclear = [b.workload for b in mine if b.verdict == "unclear"]
        said = []
        if paid:
            said.append("drafting paid on " + ", ".join(paid))
        if lost:
            said.append(("not on " if paid else "drafting did not pay on ") + ", ".join(lost))
        if unclear:
            said.append("no clear change on " + ", ".join(unclear))
        line = f"{variant}: {'; '.join(said) or 'drafting: not judged'} — decode {_series(decode)}, e2e {_series(e2e)}"
        if len(set(workloads)) > 1 and [b.workload for b in mine] != workloads:
            line += f" ({_series([b.workload for b in mine])})"
        if acc:
            line += f"; accepts {_span(acc)}"
            if need:
                line += f" (needs {_span(need)})"
        lines.append(line)
        for b, s in zip(mine, rows, strict=True):
            lost_e2e = _lost_end_to_end(b, s)
            if lost_e2e:
                lines.append(lost_e2e)
            found = hint_text(b)
            if found:
                hints.append(f"{variant} on {b.workload}: {found}")
    section.add(Bullets(lines))
    section.add(Bullets(hints, detail=True))
    section.add(Figure("draft-positions"))
    section.add(Table(*break_even_table(results), detail=True))
    headers, rows_ = draft_length_table(results, MIN_BUCKET_STEPS)
    section.add(
        Table(
            headers,
            rows_,
            title=f"Per draft length (lengths with at least {MIN_BUCKET_STEPS} steps):",
            detail=True,
        )
    )
    section.add(Text(DRAFTING_NOTE, detail=True, note=True))
    return section


# -- prompt compression -------------------------------------------------------------------------


def compression_section(analysis: RunAnalysis) -> Section:
    """Per compressing variant × workload: what it kept, what compressing cost against the prefill it
    saved, and where it pays (the break-even, :mod:`workbench.analysis.compression`)."""
    from workbench.report.compression import compression_lines

    section = Section("compression", "Does prompt compression pay? (TTFT)")
    lines = compression_lines(analysis.compression)
    if lines:
        section.add(Bullets(lines))
    return section


def _span(values: Sequence[float]) -> str:
    lo, hi = min(values), max(values)
    return percent(lo) if round(lo, 2) == round(hi, 2) else f"{percent(lo)}–{percent(hi)}"


def _lost_end_to_end(b: Any, s: Any) -> str | None:
    """Where drafting paid on decode but the variant did not win end to end: why (its draft's
    prefill), and from which output length it would."""
    if s is None or s.speedup_e2e is None or s.speedup_e2e.value is None:
        return None
    decode = s.speedup_decode.value if s.speedup_decode is not None else None
    if s.speedup_e2e.value >= 1 or decode is None or decode <= 1:
        return None
    before = max(b.ttft_extra_ms or 0.0, 0.0)
    after = b.prefill_after_ms or 0.0
    cost = f"its draft's prefill adds {fmt(before / 1e3, 2)} s before the first token" + (
        f" and {fmt(after / 1e3, 2)} s after it" if after >= 5 else ""
    )
    if b.wins_from is None:
        pays = "no output length pays it back"
    else:
        pays = f"it starts to pay from {fmt(b.wins_from, 0)} output tokens (its outputs: {_tokens(b.output_tokens)})"
    return (
        f"  {b.workload}: drafting paid on decode ({times(decode)}) but the variant loses end to end "
        f"({times(s.speedup_e2e.value)}): {cost}; {pays}."
    )


# -- quality ------------------------------------------------------------------------------------


def quality_section(analysis: RunAnalysis) -> Section:
    section = Section("quality", "Quality vs the baseline (each variant scored the baseline's outputs)")
    quality = analysis.quality
    if quality is None:
        return section
    reference = quality.variants.get(analysis.baseline or "")
    if reference is not None and reference.status != "reference":
        return section.add(Text(f"Not measured — the baseline cannot be the reference: {reference.reason}"))
    section.add(Bullets(tradeoff_lines(analysis.summaries, quality), strong=True))
    lossless = [r.variant for r in quality.variants.values() if r.status == "lossless"]
    checked = analysis.equivalence
    if checked is not None:
        from workbench.analysis.quality import quality_by_variant
        from workbench.report.equivalence import equivalence_lines, equivalence_note

        scored = {
            name: f
            for name, f in quality_by_variant(quality.figures).items()
            if (row := quality.variants.get(name)) is not None and row.status == "scored"
        }
        section.add(Bullets(equivalence_lines(checked, scored), strong=True))
        section.add(Text(equivalence_note(checked), detail=True, note=True))
        lossless = [name for name in lossless if name not in checked.variants]
    if lossless:
        section.add(
            Text(
                f"Lossless, not checked for equivalence: {', '.join(lossless)} (the match column shows "
                "whether their outputs were the baseline's)."
            )
        )
    others = [line for line in quality_lines(quality) if ": not scored, " not in line]
    section.add(Bullets(others))
    section.add(Figure("quality"))
    figures = [f for f in quality.figures if f.source == "output"]
    if figures:
        section.add(Table(*quality_table(figures), detail=True))
        section.add(Text(QUALITY_NOTE, detail=True, note=True))
    return section


# -- targets ------------------------------------------------------------------------------------


def targets_section(
    verdicts: Sequence[Verdict], advice: Mapping[str, Sequence[str]] | None = None
) -> Section:
    from workbench.report.targets import TARGETS_NOTE, metric_names, targets_table

    section = Section("targets", "Experience targets (per workload: which variants meet them)")
    if not verdicts:
        return section
    advice = advice or {}
    lines = []
    for workload in dict.fromkeys(v.workload for v in verdicts):
        group = [v for v in verdicts if v.workload == workload]
        met = [v.variant for v in group if v.status == "met"]
        missed = [v for v in group if v.status == "missed"]
        line = f"{workload} ({group[0].targets.describe()}): "
        line += ("met by " + ", ".join(met)) if met else "no variant meets them"
        why = {v.variant: metric_names(v.missed) for v in missed}
        if missed and len(missed) == len(group) and len(set(why.values())) == 1:
            line += f" — every variant misses {next(iter(why.values()))}"
        elif missed:
            line += "; missed by " + ", ".join(f"{name} ({what})" for name, what in why.items())
        lines.append(line)
    section.add(Bullets(lines))
    section.add(Figure("targets"))
    section.add(Table(*targets_table(verdicts), detail=True, colour_column=2))
    section.add(Text(TARGETS_NOTE, detail=True, note=True))
    take = []
    for workload, found in advice.items():
        if len(found) >= 2:  # something missed by the reference variant
            take += [f"What would it take — {workload}: {line}" for line in found[1:]]
    section.add(Bullets(take, detail=True))
    return section


# -- notes, variants, environment ---------------------------------------------------------------


def notes_section(analysis: RunAnalysis) -> Section:
    section = Section("notes", "How the trials ran")
    if any(s.timing_scope == "client" for s in analysis.summaries):
        section.add(
            Text(
                "Served variants are timed as a client: TTFT/TPOT include the network, HTTP and the server's "
                "queue. TTFT mean and srv TTFT mean (the server's own, from its /metrics) are means over the "
                "same requests, so their difference is the time in front of the engine."
            )
        )
    # what changes the reading by default; the rest with --detail
    lines = design_lines(analysis.design)
    # fresh workers are the default; the drift and the disturbed trials, when they matter, are in
    # the verdict's trust line already
    said = ("Workers: fresh", "Drift:", f"{analysis.design.disturbance.disturbed} of ")
    routine = [x for x in lines if x.startswith(said)]
    section.add(Bullets([x for x in lines if x not in routine]))
    section.add(Bullets(routine, detail=True))
    memory = memory_kinds_line(analysis.variants)
    if memory:
        section.add(Text(memory))
    return section


def memory_kinds_line(variants: Sequence[Any]) -> str | None:
    """When the variants' peak memory is not one kind of figure: which kind each is, and which are
    device-wide (not compared); ``None`` when all are measured alike."""
    kinds = {v.name: v.memory_kind for v in variants if v.memory_kind}
    if len(set(kinds.values())) < 2 and not DEVICE_WIDE & set(kinds.values()):
        return None
    said = "; ".join(f"{name}: {MEMORY_LABELS.get(kind, kind)}" for name, kind in kinds.items())
    apart = [name for name, kind in kinds.items() if kind in DEVICE_WIDE]
    return f"Peak memory is not one kind of figure ({said})" + (
        f"; device-wide, not compared with the others: {', '.join(apart)}." if apart else "."
    )


def variants_section(analysis: RunAnalysis) -> Section:
    headers = ["variant", "strategy", "model", "device", "dtype", "load s", "weights MB", "GB/s", "status"]
    rows = [
        [
            v.name,
            v.strategy or "",
            _short(v.model or ""),
            v.device or "",
            v.dtype or "",
            fmt(v.load_ms / 1000 if v.load_ms else None, 1),
            fmt(v.weights_mb or None, 0),
            fmt(v.memory_bandwidth_gbs, 1),
            (v.status or "") + (f": {v.error[:60]}" if v.error else ""),
        ]
        for v in analysis.variants
    ]
    # variants in other Python environments (a code change A/B-tested in one run): which ran where is
    # part of the answer, so the table is shown by default then
    other = any(v.python for v in analysis.variants)
    if any(v.compile for v in analysis.variants):  # compiled variants: the mode and its compile time
        headers[6:6] = ["compile", "compile s"]
        for row, v in zip(rows, analysis.variants, strict=True):
            row[6:6] = [v.compile or "eager", fmt(v.compile_ms / 1000 if v.compile_ms else None, 1)]
    if other:
        headers += ["python", "libraries"]
        for row, v in zip(rows, analysis.variants, strict=True):
            row += [v.python or "(the workbench's)", libraries(v.packages)]  # the exact one
    return Section("variants", "Variants").add(Table(headers, rows, detail=not other))


def _short(text: str, width: int = 40) -> str:
    return text if len(text) <= width else "…" + text[-(width - 1) :]


def roofline_section(analysis: RunAnalysis) -> Section:
    headers = ["variant", "workload", "decode tok/s", "limit tok/s", "of limit", "weights MB", "KV MB/step"]
    rows = [
        [
            r.variant,
            r.workload,
            fmt(r.decode_tokens_per_s, 1),
            fmt(r.limit_tokens_per_s, 1),
            percent(r.fraction),
            fmt(r.weights_mb, 0),
            fmt(r.kv_mb, 2),
        ]
        for r in analysis.roofline
        if r.limit_tokens_per_s
    ]
    section = Section("roofline", "Decode roofline (the memory-bandwidth limit on tokens/s)")
    if not rows:
        return section
    section.add(Bullets(roofline_lines(analysis)))
    return section.add(Table(headers, rows, detail=True))


def roofline_lines(analysis: RunAnalysis) -> list[str]:
    """Per one-token-per-step variant far from its bandwidth limit: what bounds it, and whether
    compiling is the lever (on a GPU: launch-bound eager decoding; on a CPU: compute)."""
    from workbench.analysis.roofline import FAR_FROM_LIMIT

    plain = {v.name: v for v in analysis.variants if v.strategy in ("baseline", "quantized")}
    far: dict[str, list[float]] = {}
    for r in analysis.roofline:
        if r.variant in plain and r.far_from_limit and r.fraction is not None:
            far.setdefault(r.variant, []).append(r.fraction)
    out = []
    for name, fractions in far.items():
        v = plain[name]
        share = percent(max(fractions))
        head = f"{name} decodes at {share} or less of its bandwidth limit (< {percent(FAR_FROM_LIMIT)}): "
        if (v.device or "").startswith("cuda"):
            if v.compile:
                out.append(head + f"overhead-bound even compiled ({v.compile}).")
            else:
                out.append(
                    head + "overhead-bound — eager PyTorch launches each kernel from Python; "
                    "compile = true (a static cache and a compiled step) is the lever."
                )
        else:
            out.append(
                head + "its steps' time goes elsewhere than reading its weights; on a CPU there are no "
                "kernel launches for compile = true to remove, and compiling leaves the matrix products "
                "as they are (docs/strategies.md, compiled decoding)."
            )
    return out


# -- the report ---------------------------------------------------------------------------------


def title(analysis: RunAnalysis) -> str:
    run = analysis.run
    started = (run.started_at or "")[:16].replace("T", " ")
    return f"Run {run.id} '{run.name or ''}' — {run.status}, started {started} UTC"


def meta(analysis: RunAnalysis) -> list[str]:
    run = analysis.run
    lines = []
    if run.error:
        lines.append(f"Failed as a whole: {run.error}")
    machine = machine_line(host_environment(analysis.environment))
    if machine:
        lines.append(f"Machine: {machine}")
    return lines


def side_by_side_report(runs: SideBySide, *, pick: bool = False) -> Report:
    """Runs side by side against one baseline variant (``compare A B --baseline V``): the variants
    carry ``RUN:`` tags; their speed-ups are paired only within a run (across runs: ratios of medians)."""
    summaries, baseline = runs.summaries, runs.baseline
    ids = ", ".join(str(r.id) for r in runs.runs)
    table = Section("table", f"Per variant × workload (vs {baseline})")
    table.add(main_table(summaries))
    table.add(Text(LEGEND, note=True))
    notes = Section("notes", "How the trials ran")
    notes.add(
        Text(
            "Variants of different runs cannot be paired round by round: their speed-ups are ratios of "
            "medians, and the machine may have changed between the runs."
        )
    )
    disturbed = sum(s.n_disturbed for s in summaries)
    if disturbed:
        notes.add(Text(f"{disturbed} measured trials disturbed (see `workbench show` of each run)."))
    sections = [
        verdict_section(runs.workload_verdicts, runs.trust, baseline, pick=pick),
        table,
        targets_section(runs.verdicts),
        notes,
    ]
    return Report(f"Runs {ids} side by side", [], [s for s in sections if s])


def build_run_report(analysis: RunAnalysis, *, pick: bool = False) -> Report:
    """The report of one run (``analysis.run.RunAnalysis``); ``pick``: on a tie, the verdict also
    names the variant its rule picks."""
    table = Section("table", f"Per variant × workload (vs {analysis.baseline or 'the first variant'})")
    table.add(main_table(analysis.summaries))
    table.add(Text(LEGEND, note=True))
    table.add(Figure("speedup"))
    sections = [
        verdict_section(analysis.workload_verdicts, analysis.trust, analysis.baseline, pick=pick),
        table,
        phases_section(analysis),
        drafting_section(analysis),
        compression_section(analysis),
        quality_section(analysis),
        targets_section(analysis.verdicts, target_advice(analysis.target_gaps)),
        notes_section(analysis),
        roofline_section(analysis),
        variants_section(analysis),
    ]
    return Report(title(analysis), meta(analysis), [s for s in sections if s])
