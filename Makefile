# Two entry points for a fresh machine: `make demo` and `make test`.
# Each creates .venv and installs what it needs; nothing else is assumed.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
# The compiled parts: a change to any of them rebuilds the editable install.
C_SOURCES := $(wildcard src/weftsearch/*.c)

.PHONY: demo test lint typecheck pytest slow bench bench-quick eval wheel clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip

$(VENV)/.installed-base: pyproject.toml setup.py $(C_SOURCES) | $(BIN)/python
	$(BIN)/python -m pip install -q -e .
	touch $@

$(VENV)/.installed-dev: pyproject.toml setup.py $(C_SOURCES) | $(BIN)/python
	$(BIN)/python -m pip install -q -e '.[dev]'
	touch $@ $(VENV)/.installed-base

$(VENV)/.installed-bench: pyproject.toml setup.py $(C_SOURCES) | $(BIN)/python
	$(BIN)/python -m pip install -q -e '.[dev,bench]'
	touch $@ $(VENV)/.installed-dev $(VENV)/.installed-base

demo: $(VENV)/.installed-base
	$(BIN)/weft-search demo

lint: $(VENV)/.installed-dev
	$(BIN)/ruff check src tests examples bench fuzz

typecheck: $(VENV)/.installed-dev
	$(BIN)/mypy

pytest: $(VENV)/.installed-dev
	$(BIN)/python -m pytest -q

test: lint typecheck pytest

slow: $(VENV)/.installed-dev
	$(BIN)/python -m pytest -q -m slow

# Every figure of issue 14 side by side (SciFact, 100k, 1M; about 12 GB at its peak: an idle
# machine), then persistence. bench-quick: SciFact only, few passes, 1-2 minutes.
bench: $(VENV)/.installed-bench
	$(BIN)/python bench/query_path.py --json bench.json
	$(BIN)/python bench/persistence.py

bench-quick: $(VENV)/.installed-bench
	$(BIN)/python bench/query_path.py --quick

# Reprint every number in docs/EVAL.md (rewriting its tables) and write the full
# reports under eval-out/. DATA defaults to the shared copies beside the checkout.
DATA ?= ../shared/datasets
eval: $(VENV)/.installed-dev
	$(BIN)/python bench/eval_published.py --data $(DATA) --write --out eval-out

wheel: $(VENV)/.installed-dev
	rm -rf dist
	$(BIN)/python -m build --wheel --outdir dist .

clean:
	rm -rf $(VENV) dist build .mypy_cache .ruff_cache .pytest_cache
