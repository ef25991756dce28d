# Two entry points (see README): `make study` runs the default study and writes its report;
# `make test` runs the whole test suite (what CI runs).
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STUDY ?= default

.PHONY: study test test-fast test-tools format lint

$(BIN)/.dpscale-installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet -e '.[analysis,dev]'
	@# dpscale's bytecode, as pip writes it for a package it installs (not for an editable
	@# one): where PYTHONDONTWRITEBYTECODE is set, every launcher, rank and analysis job
	@# would otherwise compile the modules it imports (0.05-0.25 s each)
	$(BIN)/python -m compileall -q src tests/helpers
	touch $@

# STUDY=x runs studies/x.yaml over config.yaml (its results go where its `study:` says)
STUDY_FILE := $(if $(filter default,$(STUDY)),,--configfile studies/$(STUDY).yaml)

study: $(BIN)/.dpscale-installed
	$(BIN)/snakemake $(STUDY_FILE)
	$(BIN)/snakemake $(STUDY_FILE) --report "$$($(BIN)/dpscale report-path $(STUDY_FILE:--configfile=))"

# Two phases (docs/decisions/tests-side-by-side.md): the tests that measure nothing three at
# a time (one worker mostly waits on SLURM), then those that measure one at a time; both
# always run, and either failing fails.
test: $(BIN)/.dpscale-installed test-tools
	@status=0; \
	$(BIN)/python -m pytest -n 3 -m side_by_side || status=$$?; \
	$(BIN)/python -m pytest -m "not side_by_side" || status=$$?; \
	exit $$status

# The report test opens the report in headless Chromium (Debian's package): installed here
# when missing and apt-get can (root), as make study installs what the workflow needs.
test-tools:
	@command -v chromium >/dev/null || { [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null \
		&& apt-get update -qq && apt-get install -y -qq chromium >/dev/null; } \
		|| echo "dpscale: no chromium; the report test will say so (apt-get install chromium)"

test-fast: $(BIN)/.dpscale-installed
	$(BIN)/python -m pytest -m "not slow"

format: $(BIN)/.dpscale-installed
	$(BIN)/ruff format src tests benchmarks
	$(BIN)/ruff check --fix src tests benchmarks
	$(BIN)/snakefmt Snakefile workflow/rules
