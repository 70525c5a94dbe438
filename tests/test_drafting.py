"""Does drafting pay? The break-even analysis of speculative variants (workbench.analysis.drafting): the
cost model on steps with known costs, the unit (own plain steps or the paired baseline), variable and
zero draft lengths, the advice; then through a real run of the fake draft → verify loop into `show`,
the JSON, the report and the charts."""

from __future__ import annotations

import dataclasses
import json
import re

import pytest

from workbench.analysis.drafting import MIN_PLAIN_STEPS, break_even
from workbench.analysis.paired import PairedEstimate
from workbench.analysis.summary import GroupSummary
from workbench.formatting import spaced_percent as pct
from workbench.report.drafting import drafting_advice
from workbench.store import TrialRecord
from workbench.testing.helpers import text_section


def _trial(tid, variant, prompt, rep=0, workload="code", **kw):
    return TrialRecord(
        id=tid, variant=variant, workload=workload, prompt_id=prompt, repetition=rep, status="ok", **kw
    )


def _summary(variant, workload, value, lo=None, hi=None):
    s = GroupSummary(variant, workload, 1, 0, speedup_decode=PairedEstimate(value, lo, hi, 4))
    return s


def test_costs_break_even_and_positions_from_known_steps():
    # T1 = 10 ms (the plain steps' verify); a 4-token draft costs 2 ms (D = 0.2), its verify 14 ms (V = 1.4)
    trials = [_trial(1, "spec", "p0", decode_ms=0.0), _trial(2, "base", "p0", tpot_ms=12.0)]
    plain = [(1, 1, 0, 0, None, 10.0)] * MIN_PLAIN_STEPS
    drafted = [(1, 1 + a, 4, a, 2.0, 14.0) for a in (4, 4, 3, 2, 1, 0, 0, 0)]
    decode_ms = sum((d or 0) + v for *_, d, v in plain + drafted) + 0.5 * 13  # 0.5 ms outside
    trials[0] = dataclasses.replace(trials[0], decode_ms=decode_ms)
    (b,) = break_even(trials, plain + drafted, [_summary("spec", "code", 1.2, 1.1, 1.3)], "base")
    assert (b.variant, b.workload, b.unit, b.target_step_ms) == ("spec", "code", "plain steps", 10.0)
    assert b.baseline_step_ms == 12.0  # reported beside, not the unit: the variant has its own plain steps
    assert (b.steps, b.plain_steps, b.proposed, b.accepted) == (13, 5, 32, 14)
    lengths = {x.k: x for x in b.lengths}
    assert set(lengths) == {0, 4}
    four = lengths[4]
    assert four.draft_cost == pytest.approx(0.2) and four.verify_cost == pytest.approx(1.4)
    assert four.break_even == pytest.approx((0.2 + 1.4 - 1) / 4)  # 15 % needed
    assert four.acceptance == pytest.approx(14 / 32)
    assert four.speedup == pytest.approx((1 + 14 / 8) / 1.6)
    assert lengths[0].cost == pytest.approx(1.0) and lengths[0].break_even is None
    assert b.needed == pytest.approx(0.15)
    assert b.draft_cost_per_token == pytest.approx(0.05)
    assert b.verify_fit == pytest.approx((1.0, 0.1))  # V(0) = 1, V(4) = 1.4 on a line
    assert b.predicted_speedup == pytest.approx((5 + 8 + 14) / (5 * 1.0 + 8 * 1.6))
    assert b.overhead == pytest.approx(0.5 / 10)
    # acceptance by position: of the steps drafting >= i tokens, the share accepting the first i
    assert [(p.position, p.reached, p.accepted) for p in b.positions] == [
        (1, 8, 5),
        (2, 8, 4),
        (3, 8, 3),
        (4, 8, 2),
    ]
    assert b.verdict == "pays"  # the measured CI excludes 1
    data = b.to_dict()
    assert data["lengths"][1]["break_even"] == pytest.approx(0.15)
    assert data["measured_speedup"]["value"] == 1.2 and data["verdict"] == "pays"
    json.dumps(data)


def test_unit_is_the_paired_baseline_step_without_enough_plain_steps():
    # two prompts whose baseline steps differ: each trial's steps are measured in its own pair's T1
    trials = [
        _trial(1, "spec", "short"),
        _trial(2, "spec", "long"),
        _trial(3, "base", "short", tpot_ms=10.0),
        _trial(4, "base", "long", tpot_ms=20.0),
    ]
    steps = [(1, 2, 2, 1, 1.0, 12.0), (1, 1, 0, 0, None, 10.0), (2, 3, 2, 2, 2.0, 24.0)]
    (b,) = break_even(trials, steps, (), "base")
    assert b.unit == "baseline" and b.target_step_ms == 15.0
    two = next(x for x in b.lengths if x.k == 2)
    assert two.draft_cost == pytest.approx(0.1) and two.verify_cost == pytest.approx(1.2)
    assert two.break_even == pytest.approx(0.15)
    assert b.measured_speedup is None and b.verdict == "pays"  # no measurement: the prediction decides
    assert b.predicted_speedup == pytest.approx((2 + 1 + 3) / (1.3 + 1.0 + 1.3))


def test_variable_draft_lengths_are_bucketed():
    trials = [_trial(1, "lookup", "p")]
    steps = [(1, 1, 0, 0, 0.1, 10.0)] * 6 + [(1, 3, 2, 2, 0.1, 11.0)] * 5 + [(1, 1, 6, 0, 0.1, 13.0)] * 5
    (b,) = break_even(trials, steps)
    lengths = {x.k: x for x in b.lengths}
    assert set(lengths) == {0, 2, 6}
    assert lengths[2].acceptance == 1.0 and lengths[6].acceptance == 0.0
    assert lengths[2].break_even == pytest.approx((0.01 + 1.1 - 1) / 2)
    assert lengths[6].break_even == pytest.approx((0.01 + 1.3 - 1) / 6)
    # the mix's needed acceptance weighs each length by its steps and tokens
    assert b.needed == pytest.approx((5 * 0.11 + 5 * 0.31) / (5 * 2 + 5 * 6))
    assert b.acceptance == pytest.approx(10 / 40)
    # positions 1-2 reached by every drafted step, 3-6 only by the 6-token drafts (never accepted)
    assert [(p.position, p.reached, p.accepted) for p in b.positions][:3] == [
        (1, 10, 5),
        (2, 10, 5),
        (3, 5, 0),
    ]
    assert b.best_k == 2  # a fixed k = 2 is the best the positions and costs predict
    assert b.best_speedup == pytest.approx((1 + 0.5 + 0.5) / lengths[2].cost)


def test_steps_without_timings_still_give_acceptance():
    trials = [_trial(1, "spec", "p")]
    (b,) = break_even(trials, [(1, 3, 2, 2, None, None)] * 3, [_summary("spec", "code", 0.9)])
    assert b.unit is None and b.lengths == () and b.needed is None and b.predicted_speedup is None
    assert b.acceptance == 1.0 and b.positions[0].rate == 1.0
    assert b.verdict == "loses"  # from the measured speed-up alone (no CI: its value)


def test_non_drafting_variants_and_other_trials_are_left_out():
    trials = [_trial(1, "base", "p", tpot_ms=10.0), _trial(2, "spec", "p")]
    steps = [(2, 1, 0, 0, None, 10.0)] * 6 + [(99, 3, 2, 2, 1.0, 12.0)]  # trial 99: not a measured one
    assert break_even(trials, steps, (), "base") == []  # spec never drafted; 99 is ignored


def test_advice_names_where_drafting_paid_and_what_was_needed():
    def run(workload, accepted_each, speedup, lo, hi):
        trials = [_trial(1, "lookup", "p", workload=workload)]
        steps = [(1, 1, 0, 0, 0.0, 10.0)] * 5 + [(1, 1 + a, 4, a, 0.0, 13.0) for a in accepted_each]
        return break_even(trials, steps, [_summary("lookup", workload, speedup, lo, hi)])[0]

    code = run("code", [4, 4, 3, 4] * 3, 2.8, 2.5, 3.1)
    chat = run("chat", [0] * 15 + [1], 0.85, 0.8, 0.9)
    assert chat.needed == pytest.approx(0.3 / 4) and chat.acceptance == pytest.approx(1 / 64)
    lines = drafting_advice([code, chat])
    assert lines[0] == (
        "lookup: drafting paid on code (2.80x decode: acceptance 94 % ≥ 8 % needed); "
        "not on chat (0.85x decode: acceptance 2 % < 8 % needed)."
    )
    (hint,) = [line for line in lines[1:] if line.startswith("lookup on chat")]
    # k = 1 would need 7.5 % at position 1 (the fitted verify cost 1.075): 1 in 16 is not enough;
    # 7.5 % computed as 0.07499999999999996 is written as its decimal value, 8 % (the line above's)
    assert hint == (
        "lookup on chat: no draft length pays here: even the first draft token is accepted only 6 % "
        "(8 % needed at k = 1); decode plainly (k = 0) on prompts like these."
    )
    assert not any(line.startswith("lookup on code") for line in lines)  # it paid, as predicted


def test_advice_prefers_shorter_drafts_when_they_would_pay():
    # the first two positions are accepted, the rest never: k = 6 loses, k = 2 would pay
    trials = [_trial(1, "spec", "p")]
    steps = [(1, 1, 0, 0, 0.0, 10.0)] * 5 + [(1, 3, 6, 2, 6.0, 16.0)] * 10 + [(1, 3, 2, 2, 2.0, 12.0)] * 5
    (b,) = break_even(trials, steps, [_summary("spec", "code", 0.95, 0.9, 1.0)])
    assert b.verdict == "unclear" and b.best_k == 2
    hint = drafting_advice([b])[-1]
    assert b.best_speedup == pytest.approx(3 / 1.4)  # 1 + 2 accepted per step for D + V = 0.2 + 1.2
    assert hint.startswith("spec on code: shorter drafts would pay: at k = 2") and "2.14x" in hint


def test_advice_blames_the_cost_when_even_full_acceptance_cannot_pay():
    # every draft token accepted, but drafting one costs 1.2 target steps: no acceptance could pay
    trials = [_trial(1, "spec", "p")]
    steps = [(1, 1, 0, 0, 0.0, 10.0)] * 5 + [(1, 4, 3, 3, 36.0, 13.0)] * 10
    (b,) = break_even(trials, steps, [_summary("spec", "code", 0.7, 0.6, 0.8)])
    assert b.acceptance == 1.0 and b.needed == pytest.approx((3.6 + 1.3 - 1) / 3) and b.needed > 1
    assert b.needed_at(1) == pytest.approx(1.2 + 0.1)  # from c_d and the fitted verify line
    line, hint = drafting_advice([b])
    assert line == (
        "spec: drafting did not pay on code (0.70x decode: acceptance 100 %, no acceptance could pay its costs)."
    )
    assert hint == (
        "spec on code: no draft length pays here at this cost: a drafted token costs 1.20 target steps to "
        "draft, a one-token draft > 100 % acceptance to break even; a cheaper draft would pay, else decode "
        "plainly (k = 0)."
    )


def test_advice_explains_a_prediction_that_missed():
    trials = [_trial(1, "spec", "p", decode_ms=0.0)]
    steps = [(1, 1, 0, 0, 0.0, 10.0)] * 5 + [(1, 4, 3, 3, 3.0, 12.0)] * 10
    # 5 ms per step outside draft and verify
    trials[0] = dataclasses.replace(trials[0], decode_ms=5 * 10.0 + 10 * 15.0 + 15 * 5.0)
    (b,) = break_even(trials, steps, [_summary("spec", "code", 1.6, 1.5, 1.7)])
    assert b.predicted_speedup == pytest.approx(45 / 20)
    assert b.overhead == pytest.approx(0.5)
    (line, hint) = drafting_advice([b])
    assert line.startswith("spec: drafting paid on code (1.60x decode")
    assert hint == (
        "spec on code: predicted 2.25x from acceptance and costs, measured 1.60x: the loop spends 0.50 "
        "target steps per step outside draft and verify."
    )


def test_pct():
    assert pct(0.314) == "31 %" and pct(1.4) == "> 100 %" and pct(-0.2) == "0 %" and pct(None) == "–"


# -- through a real run of the fake draft -> verify loop ---------------------------------------------

#: a baseline and two drafting variants with known costs: a draft token costs 0.25 of a target step
#: (0.5 ms of 2 ms), verifying it 0.1 more (0.2 ms), so drafting breaks even at 35 % acceptance
DRAFTING_SPEC = """
name = "fake drafting"
repetitions = 2
warmup = 0
workers = "one"   # the fake has no process effects; two process pairs would leave t with one df

[[variants]]
name = "baseline"
strategy = "fake"
prefill_ms = 1
decode_ms_per_token = 2

[[variants]]
name = "good"
strategy = "fake"
prefill_ms = 1
decode_ms_per_token = 2
draft_tokens = 4
acceptance = 0.9
draft_ms_per_token = 0.5
verify_ms_per_token = 0.2
plain_every = 4

[[variants]]
name = "bad"
strategy = "fake"
prefill_ms = 1
decode_ms_per_token = 2
draft_tokens = 4
acceptance = 0.05
draft_ms_per_token = 0.5
verify_ms_per_token = 0.2
plain_every = 4

[[workloads]]
name = "code"
limit = 2
max_new_tokens = 32
"""


@pytest.fixture(scope="module")
def drafting_db(tmp_path_factory):
    from workbench.run.execute import RunExecutor
    from workbench.spec.parse import parse_spec
    from workbench.store import Store

    path = tmp_path_factory.mktemp("drafting") / "results.db"
    with Store(path) as store:
        result = RunExecutor(parse_spec(DRAFTING_SPEC), store).run()
    assert result.status == "ok", result.errors
    return path


def test_a_fake_run_recovers_the_injected_costs(drafting_db):
    from workbench.analysis.run import analyze_run
    from workbench.report.data import run_data
    from workbench.store import Store

    with Store(drafting_db, create=False) as store:
        analysis = analyze_run(store.load_run(None))
    by = {b.variant: b for b in analysis.break_even}
    assert set(by) == {"good", "bad"}  # the baseline never drafts
    for b in by.values():
        # its own plain steps (every 4th step, and the last where the budget leaves no room) are T1
        assert b.unit == "plain steps" and b.target_step_ms == pytest.approx(2.0)
        assert b.plain_steps >= MIN_PLAIN_STEPS and b.baseline_step_ms == pytest.approx(2.0, rel=0.25)
        assert b.draft_cost_per_token == pytest.approx(0.25)
        assert b.verify_fit == pytest.approx((1.0, 0.1))
        assert b.needed == pytest.approx(0.35)
        four = next(x for x in b.lengths if x.k == 4)
        assert four.cost == pytest.approx(1 + 0.4 + 1.0) and four.break_even == pytest.approx(0.35)
        assert b.positions[0].position == 1 and b.positions[0].reached == b.drafted_steps
    assert by["good"].acceptance > 0.6 and by["bad"].acceptance < 0.2
    # far from 1 either way: the measured decode speed-up agrees with the verdict of the break-even
    assert by["good"].verdict == "pays" and by["bad"].verdict == "loses"
    assert by["good"].measured_speedup.value == pytest.approx(by["good"].predicted_speedup, rel=0.25)
    data = run_data(analysis)
    assert [row["variant"] for row in data["break_even"]] == ["good", "bad"]
    assert data["drafting_advice"][0].startswith("good: drafting paid on code (")
    assert data["drafting_advice"][1].startswith("bad: drafting did not pay on code (")
    assert "< 35 % needed" in data["drafting_advice"][1]
    json.dumps(data, default=str)


def test_show_prints_the_break_even_table_and_advice(drafting_db):
    from click.testing import CliRunner

    from workbench.cli import cli

    result = CliRunner().invoke(cli, ["show", "--db", str(drafting_db)])
    assert result.exit_code == 0, result.output
    # by default: per variant whether drafting paid, decode and e2e, acceptance against the break-even
    section = text_section(result.output, "Does drafting pay? (decode and end to end)")
    assert re.search(
        r"good: drafting paid on code — decode [\d.]+x\*?, e2e [\d.]+x\*?; accepts \d+%", section
    )
    assert "bad: drafting did not pay on code" in section
    result = CliRunner().invoke(cli, ["show", "--db", str(drafting_db), "--detail"])  # the tables too
    out = result.output
    header = next(line for line in out.splitlines() if line.startswith("variant") and "needed" in line)
    assert "predicted" in header and "measured" in header and "best k" in header
    rows = [line.split() for line in out.splitlines() if line.startswith(("good ", "bad ")) and "%" in line]
    assert any(r[0] == "good" and "35" in r for r in rows)  # the needed acceptance, 35 %
    assert "Per draft length" in out
    js = CliRunner().invoke(cli, ["show", "--db", str(drafting_db), "--json"])
    assert {row["variant"] for row in json.loads(js.output)["break_even"]} == {"good", "bad"}


def test_the_report_and_the_chart_show_it(drafting_db):
    from workbench.analysis.run import analyze_run
    from workbench.charts import DraftPositionChart, run_charts
    from workbench.report.documents import html_report, markdown_report
    from workbench.store import Store

    with Store(drafting_db, create=False) as store:
        analysis = analyze_run(store.load_run(None))
    charts = run_charts(analysis)
    (chart,) = [c for c in charts if isinstance(c, DraftPositionChart)]
    assert chart.name == "draft-positions" and chart.workloads == ("code",)
    assert {s.variant for s in chart.series} == {"good", "bad"}
    rows = chart.rows()
    first = next(r for r in rows if r["variant"] == "good" and r["position"] == 1)
    good = next(b for b in analysis.break_even if b.variant == "good")
    assert first["accepted_pct"] == pytest.approx(100 * good.positions[0].rate)
    assert first["needed_pct"] == pytest.approx(35.0)
    md = markdown_report(analysis, {"draft-positions": "draft-positions.png"}, charts)
    section = md.split("## Does drafting pay?")[1]
    assert "![Acceptance by draft position" in section.split("##")[0]
    assert "| good | code |" in section and "- good: drafting paid on code — decode" in section
    html = html_report(analysis, {}, charts)
    assert "<h2>Does drafting pay? (decode and end to end) — code</h2>" in html
    assert "bad: drafting did not pay on code" in html
    assert "## Charts" not in md or "draft-positions.png" not in md.split("## Charts")[1]


def test_the_gui_acceptance_tab_shows_the_chart_the_table_and_the_advice(
    qtbot, drafting_db, tmp_path, monkeypatch
):
    pytest.importorskip("PySide6")
    from workbench.gui.chartview import CHART_TABS
    from workbench.gui.main_window import MainWindow
    from workbench.gui.settings import GuiSettings

    monkeypatch.setenv("WORKBENCH_GUI_SETTINGS", str(tmp_path / "gui.ini"))
    window = MainWindow(drafting_db, settings=GuiSettings())
    qtbot.addWidget(window, before_close_func=lambda w: w.run_control.stop_run_and_wait())
    window.show()
    qtbot.waitUntil(lambda: window.is_ready and window.results is not None, timeout=30_000)
    tab = [title for title, _, _ in CHART_TABS].index("Acceptance")
    window.charts.setCurrentIndex(tab)
    window.charts.draw_all()
    note = window.charts.notes[tab]
    assert note.isVisibleTo(window.charts)
    text = note.text()
    assert "Does drafting pay?" in text and "good: drafting paid on code" in text
    assert "<table" in text and "35 %" in text
    assert "draft-positions" in window.charts.widgets
    assert not any(n.isVisibleTo(window.charts) for i, n in enumerate(window.charts.notes) if i != tab)


def test_hovering_a_draft_position_reads_its_acceptance(qtbot, drafting_db):
    pytest.importorskip("PySide6")
    from workbench.analysis.run import analyze_run
    from workbench.charts import DraftPositionChart, run_charts
    from workbench.gui import charts
    from workbench.gui.chartview import describe
    from workbench.store import Store

    with Store(drafting_db, create=False) as store:
        (chart,) = [
            c for c in run_charts(analyze_run(store.load_run(None))) if isinstance(c, DraftPositionChart)
        ]
    widget = charts.build(chart)
    qtbot.addWidget(widget)
    plot = charts.plot_items(widget)[0]
    text = describe(chart, plot, 1.1, 50)
    good = next(s for s in chart.series if s.variant == "good")
    assert text.startswith("<b>draft position 1</b>")
    assert f"good on code: {good.rates[0]:.0f} % accepted (of {good.reached[0]} steps)" in text
    assert describe(chart, plot, 1.5, 50) is None  # between positions


def test_the_output_length_from_which_the_variant_wins_end_to_end():
    """The draft's prefill before the first token (TTFT over the paired baseline's) and after it (the
    draft_ms of plain steps: a cache copy, catch-up chunks) against what each token saves."""
    # baseline: TTFT 100 ms, TPOT 10 ms. spec: TTFT 160 ms (60 ms of draft prefill before the first
    # token), a 20 ms copy on its first plain step, then 4 ms per token: 21 output tokens
    base = _trial(2, "base", "p0", ttft_ms=100.0, tpot_ms=10.0, output_tokens=21)
    steps = [(1, 1, 0, 0, 20.0, 4.0)] + [(1, 5, 4, 4, 1.0, 15.0)] * 5
    spec = _trial(1, "spec", "p0", ttft_ms=160.0, decode_ms=20.0 + 4.0 * 20, output_tokens=21)
    (b,) = break_even([spec, base], steps, [_summary("spec", "code", 2.0)], "base")
    assert b.ttft_extra_ms == pytest.approx(60.0)
    assert b.prefill_after_ms == pytest.approx(20.0) and b.prefill_steps == 1
    assert b.step_saving_ms == pytest.approx(10.0 - 4.0)
    # 80 ms to win back at 6 ms a token: from 1 + ceil(80 / 6) = 15 tokens on
    assert b.wins_from == 15 and b.output_tokens == 21
    (line,) = [x for x in drafting_advice([b]) if "end to end" in x]
    assert "code: wins from 15 output tokens on (its outputs: 21;" in line
    assert "0.06 s before the first token, 0.02 s after it" in line
    # nothing to win back: from the first token; nothing saved per token: never
    quick = dataclasses.replace(spec, ttft_ms=90.0)
    (b,) = break_even([quick, base], steps[1:], [_summary("spec", "code", 2.0)], "base")
    assert b.wins_from == 1
    slow = dataclasses.replace(spec, decode_ms=20.0 + 12.0 * 20)
    (b,) = break_even([slow, base], steps, [_summary("spec", "code", 2.0)], "base")
    assert b.wins_from is None and "never wins e2e" in " ".join(drafting_advice([b]))


def test_a_draft_given_up_after_reading_part_of_its_prompt_says_why():
    base = _trial(2, "base", "p0", ttft_ms=100.0, tpot_ms=10.0, output_tokens=8)
    # two plain steps with a catch-up chunk each, then plain steps only: it never drafted
    steps = [(1, 1, 0, 0, 30.0, 10.0)] * 2 + [(1, 1, 0, 0, None, 10.0)] * 5
    spec = _trial(1, "spec", "p0", ttft_ms=100.0, decode_ms=130.0, output_tokens=8)
    (b,) = break_even([spec, base], steps, [_summary("spec", "code", 0.7)], "base")
    assert b.drafted_steps == 0 and b.prefill_steps == 2 and b.prefill_after_ms == pytest.approx(60.0)
    text = " ".join(drafting_advice([b]))
    assert "the draft read its prompt on 2 plain steps, then was given up" in text
