"""One root exception, a few meaningful subclasses.

Every error a user can cause (bad spec, missing model, unwritable DB...) is a :class:`WorkbenchError`
whose message is one line that names the problem. The CLI turns them into ``Error: ...`` and exit
code 2 without a traceback; lower-layer exceptions are translated at the boundary where they occur.
"""

from __future__ import annotations

import traceback
from collections.abc import Callable
from types import TracebackType

__all__ = [
    "ModelSourceError",
    "SpecError",
    "StoreError",
    "StrategyError",
    "WorkbenchError",
    "describe_exception",
    "error_context",
    "first_line",
    "one_line",
]


class WorkbenchError(Exception):
    """Root of every error the workbench raises on purpose."""


class SpecError(WorkbenchError):
    """The spec (TOML, workload JSONL, variant keys) is not valid."""


class StrategyError(WorkbenchError):
    """A strategy is unknown, unavailable here, or misconfigured."""


class ModelSourceError(WorkbenchError):
    """A model source cannot be resolved (missing path, uncached hub id offline, bad checksum)."""


class StoreError(WorkbenchError):
    """The results database cannot be opened or written."""


def describe_exception(exc: BaseException) -> str:
    """One line for the ``error`` column: the exception and where in the strategy it was raised."""
    frames = traceback.extract_tb(exc.__traceback__)
    where = f" (at {frames[-1].filename.rsplit('/', 1)[-1]}:{frames[-1].lineno})" if frames else ""
    message = first_line(exc)
    return f"{type(exc).__name__}: {message}{where}" if message else f"{type(exc).__name__}{where}"


def first_line(exc: BaseException) -> str:
    """The first line of an exception's message (library errors often carry a page of detail)."""
    lines = str(exc).strip().splitlines()
    return lines[0] if lines else ""


def one_line(exc: BaseException) -> str:
    """The exception's type and the first line of its message: ``OSError: no such file``."""
    return f"{type(exc).__name__}: {first_line(exc)}".rstrip(": ")


class error_context:  # lower case: used like a function, ``with error_context(...):``
    """Translate a lower-layer exception at the boundary where it occurs, into a one-line
    :class:`WorkbenchError` that says where::

        with error_context(f"cannot load model {ref!r}", ModelSourceError, catch=OSError, detail=first_line):
            model = AutoModelForCausalLM.from_pretrained(...)

    An exception of the block that is a ``catch`` (and not a ``passthrough``) is re-raised as
    ``error(f"{where}: {detail(exc)}")``, with `` ({hint})`` appended when ``hint`` is given, and
    chained from ``None``: the message is what the user reads, the original traceback is noise.
    Anything else passes through unchanged.
    """

    def __init__(
        self,
        where: str,
        error: type[WorkbenchError],
        *,
        catch: type[BaseException] | tuple[type[BaseException], ...] = Exception,
        passthrough: type[BaseException] | tuple[type[BaseException], ...] = (),
        detail: Callable[[BaseException], str] = str,
        hint: str | None = None,
    ) -> None:
        self.where = where
        self.error = error
        self.catch = catch
        self.passthrough = passthrough
        self.detail = detail
        self.hint = hint

    def __enter__(self) -> None:
        return None

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if exc is None or not isinstance(exc, self.catch) or isinstance(exc, self.passthrough):
            return None
        message = f"{self.where}: {self.detail(exc)}"
        raise self.error(message + (f" ({self.hint})" if self.hint else "")) from None
