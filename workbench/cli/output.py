"""The comparison ``run``, ``demo``, ``show`` and ``compare`` print (the table of one or more runs, the
design, the phases, whether drafting paid, the experience targets), and the export ``run --out``,
``demo --out`` and ``export`` share."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import click

from workbench.report.formatting import json_text


def _summaries(
    store: Any, run_rows: Sequence[dict[str, Any]], baseline: str | None, exclude_disturbed: bool | None
) -> tuple[list[Any], str | None]:
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
    return summaries, merged.baseline


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
    detail: bool = False,
    wide: bool = False,
) -> None:
    """The report of one run (or runs side by side against one baseline) on stdout: the verdict
    first, the main table, then phases, drafting, quality, targets and notes; ``detail``: every table
    and note, ``wide``: every column (:mod:`workbench.report.run_report`)."""
    from workbench.report.model import render_text

    analysis = None
    if len(run_rows) == 1:  # one analysis serves the verdict, the table, the phases and the rest
        from workbench.analysis.run import analyze_run

        analysis = analyze_run(store, run_rows[0]["id"], baseline, exclude_disturbed=exclude_disturbed)
        summaries = analysis.summaries
    else:
        summaries, baseline = _summaries(store, run_rows, baseline, exclude_disturbed)
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
    if analysis is not None:
        from workbench.report.run_report import build_run_report

        report = build_run_report(analysis)
    else:
        from workbench.report.run_report import side_by_side_report

        report = side_by_side_report(
            summaries, baseline, run_rows, _verdicts(store, run_rows, baseline, exclude_disturbed)
        )
    click.echo(render_text(report, detail=detail, wide=wide))
    if not detail:
        ref = run_rows[0]["id"] if len(run_rows) == 1 else " ".join(str(r["id"]) for r in run_rows)
        verb = "show" if len(run_rows) == 1 else "compare"
        click.echo(
            f"  More: `workbench {verb} {ref} --detail` (every table and note), `--wide` (every column)."
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
    click.echo(wrote_line(written, out), err=True)


def wrote_line(written: Sequence[Path], out: Path) -> str:
    """The last line of an export: how many files of which kinds, where, and the page to open."""
    kinds = sorted({p.suffix.lstrip(".") for p in written})
    line = f"wrote {len(written)} files ({', '.join(kinds)}) to {out}"
    report = next((p for p in written if p.name == "report.html"), None)
    if report is not None:
        line += f" — open {report}"
    elif any(p.name == "summary.md" for p in written):
        line += f" — read {out / 'summary.md'}"
    return line
