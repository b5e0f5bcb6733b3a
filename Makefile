# Two entry points for a fresh machine: `make demo` and `make test`.
# Each creates .venv and installs what it needs; nothing else is assumed.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
# The compiled parts: a change to any of them rebuilds the editable install.
C_SOURCES := $(wildcard src/weftsearch/native/*.c src/weftsearch/native/*.h)

.PHONY: demo test lint typecheck pytest slow bench bench-load bench-quick eval wheel clean

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

# Two workers (pytest-xdist; worksteal balances the long byte-flip sweeps): the default run
# stays well inside 10 minutes on 2 cores, where one process took 9-10.
pytest: $(VENV)/.installed-dev
	$(BIN)/python -m pytest -q -n 2 --dist worksteal --durations=25

test: lint typecheck pytest

slow: $(VENV)/.installed-dev
	$(BIN)/python -m pytest -q -m slow

# Every figure of issue 14 side by side (SciFact, 100k, 1M; about 12 GB at its peak: an idle
# machine), then persistence. bench-quick: SciFact only, few passes, 1-2 minutes.
bench: $(VENV)/.installed-bench
	$(BIN)/python bench/query_path.py --json bench.json
	$(BIN)/python bench/persistence.py

# Every load-ladder figure of docs/BENCHMARKS.md (issues 16 and 17): in-process and
# multi-process targets with their peers and a commit under load, the server with 1 and 2
# workers, then the 1M synthetic corpus. Hours on a quiet machine (60 s rungs).
bench-load: $(VENV)/.installed-bench
	$(BIN)/weft-search bench load --data $(DATA)/scifact --arms bm25,hybrid --target threads:2 \
	    --target processes:2 --commit-under-load --json load-scifact.json --plot docs/load-ladder-scifact.png
	$(BIN)/weft-search bench load --data $(DATA)/scifact --arms bm25,hybrid --target serve:1 \
	    --target serve:2 --json load-server.json --plot docs/load-ladder-server.png
	$(BIN)/weft-search bench load --synthetic 1000000 --arms bm25,hybrid --target threads:2 \
	    --target processes:2 --json load-1m.json --plot docs/load-ladder-1m.png

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
