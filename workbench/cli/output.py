"""The comparison ``run``, ``demo``, ``show`` and ``compare`` print (the table of one or more runs, the
design, the phases, whether drafting paid, the experience targets), and the export ``run --out``,
``demo --out`` and ``export`` share."""

from __future__ import annotations

import textwrap
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import click

from workbench.report.formatting import json_text
from workbench.report.text import comparison_table, text_table


def _summaries(
    store: Any, run_rows: Sequence[dict[str, Any]], baseline: str | None, exclude_disturbed: bool | None
) -> list[Any]:
    from workbench.analysis.compare import merge_runs
    from workbench.analysis.quality import attach_quality, run_quality
    from workbench.analysis.summary import summarize

    merged = merge_runs(store, run_rows, baseline, strict=True)
    summaries = summarize(
        merged.trials,
        merged.baseline,
        merged.windows,
        [v["name"] for v in merged.variants],
        exclude_disturbed=exclude_disturbed,
    )
    for row in run_rows:
        tag = (lambda name, run=row["id"]: f"{run}:{name}") if len(run_rows) > 1 else None
        attach_quality(summaries, run_quality(store, row["id"], tag))
    return summaries


def _verdicts(
    store: Any,
    run_rows: Sequence[dict[str, Any]],
    baseline: str | None,
    exclude_disturbed: bool | None = None,
) -> list[Any]:
    """The experience targets' verdicts per variant × workload (targets from each run's spec)."""
    from workbench.analysis.compare import merge_runs
    from workbench.analysis.targets import evaluate
    from workbench.spec.parse import recorded_targets

    targets: dict[str, Any] = {}
    for row in reversed(run_rows):  # the first run's targets win
        targets.update(recorded_targets(row.get("spec") or ""))
    from workbench.analysis.quality import group_quality, run_quality

    trials = merge_runs(store, run_rows, baseline, strict=True).trials
    quality: dict[tuple[str, str], Any] = {}
    for row in run_rows:
        tag = (lambda name, run=row["id"]: f"{run}:{name}") if len(run_rows) > 1 else None
        found = run_quality(store, row["id"], tag)
        for t in trials:
            quality.setdefault((t.variant, t.workload), group_quality(found, t.variant, t.workload))
    return evaluate(trials, targets, exclude_disturbed=exclude_disturbed, quality=quality)


def _print_comparison(
    store: Any,
    run_rows: Sequence[dict[str, Any]],
    baseline: str | None,
    *,
    as_json: bool,
    exclude_disturbed: bool | None = None,
) -> None:
    analysis = None
    if len(run_rows) == 1:  # one analysis serves the table, the design lines and the phases
        from workbench.analysis.run import analyze_run

        analysis = analyze_run(store, run_rows[0]["id"], baseline, exclude_disturbed=exclude_disturbed)
        summaries = analysis.summaries
    else:
        summaries = _summaries(store, run_rows, baseline, exclude_disturbed)
    if as_json:
        from workbench.analysis.run import target_keys

        found = analysis.verdicts if analysis else _verdicts(store, run_rows, baseline, exclude_disturbed)
        verdicts = {(v.variant, v.workload): v for v in found}
        rows = [{**s.to_dict(), **target_keys(verdicts.get((s.variant, s.workload)))} for s in summaries]
        click.echo(json_text(rows))
        return
    if not summaries:
        click.echo("No finished trials.")
        return
    click.echo(text_table(*comparison_table(summaries)))
    if any(s.timing_scope == "client" for s in summaries):
        click.echo(
            "Served variants are timed as a client: TTFT/TPOT include the network, HTTP and the server's "
            "queue. TTFT mean and srv TTFT mean (the server's own, from its /metrics) are means over the "
            "same requests, so their difference is the time in front of the engine.",
            err=True,
        )
    click.echo(SPEEDUP_LEGEND, err=True)
    if analysis is not None:
        for line in analysis.design.lines() if analysis.design else []:
            click.echo(textwrap.fill(line, 110, subsequent_indent="  "), err=True)
        _print_phases(analysis)
        _print_drafting(analysis)
        _print_quality(analysis)
        _print_targets(analysis.verdicts, analysis.target_advice)
    else:
        disturbed = sum(s.n_disturbed for s in summaries)
        if disturbed:
            click.echo(f"{disturbed} measured trials disturbed (see `workbench show` of each run).", err=True)
        _print_targets(_verdicts(store, run_rows, baseline, exclude_disturbed))


def _print_quality(analysis: Any) -> None:
    """Quality beside speed: the figures per variant × workload, then what was not scored and why."""
    from workbench.report.quality import QUALITY_NOTE, quality_lines, quality_table, tradeoff_lines

    quality = analysis.quality
    if quality is None:
        return
    reference = quality.variants.get(analysis.baseline or "")
    if reference is not None and reference["status"] != "reference":  # nothing could be compared
        click.echo()
        click.echo(f"Quality: not measured — the baseline cannot be the reference: {reference.get('reason')}")
        return
    figures = [f for f in quality.figures if f.source == "output"]
    click.echo()
    click.echo("Quality vs the baseline (each variant scored the baseline's outputs):")
    for line in tradeoff_lines(analysis.summaries, quality):
        click.echo(textwrap.fill(line, 110, initial_indent="  ", subsequent_indent="    "))
    if figures:
        click.echo(text_table(*quality_table(figures)))
        click.echo(textwrap.fill(QUALITY_NOTE, 110))
    for line in quality_lines(quality):
        click.echo(textwrap.fill(line, 110, initial_indent="  - ", subsequent_indent="    "))


def _print_targets(verdicts: Sequence[Any], advice: dict[str, list[str]] | None = None) -> None:
    """Per workload with targets: which variants meet them, the goodput, and what would it take."""
    from workbench.report.targets import TARGETS_NOTE, targets_table

    if not verdicts:
        return
    click.echo()
    click.echo("Experience targets (per workload: which variants meet them):")
    click.echo(text_table(*targets_table(verdicts)))
    click.echo(TARGETS_NOTE, err=True)
    for workload, lines in (advice or {}).items():
        if len(lines) < 2:  # nothing missed by the reference variant
            continue
        click.echo(f"  What would it take — {workload}:")
        for line in lines[1:]:
            click.echo(textwrap.fill(line, 110, initial_indent="    - ", subsequent_indent="      "))


#: the legend under every comparison table
SPEEDUP_LEGEND = (
    "Medians over measured trials. Speed-ups vs the baseline: geometric means of the ratios of pairs of "
    "trials of the same prompt in the same round, with a bootstrap 95 % CI, * when it excludes 1; MDE: "
    "the smallest e2e speed-up this run's noise would detect (95 %, 80 % power)."
)


def _print_drafting(analysis: Any) -> None:
    """Does drafting pay: per speculative variant × workload, acceptance against the break-even, the
    costs, predicted vs measured, then per draft length, then the advice."""
    from workbench.analysis.drafting import MIN_BUCKET_STEPS
    from workbench.report.drafting import DRAFTING_NOTE, break_even_table, draft_length_table

    if not analysis.break_even:
        return
    click.echo()
    click.echo("Does drafting pay? (speculative variants; costs in target steps T1)")
    click.echo(text_table(*break_even_table(analysis.break_even)))
    headers, rows = draft_length_table(analysis.break_even, MIN_BUCKET_STEPS)
    if rows:
        click.echo(f"Per draft length (lengths with at least {MIN_BUCKET_STEPS} steps):")
        click.echo(text_table(headers, rows))
    click.echo(textwrap.fill(DRAFTING_NOTE, 110), err=True)
    for line in analysis.drafting_advice:
        click.echo(textwrap.fill(line, 110, initial_indent="  - ", subsequent_indent="    "))


def _print_phases(analysis: Any) -> None:
    """Per workload: the measured phase label, the prediction, and the advice lines."""
    if not analysis.phases:
        return
    click.echo()
    click.echo(f"Where the time goes (measured on {analysis.phases[0].variant}):")
    width = max(len(p.workload) for p in analysis.phases)
    for p in analysis.phases:
        predicted = ""
        if p.prediction is not None:
            guess = f"{p.prediction.label} at {p.prediction.prefill_share:.0%}"
            predicted = (
                f"  (predicted {guess}: see the finding)" if p.disagrees else f"  (as predicted: {guess})"
            )
        click.echo(f"  {p.workload:<{width}}  {p.headline}{predicted}")
        indent = " " * (width + 4)
        for line in p.advice:
            click.echo(
                textwrap.fill(line, 110, initial_indent=indent + "- ", subsequent_indent=indent + "  ")
            )


def _export(store: Any, run_id: int, out: Path, formats: Any, baseline: str | None) -> None:
    from workbench.gui import chart_renderer
    from workbench.report.export import NEEDS_RENDERER, export_run

    # Qt starts only when a format needs drawing: `--format csv,md` stays light
    renderer, why_not = None, "not needed"
    if formats is None or any(f in NEEDS_RENDERER for f in formats):
        renderer, why_not = chart_renderer()
    written, notes = export_run(
        store, run_id, out, formats, baseline=baseline, renderer=renderer, no_renderer=why_not
    )
    for note in notes:
        click.echo(note, err=True)
    kinds = sorted({p.suffix.lstrip(".") for p in written})
    click.echo(f"wrote {len(written)} files ({', '.join(kinds)}) to {out}", err=True)
