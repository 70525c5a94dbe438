"""Browsing the results database: ``runs``, ``show``, ``compare``, ``project`` (what if, from a
run's fitted lines) and ``export``."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import click

from workbench.cli.common import db_option, detail_options, disturbed_option, json_option, open_store
from workbench.cli.output import export_files, print_run, print_side_by_side, wrote_line
from workbench.core.errors import WorkbenchError
from workbench.formatting import json_text, tokens
from workbench.report.text import text_table

if TYPE_CHECKING:
    from workbench.store import LoadedRun


@click.command()
@db_option
@json_option
def runs(db: Path | None, as_json: bool) -> None:
    """List the runs in the results database, then its path (--db, else $WORKBENCH_DB, else
    results.db in the user-data folder)."""
    store = open_store(db, create=False)
    store.reap_stale_runs()
    rows = store.runs()
    if as_json:
        click.echo(json_text(rows))
        return
    if not rows:
        click.echo(f"No runs in {store.path} yet.")
        return
    click.echo(
        text_table(
            ["id", "name", "status", "started", "order", "variants", "trials", "failed"],
            [
                [
                    r["id"],
                    r["name"],
                    r["status"],
                    (r["started_at"] or "")[:19].replace("T", " "),
                    r["trial_order"] or "",  # not recorded (a run that failed as a whole): unknown
                    r["variants"],
                    r["trials"],
                    r["failed"],
                ]
                for r in rows
            ],
        )
    )
    click.echo(f"Database: {store.path}")


@click.command()
@click.argument("run_ref", metavar="RUN", default="latest")
@db_option
@click.option("--baseline", help="Variant to compute speed-ups against (default: the run's baseline).")
@disturbed_option
@detail_options
@click.option(
    "--pick",
    is_flag=True,
    help="On a tie (variants the data cannot order), also name the one the verdict's rule picks: "
    "the highest paired e2e speed-up.",
)
@json_option
def show(
    run_ref: str,
    db: Path | None,
    baseline: str | None,
    exclude_disturbed: bool | None,
    detail: bool,
    wide: bool,
    pick: bool,
    as_json: bool,
) -> None:
    """One run, the answer first: per workload the fastest variant end to end (or a tie, when the data
    cannot order the fastest: --pick names the rule's pick), what it costs and how far to trust it; then the main table (medians and speed-ups per variant × workload), where the
    time goes, whether drafting paid (decode and end to end), quality, the experience targets and
    notes on the design. --detail adds every table (variants, break-even costs, quality, targets and
    what would it take); --wide every column. RUN is an id, a name or 'latest'."""
    from workbench.analysis.run import analyze_run

    store = open_store(db, create=False)
    # one analysis, whichever way it is written: the text report and the JSON read the same one
    analysis = analyze_run(store.load_run(run_ref), baseline, exclude_disturbed=exclude_disturbed)
    if as_json:
        from workbench.report.data import run_data

        click.echo(json_text(run_data(analysis)))
        return
    print_run(analysis, as_json=False, detail=detail, wide=wide, pick=pick)


@click.command()
@click.argument("run_ref", metavar="RUN")
@click.argument("run2_ref", metavar="[RUN2]", required=False)
@db_option
@click.option(
    "--baseline",
    help="Variant to compute speed-ups against (default: the run's baseline). "
    "With two runs, name it as 'RUN:variant' or just 'variant' for the first run's.",
)
@disturbed_option
@detail_options
@json_option
@click.option(
    "--out",
    type=click.Path(file_okay=False, path_type=Path),
    help="With RUN2: also write the comparison into this folder (report.html, summary.md, "
    "comparison.csv and .json, and as PNG, SVG and CSV the charts the GUI's compare view shows: "
    "the before → after chart, both runs side by side).",
)
@click.option(
    "--format",
    "formats",
    metavar="LIST",
    help="With --out, comma-separated: png, svg, csv, md, html (default: all; png, svg and html need "
    "the gui extra).",
)
def compare(
    run_ref: str,
    run2_ref: str | None,
    db: Path | None,
    baseline: str | None,
    exclude_disturbed: bool | None,
    detail: bool,
    wide: bool,
    as_json: bool,
    out: Path | None,
    formats: str | None,
) -> None:
    """Median TTFT, TPOT, decode tok/s and e2e per variant × workload, with speed-ups vs a baseline
    variant (paired by prompt and round, bootstrap 95 % CI), and the phase of each workload with advice;
    then the experience targets: which variants meet each workload's targets, the goodput, and what
    would it take (docs/targets.md).

    With RUN2 (e.g. before and after a driver or library upgrade): variants matched by name, the verdict
    per variant × workload (RUN2 faster, slower or no detectable change), RUN2's speed-ups over RUN
    with CIs (ratios of medians: two runs are not paired), how the runs differ; --out DIR writes it
    as report.html, summary.md and CSV. A code change is best A/B-tested inside one run instead
    (a variant per side, `python =` per variant: interleaved and paired). With RUN2 and --baseline:
    both runs' variants side by side against that one variant."""
    from workbench.report.export import parse_formats

    wanted = parse_formats(formats)
    if (out is not None or formats is not None) and (run2_ref is None or baseline is not None):
        raise WorkbenchError(
            "--out and --format write the comparison of two runs (compare RUN RUN2, without --baseline); "
            "for one run: workbench export RUN --out DIR"
        )
    store = open_store(db, create=False)
    if run2_ref is None:
        from workbench.analysis.run import analyze_run

        analysis = analyze_run(store.load_run(run_ref), baseline, exclude_disturbed=exclude_disturbed)
        print_run(analysis, as_json=as_json, detail=detail, wide=wide)
        return
    runs = [store.load_run(run_ref), store.load_run(run2_ref)]
    if baseline is None:
        _print_run_comparison(
            runs[0], runs[1], as_json=as_json, exclude_disturbed=exclude_disturbed, out=out, formats=wanted
        )
        return
    from workbench.analysis.compare import side_by_side

    view = side_by_side(runs, baseline, exclude_disturbed=exclude_disturbed, strict=True)
    print_side_by_side(view, as_json=as_json, detail=detail, wide=wide)


def _print_run_comparison(
    a: LoadedRun,
    b: LoadedRun,
    *,
    as_json: bool,
    exclude_disturbed: bool | None,
    out: Path | None = None,
    formats: tuple[str, ...] | None = None,
) -> None:
    """RUN_B against RUN_A (:func:`~workbench.analysis.compare.compare_two_runs`, the GUI's compare
    view's numbers too): the report on stdout, or the comparisons as JSON; ``out``: also written there."""
    from workbench.analysis.compare import compare_two_runs
    from workbench.report.comparison import build_comparison_report
    from workbench.report.model import render_text

    two = compare_two_runs(a, b, exclude_disturbed=exclude_disturbed)
    renderer, why_not = None, "not needed"
    if out is not None:  # bad output options fail before anything is printed or written
        from workbench.gui import chart_renderer
        from workbench.report.export import NEEDS_RENDERER, prepare_out_dir

        if formats is None or any(f in NEEDS_RENDERER for f in formats):
            renderer, why_not = chart_renderer()
        if renderer is None and formats is not None and any(f in NEEDS_RENDERER for f in formats):
            wanted = ", ".join(f for f in formats if f in NEEDS_RENDERER)
            raise WorkbenchError(f"cannot export {wanted}: {why_not}; csv and md work without it")
        prepare_out_dir(out)
    if as_json:  # a list of comparisons, as before; each says the disturbed-trial rule of both runs
        rules = {"run_a": two.disturbed[0].to_dict(), "run_b": two.disturbed[1].to_dict()}
        click.echo(json_text([{**c.to_dict(), "disturbed": rules} for c in two.comparisons]))
    elif not two.comparisons and not two.not_compared:
        raise WorkbenchError(
            f"runs {a.id} and {b.id} have no variant × workload in common (variants are matched by name)"
        )
    else:
        click.echo(render_text(build_comparison_report(two)))
    if out is not None:
        from workbench.charts import two_runs_charts, two_runs_view
        from workbench.report.comparison import export_comparison

        # the charts of two runs compared: the GUI's compare view shows the same list
        view = two_runs_view(a, b, two=two, exclude_disturbed=exclude_disturbed)
        written, notes = export_comparison(
            two, out, formats, renderer=renderer, no_renderer=why_not, charts=two_runs_charts(view)
        )
        for note in notes:
            click.echo(note, err=True)
        click.echo(wrote_line(written, out), err=True)


# -- what if ------------------------------------------------------------------------------------


@click.command()
@click.argument("run_ref", metavar="RUN", default="latest")
@click.option(
    "--input",
    "input_tokens",
    type=click.IntRange(min=1),
    help="Input length (tokens; default: the longest inside every variant's measured range).",
)
@click.option(
    "--output",
    "output_tokens",
    type=click.IntRange(min=1),
    help="Output length (tokens; default: the longest inside every variant's measured range).",
)
@click.option(
    "--variant", "variants", multiple=True, help="Only this variant (repeatable; default: every variant)."
)
@db_option
@json_option
def project(
    run_ref: str,
    input_tokens: int | None,
    output_tokens: int | None,
    variants: tuple[str, ...],
    db: Path | None,
    as_json: bool,
) -> None:
    """What if: TTFT and e2e per variant at an input and output length, projected from the run's
    fitted lines (TTFT against input tokens, the time after the first token against output tokens)
    with their 95 % confidence intervals (on a log scale: never below 0). A prediction, not a
    measurement: run the sweep-input and sweep-output workloads for lines that span the lengths.
    Without --input/--output: the longest lengths inside every variant's measured range. RUN is an
    id, a name or 'latest'."""
    from workbench.analysis.projection import default_lengths
    from workbench.analysis.projection import project as project_one
    from workbench.report.targets import projection_data, projection_notes, projection_table

    store = open_store(db, create=False)
    run_row = store.resolve_run(run_ref)
    trials = store.trials(run_row["id"])
    names = list(dict.fromkeys(t.variant for t in trials if t.status == "ok"))
    if not names:
        raise WorkbenchError(f"run {run_row['id']} has no finished trials to project from")
    unknown = [v for v in variants if v not in names]
    if unknown:
        raise WorkbenchError(
            f"variant {unknown[0]!r} not in run {run_row['id']}; variants: {', '.join(names)}"
        )
    defaults = default_lengths([t for t in trials if not variants or t.variant in variants])
    assert defaults is not None  # there are finished trials
    given = input_tokens is not None and output_tokens is not None  # else: say where they came from
    input_tokens = input_tokens or defaults[0]
    output_tokens = output_tokens or defaults[1]
    projections = [project_one(trials, v, input_tokens, output_tokens) for v in (variants or names)]
    if all(p.ttft is None and p.decode is None for p in projections):
        raise WorkbenchError(
            f"run {run_row['id']} has no spread of lengths to fit: neither its inputs nor its outputs "
            "vary (add the sweep-input and sweep-output workloads)"
        )
    if as_json:
        click.echo(json_text([projection_data(p) for p in projections]))
        return
    click.echo(
        f"Projected (a prediction from run {run_row['id']}'s fitted lines, not a measurement) for "
        f"{tokens(input_tokens)} input and {tokens(output_tokens)} output tokens:"
    )
    click.echo(text_table(*projection_table(projections)))
    for note in projection_notes(projections):
        click.echo(f"Note: {note}")
    if not given:
        click.echo(
            "A length not given (--input, --output): the longest inside every variant's measured range."
        )
    click.echo(
        "[lo–hi]: 95 % CI of the fitted lines, on a log scale (never below 0): where a typical request of "
        "that shape lands; single requests scatter around it."
    )


# -- export -------------------------------------------------------------------------------------


@click.command("export")
@click.argument("run_ref", metavar="RUN", default="latest")
@click.option(
    "--out", required=True, type=click.Path(file_okay=False, path_type=Path), help="Folder to write to."
)
@click.option(
    "--format",
    "formats",
    metavar="LIST",
    help="Comma-separated: png, svg, csv, md, html (default: all; png, svg and html need the gui extra).",
)
@click.option("--baseline", help="Variant to compute speed-ups against (default: the run's baseline).")
@db_option
def export(run_ref: str, out: Path, formats: str | None, baseline: str | None, db: Path | None) -> None:
    """Write a run's charts and data, headless: PNG (2x) and SVG per chart, CSV of the trials, steps,
    summary and of every chart's data, summary.md, and report.html (one self-contained page: charts,
    tables, phases and advice, environment). RUN is an id, a name or 'latest'."""
    from workbench.report.export import parse_formats

    wanted = parse_formats(formats)
    store = open_store(db, create=False)
    run_row = store.resolve_run(run_ref)
    export_files(store, run_row["id"], out, wanted, baseline)
