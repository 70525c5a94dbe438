"""Files of the runtimes that convert or build a model once and cache it (``llama-cpp``,
``onnxruntime-genai``): a source as a local folder, a cache key for a file or folder, and a finished
staging folder moved into place (so that a failure never leaves half a model in the cache)."""

from __future__ import annotations

import hashlib
import os
import shutil
from collections.abc import Callable
from pathlib import Path

from workbench.spec.sources import ModelSource, materialize

__all__ = ["cache_key", "local_folder", "move_into_place"]


def local_folder(source: ModelSource, *, log: Callable[[str], None]) -> Path:
    """The transformers folder a (non-GGUF) source stands for: the demo's converted folder, a folder
    as is, or a hub id's snapshot in the Hugging Face cache (offline when ``materialize`` says so)."""
    where = materialize(source, log=log)
    folder = Path(where.location)
    if folder.is_dir():
        return folder
    from huggingface_hub import snapshot_download

    return Path(snapshot_download(where.location, local_files_only=where.local_files_only))


def cache_key(path: Path, *extra: str) -> str:
    """16 hex digits that change when ``path`` (a file, or the files of a folder) or ``extra`` do."""
    files = sorted(p for p in path.iterdir() if p.is_file()) if path.is_dir() else [path]
    stamp = "|".join(f"{p.name}:{p.stat().st_size}:{p.stat().st_mtime_ns}" for p in files)
    return hashlib.sha256("|".join([str(path), stamp, *extra]).encode()).hexdigest()[:16]


def move_into_place(staging: Path, target: Path) -> None:
    """A finished staging folder (made private by ``mkdtemp``) becomes ``target``, replacing it."""
    staging.chmod(0o755)
    if target.exists():
        shutil.rmtree(target)
    os.replace(staging, target)
