# The README's contract: `make run` and `make test`. `make install` is the idempotent set-up part.
# `make run` needs nothing but Python 3 (and the package index); Debian packages are for `make test` only.
SHELL := /bin/bash
VENV := .venv
PY := $(VENV)/bin/python
RUN_STAMP := $(VENV)/.installed-run
STAMP := $(VENV)/.installed
HOST ?= 127.0.0.1
PORT ?= 8000
DOCS_PORT ?= 8001
# Editable, with the repository root on the path: the reference service (app/, routers/...) runs from here.
EDITABLE := --config-settings editable_mode=compat

# The lowest FastAPI stack pyproject allows (scripts/fastapi-min-constraints.txt): the DI bridge uses FastAPI
# internals, so the tests that go through it (DI, dispatch, MCP wires, REST) also run there.
MIN_VENV := .venv-fastapi-min
MIN_STAMP := $(MIN_VENV)/.installed
MIN_TESTS := tests/test_fastapi_versions.py tests/test_tools.py tests/test_model.py tests/test_presenter.py \
	tests/test_wire_format.py tests/test_mcp_units.py tests/test_mcp_fastapi.py tests/test_mcp_streams.py \
	tests/test_mcp_hardening.py tests/test_mcp_sdk_client.py tests/test_mcp_stdio.py tests/test_rest.py \
	tests/test_rest_problems.py tests/test_service_auth.py tests/test_service_tenancy.py tests/test_dependency_plan.py

.PHONY: install run test lint bench conformance system-deps oauth-provider fastapi-min docs docs-build

# The library with every extra, plus the reference service's own dependencies (a dependency group: never
# a dependency of the wheel). pip >= 25.1 reads dependency groups.
$(RUN_STAMP): pyproject.toml
	@test -x $(PY) || python3 -m venv $(VENV)
	$(PY) -m pip install -q --upgrade 'pip>=25.1'
	$(PY) -m pip install -q -e '.[all]' --group service $(EDITABLE)
	@touch $(RUN_STAMP)

# Everything the tests, benchmarks and the docs site need on top.
$(STAMP): $(RUN_STAMP)
	$(PY) -m pip install -q -e '.[all]' --group test --group bench --group service $(EDITABLE)
	@touch $(STAMP)

install: $(STAMP)

$(MIN_STAMP): pyproject.toml scripts/fastapi-min-constraints.txt
	@test -x $(MIN_VENV)/bin/python || python3 -m venv $(MIN_VENV)
	$(MIN_VENV)/bin/python -m pip install -q --upgrade 'pip>=25.1'
	$(MIN_VENV)/bin/python -m pip install -q -c scripts/fastapi-min-constraints.txt -e '.[all]' \
		--group test --group service $(EDITABLE)
	@touch $@

# The same tests against the lowest allowed FastAPI, Starlette and pydantic.
fastapi-min: install $(MIN_STAMP)
	$(MIN_VENV)/bin/python -m pytest -q -p no:cacheprovider $(MIN_TESTS)

system-deps:
	@bash scripts/system_deps.sh

# The OAuth authorization server of the integration tests (pinned oidc-provider and Node 22, from npm).
oauth-provider:
	@bash scripts/oauth_provider.sh >/dev/null

run: $(RUN_STAMP)
	$(PY) -m mcpfusion.cli serve app.main:app --host $(HOST) --port $(PORT)

lint: $(STAMP)
	$(VENV)/bin/ruff check .
	$(VENV)/bin/mypy
	$(VENV)/bin/mypy --strict app routers presenters models  # the reference service, as a user copying it checks it

test: install system-deps oauth-provider $(MIN_STAMP)
	$(VENV)/bin/ruff check .
	$(VENV)/bin/mypy  # strict, on mcpfusion/ (pyproject [tool.mypy])
	$(VENV)/bin/mypy --strict app routers presenters models  # the reference service, as a user copying it checks it
	$(PY) -m pytest -q -p no:cacheprovider
	$(PY) -m mcpfusion.cli lock app.main:app --check  # the served contract is the committed mcpfusion.lock
	$(MIN_VENV)/bin/python -m pytest -q -p no:cacheprovider $(MIN_TESTS)
	bash scripts/conformance.sh

docs-build: $(STAMP)
	NO_MKDOCS_2_WARNING=1 $(VENV)/bin/mkdocs build --strict

docs: $(STAMP)
	NO_MKDOCS_2_WARNING=1 $(VENV)/bin/mkdocs serve --dev-addr $(HOST):$(DOCS_PORT)

bench: install  # the performance benchmarks one after the other, then one table of figures against targets
	$(PY) bench/summary.py
