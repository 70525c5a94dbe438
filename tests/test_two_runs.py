"""Two runs compared: ``workbench compare A B`` (the report, ``--json``, ``--out``) and the GUI's
compare view give the same numbers, under one rule for disturbed trials; the before → after chart; a
variant's colour across runs; the comparison report's sections. Real fake-strategy runs through the
CLI into a real SQLite file."""

from __future__ import annotations

import csv
import json
import sqlite3

import pytest
from cli_helpers import assert_one_error_line, invoke, write

from workbench import charts as cd
from workbench.analysis.compare import compare_two_runs
from workbench.store import Store

BEFORE = """
name = "before"
repetitions = 3
warmup = 0

[[variants]]
name = "slow"
strategy = "fake"
prefill_ms = 2
decode_ms_per_token = 0.5

[[variants]]
name = "fast"
strategy = "fake"
prefill_ms = 1
decode_ms_per_token = 0.2

[[workloads]]
name = "code"
limit = 2
max_new_tokens = 6
"""

# the patch: "fast" got slower per token, "slow" unchanged, a variant only here
AFTER = (
    BEFORE.replace('name = "before"', 'name = "after"').replace(
        "decode_ms_per_token = 0.2", "decode_ms_per_token = 1.5"
    )
    + """
[[variants]]
name = "new"
strategy = "fake"
prefill_ms = 1
decode_ms_per_token = 0.1
"""
)


@pytest.fixture(scope="module")
def two_runs(tmp_path_factory):
    """Run 1 (before) and run 2 (after) of the fake strategy; one measured trial of run 1 flagged
    disturbed, so that the rule (left out when few) has something to decide."""
    root = tmp_path_factory.mktemp("two-runs")
    db = root / "results.db"
    for name, text in (("before", BEFORE), ("after", AFTER)):
        result = invoke("run", write(root / f"{name}.toml", text), "--db", db)
        assert result.exit_code == 0, result.output
    with sqlite3.connect(db) as conn:
        conn.execute("update trials set disturbed = 0, disturbance = null")
        (trial_id,) = conn.execute(
            "select id from trials where run_id = 1 and variant = 'fast' and warmup = 0 order by id limit 1"
        ).fetchone()
        conn.execute(
            "update trials set disturbed = 1, disturbance = 'waited 9 ms for a CPU (test)' where id = ?",
            [trial_id],
        )
    return db


def _estimates(item):
    """The speed-ups of one comparison as plain numbers (from to_dict() or the JSON)."""
    return {
        metric: (item[metric]["value"], item[metric]["lo"], item[metric]["hi"]) if item[metric] else None
        for metric in ("speedup_e2e", "speedup_ttft", "speedup_decode")
    }


def test_cli_json_and_the_gui_compare_view_agree_on_every_speedup(two_runs):
    from workbench.gui.loading import load_results

    cli = json.loads(invoke("compare", "1", "2", "--db", two_runs, "--json").stdout)
    gui = load_results(two_runs, (1, 2))
    by_key = {(c["variant"], c["workload"]): c for c in cli}
    assert (
        set(by_key)
        == {(c.variant, c.workload) for c in gui.comparisons}
        == {("slow", "code"), ("fast", "code")}
    )
    for c in gui.comparisons:
        assert _estimates(c.to_dict()) == _estimates(by_key[(c.variant, c.workload)])
    # the disturbed trial is left out by both (the default rule: few disturbed), and says so
    fast = by_key[("fast", "code")]
    assert fast["a"]["e2e_ms"]["n"] == 5 and fast["b"]["e2e_ms"]["n"] == 6
    assert fast["disturbed"]["run_a"]["disturbed"] == 1 and fast["disturbed"]["run_a"]["excluded"] is True
    assert gui.two_runs.disturbed[0].excluded is True
    # the chart the GUI draws plots those same numbers, per variant, RUN_B over RUN_A
    (chart,) = [c for c in gui.charts if isinstance(c, cd.BeforeAfterChart)]
    assert not any(type(c) is cd.SpeedupChart for c in gui.charts)  # not every variant vs 1:baseline
    plotted = {(p.variant, p.workload): (p.value, p.lo, p.hi) for p in chart.points if p.metric == "e2e"}
    assert plotted == {k: _estimates(v)["speedup_e2e"] for k, v in by_key.items()}
    # keeping the disturbed trial is another answer: the rule matters, and both sides share it
    kept = json.loads(invoke("compare", "1", "2", "--db", two_runs, "--json", "--include-disturbed").stdout)
    kept_fast = next(c for c in kept if c["variant"] == "fast")
    assert kept_fast["a"]["e2e_ms"]["n"] == 6 and kept_fast["disturbed"]["run_a"]["excluded"] is False


def test_the_patch_is_found_and_worded(two_runs):
    with Store(two_runs, create=False) as store:
        two = compare_two_runs(store.load_run(1), store.load_run(2))
    by_variant = {c.variant: c for c in two.comparisons}
    assert by_variant["fast"].change == "slower"  # 0.2 → 1.5 ms per token
    assert by_variant["fast"].speedup_e2e.hi < 1
    assert ("new", None, "only in run 2") in two.not_compared
    names = {(d.kind, d.name): (d.a, d.b) for d in two.differences}
    assert names[("variant", "fast: decode_ms_per_token")] == (0.2, 1.5)
    assert ("spec", "name") not in names  # the run's name is not a difference of the measurement
    assert not [d for d in two.differences if d.kind == "machine"]  # the same machine


def test_compare_prints_the_report_verdict_first_footnotes_on_stdout(two_runs):
    result = invoke("compare", "1", "2", "--db", two_runs)
    assert result.exit_code == 0, result.output
    assert result.stderr == ""  # the notes are part of the report: `compare > file` keeps them
    lines = result.stdout.splitlines()
    assert lines[0].startswith("Run 2 'after' against run 1 'before'")
    verdict = lines.index("Verdict (run 2 against run 1, end to end)")
    table = next(i for i, line in enumerate(lines) if line.startswith("Per variant × workload"))
    assert verdict < table < lines.index("Notes")
    said = "\n".join(lines[verdict:table])
    assert "fast on code: run 2 slower — e2e 0." in said
    assert "new: not compared — only in run 2" in said
    notes = "\n".join(lines[lines.index("Notes") :])
    assert "fast: decode_ms_per_token 0.2 → 1.5" in notes
    assert "Run 1: 1 of 12 trials disturbed (8%), left out of the speed-ups." in notes
    assert "inside ONE run" in notes and "`python =`" in notes
    assert max(len(line) for line in lines) <= 120
    paragraphs = [line for line in lines if len(line) > 60]
    assert len(paragraphs) == len(set(paragraphs))  # no paragraph printed twice


def test_compare_out_writes_the_comparison_report(two_runs, tmp_path):
    out = tmp_path / "cmp"
    result = invoke("compare", "1", "2", "--db", two_runs, "--out", out)
    assert result.exit_code == 0, result.output
    assert result.stderr.strip().splitlines()[-1].endswith(f"— open {out / 'report.html'}")
    names = {p.name for p in out.iterdir()}
    # the charts of two runs compared (the GUI's compare view shows the same list): the before → after
    # chart, and both runs side by side as each is alone (where the time goes, targets, memory)
    charts = ("before-after", "headline", "targets", "memory")
    assert names == {
        "report.html",
        "summary.md",
        "comparison.csv",
        "comparison.json",
        *(f"{chart}.{ext}" for chart in charts for ext in ("csv", "png", "svg")),
    }
    html = (out / "report.html").read_text(encoding="utf-8")
    assert (
        html.index('class="verdict"')
        < html.index('class="table"')
        < html.index('class="charts"')
        < html.index('class="notes"')
    )
    assert html.count("data:image/png;base64,") == len(charts)  # every chart embedded
    markdown = (out / "summary.md").read_text(encoding="utf-8")
    assert markdown.index("## Verdict") < markdown.index("## Per variant") < markdown.index("## Notes")
    assert "![Run 2 against run 1" in markdown
    listed = json.loads(invoke("compare", "1", "2", "--db", two_runs, "--json").stdout)
    with open(out / "comparison.csv", newline="", encoding="utf-8") as f:
        rows = {(r["variant"], r["workload"]): r for r in csv.DictReader(f)}
    for c in listed:
        assert float(rows[(c["variant"], c["workload"])]["speedup_e2e"]) == pytest.approx(
            c["speedup_e2e"]["value"]
        )
    saved = json.loads((out / "comparison.json").read_text(encoding="utf-8"))
    assert [c["speedup_e2e"] for c in saved["comparisons"]] == [c["speedup_e2e"] for c in listed]
    assert {"variant": "new", "workload": None, "reason": "only in run 2"} in saved["not_compared"]
    only_md = tmp_path / "md"
    assert invoke("compare", "1", "2", "--db", two_runs, "--out", only_md, "--format", "md").exit_code == 0
    assert {p.name for p in only_md.iterdir()} == {"summary.md"}


def test_compare_out_bad_input_is_one_error_line(two_runs, tmp_path):
    assert_one_error_line(invoke("compare", "1", "--db", two_runs, "--out", tmp_path / "x"), "two runs")
    assert_one_error_line(
        invoke("compare", "1", "2", "--db", two_runs, "--baseline", "fast", "--out", tmp_path / "x"),
        "two runs",
    )
    assert_one_error_line(
        invoke("compare", "1", "2", "--db", two_runs, "--out", tmp_path / "x", "--format", "gif"), "gif"
    )
    blocker = write(tmp_path / "file", "not a folder")
    refused = invoke("compare", "1", "2", "--db", two_runs, "--out", blocker)  # click's own check
    assert refused.exit_code == 2 and "is a file" in refused.output and "Verdict" not in refused.output


def test_a_variant_keeps_its_colour_in_both_runs():
    colours = cd.variant_colours(["1:baseline", "1:int8", "2:int8", "2:baseline", "2:spec"])
    assert colours["1:baseline"] == colours["2:baseline"] == cd.OKABE_ITO[0]
    assert colours["1:int8"] == colours["2:int8"] == cd.OKABE_ITO[1]
    assert colours["2:spec"] == cd.OKABE_ITO[2]
    # the before → after chart names them without the tag: the same colours
    assert cd.variant_colours(["baseline", "int8", "spec"]) == {
        "baseline": cd.OKABE_ITO[0],
        "int8": cd.OKABE_ITO[1],
        "spec": cd.OKABE_ITO[2],
    }
    assert cd.variant_colours(["q4:k", "q8:0"]) == {"q4:k": cd.OKABE_ITO[0], "q8:0": cd.OKABE_ITO[1]}


def test_before_after_chart_rows(two_runs):
    with Store(two_runs, create=False) as store:
        two = compare_two_runs(store.load_run(1), store.load_run(2))
    chart = cd.before_after_chart(two.comparisons, 1, 2)
    assert chart.name == "before-after" and chart.variants == ("slow", "fast")
    rows = chart.rows()
    assert {(r["variant"], r["metric"]) for r in rows} >= {
        ("slow", "e2e"),
        ("fast", "e2e"),
        ("fast", "decode"),
    }
    assert all((r["run_a"], r["run_b"]) == (1, 2) for r in rows)
    fast = next(r for r in rows if r["variant"] == "fast" and r["metric"] == "e2e")
    assert fast["significant"] is True and fast["speedup"] < 1
    assert cd.before_after_chart([], 1, 2) is None


def test_runs_names_the_database_and_export_names_report_html(two_runs, tmp_path):
    listed = invoke("runs", "--db", two_runs)
    assert listed.exit_code == 0, listed.output
    assert listed.stdout.splitlines()[-1] == f"Database: {two_runs}"
    out = tmp_path / "export"
    exported = invoke("export", "2", "--db", two_runs, "--out", out)
    assert exported.exit_code == 0, exported.output
    last = exported.stderr.strip().splitlines()[-1]
    assert last.startswith("wrote ") and last.endswith(f"— open {out / 'report.html'}")
    assert (out / "report.html").is_file()
    data_only = invoke("export", "2", "--db", two_runs, "--out", tmp_path / "md", "--format", "md")
    assert data_only.stderr.strip().splitlines()[-1].endswith(f"— read {tmp_path / 'md' / 'summary.md'}")
