"""Quality beside speed, in words and tables: the cells the comparison tables carry (KLD, same top)
and the quality section of ``show``, the report and the GUI (docs/metrics.md, "Quality")."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from workbench.formatting import count, fixed, fmt, interval, kld_text, percent, span

if TYPE_CHECKING:
    from workbench.analysis.quality import GroupQuality, QualityFigures, RunQuality
    from workbench.analysis.summary import GroupSummary

__all__ = [
    "QUALITY_HEADERS",
    "QUALITY_NOTE",
    "kld_text",
    "quality_cells",
    "quality_lines",
    "quality_table",
    "tradeoff_lines",
]

#: the two columns every comparison table gains when the run had a quality pass
QUALITY_HEADERS = ["KLD", "same top"]

QUALITY_NOTE = (
    "Quality: each variant scored the baseline's own outputs (teacher forcing, untimed, after the timed "
    "trials). KLD = mean KL(P_baseline ‖ P_variant) per token in nats (0 = the same predictions); "
    "same top = tokens both rank first; Δp = change of the given token's probability; PPL ratio = "
    "exp(mean NLL − baseline's); CIs: bootstrap over prompts, 95 %."
)


def _status_word(quality: GroupQuality) -> str:
    return {
        "reference": "reference",
        "lossless": "lossless",
        "not scored": "not scored",
        "failed": "failed",
    }.get(quality.status, "")


def quality_cells(summary: GroupSummary) -> list[str]:
    """The KLD and same-top cells of one summary row (``GroupSummary.quality``)."""
    q = summary.quality
    if not q:
        return ["", ""]
    if q.figures is None:
        return [_status_word(q), ""]
    bound = "≥" if q.figures.method == "top-k" else ""
    return [bound + kld_text(q.figures.kld_mean), percent(q.figures.same_top)]


def _ci(ci: Sequence[float] | None, write: Callable[[float], str]) -> str:
    return interval(ci[0], ci[1], write) if ci else ""


def quality_table(figures: Sequence[QualityFigures]) -> tuple[list[str], list[list[str]]]:
    """The detail table: per variant × workload (and "all") the full figures."""
    headers = [
        "variant",
        "workload",
        "prompts",
        "tokens",
        "KLD mean",
        "median",
        "p99",
        "max",
        "same top",
        "Δp mean",
        "Δp RMS",
        "PPL ratio",
        "first diff",
    ]
    rows = []
    for f in figures:
        bound = "≥" if f.method == "top-k" else ""
        rows.append(
            [
                f.variant,
                f.workload or "all",
                str(f.prompts),
                str(f.positions),
                bound + kld_text(f.kld_mean) + _ci(f.kld_ci, kld_text),
                kld_text(f.kld_median),
                kld_text(f.kld_p99),
                kld_text(f.kld_max),
                percent(f.same_top, 1) + _ci(f.same_top_ci, lambda v: percent(v, 1)),
                percent(f.delta_p_mean, 2, signed=True),
                percent(f.delta_p_rms, 2),
                fmt(f.ppl_ratio, 3) + _ci(f.ppl_ratio_ci, lambda v: fmt(v, 3)),
                "none"
                if f.first_divergence is None
                else f"tok {count(f.first_divergence)} ({f.diverged_prompts}/{f.prompts})",
            ]
        )
    return headers, rows


def quality_lines(quality: RunQuality) -> list[str]:
    """What the pass says beside the table: variants not scored and why; the corpus perplexity."""
    out = []
    for row in quality.variants.values():
        if row.status in ("not scored", "failed"):
            out.append(f"{row.variant}: {row.status} — {row.reason or 'no reason recorded'}")
        elif row.status == "lossless":
            out.append(f"{row.variant}: not scored, {row.reason}")
    for f in quality.texts():
        if f.workload is None:
            continue
        out.append(
            f"{f.variant} on {f.workload} ({f.prompts} chunks, {f.positions} tokens): perplexity "
            f"{fixed(f.ppl, 3)} vs the baseline's {fixed(f.ppl_base, 3)} (ratio {fmt(f.ppl_ratio, 4)}), "
            f"KLD {kld_text(f.kld_mean)}"
        )
    return out


def _range(values: Sequence[float]) -> str:
    return span(min(values), max(values), lambda v: fixed(v, 2), "x")


def tradeoff_lines(summaries: Sequence[GroupSummary], quality: RunQuality | None) -> list[str]:
    """The trade-off of each scored variant, speed and cost in one line: "int4-ort: decode 5.4–7.3x,
    e2e 1.2–1.8x; KLD 0.052, same top 88 % (over every workload)"."""
    if quality is None:
        return []
    overall = {f.variant: f for f in quality.figures if f.source == "output" and f.workload is None}
    single = {f.variant: f for f in quality.figures if f.source == "output"}
    out = []
    for name, row in quality.variants.items():
        if row.status != "scored":
            continue
        figures = overall.get(name) or single.get(name)
        if figures is None:
            continue
        mine = [s for s in summaries if s.variant == name]
        decode = [s.speedup_decode.value for s in mine if s.speedup_decode and s.speedup_decode.value]
        e2e = [s.speedup_e2e.value for s in mine if s.speedup_e2e and s.speedup_e2e.value]
        speed = ", ".join(
            part
            for part in (f"decode {_range(decode)}" if decode else "", f"e2e {_range(e2e)}" if e2e else "")
            if part
        )
        bound = "≥ " if figures.method == "top-k" else ""
        cost = f"KLD {bound}{kld_text(figures.kld_mean)}, same top {percent(figures.same_top)}"
        if figures.ppl_ratio_ci is None or figures.ppl_ratio_ci[0] > 1 or figures.ppl_ratio > 1.005:
            cost += f", perplexity {fmt(figures.ppl_ratio, 3)} times the baseline's"
        out.append(f"{name}: {speed or 'no speed-up measured'}; {cost}")
    return out
