"""The main window's menu bar (File, Run, View, Help) and its actions, with their shortcuts: each
action calls a controller's method (:mod:`.file_actions`, :mod:`.export_actions`,
:mod:`.run_control`) or the window's. The actions that are enabled or not by what is on screen are
kept on the window (``window.run_action``...), as :class:`MenuWindow` names them;
``MainWindow.update_actions`` sets them.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Protocol

from PySide6.QtGui import QAction, QKeySequence
from PySide6.QtWidgets import QMenu, QMenuBar, QWidget

if TYPE_CHECKING:
    from workbench.gui.export_actions import ExportActions
    from workbench.gui.file_actions import FileActions
    from workbench.gui.run_control import RunControl

__all__ = ["MenuWindow", "build_menus"]

#: what QKeySequence takes: a standard key, or text such as "Ctrl+E"
Shortcut = QKeySequence.StandardKey | str


class MenuWindow(Protocol):
    """What :func:`build_menus` uses of the window (:class:`~workbench.gui.main_window.MainWindow`),
    and the actions it sets on it."""

    file_actions: FileActions
    export_actions: ExportActions
    run_control: RunControl
    open_action: QAction
    open_db_action: QAction
    save_action: QAction
    save_as_action: QAction
    export_data_action: QAction
    export_action: QAction
    copy_chart_action: QAction
    export_report_action: QAction
    export_all_action: QAction
    run_action: QAction
    cancel_action: QAction
    demo_action: QAction
    sample_action: QAction
    edit_spec_action: QAction
    project_action: QAction

    def window(self) -> QWidget: ...  # QWidget.window(): the window itself, the actions' parent
    def menuBar(self) -> QMenuBar: ...
    def addAction(self, action: QAction) -> None: ...
    def close(self) -> bool: ...
    def show_tab(self, name: str) -> None: ...
    def show_projection(self, *_: object) -> object: ...
    def show_glossary(self) -> object: ...
    def show_about(self) -> None: ...


def build_menus(window: MenuWindow, tabs: Sequence[str]) -> None:
    """The menu bar of ``window``; ``tabs``: the main tabs the View menu shows (Ctrl+1...)."""
    menu = window.menuBar()
    _file_menu(window, menu.addMenu("&File"))
    _run_menu(window, menu.addMenu("&Run"))
    view_menu = menu.addMenu("&View")
    for i, name in enumerate(tabs):
        view_menu.addAction(
            _action(window, name.capitalize(), lambda _=False, n=name: window.show_tab(n), f"Ctrl+{i + 1}")
        )
    help_menu = menu.addMenu("&Help")
    help_menu.addAction(_action(window, "&Glossary", window.show_glossary))
    help_menu.addAction(_action(window, "&About Workbench", window.show_about))


def _action(
    window: MenuWindow,
    text: str,
    slot: Callable[..., object],
    shortcut: Shortcut | None = None,
    tip: str = "",
) -> QAction:
    """An action of the window (its shortcut works wherever the focus is) that calls ``slot``."""
    a = QAction(text, window.window())
    if shortcut is not None:
        a.setShortcut(QKeySequence(shortcut))
    if tip:
        a.setStatusTip(tip)
        a.setToolTip(tip)
    a.triggered.connect(slot)
    window.addAction(a)
    return a


def _add(menu: QMenu, actions: Sequence[QAction | None]) -> None:
    """The actions into ``menu``, a separator for each None."""
    for a in actions:
        menu.addSeparator() if a is None else menu.addAction(a)


def _file_menu(window: MenuWindow, file_menu: QMenu) -> None:
    w, files, exports = window, window.file_actions, window.export_actions
    w.open_action = _action(
        w,
        "&Open…",
        files.open_dialog,
        QKeySequence.StandardKey.Open,
        "Open a spec (.toml) or a results database (.db)",
    )
    w.open_db_action = _action(w, "Open &database…", files.open_database_dialog)
    w.save_action = _action(w, "&Save spec", files.save_spec, QKeySequence.StandardKey.Save)
    w.save_as_action = _action(w, "Save spec &as…", files.save_spec_as, QKeySequence.StandardKey.SaveAs)
    w.export_data_action = _action(
        w,
        "Export run &data (CSV)…",
        exports.export_data,
        tip="trials.csv, steps.csv, summary.csv, phases.csv, summary.json and every chart's data",
    )
    w.export_action = _action(
        w,
        "&Export chart…",
        exports.export_current_chart,
        "Ctrl+E",
        "The chart on screen as PNG (2x) or SVG",
    )
    w.copy_chart_action = _action(
        w,
        "&Copy chart",
        exports.copy_current_chart,
        "Ctrl+Shift+C",
        "The chart on screen, as an image",
    )
    w.export_report_action = _action(
        w,
        "Export &report (HTML)…",
        exports.export_report,
        tip="One self-contained page: charts, tables, advice",
    )
    w.export_all_action = _action(
        w,
        "Export &all…",
        exports.export_all,
        tip="Everything `workbench export` writes, into a folder",
    )
    quit_action = _action(w, "&Quit", w.close, QKeySequence.StandardKey.Quit)
    _add(
        file_menu,
        (
            w.open_action,
            w.open_db_action,
            None,
            w.save_action,
            w.save_as_action,
            None,
            w.export_action,
            w.copy_chart_action,
            w.export_report_action,
            w.export_data_action,
            w.export_all_action,
            None,
            quit_action,
        ),
    )


def _run_menu(window: MenuWindow, run_menu: QMenu) -> None:
    w, runs, files = window, window.run_control, window.file_actions
    w.run_action = _action(w, "&Run", runs.start_run, "Ctrl+R", "Run the experiment in the builder")
    w.cancel_action = _action(
        w, "&Cancel run", runs.cancel_run, "Esc", "Stop at the next token; keep finished trials"
    )
    w.cancel_action.setEnabled(False)
    w.demo_action = _action(w, "Run the &demo comparison", runs.run_demo)
    w.sample_action = _action(
        w,
        "Open the &sample run",
        files.open_sample,
        tip="The demo's run that ships with Workbench",
    )
    w.edit_spec_action = _action(
        w,
        "&Edit this run's spec",
        files.edit_run_spec,
        tip="The spec the run on screen was made from, in the builder: change it and run again",
    )
    w.project_action = _action(
        w,
        "&What if… (project lengths)",
        w.show_projection,
        tip="TTFT and e2e at an input/output length the run did not try, from its fitted lines",
    )
    _add(
        run_menu,
        (
            w.run_action,
            w.cancel_action,
            None,
            w.edit_spec_action,
            w.demo_action,
            w.sample_action,
            None,
            w.project_action,
        ),
    )
