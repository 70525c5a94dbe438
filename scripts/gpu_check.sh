#!/usr/bin/env bash
# The GPU check, as one script: the levers (baseline bf16, quantized, speculative, prompt lookup,
# prefix cache, compiled; llama.cpp and ONNX Runtime GenAI only when their CUDA builds are installed)
# on CUDA, on two llama-shaped models with random weights built from configs (a 1.07 B target and a
# 135 M draft; scripts/gpu_models.py), its figures asserted (scripts/gpu_figures.py: every variant ok
# and recorded on cuda, in bfloat16, with a CUDA backend; each CUDA TPOT at most a third of the same
# model's on the CPU; bandwidth near the datasheet, TTFT/TPOT plausible, peak >= weights, show --json
# and export), then the tests that only run on a GPU. It prints what it covers first, then the
# versions it found and whether the bundle fits them (one line, and exit 2, when not). Nothing is
# downloaded: it runs on the lent GPU machine, which can fetch nothing (docs/ci.md "The GPU check").
#
#   scripts/gpu_check.sh [--from-bundle DIR] [--cpu] [OUT_DIR]
#
#   --from-bundle DIR  install the project from DIR (scripts/gpu_bundle.sh) with `pip --no-index` into
#                      a fresh venv that also sees the base Python's packages (the image's torch), and
#                      run everything from that venv. Without it: the current environment (`python`,
#                      `workbench` on PATH) and the demo model's tokenizer from the user cache.
#   --cpu              the CPU fallback: tiny models, a few tokens, float32 (the dry run in CI,
#                      scripts/gpu_dryrun.sh). Without it, no CUDA device is exit 2.
#   OUT_DIR            default $OUT, else ./gpu-check. Gets at most 8 files: gpu.db, gpu-check.toml,
#                      show.txt, summary.md, pytest.txt, env.txt, models.json, check.log.
#
# PYTHON: the base interpreter (default python3). GPU_CHECK_WORK: the scratch folder for the venv and
# the models (default /tmp/workbench-gpu-check; emptied first). GPU_CHECK_DEADLINE_S (default 540):
# the whole check ends by then, the run cut short so that its results and the tests still fit (the
# device call's timeout_s should be a little above it); GPU_CHECK_RUN_S (default 330) caps the run
# alone. GPU_CHECK_REPS: the measured repetitions on CUDA (default 2). GPU_CHECK_CPU_REF_S (default
# 60, kept out of the run's time; 0 = none): the cap of the CPU reference (the target's baseline on the CPU, a few tokens: the
# TPOT every CUDA variant must beat threefold). GPU_CHECK_AUTO_ORDER_S (default 0 = skipped): the cap
# of the optional second step that measures the quantization methods `quantization = "auto"` tries
# on CUDA and says whether their documented order holds (scripts/gpu_auto_order.py; CUDA only).
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$(pwd)

bundle="" cpu=0 out=""
while [ $# -gt 0 ]; do
    case "$1" in
        --from-bundle) bundle="${2:?--from-bundle needs a folder}"; shift 2 ;;
        --cpu) cpu=1; shift ;;
        -h|--help) awk 'NR > 1 && !/^#/ {exit} NR > 1 {sub(/^# ?/, ""); print}' "$0"; exit 0 ;;
        -*) echo "gpu_check: unknown option $1" >&2; exit 2 ;;
        *) out="$1"; shift ;;
    esac
done
out="${out:-${OUT:-gpu-check}}"
mkdir -p "$out"
out=$(cd "$out" && pwd)
work="${GPU_CHECK_WORK:-/tmp/workbench-gpu-check}"
rm -rf "$work"
mkdir -p "$work"
work=$(cd "$work" && pwd)
exec > >(tee "$out/check.log") 2>&1
tee_pid=$!
trap 'exec >&- 2>&-; wait "$tee_pid" 2>/dev/null || true' EXIT  # check.log complete before the exit
t0=$SECONDS
stamp() { echo "== [$((SECONDS - t0)) s] $*"; }
echo "gpu_check covers: baseline (bf16), quantized (torchao int8/int4, bitsandbytes nf4: each where it" \
    "imports), speculative, prompt lookup, prefix cache, compiled baseline and int8; each variant's" \
    "recorded device, dtype and backend; each CUDA TPOT against the same model's on the CPU; bandwidth," \
    "TTFT/TPOT bounds, peak >= weights; pytest -m cuda. llama.cpp and ONNX Runtime GenAI on CUDA only" \
    "when their CUDA builds are installed (the bundle carries neither: see the summary's not covered)."
export PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1

base="${PYTHON:-python3}"
if [ -n "$bundle" ]; then
    bundle=$(cd "$bundle" && pwd)
    export WORKBENCH_CACHE="$work/cache"  # a fresh machine: nothing cached (the bandwidth is measured)
    [ -d "$bundle/wheels" ] && [ -f "$bundle/tokenizer/tokenizer.json" ] \
        || { echo "gpu_check: $bundle is not a bundle (scripts/gpu_bundle.sh makes one)" >&2; exit 2; }
    # The installed wheel must be this checkout's code (scripts/ and tests/ come from the checkout).
    here=$("$base" scripts/gpu_bundle.py --source-hash)
    if [ "$here" != "$(cat "$bundle/source.sha256" 2>/dev/null)" ] && [ -z "${GPU_CHECK_STALE_OK:-}" ]; then
        echo "gpu_check: $bundle was built from other sources than this checkout: rebuild it" \
            "(scripts/gpu_bundle.sh), or set GPU_CHECK_STALE_OK=1" >&2
        exit 2
    fi
    # first: the versions this image has, and whether the bundle installs over them (one line)
    "$base" scripts/gpu_bundle.py --image-report "$bundle/wheels" \
        || { echo "gpu_check: stopped: the bundle does not fit this image (line above)" >&2; exit 2; }
    stamp "venv from $bundle on $("$base" -c 'import sys; print(sys.executable, sys.version.split()[0])')"
    if ! "$base" -m venv --system-site-packages "$work/venv" >"$work/venv.log" 2>&1; then
        # e.g. a Debian/Ubuntu Python without ensurepip: then the base's own pip (seen through the
        # .pth below) installs into the venv, whose prefix it takes from the running interpreter
        echo "venv with pip failed ($(tail -1 "$work/venv.log")): making it --without-pip"
        rm -rf "$work/venv"
        "$base" -m venv --system-site-packages --without-pip "$work/venv"
    fi
    # --system-site-packages shows the *base installation's* packages. The image's python3 is itself
    # a venv (/opt/torch/.venv), whose torch a nested venv would not see: a .pth file adds the base
    # interpreter's site-packages after the venv's own, so the venv's packages (transformers 5.24)
    # shadow the image's (5.17) and everything else (torch, numpy, ...) comes from the image.
    "$base" -c 'import sys; print("\n".join(p for p in sys.path if p.endswith(("site-packages", "dist-packages"))))' \
        >"$("$work/venv/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')/_base_site.pth"
    py="$work/venv/bin/python"
    # A venv made by Python < 3.12 brings its own old setuptools, which would shadow the base's (torch
    # needs setuptools >= 77): drop it (3.12, the image's, puts only pip in a venv).
    "$py" -m pip uninstall -y -q --disable-pip-version-check setuptools >/dev/null 2>&1 || true
    # --no-compile: pip byte-compiles one file after the other (transformers has thousands); the
    # workers compile only what they import, once
    "$py" -m pip install -q --disable-pip-version-check --no-compile --no-index --find-links "$bundle/wheels" \
        "llm-workbench[engine]" torchao bitsandbytes
    wb="$work/venv/bin/workbench"
    tokenizer="$bundle/tokenizer"
else
    py="${PYTHON:-python}"
    wb="$(command -v workbench || true)"
    [ -n "$wb" ] || { echo "gpu_check: no workbench on PATH (pip install -e '.[engine,quant]')" >&2; exit 2; }
    tokenizer=$("$py" -c 'import sys; from workbench.sources import ensure_demo_model as d
print(d("smollm2-135m", log=lambda m: print(m, file=sys.stderr)))')
fi

if [ "$cpu" = 1 ]; then
    label="tiny pair, CPU fallback"
    device=cpu scale=tiny reps=1 warmup=0 chat_tokens=4 long_tokens=4 limit_chat=2 limit=1
else
    label="1.07B target + 135M draft"
    device=cuda scale=full reps=${GPU_CHECK_REPS:-2} warmup=1 chat_tokens=64 long_tokens=128 limit_chat=3 limit=2
fi
"$py" - "$device" <<'PY' || { echo "gpu_check: no CUDA device visible to torch: nothing to check (--cpu runs the CPU fallback)" >&2; exit 2; }
import sys
import torch
if sys.argv[1] == "cuda" and not torch.cuda.is_available():
    sys.exit(1)
print(f"torch {torch.__version__} from {torch.__file__}")
if torch.cuda.is_available():
    print(f"CUDA {torch.version.cuda}, {torch.cuda.get_device_name(0)}")
PY
{
    "$py" -c 'import sys; print("python", sys.version)'
    "$py" -m pip list --disable-pip-version-check 2>/dev/null \
        | grep -iE '^(llm-workbench|torch|torchao|bitsandbytes|transformers|tokenizers|huggingface|accelerate|safetensors|numpy|sqlite-utils|click|gguf) ' || true
    command -v nvidia-smi >/dev/null && nvidia-smi || echo "no nvidia-smi"
} >"$out/env.txt" 2>&1
cat "$out/env.txt"

stamp "random-weight models ($scale) on $device"
"$py" scripts/gpu_models.py "$tokenizer" "$work/models" --scale "$scale" --device "$device"
cp "$work/models/models.json" "$out/models.json"

# The quantized variants this machine can run: torchao int8 (and int4 on CUDA: tinygemm needs
# bfloat16), bitsandbytes nf4 where it loads.
# A method that is skipped stays expected: the figures then fail on it (scripts/gpu_figures.py).
methods="int8-weight-only"
[ "$device" = cuda ] && methods="$methods int4-weight-only bnb-nf4"
quant_variants=""
expect=(--expect baseline --expect speculative --expect prompt-lookup --expect prefix-cache)
for m in $methods; do
    expect+=(--expect "quantized $m")
    why=$("$py" -c "import sys; from workbench_strategies.quantized import method_unavailable_reason as r; print(r(sys.argv[1], sys.argv[2]) or '')" "$m" "$device")
    # installed is not loadable: a wheel built against another torch fails only on import
    lib=torchao; [ "${m#bnb-}" != "$m" ] && lib=bitsandbytes
    [ -z "$why" ] && ! err=$("$py" -c "import $lib" 2>&1) && why="import $lib failed: $(echo "$err" | tail -1)"
    if [ -n "$why" ]; then echo "quantized $m: skipped ($why)"; continue; fi
    extra=""; [ "$m" = int4-weight-only ] && extra=$'\ngroup_size = 128'
    quant_variants+=$'\n'"[[variants]]"$'\n'"name = \"quantized $m\""$'\n'"model = \"$work/models/large\""
    quant_variants+=$'\n'"device = \"$device\""$'\n'"strategy = \"quantized\""$'\n'"method = \"$m\"$extra"$'\n'
done

# llama.cpp and ONNX Runtime GenAI on CUDA: run when the venv has their CUDA builds (the bundle
# carries them only when it can), else "not covered" in the figures' summary.
runtime_variants="" not_covered=()
if [ "$device" = cuda ]; then
    while IFS=$'\t' read -r runtime why; do
        if [ -n "$why" ]; then not_covered+=(--not-covered "$runtime on CUDA: $why"); continue; fi
        expect+=(--expect "$runtime")
        runtime_variants+=$'\n'"[[variants]]"$'\n'"name = \"$runtime\""$'\n'"model = \"$work/models/large\""
        runtime_variants+=$'\n'"device = \"$device\""$'\n'"strategy = \"$runtime\""$'\n'
    done < <("$py" - <<'PY'
import importlib.util


def llama_cpp() -> str:
    if importlib.util.find_spec("llama_cpp") is None:
        return (
            "llama-cpp-python is not in the bundle: PyPI has only its source (0.3.36: a 73 MiB sdist, no "
            "CUDA wheel) and no nvcc is here to build one; needed: a cp312 manylinux wheel built with "
            "CMAKE_ARGS=-DGGML_CUDA=on against the image's CUDA 13 (for sm_90 only, to stay small), "
            "carried in the bundle, and llama.cpp's GGUF converter carried too (it is fetched once)"
        )
    import llama_cpp

    if not llama_cpp.llama_supports_gpu_offload():
        return "the installed llama-cpp-python is a CPU-only build"
    from workbench_strategies.llama_cpp.gguf import converter_unavailable_reason

    reason = converter_unavailable_reason()
    return f"no GGUF converter: {reason}" if reason else ""


def ort_genai() -> str:
    if importlib.util.find_spec("onnxruntime_genai") is None:
        return (
            "onnxruntime-genai-cuda is not in the bundle: its CUDA provider comes with onnxruntime-gpu, "
            "whose cp312 manylinux wheel (1.31.1) is 243.7 MiB, over the device call's 64 MiB; needed: "
            "an image with onnxruntime-gpu (CUDA 13) installed, then only onnxruntime-genai-cuda "
            "(15.9 MiB) carried"
        )
    import onnxruntime_genai as og

    if not getattr(og, "is_cuda_available", lambda: False)():
        return "the installed onnxruntime-genai has no CUDA execution provider"
    missing = [m for m in ("onnx", "onnx_ir") if importlib.util.find_spec(m) is None]
    return f"the model builder needs {', '.join(missing)}" if missing else ""


for name, check in (("llama-cpp", llama_cpp), ("ort-genai", ort_genai)):
    try:
        why = check()
    except Exception as exc:  # an import that fails: not covered, with the reason
        why = f"{type(exc).__name__}: {exc}".splitlines()[0]
    print(f"{name}\t{why}")
PY
)
fi

# Compiled decoding (docs/strategies.md "Compiled decoding"): on CUDA a compiled baseline and a
# compiled torchao int8 variant beside the eager ones (compile time in the variants table, a
# recompile inside a trial flagged disturbed); GPU_CHECK_COMPILE=0 leaves them out. The bf16
# equivalence check of the lossless levers is in show.txt's quality section either way.
compiled_variants=""
if [ "$device" = cuda ] && [ "${GPU_CHECK_COMPILE:-1}" = 1 ]; then
    for m in baseline $methods; do
        [ "$m" != baseline ] && [ "$m" != int8-weight-only ] && continue
        case "$quant_variants" in *"quantized $m"*) ;; *) [ "$m" != baseline ] && continue ;; esac
        expect+=(--expect "$m compiled")
        compiled_variants+=$'\n'"[[variants]]"$'\n'"name = \"$m compiled\""$'\n'"model = \"$work/models/large\""
        compiled_variants+=$'\n'"device = \"$device\""$'\n'"compile = true"$'\n'
        [ "$m" != baseline ] && compiled_variants+="strategy = \"quantized\""$'\n'"method = \"$m\""$'\n'
    done
fi

spec="$out/gpu-check.toml"
cat >"$spec" <<TOML
name = "gpu check: random-weight llama, $label ($device)"
description = "scripts/gpu_check.sh. Random weights built from configs (scripts/gpu_models.py): prefill and decode time, memory and the roofline depend on shapes and dtypes, not on weight values; acceptance (speculative, prompt lookup) does, so those figures are not a trained model's."
repetitions = $reps
warmup = $warmup
warmup_max_new_tokens = 16
order = "interleaved"            # all variants resident on the GPU at once, trials round by round (docs/analysis.md)
workers = "one"                  # per-repetition would respawn (never fork) every CUDA worker, reload and recompile

[[variants]]
name = "baseline"
model = "$work/models/large"
device = "$device"
dtype = "auto"                  # bf16 on CUDA
$quant_variants$runtime_variants$compiled_variants
[[variants]]
name = "speculative"
model = "$work/models/large"
device = "$device"
strategy = "speculative"
draft = "$work/models/small"
num_draft_tokens = 3

[[variants]]
name = "prompt-lookup"
model = "$work/models/large"
device = "$device"
strategy = "prompt-lookup"

[[variants]]
name = "prefix-cache"
model = "$work/models/large"
device = "$device"
strategy = "prefix-cache"

[[workloads]]
name = "chat"
limit = $limit_chat
max_new_tokens = $chat_tokens
ignore_eos = true

[[workloads]]
name = "summarise"
limit = 1
max_new_tokens = $long_tokens
ignore_eos = true

[[workloads]]
name = "code"
limit = $limit
max_new_tokens = $chat_tokens
ignore_eos = true
TOML

status=0
deadline="${GPU_CHECK_DEADLINE_S:-540}"
left() { echo $((deadline - (SECONDS - t0) - $1)); }
ref_s="${GPU_CHECK_CPU_REF_S:-60}"
run_s=$(left $((150 + ref_s)))  # keep 150 s for the results and pytest, and the CPU reference's cap
[ "$run_s" -gt "${GPU_CHECK_RUN_S:-330}" ] && run_s="${GPU_CHECK_RUN_S:-330}"
[ "$run_s" -lt 30 ] && run_s=30
stamp "workbench run $spec (at most $run_s s)"
# SIGINT at the limit: the run cancels at the next token and keeps its finished trials. From the
# scratch folder, so that the workers (python -m workbench.run.worker) import the installed
# package, not this checkout's sources
(cd "$work" && timeout -s INT -k 30 "$run_s" "$wb" run "$spec" --db "$work/gpu.db") || status=$?
stamp "run finished (exit $status)"
if [ -f "$work/gpu.db" ]; then
    # one self-contained file (no -wal/-shm beside it): at most 8 files come back from a device call
    "$py" -c 'import sqlite3, sys; sqlite3.connect(sys.argv[1]).execute("VACUUM INTO ?", (sys.argv[2],))' \
        "$work/gpu.db" "$out/gpu.db"
    "$wb" show latest --db "$out/gpu.db" >"$out/show.txt" 2>&1 || true
    cat "$out/show.txt"
    "$wb" show latest --json --db "$out/gpu.db" >"$work/show.json" 2>"$work/show-json.err" \
        || echo "show --json failed: $(tail -1 "$work/show-json.err")"
    # charts (PNG/SVG) need Qt, which the GPU image lacks: export them here from the returned gpu.db
    exported=0
    "$wb" export --db "$out/gpu.db" latest --out "$work/export" --format md >/dev/null 2>&1 \
        && cp "$work/export/summary.md" "$out/summary.md" && exported=1 || echo "export failed"
fi
# The CPU reference: the target's baseline on this machine's CPU, a few tokens (its own time cap),
# whose TPOT every CUDA variant must beat threefold (a CPU fallback does not).
[ "$ref_s" -gt "$(left 120)" ] && ref_s=$(left 120)
if [ "$ref_s" -ge 20 ]; then
    cat >"$work/cpu-ref.toml" <<TOML
name = "gpu check: the CPU reference"
repetitions = 1
warmup = 0
[[variants]]
name = "cpu reference"
model = "$work/models/large"
device = "cpu"
[[workloads]]
name = "chat"
limit = 1
max_new_tokens = 8
ignore_eos = true
TOML
    stamp "the CPU reference (at most $ref_s s)"
    (cd "$work" && timeout -s INT -k 15 "$ref_s" "$wb" run "$work/cpu-ref.toml" --db "$work/cpu-ref.db" \
        >"$work/cpu-ref.log" 2>&1) || echo "CPU reference: exit $? ($(tail -1 "$work/cpu-ref.log"))"
else
    echo "CPU reference: skipped (GPU_CHECK_CPU_REF_S=${GPU_CHECK_CPU_REF_S:-60}, $(left 120) s left)"
fi
# The figures, asserted: every variant ran, on cuda, in bf16, with a CUDA backend, faster than the CPU,
# bandwidth near the datasheet, TTFT/TPOT plausible, peak >= weights, show --json and export worked;
# what could not run here is listed as not covered.
fstatus=0
figure_args=("${expect[@]}" "${not_covered[@]}" --cpu-reference "$work/cpu-ref.db")
[ "$cpu" = 1 ] && figure_args+=(--cpu)
[ -f "$out/gpu.db" ] && figure_args+=(--show-json "$work/show.json" --export-ok "$exported")
"$py" scripts/gpu_figures.py "$out/gpu.db" "${figure_args[@]}" || fstatus=$?
[ "$status" = 0 ] && status=$fstatus
# The optional second step: the order `quantization = "auto"` tries on CUDA, measured (own cap).
order_s="${GPU_CHECK_AUTO_ORDER_S:-0}"
if [ "$order_s" -gt 0 ] && [ "$device" != cuda ]; then
    echo "AUTO_ORDER_CUDA: not measured: only on a GPU (--cpu)"
elif [ "$order_s" -gt 0 ]; then
    [ "$order_s" -gt "$(left 60)" ] && order_s=$(left 60)
    if [ "$order_s" -ge 30 ]; then
        "$py" scripts/gpu_auto_order.py spec "$work/models/large" "$device" >"$work/auto-order.toml"
        stamp "AUTO_ORDER_CUDA measured (at most $order_s s)"
        (cd "$work" && timeout -s INT -k 15 "$order_s" "$wb" run "$work/auto-order.toml" \
            --db "$work/auto-order.db" >"$work/auto-order.log" 2>&1) || echo "auto order run: exit $?"
        "$py" scripts/gpu_auto_order.py judge "$work/auto-order.db"
    else
        echo "AUTO_ORDER_CUDA: not measured: $(left 60) s left"
    fi
fi
pytest_s=$(left 10)
[ "$pytest_s" -gt 150 ] && pytest_s=150
[ "$pytest_s" -lt 20 ] && pytest_s=20
stamp "pytest -m cuda (at most $pytest_s s)"
pstatus=0
(cd "$repo" && timeout "$pytest_s" "$py" -m pytest -q -m cuda tests/test_cuda.py -p no:cacheprovider) \
    >"$out/pytest.txt" 2>&1 || pstatus=$?
tail -3 "$out/pytest.txt"
[ "$status" = 0 ] && status=$pstatus
stamp "done (exit $status); files in $out: $(cd "$out" && ls | tr '\n' ' ')"
exit "$status"
