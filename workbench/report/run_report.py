"""One run's report, built once from its analysis: the verdict first (per workload the fastest variant
end to end, what it costs, how far to trust it), then the main table, the phases, whether drafting
paid (decode and end to end), quality, the experience targets and the notes. ``show``/``run``/``demo``
print it (:func:`~workbench.report.model.render_text`), the export writes it as Markdown and HTML, the
GUI shows it in its panel: every view words a finding the same way, here. The verdict is worded in
:mod:`.verdict`; the notes, variants and roofline sections in :mod:`.run_notes`.

Notation: ``x`` is always a speed-up over the baseline (> 1 is faster); a ratio of times is written as
times ("1.5 times as long") or as a percentage ("47 % longer").
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from workbench.analysis.compare import SideBySide
from workbench.analysis.drafting import BreakEven
from workbench.analysis.run import RunAnalysis
from workbench.analysis.summary import GroupSummary
from workbench.analysis.targets import Verdict
from workbench.formatting import (
    duration,
    fmt,
    host_environment,
    machine_line,
    percent,
    ratio,
    span,
    times,
)
from workbench.report.columns import COLUMNS
from workbench.report.model import Bullets, Figure, Report, Section, Table, Text
from workbench.report.phases import LEVER_ADVICE, advice, conversation_lines, turn_hold_lines
from workbench.report.quality import (
    QUALITY_NOTE,
    quality_lines,
    quality_table,
    tradeoff_lines,
)
from workbench.report.run_notes import (
    memory_kinds_line,
    notes_section,
    roofline_lines,
    roofline_section,
    variants_section,
)
from workbench.report.targets import target_advice
from workbench.report.verdict import (
    AUTO_HINT,
    ONE_REPETITION,
    longer_text,
    trust_lines,
    verdict_section,
)

__all__ = [
    "AUTO_HINT",
    "LEGEND",
    "ONE_REPETITION",
    "WIDE",
    "build_run_report",
    "drafting_section",
    "longer_text",
    "main_table",
    "memory_kinds_line",
    "roofline_lines",
    "share_text",
    "side_by_side_report",
    "trust_lines",
    "verdict_section",
]

#: the legend under the main table
LEGEND = (
    "Medians. x = speed-up over the baseline (> 1 is faster): geometric mean of the ratios of paired "
    "trials (same prompt, same round) [bootstrap 95 % CI], * when the CI excludes 1."
)


# -- figures in words ---------------------------------------------------------------------------


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


def main_table(summaries: Sequence[GroupSummary], *, title: str = "") -> Table:
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
    return span(min(values), max(values), percent)


def _lost_end_to_end(b: BreakEven, s: GroupSummary | None) -> str | None:
    """Where drafting paid on decode but the variant did not win end to end: why (its draft's
    prefill), and from which output length it would."""
    if s is None or s.speedup_e2e is None or s.speedup_e2e.value is None:
        return None
    decode = s.speedup_decode.value if s.speedup_decode is not None else None
    if s.speedup_e2e.value >= 1 or decode is None or decode <= 1:
        return None
    before = max(b.ttft_extra_ms or 0.0, 0.0)
    after = b.prefill_after_ms or 0.0
    cost = f"its draft's prefill adds {duration(before / 1e3, 2)} before the first token" + (
        f" and {duration(after / 1e3, 2)} after it" if after >= 5 else ""
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
