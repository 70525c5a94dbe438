"""One root exception, a few meaningful subclasses.

Every error a user can cause (bad spec, missing model, unwritable DB...) is a :class:`WorkbenchError`
whose message is one line that names the problem. The CLI turns them into ``Error: ...`` and exit
code 2 without a traceback; lower-layer exceptions are translated at the boundary where they occur.
"""

from __future__ import annotations

import traceback

__all__ = [
    "ModelSourceError",
    "SpecError",
    "StoreError",
    "StrategyError",
    "WorkbenchError",
    "describe_exception",
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
    message = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    return f"{type(exc).__name__}: {message}{where}" if message else f"{type(exc).__name__}{where}"
