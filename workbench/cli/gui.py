"""The desktop app: ``workbench gui`` and the ``workbench-viewer`` command, which share their options."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from workbench.cli.common import EXIT_OK, F, _Command, db_option
from workbench.core.errors import WorkbenchError
from workbench.gui import tab_names  # Qt-free; the app itself is imported lazily


class _TabChoice(click.Choice[str]):
    """``--tab``'s names (:func:`workbench.gui.tab_names`), read when click first needs them: they come
    from the chart kinds' list, which the CLI does not import to start."""

    def __init__(self) -> None:
        super().__init__(())

    @property
    def choices(self) -> tuple[str, ...]:
        return tab_names()

    @choices.setter
    def choices(self, _value: object) -> None:
        pass


def gui_options(f: F) -> F:
    """The options `workbench gui` and the packaged `workbench-viewer` share."""
    for option in reversed(
        [
            db_option,
            click.option(
                "--screenshot",
                type=click.Path(dir_okay=False, path_type=Path),
                help="Open the run (the latest by default), render it headless, save the window as this "
                "PNG and exit.",
            ),
            click.option(
                "--tab",
                type=_TabChoice(),
                help="The tab to show (with --screenshot: the tab to capture): a main tab, or one of the "
                "chart tabs that follow them.",
            ),
            click.option(
                "--run",
                "run_ref",
                default="latest",
                show_default=True,
                help="The run to open: an id or a name.",
            ),
            click.option(
                "--smoke",
                is_flag=True,
                help="Check this install and exit: open the database (default: the bundled sample from "
                "`workbench demo`) offscreen, export its headline chart, check that Qt found a font, "
                "print one line. Exit 0 when all is well, 2 with one Error: line when not.",
            ),
        ]
    ):
        f = option(f)
    return f


def _start_gui(
    db: Path | None, screenshot: Path | None, tab: str | None, run_ref: str, viewer: bool, smoke: bool
) -> None:
    from workbench.gui import GUI_EXTRA_HINT, missing_qt

    missing = missing_qt()
    if missing:
        raise WorkbenchError(f"the desktop app needs {' and '.join(missing)}: {GUI_EXTRA_HINT}")
    if smoke:
        if screenshot is not None or tab is not None or run_ref != "latest":
            raise WorkbenchError("--smoke takes only --db (it checks the latest run)")
        from workbench.gui.smoke import run_smoke

        click.echo(run_smoke(db))
        sys.exit(EXIT_OK)
    from workbench.gui.app import run_gui

    sys.exit(run_gui(db, screenshot=screenshot, tab=tab, run=run_ref, viewer=viewer))


@click.command()
@gui_options
@click.option(
    "--viewer", is_flag=True, help="Viewer mode: browse, compare and export only (no Run controls)."
)
def gui(
    db: Path | None, screenshot: Path | None, tab: str | None, run_ref: str, smoke: bool, viewer: bool
) -> None:
    """The desktop app: build an experiment, run it, watch prefill/decode charts fill in, compare runs.

    Opens the database given with --db (else $WORKBENCH_DB, else the one opened last time, else the
    default). Without torch installed it opens in viewer mode: databases can be browsed, compared and
    exported, and the Run controls say what to install.
    """
    _start_gui(db, screenshot, tab, run_ref, viewer, smoke)


@click.command(cls=_Command, context_settings={"help_option_names": ["-h", "--help"]})
@click.argument("database", required=False, type=click.Path(dir_okay=False, path_type=Path))
@gui_options
@click.version_option(package_name="llm-workbench", prog_name="workbench-viewer")
def viewer(
    database: Path | None,
    db: Path | None,
    screenshot: Path | None,
    tab: str | None,
    run_ref: str,
    smoke: bool,
) -> None:
    """The Workbench viewer: open, compare and export result databases (no engine, no GPU needed).

    DATABASE (or --db) is the results database to open; without it, $WORKBENCH_DB, else the one
    opened last time, else the default. This is `workbench gui --viewer`, and what the analysts'
    package installs as `workbench-viewer`.
    """
    if database is not None and db is not None and database != db:
        raise WorkbenchError("give the database once: as DATABASE or with --db")
    _start_gui(database or db, screenshot, tab, run_ref, True, smoke)


def viewer_main() -> None:
    """The `workbench-viewer` command (console script and the packaged app's entry point)."""
    viewer(prog_name="workbench-viewer")
