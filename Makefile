# gpuplace — every target bootstraps .venv from nothing and reuses it when present.
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
PIP_FLAGS ?= --disable-pip-version-check
PYTEST_ARGS ?=

.PHONY: venv run test lint typecheck unit bench gpu-check clean compile k8s-bins checkov

$(STAMP): pyproject.toml
	@test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install $(PIP_FLAGS) -q --upgrade pip
	$(BIN)/pip install $(PIP_FLAGS) -e '.[all,dev]'
	@touch $(STAMP)

venv: $(STAMP)

## make run: the main job on embedded defaults (no cluster, no GPU needed)
run: $(STAMP)
	$(BIN)/gpuplace run

## make test: lint, format check, type check, then every test (control-plane tests included; GPU tests need CUDA)
test: $(STAMP) lint typecheck k8s-bins checkov
	$(BIN)/python -m pytest -m "not gpu" $(PYTEST_ARGS)

## make k8s-bins: build (or reuse) etcd, kube-apiserver, kube-scheduler, kube-controller-manager, kubectl and
## KWOK from Go modules into ~/.cache/gpuplace/k8s/<version>/ (docs/testenv.md); the control-plane tests need them
k8s-bins:
	bash src/gpuplace/testenv/build.sh

## make checkov: checkov in its own venv (.venv-checkov), apart from the pinned dependencies of .venv
CHECKOV := .venv-checkov/bin/checkov
checkov: $(CHECKOV)
$(CHECKOV):
	$(PYTHON) -m venv .venv-checkov
	.venv-checkov/bin/pip install $(PIP_FLAGS) -q 'checkov==3.3.30'

lint: $(STAMP)
	$(BIN)/ruff check src tests components pipelines
	$(BIN)/ruff format --check src tests components pipelines

typecheck: $(STAMP)
	$(BIN)/mypy

unit: $(STAMP)
	$(BIN)/python -m pytest -m "not gpu and not integration" $(PYTEST_ARGS)

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
