# Two commands on a fresh machine: `make demo` and `make test`.
# The venv is created once; the project is (re)installed only when pyproject.toml or this file changes.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.guidebench-installed
# llama.cpp's AMX kernels fault (SIGSEGV at `ldtilecfg`) on CPUs that report AMX to a guest that
# cannot use it, as this workplace's VMs do: the wheel is built once without them and kept in a
# wheelhouse named by version and flags, so no wheel built with other flags (pip's cache) is used.
LLAMA_VERSION := 0.3.36
LLAMA_CFLAGS := -mno-amx-tile -mno-amx-int8 -mno-amx-bf16
WHEELHOUSE ?= $(HOME)/.cache/guidebench/wheels/llama-cpp-python-$(LLAMA_VERSION)-noamx
LLAMA_WHEEL := $(WHEELHOUSE)/.built

.PHONY: demo test test-fast test-random test-isolated test-repeat install bench clean-venv

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)

$(LLAMA_WHEEL): | $(BIN)/python
	# llama-cpp-python compiles from source here (~5-10 min on 2 cores, once per machine).
	CMAKE_ARGS="-DCMAKE_C_FLAGS='$(LLAMA_CFLAGS)' -DCMAKE_CXX_FLAGS='$(LLAMA_CFLAGS)'" \
		$(BIN)/python -m pip wheel --no-deps --no-cache-dir -w $(WHEELHOUSE) 'llama-cpp-python==$(LLAMA_VERSION)'
	touch $(LLAMA_WHEEL)

$(STAMP): pyproject.toml Makefile $(LLAMA_WHEEL) | $(BIN)/python
	$(BIN)/python -m pip install --upgrade pip
	$(BIN)/python -m pip install --force-reinstall --no-deps $(WHEELHOUSE)/llama_cpp_python-$(LLAMA_VERSION)-*.whl
	$(BIN)/python -m pip install -e '.[dev,cluster]'
	touch $(STAMP)

install: $(STAMP)

demo: $(STAMP)
	$(BIN)/guidebench demo --quick --force

# Two test processes: the embedded model runs on half the cores, so the real-model tests pair up.
# --dist loadgroup keeps the tests that share a slow fixture (`xdist_group`: the quick demo) on one process.
TEST_WORKERS ?= 2
PYTEST := $(BIN)/python -m pytest -q -n $(TEST_WORKERS) --dist loadgroup

test: $(STAMP)
	$(PYTEST)

test-fast: $(STAMP)
	$(PYTEST) -m "not slow"

# The suite in a random order (pytest-randomly), seeded: SEED=N repeats an order, without it a new seed is drawn.
SEED ?=
test-random: $(STAMP)
	@seed="$(SEED)"; seed="$${seed:-$$(od -An -N4 -tu4 /dev/urandom | tr -d ' ')}"; \
	echo "test order: seed $$seed (make test-random SEED=$$seed repeats it)"; \
	$(PYTEST) -p randomly --randomly-seed=$$seed

# Each test module alone, in a pytest process of its own (JOBS at a time); failing modules' output in build/isolated/.
JOBS ?= 1
test-isolated: $(STAMP)
	$(BIN)/python tests/setup/each_module_alone.py --jobs $(JOBS)

# `make test` N times in a row on a fresh clone of REF (committed work): green on every run, not on most.
N ?= 3
REF ?= HEAD
test-repeat:
	bash tests/setup/repeat_suite.sh $(N) $(REF)

bench: $(STAMP)
	$(BIN)/python -m benchmarks.bench_lm

clean-venv:
	rm -rf $(VENV)
