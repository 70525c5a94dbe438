"""The user cache the models are fetched and converted into, and the one way anything is written
there: :func:`staged`, a file or folder made under a temporary name beside its final place and renamed
into place only once it is complete, so a failure (or a killed process) never leaves half a model
where the next run would take it for a finished one.

Imports nothing but the standard library (and platformdirs, on first use).
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import shutil
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path

__all__ = ["cache_dir", "cache_key", "staged"]


def cache_dir() -> Path:
    """Where converted models live: ``$WORKBENCH_CACHE`` or the platform user-cache dir."""
    if os.environ.get("WORKBENCH_CACHE"):
        return Path(os.environ["WORKBENCH_CACHE"]).expanduser()
    from platformdirs import user_cache_dir

    return Path(user_cache_dir("workbench", appauthor=False))


def cache_key(path: Path, *extra: str) -> str:
    """16 hex digits that change when ``path`` (a file, or the files of a folder) or ``extra`` do."""
    files = sorted(p for p in path.iterdir() if p.is_file()) if path.is_dir() else [path]
    stamp = "|".join(f"{p.name}:{p.stat().st_size}:{p.stat().st_mtime_ns}" for p in files)
    return hashlib.sha256("|".join([str(path), stamp, *extra]).encode()).hexdigest()[:16]


@contextlib.contextmanager
def staged(
    target: Path,
    *,
    directory: bool = False,
    prefix: str | None = None,
    keep_if: Callable[[Path], bool] | None = None,
) -> Iterator[Path]:
    """The path to write ``target`` under (a sibling of it); renamed to ``target`` when the block
    completes, removed when it raises (any exception, KeyboardInterrupt too).

    ``directory``: the staging path is a fresh folder (``mkdtemp``, opened up to 0o755: the cache is an
    ordinary folder), named ``prefix`` (default ``<target name>.``) plus random characters; otherwise
    it is the file name ``<target name>.<pid>.part``, not yet created (the block, or a subprocess it
    runs, writes it). A process killed inside the block leaves the staging path behind under a name
    that is never ``target``.

    An existing ``target`` (what a failed earlier attempt could not have left, so a stale one) is
    replaced. With ``keep_if``, a folder ``target`` that another process finished meanwhile is kept
    instead: when the rename fails and ``keep_if(target)`` is true, ours is discarded.

    Nothing is fsync'ed (as before this helper: the rename is atomic, not durable across a power loss).
    """
    target.parent.mkdir(parents=True, exist_ok=True)
    if directory:
        staging = Path(tempfile.mkdtemp(prefix=prefix or f"{target.name}.", dir=target.parent))
        staging.chmod(0o755)  # mkdtemp makes it private
    else:
        staging = target.with_name(f"{target.name}.{os.getpid()}.part")
    try:
        yield staging
        if keep_if is None and target.is_dir() and not target.is_symlink():
            shutil.rmtree(target)
        try:
            os.replace(staging, target)
        except OSError:
            if keep_if is None or not keep_if(target):
                raise
    finally:
        if staging.is_dir() and not staging.is_symlink():
            shutil.rmtree(staging, ignore_errors=True)
        else:
            staging.unlink(missing_ok=True)
