"""One formatter per kind of figure, one metric table.

Every number a person reads is written by :mod:`workbench.formatting` (ratio, interval, percent,
duration, count, memory size...), and every metric's label, unit and direction is defined once, in
:mod:`workbench.core.metrics`. The writers are tested here on their edge values (0, negative,
infinite, NaN, very large and very small, one-sided intervals); the guard at the end reads the source
of ``workbench/`` and ``strategies/`` and fails where a module formats a figure itself (an f-string
format spec, ``%`` formatting, ``round()`` in text, an interval or a range written inline, a duration
formatter of its own) or defines a metric's label a second time.
"""

from __future__ import annotations

import ast
import math
import re
from itertools import pairwise
from pathlib import Path

import pytest

from workbench.core.metrics import METRIC_TABLE, TARGET_KEYS, TRIAL_METRICS, metric
from workbench.formatting import (
    chart_value,
    ci_suffix,
    count,
    duration,
    fixed,
    fmt,
    interval,
    kld_text,
    ms_text,
    num,
    percent,
    plus_minus,
    significant,
    size,
    spaced_percent,
    span,
    times,
    tokens,
    written_percent,
)

NAN, INF = math.nan, math.inf
ROOT = Path(__file__).resolve().parent.parent


# -- the writers, kind by kind ------------------------------------------------------------------------


def test_a_duration_reads_as_a_person_says_it():
    assert [duration(s) for s in (0, 48, 48.4, 89.4, 90, 100, 300, 750, 6000, 14400.5)] == [
        "0 s",
        "48 s",
        "48 s",
        "89 s",
        "1.5 min",
        "1.7 min",
        "5 min",
        "12.5 min",
        "100 min",
        "240 min",
    ]
    # under 10 s a fraction keeps two significant digits rather than rounding to "0 s"
    assert (duration(2.5), duration(0.25), duration(0.004), duration(7.0)) == (
        "2.5 s",
        "0.25 s",
        "0.004 s",
        "7 s",
    )
    assert (duration(-48), duration(-300)) == ("-48 s", "-5 min")
    assert (duration(None), duration(NAN), duration(INF), duration(-INF)) == ("–", "–", "∞", "−∞")
    assert duration(1e9) == "16,666,667 min"


def test_a_measured_duration_keeps_its_decimals_and_a_countdown_its_seconds():
    assert (duration(2.1, 2), duration(0.0, 2), duration(12.345, 1), duration(1234.5, 1)) == (
        "2.10 s",
        "0.00 s",
        "12.3 s",
        "1,234.5 s",
    )
    assert [duration(s, clock=True) for s in (0, 0.4, 59.4, 59.6, 65, 3599, 3600, 7261, -70)] == [
        "0 s",
        "0 s",
        "59 s",
        "1 min 00 s",
        "1 min 05 s",
        "59 min 59 s",
        "1 h 00 min",
        "2 h 01 min",
        "-1 min 10 s",
    ]
    assert duration(None, clock=True) == "–" and duration(INF, clock=True) == "∞"


def test_an_interval_follows_its_value_and_is_shown_whole_or_not_at_all():
    assert interval(380, 450) == " [380–450]"  # num by default
    assert interval(0.0123, 0.5, lambda v: percent(v, 1)) == " [1.2%–50.0%]"
    assert interval(-1.5, 2.25) == " [-1.5–2.25]"
    assert interval(0, 0) == " [0–0]"
    assert interval(1.2e9, 3.4e9) == " [1,200,000,000–3,400,000,000]"
    assert interval(1e-7, 2e-7) == " [1e-07–2e-07]"
    # one-sided: an unbounded end is infinite, and reads so
    assert interval(1700, INF, tokens) == " [1,700–∞]"
    assert interval(-INF, 0.5, lambda v: fixed(v, 2)) == " [−∞–0.50]"
    # an unknown end: no half interval
    for lo, hi in ((None, 2.0), (1.0, None), (None, None), (NAN, 2.0), (1.0, NAN)):
        assert interval(lo, hi) == ""
    assert (
        ci_suffix(1.4, 1.88) == " [1.40–1.88]"
        and ci_suffix(1234.5, 1301, 1, grouped=True) == " [1,234.5–1,301.0]"
    )
    assert ci_suffix(1.21, INF) == " [1.21–∞]" and ci_suffix(None, 1.0) == ""


def test_a_range_reads_as_one_value_when_its_ends_read_the_same():
    assert span(1046, 1246, tokens) == "1,046–1,246"
    assert span(0.38, 0.452, percent) == "38%–45%"
    assert span(0.381, 0.384, percent) == "38%"
    assert span(1.2, 1.8, lambda v: fixed(v, 2), "x") == "1.20–1.80x"
    assert span(1.204, 1.2049, lambda v: fixed(v, 2), "x") == "1.20x"
    assert span(-2, 3) == "-2–3" and span(0, 0) == "0"
    assert span(1, INF) == "1–∞"


def test_ratios_percentages_and_shares():
    assert (times(1.234), times(4.04, 1), times(0), times(-0.5), times(None)) == (
        "1.23x",
        "4.0x",
        "0.00x",
        "-0.50x",
        "–",
    )
    assert (times(INF), times(NAN), times(1e6)) == ("∞x", "–", "1000000.00x")
    assert (percent(0.384), percent(0), percent(-0.05, signed=True), percent(None)) == (
        "38%",
        "0%",
        "-5%",
        "",
    )
    assert (percent(INF), percent(NAN), percent(1e-9, 2), percent(12.5)) == ("∞%", "", "0.00%", "1250%")
    assert (plus_minus(0.0624), plus_minus(0), plus_minus(None), plus_minus(NAN), plus_minus(INF)) == (
        "±6.2%",
        "±0.0%",
        "",
        "",
        "±∞%",
    )
    assert [spaced_percent(v) for v in (0.31, 0, -0.2, 1.0, 1.01, INF, None, NAN)] == [
        "31 %",
        "0 %",
        "0 %",
        "100 %",
        "> 100 %",
        "> 100 %",
        "–",
        "–",
    ]
    assert (written_percent(0.025), written_percent(0.0001), written_percent(1), written_percent(INF)) == (
        "2.5%",
        "0.01%",
        "100%",
        "∞%",
    )


def test_counts_and_plain_numbers():
    assert (count(48.4), count(0), count(-3.6), count(2.5), count(1e12)) == (
        "48",
        "0",
        "-4",
        "2",
        "1000000000000",
    )
    # grouped: an int exactly, however large (a float would round 2**63 - 1 up)
    assert count(2**63 - 1, grouped=True) == "9,223,372,036,854,775,807"
    assert (tokens(1023.6), tokens(0), tokens(-1500), tokens(None), count(None)) == (
        "1,024",
        "0",
        "-1,500",
        "–",
        "–",
    )
    for writer in (count, tokens, num, chart_value, significant, lambda v: fmt(v, 1), lambda v: fixed(v, 2)):
        assert (writer(INF), writer(-INF), writer(NAN)) == ("∞", "−∞", "–")
    assert (num(0), num(-12.34), num(1e12), num(1e-9), num(None)) == (
        "0",
        "-12.3",
        "1,000,000,000,000",
        "1e-09",
        "–",
    )
    assert (fmt(0, 0), fmt(-1234.56, 1), fmt(None)) == ("0", "-1,234.6", "–")
    assert (kld_text(0), kld_text(0.003752), kld_text(None), kld_text(NAN), kld_text(INF)) == (
        "0",
        "0.00375",
        "",
        "",
        "∞",
    )
    assert (ms_text(12.34), ms_text(0), ms_text(NAN), ms_text(INF)) == ("12.3 ms", "0.0 ms", "–", "∞ ms")


def test_memory_sizes():
    assert (size(1234.4), size(0), size(None), size(NAN)) == ("1,234 MB", "0 MB", "–", "–")
    assert (size(3300, "GB"), size(512, "GB"), size(2e6, "GB")) == ("3.2 GB", "0.5 GB", "1,953.1 GB")
    assert size(INF, "GB") == "∞ GB"
    with pytest.raises(ValueError, match="MB or GB"):
        size(1, "TB")


# -- the metric table ---------------------------------------------------------------------------------


def test_one_metric_table_behind_the_analysis_and_the_targets():
    from workbench.analysis.summary import METRICS
    from workbench.spec.targets import TARGET_METRICS

    assert list(METRICS) == list(TRIAL_METRICS)
    assert all(METRICS[k] is METRIC_TABLE[k] for k in METRICS)
    assert list(TARGET_METRICS) == list(TARGET_KEYS)
    assert all(TARGET_METRICS[k] is METRIC_TABLE[TARGET_KEYS[k]] for k in TARGET_METRICS)
    assert metric("kld_max") is METRIC_TABLE["kld_mean"] and metric("ttft_ms") is METRIC_TABLE["ttft_ms"]
    ttft, decode = METRIC_TABLE["ttft_ms"], METRIC_TABLE["decode_tokens_per_s"]
    assert (ttft.direction, ttft.bound, ttft.header) == ("lower", "≤", "TTFT ms")
    assert (decode.direction, decode.bound, decode.header) == ("higher", "≥", "decode tok/s")
    assert METRIC_TABLE["same_top"].header == "same top"
    label, unit, higher = ttft  # still a (label, unit, higher_is_better) tuple for older readers
    assert (label, unit, higher) == ("TTFT", "ms", False)


def test_every_trial_metric_is_a_trials_column():
    from workbench.store import TrialRecord

    fields = set(TrialRecord.__dataclass_fields__)
    # decode_phase_ms is derived (e2e − TTFT) by analysis.paired.metric_value; the rest are columns
    assert set(TRIAL_METRICS) - fields <= {"decode_phase_ms"}, set(TRIAL_METRICS) - fields


def test_the_tables_read_their_metric_headers_from_the_table():
    from workbench.report.columns import COLUMNS

    for key in ("input_tokens", "ttft_ms", "tpot_ms", "itl_p90_ms", "e2e_ms", "peak_memory_mb"):
        assert COLUMNS[key].short == COLUMNS[key].long == METRIC_TABLE[key].header
    assert COLUMNS["decode_tokens_per_s"].long == METRIC_TABLE["decode_tokens_per_s"].header


def test_a_target_describes_itself_with_the_shared_writers():
    from workbench.spec.targets import parse_targets

    t = parse_targets(
        {"ttft_ms": 1500, "decode_tokens_per_s": 12.5, "same_top_min": 0.9, "percentile": 99.5}, "w"
    )
    assert t.describe() == "TTFT ≤ 1,500 ms, decode ≥ 12.5 tok/s, same top ≥ 90% at p99.5"
    # a limit of 1,234.5 ms read "1.23e+03" with the spec's own three significant digits
    assert parse_targets({"e2e_ms": 1234.5}, "w").describe() == "e2e ≤ 1,234 ms at p90"


# -- the guard: nothing formats a figure itself ---------------------------------------------------------

#: the modules that may: the formatters themselves and the metric table
OWNERS = {"workbench/formatting.py", "workbench/core/metrics.py"}

#: formatting that is not a figure for people to read, each with its reason
ALLOWED = {
    ("workbench/gui/app.py", "time.time():.6f"): "a timestamp the startup probe parses, not read by people",
}

#: a format spec that writes a number: precision, grouping or a float/percent type (``:.1f``, ``:,``,
#: ``:.0%``, ``:g``, ``:+.2f``); not a zero-padded identifier (``:04d``)
_NUMBER_SPEC = re.compile(r"^[+\- ]?[,_]?(\.\d+)?[fFgGeEn%]?$")
#: the same inside a ``str.format`` template
_TEMPLATE_SPEC = re.compile(r"\{\w*(\[\w+\])?:[+\- ]?[,_]?(\.\d+)?[fFgGeEn%]?\}")
#: printf-style number formatting
_PRINTF = re.compile(r"%[-+ 0#]*\d*(\.\d+)?[dfFgGeE]")
#: a duration written after its number: " s", " min", " h"
_DURATION_UNIT = re.compile(r"^ (s|min|h)\b")
#: a function of its own that writes durations
_DURATION_DEF = re.compile(r"(eta|minutes|duration|seconds|elapsed)", re.IGNORECASE)


def _text(node: ast.AST | None) -> str:
    return node.value if isinstance(node, ast.Constant) and isinstance(node.value, str) else ""


def _string(node: ast.AST) -> str | None:
    return node.value if isinstance(node, ast.Constant) and isinstance(node.value, str) else None


def _spec(value: ast.FormattedValue) -> str | None:
    """A formatted value's spec, when it is plain text (``.1f``); None when it is dynamic or absent."""
    spec = value.format_spec
    if not isinstance(spec, ast.JoinedStr) or not all(isinstance(v, ast.Constant) for v in spec.values):
        return None
    return "".join(_text(v) for v in spec.values)


def _called(node: ast.AST, name: str) -> bool:
    return isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == name


def _metric_label_strings() -> set[tuple[str, str]]:
    return {(m.label, m.unit) for m in METRIC_TABLE.values()}


def strays(root: Path) -> list[str]:
    """Every place under ``root``'s ``workbench/`` and ``strategies/`` that formats a figure itself or
    defines a metric's label again, as ``path:line: what``."""
    labels = _metric_label_strings()
    headers = {m.header for m in METRIC_TABLE.values() if m.unit}
    found = []
    for path in sorted([*root.glob("workbench/**/*.py"), *root.glob("strategies/**/*.py")]):
        rel = path.relative_to(root).as_posix()
        if rel in OWNERS:
            continue
        source = path.read_text(encoding="utf-8")
        lines = source.splitlines()

        def report(node: ast.AST, what: str, rel: str = rel, lines: list[str] = lines) -> None:
            line = lines[node.lineno - 1] if hasattr(node, "lineno") else ""
            if not any(rel == p and snippet in line for p, snippet in ALLOWED):
                found.append(f"{rel}:{getattr(node, 'lineno', '?')}: {what}: {line.strip()}")

        for node in ast.walk(ast.parse(source, rel)):
            if isinstance(node, ast.JoinedStr):
                parts = node.values
                for i, part in enumerate(parts):
                    if not isinstance(part, ast.FormattedValue):
                        continue
                    spec = _spec(part)
                    if spec and _NUMBER_SPEC.match(spec):
                        report(node, f"number format ':{spec}'")
                    if _called(part.value, "round"):
                        report(node, "round() in text")
                    after = _text(parts[i + 1]) if i + 1 < len(parts) else ""
                    if after == "–" and i + 2 < len(parts) and isinstance(parts[i + 2], ast.FormattedValue):
                        report(node, "an interval or a range written inline")
                    if _DURATION_UNIT.match(after) and not _called(part.value, "duration"):
                        report(node, f"a duration written inline ('{after[:4]}')")
                    if after.startswith(("%", " %")):
                        report(node, "a percentage written inline (percent, spaced_percent)")
            elif isinstance(node, ast.Constant) and isinstance(node.value, str):
                if _TEMPLATE_SPEC.search(node.value):
                    report(node, "number format in a template")
            elif isinstance(node, ast.List):  # a table's headers
                for item in node.elts:
                    if _string(item) in headers:
                        report(
                            node, f"metric header {_string(item)!r} written out (METRIC_TABLE[...].header)"
                        )
            elif (
                isinstance(node, ast.BinOp)
                and isinstance(node.op, ast.Mod)
                and _PRINTF.search(_text(node.left))
            ):
                report(node, "%-formatting of a number")
            elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                returns = node.returns
                if (
                    _DURATION_DEF.search(node.name)
                    and isinstance(returns, ast.Name | ast.Constant)
                    and "str" in ast.unparse(returns)
                ):
                    report(node, f"a duration formatter of its own ({node.name})")
            if isinstance(node, ast.Tuple | ast.Call):
                items = node.elts if isinstance(node, ast.Tuple) else node.args
                texts = [_string(e) for e in items]
                if any(pair in labels for pair in pairwise(texts)):
                    report(node, "a metric's label and unit defined again")
                if _called(node, "Column") and any(_string(a) in headers for a in items[1:3]):
                    report(node, "a column's metric header written out (METRIC_TABLE[...].header)")
    return found


def test_no_module_formats_a_figure_itself_or_defines_a_metric_again():
    found = strays(ROOT)
    assert not found, "format these with workbench.formatting / read workbench.core.metrics:\n" + "\n".join(
        found
    )


def test_the_guard_finds_each_kind_of_stray(tmp_path):
    module = tmp_path / "workbench" / "stray.py"
    module.parent.mkdir()
    module.write_text(
        "def _minutes(seconds: float) -> str:\n"
        '    return f"{seconds:.0f} s" if seconds < 90 else f"{seconds / 60:.1f} min"\n'
        "def ci(lo, hi):\n"
        '    return f" [{lo}–{hi}]"\n'
        'share = f"{0.5:.0%} of {round(2.55, 1)}"\n'
        'TEMPLATE = "input {n:,.0f} tokens"\n'
        'old = "%.2f" % 1.0\n'
        'METRICS = {"ttft_ms": ("TTFT", "ms", False)}\n'
        'HEADERS = ["variant", "TTFT ms"]\n'
        'COLUMN = Column("e2e_ms", "e2e ms", "e2e ms", "e2e", None)\n'
        'eta = f"{n} s left"\n'
        'share = f"{count(x)} % of steps"\n',
        encoding="utf-8",
    )
    found = "\n".join(strays(tmp_path))
    for what in (
        "a duration formatter of its own (_minutes)",
        "number format ':.0f'",
        "number format ':.1f'",
        "number format ':.0%'",
        "round() in text",
        "an interval or a range written inline",
        "number format in a template",
        "%-formatting of a number",
        "a metric's label and unit defined again",
        "metric header 'TTFT ms' written out",
        "a column's metric header written out",
        "a duration written inline (' s l')",
        "a percentage written inline",
    ):
        assert what in found, f"{what!r} not found in:\n{found}"
    # and the formatters themselves are left alone
    (tmp_path / "workbench" / "formatting.py").write_text('x = f"{1:.2f}"\n', encoding="utf-8")
    assert "formatting.py" not in "\n".join(strays(tmp_path))
