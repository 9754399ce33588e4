# One command sets everything up and starts the first exercise: `make start`.
# One command sets everything up and runs lint, type checks and tests: `make test`.
PYTHON ?= python3
VENV ?= .venv
# Installed before the package so that pip never resolves `torch>=2.1` to a
# multi-GB CUDA build. Override, e.g. `make TORCH_SPEC='torch==2.5.1' test`.
TORCH_SPEC ?= torch==2.13.0
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: setup start test lint typecheck unit clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet "$(TORCH_SPEC)" numpy
	$(BIN)/python -m pip install --quiet -e ".[dev]"
	touch $(STAMP)

setup: $(STAMP)

start: $(STAMP)
	$(BIN)/trainer start sigmoid

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/lint-imports

typecheck: $(STAMP)
	$(BIN)/mypy

# One worker per core (pytest-xdist; an idle worker takes tests queued for the other);
# each worker keeps one warm checking server. Bytecode is cached even where the
# environment says not to (PYTHONDONTWRITEBYTECODE): the tests start many processes.
unit: $(STAMP)
	PYTHONDONTWRITEBYTECODE= $(BIN)/pytest -n auto --dist worksteal

test: lint typecheck unit

clean:
	rm -rf $(VENV) dist build .mypy_cache .ruff_cache .pytest_cache
