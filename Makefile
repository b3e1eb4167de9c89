# The README's contract: `make run` and `make test`. `make install` is the idempotent set-up part.
SHELL := /bin/bash
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
HOST ?= 127.0.0.1
PORT ?= 8000

.PHONY: install run test lint bench conformance system-deps

$(STAMP): pyproject.toml
	@test -x $(PY) || python3 -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e '.[test,bench]' --config-settings editable_mode=compat
	@touch $(STAMP)

install: $(STAMP) system-deps

system-deps:
	@bash scripts/system_deps.sh

run: install
	$(PY) -m mcpfusion.cli serve app.main:app --host $(HOST) --port $(PORT)

lint: $(STAMP)
	$(VENV)/bin/ruff check .
	$(VENV)/bin/mypy

test: install
	$(VENV)/bin/ruff check .
	$(VENV)/bin/mypy  # strict, on mcpfusion/ (pyproject [tool.mypy])
	$(PY) -m pytest -q -p no:cacheprovider
	bash scripts/conformance.sh

bench: install
	$(PY) bench/presenter.py
	$(PY) bench/mcp_throughput.py
	$(PY) bench/scale_out.py
