#!/usr/bin/env bash
# The GPU check's dry run, on a machine without a GPU (CI; docs/ci.md "The GPU check"): build the
# bundle, install it with `pip --no-index` into a fresh venv over a stand-in for the GPU image, run
# the check's CPU fallback for a few tokens, and check every variant produced its trials. So that the
# bundle cannot silently rot before a session that is lent a GPU needs it.
#
#   scripts/gpu_dryrun.sh [OUT_DIR]     # default out/gpu-dryrun (the bundle and the check's files)
#
# The stand-in image: a venv, built once per machine under ~/.cache/workbench-ci/gpu-image-venv, with
# this machine's torch==2.13.0 CPU wheel in place of the image's torch 2.11 (CUDA 13) and the image's
# versions of what KINDS.md gives versions for (transformers 5.17.0: too old, as there). Like the
# image's python3 (/opt/torch/.venv), it is itself a venv, so the check's nested venv only sees its
# packages through the check's .pth file: the same path as on the GPU machine.
set -euo pipefail
cd "$(dirname "$0")/.."
out="${1:-out/gpu-dryrun}"
cache="${WORKBENCH_CI_CACHE:-$HOME/.cache/workbench-ci}"
image="${WORKBENCH_GPU_IMAGE_VENV:-$cache/gpu-image-venv}"
image_pkgs=(torch==2.13.0 transformers==5.17.0 huggingface-hub==1.33.0 tokenizers==0.23.2
    safetensors==0.8.0 accelerate==1.15.0 numpy psutil httpx click typer regex requests pyyaml tqdm
    jinja2 python-dateutil tabulate pluggy packaging pytest)
stamp="$image/.built-$(echo "${image_pkgs[*]}" | sha256sum | cut -c1-12)"
start=$SECONDS
if [ ! -f "$stamp" ]; then
    echo "gpu_dryrun: building the stand-in GPU image venv in $image (once per machine)"
    rm -rf "$image"
    "${BASE_PYTHON:-python3}" -m venv "$image"
    "$image/bin/python" -m pip install -q --disable-pip-version-check "${image_pkgs[@]}"
    touch "$stamp"
fi
rm -rf "$out"
mkdir -p "$out"
out=$(cd "$out" && pwd)
# The bundle the GPU machine would get (Python 3.12: complete against the image's list, under the
# size limit), then the same versions for the stand-in's Python, which installs them: the stand-in
# runs this machine's Python, since its torch wheel is this machine's (cp311), and a dependency with
# compiled code (kernels, regex) has one wheel per Python.
scripts/gpu_bundle.sh "$out/bundle-gpu"
stand_in_py=$("$image/bin/python" -c 'import sys; print("%d.%d" % sys.version_info[:2])')
scripts/gpu_bundle.sh --python "$stand_in_py" "$out/bundle"
PYTHON="$image/bin/python" GPU_CHECK_WORK="$out/work" GPU_CHECK_RUN_S=600 GPU_CHECK_DEADLINE_S=1200 \
    scripts/gpu_check.sh --from-bundle "$out/bundle" --cpu "$out/check"
# Every variant ran its trials, from the bundle's packages (not the stand-in image's).
(cd "$out/work" && "$out/work/venv/bin/python" - "$out/check" "$out/bundle") <<'PY'
import sqlite3
import sys
from pathlib import Path

import transformers
import workbench

out = Path(sys.argv[1])
files = sorted(p.name for p in out.iterdir())
assert len(files) <= 8, f"more than 8 files would not all come back from a device call: {files}"
bundled = next(Path(sys.argv[2], "wheels").glob("transformers-*.whl")).name.split("-")[1]
assert transformers.__version__ == bundled, f"transformers {transformers.__version__}, not the bundle's {bundled}"
assert "site-packages" in workbench.__file__, f"workbench imported from {workbench.__file__}"
db = sqlite3.connect(out / "gpu.db")
rows = db.execute(
    "SELECT variant, status, count(*) FROM trials WHERE warmup = 0 GROUP BY variant, status"
).fetchall()
by_variant = {}
for variant, status, n in rows:
    by_variant.setdefault(variant, {})[status] = n
want = {"baseline", "quantized int8-weight-only", "speculative", "prompt-lookup", "prefix-cache"}
assert set(by_variant) == want, f"variants {sorted(by_variant)}, expected {sorted(want)}"
bad = {v: s for v, s in by_variant.items() if set(s) != {"ok"}}
assert not bad, f"trials not ok: {bad}"
tokens = {n for (n,) in db.execute("SELECT DISTINCT output_tokens FROM trials")}
assert tokens == {4}, f"output lengths {tokens}: ignore_eos should make every trial 4 tokens"
# recorded where and as asked: the figures assert it (device cpu, float32 here); so does this
placed = set(db.execute("SELECT DISTINCT device, dtype, backend FROM variants"))
assert placed == {("cpu", "float32", None)}, f"device, dtype, backend recorded: {placed}"
log = (out / "check.log").read_text()
for said in (
    "gpu_check covers:",  # what it covers, up front
    "the bundle fits",  # the image's versions found, and the bundle installs over them
    "baseline: device cpu, dtype float32",  # the figures' device/dtype check
    "CPU reference TPOT",  # the CPU reference ran (its TPOT is asserted against CUDA only)
):
    assert said in log, f"check.log lacks {said!r}"
assert log.index("gpu_check covers:") < log.index("the bundle fits") < log.index("venv from")
print(f"gpu_dryrun: ok: {len(by_variant)} variants, {sum(s['ok'] for s in by_variant.values())} trials; files {files}")
PY
echo "gpu_dryrun: passed in $((SECONDS - start)) s"
