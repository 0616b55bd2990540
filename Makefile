# Two entry points. Both create .venv when it is missing and install what they need into it.
#   make demo  - install kgplm and run the demo on the embedded default graph (CMeKG from pycmekg)
#   make test  - install kgplm with its dev extras and run the test suite
#   make docs  - build the documentation site into docs/_build/html, warnings as errors
#   make lint  - ruff check and ruff format --check (configured in pyproject.toml)
#   make dist  - build the wheel and the sdist into dist/
#   make check-wheel - install the wheel into a fresh virtual environment and run its smoke test
# pip installs the exact versions in constraints/ci.txt (torch: the CPU wheel).
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
CONSTRAINTS ?= constraints/ci.txt
PIP_INSTALL = $(BIN)/python -m pip install --quiet -c $(CONSTRAINTS)

.PHONY: demo test docs lint dist check-wheel benchmarks mutations clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

$(VENV)/.installed-base: pyproject.toml $(CONSTRAINTS) | $(BIN)/python
	$(PIP_INSTALL) -e .
	touch $@

$(VENV)/.installed-dev: pyproject.toml $(CONSTRAINTS) | $(BIN)/python
	$(PIP_INSTALL) -e '.[dev]'
	touch $(VENV)/.installed-base $@

demo: $(VENV)/.installed-base
	@echo "make demo: about 15 minutes on 2 busy CPU cores (CMeKG, PEPR, TransE, 300 SMedBERT steps)"
	$(BIN)/kgplm demo

# one pytest worker per core (at most 4: each loads the real graphs it tests), each test file whole in one worker
TEST_WORKERS ?= auto
test: $(VENV)/.installed-dev
	$(BIN)/python -m pytest -n $(TEST_WORKERS) --maxprocesses 4 --dist loadfile

docs: $(VENV)/.installed-dev
	$(BIN)/python -m sphinx -W --keep-going -q -b html docs docs/_build/html

lint: $(VENV)/.installed-dev
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

dist: $(VENV)/.installed-dev
	rm -rf dist
	$(BIN)/python -m build --outdir dist .

check-wheel: dist
	$(BIN)/python tools/check_wheel.py --constraints $(CONSTRAINTS) dist

# opt-in: put each fixed defect back (tests/mutations/*.patch) and check that its regression test fails
mutations: $(VENV)/.installed-dev
	$(BIN)/python tests/mutations/runner.py

benchmarks: $(VENV)/.installed-dev
	$(BIN)/python benchmarks/kg_load.py

clean:
	rm -rf $(VENV) artifacts .pytest_cache dist docs/_build
