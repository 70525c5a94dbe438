"""The comparison ``run``, ``demo``, ``show`` and ``compare`` print (the table of one or more runs, the
design, the phases, whether drafting paid, the experience targets), and the export ``run --out``,
``demo --out`` and ``export`` share."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import click

from workbench.formatting import json_text

if TYPE_CHECKING:
    from workbench.analysis.compare import SideBySide
    from workbench.analysis.run import RunAnalysis
    from workbench.analysis.summary import GroupSummary
    from workbench.analysis.targets import Verdict
    from workbench.report.model import Report
    from workbench.store import Store


def print_run(
    analysis: RunAnalysis, *, as_json: bool, detail: bool = False, wide: bool = False, pick: bool = False
) -> None:
    """The report of one run on stdout (``run``, ``demo``, ``show``, ``compare RUN``): the verdict
    first, the main table, then phases, drafting, quality, targets and notes; ``detail``: every table
    and note, ``wide``: every column; ``pick``: on a tie, the verdict also names the rule's pick
    (:mod:`workbench.report.run_report`). ``as_json``: the table's rows."""
    from workbench.report.run_report import build_run_report

    _print_report(
        analysis.summaries,
        analysis.verdicts,
        lambda: build_run_report(analysis, pick=pick),
        f"show {analysis.run.id}",
        as_json=as_json,
        detail=detail,
        wide=wide,
    )


def print_side_by_side(
    runs: SideBySide, *, as_json: bool, detail: bool = False, wide: bool = False, pick: bool = False
) -> None:
    """Runs side by side against one baseline on stdout (``compare A B --baseline V``), as
    :func:`print_run` prints one run."""
    from workbench.report.run_report import side_by_side_report

    _print_report(
        runs.summaries,
        runs.verdicts,
        lambda: side_by_side_report(runs, pick=pick),
        "compare " + " ".join(str(r.id) for r in runs.runs),
        as_json=as_json,
        detail=detail,
        wide=wide,
    )


def _print_report(
    summaries: Sequence[GroupSummary],
    verdicts: Sequence[Verdict],
    report: Callable[[], Report],
    command: str,
    *,
    as_json: bool,
    detail: bool,
    wide: bool,
) -> None:
    from workbench.report.data import summary_rows
    from workbench.report.model import render_text

    if as_json:
        click.echo(json_text(summary_rows(summaries, verdicts)))
        return
    if not summaries:
        click.echo("No finished trials.")
        return
    click.echo(render_text(report(), detail=detail, wide=wide))
    if not detail:
        click.echo(f"  More: `workbench {command} --detail` (every table and note), `--wide` (every column).")


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
