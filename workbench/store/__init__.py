"""The results store: the only package that imports sqlite_utils."""

from __future__ import annotations

from workbench.store.db import RUN_STATUSES, Store, default_db_path, resolve_db_path

__all__ = ["RUN_STATUSES", "Store", "default_db_path", "resolve_db_path"]
