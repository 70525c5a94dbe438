"""What if: intervals of projected times never below 0 (taken on a log scale), the default lengths
inside every variant's measured range (CLI and GUI), one warning per cause. Real fake-strategy runs
with known linear costs (tests/test_targets.py's spec) in a real SQLite file."""

from __future__ import annotations

import textwrap

import pytest
from cli_helpers import invoke
from test_targets import PROJECT_SPEC

from workbench.analysis.projection import ProjectionCause, default_lengths, fit, project
from workbench.report.targets import projection_data, projection_notes
from workbench.store import Store, TrialRecord


@pytest.fixture(scope="module")
def linear_db(tmp_path_factory):
    root = tmp_path_factory.mktemp("projection")
    spec = root / "spec.toml"
    spec.write_text(textwrap.dedent(PROJECT_SPEC), encoding="utf-8")
    db = root / "results.db"
    result = invoke("run", spec, "--db", db)
    assert result.exit_code == 0, result.output
    return db


def test_an_uncertain_line_gives_a_positive_lopsided_interval():
    # a noisy line, far outside its range: y ± t·se would reach below 0 here
    line = fit([1, 2, 3, 4, 5, 6], [10, 1, 14, 2, 15, 6])
    x = 40
    value, se = line.value(x), line.stderr(x)
    assert value > 0 and value - 2.776 * se < 0  # the linear interval's lower bound (t at 4 df)
    at = line.at(x)
    assert at.value == pytest.approx(value)
    assert 0 < at.lo < at.value < at.hi
    assert at.lo * at.hi == pytest.approx(at.value**2)  # symmetric on the log scale
    # a well-determined line: within a fraction of the linear interval's width
    tight = fit([1, 2, 3, 4, 5, 6], [3.01, 5.0, 6.99, 9.02, 11.0, 12.98]).at(3.5)
    half = tight.hi - tight.value
    assert tight.value - tight.lo == pytest.approx(half, rel=0.01)


def test_a_line_below_zero_projects_nothing_and_says_why():
    rows = [
        TrialRecord(
            variant="v",
            workload="w",
            prompt_id=f"p{n}",
            repetition=0,
            status="ok",
            warmup=0,
            input_tokens=n,
            output_tokens=10,
            ttft_ms=100.0 - 0.09 * n,  # falls with length: at 2,000 tokens the line is below 0
            e2e_ms=200.0,
        )
        for n in (100, 400, 700, 1000)
    ]
    p = project(rows, "v", 2000, 10)
    assert p.ttft.value is None and p.e2e is None
    assert ProjectionCause("ttft-not-positive") in p.causes
    assert any("at or below 0 ms" in n for n in projection_notes([p]))


def test_project_intervals_are_positive_and_the_defaults_are_measured(linear_db):
    with Store(linear_db, create=False) as store:
        trials = store.trials(1)
    assert default_lengths(trials) == (1024, 64)  # sweep-input's longest, sweep-output's
    for n_in, n_out in ((1, 2), (1024, 64), (40_000, 4000)):
        for variant in ("baseline", "cache"):
            p = project(trials, variant, n_in, n_out)
            for est in (p.ttft, p.decode, p.e2e):
                assert est.lo > 0 and est.lo <= est.value <= est.hi, (variant, n_in, n_out, est)
    for variant in ("baseline", "cache"):
        # one output token: no decode step, so nothing after the first token; e2e is TTFT, exactly
        one = project(trials, variant, 1, 1)
        assert (one.decode.value, one.decode.lo, one.decode.hi) == (0.0, 0.0, 0.0)
        assert one.e2e == one.ttft and one.ttft.lo > 0
        assert not any(c.kind.startswith(("output", "decode")) for c in one.causes)
    inside = [project(trials, v, *default_lengths(trials)) for v in ("baseline", "cache")]
    assert not any(p.causes for p in inside)  # no row starts extrapolated


def test_one_warning_per_cause(linear_db):
    with Store(linear_db, create=False) as store:
        trials = store.trials(1)
    projections = [project(trials, v, 4000, 300) for v in ("baseline", "cache")]
    assert sum(len(projection_data(p)["notes"]) for p in projections) == 4  # per row, as the JSON keeps them
    notes = projection_notes(projections)
    assert notes == [
        "input 4,000 tokens is outside the measured 64–1,024 input tokens: extrapolated (every variant)",
        "output 300 tokens is outside the measured 4–64 output tokens: extrapolated (every variant)",
    ]


def test_project_verb_defaults_and_notes_on_stdout(linear_db):
    result = invoke("project", "1", "--db", linear_db)
    assert result.exit_code == 0, result.output
    assert "for 1,024 input and 64 output tokens" in result.stdout
    assert "the longest inside every variant's measured range" in result.stdout
    assert "extrapolated" not in result.output
    one = invoke("project", "1", "--db", linear_db, "--output", 1)
    rows = [line.split() for line in one.stdout.splitlines() if line.startswith(("baseline", "cache"))]
    assert len(rows) == 2 and all(row[5] == "0" and row[6:8] == row[3:5] for row in rows), one.stdout
    far = invoke("project", "1", "--db", linear_db, "--input", 4000, "--output", 300)
    assert far.stderr == ""  # the notes belong to the answer: stdout
    assert far.stdout.count("extrapolated") == 2 and "(every variant)" in far.stdout
    for line in far.stdout.splitlines():
        if line.startswith(("baseline", "cache")):
            bounds = [c for c in line.replace("–", " ").replace("[", " ").replace("]", " ").split()]
            assert not any(b.startswith("-") or b.startswith("−") for b in bounds), line


def test_gui_what_if_opens_inside_the_measured_range(linear_db, qtbot):
    pytest.importorskip("PySide6")
    from workbench.gui.projection_dialog import ProjectionDialog

    with Store(linear_db, create=False) as store:
        trials = store.trials(1, include_warmup=True)
    dialog = ProjectionDialog(trials)
    qtbot.addWidget(dialog)
    assert (dialog.input_tokens.value(), dialog.output_tokens.value()) == (1024, 64)
    assert dialog.notes.text() == ""  # nothing extrapolated at first
    dialog.input_tokens.setValue(5000)
    assert dialog.notes.text().count("extrapolated") == 1  # one warning, not one per variant
    assert "(every variant)" in dialog.notes.text()
    lows = [
        dialog.table.item(r, 3).text().split("[")[1].split("–")[0] for r in range(dialog.table.rowCount())
    ]
    assert all(float(v.replace(",", "")) > 0 for v in lows)
