"""Module sizes (docs/architecture.md, "Module sizes"): no module of workbench/ or strategies/ above 600
lines unless the list there names it with a reason, and the run's parent (run/execute.py) at or below
400 lines."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
LIMIT = 600


def _lines(path: Path) -> int:
    return len(path.read_text(encoding="utf-8").splitlines())


def _excused() -> set[str]:
    """The modules docs/architecture.md names (``path``, one per bullet) under "Module sizes"."""
    text = (ROOT / "docs" / "architecture.md").read_text(encoding="utf-8")
    section = text.split("**Module sizes.**", 1)[1].split("\n\n", 1)[0]
    return set(re.findall(r"`([\w/]+\.py)`", section)) - {"run/execute.py"}


def long_modules(root: Path, excused: set[str]) -> dict[str, int]:
    """The modules under ``root``'s packages above the limit that ``excused`` does not name."""
    return {
        str(path.relative_to(root)): n
        for package in ("workbench", "strategies")
        for path in sorted((root / package).rglob("*.py"))
        if (n := _lines(path)) > LIMIT and str(path.relative_to(root)) not in excused
    }


def test_no_module_above_600_lines_but_those_named_with_a_reason():
    long = long_modules(ROOT, _excused())
    assert long == {}, f"above {LIMIT} lines without a reason in docs/architecture.md: {long}"


def test_the_runs_parent_stays_small():
    assert _lines(ROOT / "workbench" / "run" / "execute.py") <= 400


def test_the_size_check_finds_a_planted_long_module_unless_it_is_named(tmp_path):
    (tmp_path / "workbench" / "run").mkdir(parents=True)
    (tmp_path / "strategies").mkdir()
    (tmp_path / "workbench" / "run" / "long.py").write_text("x = 1\n" * (LIMIT + 1), encoding="utf-8")
    (tmp_path / "strategies" / "short.py").write_text("x = 1\n" * LIMIT, encoding="utf-8")
    assert long_modules(tmp_path, set()) == {"workbench/run/long.py": LIMIT + 1}
    assert long_modules(tmp_path, {"workbench/run/long.py"}) == {}
