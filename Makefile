# greentrain: `make run` sets everything up and plans the default scenario; `make test` sets up and passes the tests.
PYTHON ?= python3
VENV   ?= .venv
BIN    := $(VENV)/bin
TORCH  := torch==2.13.0

.PHONY: run test test-fast setup setup-dev lint bench clean

$(BIN)/activate:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip

setup: $(BIN)/activate
	$(BIN)/pip install -q -e .

# torch is pinned and installed first: an unpinned torch would pull several GB of CUDA packages.
setup-dev: $(BIN)/activate
	$(BIN)/pip install -q $(TORCH)
	$(BIN)/pip install -q -e ".[dev,torch,plot,gpu,search,mlflow]"

run: setup
	$(BIN)/greentrain plan

# pytest-xdist: TEST_WORKERS processes (the CI machine has 2 cores), whole modules per worker (--dist loadscope)
# so a module's shared fixture (a trained tiny model, a study run once) is built once; TEST_WORKERS=0 runs serially
TEST_WORKERS ?= 2
PYTEST := $(BIN)/python -m pytest -n $(TEST_WORKERS) --dist loadscope

test: setup-dev
	$(PYTEST)

# the edit loop: leaves out the multi-process tests and those marked slow (whole studies, long fuzz runs); CI runs all
test-fast: setup-dev
	$(PYTEST) -m "not slow and not distributed" --ignore=tests/distributed

lint: setup-dev
	$(BIN)/ruff check src tests benchmarks
	$(BIN)/mypy

bench: setup-dev
	$(BIN)/python benchmarks/run_all.py

clean:
	rm -rf $(VENV) build dist src/*.egg-info
