"""A run as a document: a Markdown summary and one self-contained HTML report.

Both render the run's report (:func:`workbench.report.run_report.build_run_report`: the verdict first,
then the main table, phases, drafting, quality, targets, notes) and add what only a document has: the
charts, the phase table, the environment and the spec. No Qt: the charts come in as already rendered
PNG bytes (the HTML embeds them as ``data:`` URIs — no external resource, so the file can be mailed or
attached to a design doc) or as file names (the Markdown links them).
"""

from __future__ import annotations

import base64
import html
from collections.abc import Callable, Sequence

from workbench.analysis.run import RunAnalysis
from workbench.charts import run_charts
from workbench.charts.base import Chart, variant_colours
from workbench.core.metrics import METRIC_TABLE
from workbench.formatting import environment_lines, fmt, host_environment, percent
from workbench.report.model import Bullets, Report, Section, Table, render_html, render_markdown
from workbench.report.run_report import build_run_report, share_text

__all__ = ["document_report", "html_page", "html_report", "markdown_image", "markdown_report"]


def _phase_table(analysis: RunAnalysis) -> Table:
    headers = [
        "workload",
        "measured",
        "prefill share",
        METRIC_TABLE["input_tokens"].header,
        "out tok (of allowed)",
        "predicted before the run",
    ]
    rows = []
    for p in analysis.phases:
        predicted = ""
        if p.prediction is not None:
            predicted = f"{p.prediction.label} ({percent(p.prediction.prefill_share)})"
            predicted += " — differs" if p.disagrees else " — agrees"
        out = fmt(p.output_tokens, 0) + (f" ({fmt(p.max_new_tokens, 0)})" if p.max_new_tokens else "")
        rows.append(
            [
                p.workload,
                p.label,
                share_text(p.prefill_share, p.label),
                fmt(p.input_tokens, 0),
                out,
                predicted,
            ]
        )
    return Table(headers, rows, colour_column=None)


#: charts a section of the report places (the rest go under "Charts")
_PLACED = ("headline", "speedup", "targets", "draft-positions", "quality")


def document_report(analysis: RunAnalysis, charts: Sequence[Chart]) -> Report:
    """The run's report with what a document adds: the phase table, the charts no section places,
    the environment and the spec."""
    report = build_run_report(analysis)
    phases = report.section("phases")
    if phases is not None and analysis.phases:
        phases.blocks.insert(1, _phase_table(analysis))
    rest = [c.name for c in charts if c.name not in _PLACED]
    if rest:
        from workbench.report.model import Figure

        at = next((i for i, s in enumerate(report.sections) if s.key in ("roofline", "variants")), None)
        charts_section = Section("charts", "Charts", [Figure(name) for name in rest])
        report.sections.insert(len(report.sections) if at is None else at, charts_section)
    env = environment_lines(host_environment(analysis.environment))
    report.sections.append(Section("environment", "Environment", [Bullets(env)]))
    return report


def markdown_report(
    analysis: RunAnalysis, images: dict[str, str] | None = None, charts: Sequence[Chart] | None = None
) -> str:
    """The run as Markdown. ``images``: chart name → relative file to link (e.g. ``headline.png``);
    ``charts``: the run's charts when the caller has them (else built here)."""
    charts = run_charts(analysis) if charts is None else charts
    return render_markdown(document_report(analysis, charts), markdown_image(charts, images or {}))


def markdown_image(charts: Sequence[Chart], images: dict[str, str]) -> Callable[[str], str | None]:
    """A figure in Markdown: the link to its image file and, under it, the caption (the PNG carries
    none of its own); None for a chart without a file."""
    by_name = {c.name: c for c in charts}

    def image(name: str) -> str | None:
        if name not in images or name not in by_name:
            return None
        chart = by_name[name]
        caption = " ".join(chart.notes)
        return f"![{chart.title}]({images[name]})" + (f"\n\n*{caption}*" if caption else "")

    return image


_CSS = """
body{font-family:system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;color:#222;max-width:1100px;margin:2em auto;
padding:0 1em;line-height:1.45}
h1{font-size:1.6em;margin-bottom:.2em}h2{margin-top:1.8em;border-bottom:1px solid #ddd;padding-bottom:.2em}
h3{margin-bottom:.3em}.meta{color:#555}
table{border-collapse:collapse;margin:.8em 0;font-size:.88em;display:block;overflow-x:auto;max-width:100%}
th,td{border:1px solid #ddd;padding:.3em .55em;text-align:right;white-space:nowrap}
th{background:#f4f4f4}td:first-child,td:nth-child(2),th:first-child,th:nth-child(2){text-align:left}
.swatch{display:inline-block;width:.8em;height:.8em;border-radius:2px;margin-right:.35em;vertical-align:-.05em}
figure{margin:1.2em 0}figure img{max-width:100%;height:auto;border:1px solid #eee}
figcaption{color:#555;font-size:.9em}.label{font-weight:600}.finding{background:#fff6e0;padding:.1em .3em}
ul{margin-top:.3em}.note{color:#555;font-size:.9em}
.verdict ul{font-size:1.08em}.verdict li{margin:.2em 0}code{background:#f4f4f4;padding:0 .2em}
.targets td:nth-child(-n+4),.targets th:nth-child(-n+4){text-align:left}
"""


def html_report(
    analysis: RunAnalysis, pngs: dict[str, bytes] | None = None, charts: Sequence[Chart] | None = None
) -> str:
    """One self-contained HTML page, the verdict first: charts embedded as PNG ``data:`` URIs, tables,
    phases, advice, environment. ``pngs``: chart name → PNG bytes (without them the report has tables
    only); ``charts``: the run's charts when the caller has them (else built here)."""
    pngs = pngs or {}
    charts = run_charts(analysis) if charts is None else charts
    by_name = {c.name: c for c in charts}
    report = document_report(analysis, charts)
    return html_page(report, pngs, by_name, variant_colours(analysis.variant_names), spec=analysis.run.spec)


def html_page(
    report: Report,
    pngs: dict[str, bytes],
    charts: dict[str, Chart],
    colours: dict[str, str],
    *,
    spec: str | None = None,
) -> str:
    """A report as one self-contained page (``charts``: name → chart, for the figures' titles and
    captions; the PNGs carry no caption of their own)."""
    esc = html.escape

    def figure(name: str) -> str | None:
        if name not in pngs or name not in charts:
            return None
        chart = charts[name]
        data = base64.b64encode(pngs[name]).decode("ascii")
        caption = " ".join(chart.notes)
        return (
            f'<figure><img src="data:image/png;base64,{data}" alt="{esc(chart.title)}">'
            f"<figcaption>{esc(caption)}</figcaption></figure>"
        )

    parts = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>{esc(report.title)}</title><style>{_CSS}</style></head><body>",
        f"<h1>{esc(report.title)}</h1>",
    ]
    parts += [f'<p class="meta">{esc(line)}</p>' for line in report.meta]
    parts.append(render_html(report, figure, colours))
    if spec:
        parts.append(f"<h2>Spec</h2><pre>{esc(spec)}</pre>")
    parts.append("</body></html>")
    return "\n".join(parts)
