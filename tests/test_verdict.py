"""The verdict: per workload the fastest variant end to end, its costs, how far to trust it — the same
in `show`, `show --json`, the exported report and the GUI (the report model behind all of them)."""

from __future__ import annotations

import dataclasses
import json
import re

from click.testing import CliRunner

from workbench.analysis.paired import PairedEstimate
from workbench.analysis.quality import GroupQuality, QualityFigures
from workbench.analysis.stats import Estimate
from workbench.analysis.summary import GroupSummary
from workbench.analysis.verdict import Costs, trust, workload_verdicts
from workbench.cli import cli
from workbench.report.model import (
    Bullets,
    Report,
    Section,
    Table,
    Text,
    render_html,
    render_markdown,
    render_text,
)
from workbench.report.run_report import longer_text, share_text, verdict_section
from workbench.testing.helpers import text_section


def _verdict_section(rows, baseline):
    return verdict_section(workload_verdicts(rows, baseline), trust(rows, baseline), baseline)


def _summary(
    variant, e2e=None, ttft=None, match=1.0, workload="chat", quality=None, e2e_ms=None, memory_mb=None
):
    metrics = {"e2e_ms": Estimate(e2e_ms, n=4), "peak_memory_mb": Estimate(memory_mb, n=4)}
    return GroupSummary(
        variant,
        workload,
        4,
        0,
        metrics=metrics,
        prompts=2,
        speedup_e2e=e2e,
        speedup_ttft=ttft,
        matches_baseline=match if e2e is not None else None,
        quality=quality,
    )


def _scored(variant, kld_mean, same_top):
    """A variant's quality on a workload, scored with these figures (the rest: nothing differs)."""
    figures = QualityFigures(
        variant, "chat", "output", 2, 40, kld_mean, None, kld_mean, kld_mean, kld_mean, same_top, None,
        0.0, 0.0, 1.0, 1.0, 1.0, None, None, 0,
    )  # fmt: skip
    return GroupQuality("scored", None, figures)


def _est(value, lo=None, hi=None, mde=None):
    return PairedEstimate(value, lo, hi, 4, mde=mde)


def test_the_fastest_variant_wins_with_its_costs_and_the_close_ones():
    rows = [
        _summary("baseline"),
        _summary(
            "int4",
            _est(1.62, 1.50, 1.75),
            _est(0.68, 0.6, 0.7),
            match=0.0,
            quality=_scored("int4", 0.41, 0.69),
        ),
        _summary("spec", _est(1.65, 1.55, 1.80), _est(1.06, 1.0, 1.1)),
        _summary("lookup", _est(1.20, 1.1, 1.3)),
    ]
    (v,) = workload_verdicts(rows, "baseline")
    assert v.best.variant == "spec" and v.beats is True and v.interval
    assert [s.variant for s in v.close] == ["int4"]  # 1.62 lies inside spec's CI: the data cannot order them
    assert v.costs == Costs()  # same output, TTFT not slower
    line = text_section(
        render_text(Report("t", [], [_verdict_section(rows, "baseline")]), header=False), "Verdict"
    )
    # the one as fast says what it costs: its slower first token, its outputs, its KLD
    assert (
        "chat: spec 1.65x [1.55–1.80]* e2e — same output; as fast: int4 (TTFT 47% longer, "
        "0% of outputs identical, KLD 0.41)"
    ) in " ".join(line.split())
    # the lossy one, when it wins: its slower first token and what it costs in quality
    rows[2] = dataclasses.replace(rows[2], speedup_e2e=_est(1.1, 1.0, 1.2))
    (v,) = workload_verdicts(rows, "baseline")
    costs = {name for name, value in vars(v.costs).items() if value is not None}
    assert v.best.variant == "int4" and costs == {"ttft", "output", "quality"}
    text = render_text(Report("t", [], [_verdict_section(rows, "baseline")]), header=False)
    assert "int4 1.62x [1.50–1.75]* e2e — TTFT 47% longer, 0% of outputs identical, KLD 0.41" in text


def test_one_repetition_says_there_is_no_interval_and_how_to_get_one():
    rows = [_summary("baseline"), _summary("fast", _est(1.8))]
    text = render_text(Report("t", [], [_verdict_section(rows, "baseline")]), header=False)
    assert "fast 1.80x e2e" in text
    assert 'One repetition: no interval — run with `repetitions = 3` (or "auto")' in text
    t = trust(rows, "baseline")
    assert t.intervals is False and t.mde is None


def test_a_wide_interval_says_how_to_narrow_it_unless_the_run_already_repeated_until_narrow():
    from workbench.analysis.verdict import Trust
    from workbench.report.run_report import AUTO_HINT, trust_lines

    def first(mde, auto=False):
        return trust_lines(Trust(3, True, mde, 0, False, None, "interleaved", auto=auto))[0]

    assert first((0.06, 0.48)).endswith(AUTO_HINT)  # can't see a 20 % change: say how to
    assert AUTO_HINT not in first((0.03, 0.08))  # sees the changes most levers make
    assert AUTO_HINT not in first((0.06, 0.48), auto=True)  # "auto" ran: its note says how it ended


def test_no_variant_beats_the_baseline_and_no_detectable_difference():
    rows = [_summary("baseline"), _summary("slow", _est(0.8, 0.7, 0.9))]
    (v,) = workload_verdicts(rows, "baseline")
    assert v.beats is False
    text = render_text(Report("t", [], [_verdict_section(rows, "baseline")]), header=False)
    assert "baseline stays fastest: the best variant, slow, is 0.80x [0.70–0.90]* e2e" in text
    rows = [_summary("baseline"), _summary("same", _est(1.02, 0.95, 1.09, mde=0.06))]
    (v,) = workload_verdicts(rows, "baseline")
    assert v.beats is None
    text = render_text(Report("t", [], [_verdict_section(rows, "baseline")]), header=False)
    assert "same 1.02x [0.95–1.09] e2e (no detectable difference)" in text
    assert "smallest e2e change it can detect (MDE) ±6%" in text


def test_time_ratios_are_written_as_times_and_shares_agree_with_their_label():
    assert longer_text(0.68) == "47% longer" and longer_text(0.3) == "3.3 times as long"
    assert share_text(0.405, "balanced") == "40.5%"  # the rule: decode-heavy at 40 % or less
    assert share_text(0.39, "decode-heavy") == "39%"


def test_the_model_renders_the_same_blocks_everywhere_detail_and_wide_only_on_request():
    report = Report(
        "Run 1",
        ["Machine: m"],
        [
            Section("verdict", "Verdict", [Bullets(["chat: fast 2.00x e2e"], strong=True)]),
            Section(
                "table",
                "Table",
                [Table(["variant", "e2e x", "MDE"], [["fast", "2.00x", "±5.0%"]], wide=frozenset({"MDE"}))],
            ),
            Section("more", "More", [Text("a detail", detail=True)]),
        ],
    )
    text = render_text(report)
    assert text.splitlines()[:2] == ["Run 1", "Machine: m"]
    assert (
        "chat: fast 2.00x e2e" in text and "MDE" not in text and "a detail" not in text and "More" not in text
    )
    assert "MDE" in render_text(report, wide=True) and "a detail" in render_text(report, detail=True)
    md = render_markdown(report)
    assert "- **chat: fast 2.00x e2e**" in md and "| fast | 2.00x | ±5.0% |" in md and "a detail" in md
    html = render_html(report)
    assert html.index("Verdict") < html.index("Table") and "<td>±5.0%</td>" in html


def test_show_puts_the_verdict_first_and_fits_a_terminal(fake_run_db):
    shown = CliRunner().invoke(cli, ["show", "--db", str(fake_run_db)])
    assert shown.exit_code == 0, shown.output
    lines = shown.stdout.splitlines()
    verdict_at = next(i for i, line in enumerate(lines) if line.startswith("Verdict"))
    assert verdict_at < 8 and len(lines) <= 60 and max(len(line) for line in lines) <= 120
    assert shown.stderr == ""  # footnotes on stdout: `show > file` keeps them
    assert "How the trials ran" in shown.stdout and "Order:" in shown.stdout
    # the JSON says the same: the fastest variant per workload (or the tie) and its speed-up
    data = json.loads(CliRunner().invoke(cli, ["show", "--db", str(fake_run_db), "--json"]).stdout)
    for v in data["verdict"]:
        # on a tie the line names the tied variants, the rule's pick (the JSON's best) first
        m = re.search(rf"{v['workload']}:\s+(?:tie: )?(\S+) ([\d.]+)x", "\n".join(lines[verdict_at:]))
        assert m is not None, v["workload"]
        assert ("tie: " in m.group(0)) == bool(v["tie"])
        assert m.group(1) == v["best"] and float(m.group(2)) == round(v["speedup_e2e"]["value"], 2)
    # no paragraph printed twice
    paragraphs = [line.strip() for line in lines if len(line.strip()) > 60]
    assert len(paragraphs) == len(set(paragraphs))


def test_drafting_that_pays_on_decode_but_loses_end_to_end_says_why_and_from_when():
    from types import SimpleNamespace

    from workbench.analysis.drafting import BreakEven
    from workbench.report.run_report import drafting_section

    b = BreakEven("spec", "chat", "baseline", 60.0, 60.0, 10, 2, 40, 36, 46)
    b = dataclasses.replace(
        b, needed=0.3, ttft_extra_ms=1400.0, prefill_after_ms=0.0, wins_from=40, output_tokens=16
    )
    b = dataclasses.replace(b, measured_speedup=_est(2.07, 1.9, 2.2))
    s = _summary("spec", _est(0.91, 0.85, 0.97), _est(0.45, 0.4, 0.5))
    s = dataclasses.replace(s, speedup_decode=b.measured_speedup)
    analysis = SimpleNamespace(break_even=[b], summaries=[_summary("baseline"), s])
    text = render_text(Report("t", [], [drafting_section(analysis)]), header=False)
    assert "spec: drafting paid on chat — decode 2.07x*, e2e 0.91x*" in text
    assert (
        "chat: drafting paid on decode (2.07x) but the variant loses end to end (0.91x): its draft's "
        "prefill adds 1.40 s before the first token; it starts to pay from 40 output tokens (its outputs: 16)"
    ) in " ".join(line.strip() for line in text.splitlines())


def test_the_html_report_starts_with_the_verdict(fake_run_db):
    from workbench.analysis.run import analyze_run
    from workbench.report.documents import html_report
    from workbench.store import Store

    with Store(fake_run_db, create=False) as store:
        page = html_report(analyze_run(store.load_run(1)))
    body = page[page.index("<body>") :]
    first = body.index("<h2>")
    assert body[first:].startswith("<h2>Verdict (fastest end to end, vs baseline)</h2>")
    assert body.index("Verdict") < body.index("Per variant × workload") < body.index("Where the time goes")


def _one_line(rows, baseline="baseline", **kw):
    section = verdict_section(workload_verdicts(rows, baseline), trust(rows, baseline), baseline, **kw)
    text = render_text(Report("t", [], [section]), header=False)
    return " ".join(text.split())


def test_a_tie_is_said_as_a_tie_and_the_rule_picks_only_when_asked():
    # overlapping intervals, e2e medians 1 % apart with an MDE of ±15 %: the data cannot order them
    rows = [
        _summary("baseline", e2e_ms=2400, memory_mb=950),
        _summary("spec", _est(1.61, 1.40, 1.85, mde=0.15), _est(0.86, 0.8, 0.9), e2e_ms=1520, memory_mb=1210),
        _summary(
            "lookup", _est(1.60, 1.35, 1.90, mde=0.12), _est(0.97, 0.9, 1.0), e2e_ms=1505, memory_mb=945
        ),
    ]
    (v,) = workload_verdicts(rows, "baseline")
    assert [s.variant for s in v.tied] == ["spec", "lookup"] and v.close == ()
    text = _one_line(rows)
    assert (
        "chat: tie: spec 1.61x [1.40–1.85]* (TTFT 16% longer, same output, peak memory +260 MB), "
        "lookup 1.60x [1.35–1.90]* (same output) — e2e medians 1,520 and 1,505 ms, 1% apart, within the MDE ±15%"
    ) in text
    assert "picked by" not in text
    assert "picked by the highest paired e2e speed-up: spec" in _one_line(rows, pick=True)
    data = v.to_dict()
    assert data["tie"] == ["spec", "lookup"] and data["best"] == "spec"
    assert data["costs"]["memory_mb"] == 260 and data["alternatives"]["lookup"]["costs"]["memory_mb"] is None
    # medians further apart than either MDE: not a tie, though the intervals overlap — "as fast", with its cost
    rows[2] = _summary("lookup", _est(1.58, 1.35, 1.90, mde=0.03), e2e_ms=1700, memory_mb=945)
    rows[1] = _summary("spec", _est(1.61, 1.55, 1.66, mde=0.03), e2e_ms=1490, memory_mb=1210)
    (v,) = workload_verdicts(rows, "baseline")
    assert v.tie == () and [s.variant for s in v.close] == ["lookup"]
    assert (
        "chat: spec 1.61x [1.55–1.66]* e2e — same output, peak memory +260 MB; as fast: lookup (same output)"
        in (_one_line(rows))
    )


def test_the_trust_line_names_prompts_and_repetitions():
    from workbench.analysis.verdict import Trust
    from workbench.report.run_report import trust_lines

    def first(prompts, intervals=True):
        return trust_lines(Trust(3, intervals, (0.05, 0.05), 0, False, None, "interleaved", prompts=prompts))[
            0
        ]

    assert first({"chat": 5, "code": 5}).startswith("Trust: 3 repetitions × 5 prompts, paired;")
    assert first({"chat": 8, "report": 1}).startswith(
        "Trust: 3 repetitions × 8 prompts (chat), 1 prompt (report), paired;"
    )
    assert first({"report": 1}, intervals=False).endswith("Measured: 1 prompt × 1 repetition.")
    rows = [_summary("baseline"), _summary("fast", _est(1.8, 1.7, 1.9))]
    assert trust(rows, "baseline").prompts == {"chat": 2}


TWINS = """
name = "twins"
repetitions = 2
warmup = 1

[[variants]]
name = "baseline"
strategy = "fake"
prefill_ms = 4
decode_ms_per_token = 3

[[variants]]
name = "twin-a"
strategy = "fake"
prefill_ms = 4
decode_ms_per_token = 1.5

[[variants]]
name = "twin-b"
strategy = "fake"
prefill_ms = 4
decode_ms_per_token = 1.5

[[workloads]]
name = "code"
limit = 2
max_new_tokens = 12
"""


def test_show_says_a_tie_and_picks_only_with_pick(tmp_path):
    """Two variants with the same costs, both twice as fast as the baseline: ``show`` calls it a tie
    and names no winner; ``--pick`` adds the stated rule's pick. On the sample, the trust line names
    prompts × repetitions."""
    from pathlib import Path

    from workbench.run.execute import RunExecutor
    from workbench.spec.parse import parse_spec
    from workbench.store import Store

    db = tmp_path / "twins.db"
    with Store(db) as store:
        assert RunExecutor(parse_spec(TWINS), store).run().status == "ok"

    def verdict(database, *extra):
        shown = CliRunner().invoke(cli, ["show", "1", "--db", str(database), *extra], terminal_width=120)
        assert shown.exit_code == 0, shown.output
        return " ".join(text_section(shown.stdout, "Verdict").split())

    plain, picked = verdict(db), verdict(db, "--pick")
    assert "code: tie: twin-" in plain and "twin-a" in plain and "twin-b" in plain, plain
    assert "picked by" not in plain
    assert re.search(r"picked by the highest paired e2e speed-up: twin-[ab]", picked), picked
    sample = Path(__file__).resolve().parent.parent / "resources" / "sample" / "demo.db"
    assert "3 repetitions × 8 prompts (conversation), 1 prompt (summarise-short)" in verdict(sample)


def test_without_intervals_a_tie_is_speed_ups_and_medians_within_five_percent():
    rows = [
        _summary("baseline", e2e_ms=200),
        _summary("a", _est(1.80), e2e_ms=111),
        _summary("b", _est(1.75), e2e_ms=112),
        _summary("c", _est(1.60), e2e_ms=125),  # 11 % slower: not even as fast
    ]
    (v,) = workload_verdicts(rows, "baseline")
    assert [s.variant for s in v.tied] == ["a", "b"] and v.close == ()
    assert (
        "chat: tie: a 1.80x (same output), b 1.75x (same output) — e2e medians 111 and 112 ms, 1% apart, "
        "within 5% (no interval)"
    ) in _one_line(rows)
