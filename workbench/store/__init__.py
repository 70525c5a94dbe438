"""The results store: the only package that imports sqlite_utils.

:class:`TrialRecord` (:mod:`.records`) is imported here at once; :class:`Store` and the rest of
:mod:`.db` only when first asked for. The worker processes build trial records but never open the
database, and a variant's worker may run in another Python environment that has no sqlite-utils
(docs/runtimes.md).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from workbench.store.loaded import LoadedRun
from workbench.store.records import TRIAL_COLUMNS, RunRecord, TrialRecord, VariantRecord

if TYPE_CHECKING:
    from workbench.store.db import RUN_STATUSES, Store, default_db_path, resolve_db_path

__all__ = [
    "RUN_STATUSES",
    "TRIAL_COLUMNS",
    "LoadedRun",
    "RunRecord",
    "Store",
    "TrialRecord",
    "VariantRecord",
    "default_db_path",
    "resolve_db_path",
]

_FROM_DB = frozenset({"RUN_STATUSES", "Store", "default_db_path", "resolve_db_path"})


def __getattr__(name: str) -> Any:
    if name in _FROM_DB:
        from workbench.store import db

        return getattr(db, name)
    raise AttributeError(f"module 'workbench.store' has no attribute {name!r}")
