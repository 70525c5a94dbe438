# Two commands from a fresh clone (see README): `make demo` and `make test`.
# TORCH picks the torch build: the default pins the CPU wheel CI uses; for an NVIDIA GPU run e.g.
#   make demo TORCH="torch --index-url https://download.pytorch.org/whl/cu128"
PYTHON ?= python3
VENV ?= .venv
TORCH ?= torch==2.13.0
BIN := $(VENV)/bin
PYTEST_ARGS ?=

.PHONY: setup demo test lint format clean

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip
	$(BIN)/python -m pip install $(TORCH)
	$(BIN)/python -m pip install -e '.[engine,quant,gui,dev]'
	touch $@

setup: $(VENV)/.installed

demo: setup
	$(BIN)/workbench demo

lint: setup
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/lint-imports

test: lint
	$(BIN)/python -m pytest $(PYTEST_ARGS)

format: setup
	$(BIN)/ruff format .
	$(BIN)/ruff check --fix .

clean:
	rm -rf $(VENV) build *.egg-info .pytest_cache .ruff_cache
