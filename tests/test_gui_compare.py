"""The GUI's compare view of two runs on a real (offscreen) window: the before → after chart, the
verdict of `workbench compare A B`, honest empty states, and the comparison's export. Real fake-strategy
runs into a real SQLite file (QT_QPA_PLATFORM=offscreen, tests/conftest.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

pytest.importorskip("PySide6")

from cli_helpers import invoke
from test_two_runs import AFTER, BEFORE

from workbench.gui.main_window import MainWindow
from workbench.gui.settings import GuiSettings
from workbench.run.execute import RunExecutor
from workbench.spec.parse import parse_spec
from workbench.store import Store

pytestmark = pytest.mark.usefixtures("gui_settings")  # each test its own settings file


@pytest.fixture(scope="module")
def compared_db(tmp_path_factory):
    path = tmp_path_factory.mktemp("gui-compare") / "results.db"
    with Store(path) as store:
        for text in (BEFORE, AFTER):
            assert RunExecutor(parse_spec(text), store).run().status == "ok"
    return path


def open_compare(qtbot, db):
    window = MainWindow(Path(db), settings=GuiSettings())
    qtbot.addWidget(window, before_close_func=lambda w: w.run_control.stop_run_and_wait())
    window.show()
    qtbot.waitUntil(lambda: window.is_ready, timeout=10_000)
    window.results_view.show_runs((1, 2))
    qtbot.waitUntil(lambda: window.results is not None and window.results.run_ids == (1, 2), timeout=20_000)
    return window


def test_compare_view_charts_verdict_and_empty_states(qtbot, compared_db):
    window = open_compare(qtbot, compared_db)
    data = window.results
    keys = [c.key for c in data.charts]
    assert "before-after" in keys and "speedup" not in keys
    window.show_tab("speedup")  # the Speed-up tab holds it
    window.charts.draw_all()
    assert window.charts.current_chart().key == "before-after"
    # the same words as `workbench compare 1 2`
    verdict = window.verdict.text()
    assert window.verdict.isVisibleTo(window) and "Verdict (run 2 against run 1" in verdict
    assert "fast on code: run 2 slower" in verdict and "new: not compared — only in run 2" in verdict
    text = invoke("compare", "1", "2", "--db", compared_db).stdout
    assert "fast on code: run 2 slower" in text
    assert "decode_ms_per_token 0.2 → 1.5" in window.advice.toPlainText()
    # tabs drawn for one run at a time say so; none claims "no speculative variants in this run"
    empty = {window.charts.tabText(i): label.text() for i, label in enumerate(window.charts._empty)}
    for tab in ("Timeline", "Acceptance", "Sweeps", "Quality"):
        assert empty[tab].startswith("Comparing runs 1 and 2:"), empty[tab]
        assert "open run 1 or run 2" in empty[tab]
    assert "No speculative variants" not in empty["Acceptance"]
    # a variant keeps its colour in both runs and in the before → after chart
    headline = next(c for c in data.charts if c.key == "headline")
    before_after = next(c for c in data.charts if c.key == "before-after")
    assert headline.colours["1:fast"] == headline.colours["2:fast"] == before_after.colours["fast"]
    # back to one run: the defaults again
    window.results_view.show_runs((1,))
    qtbot.waitUntil(lambda: window.results.run_ids == (1,), timeout=20_000)
    assert window.charts._empty[1].text().startswith("No token timelines")


def test_compare_view_exports_the_comparison(qtbot, compared_db, tmp_path):
    window = open_compare(qtbot, compared_db)
    for action in (window.export_report_action, window.export_all_action, window.export_data_action):
        assert action.isEnabled()
    report = window.export_actions.export_report(path=tmp_path / "report.html")
    html = report.read_text(encoding="utf-8")
    assert html.index('class="verdict"') < html.index('class="table"')
    # the charts on screen, the before → after chart among them: the list `compare A B --out` exports
    shown = [c.name for c in window.results.charts]
    assert "before-after" in shown and html.count("data:image/png;base64,") == len(shown)
    written = window.export_actions.export_all(out_dir=tmp_path / "all")
    assert {"report.html", "summary.md", "comparison.csv", *(f"{n}.png" for n in shown)} <= {
        p.name for p in written
    }
    cli = tmp_path / "cli"
    assert invoke("compare", "1", "2", "--db", compared_db, "--out", cli, "--format", "csv").exit_code == 0
    assert {p.stem for p in cli.glob("*.csv")} == {"comparison", *shown}  # the same list
    assert "open report.html" in window.statusBar().currentMessage()
    data_only = window.export_actions.export_data(out_dir=tmp_path / "data")
    assert {p.suffix for p in data_only} == {".csv", ".json"}
    saved = json.loads((tmp_path / "data" / "comparison.json").read_text(encoding="utf-8"))
    shown = {(c.variant, c.workload): c.speedup_e2e.value for c in window.results.comparisons}
    assert {(c["variant"], c["workload"]): c["speedup_e2e"]["value"] for c in saved["comparisons"]} == shown
