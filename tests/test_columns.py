"""One formatting module, one definition per column: the CLI's main table and the GUI's results table
write a shared column's cell with the same function (report.columns), under the column's short label
(CLI) and long label (GUI); the numbers come from workbench.formatting."""

from __future__ import annotations

import dataclasses
import re
import shutil
from pathlib import Path
from types import SimpleNamespace

import pytest

from workbench.formatting import (
    chart_value,
    ci_suffix,
    interval_ratio,
    ms_text,
    num,
    percent,
    plus_minus,
    power_of_ten,
    ratio,
    significant,
    times,
    trials_text,
)
from workbench.report.columns import COLUMNS
from workbench.report.run_report import WIDE, main_table

SAMPLE = Path(__file__).resolve().parent.parent / "resources" / "sample" / "demo.db"


def _est(value, lo=None, hi=None):
    return SimpleNamespace(value=value, lo=lo, hi=hi)


def test_readable_numbers_and_ratios():
    # whole numbers without decimals; else no decimals from 100 on, one from 10, three significant below
    assert [num(v) for v in (1290.4, 500.0, 50.0, 77.54, 5.0, 0.04841)] == [
        "1,290",
        "500",
        "50",
        "77.5",
        "5",
        "0.0484",
    ]
    assert num(50.0, whole=False) == "50.0" and num(None) == "–"
    assert times(1.234) == "1.23x" and times(None) == "–"
    assert ratio(_est(1.62, 1.4, 1.88)) == "1.62x [1.40–1.88]*"
    assert ratio(_est(1.02, 0.9, 1.1)) == "1.02x [0.90–1.10]"
    assert ratio(_est(1.62, 1.4, 1.88), interval=False) == "1.62x*" and ratio(_est(1.62)) == "1.62x"
    assert ratio(None) == "" and ratio(_est(None)) == ""
    assert (
        percent(0.384) == "38%"
        and percent(0.384, 1) == "38.4%"
        and percent(-0.012, 2, signed=True) == "-1.20%"
    )
    assert plus_minus(0.0624) == "±6.2%" and plus_minus(None) == ""
    row = SimpleNamespace(n_ok=12, n_failed=1, n_disturbed=2, disturbed_excluded=True)
    assert trials_text(row) == "12 (1 failed) (2 disturbed, out)"
    row.disturbed_excluded = False
    assert trials_text(row) == "12 (1 failed) (2 disturbed)"


def test_the_charts_numbers():
    # on a bar or in a legend: no decimals from 100 (separated), one from 10, else two
    assert [chart_value(v) for v in (1234.5, 100.0, 12.34, 9.996, 0.5)] == [
        "1,234",
        "100",
        "12.3",
        "10.00",
        "0.50",
    ]
    # a time in a read-out: the main table's ms precision with the unit; – when unknown
    assert (ms_text(12.34), ms_text(99.96), ms_text(1234.5), ms_text(None)) == (
        "12.3 ms",
        "100.0 ms",
        "1,234 ms",
        "–",
    )
    # a speed-up in a read-out: no significance mark (ratio's *), – when unknown
    assert interval_ratio(1.62, 1.4, 1.851) == "1.62x [1.40–1.85]"
    assert interval_ratio(0.5, None, 0.7) == "0.50x" and interval_ratio(None, 1.0, 2.0) == "–"
    assert ci_suffix(0.9, 1.1) == " [0.90–1.10]" and ci_suffix(None, 1.1) == ""
    assert ci_suffix(1234.56, 1301.0, 1, grouped=True) == " [1,234.6–1,301.0]"
    # significant digits: signed (a fitted slope), grouped (a target), six (a percentile, as :g writes it)
    assert significant(0.0123456) == "0.0123" and significant(0.0123456, signed=True) == "+0.0123"
    assert significant(-0.0123456, signed=True) == "-0.0123"
    assert (
        significant(1500.0, 4, grouped=True) == "1,500"
        and significant(123456.0, 4, grouped=True) == "1.235e+05"
    )
    assert significant(99.9, 6) == "99.9" and significant(90, 6) == "90"
    assert power_of_ten(-3) == "1e-3" and power_of_ten(0) == "1e0"


def test_a_column_has_a_short_and_a_long_label():
    assert (COLUMNS["speedup_e2e"].short, COLUMNS["speedup_e2e"].long) == ("e2e x", "e2e speed-up")
    assert (COLUMNS["decode_tokens_per_s"].short, COLUMNS["decode_tokens_per_s"].long) == (
        "tok/s",
        "decode tok/s",
    )
    assert len({c.short for c in COLUMNS.values()}) == len({c.long for c in COLUMNS.values()}) == len(COLUMNS)
    assert {c.short for c in COLUMNS.values()} >= WIDE  # --wide names columns by their short label


@pytest.fixture(scope="module")
def sample(tmp_path_factory):
    """The sample run's summaries, and three rows made from its baseline's: a served model with its own
    speculative decoding (its acceptance from the server's metrics), failed and disturbed trials."""
    from workbench.analysis.summary import ServerFigures
    from workbench.gui.loading import load_results

    db = tmp_path_factory.mktemp("sample") / "demo.db"
    shutil.copyfile(SAMPLE, db)
    data = load_results(db, (1,))
    served = [
        dataclasses.replace(
            s,
            variant="served",
            acceptance_rate=None,
            mean_accepted_length=None,
            server=ServerFigures(windows=1, acceptance_rate=0.7, mean_accepted_length=3.2, ttft_ms=12.3),
            n_failed=1,
            n_disturbed=2,
            disturbed_excluded=True,
        )
        for s in data.summaries
        if s.variant == "baseline"
    ]
    return [*data.summaries, *served], data.verdicts


def test_the_gui_table_and_the_cli_table_write_a_shared_cell_the_same(sample, qapp):
    pytest.importorskip("PySide6")
    from workbench.gui.results import COLUMNS as GUI_COLUMNS
    from workbench.gui.results import SummaryTableModel

    summaries, verdicts = sample
    model = SummaryTableModel()
    model.set_summaries(summaries, {}, verdicts)
    gui = {header: i for i, (header, _, _) in enumerate(GUI_COLUMNS)}
    table = main_table(summaries)
    by_short = {c.short: c for c in COLUMNS.values()}
    shared = [(i, by_short[h]) for i, h in enumerate(table.headers) if by_short[h].long in gui]
    assert len(shared) >= 17  # every column both tables have (the CLI's here: served, speculative, scored)
    for row, s in enumerate(summaries):
        assert model.summary(row) is s
        for i, c in shared:
            cli, shown = table.rows[row][i], model.index(row, gui[c.long]).data()
            if c.brief is None:
                assert shown == cli, (c.key, s.variant, s.workload)
            else:  # the CLI leaves the interval out (a narrow table); the rest is the same
                assert re.sub(r" \[.*\]", "", shown) == cli, (c.key, s.variant, s.workload)
    texts = {c.key: model.index(len(summaries) - 1, gui[c.long]).data() for _, c in shared}
    assert texts["acceptance"] == "70% (3.2 tok/step) srv"  # a served model's own, as the CLI shows it
    assert texts["n"] == "3 (1 failed) (2 disturbed, out)" and texts["match"] == "reference"
    assert any(re.search(r"\]\*$", model.index(r, gui["e2e speed-up"]).data()) for r in range(len(summaries)))
