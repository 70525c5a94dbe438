"""Experience targets: the spec key and the built-in defaults, verdicts and goodput on crafted trials
with known answers, "what would it take", projections against the fake strategy's known linear
costs, and the new fields in the CLI, JSON, the report and the GUI."""

from __future__ import annotations

import dataclasses
import json
import re
import textwrap

import pytest
from click.testing import CliRunner

from workbench.analysis.projection import fit, project
from workbench.analysis.targets import bootstrap_percentile, evaluate, measured_percentile, what_it_takes
from workbench.cli import cli
from workbench.core.errors import SpecError
from workbench.report.targets import check_text, projection_data, target_advice
from workbench.spec.parse import parse_spec, recorded_targets
from workbench.spec.targets import Targets, parse_targets
from workbench.spec.workloads import builtin_names, builtin_targets
from workbench.store import Store, TrialRecord
from workbench.testing.helpers import text_section

FAKE = '[[variants]]\nname = "a"\nstrategy = "fake"\n'


def trial(variant="a", workload="w", prompt="p", rep=0, status="ok", **metrics):
    return TrialRecord(
        variant=variant,
        workload=workload,
        prompt_id=prompt,
        repetition=rep,
        warmup=0,
        status=status,
        **metrics,
    )


def targets(**limits) -> Targets:
    return parse_targets(limits, "test")


# -- the spec ----------------------------------------------------------------------------------------


def test_built_in_workloads_ship_targets_and_the_sweeps_none():
    chat, code, summarise = builtin_targets("chat"), builtin_targets("code"), builtin_targets("summarise")
    assert chat.limit("ttft_ms") == 1000 and chat.limit("tpot_ms") == 100 and chat.percentile == 90
    assert code.metrics == ["e2e_ms"] and summarise.metrics == ["e2e_ms"]
    assert chat.source == "built-in"
    assert builtin_targets("sweep-input") is None and builtin_targets("sweep-output") is None
    assert all(builtin_targets(n) for n in builtin_names() if not n.startswith("sweep"))


def test_spec_targets_replace_the_built_ins_whole():
    spec = parse_spec(
        FAKE
        + '[[workloads]]\nname = "chat"\ntargets = {ttft_ms = 500, tpot_ms = 60, percentile = 95}\n'
        + '[[workloads]]\nname = "code"\n'
        + '[[workloads]]\nname = "rag"\ntargets = {}\n'
        + '[[workloads]]\nname = "mine"\nprompts = ["hi"]\ntargets = {decode_tokens_per_s = 20}\n'
    )
    chat, code, rag, mine = spec.workloads
    assert chat.targets == Targets((("ttft_ms", 500.0), ("tpot_ms", 60.0)), 95.0, "spec")
    assert code.targets == builtin_targets("code")
    assert rag.targets is None  # `targets = {}`: none
    assert mine.targets.limits == (("decode_tokens_per_s", 20.0),) and mine.targets.percentile == 90
    assert chat.targets.describe() == "TTFT ≤ 500 ms, TPOT ≤ 60 ms at p95"
    assert mine.targets.describe() == "decode ≥ 20 tok/s at p90"


@pytest.mark.parametrize(
    "table, problem",
    [
        ("{ttf_ms = 5}", "unknown target 'ttf_ms'"),
        ("{ttft_ms = -5}", "target 'ttft_ms' must be a positive number"),
        ('{ttft_ms = "fast"}', "target 'ttft_ms' must be a positive number"),
        ("{ttft_ms = 5, percentile = 100}", "'percentile' must be above 0 and below 100"),
        ("500", "'targets' must be a table"),
    ],
)
def test_bad_targets_are_one_line_naming_the_workload(table, problem):
    with pytest.raises(SpecError) as err:
        parse_spec(FAKE + f'[[workloads]]\nname = "chat"\ntargets = {table}\n')
    assert "workload 'chat'" in str(err.value) and problem in str(err.value)
    assert "\n" not in str(err.value)


def test_recorded_targets_need_no_strategy_or_model():
    text = (
        '[[variants]]\nname = "x"\nstrategy = "not-installed-here"\nmodel = "org/gone"\n'
        '[[workloads]]\nname = "chat"\n[[workloads]]\nname = "code"\ntargets = {e2e_ms = 300}\n'
        '[[workloads]]\nname = "mine"\nfile = "x.jsonl"\n[[workloads]]\nname = "sweep-input"\n'
    )
    found = recorded_targets(text)
    assert set(found) == {"chat", "code"}
    assert found["chat"] == builtin_targets("chat") and found["code"].limit("e2e_ms") == 300
    assert recorded_targets("not = [toml") == {}


# -- verdicts and goodput --------------------------------------------------------------------------


def test_percentile_at_the_edges_is_the_share_of_requests_meeting_the_target():
    values = [100.0] * 9 + [900.0]  # 9 of 10 requests under 500 ms
    assert measured_percentile(values, 90) == 100.0  # p90 holds: 90 % met it
    assert measured_percentile(values, 91) == 900.0  # p91 does not
    eight = [100.0] * 8 + [900.0] * 2
    assert measured_percentile(eight, 90) == 900.0  # only 80 % met it
    assert measured_percentile(eight, 80) == 100.0
    # higher is better (decode tok/s): the value at least p % reach or exceed
    speeds = [10.0] + [50.0] * 9
    assert measured_percentile(speeds, 90, higher_is_better=True) == 50.0
    assert measured_percentile(speeds, 95, higher_is_better=True) == 10.0


def test_verdicts_and_goodput_on_crafted_trials():
    rows = [trial(prompt=f"p{i}", ttft_ms=100.0, e2e_ms=400.0) for i in range(8)]
    rows.append(trial(prompt="p8", ttft_ms=600.0, e2e_ms=400.0))  # misses TTFT only
    rows.append(trial(prompt="p9", ttft_ms=100.0, e2e_ms=900.0))  # misses e2e only
    (v,) = evaluate(rows, {"w": targets(ttft_ms=500, e2e_ms=500)})
    ttft, e2e = v.checks
    assert ttft.status == "met" and e2e.status == "met"  # each target: 90 % of the requests met it
    assert ttft.share_meeting == pytest.approx(0.9) and e2e.share_meeting == pytest.approx(0.9)
    assert v.goodput == pytest.approx(0.8)  # but only 8 of 10 met both
    assert (v.good, v.requests, v.status) == (8, 10, "met")
    assert ttft.margin == pytest.approx(0.8)  # 100 ms against 500: 80 % headroom
    # a failed request did not get the experience: it counts against the goodput, not the percentile
    (v,) = evaluate([*rows, trial(prompt="p10", status="failed")], {"w": targets(ttft_ms=500)})
    assert v.requests == 11 and v.good == 9 and v.goodput == pytest.approx(9 / 11)
    # warm-ups and other workloads are left out; a workload without targets gets no verdict
    extra = [dataclasses.replace(rows[0], warmup=1, ttft_ms=10_000.0), trial(workload="other", ttft_ms=1.0)]
    (v,) = evaluate(rows + extra, {"w": targets(ttft_ms=500)})
    assert v.requests == 10


def test_ties_with_the_target_meet_it():
    rows = [trial(prompt=f"p{i}", ttft_ms=500.0, decode_tokens_per_s=20.0) for i in range(5)]
    (v,) = evaluate(rows, {"w": targets(ttft_ms=500, decode_tokens_per_s=20)})
    assert [c.status for c in v.checks] == ["met", "met"] and v.goodput == 1.0
    assert all(c.margin == 0 for c in v.checks)
    (v,) = evaluate(rows, {"w": targets(ttft_ms=499.9, decode_tokens_per_s=20.1)})
    assert [c.status for c in v.checks] == ["missed", "missed"] and v.goodput == 0.0
    assert v.checks[1].margin < 0


def test_a_target_on_a_metric_a_variant_lacks_is_no_data_not_a_miss():
    rows = [trial("a", prompt=f"p{i}", ttft_ms=100.0, tpot_ms=None) for i in range(4)]
    rows += [trial("b", prompt=f"p{i}", ttft_ms=100.0, tpot_ms=10.0) for i in range(4)]
    a, b = evaluate(rows, {"w": targets(ttft_ms=500, tpot_ms=50)})
    assert [c.status for c in a.checks] == ["met", "no data"]
    assert a.status == "unknown" and a.goodput is None and a.checks[1].margin is None
    assert "no data" in check_text(a.checks[1])
    assert b.status == "met" and b.goodput == 1.0
    # some requests lack it (a one-token answer has no TPOT): those are not counted as meeting it
    rows[4] = dataclasses.replace(rows[4], tpot_ms=None)
    _, b = evaluate(rows, {"w": targets(tpot_ms=50)})
    assert b.goodput == pytest.approx(0.75) and b.checks[0].status == "met"  # 3 of 3 measured met it


def test_the_percentile_ci_comes_from_repetitions_of_each_prompt():
    values = [100.0, 110.0, 120.0, 200.0, 210.0, 220.0]
    prompts = ["a", "a", "a", "b", "b", "b"]
    est = bootstrap_percentile(values, prompts, 90)
    # 90 % of 6 requests is 5.4: the p90 is the 6th smallest, the largest
    assert est.value == 220.0 and est.lo <= est.value <= est.hi and est.n == 6
    assert 200.0 <= est.lo < est.hi == 220.0  # resampled within each prompt: b's trials stay b's
    single = bootstrap_percentile([100.0, 200.0], ["a", "b"], 90)
    assert single.value == 200.0 and single.lo is None  # one trial per prompt: no interval
    assert bootstrap_percentile([None, None], ["a", "b"], 90).value is None


# -- what would it take ----------------------------------------------------------------------------


def _linear_trials(variant, ttft_per_token, fixed=10.0, decode_ms=5.0, out=21, workload="chat"):
    """TTFT = fixed + slope × input exactly, decode = decode_ms per token after the first."""
    rows = []
    for n in (100, 200, 400, 600, 800, 1000):
        ttft = fixed + ttft_per_token * n
        rows.append(
            trial(
                variant,
                workload,
                prompt=f"in-{n}",
                input_tokens=n,
                output_tokens=out,
                ttft_ms=ttft,
                tpot_ms=decode_ms,
                e2e_ms=ttft + decode_ms * (out - 1),
            )
        )
    return rows


def test_what_it_takes_names_the_phase_cites_measured_levers_and_predicts_a_length():
    rows = _linear_trials("baseline", 1.0) + _linear_trials("cache", 0.2)
    verdicts = evaluate(rows, {"chat": targets(ttft_ms=500, tpot_ms=2)})
    lines = target_advice(what_it_takes(verdicts, rows, "baseline", strategies={"cache": "prefix-cache"}))[
        "chat"
    ]
    text = "\n".join(lines)
    assert lines[0].startswith("Targets (spec): TTFT ≤ 500 ms, TPOT ≤ 2 ms at p90.")
    assert "baseline: TTFT p90 1,010 ms" in text and "prefill-bound" in text
    # the lever's own measurement: 210 ms against 1,010 ms, a 4.81x speed-up (x is always a speed-up)
    assert "cache (KV-cache reuse) 210 ms (4.81x), meets it" in text
    # TTFT = 10 + 1.0 × input: 500 ms holds up to 490 input tokens (a prediction, marked as one)
    assert "Prediction: TTFT p90 would hold with inputs up to ~490 tokens" in text
    assert "TPOT p90 5 ms" in text and "decode-bound" in text
    assert "Prediction: lengths do not fix this: decode costs 5 ms per output token" in text


def test_what_it_takes_for_e2e_caps_the_output():
    rows = _linear_trials("baseline", 0.1, fixed=10.0, decode_ms=5.0, out=101, workload="code")
    # an output sweep of the same variant gives the time-vs-output line: 5 ms per token after the first
    rows += [
        trial(
            "baseline",
            "sweep-output",
            f"out-{n}",
            input_tokens=128,
            output_tokens=n,
            ttft_ms=22.8,
            e2e_ms=22.8 + 5.0 * (n - 1),
            tpot_ms=5.0,
        )
        for n in (16, 64, 256)
    ]
    # e2e = 10 + 0.1 × input + 5 × (out − 1); p90 at input 1000: 610 ms; 300 ms needs out − 1 ≤ 38
    verdicts = evaluate(rows, {"code": targets(e2e_ms=300)})
    text = "\n".join(target_advice(what_it_takes(verdicts, rows, "baseline"))["code"])
    assert "e2e p90 610 ms" in text and "decode-bound" in text
    assert "cap the output at ~39 tokens" in text
    assert "No other variant was measured" in text


# -- projections ---------------------------------------------------------------------------------


def test_fit_recovers_a_known_line_and_its_interval_narrows_with_data():
    line = fit([1, 2, 3, 4], [3, 5, 7, 9])
    assert line.slope == pytest.approx(2) and line.intercept == pytest.approx(1)
    assert line.at(10).value == pytest.approx(21) and line.at(10).lo == pytest.approx(21)
    assert line.solve(21) == pytest.approx(10)
    noisy = fit([1, 2, 3, 4, 5, 6], [3.1, 4.9, 7.2, 8.8, 11.1, 12.9])
    near, far = noisy.at(3.5), noisy.at(30)
    assert near.lo < near.value < near.hi and (far.hi - far.lo) > (near.hi - near.lo)
    assert noisy.extrapolated(30) and not noisy.extrapolated(3)
    assert fit([5, 5], [1, 2]) is None


def test_project_adds_the_two_fits():
    rows = _linear_trials("b", 0.5, fixed=20.0, decode_ms=4.0, out=11)
    rows += [
        trial(
            "b",
            prompt=f"out-{n}",
            input_tokens=100,
            output_tokens=n,
            ttft_ms=70.0,
            e2e_ms=70.0 + 4.0 * (n - 1),
        )
        for n in (5, 50, 200)
    ]
    p = project(rows, "b", 3000, 300)
    assert p.ttft.value == pytest.approx(20 + 0.5 * 3000)
    assert p.e2e.value == pytest.approx(20 + 0.5 * 3000 + 4 * 299)
    assert any("extrapolated" in note for note in projection_data(p)["notes"])
    assert p.to_dict()["predicted"] is True


PROJECT_SPEC = """
name = "linear fakes"
repetitions = 2
warmup = 1

[[variants]]
name = "baseline"
strategy = "fake"
prefill_ms = 20
prefill_ms_per_token = 0.1
decode_ms_per_token = 2

[[variants]]
name = "cache"
strategy = "fake"
prefill_ms = 30
prefill_ms_per_token = 0.03
decode_ms_per_token = 2

[[workloads]]
name = "chat"
limit = 2
max_new_tokens = 8
targets = {ttft_ms = 50, tpot_ms = 1}

[[workloads]]
name = "sweep-input"
input_tokens = [64, 256, 1024]
max_new_tokens = 4

[[workloads]]
name = "sweep-output"
output_tokens = [8, 32, 64]
"""


@pytest.fixture(scope="module")
def linear_db(tmp_path_factory):
    root = tmp_path_factory.mktemp("targets")
    spec = root / "spec.toml"
    spec.write_text(textwrap.dedent(PROJECT_SPEC), encoding="utf-8")
    db = root / "results.db"
    result = CliRunner().invoke(cli, ["run", str(spec), "--db", str(db)])
    assert result.exit_code == 0, result.output
    return {"db": db, "root": root, "run": result}


def invoke(*args):
    return CliRunner().invoke(cli, [str(a) for a in args])


def test_projection_matches_the_fake_strategys_known_costs(linear_db):
    from workbench.store import Store

    with Store(linear_db["db"], create=False) as store:
        trials = store.trials(1)
    for variant, fixed, per_token in (("baseline", 20, 0.1), ("cache", 30, 0.03)):
        p = project(trials, variant, 800, 48)
        ttft, e2e = fixed + per_token * 800, fixed + per_token * 800 + 2 * 47
        assert p.ttft.value == pytest.approx(ttft, rel=0.03), (variant, p.ttft)
        assert p.e2e.value == pytest.approx(e2e, rel=0.03), (variant, p.e2e)
        # the slopes themselves are small numbers on a noisy (shared) clock: looser
        assert p.ttft_line.slope == pytest.approx(per_token, rel=0.1)
        assert p.decode_line.slope == pytest.approx(2, rel=0.1)
        assert p.e2e.lo < p.e2e.value < p.e2e.hi


def test_project_verb(linear_db):
    db = linear_db["db"]
    result = invoke("project", "1", "--db", db, "--input", 800, "--output", 48)
    assert result.exit_code == 0, result.output
    assert "Projected (a prediction" in result.stdout
    lines = result.stdout.splitlines()
    assert lines[1].split()[:4] == ["variant", "in", "tok", "out"]
    row = next(line for line in lines if line.startswith("baseline"))
    assert row.split()[1:3] == ["800", "48"]
    data = json.loads(invoke("project", "1", "--db", db, "--input", 4000, "--output", 300, "--json").stdout)
    assert [d["variant"] for d in data] == ["baseline", "cache"]
    assert data[0]["predicted"] is True and data[0]["e2e_ms"]["lo"] < data[0]["e2e_ms"]["value"]
    assert any("extrapolated" in n for n in data[0]["notes"])
    one = json.loads(
        invoke(
            "project", "1", "--db", db, "--input", 10, "--output", 2, "--variant", "cache", "--json"
        ).stdout
    )
    assert [d["variant"] for d in one] == ["cache"]
    bad = invoke("project", "1", "--db", db, "--input", 10, "--output", 2, "--variant", "nope")
    assert bad.exit_code == 2 and bad.output.strip().splitlines() == [
        "Error: variant 'nope' not in run 1; variants: baseline, cache"
    ]


def test_project_without_a_spread_of_lengths_is_one_error_line(tmp_path):
    spec = tmp_path / "s.toml"
    spec.write_text(
        "warmup = 0\n" + FAKE + "prefill_ms = 1\ndecode_ms_per_token = 0.1\n"
        '[[workloads]]\nname = "mine"\nprompts = ["a b c"]\nmax_new_tokens = 3\n',
        encoding="utf-8",
    )
    assert invoke("run", spec, "--db", tmp_path / "r.db").exit_code == 0
    result = invoke("project", "1", "--db", tmp_path / "r.db", "--input", 10, "--output", 5)
    assert result.exit_code == 2 and "no spread of lengths to fit" in result.output
    assert len(result.output.strip().splitlines()) == 1


# -- the CLI, JSON and the report ------------------------------------------------------------------


def test_run_and_show_print_who_meets_the_targets_and_what_it_takes(linear_db):
    for result in (linear_db["run"], invoke("show", "1", "--db", linear_db["db"])):
        # by default one line per workload: its targets, who meets them, who misses which
        section = text_section(result.stdout, "Experience targets (per workload: which variants meet them)")
        chat = next(line for line in section.splitlines() if line.strip().startswith("chat ("))
        assert "TTFT ≤ 50 ms, TPOT ≤ 1 ms at p90" in chat and "missed by baseline (TTFT, TPOT)" in chat
    out = invoke("show", "1", "--db", linear_db["db"], "--detail").stdout  # the table and the advice
    section = out[out.index("Experience targets (per workload: which variants meet them)") :]
    lines = section.splitlines()
    at = next(i for i, line in enumerate(lines) if line.split()[:2] == ["workload", "targets"])
    assert lines[at].split()[:5] == ["workload", "targets", "variant", "verdict", "goodput"]
    assert "TTFT ≤ 50 ms, TPOT ≤ 1 ms at p90" in lines[at + 2]
    baseline = lines[at + 2]
    assert "baseline" in baseline and "missed" in baseline and "0% (0/4 req)" in baseline
    assert "✗" in baseline
    assert "What would it take — chat:" in section
    assert re.search(r"baseline: TPOT p90 [\d.]+ ms .* decode-bound", section, re.S)
    assert re.search(r"cache \(fake\) [\d.,]+ ms \([\d.]+x\)", section)  # x: a speed-up
    assert "Prediction:" in section


def test_json_carries_targets_and_goodput(linear_db):
    db = linear_db["db"]
    shown = json.loads(invoke("show", "1", "--db", db, "--json").stdout)
    assert {"targets", "goodput", "target_advice"} <= set(shown)
    chat = [v for v in shown["targets"] if v["workload"] == "chat"]
    assert [v["variant"] for v in chat] == ["baseline", "cache"]
    base = chat[0]
    assert base["targets"] == {"ttft_ms": 50.0, "tpot_ms": 1.0, "percentile": 90.0, "source": "spec"}
    assert [c["metric"] for c in base["checks"]] == ["ttft_ms", "tpot_ms"]
    assert base["checks"][1]["status"] == "missed" and base["checks"][1]["measured"]["value"] > 1
    assert shown["goodput"]["chat"] == {"baseline": 0.0, "cache": 0.0}
    row = next(s for s in shown["summary"] if (s["variant"], s["workload"]) == ("cache", "chat"))
    assert row["goodput"] == 0.0 and row["targets"]["status"] == "missed"
    sweep = next(s for s in shown["summary"] if s["workload"] == "sweep-input")
    assert sweep["targets"] is None and sweep["goodput"] is None
    compared = json.loads(invoke("compare", "1", "--db", db, "--json").stdout)
    row = next(s for s in compared if (s["variant"], s["workload"]) == ("baseline", "chat"))
    assert row["goodput"] == 0.0 and row["targets"]["checks"][0]["metric"] == "ttft_ms"


def test_compare_two_runs_side_by_side_shows_the_targets(linear_db):
    db = linear_db["db"]
    spec = linear_db["root"] / "spec.toml"
    assert invoke("run", spec, "--db", db).exit_code == 0
    result = invoke("compare", "1", "2", "--db", db, "--baseline", "baseline")
    assert result.exit_code == 0, result.output
    assert "Experience targets" in result.stdout and "2:baseline" in result.stdout


def test_report_shows_target_attainment(linear_db):
    from workbench.analysis.run import analyze_run
    from workbench.charts import run_charts
    from workbench.report.documents import html_report, markdown_report
    from workbench.store import Store

    with Store(linear_db["db"], create=False) as store:
        analysis = analyze_run(store.load_run(1))
    charts = {c.name: c for c in run_charts(analysis)}
    chart = charts["targets"]
    rows = chart.rows()
    assert {(r["variant"], r["metric"]) for r in rows} == {
        ("baseline", "ttft_ms"),
        ("baseline", "tpot_ms"),
        ("cache", "ttft_ms"),
        ("cache", "tpot_ms"),
    }
    assert all(r["goodput"] == 0.0 and r["workload"] == "chat" for r in rows)
    md = markdown_report(analysis, {"targets": "targets.png"}, list(charts.values()))
    # the verdict first, the targets after the main table, the notes after them
    assert md.index("## Verdict") < md.index("## Per variant") < md.index("## Experience targets")
    section = md[md.index("## Experience targets") : md.index("## How the trials ran")]
    assert "![Target attainment per variant](targets.png)" in section
    assert "| workload | targets | variant | verdict | goodput | TTFT ms | TPOT ms |" in section
    assert "- What would it take — chat: Prediction:" in section
    page = html_report(analysis, charts=list(charts.values()))
    assert "<h2>Experience targets (per workload: which variants meet them)</h2>" in page
    assert "TTFT ≤ 50 ms, TPOT ≤ 1 ms at p90" in page


# -- the GUI -------------------------------------------------------------------------------------------


def test_gui_results_column_chart_and_advice(linear_db, qtbot, tmp_path):
    pytest.importorskip("PySide6")
    from workbench.gui import charts as gui_charts
    from workbench.gui.chartview import ChartPanel, describe
    from workbench.gui.loading import load_results
    from workbench.gui.results import COLUMNS, SummaryTableModel
    from workbench.gui.results_view import advice_html

    data = load_results(linear_db["db"], (1,))
    model = SummaryTableModel()
    model.set_summaries(data.summaries, {}, data.verdicts)
    column = [header for header, _, _ in COLUMNS].index("targets")
    cells = {
        (model.summary(r).variant, model.summary(r).workload): model.index(r, column).data()
        for r in range(model.rowCount())
    }
    assert cells[("baseline", "chat")].startswith("missed TTFT, TPOT · goodput 0% (0/")  # of N requests
    assert cells[("baseline", "chat")].endswith(" requests)")
    assert cells[("cache", "chat")].startswith("missed TPOT")
    assert cells[("baseline", "sweep-input")] == ""
    assert "Experience targets" in advice_html(data) and "Prediction:" in advice_html(data)
    chart = next(c for c in data.charts if c.key == "targets")
    panel = ChartPanel()
    qtbot.addWidget(panel)
    panel.set_charts(data.charts)
    panel.show_tab("targets")
    panel.draw_all()
    widget = panel.widgets["targets"]
    plot = gui_charts.plot_items(widget)[0]
    text = describe(chart, plot, 10, 1.0)
    assert text.startswith("<b>baseline</b> on <b>chat</b>: missed") and "TPOT p90" in text
    path = gui_charts.save_png(chart, tmp_path / "targets.png")
    assert path.stat().st_size > 5000
    # two runs side by side get the chart too
    assert invoke("run", linear_db["root"] / "spec.toml", "--db", linear_db["db"]).exit_code == 0
    with Store(linear_db["db"]) as store:
        latest = store.resolve_run("latest")["id"]  # other tests of this module may have added runs
    both = load_results(linear_db["db"], (1, latest))
    assert any(c.key == "targets" for c in both.charts) and both.verdicts


def test_gui_workload_picker_edits_targets(qtbot):
    pytest.importorskip("PySide6")
    from workbench.gui.builder import ExperimentBuilder
    from workbench.gui.draft import SpecDraft
    from workbench.gui.targets_dialog import TargetsDialog

    builder = ExperimentBuilder()
    qtbot.addWidget(builder)
    builder.set_draft(SpecDraft.from_text(FAKE + '[[workloads]]\nname = "code"\n'))
    builder.validate()
    assert "targets: e2e ≤ 500 ms at p90 (built-in)" in builder.builtin_labels["code"][0].text()
    builder.set_workload_targets("chat", {"ttft_ms": 400, "tpot_ms": 50})  # ticks chat first
    assert builder.builtin_boxes["chat"].isChecked()
    spec = builder.validate()
    assert spec.workloads[1].targets.describe() == "TTFT ≤ 400 ms, TPOT ≤ 50 ms at p90"
    assert "targets = {ttft_ms = 400, tpot_ms = 50}" in builder.draft.to_toml()
    assert "TTFT ≤ 400 ms" in builder.builtin_labels["chat"][0].text()
    builder.set_workload_targets("chat", None)  # back to the built-in defaults
    assert builder.validate().workloads[1].targets == builtin_targets("chat")

    dialog = TargetsDialog("chat", None, builtin_targets("chat"))
    qtbot.addWidget(dialog)
    assert dialog.edits["ttft_ms"].text() == "1000" and dialog.table() is None  # unchanged: defaults
    dialog.edits["ttft_ms"].setText("250")
    dialog.edits["e2e_ms"].setText("4000")
    dialog.percentile.setValue(99)
    assert dialog.table() == {"ttft_ms": 250, "tpot_ms": 100, "e2e_ms": 4000, "percentile": 99}
    dialog.edits["tpot_ms"].setText("")
    assert "tpot_ms" not in dialog.table()


def test_gui_what_if_dialog_projects_the_run_on_screen(linear_db, qtbot):
    pytest.importorskip("PySide6")
    from workbench.gui.projection_dialog import ProjectionDialog
    from workbench.store import Store

    with Store(linear_db["db"], create=False) as store:
        trials = store.trials(1, include_warmup=True)  # the view's trials: warm-ups flagged
    dialog = ProjectionDialog(trials)
    qtbot.addWidget(dialog)
    dialog.input_tokens.setValue(800)
    dialog.output_tokens.setValue(48)
    table = dialog.table
    assert [table.item(r, 0).text() for r in range(table.rowCount())] == ["baseline", "cache"]
    ttft = float(table.item(0, 1).text().split()[0])
    assert ttft == pytest.approx(20 + 0.1 * 800, rel=0.03)
    e2e = table.item(0, 3).text()
    assert "[" in e2e and float(e2e.split()[0]) == pytest.approx(20 + 80 + 2 * 47, rel=0.03)
    dialog.input_tokens.setValue(5000)
    assert "extrapolated" in dialog.notes.text()
