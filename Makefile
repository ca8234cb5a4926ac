# Two commands are documented: `make demo` and `make test` (both set up what they need).
SHELL := /bin/bash
.DEFAULT_GOAL := help

PY := .venv/bin/python
LINT_PATHS := $(wildcard airflow_cdc devtools tests dags spark_jobs bench docker scripts)
# `make test` runs every test whatever the environment or MAKEFLAGS say: a variable left set
# on a CI machine must not narrow it silently. So its flags are fixed (`override` wins over
# the environment, `make -e` and command-line assignments), and pytest's own environment
# variable is dropped. To narrow the run, name the tests: `make test-some TESTS="..."`.
override PYTEST_FLAGS := -q -p no:cacheprovider --durations=30
# Property tests draw the same examples every run (tests/conftest.py's "ci" profile), so a
# run fails only for a reason; `make test-random` searches with fresh seeds.
override PROPERTY_FLAGS := --hypothesis-profile=ci
unexport PYTEST_ADDOPTS
BENCH_ARGS ?=
SOAK_ARGS ?=
UV ?= $(shell command -v uv 2>/dev/null || echo "python3 -m uv")

.PHONY: help setup lint test test-some test-random demo demo-cluster lock bench soak

help:  ## list the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | sed -E 's/:.*## /\t/'

setup:  ## install system packages (MariaDB, Java) and the locked Python environment
	@scripts/setup.sh

# All three checks run, so one run shows every problem; the target fails if any did.
lint: setup  ## ruff (lint + format check) and mypy --strict
	@status=0; \
	echo "ruff check $(LINT_PATHS)"; $(PY) -m ruff check $(LINT_PATHS) || status=1; \
	echo "ruff format --check $(LINT_PATHS)"; $(PY) -m ruff format --check $(LINT_PATHS) || status=1; \
	echo "mypy --strict airflow_cdc devtools"; $(PY) -m mypy --strict airflow_cdc devtools || status=1; \
	exit $$status

# The integration tests one at a time (they share servers and clusters), then the unit tests
# on every core (pytest-xdist); both run, so one run shows every failure.
test: lint  ## set up, lint, then run every test
	@status=0; \
	$(PY) -m pytest $(PYTEST_FLAGS) $(PROPERTY_FLAGS) tests/integration || status=1; \
	$(PY) -m pytest $(PYTEST_FLAGS) $(PROPERTY_FLAGS) -n auto tests/unit || status=1; \
	exit $$status

# TESTS counts only when given on the command line, never from the environment.
test-some: setup  ## run the tests pytest selects: make test-some TESTS="tests/unit -k emit"
	@$(if $(and $(filter command line,$(origin TESTS)),$(strip $(TESTS))),true,\
		echo 'name the tests on the command line: make test-some TESTS="tests/unit -k emit"' >&2; exit 2)
	$(PY) -m pytest $(PYTEST_FLAGS) $(PROPERTY_FLAGS) $(TESTS)

# Every property test (hypothesis's `hypothesis` marker), or those of TESTS="tests/unit", with
# a fresh seed a round, printed: SEED=n replays one, ROUNDS=n searches n rounds (stopping at
# the first failure). Each failure found is kept in its test as an explicit @example.
# TESTS, SEED and ROUNDS count only when given on the command line.
test-random: setup  ## property tests with random seeds: make test-random TESTS=tests/unit ROUNDS=5
	@rounds=$(if $(filter command line,$(origin SEED)),1,$(if $(filter command line,$(origin ROUNDS)),$(ROUNDS),1)); \
	for round in $$(seq "$$rounds"); do \
		seed=$(if $(filter command line,$(origin SEED)),$(SEED),$$($(PY) -c 'import secrets; print(secrets.randbits(32))')); \
		echo "[test-random] round $$round of $$rounds: --hypothesis-seed=$$seed (replay: make test-random SEED=$$seed)"; \
		$(PY) -m pytest $(PYTEST_FLAGS) --hypothesis-profile=random --hypothesis-seed=$$seed -m hypothesis \
			$(if $(filter command line,$(origin TESTS)),$(TESTS)) || exit 1; \
	done

demo: setup  ## run the end-to-end demo
	$(PY) -m devtools.demo

demo-cluster: setup  ## the demo with the lake on S3 (SeaweedFS) and Spark on a standalone cluster
	$(PY) -m devtools.demo --cluster --dir .demo-cluster

# BENCH_ARGS="--sizes 100000,200000" for a quick check; see bench/run_all.py --help.
bench: setup  ## run the benchmarks (~45 min): bench/results.json, docs/benchmarks.md + .png
	$(PY) bench/run_all.py $(BENCH_ARGS)

# SOAK_ARGS="--minutes 60 --seed 3" for a longer run or to replay one; see scripts/soak.py --help.
soak: setup  ## seeded random faults under a writer (~25 min), then replicas vs source: bench/out/soak.json
	$(PY) scripts/soak.py $(SOAK_ARGS)

lock:  ## regenerate requirements.lock from requirements.in
	$(UV) pip compile requirements.in --python-version 3.11 --generate-hashes -o requirements.lock
