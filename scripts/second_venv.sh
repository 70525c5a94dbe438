#!/usr/bin/env bash
# Build, once, a second virtual environment with another transformers release, for variants that run
# in it (`python = ".../bin/python"` in a spec; docs/spec.md, docs/runtimes.md "Another Python
# environment"). The integration test tests/integration/test_second_python.py runs one variant here
# and one in the project's venv. It lives outside the repository and is reused by later runs on the
# same machine (a stamp file, named after the versions, marks a finished build).
#
#   bash scripts/second_venv.sh           # prints the venv's python when it is ready
#   WORKBENCH_SECOND_VENV=/path TRANSFORMERS_VERSION=5.20.2 bash scripts/second_venv.sh
#
# What goes in: torch 2.13.0 (the CPU wheel; never unpinned), transformers at TRANSFORMERS_VERSION
# (not the project's >= 5.24: that is the point) with the engine's other libraries, the workbench's
# own core libraries, then this checkout itself, editable and without dependencies. That last step runs
# every time (a few seconds): the cached venv then always runs the checkout that calls the script, even
# when CI clones it into a new folder.
set -euo pipefail

TRANSFORMERS_VERSION="${TRANSFORMERS_VERSION:-5.20.2}"
TORCH_VERSION="2.13.0"
VENV="${WORKBENCH_SECOND_VENV:-$HOME/.cache/workbench-ci/venv-transformers-$TRANSFORMERS_VERSION}"
STAMP="$VENV/.workbench-second-venv-torch-$TORCH_VERSION-transformers-$TRANSFORMERS_VERSION-ready"
PYTHON="${PYTHON:-python3}"
REPO="$(cd "$(dirname "$0")/.." && pwd)"

if [[ ! -f "$STAMP" ]]; then
    echo "building the second venv (transformers $TRANSFORMERS_VERSION) in $VENV (a minute or two, once)" >&2
    rm -rf "$VENV"  # a build that did not finish is not reused
    mkdir -p "$(dirname "$VENV")"
    "$PYTHON" -m venv "$VENV"
    "$VENV/bin/python" -m pip install -q --upgrade pip
    "$VENV/bin/python" -m pip install -q "torch==$TORCH_VERSION"
    # the engine extra's libraries (pyproject) with another transformers, the core's, and setuptools
    # for the editable install below (no build isolation: offline and fast)
    "$VENV/bin/python" -m pip install -q "transformers==$TRANSFORMERS_VERSION" \
        'accelerate>=1.10' 'safetensors>=0.6' 'gguf>=0.17' 'psutil>=6' \
        'click>=8.1' 'httpx>=0.27,<1' 'sqlite-utils>=4.2' 'platformdirs>=4' 'tomlkit>=0.12' 'numpy>=1.26' \
        'setuptools>=69'
    touch "$STAMP"
fi
# The workbench itself: this checkout, editable, its dependencies left as above (its transformers pin
# would otherwise replace the older release).
"$VENV/bin/python" -m pip install -q --no-deps --no-build-isolation -e "$REPO" >&2
"$VENV/bin/python" -c "import transformers, torch, workbench; print('second venv: transformers', \
transformers.__version__, 'torch', torch.__version__, 'workbench', workbench.__version__)" >&2
echo "$VENV/bin/python"
