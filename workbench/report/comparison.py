"""Two runs compared, as a report: the verdict first (per variant × workload: RUN_B faster, slower or
no detectable change, with the CI, or why it was not compared), then the table of medians A → B with
RUN_B's speed-ups, then notes (how the runs differ: machine, libraries, spec; disturbed trials; that
two runs are not paired). Built once from :func:`workbench.analysis.compare.compare_two_runs` and
rendered by :mod:`workbench.report.model`: ``workbench compare A B`` prints it, ``compare A B --out``
and the GUI's compare view export it (report.html, summary.md, CSV, and the charts of two runs compared:
:func:`workbench.charts.two_runs_charts`, the list the GUI's compare view shows).

Notation: ``x`` is always a speed-up, here RUN_B's over RUN_A (> 1: RUN_B is faster).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from workbench.analysis.compare import RunComparison, RunDifference, TwoRuns
from workbench.charts import BeforeAfterChart, variant_colours
from workbench.charts.base import Chart
from workbench.core.metrics import METRIC_TABLE
from workbench.formatting import fmt, host_environment, instruction_set, machine_line, ratio
from workbench.report.design import disturbance_line
from workbench.report.model import Bullets, Figure, JSONObject, Report, Section, Table, Text

if TYPE_CHECKING:
    from workbench.report.export import ChartRenderer

__all__ = [
    "NOT_PAIRED",
    "ONE_RUN_ADVICE",
    "build_comparison_report",
    "comparison_data",
    "comparison_html",
    "comparison_markdown",
    "explaining_lines",
    "export_comparison",
    "isa_line",
    "unmatched_names",
]

#: why two runs' speed-ups are weaker evidence than one run's
NOT_PAIRED = (
    "Two runs cannot be paired round by round: whatever the machine did during one run (another "
    "program, a clock, a thermal state) lands on that run's numbers only, so a speed-up across runs "
    "is a ratio of medians and includes it."
)
#: how to A/B-test a change instead (docs/analysis.md, Comparing two runs)
ONE_RUN_ADVICE = (
    "To A/B-test a code or library change, measure both sides inside ONE run: a variant per side, "
    "each with its own `python =` (two checkouts' venvs) — interleaved and paired, with the MDE."
)


def _change_text(c: RunComparison, run_b: int) -> str:
    est = c.speedup_e2e
    speed = f"e2e {ratio(est)}" if est is not None and est.value is not None else "e2e –"
    change = c.change
    if change == "faster":
        return f"run {run_b} faster — {speed}"
    if change == "slower":
        return f"run {run_b} slower — {speed}"
    if change == "unchanged":
        return f"no detectable change — {speed}"
    return f"{speed} — one trial per prompt: no interval, so no verdict (run with `repetitions = 3`)"


def verdict_section(two: TwoRuns) -> Section:
    a, b = two.ids
    section = Section("verdict", f"Verdict (run {b} against run {a}, end to end)")
    lines = [f"{c.variant} on {c.workload}: {_change_text(c, b)}" for c in two.comparisons]
    for variant, workload, why in two.not_compared:
        lines.append(f"{variant}{f' on {workload}' if workload else ''}: not compared — {why}")
    if not lines:
        return section.add(Text("No variant × workload to compare (variants are matched by name)."))
    section.add(Bullets(lines, strong=True))
    compared = [c for c in two.comparisons if c.change is not None]
    if two.comparisons and not compared:
        section.add(Text("No interval anywhere: one trial per prompt in a run. Run with `repetitions = 3`."))
    disturbed = [
        f"run {run}: {rule.disturbed} of {rule.measured} {'left out' if rule.excluded else 'kept'}"
        for run, rule in zip(two.ids, two.disturbed, strict=True)
        if rule.disturbed
    ]
    section.add(
        Text(
            "Trust: ratios of medians of two runs, not paired — what changed on the machine between them "
            "is in these numbers (see the notes)"
            + (f"; disturbed trials: {', '.join(disturbed)}." if disturbed else ".")
        )
    )
    return section


def comparison_table(two: TwoRuns) -> Table:
    """Per variant × workload: medians in RUN_A → RUN_B, RUN_B's speed-ups over RUN_A: e2e with its CI,
    TTFT and decode without (``*`` still marks a CI that excludes 1), as the main table writes them —
    with three intervals a row outgrew 120 columns as soon as a median gained a digit."""
    ttft, e2e = METRIC_TABLE["ttft_ms"].header, METRIC_TABLE["e2e_ms"].header
    headers = ["variant", "workload", "n", ttft, "tok/s", e2e, "e2e x", "TTFT x", "decode x"]
    rows = [
        [
            c.variant,
            c.workload,
            f"{c.a['e2e_ms'].n}/{c.b['e2e_ms'].n}",
            f"{fmt(c.a['ttft_ms'].value, 1)} → {fmt(c.b['ttft_ms'].value, 1)}",
            f"{fmt(c.a['decode_tokens_per_s'].value, 1)} → {fmt(c.b['decode_tokens_per_s'].value, 1)}",
            f"{fmt(c.a['e2e_ms'].value, 0)} → {fmt(c.b['e2e_ms'].value, 0)}",
            ratio(c.speedup_e2e),
            ratio(c.speedup_ttft, interval=False),
            ratio(c.speedup_decode, interval=False),
        ]
        for c in two.comparisons
    ]
    return Table(headers, rows)


def _value(value: object) -> str:
    text = "(none)" if value is None else str(value)
    return text if len(text) <= 40 else text[:39] + "…"


_KINDS = (
    ("machine", "Machine"),
    ("libraries", "Libraries"),
    ("spec", "Spec"),
    ("variant", "Variants"),
)


#: instruction-set flags by the kernels they decide (``/proc/cpuinfo`` names)
_ISA_KERNELS = (
    ("int8", ("avx512_vnni", "avx_vnni", "amx_int8")),
    ("bf16", ("avx512_bf16", "amx_bf16")),
    ("fp16", ("avx512_fp16",)),
)


def isa_line(a: object, b: object, ids: tuple[int, int]) -> str:
    """Two recorded instruction sets in words, with what they change: ``run 1: AVX-512 VNNI; run 2:
    AVX2 only — int8 kernels differ, vector width 512 vs 256 bits``."""
    words = [
        f"run {run}: {instruction_set(flags) or 'not recorded'}"
        for run, flags in zip(ids, (a, b), strict=True)
    ]
    if not (isinstance(a, list) and isinstance(b, list)):
        return "; ".join(words)
    consequences = [
        f"{kind} kernels differ" for kind, flags in _ISA_KERNELS if set(flags) & set(a) != set(flags) & set(b)
    ]
    if ("avx512f" in a) != ("avx512f" in b):
        wide = ("512", "256") if "avx512f" in a else ("256", "512")
        consequences.append(f"vector width {wide[0]} vs {wide[1]} bits")
    return "; ".join(words) + (" — " + ", ".join(consequences) if consequences else "")


def _difference_text(d: RunDifference, ids: tuple[int, int]) -> str:
    if (d.kind, d.name) == ("machine", "cpu_flags"):
        return "instruction set: " + isa_line(d.a, d.b, ids)
    return f"{d.name} {_value(d.a)} → {_value(d.b)}"


def explaining_lines(two: TwoRuns) -> list[str]:
    """The recorded differences that decide which kernels run, so can explain a changed verdict by
    themselves (the CPU's instruction set first, then the GPU, its driver and clocks, matmul
    precision, kernel libraries); ``[]`` when none."""
    found = sorted((d for d in two.differences if d.changes_kernels), key=lambda d: d.name != "cpu_flags")
    return [_difference_text(d, two.ids) for d in found]


def difference_lines(two: TwoRuns) -> list[str]:
    """How the runs differ, a line per kind (machine, libraries, spec, variants), but those
    :func:`explaining_lines` already listed."""
    lines = []
    for kind, label in _KINDS:
        found = [d for d in two.differences if d.kind == kind and not d.changes_kernels]
        if found:
            lines.append(f"{label}: " + "; ".join(_difference_text(d, two.ids) for d in found))
    return lines


def notes_section(two: TwoRuns) -> Section:
    a, b = two.ids
    section = Section("notes", "Notes")
    explaining = explaining_lines(two)
    if explaining:
        section.add(Text("What can explain a changed verdict (it decides which kernels run):"))
        section.add(Bullets(explaining))
    differences = difference_lines(two)
    if differences:
        also = "also " if explaining else ""
        section.add(Text(f"How run {b} {also}differs from run {a} (as recorded):"))
        section.add(Bullets(differences))
    elif not explaining:
        section.add(
            Text(
                f"Runs {a} and {b} recorded the same machine, libraries and spec: they differ in when they ran "
                "(what the machine did meanwhile) and in whatever was not recorded (your code, unless it "
                "ran from another venv)."
            )
        )
    for run, rule in zip(two.ids, two.disturbed, strict=True):
        line = disturbance_line(rule)
        section.add(Text(f"Run {run}: {line}." if line else f"Run {run}: no trial disturbed.", note=True))
    if two.unmatched:
        section.add(
            Text(
                f"Not matched (no variant of that name in the other run): {', '.join(unmatched_names(two))}."
            )
        )
    section.add(Text(f"{NOT_PAIRED} {ONE_RUN_ADVICE}"))
    return section


def unmatched_names(two: TwoRuns) -> list[str]:
    """The variants only one run has: ``int8 (only in run 3)``."""
    return [f"{u.variant} (only in run {u.run})" for u in two.unmatched]


def comparison_data(two: TwoRuns) -> JSONObject:
    """The comparison as JSON-ready data (``comparison.json`` of ``compare A B --out``)."""
    return {
        "run_a": two.run_a.id,
        "run_b": two.run_b.id,
        "comparisons": [c.to_dict() for c in two.comparisons],
        "unmatched": unmatched_names(two),
        "disturbed": {"run_a": two.disturbed[0].to_dict(), "run_b": two.disturbed[1].to_dict()},
        "differences": [d.to_dict() for d in two.differences],
        "not_compared": [{"variant": v, "workload": w, "reason": why} for v, w, why in two.not_compared],
    }


def _title(two: TwoRuns) -> str:
    a, b = two.run_a, two.run_b
    return f"Run {b.id} '{b.name or ''}' against run {a.id} '{a.name or ''}'"


def _meta(two: TwoRuns) -> list[str]:
    lines = []
    for run in (two.run_a, two.run_b):
        started = (run.started_at or "")[:16].replace("T", " ")
        lines.append(f"Run {run.id}: {run.status}, started {started} UTC")
    machines = [machine_line(host_environment(r.environment)) for r in (two.run_a, two.run_b)]
    if machines[0] and machines[0] == machines[1]:
        lines.append(f"Machine (both): {machines[0]}")
    else:
        lines += [
            f"Machine of run {r.id}: {m}" for r, m in zip((two.run_a, two.run_b), machines, strict=True) if m
        ]
    return lines


def build_comparison_report(two: TwoRuns, charts: Sequence[Chart] = ()) -> Report:
    """The report of two runs compared (:class:`~workbench.analysis.compare.TwoRuns`): sections
    ``verdict``, ``table`` (with the before → after chart), ``charts`` (the other charts of two runs
    compared, :func:`workbench.charts.two_runs_charts`, when ``charts`` has them), ``notes``."""
    a, b = two.ids
    table = Section("table", f"Per variant × workload (run {a} → run {b}, variants matched by name)")
    table.add(comparison_table(two))
    table.add(
        Text(
            f"Medians in run {a} → run {b}; n = measured trials used (run {a}/run {b}). x = run {b}'s speed-up "
            f"over run {a} (> 1: run {b} is faster): the ratio of the medians [bootstrap 95 % CI], * when "
            "the CI excludes 1.",
            note=True,
        )
    )
    table.add(Figure(BeforeAfterChart.key))
    rest = [c.name for c in charts if c.name != BeforeAfterChart.key]
    figures = Section("charts", "Charts")
    if rest:
        figures.add(
            Text(
                "Both runs side by side, each as it is alone (variants named RUN:variant, a variant in one "
                "colour in both runs); a conversation both ran: each run's turns on one chart, the first "
                "run dashed.",
                note=True,
            )
        )
        for name in rest:
            figures.add(Figure(name))
    sections = [verdict_section(two), table, figures, notes_section(two)]
    return Report(_title(two), _meta(two), [s for s in sections if s])


# -- documents ----------------------------------------------------------------------------------


def comparison_markdown(two: TwoRuns, charts: Sequence[Chart], images: dict[str, str] | None = None) -> str:
    """The comparison as Markdown; ``charts``: the charts of the two runs
    (:func:`workbench.charts.two_runs_charts`); ``images``: chart name → relative file to link."""
    from workbench.report.documents import markdown_image
    from workbench.report.model import render_markdown

    image = markdown_image(charts, images or {})
    return render_markdown(build_comparison_report(two, charts), image)


def comparison_html(two: TwoRuns, charts: Sequence[Chart], pngs: dict[str, bytes] | None = None) -> str:
    """The comparison as one self-contained HTML page, the verdict first; ``charts``: the charts of the
    two runs (:func:`workbench.charts.two_runs_charts`); ``pngs``: chart name → PNG."""
    from workbench.report.documents import html_page

    names = two.variant_names or [c.variant for c in two.comparisons]
    return html_page(
        build_comparison_report(two, charts), pngs or {}, {c.name: c for c in charts}, variant_colours(names)
    )


def comparison_rows(two: TwoRuns) -> list[dict[str, str | int | float | None]]:
    """One flat row per variant × workload (comparison.csv)."""
    rows = []
    for c in two.comparisons:
        row: dict[str, str | int | float | None] = {
            "variant": c.variant,
            "workload": c.workload,
            "run_a": c.run_a,
            "run_b": c.run_b,
        }
        for side, values in (("a", c.a), ("b", c.b)):
            for metric, est in values.items():
                row[f"{side}.{metric}"] = est.value
                row[f"{side}.{metric}.n"] = est.n
        for name, speed in (("e2e", c.speedup_e2e), ("ttft", c.speedup_ttft), ("decode", c.speedup_decode)):
            row[f"speedup_{name}"] = speed.value if speed is not None else None
            row[f"speedup_{name}.lo"] = speed.lo if speed is not None else None
            row[f"speedup_{name}.hi"] = speed.hi if speed is not None else None
        row["change"] = c.change
        rows.append(row)
    return rows


def export_comparison(
    two: TwoRuns,
    out_dir: Path,
    formats: Sequence[str] | None = None,
    *,
    charts: Sequence[Chart],
    renderer: ChartRenderer | None = None,
    no_renderer: str = "no chart renderer was given",
    on_file: Callable[[Path], None] | None = None,
) -> tuple[list[Path], list[str]]:
    """Write the comparison into ``out_dir``: ``csv`` comparison.csv, comparison.json and the charts'
    data; ``md`` summary.md; ``png``/``svg`` the charts; ``html`` report.html (one self-contained page).
    ``charts``: the charts of the two runs (:func:`workbench.charts.two_runs_charts`, what the GUI's
    compare view shows). ``formats`` None: every format this install can write (PNG, SVG and HTML
    need ``renderer``, the GUI's chart module). Returns the files written and notes."""
    from workbench.formatting import json_text
    from workbench.report.export import (
        prepare_out_dir,
        resolve_formats,
        write_csv,
        write_documents,
        write_file,
    )

    formats, notes = resolve_formats(formats, renderer, no_renderer)
    prepare_out_dir(out_dir)
    written: list[Path] = []

    def wrote(path: Path) -> None:
        written.append(path)
        if on_file is not None:
            on_file(path)

    if "csv" in formats:
        wrote(write_csv(out_dir / "comparison.csv", comparison_rows(two)))
        wrote(write_file(out_dir / "comparison.json", json_text(comparison_data(two)).encode("utf-8")))
        for chart in charts:
            wrote(write_csv(out_dir / f"{chart.name}.csv", chart.rows()))
    write_documents(
        out_dir,
        charts,
        formats,
        renderer,
        wrote,
        markdown=lambda images: comparison_markdown(two, charts, images),
        html=lambda pngs: comparison_html(two, charts, pngs),
    )
    return written, notes
