"""Experience targets as tables and lines: the verdicts per variant × workload (the CLI's ``show`` and
``compare``, the Markdown and HTML report) and the what-if projection of ``workbench project``.
Built from :mod:`workbench.analysis.targets` / :mod:`workbench.analysis.projection`; no Qt."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from workbench.report.formatting import num, percent
from workbench.spec.targets import TARGET_METRICS

__all__ = [
    "TARGETS_NOTE",
    "check_cell",
    "projection_notes",
    "projection_table",
    "targets_table",
    "verdict_cell",
]

Table = tuple[list[str], list[list[Any]]]

TARGETS_NOTE = (
    "Each target holds when its percentile of the requests (inverted CDF: at least that share of them) "
    "meets it: measured value [bootstrap 95 % CI], + headroom / − over the limit. Goodput: the share of "
    "requests (failed ones included) that met every target (n/N req: n of N requests). Targets: the workload's own in the spec, "
    "else the built-in defaults (docs/targets.md)."
)


def check_cell(check: Any, *, ci: bool = True) -> str:
    """One target of one variant × workload: ``✓ 412 [380–450] +18%`` / ``✗ 1,180 −136%``."""
    if check is None:
        return ""
    if check.status == "no data":
        return "no data"
    est = check.measured
    text = ("✓ " if check.status == "met" else "✗ ") + num(est.value)
    if ci and est.lo is not None and est.hi is not None:
        text += f" [{num(est.lo)}–{num(est.hi)}]"
    margin = check.margin
    if margin is not None:
        text += f" {'+' if margin >= 0 else '−'}{percent(abs(margin))}"
    if check.confident is False:
        text += "?"
    return text


def verdict_cell(verdict: Any) -> str:
    """``met`` / ``missed`` / ``unknown``, for a table."""
    return "" if verdict is None else verdict.status


def targets_table(verdicts: Sequence[Any], *, ci: bool = True) -> Table:
    """One row per variant × workload with targets: the workload's targets, the verdict, the goodput,
    and a column per targeted metric."""
    metrics = [m for m in TARGET_METRICS if any(c.metric == m for v in verdicts for c in v.checks)]
    headers = ["workload", "targets", "variant", "verdict", "goodput"]
    headers += [f"{TARGET_METRICS[m][0]} {TARGET_METRICS[m][1]}" for m in metrics]
    order = list(dict.fromkeys(v.workload for v in verdicts))
    rows = []
    previous = None
    for v in sorted(verdicts, key=lambda v: order.index(v.workload)):  # grouped by workload
        checks = {c.metric: c for c in v.checks}
        first = v.workload != previous
        previous = v.workload
        gp = v.goodput
        rows.append(
            [
                v.workload if first else "",
                v.targets.describe() if first else "",
                v.variant,
                v.status,
                "–" if gp is None else f"{percent(gp)} ({v.good}/{v.requests} req)",
                *[check_cell(checks.get(m), ci=ci) for m in metrics],
            ]
        )
    return headers, rows


def projection_table(projections: Sequence[Any]) -> Table:
    """``workbench project``: per variant the projected TTFT, time after the first token and e2e (95 %
    CI of the fitted lines) and the fitted slopes."""

    def est(e: Any) -> str:
        if e is None or e.value is None:
            return "–"
        exact = e.lo == e.hi == e.value  # known, not estimated (no decode step at one output token)
        ci = f" [{num(e.lo)}–{num(e.hi)}]" if e.lo is not None and e.hi is not None and not exact else ""
        return num(e.value) + ci

    headers = [
        "variant",
        "in tok",
        "out tok",
        "TTFT ms",
        "after TTFT ms",
        "e2e ms",
        "prefill ms/tok",
        "decode ms/tok",
    ]
    rows = [
        [
            p.variant,
            num(p.input_tokens),
            num(p.output_tokens),
            est(p.ttft),
            est(p.decode),
            est(p.e2e),
            f"{p.ttft_line.slope:.3g}" if p.ttft_line else "–",
            f"{p.decode_line.slope:.3g}" if p.decode_line else "–",
        ]
        for p in projections
    ]
    return headers, rows


#: a what-if's causes in words (``analysis.projection.Projection.causes``); ``{n}``: the length asked
_CAUSES = {
    "input-extrapolated": "input {n:,.0f} tokens is outside the measured {ranges} input tokens: extrapolated",
    "output-extrapolated": "output {n:,.0f} tokens is outside the measured {ranges} output tokens: extrapolated",
    "no-ttft-fit": "TTFT not projected: the inputs did not vary in length (run sweep-input)",
    "no-decode-fit": "decode not projected: the outputs did not vary in length (run sweep-output)",
    "ttft-not-positive": "TTFT not projected: the fitted line is at or below 0 ms at {n:,.0f} input tokens",
    "decode-not-positive": "decode not projected: the fitted line is at or below 0 ms at {n:,.0f} output tokens",
}


def projection_notes(projections: Sequence[Any]) -> list[str]:
    """The what-if's warnings, one per cause over every variant (not one per row): which variants it
    concerns, and their measured ranges (one range when they share it)."""
    by_cause: dict[str, list[tuple[str, str]]] = {}
    for p in projections:
        for kind, measured in p.causes:
            by_cause.setdefault(kind, []).append((p.variant, measured))
    lines = []
    everyone = len(projections)
    for kind, found in by_cause.items():
        n = (
            projections[0].input_tokens
            if kind.startswith(("input", "ttft", "no-ttft"))
            else projections[0].output_tokens
        )
        shared = len({r for _, r in found}) == 1
        ranges = found[0][1] if shared else "; ".join(f"{v} {r}" for v, r in found)
        text = _CAUSES.get(kind, kind).format(n=n, ranges=ranges)
        who = "every variant" if len(found) == everyone and everyone > 1 else ", ".join(v for v, _ in found)
        lines.append(f"{text} ({who})" if everyone > 1 or len(found) > 1 else text)
    return lines
