"""Where the results database is, without importing the store (the GUI resolves it before its window
is on screen, and sqlite-utils takes a while to import).

``--db`` wins, then ``$WORKBENCH_DB``, then ``results.db`` in the platform user-data folder.
"""

from __future__ import annotations

import os
from pathlib import Path

__all__ = ["ENV_VAR", "default_db_path", "resolve_db_path"]

ENV_VAR = "WORKBENCH_DB"


def default_db_path() -> Path:
    from platformdirs import user_data_dir

    return Path(user_data_dir("workbench", appauthor=False)) / "results.db"


def resolve_db_path(db: str | os.PathLike[str] | None) -> Path:
    """``--db`` wins, then ``$WORKBENCH_DB``, then ``results.db`` in the platform user-data dir."""
    if db:
        return Path(db).expanduser()
    if os.environ.get(ENV_VAR):
        return Path(os.environ[ENV_VAR]).expanduser()
    return default_db_path()
