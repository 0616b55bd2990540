# Two entry points. Both create .venv when it is missing and install what they need into it.
#   make demo  - install kgplm and run the demo on the embedded default graph (CMeKG from pycmekg)
#   make test  - install kgplm with its dev extras and run the test suite
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin

.PHONY: demo test benchmarks mutations clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

$(VENV)/.installed-base: pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install --quiet -e .
	touch $@

$(VENV)/.installed-dev: pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	touch $(VENV)/.installed-base $@

demo: $(VENV)/.installed-base
	@echo "make demo: about 15 minutes on 2 busy CPU cores (CMeKG, PEPR, TransE, 300 SMedBERT steps)"
	$(BIN)/kgplm demo

test: $(VENV)/.installed-dev
	$(BIN)/python -m pytest

# opt-in: put each fixed defect back (tests/mutations/*.patch) and check that its regression test fails
mutations: $(VENV)/.installed-dev
	$(BIN)/python tests/mutations/runner.py

benchmarks: $(VENV)/.installed-dev
	$(BIN)/python benchmarks/kg_load.py

clean:
	rm -rf $(VENV) artifacts .pytest_cache
