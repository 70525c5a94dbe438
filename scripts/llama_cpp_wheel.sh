#!/usr/bin/env bash
# Build, once per machine, llama-cpp-python's wheel (PyPI has only its source: pip compiles llama.cpp,
# ~8 min on 2 cores) into a wheel folder that `make llama-cpp WHEELHOUSE=...` installs from. CI
# (.ci/run) keeps it under ~/.cache/workbench-ci/wheels, as it keeps the vLLM venv; later runs on
# the same machine find it and build nothing.
#
#   bash scripts/llama_cpp_wheel.sh [WHEELHOUSE]      # prints the wheel's path when it is there
#   LLAMA_CPP_VERSION=0.3.36 CMAKE_ARGS="-DGGML_CUDA=on" bash scripts/llama_cpp_wheel.sh /tmp/cuda-wheels
#
# CMAKE_ARGS reaches llama.cpp's CMake (docs/runtimes.md): a CUDA build belongs in a wheel folder of
# its own, since both builds have the same file name. The default build is native: tuned to this
# machine's CPU (GGML_NATIVE), which is what a cache per machine is for.
set -euo pipefail

VERSION="${LLAMA_CPP_VERSION:-0.3.36}"
WHEELHOUSE="${1:-${WORKBENCH_WHEELHOUSE:-$HOME/.cache/workbench-ci/wheels}}"
PYTHON="${PYTHON:-python3}"

mkdir -p "$WHEELHOUSE"
found=$(ls "$WHEELHOUSE"/llama_cpp_python-"$VERSION"-*.whl 2>/dev/null | head -n 1 || true)
if [[ -n "$found" ]]; then
    echo "$found"
    exit 0
fi

echo "building llama-cpp-python $VERSION from source into $WHEELHOUSE (~8 min on 2 cores, once)" >&2
staging=$(mktemp -d "$WHEELHOUSE/.build.XXXXXX")  # a build that did not finish leaves no wheel
trap 'rm -rf "$staging"' EXIT
start=$SECONDS
"$PYTHON" -m pip wheel -q --no-deps --disable-pip-version-check -w "$staging" "llama-cpp-python==$VERSION" >&2
wheel=$(ls "$staging"/llama_cpp_python-"$VERSION"-*.whl)
mv "$wheel" "$WHEELHOUSE/"
echo "built in $((SECONDS - start)) s" >&2
echo "$WHEELHOUSE/$(basename "$wheel")"
