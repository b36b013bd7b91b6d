# Two commands on a fresh machine: `make demo` and `make test`.
# The venv is created once; the project is (re)installed only when pyproject.toml changes.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.guidebench-installed

.PHONY: demo test test-fast install bench clean-venv

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)

$(STAMP): pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install --upgrade pip
	# llama-cpp-python compiles from source here (~10 min, once: pip caches the wheel).
	$(BIN)/python -m pip install -e '.[dev]'
	touch $(STAMP)

install: $(STAMP)

demo: $(STAMP)
	$(BIN)/guidebench demo --quick

# Two test processes: the embedded model runs on half the cores, so the real-model tests pair up.
TEST_WORKERS ?= 2

test: $(STAMP)
	$(BIN)/python -m pytest -q -n $(TEST_WORKERS)

test-fast: $(STAMP)
	$(BIN)/python -m pytest -q -n $(TEST_WORKERS) -m "not slow"

bench: $(STAMP)
	$(BIN)/python -m benchmarks.run

clean-venv:
	rm -rf $(VENV)
