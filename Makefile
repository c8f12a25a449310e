# Every target creates .venv from the repo's own files when it is missing.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
CORES ?= 2

.PHONY: install run test lint format bench clean

$(STAMP): pyproject.toml
	test -d $(VENV) || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	# torch first, pinned: pip then keeps the CPU build instead of pulling a multi-GB CUDA one.
	$(BIN)/pip install -q torch==2.13.0
	$(BIN)/pip install -q -e '.[dev]'
	touch $(STAMP)

install: $(STAMP)

## make run: the default workflow (offline backend, synthetic benchmark) -> results/summary.{parquet,md}
run: $(STAMP)
	$(BIN)/snakemake --cores $(CORES) --workflow-profile profiles/default

## make test: the whole test suite (unit + workflow tests)
test: $(STAMP)
	$(BIN)/python -m pytest

lint: $(STAMP)
	$(BIN)/ruff check mnemoflow scripts tests bench
	$(BIN)/ruff format --check mnemoflow scripts tests bench
	$(BIN)/snakefmt --check Snakefile rules
	$(BIN)/snakemake --lint --cores 1

format: $(STAMP)
	$(BIN)/ruff format mnemoflow scripts tests bench
	$(BIN)/ruff check --fix mnemoflow scripts tests bench
	$(BIN)/snakefmt Snakefile rules

bench: $(STAMP)
	$(BIN)/python -m bench.gateway

clean:
	rm -rf results .snakemake
