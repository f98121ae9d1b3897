# cocoeval — every target installs what it needs into .venv first.
PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
# What ruff and mypy check, and whether `ruff format --check` fails the build: `strict` (the
# default: the tree is formatted) fails, `warn` prints how many files it would reformat and goes on.
LINT_PATHS   := cocoeval tests benchmarks notebooks
FORMAT_CHECK ?= strict
# pytest's worker processes (pytest-xdist; 0: none, in this process). --dist loadgroup keeps the
# tests of the checkout's demo run on one worker (tests/conftest.py).
PYTEST_WORKERS ?= 2
PYTEST := $(VENV)/bin/pytest -n $(PYTEST_WORKERS) --dist loadgroup
# llama-cpp-python builds from source; a native build crashes at inference on some CPUs.
export CMAKE_ARGS ?= -DGGML_NATIVE=OFF

.PHONY: install install-local bytecode demo figures paper check test lint format-check bench clean

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e ".[notebooks,dev]"
	touch $@

install: $(VENV)/.installed

$(VENV)/.installed-local: $(VENV)/.installed
	$(PY) -m pip install -q -e ".[notebooks,local,dev]"
	touch $@

install-local: $(VENV)/.installed-local

## cocoeval's modules byte-compiled, as pip compiles a package it installs (not an editable one):
## where PYTHONDONTWRITEBYTECODE is set, every process (each notebook kernel, each figure worker)
## would compile every module it imports again, 0.1-0.4 s each. Quick when nothing changed.
bytecode: install
	$(PY) -m compileall -q cocoeval

## The main job (offline, no API key): the shipped QMSum sample + generated debates -> benchmark -> simulations on the local model
demo: install-local bytecode
	$(VENV)/bin/cocoeval run params/demo.yaml --allow-invalid
	$(VENV)/bin/cocoeval report runs/demo --out runs/demo/report --html
	$(VENV)/bin/cocoeval notebooks params/demo.yaml --out runs/demo/notebooks
	@echo "open runs/demo/report/index.html in a browser first (one file: figures, tables, the conversation viewer)"

## The committed figures/ from the demo run (the only target that rewrites them)
figures: install-local bytecode
	$(VENV)/bin/cocoeval run params/demo.yaml --allow-invalid
	rm -rf figures/[0-9][0-9]_*/  # a figure the run no longer makes is not left behind
	$(VENV)/bin/cocoeval notebooks params/demo.yaml --out runs/demo/notebooks --figures figures

## The same with the paper's setups over the real data (needs API keys): fetch what is missing
## (what is there and matches data/fetch-manifest.json is skipped), then build and run as params/paper.yaml says
paper: install bytecode
	$(VENV)/bin/cocoeval fetch qmsum iq2 tcr --out data
	$(VENV)/bin/cocoeval check params/paper.yaml
	$(VENV)/bin/cocoeval run params/paper.yaml --allow-invalid
	$(VENV)/bin/cocoeval report runs/paper --out runs/paper/report --html
	$(VENV)/bin/cocoeval notebooks params/paper.yaml --out runs/paper/notebooks --figures figures/paper

## The fast loop, minutes on two cores: lint, format check, types and the tests not marked slow
## (no local-model build; docs/testing.md says what is slow and what the split takes)
check: install
	$(VENV)/bin/ruff check $(LINT_PATHS)
	@$(MAKE) --no-print-directory format-check
	$(VENV)/bin/mypy
	$(PYTEST) -m "not slow"

## Everything, slow tests and notebooks included: what CI runs (the local model too: builds
## llama-cpp-python once, then pip's cache serves it)
test: install-local bytecode
	$(VENV)/bin/ruff check $(LINT_PATHS)
	@$(MAKE) --no-print-directory format-check
	$(VENV)/bin/mypy
	$(PYTEST)
	$(VENV)/bin/pytest --nbval-lax notebooks/ -p no:cacheprovider

lint: install
	$(VENV)/bin/ruff check $(LINT_PATHS)
	$(VENV)/bin/mypy

format-check: install
ifeq ($(FORMAT_CHECK),strict)
	$(VENV)/bin/ruff format --check $(LINT_PATHS)
else
	@$(VENV)/bin/ruff format --check $(LINT_PATHS) 2>/dev/null | tail -n 1; \
	echo "(ruff format --check: not enforced with FORMAT_CHECK=warn)"
endif

## Benchmarks (print figures)
bench: install bytecode
	$(PY) benchmarks/build_speed.py
	$(PY) benchmarks/runner_throughput.py
	$(PY) benchmarks/analysis_speed.py
	$(PY) benchmarks/leaderboard.py
	$(PY) benchmarks/known_truth.py
	$(PY) benchmarks/paired.py
	$(PY) benchmarks/stopping.py
	$(PY) benchmarks/detectability.py
	$(PY) benchmarks/turn_taking.py
	$(PY) benchmarks/paper_scale.py
	$(PY) benchmarks/cost.py
	$(PY) benchmarks/hostile.py
	$(PY) benchmarks/import_graph.py

clean:
	rm -rf build .pytest_cache .ruff_cache
