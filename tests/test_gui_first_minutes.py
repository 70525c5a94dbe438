"""The app's first minutes, on a real (offscreen) window: the builder starts on a comparison, names
variants from their strategy, refuses a run of one variant, takes a variant's ``python`` and the run's
``workers``; a run's stored spec goes back into the builder; the sample run opens from the first-start
page; the title names the run and the database; the Log tab is never blank; the results table's
column chooser is remembered; the charts' captions and labels say what they show."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

pytest.importorskip("PySide6")

from PySide6.QtWidgets import QApplication

from workbench.gui.draft import SpecDraft, suggested_name
from workbench.gui.main_window import MainWindow
from workbench.gui.results import COLUMNS, DEFAULT_COLUMNS
from workbench.gui.settings import GuiSettings
from workbench.run.execute import RunExecutor
from workbench.spec.parse import parse_spec
from workbench.store import Store

pytestmark = pytest.mark.usefixtures("gui_settings")  # each test its own settings file

FAKE_SPEC = """
name = "{name}"
repetitions = {reps}
warmup = 0
[[variants]]
name = "baseline"
strategy = "fake"
prefill_ms = 5
decode_ms_per_token = 2
[[variants]]
name = "fast"
strategy = "fake"
prefill_ms = 5
decode_ms_per_token = 1
tokens_per_step = 2
[[workloads]]
name = "code"
limit = 2
max_new_tokens = 6
targets = {{ e2e_ms = 10000, percentile = 90 }}
"""


@pytest.fixture(scope="module")
def runs_db(tmp_path_factory):
    """Two finished fake runs (real worker processes): one repetition, then two."""
    path = tmp_path_factory.mktemp("first-minutes") / "results.db"
    with Store(path) as store:
        RunExecutor(parse_spec(FAKE_SPEC.format(name="one rep", reps=1)), store).run()
        RunExecutor(parse_spec(FAKE_SPEC.format(name="three reps", reps=3)), store).run()
    return path


def open_window(qtbot, db_path, **kwargs):
    window = MainWindow(Path(db_path), settings=GuiSettings(), **kwargs)
    qtbot.addWidget(window, before_close_func=lambda w: w.run_control.stop_run_and_wait())
    window.show()
    qtbot.waitUntil(lambda: window.is_ready, timeout=10_000)
    return window


def wait_results(qtbot, window, run_ids):
    qtbot.waitUntil(
        lambda: window.results is not None and window.results.run_ids == tuple(run_ids), timeout=20_000
    )
    return window.results


# -- the builder ------------------------------------------------------------------------------------


def test_the_builder_starts_with_two_variants_and_run_enabled(qtbot, db_path):
    window = open_window(qtbot, db_path)
    b = window.builder
    assert [v["name"] for v in b.draft.variants] == ["baseline", "prompt-lookup"]
    assert b.variant_list.count() == 2
    spec = b.validate()
    assert spec is not None, b.error
    assert [v.strategy for v in spec.variants] == ["baseline", "prompt-lookup"]
    assert spec.variants[0].model == spec.variants[1].model  # no second model to fetch
    assert b.run_btn.isEnabled() and not b.variant_hint.isVisible()


def test_one_variant_disables_run_and_says_why(qtbot, db_path):
    window = open_window(qtbot, db_path)
    b = window.builder
    b.variant_list.setCurrentRow(1)
    b.remove_variant()
    assert b.validate() is not None and b.error is None  # a valid spec (it can be saved), but
    assert not b.run_btn.isEnabled()
    assert b.run_btn.toolTip() == "Add a second variant to compare against"
    assert "Add a second variant to compare against" in b.status.text()
    assert not b.variant_hint.isHidden()
    assert not window.run_control.start_run()
    assert "Add a second variant to compare against" in window.last_message
    assert window.run_thread is None
    for w in QApplication.topLevelWidgets():
        if w.objectName() == "errorBox":
            w.close()
    b.add_variant()  # two again: Run comes back
    assert b.validate() is not None and b.run_btn.isEnabled()


def test_new_variants_are_named_from_their_strategy_and_never_variant(qtbot, db_path):
    draft = SpecDraft.new()
    added = draft.add_variant()
    assert added["name"] == "baseline-2" and added["strategy"] == "baseline"
    assert draft.duplicate_variant(1)["name"] == "prompt-lookup-2"
    assert suggested_name({"strategy": "onnxruntime-genai", "precision": "int8"}) == "int8-ort"
    assert suggested_name({"strategy": "onnxruntime-genai"}) == "int4-ort"  # its default precision
    assert suggested_name({"strategy": "quantized", "method": "bnb-nf4"}) == "bnb-nf4"
    assert suggested_name({"strategy": "llama-cpp", "gguf_type": "Q4_K_M"}) == "q4_k_m-llama"
    assert suggested_name({"strategy": "my_pkg.strategies:Turbo"}) == "Turbo"

    window = open_window(qtbot, db_path)
    b = window.builder
    b.add_variant()
    assert b.v_name.text() == "baseline-2"
    b.v_strategy.setCurrentText("prompt-lookup")  # the name the builder gave follows the strategy
    assert b.draft.variants[2]["name"] == "prompt-lookup-2" and b.v_name.text() == "prompt-lookup-2"
    b.v_strategy.setCurrentText("onnxruntime-genai")
    assert b.draft.variants[2]["name"] == "int4-ort"
    b._param_form.editor("precision").setCurrentText("int8")
    assert b.draft.variants[2]["name"] == "int8-ort"
    assert b.variant_list.item(2).text() == "int8-ort  (onnxruntime-genai)"
    # a name the person typed stays
    b.v_name.setText("mine")
    b.v_name.editingFinished.emit()
    b.v_strategy.setCurrentText("prompt-lookup")
    assert b.draft.variants[2]["name"] == "mine"
    # and the first variant keeps "baseline" whatever its strategy
    b.variant_list.setCurrentRow(0)
    b.v_strategy.setCurrentText("fake")
    assert b.draft.variants[0]["name"] == "baseline"
    names = [v["name"] for v in b.draft.variants]
    assert len(set(names)) == len(names) and "variant" not in names


def test_the_builder_writes_a_variants_python_and_the_runs_workers(qtbot, tmp_path):
    window = open_window(qtbot, tmp_path / "new.db")
    b = window.builder
    assert "interleaved and paired" in b.python_note.text()  # the note on A/B-testing a code change
    assert b.workers.currentText() == "per-repetition" and "workers" not in b.draft.top
    b.workers.setCurrentText("one")
    b.variant_list.setCurrentRow(1)
    b.v_python.setText(sys.executable)
    b.v_python.editingFinished.emit()
    assert b.draft.variants[1]["python"] == sys.executable
    spec = b.validate()
    assert spec is not None, b.error
    assert spec.workers == "one"
    assert spec.variants[1].python == sys.executable and spec.variants[0].python is None
    saved = tmp_path / "ab.toml"
    assert window.file_actions.save_to(saved)
    again = SpecDraft.load(saved)
    b.set_draft(again)  # loaded back into the form as it was
    assert b.workers.currentText() == "one"
    b.variant_list.setCurrentRow(1)
    assert b.v_python.text() == sys.executable
    b.v_python.setText("")  # emptied: the workbench's own again
    b.v_python.editingFinished.emit()
    assert "python" not in b.draft.variants[1]


# -- the viewer ------------------------------------------------------------------------------------


def test_edit_a_runs_spec_change_it_and_run_again(qtbot, tmp_path, runs_db):
    db = tmp_path / "copy.db"
    db.write_bytes(runs_db.read_bytes())
    window = open_window(qtbot, db)
    wait_results(qtbot, window, (2,))
    window.results_view.show_runs((1,))
    wait_results(qtbot, window, (1,))
    assert window.edit_spec_action.isEnabled()
    window.edit_spec_action.trigger()
    b = window.builder
    assert window.tabs.currentWidget() is window.experiment_page
    stored = parse_spec(Store(db, create=False).resolve_run(1)["spec"])
    spec = b.validate()
    assert spec is not None, b.error
    assert [(v.name, v.config) for v in spec.variants] == [(v.name, v.config) for v in stored.variants]
    assert [w.name for w in spec.workloads] == ["code"] and spec.repetitions == stored.repetitions
    assert b.draft.path is None  # Save asks where: not a file of the user's
    # change it and run again
    b.name_edit.setText("edited")
    b.name_edit.textEdited.emit("edited")
    b.variant_list.setCurrentRow(1)
    b._param_form.editor("tokens_per_step").setValue(3)
    assert b.validate() is not None
    with qtbot.waitSignal(window.runFinished, timeout=60_000) as finished:
        assert window.run_control.start_run()
    result = finished.args[0]
    assert result.status == "ok"
    rerun = parse_spec(Store(db, create=False).resolve_run(result.run_id)["spec"])
    assert rerun.name == "edited" and rerun.variants[1].config.tokens_per_step == 3
    assert rerun.variants[0].config == stored.variants[0].config
    qtbot.waitUntil(lambda: window.run_thread is None, timeout=10_000)
    # the History tab's button does the same for the selected run
    window.history.select_run(2)
    with qtbot.waitSignal(window.history.editSpecRequested, timeout=2_000) as asked:
        window.history.edit_spec_btn.click()
    assert asked.args == [2]
    assert window.builder.draft.name == "three reps"


def test_the_sample_run_opens_from_the_first_start_page(qtbot, tmp_path, monkeypatch):
    from workbench.gui import file_actions

    copy = tmp_path / "data" / "sample-demo.db"
    monkeypatch.setattr(file_actions, "sample_copy_path", lambda: copy)
    window = open_window(qtbot, tmp_path / "empty.db")
    assert window.results_stack.currentWidget() is window.welcome
    assert window.welcome.sample_btn.isEnabled() and window.welcome.demo_btn.isEnabled()
    window.welcome.sample_btn.click()
    results = wait_results(qtbot, window, (1,))
    assert copy.is_file() and window.db_path == copy
    assert results.runs[0]["name"].startswith("demo")
    assert len(results.summaries) == 6  # 2 baseline, 3 decode levers (summarise), prefix cache (conversation)
    assert window.windowTitle() == f"Run 1 — {results.runs[0]['name']} — sample-demo.db — Workbench"


def test_viewer_mode_disables_the_demo_with_the_reason_beside_it(qtbot, tmp_path):
    window = open_window(qtbot, tmp_path / "empty.db", viewer="Install the engine to run (pretend).")
    w = window.welcome
    assert not w.demo_btn.isEnabled()
    assert "pretend" in w.demo_btn.toolTip()
    assert not w.note.isHidden() and "Install the engine to run (pretend)." in w.note.text()
    assert "Open the sample run" in w.note.text() and w.sample_btn.isEnabled()


def test_the_title_names_the_run_and_the_database(qtbot, runs_db):
    window = open_window(qtbot, runs_db)
    wait_results(qtbot, window, (2,))
    assert window.windowTitle() == "Run 2 — three reps — results.db — Workbench"
    window.results_view.show_runs((1, 2))
    wait_results(qtbot, window, (1, 2))
    assert window.windowTitle() == "Run 2 against run 1 — results.db — Workbench"


def test_the_log_tab_is_never_blank(qtbot, runs_db):
    window = open_window(qtbot, runs_db)
    assert window.log.toPlainText() == ""  # nothing logged yet: the placeholder says what will be
    text = window.log.placeholderText()
    assert "what the workers report" in text and "Ctrl+R" in text and "Run the demo" in text


# -- the results table -------------------------------------------------------------------------------


def visible(window):
    return [c[0] for i, c in enumerate(COLUMNS) if not window.table.isColumnHidden(i)]


def test_the_table_shows_the_first_read_columns_and_remembers_the_choice(qtbot, runs_db, gui_settings):
    window = open_window(qtbot, runs_db)
    wait_results(qtbot, window, (2,))
    assert visible(window) == list(DEFAULT_COLUMNS) and len(DEFAULT_COLUMNS) <= 10
    chooser = window.table.column_chooser
    menu = chooser.menu()
    texts = [a.text() for a in menu.actions()]
    assert texts[: len(COLUMNS)] == [c[0] for c in COLUMNS] and "Show all" in texts
    checked = {a.text() for a in menu.actions() if a.isCheckable() and a.isChecked()}
    assert checked == set(DEFAULT_COLUMNS)
    next(a for a in menu.actions() if a.text() == "n").trigger()  # shown
    next(a for a in menu.actions() if a.text() == "KLD").trigger()  # hidden
    assert "n" in visible(window) and "KLD" not in visible(window)
    window.close()
    assert "n" in GuiSettings().table_columns

    again = open_window(qtbot, runs_db)
    assert visible(again) == [h for h in visible(window)]
    next(a for a in again.table.column_chooser.menu().actions() if a.text() == "Show all").trigger()
    assert visible(again) == [c[0] for c in COLUMNS]
    assert GuiSettings().table_columns == [c[0] for c in COLUMNS]


def test_the_phase_is_the_rows_own_and_targets_say_what_they_count(qtbot, runs_db):
    from workbench.analysis.phases import classify

    window = open_window(qtbot, runs_db)
    results = wait_results(qtbot, window, (2,))
    model = window.table_model
    phase, share, targets = (
        next(i for i, c in enumerate(COLUMNS) if c[0] == h) for h in ("phase", "prefill share", "targets")
    )
    for row, s in enumerate(results.summaries):
        own = s.metrics["ttft_ms"].value / s.metrics["e2e_ms"].value
        assert model.index(row, share).data() == f"{own:.0%}"
        assert model.index(row, phase).data() == classify(own)
        assert "the baseline's" in model.index(row, phase).data(3)  # the tooltip names the workload's
        text = model.index(row, targets).data()
        assert text.startswith("met 1/1 targets · goodput ") and text.endswith(f"/{s.n_ok} requests)")


# -- charts -----------------------------------------------------------------------------------------


def _texts(widget):
    import pyqtgraph as pg

    from workbench.gui import charts
    from workbench.gui.chartkinds.base import WrapLabel

    out = []
    for plot in charts.plot_items(widget):
        out += [i.textItem.toPlainText() for i in plot.items if isinstance(i, pg.TextItem)]
    out += [i.text for i in widget.ci.items if isinstance(i, pg.LabelItem)]
    # titles, legends and captions wrap to the canvas' width: their pieces (HTML), one text each
    out += [" ".join(i.pieces) for i in widget.ci.items if isinstance(i, WrapLabel)]
    return out


def test_the_speedup_chart_with_one_repetition_calls_nothing_faster(qtbot, runs_db):
    from workbench.analysis.run import analyze_run
    from workbench.charts.speedup import speedup_chart
    from workbench.gui import charts

    store = Store(runs_db, create=False)
    one = speedup_chart(analyze_run(store.load_run(1)))
    three = speedup_chart(analyze_run(store.load_run(2)))
    assert not one.has_intervals and three.has_intervals
    with charts.render(one, notes=True) as widget:
        texts = _texts(widget)
    labels = [t for t in texts if t.endswith("x · no interval")]  # "1.46x · no interval"
    assert len(labels) == 1  # one variant against the baseline, one workload
    caption = next(t for t in texts if "geometric mean" in t)
    assert not any("faster" in t or "slower" in t or "significant" in t for t in texts if t != caption)
    assert "One repetition: no interval" in caption and "Whiskers" not in caption
    assert "geometric mean" in caption and "Ratio of medians" not in caption
    with charts.render(three) as widget:
        texts = _texts(widget)
    assert any("[" in t and ("faster" in t or "slower" in t or "not significant" in t) for t in texts)
    assert not any("geometric mean" in t for t in texts)  # exported without the caption
    assert "(×, > 1 is faster)" in one.x_axis.text and "(×)" not in one.x_axis.text


def test_chart_captions_legends_and_units(qtbot):
    from workbench import charts as cd
    from workbench.gui import charts
    from workbench.gui.chartkinds.base import WrapLabel

    timeline = cd.TimelineChart(title="t", variants=("a",))
    assert timeline.y_axis.text == "tokens generated"
    positions = cd.DraftPositionChart(
        title="p",
        variants=("base", "spec"),
        workloads=("chat", "code"),
        series=(
            cd.PositionSeries("spec", "chat", (1, 2), (90.0, 80.0), (10, 8), 85.0, 40.0, 2.17, 0.97),
            cd.PositionSeries("spec", "code", (1, 2), (70.0, 50.0), (10, 8), 60.0, 40.0, 1.2, 0.74),
        ),
        notes=["n"],
    )
    with charts.render(positions) as widget:
        legend = [
            p for i in widget.ci.items if isinstance(i, WrapLabel) for p in i.pieces if "spec · chat" in p
        ]
    assert legend and "decode 2.17x · e2e 0.97x" in legend[0]
    assert "&#9679;" in legend[0]  # each workload's marker: chat a circle, code a square
    code = [p for i in widget.ci.items if isinstance(i, WrapLabel) for p in i.pieces if "spec · code" in p]
    assert code and "&#9632;" in code[0]


def test_the_glossary_scrolls(qtbot, runs_db):
    window = open_window(qtbot, runs_db)
    dialog = window.show_glossary()
    qtbot.addWidget(dialog)
    qtbot.waitExposed(dialog)
    assert dialog.height() <= 600
    text = dialog.findChild(type(window.advice), "glossaryText")
    assert text.verticalScrollBar().maximum() > 0 and "TTFT" in text.toPlainText()


def test_the_x_equals_1_line_is_broken_where_a_label_or_header_sits_on_it(qtbot):
    import pyqtgraph as pg

    from workbench import charts as cd
    from workbench.gui import charts

    chart = cd.SpeedupChart(
        title="s",
        variants=("baseline", "slow", "fast"),
        baseline="baseline",
        points=(
            cd.SpeedupPoint("code", "slow", "e2e", 0.8, None, None),  # its label runs right, over x = 1
            cd.SpeedupPoint("code", "fast", "e2e", 1.3, None, None),
        ),
    )
    with charts.render(chart) as widget:
        plot = charts.plot_items(widget)[0]
        segments = []
        for item in plot.items:
            if isinstance(item, pg.PlotDataItem):
                x, y = item.getData()
                if len(x) == 2 and list(x) == [1.0, 1.0]:
                    segments.append(sorted(y))
    assert segments  # the line is there
    covered = lambda y: any(a <= y <= b for a, b in segments)  # noqa: E731
    assert not covered(0.0)  # the workload's header row
    assert not covered(1.0)  # slow: 0.80x, its label starts left of 1
    assert covered(2.0)  # fast: 1.30x, its label right of its point, clear of the line
