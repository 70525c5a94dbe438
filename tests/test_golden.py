"""What people read about the bundled sample run, pinned: ``show --detail --wide``, ``show --json`` and
the export's ``summary.md`` and ``phases.csv`` of ``resources/sample/demo.db`` against the files in
``tests/golden/``. A refactoring of the analysis, the report or the formatting must leave them
byte-identical; a change meant to alter what they say regenerates them with
``pytest tests/test_golden.py --update-golden`` (and the diff goes into the commit, for review).
The sample's figures are stored, not measured; what is computed from them (medians, bootstrap
intervals, fitted lines) can differ in its last bits from one machine to another (numpy's BLAS and
LAPACK kernels for AVX2 and AVX-512 sum in different orders), so every figure is rounded where it is
made (:func:`workbench.formatting.meaningful`, :func:`~workbench.formatting.steady`) and
:func:`test_a_few_ulps_change_no_figure_a_person_reads` proves the output does not depend on them.
"""

from __future__ import annotations

import math
import random
import shutil
import sqlite3
from pathlib import Path

import pytest
from click.testing import CliRunner

from workbench.cli import cli

SAMPLE = Path(__file__).resolve().parent.parent / "resources" / "sample" / "demo.db"
GOLDEN = Path(__file__).resolve().parent / "golden"


@pytest.fixture(scope="module")
def sample(tmp_path_factory):
    db = tmp_path_factory.mktemp("golden") / "demo.db"
    shutil.copyfile(SAMPLE, db)
    return db


def check(request, name: str, text: str) -> None:
    path = GOLDEN / name
    if request.config.getoption("--update-golden"):
        path.write_text(text, encoding="utf-8")
        return
    assert path.is_file(), f"no {path}: run pytest tests/test_golden.py --update-golden"
    expected = path.read_text(encoding="utf-8")
    assert text == expected, (
        f"{name} differs from tests/golden/{name}; if the change is meant, "
        "regenerate with pytest tests/test_golden.py --update-golden"
    )


def output(*args: str) -> str:
    result = CliRunner().invoke(cli, list(args), catch_exceptions=False, terminal_width=120)
    assert result.exit_code == 0, result.output
    return result.stdout


@pytest.mark.parametrize(
    ("name", "args"),
    [
        ("show-detail-wide.txt", ("show", "1", "--detail", "--wide")),
        ("show.json", ("show", "1", "--json")),
        ("project.json", ("project", "1", "--input", "800", "--output", "64", "--json")),
    ],
)
def test_cli_output_on_the_sample_run(request, sample, name, args):
    check(request, name, output(*args, "--db", str(sample)))


def test_exported_documents_of_the_sample_run(request, sample, tmp_path):
    output("export", "1", "--db", str(sample), "--out", str(tmp_path), "--format", "csv,md")
    for name in ("summary.md", "phases.csv", "summary.csv"):
        check(request, name, (tmp_path / name).read_text(encoding="utf-8"))


#: the export's files that are the records as stored (nudged below, so they differ by design)
RECORDS = ("trials.csv", "steps.csv", "quality_positions.csv", "server_metrics.csv")


def rendered(db: Path, out: Path) -> dict[str, str]:
    """Everything a person reads of the sample's run that the goldens pin, and every other file the
    export writes from the analysis (summary.json, the charts' data, quality_variants.csv)."""
    texts = {
        "show.json": output("show", "1", "--json", "--db", str(db)),
        "show-detail-wide.txt": output("show", "1", "--detail", "--wide", "--db", str(db)),
        "project.json": output("project", "1", "--input", "800", "--output", "64", "--json", "--db", str(db)),
    }
    output("export", "1", "--db", str(db), "--out", str(out), "--format", "csv,md")
    for path in sorted(out.iterdir()):
        if path.name not in RECORDS:
            texts[path.name] = path.read_text(encoding="utf-8")
    return texts


def nudge_store(db: Path, ulps) -> int:
    """Move every stored float by ``ulps()`` units in the last place (a fresh call per value); whole
    numbers (a token count stored as REAL, a KLD of exactly 0, a match of 1.0) stay: no kernel
    rounds them. Returns how many values moved."""
    moved = 0

    def nudge(x: float) -> float:
        nonlocal moved
        if x == int(x):
            return x
        moved += 1
        k = ulps()
        for _ in range(abs(k)):
            x = math.nextafter(x, math.copysign(math.inf, k))
        return x

    with sqlite3.connect(db) as conn:
        conn.create_function("nudge", 1, nudge)
        tables = [r[0] for r in conn.execute("select name from sqlite_master where type = 'table'")]
        for table in tables:
            for (column,) in conn.execute(f'select name from pragma_table_info("{table}")'):
                conn.execute(
                    f'update "{table}" set "{column}" = nudge("{column}") where typeof("{column}") = \'real\''
                )
    conn.close()
    return moved


@pytest.mark.parametrize(
    "pattern", ["up 4", "down 4", "mixed"], ids=["4 ULPs up", "4 ULPs down", "1-4 ULPs either way"]
)
def test_a_few_ulps_change_no_figure_a_person_reads(sample, tmp_path, pattern):
    """``make test`` passes on any host. Another CPU computes the same figures a few ULPs apart (a fitted
    slope read 0.0986480787099523 on an AVX2 host, …99242 on an AVX-512 one); here every float the store
    holds is moved by that much — all up, all down, and each its own way (a seeded 1-4 ULPs either
    way, which also reorders near-equal values) — and the JSON, the text, the Markdown and every CSV
    the analysis writes must read exactly as before.

    Why it holds: the figures are rounded where they are made, to 6 significant digits in JSON and
    CSV, to the shown digits in text. Rounding once would not be enough: a value sitting exactly on a
    rounding boundary — and decimal-exact values do, often (262.5, 3/8, the median of an even number
    of times stored to the microsecond) — is written one way or the other by a nudge of one ULP. So
    each figure is first rounded to 12 significant digits (:func:`workbench.formatting.steady`): a
    value and its few-ULP neighbours become one decimal number, which the final rounding writes one
    way everywhere. Only a value within a few ULPs of a 12-digit boundary that is also a boundary of
    the shown digits could still flip (~1e-9 per figure)."""
    base = rendered(sample, tmp_path / "base")
    db = tmp_path / "nudged.db"
    shutil.copyfile(sample, db)
    rng = random.Random(7)
    ulps = {
        "up 4": lambda: 4,
        "down 4": lambda: -4,
        "mixed": lambda: rng.choice([-4, -3, -2, -1, 1, 2, 3, 4]),
    }[pattern]
    assert nudge_store(db, ulps) > 1000  # every measured time, rate, memory and score moved
    nudged = rendered(db, tmp_path / "nudged")
    assert nudged.keys() == base.keys()
    for name, text in base.items():
        assert nudged[name] == text, f"{name} changed when the stored figures moved by a few ULPs"
