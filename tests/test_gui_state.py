"""The window's state (workbench/gui/state.py): the controllers change it, never the window's
attributes; one change reaches every view that shows it. Qt tests run with QT_QPA_PLATFORM=offscreen
(tests/conftest.py)."""

from __future__ import annotations

import ast
import dataclasses
import shutil
from pathlib import Path

import pytest

pytest.importorskip("PySide6")

from workbench.core.resources import resource_path
from workbench.gui import state as state_module
from workbench.gui.main_window import MainWindow
from workbench.gui.settings import GuiSettings
from workbench.gui.state import AppState
from workbench.gui.widgets import window_title

pytestmark = pytest.mark.usefixtures("gui_settings")  # each test its own settings file

#: what the state holds: written in gui/state.py only
SHARED = ("db_path", "store", "shown_ids", "results", "run_thread")
GUI = Path(state_module.__file__).parent


def sample_db(tmp_path: Path, name: str = "sample.db") -> Path:
    """A copy of the shipped sample run (one run, id 1): nothing is run here."""
    path = tmp_path / name
    shutil.copyfile(resource_path("sample", "demo.db"), path)
    return path


def open_window(qtbot, db_path: Path) -> MainWindow:
    window = MainWindow(db_path, settings=GuiSettings())
    qtbot.addWidget(window, before_close_func=lambda w: w.run_control.stop_run_and_wait())
    window.show()
    qtbot.waitUntil(lambda: window.is_ready, timeout=10_000)
    qtbot.waitUntil(lambda: window.state.results is not None, timeout=30_000)  # the latest run
    return window


def record(state: AppState) -> list[tuple[str, object]]:
    """Every change signal of ``state`` from now on, as (signal name, value)."""
    seen: list[tuple[str, object]] = []
    for name in ("storeChanged", "shownRunsChanged", "resultsChanged", "runningChanged"):
        getattr(state, name).connect(lambda value, n=name: seen.append((n, value)))
    return seen


def test_the_state_says_what_changed_once(qtbot):
    state = AppState(Path("a.db"))
    seen = record(state)
    state.show_runs((1,))
    state.show_runs((1,))  # the same runs: nothing changed
    thread = object()
    state.set_running(thread)  # type: ignore[arg-type]  # the state only holds it
    state.set_running(thread)  # type: ignore[arg-type]
    state.set_running(None)
    state.set_store(Path("b.db"), None)
    state.set_store(Path("b.db"), None)
    state.clear_shown()
    assert seen == [
        ("shownRunsChanged", (1,)),
        ("runningChanged", True),
        ("runningChanged", False),
        ("storeChanged", Path("b.db")),
        ("shownRunsChanged", ()),  # the results were None already: no resultsChanged
    ]
    assert state.db_path == Path("b.db") and state.shown_ids == () and not state.running


def test_a_controller_change_goes_through_the_state_and_emits(qtbot, tmp_path):
    window = open_window(qtbot, sample_db(tmp_path))
    state = window.state
    assert state.shown_ids == (1,) and state.results is not None and state.results.run_ids == (1,)
    assert window.export_report_action.isEnabled()
    # deleting the run on screen (History's controller) empties the state; the window follows
    seen = record(state)
    assert window.history_actions.delete_run(1, confirm=False)
    assert seen == [("shownRunsChanged", ()), ("resultsChanged", None)]
    assert state.shown_ids == () and state.results is None
    assert window.shown_ids == () and window.results is None  # what the window reads is the state's
    assert window.windowTitle() == window_title(state.db_path)
    assert not window.export_report_action.isEnabled() and not window.project_action.isEnabled()
    # another database (File's controller): the store changes, then its latest run is loaded
    other = sample_db(tmp_path, "other.db")
    seen.clear()
    assert window.file_actions.open_database(other)
    assert seen == [("storeChanged", other), ("shownRunsChanged", (1,))]  # its latest run, loading
    assert state.db_path == other and window.db_path == other
    assert state.store is not None and window.store is state.store
    qtbot.waitUntil(lambda: len(seen) == 3, timeout=30_000)
    assert seen[2] == ("resultsChanged", state.results)
    assert state.results is not None and state.results.run_ids == (1,) == state.shown_ids
    assert window.windowTitle() == window_title(other, state.results.runs)
    assert window.export_report_action.isEnabled()


def test_two_views_stay_in_step_from_one_state_change(qtbot, tmp_path):
    window = open_window(qtbot, sample_db(tmp_path))
    state, builder = window.state, window.builder
    assert builder is not None
    data = state.results
    assert data is not None
    # one change of the results: the Results tab's title and the window's title both follow
    renamed = dataclasses.replace(data, runs=[{**data.runs[0], "name": "renamed in the state"}])
    state.set_results(renamed)
    assert window.results_title.text() == f"Run 1 — renamed in the state ({data.runs[0]['status']})"
    assert window.windowTitle() == f"Run 1 — renamed in the state — {state.db_path.name} — Workbench"
    # one change of the running run: the builder's Run button and the window's actions both follow
    assert builder.run_btn.isEnabled() and window.run_action.isEnabled()
    state.set_running(object())  # type: ignore[arg-type]  # a stand-in: nothing reads it here
    try:
        assert not builder.run_btn.isEnabled() and builder.run_btn.toolTip() == "A run is in progress"
        assert not window.run_action.isEnabled() and window.cancel_action.isEnabled()
    finally:
        state.set_running(None)
    assert builder.run_btn.isEnabled() and window.run_action.isEnabled()
    assert not window.cancel_action.isEnabled()
    # one change of the runs on screen: the History tab selects the single run shown
    window.history.view.clearSelection()
    state.show_runs(())
    state.show_runs((1,))
    assert window.history.selected_ids() == [1]


# -- no controller writes the shared state on the window ------------------------------------------


def shared_state_writes(root: Path) -> list[str]:
    """``file:line target`` for every write of a :data:`SHARED` attribute of another object (the
    window, most likely) — an assignment (plain, augmented, annotated, in a tuple) to
    ``other.<name>``, or ``setattr(other, "<name>", ...)`` — and, in main_window.py, of the window's
    own (``self.<name>``: a copy beside the state's). A class's own field of that name elsewhere
    (the run thread's ``self.db_path``) is its own business."""
    found = []
    for path in sorted(root.rglob("*.py")):
        if path.name == "state.py" and path.parent == root:
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            targets: list[ast.expr] = []
            if isinstance(node, ast.Assign):
                targets = list(node.targets)
            elif isinstance(node, ast.AugAssign | ast.AnnAssign):
                targets = [node.target]
            elif (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Name)
                and node.func.id == "setattr"
                and len(node.args) >= 2
                and isinstance(node.args[1], ast.Constant)
                and node.args[1].value in SHARED
            ):
                found.append(f"{path.relative_to(root)}:{node.lineno} setattr {node.args[1].value}")
            for target in targets:
                for t in ast.walk(target):
                    if not (
                        isinstance(t, ast.Attribute) and t.attr in SHARED and isinstance(t.ctx, ast.Store)
                    ):
                        continue
                    own = isinstance(t.value, ast.Name) and t.value.id == "self"
                    if not own or path.name == "main_window.py":
                        found.append(f"{path.relative_to(root)}:{t.lineno} {ast.unparse(t)}")
    return found


def test_no_module_writes_the_shared_state_on_the_window():
    assert shared_state_writes(GUI) == []


def test_the_check_finds_a_write_of_the_shared_state(tmp_path):
    (tmp_path / "controller.py").write_text(
        "def f(w, window):\n"
        "    w.shown_ids = ()\n"
        "    window.results, x = None, 1\n"
        "    w.state.run_thread: object = None\n"
        "    w.store.close()\n"  # a read: fine
        "    setattr(w, 'db_path', None)\n"
        "    self.results = None\n"  # a class's own field (not the window's): fine
    )
    (tmp_path / "main_window.py").write_text("def f(self):\n    self.store += 1\n")  # the window's copy
    (tmp_path / "state.py").write_text("def f(w):\n    w.results = None\n")  # the state's own module
    assert shared_state_writes(tmp_path) == [
        "controller.py:2 w.shown_ids",
        "controller.py:3 window.results",
        "controller.py:4 w.state.run_thread",
        "controller.py:6 setattr db_path",
        "main_window.py:2 self.store",
    ]


def test_opening_an_empty_database_leaves_nothing_of_the_last_one_on_screen(qtbot, tmp_path):
    """Another database with no runs: the last database's results leave the screen and its exports go
    (they kept the old results, their exports enabled, before the state cleared them)."""
    from workbench.store import Store

    window = open_window(qtbot, sample_db(tmp_path))
    assert window.export_report_action.isEnabled()
    empty = tmp_path / "empty.db"
    Store(empty).close()
    assert window.file_actions.open_database(empty)
    assert window.state.shown_ids == () and window.state.results is None
    assert not window.export_report_action.isEnabled()
