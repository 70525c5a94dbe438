"""One compare, three views: the app's two-run view, ``workbench compare A B`` and its report.html show
the same numbers, from the same comparison; a run's rows beside another run are the rows it has alone
(the same trials under its own disturbed-trial rule, the same medians, intervals and goodput); across
two runs only ratios of medians are shown (each run resampled on its own), never a paired interval.

Two fake-strategy runs into a real SQLite file; run 1 has one disturbed trial (its own rule leaves it
out), run 2 many (its own rule keeps them): a rule decided over both runs' trials together would
keep run 1's too and change its rows — the fault these tests catch."""

from __future__ import annotations

import html
import json
import re
import sqlite3
from pathlib import Path

import pytest

pytest.importorskip("PySide6")

from cli_helpers import invoke
from test_two_runs import AFTER, BEFORE

from workbench.analysis.compare import compare_two_runs, side_by_side
from workbench.analysis.paired import disturbance
from workbench.formatting import meaningful
from workbench.gui.chartview import CHART_TABS
from workbench.gui.main_window import MainWindow
from workbench.gui.results import COLUMNS
from workbench.gui.settings import GuiSettings
from workbench.run.execute import RunExecutor
from workbench.spec.parse import parse_spec
from workbench.store import Store

pytestmark = pytest.mark.usefixtures("gui_settings")  # each test its own settings file

#: a target some trials miss (the fake strategy's e2e: ~2 ms for "fast" before, ~10 ms after)
TARGETS = "targets = {ttft_ms = 5, e2e_ms = 6, percentile = 90}\n"


@pytest.fixture(scope="module")
def two_runs_db(tmp_path_factory):
    """Run 1 (before) and run 2 (after), with experience targets (goodput); run 1: one measured trial
    of ``fast`` disturbed (few: left out by run 1's rule); run 2: ``fast``'s and ``new``'s trials of
    the first repetition and every second of ``slow``'s (11 of 18: kept by run 2's rule)."""
    path = tmp_path_factory.mktemp("compare-views") / "results.db"
    with Store(path) as store:
        for text in (BEFORE, AFTER):
            spec = text.replace("max_new_tokens = 6\n", "max_new_tokens = 6\n" + TARGETS)
            assert RunExecutor(parse_spec(spec), store).run().status == "ok"
    with sqlite3.connect(path) as conn:
        conn.execute("update trials set disturbed = 0, disturbance = null")
        (first,) = conn.execute(
            "select id from trials where run_id = 1 and variant = 'fast' and warmup = 0 order by id limit 1"
        ).fetchone()
        flagged = [first] + [
            trial_id
            for trial_id, variant, repetition, rank in conn.execute(
                "select id, variant, repetition, row_number() over (partition by variant order by id) "
                "from trials where run_id = 2 and warmup = 0"
            )
            if (variant in ("fast", "new") and repetition == 0) or (variant == "slow" and rank % 2)
        ]
        conn.executemany(
            "update trials set disturbed = 1, disturbance = 'waited for a CPU (test)' where id = ?",
            [(i,) for i in flagged],
        )
    with Store(path, create=False) as store:
        two = compare_two_runs(store.load_run(1), store.load_run(2))
        both = disturbance([*store.trials(1), *store.trials(2)])
    # the premise: each run's own rule decides differently (run 1: out; run 2: kept), and a rule
    # decided over both runs' trials together would keep run 1's disturbed trial
    assert two.disturbed[0].excluded and two.disturbed[0].disturbed == 1
    assert not two.disturbed[1].excluded and two.disturbed[1].disturbed >= 6
    assert not both.excluded
    return path


def _open(qtbot, db: Path, runs: tuple[int, ...]) -> MainWindow:
    window = MainWindow(db, settings=GuiSettings())
    qtbot.addWidget(window, before_close_func=lambda w: w.run_control.stop_run_and_wait())
    window.show()
    qtbot.waitUntil(lambda: window.is_ready, timeout=10_000)
    window.results_view.show_runs(runs)
    qtbot.waitUntil(lambda: window.results is not None and window.results.run_ids == runs, timeout=20_000)
    return window


def _table_rows(window: MainWindow) -> dict[str, list[str]]:
    """The results table as shown: row key (variant, workload) → every column's text."""
    model = window.table_model
    out = {}
    for r in range(model.rowCount()):
        cells = [str(model.data(model.index(r, c)) or "") for c in range(model.columnCount())]
        out[f"{cells[0]} on {cells[1]}"] = cells
    return out


def _html_table(fragment: str) -> list[list[str]]:
    """The rows of the first table in an HTML fragment, each cell as plain text."""
    table = re.search(r"<table.*?</table>", fragment, re.S)
    assert table is not None, fragment[:300]
    rows = []
    for row in re.findall(r"<tr>(.*?)</tr>", table.group(0), re.S):
        cells = re.findall(r"<t[dh][^>]*>(.*?)</t[dh]>", row, re.S)
        rows.append([html.unescape(re.sub(r"<[^>]+>", "", c)).strip() for c in cells])
    return rows


def _html_items(fragment: str, section: str) -> list[str]:
    """The bullet items of one section (``<section class="verdict">``) as plain text."""
    found = re.search(rf'<section class="{section}">(.*?)</section>', fragment, re.S)
    assert found is not None, section
    return [
        html.unescape(re.sub(r"<[^>]+>", "", li)).strip()
        for li in re.findall(r"<li>(.*?)</li>", found.group(1), re.S)
    ]


def _text_table(text: str, title: str) -> list[list[str]]:
    """A table of the CLI's text report: the header and each row, cells split on 2+ spaces."""
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(title))
    rows = [re.split(r"\s{2,}", lines[start + 1].strip())]
    for line in lines[start + 3 :]:
        if not line.strip() or not line.startswith(tuple("abcdefghijklmnopqrstuvwxyz0123456789")):
            break
        rows.append(re.split(r"\s{2,}", line.strip()))
    return rows


def _text_bullets(text: str, title: str) -> list[str]:
    lines = text.splitlines()
    start = lines.index(title)
    out = []
    for line in lines[start + 1 :]:
        if not line.startswith("  "):
            break
        out.append(line.strip())
    return out


def test_the_three_views_of_two_runs_agree_number_for_number(qtbot, two_runs_db, tmp_path):
    cli = invoke("compare", "1", "2", "--db", two_runs_db, "--out", tmp_path / "out", "--format", "html")
    assert cli.exit_code == 0, cli.output
    page = (tmp_path / "out" / "report.html").read_text(encoding="utf-8")
    window = _open(qtbot, two_runs_db, (1, 2))
    # the verdict: per variant × workload, the same words and intervals
    verdict_cli = _text_bullets(cli.stdout, "Verdict (run 2 against run 1, end to end)")
    assert len(verdict_cli) == 3  # fast and slow compared, "new" not compared
    assert _html_items(page, "verdict") == verdict_cli
    assert _html_items(window.verdict.text(), "verdict") == verdict_cli
    # the table of medians run 1 → run 2 and run 2's speed-ups over run 1
    table_cli = _text_table(cli.stdout, "Per variant × workload (run 1 → run 2")
    assert len(table_cli) == 3 and table_cli[0][:3] == ["variant", "workload", "n"]
    assert _html_table(page) == table_cli
    note = window.charts.notes[[title for title, _, _ in CHART_TABS].index("Speed-up")]  # above the chart
    assert not note.isHidden()
    assert _html_table(note.text()) == table_cli
    # the before → after chart plots the same figures
    chart = next(c for c in window.results.charts if c.key == "before-after")
    two = window.results.two_runs
    for c in two.comparisons:
        point = next(
            p for p in chart.points if (p.variant, p.workload, p.metric) == (c.variant, c.workload, "e2e")
        )
        assert (point.value, point.lo, point.hi) == (c.speedup_e2e.value, c.speedup_e2e.lo, c.speedup_e2e.hi)
    # --json: the same comparisons
    listed = json.loads(invoke("compare", "1", "2", "--db", two_runs_db, "--json").stdout)
    assert [c["speedup_e2e"] for c in listed] == [c.to_dict()["speedup_e2e"] for c in two.comparisons]


def test_each_runs_rows_in_the_compare_view_are_its_rows_alone(qtbot, two_runs_db):
    window = _open(qtbot, two_runs_db, (1, 2))
    compared, data = _table_rows(window), window.results
    assert {key.split(":", 1)[0] for key in compared} == {"1", "2"}
    for run in (1, 2):
        alone = _table_rows(_open(qtbot, two_runs_db, (run,)))
        mine = {key.split(":", 1)[1]: cells for key, cells in compared.items() if key.startswith(f"{run}:")}
        assert set(mine) == set(alone)
        for key, cells in alone.items():
            # every column: n (disturbed trials), in-tokens, medians, speed-ups with CIs, goodput
            differ = [
                (COLUMNS[i].header, a, b)
                for i, (a, b) in enumerate(zip(mine[key], cells, strict=True))
                if a != b
            ]
            assert mine[key][1:] == cells[1:], (run, key, differ)
        # the numbers behind them: `show RUN --json`'s, to the last digit
        shown = json.loads(invoke("show", str(run), "--db", two_runs_db, "--json").stdout)
        for row in shown["summary"]:
            s = next(
                x
                for x in data.summaries
                if (x.variant, x.workload) == (f"{run}:{row['variant']}", row["workload"])
            )
            assert (s.n_ok, s.n_disturbed, s.disturbed_excluded) == (
                row["n_ok"],
                row["n_disturbed"],
                row["disturbed_excluded"],
            )
            # (show --json rounds to what is meaningful: the same rounding of the same figures)
            assert meaningful(s.metrics["input_tokens"].to_dict()) == row["input_tokens"]
            assert meaningful(s.metrics["e2e_ms"].to_dict()) == row["e2e_ms"]
            assert meaningful(s.speedup_e2e.to_dict() if s.speedup_e2e else None) == row["speedup_e2e"]
            v = next(x for x in data.verdicts if (x.variant, x.workload) == (s.variant, s.workload))
            assert (v.good, v.requests, meaningful(v.goodput)) == (
                row["targets"]["good_requests"],
                row["targets"]["requests"],
                row["goodput"],
            )
    n = [c.header for c in COLUMNS].index("n")
    assert compared["1:fast on code"][n] == "5 (1 disturbed, out)"  # run 1's own rule
    assert compared["2:fast on code"][n].startswith("6 (")  # run 2's: kept
    # run 2's rows: against run 2's own baseline, never against run 1's (no interval across runs here)
    speedup = [c.header for c in COLUMNS].index("e2e speed-up")
    assert compared["2:slow on code"][speedup] == "" and compared["2:fast on code"][speedup] != ""


def test_side_by_side_against_one_baseline_never_pairs_two_runs(two_runs_db):
    with Store(two_runs_db, create=False) as store:
        runs = [store.load_run(1), store.load_run(2)]
        view = side_by_side(runs, "slow", strict=True)
        two = compare_two_runs(*runs)
    rows = {s.variant: s for s in view.summaries}
    # within run 1: paired against 1:slow
    assert rows["1:fast"].speedup_e2e.method == "paired"
    # run 2's rows against 1:slow: ratios of medians, each run resampled on its own
    for name in ("2:slow", "2:fast", "2:new"):
        assert rows[name].speedup_e2e.method == "unpaired" and rows[name].speedup_e2e.mde is None
    # 2:slow over 1:slow is the comparison's own figure for `slow`, to the last digit
    slow = next(c for c in two.comparisons if c.variant == "slow")
    est = rows["2:slow"].speedup_e2e
    assert (est.value, est.lo, est.hi) == (slow.speedup_e2e.value, slow.speedup_e2e.lo, slow.speedup_e2e.hi)
    # and run 1's rows are run 1's alone (its own rule: the disturbed trial out)
    assert rows["1:fast"].n_ok == 5 and rows["1:fast"].disturbed_excluded
    assert rows["2:fast"].n_ok == 6 and not rows["2:fast"].disturbed_excluded
