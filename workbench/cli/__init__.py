"""The ``workbench`` command: a thin click layer over the library.

Every :class:`~workbench.core.errors.WorkbenchError` becomes one ``Error: ...`` line and exit code 2 — no
traceback. ``run`` (and ``demo``, ``noise``) exits 0 when every trial succeeded, 3 when some or all
failed (they are recorded), 4 when the run failed as a whole (a result could not be stored: the run
is recorded ``failed`` with the reason, what was stored is kept), 130 when cancelled (finished trials
are kept); ``common`` defines them.

The verbs live in modules by group: ``running`` (run, demo, noise), ``browsing`` (runs, show, compare,
project, export), ``strategies`` and ``gui`` (with the ``workbench-viewer`` command). They share
``common`` (exit codes, error handling, options) and ``output`` (what the comparison prints, the
export); they never import one another.
"""

from __future__ import annotations

import click

from workbench.cli import browsing, gui, running, strategies
from workbench.cli.common import Group
from workbench.cli.gui import viewer, viewer_main
from workbench.cli.running import gui_available

__all__ = ["cli", "gui_available", "main", "viewer", "viewer_main"]


@click.group(cls=Group, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="llm-workbench", prog_name="workbench")  # looked up when asked
def cli() -> None:
    """Compare LLM inference optimizations on your own hardware: where the time goes, prefill vs decode.

    Start with `workbench demo`; write a spec (see docs/spec.md) and `workbench run SPEC.toml`.
    """


def main() -> None:
    cli(prog_name="workbench")


for _command in (
    running.run,
    running.demo,
    running.noise,
    browsing.runs,
    browsing.show,
    browsing.compare,
    browsing.project,
    browsing.export,
    strategies.strategies,
    gui.gui,
):
    cli.add_command(_command)
