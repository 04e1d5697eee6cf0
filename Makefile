# Both entry points bootstrap .venv from the pinned requirements.txt on first use.
PYTHON ?= python3
# uv, pinned in requirements-uv.txt and bootstrapped with the machine's pip, installs every virtualenv:
# the same pins as pip, a fresh machine's four virtualenvs in seconds instead of about a minute. It reads
# UV_INDEX_URL (not pip's configuration) for a package mirror. --compile-bytecode, as pip does: otherwise
# every test worker compiles pulumi_aws and friends on first import (a fresh clone's make test: ~10 s).
UV_VENV  ?= .venv-uv
UV       := $(UV_VENV)/bin/uv
UV_STAMP := $(UV_VENV)/.requirements-installed
export UV_PYTHON_DOWNLOADS := never
UV_INSTALL = $(UV) pip install --quiet --compile-bytecode
VENV   ?= .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.requirements-installed
# checkov pins libraries the program also uses, at other versions: it gets its own virtualenv.
SCAN_VENV  ?= .venv-scan
SCAN_STAMP := $(SCAN_VENV)/.requirements-installed
# The engines' own code the tests run (SGLang, TileLang, tvm-ffi): every pin of requirements-engines.txt
# --no-deps (no torch, no CUDA libraries) in its own directory, since two SGLang versions cannot share
# one virtualenv; the tests load the files by path with the program's interpreter.
ENGINES_DIR   ?= .venv-engines
ENGINES_STAMP := $(ENGINES_DIR)/.requirements-installed
# vLLM's own `vllm serve` parser (tests/vllm_cli.py): one virtualenv per release the stacks deploy,
# .venv-vllm/<release> from requirements-vllm-<release>.txt, the release with every package it requires
# (torch and its CUDA libraries: vLLM's argument code imports torch). Several GB, downloaded once; from
# uv's cache an install is seconds (hard links). No --compile-bytecode: compiling torch and the rest takes
# about a minute a virtualenv on two cores, and the tests import a fraction of it, compiled on first use.
VLLM_DIR      ?= .venv-vllm
VLLM_RELEASES := $(patsubst requirements-vllm-%.txt,%,$(wildcard requirements-vllm-*.txt))
VLLM_STAMPS   := $(foreach v,$(VLLM_RELEASES),$(VLLM_DIR)/$(v)/.requirements-installed)
# The real AWS CLI and the local S3-compatible server (moto) the sync tests and bench run: awscli
# pins botocore, so they get their own virtualenv.
S3_VENV  ?= .venv-s3
S3_STAMP := $(S3_VENV)/.requirements-installed
# The virtualenvs are independent of each other: a fresh machine builds them side by side.
MAKEFLAGS += --jobs=4
# Tests run on every core (pytest-xdist), at most four workers: each worker renders the stacks once; a file
# marked xdist_group (an expensive module or session fixture) runs whole on one worker (--dist loadgroup).
PYTEST_WORKERS ?= --numprocesses=auto --maxprocesses=4 --dist loadgroup
STACK  ?= dev
# Every stack file beside Pulumi.yaml (tools/stacks.py lists them the same way for the tests and CI).
STACKS := $(patsubst Pulumi.%.yaml,%,$(wildcard Pulumi.*.yaml))
# STRICT=1: a required secret missing from the stack file fails the render (python -m render --strict).
STRICT ?=
RENDER_FLAGS := $(if $(filter-out 0,$(STRICT)),--strict)

.PHONY: render render-all check test docs bench snapshots clean e2e-tools cluster-up cluster-down e2e

$(UV_STAMP): requirements-uv.txt
	$(PYTHON) -m venv $(UV_VENV)
	$(UV_VENV)/bin/pip install --quiet --quiet --disable-pip-version-check -r requirements-uv.txt
	touch $(UV_STAMP)

# --seed: the Pulumi CLI's pip toolchain runs `python -m pip list --format json` in this virtualenv to find
# the program's plugins (pulumi/pulumi v3.259.0 sdk/python/toolchain/pip.go ListPackages).
$(STAMP): requirements.txt | $(UV_STAMP)
	$(UV) venv --quiet --seed --allow-existing --python $(PYTHON) $(VENV)
	$(UV_INSTALL) --python $(BIN)/python -r requirements.txt
	touch $(STAMP)

$(SCAN_STAMP): requirements-scan.txt | $(UV_STAMP)
	$(UV) venv --quiet --allow-existing --python $(PYTHON) $(SCAN_VENV)
	$(UV_INSTALL) --python $(SCAN_VENV)/bin/python -r requirements-scan.txt
	touch $(SCAN_STAMP)

$(S3_STAMP): requirements-s3.txt | $(UV_STAMP)
	$(UV) venv --quiet --allow-existing --python $(PYTHON) $(S3_VENV)
	$(UV_INSTALL) --python $(S3_VENV)/bin/python -r requirements-s3.txt
	touch $(S3_STAMP)

$(ENGINES_STAMP): requirements-engines.txt | $(UV_STAMP)
	rm -rf $(ENGINES_DIR)
	@grep -v '^#' requirements-engines.txt | grep . | while read -r pin; do \
		echo "$(ENGINES_DIR)/$$pin"; \
		$(UV_INSTALL) --python $(PYTHON) --no-deps --target "$(ENGINES_DIR)/$$pin" "$$pin" || exit 1; \
	done
	touch $(ENGINES_STAMP)

$(VLLM_DIR)/%/.requirements-installed: requirements-vllm-%.txt | $(UV_STAMP)
	$(UV) venv --quiet --allow-existing --python $(PYTHON) $(VLLM_DIR)/$*
	$(UV) pip install --quiet --python $(VLLM_DIR)/$*/bin/python -r $<
	touch $@

# CRDs ../shared/crds lacks, read from their upstream Go module (apivalidation/module_crds.py): a download
# on a new machine, a check of the module cache after that.
.PHONY: module-crds
module-crds: $(STAMP)
	@$(BIN)/python -c 'from apivalidation import module_crds; raise SystemExit(module_crds.download())'

## render: the stack STACK (default dev) under Pulumi's mock runtime into build/$(STACK)/ (STRICT=1: missing secrets fail it)
render: $(STAMP) module-crds
	$(BIN)/python -m render --stack $(STACK) $(RENDER_FLAGS)

## render-all: every stack file Pulumi.<stack>.yaml, past a refused one; then names the refused ones and exits 2
# (tools/stacks.py render_all: dev, staging and prod are rendered whatever a user's stack file holds)
render-all: $(STAMP) module-crds
	@$(BIN)/python tools/stacks.py render-all $(RENDER_FLAGS)

## check: the stack STACK offline as make test checks it: render, the policy pack through its server, checkov
check: $(STAMP) $(SCAN_STAMP) module-crds
	CHECKOV=$(abspath $(SCAN_VENV))/bin/checkov $(BIN)/python tools/check_stack.py --stack $(STACK) $(RENDER_FLAGS)

## test: lint, then unit, policy, schema, scan, fuzz and bad-config tests
# PYTHONDONTWRITEBYTECODE= (empty: unset for Python): with it set in the caller's environment, every test
# worker and each of the ~60 Python processes the tests start compiled the program's modules from source
# and pytest rewrote every test module's asserts again (3 s of CPU a worker); the __pycache__ directories
# are git-ignored, and a later run reads them (so do the vLLM parsers' first imports in .venv-vllm).
test: $(STAMP) $(SCAN_STAMP) $(ENGINES_STAMP) $(S3_STAMP) $(VLLM_STAMPS) module-crds
	$(BIN)/ruff check .
	PYTHONDONTWRITEBYTECODE= CHECKOV=$(abspath $(SCAN_VENV))/bin/checkov ENGINE_PACKAGES=$(abspath $(ENGINES_DIR)) S3_VENV=$(abspath $(S3_VENV)) \
		VLLM_VENVS=$(abspath $(VLLM_DIR)) $(BIN)/python -m pytest $(PYTEST_WORKERS)

## docs: regenerate docs/config-reference.md and docs/policies.md from the config model and the policy pack
docs: $(STAMP)
	$(BIN)/python tools/gen_docs.py

## snapshots: refresh tests/snapshots/<stack>.plan.md after a reviewed plan change
snapshots: $(STAMP) module-crds
	@for s in $(STACKS); do $(BIN)/python -m render --stack $$s --out build/$$s >/dev/null && cp build/$$s/plan.md tests/snapshots/$$s.plan.md; done

## bench: render timings against the bare mock runtime
bench: $(STAMP) $(S3_STAMP)
	S3_VENV=$(abspath $(S3_VENV)) $(BIN)/python tools/bench.py

## e2e-tools: build the real CLI, provider, etcd, Kubernetes and kwok from their Go modules into .e2e/bin/
e2e-tools:
	bash e2e/build-tools.sh

## cluster-up: the local control plane on loopback (kubeconfig .e2e/kubeconfig); cluster-down stops it
cluster-up: $(STAMP)
	$(BIN)/python e2e/cluster.py up

cluster-down:
	$(PYTHON) e2e/cluster.py down

## e2e: the real Pulumi CLI against the local control plane (builds its tools once)
# First the control plane's own tests (they start, stop and restart their cluster); then one cluster for
# every scenario, run by three pytest workers side by side, a file each at a time, longest first
# (e2e/conftest.py LONGEST_FIRST; a scenario mostly waits on the provider's awaits, not on a core), and
# stopped whatever the outcome.
E2E_PYTEST = $(BIN)/python -m pytest -p no:cacheprovider -x -v --durations=12 --rootdir=e2e -c /dev/null
e2e: $(STAMP) e2e-tools
	$(E2E_PYTEST) e2e/test_cluster.py
	$(BIN)/python e2e/cluster.py up
	E2E_CLUSTER_RUNNING=1 $(E2E_PYTEST) --numprocesses=3 --dist=loadfile --no-loadscope-reorder --ignore=e2e/test_cluster.py e2e; \
		status=$$?; $(BIN)/python e2e/cluster.py down; exit $$status

clean:
	rm -rf build .pytest_cache
