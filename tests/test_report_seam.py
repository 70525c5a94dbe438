"""The analysis, the report and its charts are typed all the way down: no ``Any`` written in
workbench/analysis, workbench/report or workbench/charts but in the one function named below (mypy's
``disallow_any_explicit`` holds for the three packages, pyproject.toml). No module there is above 600 lines, and the run report's names
stay importable from ``run_report`` after its verdict and notes moved into their own modules."""

from __future__ import annotations

import ast
from pathlib import Path

import workbench

ROOT = Path(workbench.__file__).parent
PACKAGES = ("analysis", "report", "charts")

#: module → the functions that may write ``Any``, each justified where it is written:
#: position_figures hands run/ a dict of numpy arrays and a method's name (the quality pass's scoring)
ALLOWED = {"analysis/quality.py": {"position_figures"}}


def _modules() -> list[Path]:
    return [p for package in PACKAGES for p in sorted((ROOT / package).rglob("*.py"))]


def _writes_any(node: ast.AST) -> bool:
    """``Any`` as a name, ``typing.Any``, or inside a string annotation (``"dict[str, Any]"``)."""
    if isinstance(node, ast.Name):
        return node.id == "Any"
    if isinstance(node, ast.Attribute):
        return node.attr == "Any"
    if isinstance(node, ast.Constant) and isinstance(node.value, str) and "Any" in node.value:
        try:
            expression = ast.parse(node.value, mode="eval")
        except SyntaxError:  # words (a docstring), not an annotation
            return False
        return any(_writes_any(n) for n in ast.walk(expression) if n is not expression)
    return False


def _any_outside(tree: ast.Module, allowed: set[str]) -> list[int]:
    """The lines that write ``Any`` outside the functions ``allowed``."""
    inside: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.name in allowed:
            inside.update(id(n) for n in ast.walk(node))
    return sorted({node.lineno for node in ast.walk(tree) if id(node) not in inside and _writes_any(node)})


def test_no_any_in_the_analysis_the_report_or_its_charts_but_the_one_named():
    found = {}
    for path in _modules():
        name = str(path.relative_to(ROOT))
        lines = _any_outside(ast.parse(path.read_text(encoding="utf-8")), ALLOWED.get(name, set()))
        if lines:
            found[name] = lines
    assert found == {}


def test_the_any_finder_finds_an_annotation_and_spares_the_readers():
    source = (
        "from typing import Any\n"
        "def f(x: Any) -> None: ...\n"
        "def g(rows: list[dict[str, Any]]) -> None: ...\n"
        "def _costs(costs: dict[str, Any]) -> None: ...\n"
        "def h(x: 'dict[str, Any]') -> None: ...\n"
        "def k() -> None:\n    'Any variant will do.'\n"
    )
    assert _any_outside(ast.parse(source), {"_costs"}) == [2, 3, 5]


def test_no_module_of_the_analysis_the_report_or_its_charts_is_above_600_lines():
    long = {}
    for path in _modules():
        n = len(path.read_text(encoding="utf-8").splitlines())
        if n > 600:
            long[str(path.relative_to(ROOT))] = n
    assert long == {}


def test_the_run_reports_names_stay_importable_from_it():
    from workbench.report import run_notes, run_report, verdict

    for name in run_report.__all__:
        assert hasattr(run_report, name), name
    # moved, and the same objects where they were
    assert run_report.verdict_section is verdict.verdict_section
    assert run_report.trust_lines is verdict.trust_lines
    assert run_report.longer_text is verdict.longer_text
    assert run_report.AUTO_HINT is verdict.AUTO_HINT
    assert run_report.memory_kinds_line is run_notes.memory_kinds_line
    assert run_report.roofline_lines is run_notes.roofline_lines
