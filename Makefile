# One command sets everything up and starts the first exercise: `make start`.
# One command sets everything up and runs lint, type checks and tests: `make test`.
PYTHON ?= python3
VENV ?= .venv
# Installed before the package so that pip never resolves `torch>=2.1` to a
# multi-GB CUDA build. Override, e.g. `make TORCH_SPEC='torch==2.5.1' test`.
TORCH_SPEC ?= torch==2.13.0
# Where torch comes from. `auto`: PyTorch's CPU wheel index when it answers within
# 3 s (a ~200 MB CPU build), else pip's default index (on PyPI for Linux, the CUDA
# build). A URL: that index, e.g. https://download.pytorch.org/whl/cu124.
# `default`: pip's default index.
TORCH_INDEX ?= auto
TORCH_CPU_INDEX ?= https://download.pytorch.org/whl/cpu
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: setup start test lint typecheck unit clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	@index='$(TORCH_INDEX)'; \
	if [ "$$index" = auto ]; then \
		if $(PYTHON) tools/reachable.py '$(TORCH_CPU_INDEX)/' 3; then index='$(TORCH_CPU_INDEX)'; \
		else index=default; echo "note: $(TORCH_CPU_INDEX) is out of reach: torch from pip's default index"; fi; \
	fi; \
	if [ "$$index" = default ]; then set -x; $(BIN)/python -m pip install --quiet "$(TORCH_SPEC)"; \
	else set -x; $(BIN)/python -m pip install --quiet "$(TORCH_SPEC)" --index-url "$$index"; fi
	$(BIN)/python -m pip install --quiet numpy
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
