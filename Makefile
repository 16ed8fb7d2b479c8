# bloomops: `make run` serves the demo, `make test` runs the whole suite. Both set up
# everything they need from a fresh clone.
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
PORT ?= $(or $(BLOOMOPS_PORT),8000)
STAMP := $(VENV)/.installed-$(shell sha1sum pyproject.toml | cut -c1-12)

.PHONY: run test bench lint setup-db chromium serve bloom-env axe

$(STAMP): pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --disable-pip-version-check --upgrade pip
	$(PY) -m pip install -q --disable-pip-version-check -e ".[test]"
	touch $(STAMP)

setup-db: $(STAMP)
	$(PY) manage.py bootstrap_tapdb
	$(PY) manage.py migrate --noinput -v 0

chromium:
	@command -v chromium >/dev/null 2>&1 || { \
	  echo "Installing Debian's chromium for the browser tests..."; \
	  if [ "$$(id -u)" = 0 ]; then APT=""; else APT=sudo; fi; \
	  $$APT apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$APT apt-get install -y -qq chromium >/dev/null; }

# axe-core (package.json, pinned in package-lock.json) for the accessibility check of the
# browser tests; npm ci runs again only when the lock file changes.
axe: node_modules/.installed
node_modules/.installed: package-lock.json
	@command -v npm >/dev/null 2>&1 || { \
	  echo "Installing Debian's npm for axe-core..."; \
	  if [ "$$(id -u)" = 0 ]; then APT=""; else APT=sudo; fi; \
	  $$APT apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$APT apt-get install -y -qq npm >/dev/null; }
	npm ci --no-audit --no-fund --loglevel=error
	touch $@

# Bloom LIMS 5.0.1 in its own cached environment under var/bloom, for the interop tests
# (docs/BLOOM.md); installed from PyPI the first time, a no-op afterwards.
bloom-env:
	bash tests/bloom/install.sh

run: setup-db
	BLOOMOPS_DEBUG=1 $(PY) manage.py seed_demo
	$(PY) manage.py collectstatic --noinput -v 0
	@echo ""
	@echo "  bloomops is serving at http://127.0.0.1:$(PORT)/"
	@echo "  Demo sign-ins (password: bloomops):"
	@echo "    scientist (worker_human)  qa (operator)  supervisor (operator)"
	@echo "    admin (admin)             svc-extractor (worker_service)"
	@echo ""
	@echo "  Living demo: slow demo service workers run beside the server"
	@echo "  (BLOOMOPS_DEMO_WORKERS=0 make run turns them off). API docs: /api/v1/docs"
	@echo "  The statistics recorder (run_recorder) runs beside them: charts fill by the minute."
	@echo ""
	BLOOMOPS_DEBUG=1 bash -c '$(PY) manage.py run_recorder & RECORDER=$$!; \
	  if [ "$${BLOOMOPS_DEMO_WORKERS:-1}" != 0 ]; then \
	    $(PY) manage.py run_demo_workers & DEMO=$$!; fi; \
	  trap "kill -TERM $$RECORDER $${DEMO:-} 2>/dev/null; wait" EXIT; \
	  $(VENV)/bin/gunicorn -c python:bloomops.serving bloomops.wsgi:application \
	    --bind 127.0.0.1:$(PORT) --access-logfile -'

# The suite in TEST_JOBS processes, each on a test database of its own; the tests that stop
# the shared PostgreSQL (marked serial) alone afterwards.
TEST_JOBS ?= 2
test: setup-db chromium axe bloom-env
	$(VENV)/bin/ruff check .
	$(VENV)/bin/pytest -n $(TEST_JOBS) --dist worksteal -m "not serial"
	$(VENV)/bin/pytest -m serial

bench: setup-db
	$(PY) manage.py bench

lint: $(STAMP)
	$(VENV)/bin/ruff check .
