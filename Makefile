# Two commands from a fresh clone (see README): `make demo` and `make test`.
# TORCH picks the torch build: the default pins the CPU wheel CI uses; for an NVIDIA GPU run e.g.
#   make demo TORCH="torch --index-url https://download.pytorch.org/whl/cu128"
PYTHON ?= python3
VENV ?= .venv
TORCH ?= torch==2.13.0
BIN := $(VENV)/bin
PYTEST_ARGS ?=
# GPTQModel 7.7.0 (the quantized strategy's `gptq` method) declares torch>=2.14.1; beside the pinned
# torch 2.13.0 it is installed without dependencies, plus the packages it really imports
# (docs/quantized.md; strategies/quantized/gptq.py GPTQ_REQUIREMENTS holds the same list, a test compares them).
GPTQ_PACKAGES := gptqmodel==7.7.0 pypcre==0.6.4 logbar==0.4.15 threadpoolctl==3.8.0 device-smi==0.5.7 \
	tokenicer==0.0.14 defuser==0.0.28 'pillow>=11'

# The local runtimes beside transformers (docs/runtimes.md). llama-cpp-python is pinned here so that a
# wheel built once (scripts/llama_cpp_wheel.sh; CI keeps it in WHEELHOUSE) is the one installed; pip
# builds it from source otherwise (~8 min on 2 cores, then pip's own cache). For CUDA:
#   CMAKE_ARGS="-DGGML_CUDA=on" make llama-cpp
LLAMA_CPP_VERSION := 0.3.36
WHEELHOUSE ?=

.PHONY: setup gptq gptq-check llama-cpp ort-genai runtimes-check demo test lint format clean

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install $(TORCH)
	$(BIN)/python -m pip install -e '.[engine,quant,ort-genai,gui,dev]'
	touch $@

setup: $(VENV)/.installed

$(VENV)/.gptq: $(VENV)/.installed
	$(BIN)/python -m pip install --no-deps $(GPTQ_PACKAGES)
	touch $@

gptq: $(VENV)/.gptq

# Not part of `setup`/`test`: a cold install builds GPTQModel and pypcre (C) from source, 3.5-4 min on
# the 2-core CI machine (docs/quantized.md). Without it the GPTQ tests that need GPTQModel skip; CI
# (.ci/run) runs this target after `make test`.
gptq-check: gptq
	$(BIN)/python -m pytest tests/test_gptq.py $(PYTEST_ARGS)

$(VENV)/.llama-cpp: $(VENV)/.installed
	$(if $(WHEELHOUSE),LLAMA_CPP_VERSION=$(LLAMA_CPP_VERSION) PYTHON=$(BIN)/python bash scripts/llama_cpp_wheel.sh $(WHEELHOUSE))
	$(BIN)/python -m pip install $(if $(WHEELHOUSE),--find-links $(WHEELHOUSE)) \
		'llama-cpp-python==$(LLAMA_CPP_VERSION)' -e '.[llama-cpp]'
	touch $@

llama-cpp: $(VENV)/.llama-cpp

# Part of `setup` now (binary wheels; the demo's quantized variant): kept for venvs made before.
$(VENV)/.ort-genai: $(VENV)/.installed
	$(BIN)/python -m pip install -e '.[engine,ort-genai]'
	touch $@

ort-genai: $(VENV)/.ort-genai

# Not part of `setup`/`test` (the llama.cpp build); without llama-cpp-python these tests skip. CI
# (.ci/run) runs this target with WHEELHOUSE=~/.cache/workbench-ci/wheels. The ONNX Runtime GenAI tests
# run in `make test` (its wheels are part of `setup`).
runtimes-check: llama-cpp ort-genai
	$(BIN)/python -m pytest tests/test_llama_cpp.py tests/test_runtimes.py tests/test_runtime_drafts.py $(PYTEST_ARGS)

demo: setup
	$(BIN)/workbench demo

lint: setup
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/lint-imports
	$(BIN)/mypy

test: lint
	$(BIN)/python -m pytest $(PYTEST_ARGS)

format: setup
	$(BIN)/ruff format .
	$(BIN)/ruff check --fix .

clean:
	rm -rf $(VENV) build *.egg-info .pytest_cache .ruff_cache
