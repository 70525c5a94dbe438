"""A run as a document: a Markdown summary and one self-contained HTML report.

Both are built from a :class:`~workbench.analysis.run.RunAnalysis` and need no Qt; the charts come in as
already rendered PNG bytes (the HTML embeds them as ``data:`` URIs — no external resource, so the file
can be mailed or attached to a design doc) or as file names (the Markdown links them).
"""

from __future__ import annotations

import base64
import html
from collections.abc import Sequence
from typing import Any

from workbench.analysis.drafting import MIN_BUCKET_STEPS
from workbench.analysis.run import RunAnalysis
from workbench.charts import run_charts
from workbench.charts.base import Chart, variant_colours
from workbench.report.drafting import DRAFTING_NOTE, break_even_table, draft_length_table
from workbench.report.formatting import (
    acceptance_text,
    environment_lines,
    host_environment,
    libraries,
    match_text,
    mde_text,
    timing_cells,
)
from workbench.report.formatting import fmt as _fmt
from workbench.report.formatting import ratio as _ratio
from workbench.report.quality import (
    QUALITY_HEADERS,
    QUALITY_NOTE,
    quality_cells,
    quality_lines,
    quality_table,
    tradeoff_lines,
)
from workbench.report.targets import TARGETS_NOTE, targets_table

__all__ = ["html_report", "markdown_report", "results_table"]


def _pct(value: float | None) -> str:
    return "" if value is None else f"{value:.0%}"


def results_table(analysis: RunAnalysis) -> tuple[list[str], list[list[str]]]:
    """Medians per variant × workload with speed-ups (the CLI's comparison, as strings)."""
    headers = [
        "variant",
        "workload",
        "n",
        "in tok",
        "out tok",
        "TTFT ms",
        "TPOT ms",
        "decode tok/s",
        "e2e ms",
        "peak MB",
        "e2e speed-up",
        "MDE",
        "TTFT speed-up",
        "decode speed-up",
        "accepted",
        "draft/verify",
        "match",
    ]
    # Served variants (endpoint): the client's mean TTFT beside the server's own mean; parallel streams: the
    # concurrency and the aggregate tokens/s. Only when some variant has them.
    served = any(s.server for s in analysis.summaries)
    parallel = any(s.concurrency > 1 for s in analysis.summaries)
    if served:
        at = headers.index("TTFT ms") + 1
        headers[at:at] = ["TTFT mean ms", "srv TTFT mean ms"]
    if parallel:
        at = headers.index("e2e ms") + 1
        headers[at:at] = ["conc", "agg tok/s"]
    scored = any(s.quality for s in analysis.summaries)
    headers += QUALITY_HEADERS if scored else []
    rows = []
    for s in analysis.summaries:
        m = s.metrics
        split = ""
        if s.draft_share is not None and s.verify_share is not None:
            split = f"{s.draft_share:.0%} / {s.verify_share:.0%}"
        row = timing_cells(s, served=served, parallel=parallel)
        row += [
            _fmt(m["peak_memory_mb"].value, 0),
            _ratio(s.speedup_e2e),
            mde_text(s.speedup_e2e),
            _ratio(s.speedup_ttft),
            _ratio(s.speedup_decode),
            acceptance_text(s, digits=2),
            split,
            match_text(s),
        ]
        row += quality_cells(s) if scored else []
        rows.append(row)
    return headers, rows


def _phase_table(analysis: RunAnalysis) -> tuple[list[str], list[list[str]]]:
    headers = [
        "workload",
        "measured",
        "prefill share",
        "in tok",
        "out tok (of allowed)",
        "predicted before the run",
    ]
    rows = []
    for p in analysis.phases:
        predicted = ""
        if p.prediction is not None:
            predicted = f"{p.prediction.label} ({p.prediction.prefill_share:.0%})"
            predicted += " — differs" if p.disagrees else " — agrees"
        out = _fmt(p.output_tokens, 0) + (f" ({_fmt(p.max_new_tokens, 0)})" if p.max_new_tokens else "")
        rows.append([p.workload, p.label, f"{p.prefill_share:.0%}", _fmt(p.input_tokens, 0), out, predicted])
    return headers, rows


def _roofline_table(analysis: RunAnalysis) -> tuple[list[str], list[list[str]]]:
    headers = [
        "variant",
        "workload",
        "decode tok/s",
        "limit tok/s",
        "of limit",
        "weights MB",
        "KV MB/token step",
    ]
    rows = [
        [
            r.variant,
            r.workload,
            _fmt(r.decode_tokens_per_s, 1),
            _fmt(r.limit_tokens_per_s, 1),
            _pct(r.fraction),
            _fmt(r.weights_mb, 0),
            _fmt(r.kv_mb, 2),
        ]
        for r in analysis.roofline
        if r.limit_tokens_per_s
    ]
    return headers, rows


def _variants_table(analysis: RunAnalysis) -> tuple[list[str], list[list[str]]]:
    headers = [
        "variant",
        "strategy",
        "model",
        "device",
        "dtype",
        "load s",
        "weights MB",
        "bandwidth GB/s",
        "status",
    ]
    rows = [
        [
            v["name"],
            v.get("strategy") or "",
            v.get("model") or "",
            v.get("device") or "",
            v.get("dtype") or "",
            _fmt(v["load_ms"] / 1000 if v.get("load_ms") else None, 1),
            _fmt(v.get("weights_mb") or None, 0),
            _fmt(v.get("memory_bandwidth_gbs"), 1),
            (v.get("status") or "") + (f": {v['error']}" if v.get("error") else ""),
        ]
        for v in analysis.variants
    ]
    if any(v.get("python") for v in analysis.variants):  # some ran in another Python environment
        headers += ["python", "libraries"]
        for row, v in zip(rows, analysis.variants, strict=True):
            row += [v.get("python") or "(the workbench's)", libraries(v.get("packages"))]
    return headers, rows


def _md_table(headers: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    def cell(text: str) -> str:
        return str(text).replace("|", "\\|").replace("\n", " ")

    lines = ["| " + " | ".join(cell(h) for h in headers) + " |", "|" + "---|" * len(headers)]
    lines += ["| " + " | ".join(cell(c) for c in row) + " |" for row in rows]
    return "\n".join(lines)


def _title(analysis: RunAnalysis) -> str:
    run = analysis.run
    return f"Run {run['id']}: {run.get('name') or ''}".rstrip(": ")


def _meta(analysis: RunAnalysis) -> str:
    run = analysis.run
    started = (run.get("started_at") or "")[:19].replace("T", " ")
    parts = [f"status {run.get('status')}", f"started {started} UTC"]
    if analysis.baseline:
        parts.append(f"speed-ups vs **{analysis.baseline}**")
    if analysis.cost_model is not None:
        parts.append(
            f"measured costs: prefill {analysis.cost_model.prefill_ms_per_token:.3g} ms per input token, "
            f"decode {analysis.cost_model.decode_ms_per_token:.3g} ms per output token"
        )
    return " · ".join(parts)


_FOOTNOTE = (
    "Medians over measured trials (warm-ups excluded); speed-ups vs the baseline are geometric means of "
    "the ratios of paired trials (same prompt, same round) with a bootstrap 95 % CI (resampled within "
    "each prompt), * when the CI excludes 1; MDE: the smallest e2e speed-up this run's noise would "
    "detect (95 %, 80 % power). Prefill share = "
    "median TTFT / (median TTFT + median time after the first token), of the baseline; prefill-heavy "
    "≥ 60 %, decode-heavy ≤ 40 %."
)


#: charts placed in a section of their own (the rest go under "Charts")
_OWN_SECTION = ("headline", "speedup", "targets", "draft-positions", "quality")


def _output_figures(analysis: RunAnalysis) -> list[Any]:
    """The quality figures on the workloads' own outputs (the corpus' go in the lines under them)."""
    return [f for f in analysis.quality.figures if f.source == "output"] if analysis.quality else []


def _design_lines(analysis: RunAnalysis) -> list[str]:
    """How the trials were ordered, the drift, the disturbed trials (analysis.run.Design)."""
    return analysis.design.lines() if analysis.design else []


def markdown_report(
    analysis: RunAnalysis, images: dict[str, str] | None = None, charts: Sequence[Chart] | None = None
) -> str:
    """The run as Markdown. ``images``: chart name → relative file to link (e.g. ``headline.png``);
    ``charts``: the run's charts when the caller has them (else built here)."""
    images = images or {}
    by_name = {c.name: c for c in (run_charts(analysis) if charts is None else charts)}
    out = [f"# {_title(analysis)}", "", _meta(analysis), ""]

    def image(name: str) -> None:
        if name in images and name in by_name:
            out.extend([f"![{by_name[name].title}]({images[name]})", ""])

    out += ["## Where the time goes", ""]
    image("headline")
    if analysis.phases:
        out += [_md_table(*_phase_table(analysis)), ""]
    for p in analysis.phases:
        out += [f"### {p.workload} — {p.headline}", ""]
        out += [f"- {line}" for line in p.advice]
        out.append("")
    if analysis.verdicts:  # experience targets: who meets them, goodput, what would it take
        out += ["## Experience targets", ""]
        image("targets")
        out += [_md_table(*targets_table(analysis.verdicts)), "", TARGETS_NOTE, ""]
        for workload, lines in analysis.target_advice.items():
            out += [f"### {workload}", ""] + [f"- {line}" for line in lines] + [""]
    out += ["## Results", "", _md_table(*results_table(analysis)), "", _FOOTNOTE, ""]
    out += [f"- {line}" for line in _design_lines(analysis)] + ([""] if _design_lines(analysis) else [])
    image("speedup")
    if analysis.quality is not None and analysis.quality.figures:  # speed vs quality
        out += ["## Quality beside speed", ""]
        out += [f"- **{line}**" for line in tradeoff_lines(analysis.summaries, analysis.quality)] + [""]
        image("quality")
        out += [_md_table(*quality_table(_output_figures(analysis))), "", QUALITY_NOTE, ""]
        out += [f"- {line}" for line in quality_lines(analysis.quality)] + [""]
    elif analysis.quality is not None:
        out += (
            ["## Quality beside speed", ""] + [f"- {line}" for line in quality_lines(analysis.quality)] + [""]
        )
    if analysis.break_even:  # speculative variants: does drafting pay?
        out += ["## Does drafting pay?", ""]
        out += [f"- {line}" for line in analysis.drafting_advice] + ([""] if analysis.drafting_advice else [])
        image("draft-positions")
        out += [_md_table(*break_even_table(analysis.break_even)), ""]
        headers, rows = draft_length_table(analysis.break_even, MIN_BUCKET_STEPS)
        if rows:
            out += [
                f"Per draft length (at least {MIN_BUCKET_STEPS} steps):",
                "",
                _md_table(headers, rows),
                "",
            ]
        out += [DRAFTING_NOTE, ""]
    rest = [name for name in by_name if name not in _OWN_SECTION and name in images]
    if rest:
        out += ["## Charts", ""]
        for name in rest:
            image(name)
    headers, rows = _roofline_table(analysis)
    if rows:
        out += ["## Decode roofline", "", _md_table(headers, rows), ""]
    out += ["## Variants", "", _md_table(*_variants_table(analysis)), ""]
    out += (
        ["## Environment", ""]
        + [f"- {line}" for line in environment_lines(host_environment(analysis.environment))]
        + [""]
    )
    return "\n".join(out)


_CSS = """
body{font-family:system-ui,-apple-system,"Segoe UI",Roboto,sans-serif;color:#222;max-width:1100px;margin:2em auto;
padding:0 1em;line-height:1.45}
h1{font-size:1.6em;margin-bottom:.2em}h2{margin-top:1.8em;border-bottom:1px solid #ddd;padding-bottom:.2em}
h3{margin-bottom:.3em}.meta{color:#555}
table{border-collapse:collapse;margin:.8em 0;font-size:.88em}
th,td{border:1px solid #ddd;padding:.3em .55em;text-align:right;white-space:nowrap}
th{background:#f4f4f4}td:first-child,td:nth-child(2),th:first-child,th:nth-child(2){text-align:left}
.swatch{display:inline-block;width:.8em;height:.8em;border-radius:2px;margin-right:.35em;vertical-align:-.05em}
figure{margin:1.2em 0}figure img{max-width:100%;height:auto;border:1px solid #eee}
figcaption{color:#555;font-size:.9em}.label{font-weight:600}.finding{background:#fff6e0;padding:.1em .3em}
ul{margin-top:.3em}.note{color:#555;font-size:.9em}code{background:#f4f4f4;padding:0 .2em}
.targets td:nth-child(-n+4),.targets th:nth-child(-n+4){text-align:left}
"""


def _html_table(
    headers: Sequence[str], rows: Sequence[Sequence[str]], colours: dict[str, str], colour_column: int = 0
) -> str:
    head = "".join(f"<th>{html.escape(h)}</th>" for h in headers)
    body = []
    for row in rows:
        cells = []
        for i, c in enumerate(row):
            text = html.escape(str(c))
            if i == colour_column and c in colours:
                text = f'<span class="swatch" style="background:{colours[c]}"></span>{text}'
            cells.append(f"<td>{text}</td>")
        body.append("<tr>" + "".join(cells) + "</tr>")
    return f"<table><thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody></table>"


def html_report(
    analysis: RunAnalysis, pngs: dict[str, bytes] | None = None, charts: Sequence[Chart] | None = None
) -> str:
    """One self-contained HTML page: charts embedded as PNG ``data:`` URIs, tables, phases, advice,
    environment. ``pngs``: chart name → PNG bytes (without them the report has tables only);
    ``charts``: the run's charts when the caller has them (else built here)."""
    pngs = pngs or {}
    by_name = {c.name: c for c in (run_charts(analysis) if charts is None else charts)}
    colours = variant_colours(analysis.variant_names)
    esc = html.escape
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>{esc(_title(analysis))}</title><style>{_CSS}</style></head><body>",
        f"<h1>{esc(_title(analysis))}</h1>",
        f'<p class="meta">{esc(_meta(analysis)).replace("**", "")}</p>',
    ]

    def figure(name: str) -> None:
        if name in pngs and name in by_name:
            chart = by_name[name]
            data = base64.b64encode(pngs[name]).decode("ascii")
            caption = " ".join(chart.notes)
            parts.append(
                f'<figure><img src="data:image/png;base64,{data}" alt="{esc(chart.title)}">'
                f"<figcaption>{esc(caption)}</figcaption></figure>"
            )

    parts.append("<h2>Where the time goes</h2>")
    figure("headline")
    if analysis.phases:
        parts.append(_html_table(*_phase_table(analysis), colours={}))
    for p in analysis.phases:
        parts.append(f'<h3>{esc(p.workload)} — <span class="label">{esc(p.headline)}</span></h3><ul>')
        for line in p.advice:
            css = ' class="finding"' if line.startswith("Finding:") else ""
            parts.append(f"<li><span{css}>{esc(line)}</span></li>")
        parts.append("</ul>")
    if analysis.verdicts:  # experience targets: who meets them, goodput, what would it take
        parts.append("<h2>Experience targets</h2>")
        figure("targets")
        table = _html_table(*targets_table(analysis.verdicts), colours=colours, colour_column=2)
        parts.append(f'<div class="targets">{table}</div>')
        parts.append(f'<p class="note">{esc(TARGETS_NOTE)}</p>')
        for workload, lines in analysis.target_advice.items():
            parts.append(f"<h3>{esc(workload)}</h3><ul>")
            for line in lines:
                css = ' class="finding"' if line.startswith("Prediction:") else ""
                parts.append(f"<li><span{css}>{esc(line)}</span></li>")
            parts.append("</ul>")
    parts.append("<h2>Results</h2>")
    parts.append(_html_table(*results_table(analysis), colours=colours))
    parts.append(f'<p class="note">{esc(_FOOTNOTE)}</p>')
    if _design_lines(analysis):
        parts.append("<ul>" + "".join(f"<li>{esc(line)}</li>" for line in _design_lines(analysis)) + "</ul>")
    figure("speedup")
    if analysis.quality is not None:  # speed vs quality
        parts.append("<h2>Quality beside speed</h2>")
        tradeoffs = tradeoff_lines(analysis.summaries, analysis.quality)
        if tradeoffs:
            parts.append(
                "<ul>" + "".join(f'<li><span class="label">{esc(t)}</span></li>' for t in tradeoffs) + "</ul>"
            )
        if analysis.quality.figures:
            figure("quality")
            parts.append(_html_table(*quality_table(_output_figures(analysis)), colours=colours))
            parts.append(f'<p class="note">{esc(QUALITY_NOTE)}</p>')
        lines = quality_lines(analysis.quality)
        if lines:
            parts.append("<ul>" + "".join(f"<li>{esc(line)}</li>" for line in lines) + "</ul>")
    if analysis.break_even:  # speculative variants: does drafting pay?
        parts.append("<h2>Does drafting pay?</h2>")
        if analysis.drafting_advice:
            parts.append(
                "<ul>" + "".join(f"<li>{esc(line)}</li>" for line in analysis.drafting_advice) + "</ul>"
            )
        figure("draft-positions")
        parts.append(_html_table(*break_even_table(analysis.break_even), colours=colours))
        headers, rows = draft_length_table(analysis.break_even, MIN_BUCKET_STEPS)
        if rows:
            parts.append(f'<p class="note">Per draft length (at least {MIN_BUCKET_STEPS} steps):</p>')
            parts.append(_html_table(headers, rows, colours=colours))
        parts.append(f'<p class="note">{esc(DRAFTING_NOTE)}</p>')
    rest = [name for name in by_name if name not in _OWN_SECTION and name in pngs]
    if rest:
        parts.append("<h2>Charts</h2>")
        for name in rest:
            figure(name)
    headers, rows = _roofline_table(analysis)
    if rows:
        parts.append("<h2>Decode roofline</h2>")
        parts.append(_html_table(headers, rows, colours))
    parts.append("<h2>Variants</h2>")
    parts.append(_html_table(*_variants_table(analysis), colours=colours))
    parts.append("<h2>Environment</h2><ul>")
    parts += [f"<li>{esc(line)}</li>" for line in environment_lines(host_environment(analysis.environment))]
    parts.append("</ul>")
    spec = analysis.run.get("spec")
    if spec:
        parts.append(f"<h2>Spec</h2><pre>{esc(spec)}</pre>")
    parts.append("</body></html>")
    return "\n".join(parts)
