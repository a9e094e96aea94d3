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

.PHONY: setup play demo explorer test test-all bench lint gpu-check wheelhouse workshop clean

setup: $(STAMP)

$(STAMP): pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet $(TORCH)
	$(PY) -m pip install --quiet -e ".[dev]"
	touch $(STAMP)

play: setup
	$(PY) -m playground.demo

test: setup
	$(PY) -m pytest -m "not slow" $(PYTEST_ARGS)

test-all: setup
	$(PY) -m pytest $(PYTEST_ARGS)

bench: setup
	$(PY) -m benchmarks.run_all

lint: setup
	$(PY) -m ruff check playground app tests benchmarks hydra_plugins

gpu-check: setup
	$(PY) -m benchmarks.gpu_check

wheelhouse: setup
	$(PY) -m pip wheel --quiet --wheel-dir wheelhouse $(TORCH) -e ".[dev]"
	@echo "wheels in ./wheelhouse; install offline: pip install --no-index --find-links wheelhouse $(TORCH) -e '.[dev]'"

workshop: setup
	$(PY) -m playground.exercise prepare

clean:
	rm -rf $(VENV) outputs multirun .pytest_cache .ruff_cache *.egg-info
