"""Headless export of a run: data, charts and reports into one folder.

=========  ==========================================================================================
format     writes
=========  ==========================================================================================
``csv``    ``trials.csv``, ``steps.csv``, ``summary.csv``, ``phases.csv``, ``summary.json``,
           ``server_metrics.csv`` (served variants), ``quality_positions.csv`` and
           ``quality_variants.csv`` (the quality pass) and the data of every chart (``<chart>.csv``)
``md``     ``summary.md``: phases and advice, tables, links to the PNGs when they are written too
``png``    ``<chart>.png`` at 2x pixels (offscreen Qt; needs the ``gui`` extra)
``svg``    ``<chart>.svg`` (needs the ``gui`` extra)
``html``   ``report.html``: one self-contained page, charts embedded (needs the ``gui`` extra)
=========  ==========================================================================================

PNG and SVG come from a :class:`ChartRenderer` the caller hands in (the CLI and the GUI pass
:func:`workbench.gui.chart_renderer`'s, which draws with the GUI's own chart module), so this package
never imports Qt. Without one (the viewer-only install has no Qt) ``csv`` and ``md`` still work; asking
for ``png``, ``svg`` or ``html`` is an error that says why, raised before anything is written.

The records (``trials.csv``, ``steps.csv``, ``server_metrics.csv``, ``quality_positions.csv``) are
written as stored; what the run's analysis computed (the summary, the phases, ``summary.json``, the
charts' data) is rounded to 6 significant digits (:func:`workbench.formatting.meaningful`), so the
files read the same on every machine.
"""

from __future__ import annotations

import csv
import os
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Protocol

from workbench.analysis.run import RunAnalysis, analyze_run
from workbench.charts import run_charts
from workbench.charts.base import Chart
from workbench.core.errors import WorkbenchError
from workbench.formatting import json_text, meaningful
from workbench.report.data import phase_data, run_data
from workbench.store import Store

__all__ = [
    "DEFAULT_FORMATS",
    "FORMATS",
    "NEEDS_RENDERER",
    "ChartRenderer",
    "export_data",
    "export_run",
    "parse_formats",
    "prepare_out_dir",
    "write_csv",
    "write_csv_rows",
    "write_file",
]

FORMATS = ("png", "svg", "csv", "md", "html")
DEFAULT_FORMATS = FORMATS
#: the formats drawn by a chart renderer (the rest need no Qt)
NEEDS_RENDERER = ("png", "svg", "html")


class ChartRenderer(Protocol):
    """Draws a chart (``workbench.charts`` data) into image bytes."""

    def png_bytes(self, chart: Chart) -> bytes: ...

    def svg_bytes(self, chart: Chart) -> bytes: ...


def parse_formats(text: str | None) -> tuple[str, ...] | None:
    """``"png,csv"`` → ``("png", "csv")``; ``None`` (every format this install can write) stays None."""
    if text is None:
        return None
    formats = tuple(dict.fromkeys(f.strip().lower() for f in text.split(",") if f.strip()))
    unknown = [f for f in formats if f not in FORMATS]
    if unknown or not formats:
        raise WorkbenchError(
            f"unknown export format {', '.join(unknown) or repr(text)}; formats: {', '.join(FORMATS)}"
        )
    return formats


def export_run(
    store: Store,
    run_ref: str | int | None,
    out_dir: Path,
    formats: Sequence[str] | None = None,
    *,
    baseline: str | None = None,
    on_file: Callable[[Path], None] | None = None,
    renderer: ChartRenderer | None = None,
    no_renderer: str = "no chart renderer was given",
    analysis: RunAnalysis | None = None,
    charts: Sequence[Chart] | None = None,
) -> tuple[list[Path], list[str]]:
    """Write the run's files in ``formats`` (``None``: all this install can write). Returns the files
    written and notes (e.g. formats skipped for want of a renderer). ``renderer`` draws PNG and SVG;
    without it, ``no_renderer`` says why in the error or the note. A caller that already holds the
    run's ``analysis`` (and its ``charts``) passes them and nothing is analysed again."""
    formats, notes = resolve_formats(formats, renderer, no_renderer)
    if analysis is None:
        analysis = analyze_run(store.load_run(run_ref), baseline)
    if charts is None:
        charts = run_charts(analysis)
    prepare_out_dir(out_dir)
    written: list[Path] = []

    def wrote(path: Path) -> None:
        written.append(path)
        if on_file is not None:
            on_file(path)

    if "csv" in formats:
        for path in export_data(store, analysis.run.id, out_dir, analysis=analysis, charts=charts):
            wrote(path)
    from workbench.report.documents import html_report, markdown_report

    write_documents(
        out_dir,
        charts,
        formats,
        renderer,
        wrote,
        markdown=lambda images: markdown_report(analysis, images, charts),
        html=lambda pngs: html_report(analysis, pngs, charts),
    )
    return written, notes


def resolve_formats(
    formats: Sequence[str] | None, renderer: ChartRenderer | None, no_renderer: str
) -> tuple[Sequence[str], list[str]]:
    """The formats to write and the notes about them: ``None`` is every format this install can write
    (PNG, SVG and HTML need ``renderer``; a note says why they were skipped); asking for one of those
    without a renderer is an error saying ``no_renderer``."""
    notes: list[str] = []
    if formats is None:
        formats = [f for f in DEFAULT_FORMATS if f not in NEEDS_RENDERER or renderer is not None]
        if renderer is None:
            notes.append(f"PNG, SVG and HTML skipped: {no_renderer}")
    elif renderer is None and any(f in NEEDS_RENDERER for f in formats):
        wanted = ", ".join(f for f in formats if f in NEEDS_RENDERER)
        raise WorkbenchError(f"cannot export {wanted}: {no_renderer}; csv and md work without it")
    return formats, notes


def write_documents(
    out_dir: Path,
    charts: Sequence[Chart],
    formats: Sequence[str],
    renderer: ChartRenderer | None,
    wrote: Callable[[Path], None],
    *,
    markdown: Callable[[dict[str, str]], str],
    html: Callable[[dict[str, bytes]], str],
) -> None:
    """The charts as PNG (2x) and SVG, summary.md linking the PNGs and report.html embedding them, as
    ``formats`` ask; ``markdown(images)`` / ``html(pngs)`` write the documents (a run's, or two runs
    compared)."""
    pngs: dict[str, bytes] = {}
    if renderer is not None and any(f in formats for f in NEEDS_RENDERER):
        for chart in charts:
            if "png" in formats or "html" in formats:
                pngs[chart.name] = renderer.png_bytes(chart)
            if "png" in formats:
                wrote(write_file(out_dir / f"{chart.name}.png", pngs[chart.name]))
            if "svg" in formats:
                wrote(write_file(out_dir / f"{chart.name}.svg", renderer.svg_bytes(chart)))
    if "md" in formats:
        images = {c.name: f"{c.name}.png" for c in charts} if "png" in formats else {}
        wrote(write_file(out_dir / "summary.md", markdown(images).encode("utf-8")))
    if "html" in formats:
        wrote(write_file(out_dir / "report.html", html(pngs).encode("utf-8")))


def export_data(
    store: Store,
    run_id: int,
    out_dir: Path,
    *,
    analysis: RunAnalysis | None = None,
    charts: Sequence[Chart] | None = None,
) -> list[Path]:
    """The data files: trials, steps, summary (CSV and JSON), phases and every chart's data (CSV)."""
    prepare_out_dir(out_dir)
    analysis = analysis or analyze_run(store.load_run(run_id))
    trials = store.trials(run_id, include_warmup=True)
    steps = store.rows(
        "select s.* from steps s join trials t on t.id = s.trial_id where t.run_id = ? order by s.trial_id, s.idx",
        [run_id],
    )
    written = [
        write_csv(out_dir / "trials.csv", [t.to_row() for t in trials]),
        write_csv_rows(out_dir / "steps.csv", *steps),
    ]
    windows = store.server_metrics(run_id, include_warmup=True)
    if windows:
        written.append(write_csv(out_dir / "server_metrics.csv", windows))
    if analysis.quality is not None:  # the quality pass: per variant × scored position, and the outcome
        positions = store.rows(
            "select variant, source, workload, prompt_id, position, token_id, nll_base, nll, kld, delta_p, "
            "same_top, top_id from quality_positions where run_id = ? order by id",
            [run_id],
        )
        written.append(write_csv_rows(out_dir / "quality_positions.csv", *positions))
        quality = meaningful([r.to_row() for r in analysis.quality.variants.values()])
        written.append(write_csv(out_dir / "quality_variants.csv", quality))
    # what the run computed, rounded where it is made (the stored records above are written as stored)
    summary_rows = [_flat(meaningful(s.to_dict())) for s in analysis.summaries]
    written.append(write_csv(out_dir / "summary.csv", summary_rows))
    written.append(write_csv(out_dir / "phases.csv", [_flat(phase_data(p)) for p in analysis.phases]))
    summary = json_text(run_data(analysis))
    written.append(write_file(out_dir / "summary.json", summary.encode("utf-8")))
    for chart in run_charts(analysis) if charts is None else charts:
        written.append(write_csv(out_dir / f"{chart.name}.csv", meaningful(chart.rows())))
    return written


def _flat(data: Mapping[str, object], prefix: str = "") -> dict[str, object]:
    """Nested dicts as ``a.b`` columns; lists as JSON text."""
    out: dict[str, object] = {}
    for key, value in data.items():
        name = f"{prefix}{key}"
        if isinstance(value, dict):
            out.update(_flat(value, f"{name}."))
        elif isinstance(value, list):
            out[name] = json_text(value, indent=None)
        else:
            out[name] = value
    return out


def prepare_out_dir(out_dir: Path) -> None:
    """Make the output folder (and its parents) and check that files can be written in it; a
    :class:`WorkbenchError` naming it otherwise. ``run --out`` calls it before the first trial."""
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise WorkbenchError(f"cannot create output folder {out_dir}: {exc.strerror}") from None
    if not os.access(out_dir, os.W_OK | os.X_OK):
        raise WorkbenchError(f"cannot write into output folder {out_dir}: permission denied")

    if not out_dir.is_dir():
        raise WorkbenchError(f"{out_dir} is not a folder")


def write_file(path: Path, data: bytes) -> Path:
    try:
        path.write_bytes(data)
    except OSError as exc:
        raise WorkbenchError(f"cannot write {path}: {exc.strerror}") from None
    return path


def write_csv_rows(path: Path, columns: Sequence[str], rows: Iterable[Sequence[object]]) -> Path:
    """Rows as tuples, streamed (every step of a large run: millions of rows)."""
    try:
        with open(path, "w", newline="", encoding="utf-8") as f:
            writer = csv.writer(f)
            writer.writerow(columns)
            writer.writerows(rows)
    except OSError as exc:
        raise WorkbenchError(f"cannot write {path}: {exc.strerror}") from None
    return path


def write_csv(path: Path, rows: Sequence[Mapping[str, object]]) -> Path:
    """Rows as dicts: their keys in first-seen order are the columns (a row without one leaves it empty)."""
    columns: dict[str, None] = {}
    for row in rows:
        columns.update(dict.fromkeys(row))
    try:
        with open(path, "w", newline="", encoding="utf-8") as f:
            writer = csv.DictWriter(f, fieldnames=list(columns))
            writer.writeheader()
            writer.writerows(rows)
    except OSError as exc:
        raise WorkbenchError(f"cannot write {path}: {exc.strerror}") from None
    return path
