# sparkbench: `make help` lists the targets. SERVER=URL points a benchmark at a running server;
# without it the embedded CPU test bed (local SGLang, tiny random model) runs at reduced scale.
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
# uv creates and fills every environment. It is bootstrapped with pip, once per version, into the
# cache that also holds the server environments (outside the clone).
CACHE := $(or $(SPARKBENCH_CACHE),$(HOME)/.cache/sparkbench)
UV_VERSION := $(shell sed -n 's/^required-version = "==\(.*\)"/\1/p' pyproject.toml)
UV_DIR := $(CACHE)/tools/uv-$(UV_VERSION)
UV := $(UV_DIR)/bin/uv
SERVER ?=
RUNS ?=
ARGS ?=
SERVER_FLAG := $(if $(SERVER),--server $(SERVER),)
# The embedded default needs the SGLang environment; an attached server does not. The server builds
# the test-bed model it serves on first use, so a benchmark does not wait for the other variants.
EMBEDDED_DEPS := $(if $(SERVER),,env-sglang)
# GSM8K's and Spec-Bench's embedded default is llama.cpp serving the real model (docs/real-model.md);
# its GGUF is fetched on first use.
REAL_MODEL_DEPS := $(if $(SERVER),,llamacpp)
# Each slow stage is timed into STAGES; `make test` prints them as a table at the end.
STAGES := .stage-times.tsv
STAGE_TIMES := $(PYTHON) scripts/stage_times.py $(STAGES)
STAGE = $(STAGE_TIMES) run

.PHONY: help setup setup-ray lock lock-upgrade lm-eval-env mutation env-sglang env-vllm model llamacpp-server llamacpp drafter testbed bench-synthetic bench-gsm8k bench-specbench gap report report-shot test test-quick test-e2e test-unit lint cold-check clean

help: ## List the targets
	@grep -E '^[a-zA-Z0-9_-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-18s %s\n", $$1, $$2}'

$(UV):
	rm -rf $(UV_DIR) $(UV_DIR).partial
	$(STAGE) uv -- $(PYTHON) -m pip install --quiet --disable-pip-version-check --target $(UV_DIR).partial uv==$(UV_VERSION)
	mv $(UV_DIR).partial $(UV_DIR)

# Ray (the `ray` extra, about 250 MB) is left out of `setup`; `setup-ray` adds it for `sparkbench sweep
# --ray` and the test tier. A later `setup` keeps it: it syncs again only when pyproject.toml or uv.lock change.
SYNC := $(UV) sync --quiet --locked --all-extras --compile-bytecode --python $(PYTHON)
$(BIN)/sparkbench: pyproject.toml uv.lock | $(UV)
	$(STAGE) setup -- $(SYNC) $(if $(wildcard $(VENV)/.ray),,--no-extra ray)
	@touch $@

$(VENV)/.ray: $(BIN)/sparkbench
	$(STAGE) setup-ray -- $(SYNC)
	@touch $@

setup: $(BIN)/sparkbench ## Create .venv with the harness and its test tools, exactly as uv.lock pins them

setup-ray: $(VENV)/.ray ## Add Ray to .venv (sparkbench sweep --ray, and the sweep's end-to-end test)

lock: | $(UV) ## Update uv.lock after a change to pyproject.toml's dependencies (other pins stay)
	$(UV) lock

lock-upgrade: | $(UV) ## Re-resolve uv.lock to the newest releases that pyproject.toml allows
	$(UV) lock --upgrade

# lm-eval's own GSM8K filters and exact_match (no torch: the package without its dependencies, plus what
# those modules import), for the unit test that sets sparkbench's lm-eval scores beside lm-eval's.
LM_EVAL_VERSION := $(shell sed -n 's/^LM_EVAL_VERSION = "\(.*\)"/\1/p' workloads/gsm8k_lm_eval.py)
LM_EVAL_ENV := $(CACHE)/tools/lm-eval-$(LM_EVAL_VERSION)
$(LM_EVAL_ENV)/.complete: | $(UV)
	rm -rf $(LM_EVAL_ENV)
	$(UV) venv --quiet --python $(PYTHON) $(LM_EVAL_ENV)
	$(UV) pip install --quiet --python $(LM_EVAL_ENV)/bin/python --no-deps lm-eval==$(LM_EVAL_VERSION)
	$(UV) pip install --quiet --python $(LM_EVAL_ENV)/bin/python numpy==2.4.6 sacrebleu==2.6.0 pyyaml==6.0.2
	@touch $@

lm-eval-env: $(LM_EVAL_ENV)/.complete ## lm-eval's GSM8K filters in a small cached environment (the scoring comparison test)

# Mutation testing (cosmic-ray, in a cached environment keyed by its version, outside the clone and
# uv.lock). Each entry is a module with the unit tests that exercise it: MODULE=TEST[,TEST...].
COSMIC_RAY_VERSION := 8.7.0
COSMIC_RAY_ENV := $(CACHE)/tools/cosmic-ray-$(COSMIC_RAY_VERSION)
$(COSMIC_RAY_ENV)/.complete: | $(UV)
	rm -rf $(COSMIC_RAY_ENV)
	$(UV) venv --quiet --python $(PYTHON) $(COSMIC_RAY_ENV)
	$(UV) pip install --quiet --python $(COSMIC_RAY_ENV)/bin/python cosmic-ray==$(COSMIC_RAY_VERSION)
	@touch $@

# The modules of tests/mutation_modules.txt, each with its tests (MUTATION_MODULES="MODULE=TEST,..." picks
# others); 50 sampled mutants a module, seed 0 (MUTATION_SAMPLE= runs every mutant: hours on a 2-core
# host); MUTATION_JOBS modules at once, each running its mutants one after another.
MUTATION_SAMPLE ?= 50
MUTATION_JOBS ?= 1
MUTATION_MODULES ?= $(shell grep -v -e '^\#' -e '^$$' tests/mutation_modules.txt)
mutation: setup $(COSMIC_RAY_ENV)/.complete ## Mutation testing, kill rate per module (MUTATION_MODULES="MODULE=TEST,...", MUTATION_SAMPLE=N mutants a module, MUTATION_JOBS=N at once; not part of `make test`)
	$(BIN)/python scripts/mutation.py --cosmic-ray $(COSMIC_RAY_ENV)/bin/cosmic-ray $(if $(MUTATION_SAMPLE),--sample $(MUTATION_SAMPLE)) --jobs $(MUTATION_JOBS) $(MUTATION_MODULES)

env-sglang: setup ## Install the pinned SGLang server environment (cached outside the clone)
	$(STAGE) env-sglang -- $(BIN)/python -m harness.testbed.envs env sglang --uv $(UV)

env-vllm: setup ## Install the pinned vLLM CPU server environment (cached outside the clone)
	$(STAGE) env-vllm -- $(BIN)/python -m harness.testbed.envs env vllm --uv $(UV)

model: env-sglang ## Build the test bed's tiny models (plain, bigram, wrong draft) once (cached outside the clone)
	$(STAGE) model -- $(BIN)/python -m harness.testbed.envs model

# The server's build needs no model: under `make -j3 testbed` it compiles while the environments install.
llamacpp-server: setup ## Build llama.cpp's llama-server (CPU) from the pinned source (cached)
	PATH=$(UV_DIR)/bin:$$PATH $(STAGE) llamacpp-build -- $(BIN)/python -m harness.testbed.llamacpp server

llamacpp: model llamacpp-server ## llama.cpp's llama-server and the test bed's GGUF models (cached)
	PATH=$(UV_DIR)/bin:$$PATH $(STAGE) llamacpp-gguf -- $(BIN)/python -m harness.testbed.llamacpp

drafter: llamacpp ## The learned EAGLE-3 drafter of the real model from its pinned weights: checkpoint and GGUF (cached)
	$(STAGE) drafter -- $(BIN)/python -m harness.testbed.drafter.build

testbed: llamacpp-server env-sglang env-vllm model llamacpp drafter ## Everything the end-to-end tests need

bench-synthetic: setup $(EMBEDDED_DEPS) ## Synthetic 32K/2K greedy run (SERVER=URL), else the reduced embedded run
	$(BIN)/sparkbench run synthetic $(SERVER_FLAG) $(ARGS)

bench-gsm8k: setup $(REAL_MODEL_DEPS) ## All 1,319 GSM8K questions (SERVER=URL), else a reduced embedded run on the real model
	$(BIN)/sparkbench run gsm8k $(SERVER_FLAG) $(ARGS)

bench-specbench: setup $(REAL_MODEL_DEPS) ## Spec-Bench's 480 questions, six tasks, greedy (SERVER=URL), else a reduced embedded run on the real model
	$(BIN)/sparkbench run specbench $(SERVER_FLAG) $(ARGS)

gap: llamacpp drafter ## The synthetic-vs-GSM8K gap by cause (content x sampling x length) on the real model: llama.cpp plain vs n-gram, then vs the learned EAGLE-3 drafter (ARGS=...)
	$(BIN)/sparkbench gap --drafter ngram $(ARGS)
	$(BIN)/sparkbench gap --drafter eagle3 $(ARGS)

report: setup ## HTML and Markdown report of the latest runs (RUNS="results/a results/b" to choose)
	$(BIN)/sparkbench report $(RUNS)

report-shot: setup ## The report of the latest runs (or RUNS=...) in headless Chromium at 1440 px: screenshot, headline vs fold
	$(BIN)/python -m tests.bench_report_screenshot $(RUNS)

NIGHTLY_CONFIG ?= docs/nightly/nightly.yaml
nightly: setup $(EMBEDDED_DEPS) ## Nightly regression job (NIGHTLY_CONFIG=..., SERVER=URL): exit 0 pass, 1 regression, 2 could not run, 3 inconclusive
	$(BIN)/sparkbench nightly --config $(NIGHTLY_CONFIG) $(SERVER_FLAG)

# The environments install while llama.cpp's server compiles (-j3), then the linter and the suite run (the unit
# tier beside the end-to-end tier, scripts/test_tiers.py); the table of stage times comes last whatever failed.
test: ## Lint, unit tests and end-to-end tests against real SGLang, vLLM and llama.cpp servers
	@$(STAGE_TIMES) reset
	@$(MAKE) --no-print-directory -j3 setup-ray testbed lm-eval-env && $(STAGE) lint -- $(MAKE) --no-print-directory lint \
	  && $(STAGE) pytest -- $(BIN)/python scripts/test_tiers.py; status=$$?; $(STAGE_TIMES) table; exit $$status

lint: setup ## ruff over the package, the tests and the scripts (zero findings)
	$(BIN)/ruff check harness tests scripts

cold-check: ## The README's two commands in a fresh clone with empty caches, then again warm; each step's time
	$(PYTHON) scripts/cold_check.py $(ARGS)

test-quick: setup ## The inner loop: lint, then the unit tier in 4 workers without its command-line subprocess tests (-m cli), stopping at the first failure
	$(BIN)/ruff check harness tests scripts && $(BIN)/python -m pytest tests/unit -n 4 -x -q -m "not slow and not cli"

ENGINE ?= llamacpp
test-e2e: setup-ray testbed ## One engine's end-to-end tests alone (ENGINE=sglang|vllm|llamacpp: the tests that use its pooled servers)
	$(BIN)/python -m pytest tests/e2e -m $(ENGINE) --durations=10

test-unit: setup ## Unit tests only (no servers)
	$(BIN)/python -m pytest tests/unit

clean: ## Remove the harness virtualenv (server environments stay cached)
	rm -rf $(VENV)
