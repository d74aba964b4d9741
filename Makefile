# gpuplace — every target bootstraps .venv from nothing and reuses it when present.
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
PIP_FLAGS ?= --disable-pip-version-check
LOCK := constraints.txt
PYTEST_ARGS ?=
# mypy's cache lives outside the clone, so a fresh clone's typecheck reuses what an earlier clone checked
# (mypy re-hashes each file whose path or mtime differs and re-checks only what changed; docs/development.md)
export MYPY_CACHE_DIR ?= $(HOME)/.cache/gpuplace/mypy

.PHONY: docs-test docs-test-slow
.PHONY: venv run test test-pytest lint typecheck unit bench gpu-check closed-loop clean compile k8s-bins node-deps images test-images checkov lock vllm-referee referee \
	chromium kfp-markdown screenshots

$(STAMP): pyproject.toml setup.py $(LOCK)
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install $(PIP_FLAGS) -q --upgrade pip
	$(BIN)/pip install $(PIP_FLAGS) -c $(LOCK) -e '.[all,dev]'
	@touch $(STAMP)

venv: $(STAMP)

## make run: the main job on embedded defaults (no cluster, no GPU needed)
run: $(STAMP)
	$(BIN)/gpuplace run

## make test: lint, format check, type check, then every test (control-plane tests and the closed-loop fidelity
## test included; GPU tests need CUDA)
## PYTEST_WORKERS=2 (the default since a fresh-clone run passed with it on 2026-12-02: pytest 21 min against 37
## serial): two pytest-xdist workers, conftest.py grouping the tests into units a worker takes whole (the docs, the
## real node, each module), longest first; 0: one process. Then the tests marked measure (they time a live engine
## and fit or compare what it measured) run in one process, alone on the machine: beside the other worker they
## measured their own contention. Either phase failing fails make test (docs/development.md, "How make test runs")
PYTEST_WORKERS ?= 2
## The free disk is printed before and after pytest: a CI run once ran out of it (docs/development.md#disk).
DISK_FREE = echo "disk: $$(df -h --output=avail . | tail -1 | tr -d ' ') free $(1)"
PYTEST_DESELECT := not gpu and not docs_slow
test: $(STAMP) lint typecheck k8s-bins node-deps test-images checkov chromium kfp-markdown
	@$(MAKE) --no-print-directory test-pytest
## make test-pytest: make test's two pytest phases alone, without its setup; the first prints its 30 slowest tests.
## A phase's exit status is kept unless an earlier phase failed first. "No tests collected" (5) in one phase counts
## as passing only when PYTEST_ARGS narrows the run (PYTEST_ARGS=tests/unit has no measurements); in both, it fails (tests/unit/test_makefile.py)
test-pytest: $(STAMP)
	@$(call DISK_FREE,before pytest)
	@status=0; empty=0; phase() { "$$@"; s=$$?; \
		if [ $$s -eq 5 ] && [ -n "$(strip $(PYTEST_ARGS))" ]; then empty=$$((empty + 1)); s=0; fi; \
		[ $$status -ne 0 ] || status=$$s; }; \
		phase $(BIN)/python -m pytest -n $(PYTEST_WORKERS) --dist loadgroup --no-loadscope-reorder --durations=30 \
			-m "$(PYTEST_DESELECT) and not measure" $(PYTEST_ARGS); \
		echo "pytest, the measurements alone (marker measure):"; \
		phase $(BIN)/python -m pytest -m "$(PYTEST_DESELECT) and measure" $(PYTEST_ARGS); \
		[ $$empty -lt 2 ] || status=5; $(call DISK_FREE,after pytest); exit $$status

## make docs-test: the docs test alone (every bash block of README.md and docs/*.md without a marker or marked
## testenv, a real local control plane, run as written from a scratch directory; make test runs it too).
## docs-test-slow runs the documents with blocks marked slow again, whole; it is not in make test (tests/docs/)
docs-test: $(STAMP) k8s-bins
	$(BIN)/python -m pytest -s -m docs tests/docs $(PYTEST_ARGS)
docs-test-slow: $(STAMP) k8s-bins
	$(BIN)/python -m pytest -s -m docs_slow tests/docs $(PYTEST_ARGS)

## make closed-loop: the local plan's p50 prediction against a load test of the same engine, alone, its figures
## printed (issue 11; make test runs it too)
closed-loop: $(STAMP)
	$(BIN)/python -m pytest -s -m closed_loop tests/integration/test_closed_loop_local.py $(PYTEST_ARGS)

## make chromium: Debian's chromium for the browser tests (apt-get install when missing; docs/tracking.md#browser-tests)
chromium:
	bash tests/browser/chromium.sh

## make kfp-markdown: the KFP UI's Markdown renderer (markdown-to-jsx under React 16, npm, pinned) for the
## browser test of the Kubeflow outputs, into ~/.cache/gpuplace/kfp-markdown (docs/tracking.md#browser-tests)
kfp-markdown:
	bash tests/browser/kfp_markdown.sh

## make screenshots: rerun the browser tests, keeping their screenshots in docs/images (the README shows them)
screenshots: $(STAMP) chromium kfp-markdown
	GPUPLACE_SCREENSHOTS=$(CURDIR)/docs/images $(BIN)/python -m pytest -m browser tests/integration/test_browser_mlflow.py \
		tests/integration/test_browser_kfp_outputs.py $(PYTEST_ARGS)

## make k8s-bins: build (or reuse) etcd, kube-apiserver, kube-scheduler, kube-controller-manager, kubectl and
## KWOK from Go modules into ~/.cache/gpuplace/k8s/<version>/ (docs/testenv.md); the control-plane tests need them.
## Then the real node's kubelet and sandbox process (build.sh node, its own stamp).
k8s-bins:
	bash src/gpuplace/testenv/build.sh
	bash src/gpuplace/testenv/build.sh node

## make node-deps: containerd, runc, the CNI plugins and iptables from Debian's packages when missing (the real
## testenv node, gpuplace testenv up --real-node; needs root)
node-deps:
	bash src/gpuplace/testenv/node_deps.sh

## make test-images: the images make test runs containers from: components (no torch) and cpu (torch: profiling,
## the local engine in the serving pods). The CUDA and vLLM images cannot run without a GPU: make images builds them
test-images:
	IMAGES="components cpu" bash images/build.sh

## make images: build the images in images/ with buildah on a local Debian base (images/build.sh; docs/testenv.md);
## IMAGES="components" for one. Cached: a second run with no change is quick.
images:
	bash images/build.sh

## make checkov: checkov in its own venv (.venv-checkov), apart from the pinned dependencies of .venv
CHECKOV := .venv-checkov/bin/checkov
checkov: $(CHECKOV)
$(CHECKOV):
	$(PYTHON) -m venv .venv-checkov
	.venv-checkov/bin/pip install $(PIP_FLAGS) -q 'checkov==3.3.30'

## make vllm-referee: vLLM (docs/development.md) in its own venv under ~/.cache/gpuplace, apart from .venv; the
## referee tests and benchmarks call the same script
vllm-referee:
	bash tests/referee/vllm_venv.sh

## make referee: the tests that hold gpuplace against vLLM's own code (its V1 scheduler, step by step) in that venv,
## created on first use; make test runs them too (docs/development.md)
referee: $(STAMP)
	$(BIN)/python -m pytest -m referee $(PYTEST_ARGS)

lint: $(STAMP)
	$(BIN)/ruff check src tests components pipelines conftest.py setup.py
	$(BIN)/ruff format --check src tests components pipelines conftest.py setup.py

typecheck: $(STAMP)
	$(BIN)/mypy

unit: $(STAMP)
	$(BIN)/python -m pytest -m "not gpu and not integration and not closed_loop" $(PYTEST_ARGS)

## make lock: re-resolve pyproject.toml's dependencies (all extras + dev) in a scratch venv and write
## constraints.txt, which make run, make test and the images install with (docs/development.md)
lock:
	rm -rf .venv-lock && $(PYTHON) -m venv .venv-lock
	.venv-lock/bin/pip install $(PIP_FLAGS) -q --upgrade pip
	.venv-lock/bin/pip install $(PIP_FLAGS) -q '.[all,dev]'
	{ echo "# Generated by \`make lock\` from pyproject.toml (all extras + dev) on $$(date -u +%Y-%m-%d); do not edit by hand."; \
	  echo "# make run, make test and the images install with -c constraints.txt, so every install resolves the same."; \
	  .venv-lock/bin/pip freeze --exclude-editable | grep -vi '^gpuplace' | sort -f; } > $(LOCK)
	rm -rf .venv-lock

## make compile: regenerate the checked-in pipelines/<name>/pipeline.yaml (a test fails when they are stale)
compile: $(STAMP)
	$(BIN)/gpuplace compile

## make bench: benchmarks; figures land in docs/benchmarks/
bench: $(STAMP)
	@set -e; for b in tests/benchmarks/bench_*.py; do echo "== $$b"; PYTHONPATH=$(CURDIR) $(BIN)/python $$b; done

## make gpu-check: the GPU check (on a CUDA machine; see tests/gpu/run.sh)
gpu-check:
	bash tests/gpu/run.sh

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache
