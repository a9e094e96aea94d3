# PPO Playground. `make play` and `make test` take a fresh machine from nothing to working.
# Override the torch build: `make test TORCH="torch==2.13.0 --index-url https://download.pytorch.org/whl/cpu"`.
PYTHON ?= python3
TORCH ?= torch==2.13.0
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
PYTEST_ARGS ?=
# One torch thread: on a shared 2-core machine two threads are slower and not reproducible.
export OMP_NUM_THREADS ?= 1

.PHONY: setup play demo explorer test test-all bench bases lint gpu-check screenshots wheelhouse offline-setup workshop workshop-verify clean

setup: $(STAMP)

# pip speaks (its progress bars, what it installs) for the large downloads; only its own upgrade is quiet.
# -e: the checkout goes on sys.path by a plain .pth file (package-dir in pyproject.toml picks setuptools' static-pth
# strategy), with none of the warning boxes that the compat, strict and meta-path-finder modes print.
$(STAMP): pyproject.toml
	@echo "== [1/3] a virtual environment in $(VENV), with the newest pip"
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	@echo "== [2/3] torch ($(TORCH)): the largest download"
	$(PY) -m pip install --progress-bar on $(TORCH)
	@echo "== [3/3] the playground and its dependencies (streamlit, hydra, gymnasium, pytest, ...)"
	$(PY) -m pip install --progress-bar on -e ".[dev]"
	touch $(STAMP)
	@echo "== set up: $(VENV) is ready"

play: setup
	$(PY) -m playground.demo

# One pytest worker per core (pytest-xdist): each test trains on one torch thread, so two cores run two at once;
# `worksteal` hands a worker that runs dry the other's queued tests, so one long test late in a queue does not leave a
# core idle. `--durations=10` prints the ten slowest, so a test that grows shows in every CI log.
test: setup
	$(PY) -m pytest -m "not slow" -n auto --dist worksteal --durations=10 $(PYTEST_ARGS)

test-all: setup
	$(PY) -m pytest -n auto --dist worksteal --durations=10 $(PYTEST_ARGS)

bench: setup
	$(PY) -m benchmarks.run_all

# The SFT bases that ship in bases/, rebuilt from scratch and compared with the files (about 20 min of CPU, countdown's
# most of it); the rebuilt ones are written in their place. `--check` lists which bases the configs need.
bases: setup
	$(PY) -m playground.bases

# ruff, then mypy over playground/ and app/ ([tool.mypy] in pyproject.toml; incremental: .mypy_cache/)
lint: setup
	$(PY) -m ruff check playground app tests benchmarks hydra_plugins
	$(PY) -m mypy

gpu-check: setup
	$(PY) -m benchmarks.gpu_check

# docs/lab.png, the README's picture: the Lab trains a short run and its fix in headless Chromium (as the browser tests)
screenshots: setup
	$(PY) tests/app/screenshots.py

# Every wheel the project needs, for laptops with no network (build it on the same OS, CPU and Python as they have).
# torch comes first from its own index (TORCH may name one); the rest from PyPI, with that torch found in wheelhouse/.
wheelhouse: setup
	$(PY) -m pip wheel --quiet --wheel-dir wheelhouse $(TORCH)
	$(PY) -m pip wheel --quiet --wheel-dir wheelhouse --find-links wheelhouse ".[dev]" "setuptools>=68" wheel pip
	@echo "wheels in ./wheelhouse; copy the checkout with it to each laptop and run: make offline-setup"

# Install from wheelhouse/ alone (no index, no network); afterwards every other target uses this .venv as is.
offline-setup:
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --no-index --find-links wheelhouse --upgrade pip
	$(PY) -m pip install --no-index --find-links wheelhouse "$(firstword $(TORCH))" -e ".[dev]"
	touch $(STAMP)

# Every exercise's mystery run, ready in outputs/workshop/ before the session (slow laptops).
workshop: setup
	$(PY) -m playground.exercise prepare

# Instructors: every exercise still shows its failure and its reference fix still passes (a few minutes).
workshop-verify: setup
	$(PY) -m playground.exercise verify

clean:
	rm -rf $(VENV) outputs multirun .pytest_cache .ruff_cache .mypy_cache *.egg-info
