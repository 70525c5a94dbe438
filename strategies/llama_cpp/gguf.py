"""A transformers model (folder or hub id) to GGUF, for the ``llama-cpp`` strategy: llama.cpp's own
converter, ``convert_hf_to_gguf.py``, run once per model and cached.

llama-cpp-python's wheel ships the library, not the converter; its source distribution on PyPI holds
all of llama.cpp, the converter among it (``vendor/llama.cpp/convert_hf_to_gguf.py`` with its
``conversion/`` package and the matching ``gguf-py``). On first use the sdist of the *installed*
llama-cpp-python version is fetched with ``pip download --no-deps --no-binary :all:`` (~75 MB, or
pip's cache) and those files are kept under ``<cache>/tools/``; the converter then runs in a
subprocess with this interpreter (it imports torch, transformers and numpy, which the engine extra
has). No Hugging Face hub access: the model is read from the local folder ``materialize`` gave.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
from collections.abc import Callable
from importlib import metadata
from pathlib import Path

from workbench.sources import cache_dir, cache_key, staged
from workbench.strategy import ModelSourceError

__all__ = ["converter_dir", "converter_unavailable_reason", "hf_to_gguf"]

_DONE = ".workbench-complete"
_MEMBERS = ("convert_hf_to_gguf.py", "conversion/", "gguf-py/")


def converter_unavailable_reason() -> str | None:
    missing = [m for m in ("torch", "transformers", "llama_cpp") if importlib.util.find_spec(m) is None]
    if missing:
        return (
            f"converting it to GGUF needs {' and '.join(missing)} "
            "(pip install 'llm-workbench[engine,llama-cpp]'), or give a .gguf file"
        )
    return None


def converter_dir(*, log: Callable[[str], None] = print) -> Path:
    """llama.cpp's converter for the installed llama-cpp-python, fetched from its sdist once."""
    version = metadata.version("llama-cpp-python")
    target = cache_dir() / "tools" / f"llama.cpp-convert-{version}"
    if (target / _DONE).exists():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    log(
        f"fetching llama.cpp's GGUF converter: pip download --no-deps --no-binary :all: llama-cpp-python=={version}"
    )
    with tempfile.TemporaryDirectory(prefix="workbench-llamacpp-") as tmp:
        proc = subprocess.run(
            [sys.executable, "-m", "pip", "download", "--no-deps", "--no-binary", ":all:",
             "--disable-pip-version-check", "-d", tmp, f"llama-cpp-python=={version}"],
            capture_output=True, text=True, check=False,
        )  # fmt: skip
        sdists = list(Path(tmp).glob("*.tar.gz"))
        if proc.returncode != 0 or not sdists:
            last = (proc.stderr.strip().splitlines() or ["no output"])[-1]
            raise ModelSourceError(
                f"could not fetch llama.cpp's converter (llama-cpp-python=={version} sdist): {last}"
            )
        with staged(target, directory=True) as staging:
            with tarfile.open(sdists[0]) as tar:
                for member in tar.getmembers():
                    _, _, inner = member.name.partition("/vendor/llama.cpp/")
                    if not inner or not inner.startswith(_MEMBERS) or not (member.isfile() or member.isdir()):
                        continue
                    dest = staging / inner
                    if member.isdir():
                        dest.mkdir(parents=True, exist_ok=True)
                        continue
                    dest.parent.mkdir(parents=True, exist_ok=True)
                    source = tar.extractfile(member)
                    assert source is not None
                    with source, open(dest, "wb") as out:
                        shutil.copyfileobj(source, out)
            if not (staging / "convert_hf_to_gguf.py").exists():
                raise ModelSourceError(f"{sdists[0].name} holds no vendor/llama.cpp/convert_hf_to_gguf.py")
            (staging / _DONE).write_text(f"from {sdists[0].name}\n")
    return target


def hf_to_gguf(folder: Path, *, outtype: str = "f16", log: Callable[[str], None] = print) -> Path:
    """``folder`` (a transformers model folder) as a GGUF file of ``outtype`` (f32, f16, bf16),
    converted once and cached by the folder's path and the mtimes of its files."""
    key = cache_key(folder)
    target = cache_dir() / "models" / "llama-cpp" / f"hf-{folder.name}-{key}-{outtype.upper()}.gguf"
    if target.exists():
        return target
    tool = converter_dir(log=log)
    log(f"converting {folder.name} to GGUF {outtype} with llama.cpp's converter (once; cached in {target})")
    env = {**os.environ, "PYTHONPATH": str(tool / "gguf-py")}  # its own gguf-py, not the installed one
    env.pop("NO_LOCAL_GGUF", None)
    with staged(target) as part:
        proc = subprocess.run(
            [sys.executable, str(tool / "convert_hf_to_gguf.py"), str(folder), "--outfile", str(part),
             "--outtype", outtype],
            capture_output=True, text=True, check=False, env=env, cwd=str(tool),
        )  # fmt: skip
        if proc.returncode != 0 or not part.exists():
            lines = [ln for ln in proc.stderr.strip().splitlines() if ln.strip()] or ["no output"]
            raise ModelSourceError(
                f"llama.cpp's converter could not convert {folder.name} to GGUF: {lines[-1]}"
            )
    return target
