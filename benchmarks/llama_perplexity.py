"""llama.cpp's own ``llama-perplexity`` tool, built once from the installed llama-cpp-python's vendored
llama.cpp source, for ``benchmarks/quality.py`` to check the workbench's quality figures against.

The sdist of the installed llama-cpp-python version (``pip download --no-deps --no-binary :all:``,
~75 MB or pip's cache) holds all of llama.cpp under ``vendor/llama.cpp``; only the
``llama-perplexity`` target is built (CMake, Release, CPU only, static libraries so the binary stands
alone, ``-j2``: a few minutes on two cores). The binary is cached under
``~/.cache/workbench-ci/llama-perplexity/<version>/`` (``WORKBENCH_CI_CACHE`` moves the root), so
later runs reuse it.

    python benchmarks/llama_perplexity.py          # build (once) and print the binary's path
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
from collections.abc import Callable
from importlib import metadata
from pathlib import Path

__all__ = ["ensure_llama_perplexity"]

CMAKE_FLAGS = [
    "-DCMAKE_BUILD_TYPE=Release",
    "-DBUILD_SHARED_LIBS=OFF",
    "-DLLAMA_BUILD_TESTS=OFF",
    "-DLLAMA_BUILD_EXAMPLES=OFF",
    "-DLLAMA_BUILD_TOOLS=ON",
    "-DLLAMA_BUILD_SERVER=OFF",
    "-DLLAMA_CURL=OFF",
    "-DGGML_CUDA=OFF",
    "-DGGML_METAL=OFF",
    "-DGGML_OPENMP=OFF",
]


def _cache_root() -> Path:
    return Path(os.environ.get("WORKBENCH_CI_CACHE", Path.home() / ".cache" / "workbench-ci"))


def ensure_llama_perplexity(*, jobs: int = 2, log: Callable[[str], None] = print) -> Path:
    """The path of a ``llama-perplexity`` built from the installed llama-cpp-python's llama.cpp."""
    version = metadata.version("llama-cpp-python")
    target = _cache_root() / "llama-perplexity" / version / "llama-perplexity"
    if target.exists():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="workbench-llama-perplexity-") as tmp:
        work = Path(tmp)
        log(
            f"fetching llama.cpp's source: pip download --no-deps --no-binary :all: llama-cpp-python=={version}"
        )
        subprocess.run(
            [sys.executable, "-m", "pip", "download", "--no-deps", "--no-binary", ":all:",
             "--disable-pip-version-check", "-q", "-d", str(work), f"llama-cpp-python=={version}"],
            check=True,
        )  # fmt: skip
        (sdist,) = work.glob("*.tar.gz")
        source = work / "src"
        with tarfile.open(sdist) as tar:
            members = [m for m in tar.getmembers() if "/vendor/llama.cpp/" in m.name]
            tar.extractall(source, members=members, filter="data")
        (root,) = source.glob("*/vendor/llama.cpp")
        build = work / "build"
        log(f"building llama-perplexity (CMake, Release, CPU, -j{jobs}; once; cached in {target.parent})")
        subprocess.run(["cmake", "-S", str(root), "-B", str(build), *CMAKE_FLAGS], check=True,
                       stdout=subprocess.DEVNULL)  # fmt: skip
        subprocess.run(
            ["cmake", "--build", str(build), "--target", "llama-perplexity", "-j", str(jobs)],
            check=True,
            stdout=subprocess.DEVNULL,
        )
        (binary,) = [p for p in build.rglob("llama-perplexity") if p.is_file() and os.access(p, os.X_OK)]
        part = target.with_suffix(".part")
        shutil.copy2(binary, part)
        part.replace(target)  # whole or absent
        (target.parent / "built-from").write_text(
            f"{sdist.name}: vendor/llama.cpp, {' '.join(CMAKE_FLAGS)}\n"
        )
    return target


if __name__ == "__main__":
    print(ensure_llama_perplexity())
