"""What people read about the bundled sample run, pinned: ``show --detail --wide``, ``show --json`` and
the export's ``summary.md`` and ``phases.csv`` of ``resources/sample/demo.db`` against the files in
``tests/golden/``. A refactoring of the analysis, the report or the formatting must leave them
byte-identical; a change meant to alter what they say regenerates them with
``pytest tests/test_golden.py --update-golden`` (and the diff goes into the commit, for review).
The sample's figures are stored, not measured, so the output is the same on every machine.
"""

from __future__ import annotations

import shutil
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
