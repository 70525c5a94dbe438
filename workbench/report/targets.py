"""Experience targets as tables and lines: the verdicts per variant × workload (the CLI's ``show`` and
``compare``, the Markdown and HTML report), each check and verdict in words, "what would it take"
(:func:`target_advice`) and the what-if projection of ``workbench project``. Built from
:mod:`workbench.analysis.targets` / :mod:`workbench.analysis.projection`; no Qt."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from workbench.analysis.projection import Projection, ProjectionCause
from workbench.analysis.stats import Estimate
from workbench.analysis.targets import Check, TargetGap, TargetMiss, Verdict
from workbench.core.metrics import METRIC_TABLE
from workbench.formatting import (
    fixed,
    fmt,
    interval,
    meaningful,
    num,
    percent,
    significant,
    span,
    times,
    tokens,
)
from workbench.report.model import JSONObject, TableRows
from workbench.spec.targets import QUALITY_TARGETS, TARGET_METRICS, Targets

__all__ = [
    "TARGETS_NOTE",
    "check_cell",
    "check_label",
    "check_text",
    "limit_text",
    "measured_text",
    "metric_names",
    "projection_data",
    "projection_notes",
    "projection_table",
    "target_advice",
    "targets_table",
    "verdict_cell",
    "verdict_short",
]


TARGETS_NOTE = (
    "Each target holds when its percentile of the requests (inverted CDF: at least that share of them) "
    "meets it: measured value [bootstrap 95 % CI], + headroom / − over the limit. Goodput: the share of "
    "requests (failed ones included) that met every target (n/N req: n of N requests). Targets: the workload's own in the spec, "
    "else the built-in defaults (docs/targets.md)."
)


def _quality(metric: str, value: float) -> str:
    """A quality figure: the same-top share as ``93.1%``, a KLD at three significant digits."""
    return percent(value, 1) if metric == "same_top_min" else significant(value)


# -- a check and a verdict in words ---------------------------------------------------------------------


def check_label(check: Check) -> str:
    """The target's name: ``TTFT p90``, ``KLD mean``, ``same top``."""
    if check.metric in QUALITY_TARGETS:
        return "KLD mean" if check.metric == "kld_max" else "same top"
    return f"{TARGET_METRICS[check.metric].label} p{num(check.percentile)}"


def limit_text(check: Check) -> str:
    """The limit: ``≤ 500 ms``, ``≥ 20 tok/s``, ``≥ 90%``."""
    measure = TARGET_METRICS[check.metric]
    if check.metric == "same_top_min":
        return f"{measure.bound} {percent(check.target)}"
    return f"{measure.bound} {num(check.target)} {measure.unit}".rstrip()


def measured_text(check: Check, ci: bool = True) -> str:
    """The measured percentile with its unit and (``ci``) its bootstrap CI: ``412 ms [380–450]``."""
    est, unit = check.measured, TARGET_METRICS[check.metric].unit
    if est.value is None:
        return "no data"
    if check.metric in QUALITY_TARGETS:
        bounds = interval(est.lo, est.hi, lambda v: _quality(check.metric, v)) if ci else ""
        return f"{_quality(check.metric, est.value)}{bounds}"
    return f"{num(est.value)} {unit}" + (interval(est.lo, est.hi, num) if ci else "")


def check_text(check: Check) -> str:
    """e.g. ``TTFT p90 412 ms [380–450] vs ≤ 500 ms: met, 18% headroom``."""
    label, limit = check_label(check), limit_text(check)
    if check.status == "no data" and check.metric in QUALITY_TARGETS:
        return f"{label} vs {limit}: no data (the quality pass did not score this variant here)"
    if check.status == "no data":
        return f"{label} vs {limit}: no data (this variant has no {TARGET_METRICS[check.metric].label})"
    margin = check.margin or 0.0
    how = f"{percent(margin)} headroom" if margin >= 0 else f"{percent(-margin)} over"
    if check.higher_is_better and margin < 0:
        how = f"{percent(-margin)} short"
    unsure = " (the CI straddles the target)" if check.confident is False else ""
    return f"{label} {measured_text(check)} vs {limit}: {check.status}, {how}{unsure}"


def verdict_short(verdict: Verdict) -> str:
    """e.g. ``met 2/2 · goodput 90%`` or ``missed TTFT · goodput 40%``."""
    met = sum(c.status == "met" for c in verdict.checks)
    head = (
        f"met {met}/{len(verdict.checks)}"
        if verdict.status == "met"
        else "missed " + metric_names(verdict.missed)
        if verdict.status == "missed"
        else f"met {met}/{len(verdict.checks)}, no data for the rest"
    )
    gp = verdict.goodput
    return head + (f" · goodput {percent(gp)}" if gp is not None else "")


def metric_names(checks: Sequence[Check]) -> str:
    """The targets' metrics by name: ``TTFT, TPOT``."""
    return ", ".join(TARGET_METRICS[c.metric].label for c in checks)


def check_cell(check: Check | None, *, ci: bool = True) -> str:
    """One target of one variant × workload: ``✓ 412 [380–450] +18%`` / ``✗ 1,180 −136%``."""
    if check is None:
        return ""
    if check.status == "no data":
        return "no data"
    est = check.measured
    text = ("✓ " if check.status == "met" else "✗ ") + num(est.value)
    if ci:
        text += interval(est.lo, est.hi, num)
    margin = check.margin
    if margin is not None:
        text += f" {'+' if margin >= 0 else '−'}{percent(abs(margin))}"
    if check.confident is False:
        text += "?"
    return text


def verdict_cell(verdict: Verdict | None) -> str:
    """``met`` / ``missed`` / ``unknown``, for a table."""
    return "" if verdict is None else verdict.status


def targets_table(verdicts: Sequence[Verdict], *, ci: bool = True) -> TableRows:
    """One row per variant × workload with targets: the workload's targets, the verdict, the goodput,
    and a column per targeted metric."""
    metrics = [m for m in TARGET_METRICS if any(c.metric == m for v in verdicts for c in v.checks)]
    headers = ["workload", "targets", "variant", "verdict", "goodput"]
    headers += [f"{TARGET_METRICS[m].label} {TARGET_METRICS[m].unit}" for m in metrics]
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


def projection_table(projections: Sequence[Projection]) -> TableRows:
    """``workbench project``: per variant the projected TTFT, time after the first token and e2e (95 %
    CI of the fitted lines) and the fitted slopes."""

    def est(e: Estimate | None) -> str:
        if e is None or e.value is None:
            return "–"
        exact = e.lo == e.hi == e.value  # known, not estimated (no decode step at one output token)
        return num(e.value) + ("" if exact else interval(e.lo, e.hi, num))

    headers = [
        "variant",
        *(
            METRIC_TABLE[key].header
            for key in ("input_tokens", "output_tokens", "ttft_ms", "decode_phase_ms", "e2e_ms")
        ),
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
            significant(p.ttft_line.slope) if p.ttft_line else "–",
            significant(p.decode_line.slope) if p.decode_line else "–",
        ]
        for p in projections
    ]
    return headers, rows


#: a what-if's causes in words (``analysis.projection.Projection.causes``); ``{n}``: the length asked
#: (written by :func:`~workbench.formatting.tokens`), ``{ranges}``: the measured lengths
_CAUSES = {
    "input-extrapolated": "input {n} tokens is outside the measured {ranges} input tokens: extrapolated",
    "output-extrapolated": "output {n} tokens is outside the measured {ranges} output tokens: extrapolated",
    "no-ttft-fit": "TTFT not projected: the inputs did not vary in length (run sweep-input)",
    "no-decode-fit": "decode not projected: the outputs did not vary in length (run sweep-output)",
    "ttft-not-positive": "TTFT not projected: the fitted line is at or below 0 ms at {n} input tokens",
    "decode-not-positive": "decode not projected: the fitted line is at or below 0 ms at {n} output tokens",
}


#: the same per projection (a row's ``notes`` in ``workbench project --json``)
_ROW_CAUSES = {
    "input-extrapolated": "input {n} tokens is outside the measured {ranges}: extrapolated",
    "output-extrapolated": "output {n} tokens is outside the measured {ranges}: extrapolated",
    "no-ttft-fit": "TTFT: the inputs did not vary in length (run sweep-input)",
    "no-decode-fit": "decode: the outputs did not vary in length (run sweep-output)",
    "ttft-not-positive": "TTFT: the fitted line is at or below 0 ms at {n} tokens",
    "decode-not-positive": "decode: the fitted line is at or below 0 ms at {n} output tokens",
}


def _range(cause: ProjectionCause) -> str:
    """The measured lengths a projection lies outside of: ``120–980``; ``""`` for other causes."""
    return "" if cause.measured is None else span(cause.measured[0], cause.measured[1], lambda v: fmt(v, 0))


def _length(p: Projection, cause: ProjectionCause) -> float:
    """The length a cause is about: the input's for TTFT, the output's for decode."""
    return p.input_tokens if cause.kind.startswith(("input", "ttft", "no-ttft")) else p.output_tokens


def projection_data(p: Projection) -> JSONObject:
    """One projection as ``workbench project --json`` writes it: its figures and its notes in words."""
    notes = [_ROW_CAUSES[c.kind].format(n=tokens(_length(p, c)), ranges=_range(c)) for c in p.causes]
    return meaningful({**p.to_dict(), "notes": notes})


def projection_notes(projections: Sequence[Projection]) -> list[str]:
    """The what-if's warnings, one per cause over every variant (not one per row): which variants it
    concerns, and their measured ranges (one range when they share it)."""
    by_cause: dict[str, list[tuple[str, str]]] = {}
    for p in projections:
        for cause in p.causes:
            by_cause.setdefault(cause.kind, []).append((p.variant, _range(cause)))
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
        text = _CAUSES.get(kind, kind).format(n=tokens(n), ranges=ranges)
        who = "every variant" if len(found) == everyone and everyone > 1 else ", ".join(v for v, _ in found)
        lines.append(f"{text} ({who})" if everyone > 1 or len(found) > 1 else text)
    return lines


# -- what would it take -------------------------------------------------------------------------------


def target_advice(gaps: Mapping[str, TargetGap]) -> dict[str, list[str]]:
    """Per workload with targets (:func:`workbench.analysis.targets.what_it_takes`): first who meets
    them, then per target the reference variant misses the phase that misses it, what the run's
    other variants (levers) reach, and the predicted length at which it would hold."""
    out: dict[str, list[str]] = {}
    for workload, gap in gaps.items():
        lines = [_who_meets(gap.verdicts, gap.targets)]
        for miss in gap.misses:
            lines.append(_miss_line(miss))
            lines.append(_levers_line(miss))
            prediction = _length_line(miss)
            if prediction:
                lines.append(prediction)
        out[workload] = lines
    return out


def _who_meets(group: Sequence[Verdict], targets: Targets) -> str:
    meets = [v for v in group if v.status == "met"]
    parts = [f"Targets ({targets.source}): {targets.describe()}."]
    if meets:
        parts.append(
            "Met by "
            + ", ".join(f"{v.variant} (goodput {percent(v.goodput)})" for v in meets if v.goodput is not None)
        )
    else:
        parts.append("No variant meets every target")
    misses = [v for v in group if v.status == "missed"]
    if misses:
        parts[-1] += "; missed by " + ", ".join(f"{v.variant} ({metric_names(v.missed)})" for v in misses)
    unknown = [v.variant for v in group if v.status == "unknown"]
    if unknown:
        parts[-1] += "; no data to judge " + ", ".join(unknown)
    return " ".join(parts[:1]) + " " + parts[1] + "."


def _phase_word(miss: TargetMiss) -> str:
    if miss.phase == "prefill":
        return "prefill-bound (TTFT is the prefill)"
    if miss.phase == "decode":
        return "decode-bound (the time per token is the decode)"
    split = miss.split
    if split is None:
        return "e2e: both phases"
    return (
        f"{split.bound}-bound: prefill {num(split.prefill_ms)} ms + decode {num(split.decode_ms)} ms "
        f"(medians, prefill {percent(split.prefill_share)})"
    )


def _miss_line(miss: TargetMiss) -> str:
    check = miss.check
    return (
        f"{miss.variant}: {check_label(check)} {measured_text(check)} vs {limit_text(check)} "
        f"({fixed(miss.factor, 2)} times the limit): {_phase_word(miss)}."
    )


def _levers_line(miss: TargetMiss) -> str:
    """How far each other variant of the run gets on this target: its own measured percentile."""
    parts = []
    for reach in miss.levers:
        lever = reach.lever
        name = f"{reach.variant} ({lever})" if lever and lever != reach.variant else reach.variant
        verdict = "meets it" if reach.check.status == "met" else "still misses"
        gain = f" ({times(reach.speedup)})" if reach.speedup is not None else ""
        parts.append(f"{name} {measured_text(reach.check, ci=False)}{gain}, {verdict}")
    if not parts:
        return "No other variant was measured on this workload: add variants with levers for that phase."
    return "Levers measured here: " + "; ".join(parts) + "."


def _length_line(miss: TargetMiss) -> str | None:
    """Prediction: the input (TTFT) or output (e2e) length at which the target would hold."""
    found, label, target = miss.prediction, check_label(miss.check), miss.check.target
    if found is None:
        return None
    t_line, d_line = found.ttft_line, found.decode_line
    if found.kind == "input" and t_line is not None:
        fit_text = f"fit TTFT ≈ {num(t_line.intercept)} ms + {num(t_line.slope)} ms × input tokens"
        if found.input_limit is None:
            return (
                f"Prediction: no input length brings {label} under {num(target)} ms "
                f"({fit_text}): it needs a prefill lever or a faster device."
            )
        return (
            f"Prediction: {label} would hold with inputs up to ~{tokens(found.input_limit)} tokens (now up "
            f"to {tokens(found.inputs_now or 0.0)} at p{num(miss.check.percentile)}; {fit_text})."
        )
    if found.kind == "e2e" and t_line is not None and d_line is not None:
        fit_text = (
            f"fits: TTFT {num(t_line.slope)} ms per input token, {num(d_line.slope)} ms per output token"
        )
        options = []
        if found.output_limit is not None:
            options.append(
                f"cap the output at ~{tokens(found.output_limit)} tokens (now up to "
                f"{tokens(found.outputs_now or 0.0)})"
            )
        if found.input_limit is not None:
            options.append(
                f"keep the input under ~{tokens(found.input_limit)} tokens (now up to "
                f"{tokens(found.inputs_now or 0.0)})"
            )
        if not options:
            return (
                f"Prediction: no input or output length alone brings {label} under "
                f"{num(target)} ms ({fit_text}): it needs a lever."
            )
        return f"Prediction: {label} would hold if you " + " or ".join(options) + f" ({fit_text})."
    if found.kind == "decode" and d_line is not None:
        return (
            f"Prediction: lengths do not fix this: decode costs {num(d_line.slope)} ms per output token "
            "at every output length in the fit; it needs a decode lever (speculative decoding, "
            "quantization, batching) or a faster device."
        )
    return None
