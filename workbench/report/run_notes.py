"""How a run's trials ran, and on what: the notes section (the design, how served variants are
timed, what kind of figure each variant's peak memory is), the variants table and the decode roofline
(how far each variant decodes from its memory-bandwidth limit, and whether compiling is the lever).
Parts of :func:`workbench.report.run_report.build_run_report`.
"""

from __future__ import annotations

from collections.abc import Sequence

from workbench.analysis.run import RunAnalysis
from workbench.charts.memory import DEVICE_WIDE, MEMORY_LABELS
from workbench.core.metrics import METRIC_TABLE
from workbench.formatting import fmt, libraries, percent
from workbench.report.design import design_lines
from workbench.report.model import Bullets, Section, Table, Text
from workbench.store import VariantRecord

__all__ = ["memory_kinds_line", "notes_section", "roofline_lines", "roofline_section", "variants_section"]


def notes_section(analysis: RunAnalysis) -> Section:
    section = Section("notes", "How the trials ran")
    if any(s.timing_scope == "client" for s in analysis.summaries):
        section.add(
            Text(
                "Served variants are timed as a client: TTFT/TPOT include the network, HTTP and the server's "
                "queue. TTFT mean and srv TTFT mean (the server's own, from its /metrics) are means over the "
                "same requests, so their difference is the time in front of the engine."
            )
        )
    # what changes the reading by default; the rest with --detail
    lines = design_lines(analysis.design)
    # fresh workers are the default; the drift and the disturbed trials, when they matter, are in
    # the verdict's trust line already
    said = ("Workers: fresh", "Drift:", f"{analysis.design.disturbance.disturbed} of ")
    routine = [x for x in lines if x.startswith(said)]
    section.add(Bullets([x for x in lines if x not in routine]))
    section.add(Bullets(routine, detail=True))
    memory = memory_kinds_line(analysis.variants)
    if memory:
        section.add(Text(memory))
    return section


def memory_kinds_line(variants: Sequence[VariantRecord]) -> str | None:
    """When the variants' peak memory is not one kind of figure: which kind each is, and which are
    device-wide (not compared); ``None`` when all are measured alike."""
    kinds = {v.name: v.memory_kind for v in variants if v.memory_kind}
    if len(set(kinds.values())) < 2 and not DEVICE_WIDE & set(kinds.values()):
        return None
    said = "; ".join(f"{name}: {MEMORY_LABELS.get(kind, kind)}" for name, kind in kinds.items())
    apart = [name for name, kind in kinds.items() if kind in DEVICE_WIDE]
    return f"Peak memory is not one kind of figure ({said})" + (
        f"; device-wide, not compared with the others: {', '.join(apart)}." if apart else "."
    )


def variants_section(analysis: RunAnalysis) -> Section:
    headers = ["variant", "strategy", "model", "device", "dtype", "load s", "weights MB", "GB/s", "status"]
    rows = [
        [
            v.name,
            v.strategy or "",
            _short(v.model or ""),
            v.device or "",
            v.dtype or "",
            fmt(v.load_ms / 1000 if v.load_ms else None, 1),
            fmt(v.weights_mb or None, 0),
            fmt(v.memory_bandwidth_gbs, 1),
            (v.status or "") + (f": {v.error[:60]}" if v.error else ""),
        ]
        for v in analysis.variants
    ]
    # variants in other Python environments (a code change A/B-tested in one run): which ran where is
    # part of the answer, so the table is shown by default then
    other = any(v.python for v in analysis.variants)
    if any(v.compile for v in analysis.variants):  # compiled variants: the mode and its compile time
        headers[6:6] = ["compile", "compile s"]
        for row, v in zip(rows, analysis.variants, strict=True):
            row[6:6] = [v.compile or "eager", fmt(v.compile_ms / 1000 if v.compile_ms else None, 1)]
    if other:
        headers += ["python", "libraries"]
        for row, v in zip(rows, analysis.variants, strict=True):
            row += [v.python or "(the workbench's)", libraries(v.packages)]  # the exact one
    return Section("variants", "Variants").add(Table(headers, rows, detail=not other))


def _short(text: str, width: int = 40) -> str:
    return text if len(text) <= width else "…" + text[-(width - 1) :]


def roofline_section(analysis: RunAnalysis) -> Section:
    decode = METRIC_TABLE["decode_tokens_per_s"].header
    headers = ["variant", "workload", decode, "limit tok/s", "of limit", "weights MB", "KV MB/step"]
    rows = [
        [
            r.variant,
            r.workload,
            fmt(r.decode_tokens_per_s, 1),
            fmt(r.limit_tokens_per_s, 1),
            percent(r.fraction),
            fmt(r.weights_mb, 0),
            fmt(r.kv_mb, 2),
        ]
        for r in analysis.roofline
        if r.limit_tokens_per_s
    ]
    section = Section("roofline", "Decode roofline (the memory-bandwidth limit on tokens/s)")
    if not rows:
        return section
    section.add(Bullets(roofline_lines(analysis)))
    return section.add(Table(headers, rows, detail=True))


def roofline_lines(analysis: RunAnalysis) -> list[str]:
    """Per one-token-per-step variant far from its bandwidth limit: what bounds it, and whether
    compiling is the lever (on a GPU: launch-bound eager decoding; on a CPU: compute)."""
    from workbench.analysis.roofline import FAR_FROM_LIMIT

    plain = {v.name: v for v in analysis.variants if v.strategy in ("baseline", "quantized")}
    far: dict[str, list[float]] = {}
    for r in analysis.roofline:
        if r.variant in plain and r.far_from_limit and r.fraction is not None:
            far.setdefault(r.variant, []).append(r.fraction)
    out = []
    for name, fractions in far.items():
        v = plain[name]
        share = percent(max(fractions))
        head = f"{name} decodes at {share} or less of its bandwidth limit (< {percent(FAR_FROM_LIMIT)}): "
        if (v.device or "").startswith("cuda"):
            if v.compile:
                out.append(head + f"overhead-bound even compiled ({v.compile}).")
            else:
                out.append(
                    head + "overhead-bound — eager PyTorch launches each kernel from Python; "
                    "compile = true (a static cache and a compiled step) is the lever."
                )
        else:
            out.append(
                head + "its steps' time goes elsewhere than reading its weights; on a CPU there are no "
                "kernel launches for compile = true to remove, and compiling leaves the matrix products "
                "as they are (docs/strategies.md, compiled decoding)."
            )
    return out
