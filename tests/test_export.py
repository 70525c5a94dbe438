"""`workbench export` on a run recorded with the fake strategy: every file is parsed, not just listed."""

from __future__ import annotations

import csv
import json
import re
import xml.etree.ElementTree as ET
from html.parser import HTMLParser
from pathlib import Path

import pytest
from click.testing import CliRunner

from workbench.analysis.phases import classify
from workbench.analysis.run import analyze_run
from workbench.charts import run_charts
from workbench.charts.headline import phase_caption
from workbench.cli import cli
from workbench.report.run_report import share_text
from workbench.store import Store

pytest.importorskip("pyqtgraph")
from PySide6 import QtGui, QtSvg

from workbench.gui import charts as qt_charts


def invoke(*args):
    return CliRunner().invoke(cli, [str(a) for a in args])


def read_csv(path: Path) -> list[dict[str, str]]:
    with open(path, newline="", encoding="utf-8") as f:
        return list(csv.DictReader(f))


class Page(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.tags: list[tuple[str, dict[str, str | None]]] = []

    def handle_starttag(self, tag, attrs):
        self.tags.append((tag, dict(attrs)))


@pytest.fixture(scope="module")
def exported(fake_run_db, tmp_path_factory):
    out = tmp_path_factory.mktemp("export")
    result = invoke("export", "1", "--out", out, "--db", fake_run_db)
    assert result.exit_code == 0, result.output
    with Store(fake_run_db, create=False) as store:
        analysis = analyze_run(store.load_run(1))
    return out, analysis, result


def test_every_chart_in_every_format(exported):
    out, analysis, result = exported
    names = [c.name for c in run_charts(analysis)]
    assert names[:2] == ["headline", "speedup"]
    assert {
        "timeline-rag",
        "ttft-vs-input",
        "decode-vs-output",
        "accepted-length",
        "memory",
        "roofline",
    } <= set(names)
    for name in names:
        for suffix in (".png", ".svg", ".csv"):
            assert (out / f"{name}{suffix}").stat().st_size > 0, name + suffix
    for name in (
        "trials.csv",
        "steps.csv",
        "summary.csv",
        "phases.csv",
        "summary.json",
        "summary.md",
        "report.html",
    ):
        assert (out / name).exists(), name
    assert f"to {out}" in result.output


def test_pngs_are_2x_and_svgs_parse_and_render(exported, qapp):
    out, analysis, _ = exported
    for chart in run_charts(analysis):
        img = QtGui.QImage(str(out / f"{chart.name}.png"))
        w, h = qt_charts.preferred_size(chart)
        # the kind's width; its height, or taller by what the title and legend take wrapped to it
        assert img.width() == 2 * w and img.height() >= 2 * h and img.height() % 2 == 0, chart.name
        root = ET.parse(out / f"{chart.name}.svg").getroot()
        assert root.tag.endswith("svg") and root.get("viewBox") == f"0 0 {w} {img.height() // 2}"
        assert QtSvg.QSvgRenderer(str(out / f"{chart.name}.svg")).isValid()


def test_csv_columns_and_counts(exported, fake_run_db):
    out, analysis, _ = exported
    trials = read_csv(out / "trials.csv")
    with Store(fake_run_db, create=False) as store:
        assert len(trials) == len(store.trials(1, include_warmup=True))
    headline = read_csv(out / "headline.csv")
    assert list(headline[0]) == [
        "workload",
        "variant",
        "prefill_ms",
        "decode_ms",
        "total_ms",
        "prefill_share",
        "n",
        "phase",
    ]
    assert len(headline) == len(analysis.summaries)
    summary = read_csv(out / "summary.csv")
    assert {"variant", "workload", "e2e_ms.value", "e2e_ms.lo", "speedup_e2e.value"} <= set(summary[0])
    sweep = read_csv(out / "ttft-vs-input.csv")
    assert {r["source"] for r in sweep} == {"sweep-input"}
    roof = read_csv(out / "roofline.csv")
    assert {"variant", "workload", "decode_tokens_per_s", "limit_tokens_per_s", "fraction_of_limit"} <= set(
        roof[0]
    )
    data = json.loads((out / "summary.json").read_text())
    assert [p["workload"] for p in data["phases"]] == ["rag", "code", "sweep-input", "sweep-output"]


def test_html_report_is_self_contained(exported):
    out, analysis, _ = exported
    text = (out / "report.html").read_text(encoding="utf-8")
    # no external resource, no link out: outside the embedded images, whose base64 (~1.5 M characters
    # of chart pixels that change with every run's timings) holds "http" by chance ~9 % of the time
    assert "http" not in re.sub(r"data:image/png;base64,[A-Za-z0-9+/=]+", "data:", text)
    page = Page()
    page.feed(text)
    images = [attrs for tag, attrs in page.tags if tag == "img"]
    assert len(images) == len(run_charts(analysis))
    assert all((a.get("src") or "").startswith("data:image/png;base64,") for a in images)
    assert not [a for tag, a in page.tags if tag in ("link", "script")]
    for phase in analysis.phases:
        assert phase_caption(phase) in text
    assert "Environment" in text and "Decode roofline" in text


def test_advice_matches_the_measured_shares(exported):
    out, analysis, _ = exported
    headline = {(r["workload"], r["variant"]): r for r in read_csv(out / "headline.csv")}
    markdown = (out / "summary.md").read_text(encoding="utf-8")
    for phase in read_csv(out / "phases.csv"):
        bar = headline[(phase["workload"], phase["variant"])]
        share = float(phase["prefill_share"])
        # the bar: split at the median TTFT the phase is measured from, as long as the table's e2e
        summary = next(s for s in analysis.summaries if (s.workload, s.variant) == tuple(bar.values())[:2])
        assert float(bar["prefill_ms"]) == pytest.approx(float(phase["prefill_ms"]))
        assert float(bar["total_ms"]) == pytest.approx(summary.metrics["e2e_ms"].value, rel=1e-5)  # 6 digits
        assert phase["label"] == classify(share)
        line = next(x for x in markdown.splitlines() if x.startswith(f"- {phase['workload']}: "))
        assert f"{phase['label']}: prefill {share_text(share, phase['label'])} of e2e" in line
        advice = json.loads(phase["advice"])
        if phase["label"] == "prefill-heavy":
            assert advice[0].startswith(f"Prefill is {share:.0%} of e2e")
        elif phase["label"] == "decode-heavy":
            assert advice[0].startswith(f"Decode is {1 - share:.0%} of e2e")
    for chart in run_charts(analysis):
        assert f"]({chart.name}.png)" in markdown


def test_rag_is_prefill_heavy_and_code_decode_heavy(exported):
    _, analysis, _ = exported
    phases = {p.workload: p for p in analysis.phases}
    # fake costs: 1 ms + 0.2 ms per input token of prefill, 1 ms per output token
    assert phases["rag"].label == "prefill-heavy"  # long context, 4 tokens out
    assert phases["code"].label == "decode-heavy"  # a few words in, 32 tokens out
    assert phases["rag"].ttft_ms_per_input_token == pytest.approx(0.2, rel=0.2)


def test_csv_only_needs_no_charts(fake_run_db, tmp_path):
    result = invoke("export", "1", "--out", tmp_path / "o", "--format", "csv", "--db", fake_run_db)
    assert result.exit_code == 0, result.output
    suffixes = {p.suffix for p in (tmp_path / "o").iterdir()}
    assert suffixes == {".csv", ".json"}


def test_bad_format_and_bad_folder_are_one_line_errors(fake_run_db, tmp_path):
    result = invoke("export", "1", "--out", tmp_path / "o", "--format", "png,gif", "--db", fake_run_db)
    assert result.exit_code == 2 and "unknown export format gif" in result.output
    assert "Traceback" not in result.output and not (tmp_path / "o").exists()
    blocker = tmp_path / "file"
    blocker.write_text("")
    result = invoke("export", "1", "--out", blocker, "--format", "csv", "--db", fake_run_db)
    assert result.exit_code == 2 and "Traceback" not in result.output
    result = invoke("export", "9", "--out", tmp_path / "o", "--db", fake_run_db)
    assert result.exit_code == 2 and "no run '9'" in result.output


def test_without_qt_csv_and_md_still_work_and_charts_say_what_to_install(fake_run_db, tmp_path, monkeypatch):
    import workbench.gui

    reason = "drawing charts needs PySide6 (pip install 'llm-workbench[gui]')"
    monkeypatch.setattr(workbench.gui, "charts_unavailable", lambda: reason)
    result = invoke("export", "1", "--out", tmp_path / "a", "--format", "png,csv", "--db", fake_run_db)
    assert result.exit_code == 2
    assert re.search(r"Error: cannot export png: .*pip install 'llm-workbench\[gui\]'", result.output)
    assert not (tmp_path / "a").exists()  # refused before anything was written
    result = invoke("export", "1", "--out", tmp_path / "b", "--db", fake_run_db)
    assert result.exit_code == 0, result.output
    assert "PNG, SVG and HTML skipped" in result.output
    assert {p.suffix for p in (tmp_path / "b").iterdir()} == {".csv", ".json", ".md"}


def test_names_and_prompts_are_escaped_in_summary_md_as_in_report_html(tmp_path):
    # a run, variant, workload and prompt id named like HTML and Markdown: summary.md must not
    # carry a tag, an entity or a link a Markdown renderer would run or follow (report.html escapes)
    from workbench.run.execute import RunExecutor
    from workbench.spec.parse import parse_spec

    hostile = '<img src=x onerror="alert(1)">'
    link = "[click](javascript:alert(2))"
    spec = (
        f"name = {json.dumps('run ' + hostile)}\nrepetitions = 2\nwarmup = 0\n"
        f'[[variants]]\nname = "base"\nstrategy = "fake"\n'
        f'[[variants]]\nname = {json.dumps("v " + hostile)}\nstrategy = "fake"\nprefill_ms = 5\n'
        f"[[workloads]]\nname = {json.dumps('w&amp;' + link)}\nmax_new_tokens = 4\n"
        f'prompts = [{{id = {json.dumps("p " + hostile)}, prompt = "hello there"}}]\n'
    )
    db = tmp_path / "x.db"
    result = RunExecutor(parse_spec(spec), Store(db)).run()
    assert result.status == "ok"
    out = tmp_path / "o"
    done = invoke("export", str(result.run_id), "--out", out, "--format", "md", "--db", db)
    assert done.exit_code == 0, done.output
    markdown = (out / "summary.md").read_text(encoding="utf-8")
    assert "v &lt;img src=x" in markdown  # the variant's name, as it reads
    assert "<img" not in markdown
    assert not re.search(r"(?<!\\)\]\(", markdown)  # no link: every ]( escaped
    assert "w&amp;amp;[click\\](javascript:alert(2))" in markdown  # the workload's name, as it reads
