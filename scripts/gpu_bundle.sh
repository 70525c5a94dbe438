#!/usr/bin/env bash
# Gather, on a machine with a network, everything the GPU check needs that the lent GPU machine
# lacks (it can fetch nothing): the project wheel, Python 3.12 wheels of the dependencies its image
# lacks or has too old, and the demo tokenizer (docs/ci.md "The GPU check").
#
#   scripts/gpu_bundle.sh [DIR]     # default .gpu-bundle (git-ignored); prints its size
#
# PYTHON (default .venv/bin/python, from `make setup`) runs it: the carried wheels are pinned to the
# versions installed there, i.e. those the test suite ran with.
set -euo pipefail
cd "$(dirname "$0")/.."
py="${PYTHON:-.venv/bin/python}"
[ -x "$py" ] || { echo "gpu_bundle: no $py (run \`make setup\`, or set PYTHON)" >&2; exit 2; }
exec "$py" scripts/gpu_bundle.py "$@"
