"""What every command module shares: the exit codes, the error handling at the edge (a
:class:`~workbench.core.errors.WorkbenchError` becomes one ``Error: ...`` line and exit code 2, no
traceback), the options several verbs take and opening the results database."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

import click

from workbench.core.errors import WorkbenchError

if TYPE_CHECKING:
    from workbench.store import Store

F = TypeVar("F", bound=Callable[..., Any])

#: ``run``/``demo``/``noise``: 0 every planned trial ran to its end and succeeded (the run is ``ok``);
#: 2 bad input (nothing ran); 3 some or all trials failed or are missing (each recorded with its
#: reason); 4 the run failed as a whole (a result could not be stored: the run is recorded ``failed``
#: with the reason, what was stored is intact); 130 cancelled (Ctrl-C, SIGTERM, SIGHUP: finished
#: trials kept)
EXIT_OK, EXIT_BAD_INPUT, EXIT_SOME_FAILED, EXIT_RUN_FAILED, EXIT_CANCELLED = 0, 2, 3, 4, 130


def run_exit_code(result: Any) -> int:
    """The exit code of a run that ended (a :class:`~workbench.run.recording.RunResult`)."""
    if result.error is not None:
        return EXIT_RUN_FAILED
    if result.status == "cancelled":
        return EXIT_CANCELLED
    # ``ok`` only when every planned trial ran to its end (RunResult.final_status): a run that lost
    # one without a failed trial (its worker stopped by a signal from outside) is no success either
    return EXIT_OK if result.status == "ok" else EXIT_SOME_FAILED


class _OneLineErrors:
    """Turns library errors into one clear line (exit 2) at the edge."""

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)  # type: ignore[misc]
        except WorkbenchError as exc:
            click.echo(f"Error: {exc}", err=True)
            ctx.exit(EXIT_BAD_INPUT)


class Group(_OneLineErrors, click.Group):
    pass


class _Command(_OneLineErrors, click.Command):
    pass


def db_option(f: F) -> F:
    return click.option(
        "--db",
        "db",
        type=click.Path(path_type=Path),
        default=None,
        help="Results database (default: $WORKBENCH_DB, else results.db in the user-data folder).",
    )(f)


def json_option(f: F) -> F:
    return click.option("--json", "as_json", is_flag=True, help="Print JSON instead of a table.")(f)


def detail_options(f: F) -> F:
    """``--detail`` (every table and note) and ``--wide`` (every column of the main table)."""
    f = click.option(
        "--wide",
        is_flag=True,
        help="Every column of the main table (token counts, TPOT, MDE, acceptance, …).",
    )(f)
    return click.option(
        "--detail",
        is_flag=True,
        help="Every table and note: variants, break-even costs per draft length, quality, targets and "
        "what would it take, the legends.",
    )(f)


def disturbed_option(f: F) -> F:
    return click.option(
        "--exclude-disturbed/--include-disturbed",
        "exclude_disturbed",
        default=None,
        help="Leave trials the machine disturbed (waiting for a CPU, a GPU clock drop) out of the "
        "statistics, or keep them. Default: left out when they are at most 25 % of the measured trials "
        "and no variant has more than half of its own disturbed "
        "(docs/analysis.md).",
    )(f)


def open_store(db: Path | None, *, create: bool) -> Store:
    from workbench.store import Store, resolve_db_path

    return Store(resolve_db_path(db), create=create)
