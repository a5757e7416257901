# Engram — the two commands: `make run` and `make test`.
SHELL := /bin/bash
.SHELLFLAGS := -eo pipefail -c
.DEFAULT_GOAL := help

PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
PIP := $(VENV)/bin/pip
STAMP := $(VENV)/.installed-$(shell cksum requirements.txt | cut -d' ' -f1)
PORT ?= 8000
export HF_HUB_OFFLINE := 1
export TRANSFORMERS_OFFLINE := 1
# pip warns about every optional local index that does not exist on this machine; hide that noise.
QUIET_PIP := grep -v "is ignored: it is neither a file nor a directory" || true

.PHONY: help install run test lint format bench eval eval-writes load stop clean serve-prod

# The settings default to production mode (DEBUG off: SECRET_KEY and ALLOWED_HOSTS required). The
# development commands turn development mode on here; tests and mypy use config/settings_test.py.
run bench load eval eval-writes: export DEBUG = 1

help:
	@echo "make run    install everything, start the embedded PostgreSQL, load the demo, serve on 127.0.0.1:$(PORT)"
	@echo "           (the daily jobs, e.g. stale detection, run in-process: ENGRAM_SCHEDULER=1)"
	@echo "make test   lint (ruff, mypy, import contracts) then the whole test suite on real PostgreSQL"
	@echo "make bench  recall and ingest benchmarks, then the review pages at 10k and 100k facts (not part of make test)"
	@echo "make eval   recall quality (recall@10, nDCG@10) on the tuning set, then the held-out sets"
	@echo "make eval-writes  the write classifier on labelled pairs, then write streams through the write path (decisions per 100 writes)"
	@echo "make serve-prod  nginx in front of gunicorn, Celery worker and beat on Redis (production shape)"
	@echo "make load   50 simulated agents for 60 s against gunicorn: p50/p95/p99 per endpoint"
	@echo "make stop   stop the embedded PostgreSQL"

$(STAMP): requirements.txt
	@echo "==> Creating $(VENV) and installing Engram's dependencies (about a minute the first time)…"
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	@$(PIP) install -q --upgrade pip 2>&1 | $(QUIET_PIP)
	@echo "==> torch (CPU build) and sentence-transformers…"
	@$(PIP) install -q torch==2.13.0 sentence-transformers==6.2.0 transformers==5.24.0 2>&1 | $(QUIET_PIP)
	@echo "==> everything else…"
	@$(PIP) install -q -r requirements.txt 2>&1 | $(QUIET_PIP)
	@$(PY) -c "import django, torch, sentence_transformers, psycopg, pgvector" || { echo "Installation is incomplete: see the pip output above."; exit 1; }
	@rm -f $(VENV)/.installed-*
	@touch $(STAMP)
	@echo "==> Dependencies installed."

install: $(STAMP)

run: install
	@$(PY) manage.py engram_up --port $(PORT)
	@ENGRAM_PRELOAD_MODEL=1 ENGRAM_SCHEDULER=1 $(PY) manage.py runserver 127.0.0.1:$(PORT) --noreload

lint: install
	@echo "==> ruff"
	@$(VENV)/bin/ruff check .
	@$(VENV)/bin/ruff format --check .
	@echo "==> mypy"
	@$(VENV)/bin/mypy config memory agents review clients/python/engram_client
	@echo "==> import contracts (config > agents > review > memory)"
	@$(VENV)/bin/lint-imports --no-logo

format: install
	@$(VENV)/bin/ruff format .
	@$(VENV)/bin/ruff check --fix .

test: lint
	@echo "==> pytest (real PostgreSQL + pgvector, real MiniLM, Chromium for browser tests)"
	@$(PY) -m pytest $(or $(PYTEST_ARGS),-n 2 --dist loadfile)

bench: install
	@$(PY) -m bench.run $(BENCH_ARGS)
	@$(PY) -m bench.batch_writes
	@$(PY) -m bench.nearby_scale
	@BENCH_PAGES_FACTS=10000 $(PY) -m bench.pages
	@$(PY) -m bench.pages

serve-prod: install
	@bin/serve-prod

load: install
	@$(PY) -m bench.load $(LOAD_ARGS)

stop: install
	@$(PY) -m config.embedded stop

clean: stop
	rm -rf .engram

# The tuning set first, then each held-out set (written after the design froze).
eval: install
	@status=0; $(PY) -m bench.eval || status=1; \
	for set in g h i j k l; do \
		$(PY) -m bench.eval --data $$set || status=1; \
	done; \
	$(PY) -m bench.eval_conversations --part $${CONVERSATIONS:-tune} || status=1; \
	$(PY) -m bench.eval_preamble --part all || status=1; exit $$status

eval-writes: install
	@status=0; $(PY) -m bench.eval_writes $(EVAL_WRITES_ARGS) || status=1; \
	$(PY) -m bench.eval_streams $(EVAL_STREAMS_ARGS) || status=1; exit $$status
