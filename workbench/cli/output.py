"""The comparison ``run``, ``demo``, ``show`` and ``compare`` print (the table of one or more runs, the
design, the phases, whether drafting paid, the experience targets), and the export ``run --out``,
``demo --out`` and ``export`` share."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from workbench.formatting import json_text

if TYPE_CHECKING:
    from workbench.store import Store


def print_comparison(
    store: Store,
    run_rows: Sequence[dict[str, Any]],
    baseline: str | None,
    *,
    as_json: bool,
    exclude_disturbed: bool | None = None,
    detail: bool = False,
    wide: bool = False,
    pick: bool = False,
) -> None:
    """The report of one run (or runs side by side against one baseline) on stdout: the verdict
    first, the main table, then phases, drafting, quality, targets and notes; ``detail``: every table
    and note, ``wide``: every column; ``pick``: on a tie, the verdict also names the rule's pick
    (:mod:`workbench.report.run_report`)."""
    from workbench.analysis.compare import side_by_side
    from workbench.analysis.run import analyze_run
    from workbench.report.data import summary_rows
    from workbench.report.model import render_text
    from workbench.report.run_report import build_run_report, side_by_side_report

    if len(run_rows) == 1:  # one analysis serves the verdict, the table, the phases and the rest
        analysis = analyze_run(store, run_rows[0]["id"], baseline, exclude_disturbed=exclude_disturbed)
        summaries, verdicts = analysis.summaries, analysis.verdicts
    else:
        runs = side_by_side(store, run_rows, baseline, exclude_disturbed=exclude_disturbed, strict=True)
        summaries, verdicts = runs.summaries, runs.verdicts
    if as_json:
        click.echo(json_text(summary_rows(summaries, verdicts)))
        return
    if not summaries:
        click.echo("No finished trials.")
        return
    report = (
        build_run_report(analysis, pick=pick) if len(run_rows) == 1 else side_by_side_report(runs, pick=pick)
    )
    click.echo(render_text(report, detail=detail, wide=wide))
    if not detail:
        ref = run_rows[0]["id"] if len(run_rows) == 1 else " ".join(str(r["id"]) for r in run_rows)
        verb = "show" if len(run_rows) == 1 else "compare"
        click.echo(
            f"  More: `workbench {verb} {ref} --detail` (every table and note), `--wide` (every column)."
        )


def export_files(
    store: Store, run_id: int, out: Path, formats: Sequence[str] | None, baseline: str | None
) -> None:
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
