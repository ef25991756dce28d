# Two entry points (see README): `make study` runs the default study and writes its report;
# `make test` runs the whole test suite (what CI runs).
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STUDY ?= default

.PHONY: study test test-fast format lint

$(BIN)/.dpscale-installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet -e '.[analysis,dev]'
	touch $@

study: $(BIN)/.dpscale-installed
	$(BIN)/snakemake
	$(BIN)/snakemake --report results/$(STUDY)/report.html

test: $(BIN)/.dpscale-installed
	$(BIN)/python -m pytest

test-fast: $(BIN)/.dpscale-installed
	$(BIN)/python -m pytest -m "not slow"

format: $(BIN)/.dpscale-installed
	$(BIN)/ruff format src tests benchmarks
	$(BIN)/ruff check --fix src tests benchmarks
	$(BIN)/snakefmt Snakefile workflow/rules
