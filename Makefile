# Both entry points bootstrap .venv from the pinned requirements.txt on first use.
PYTHON ?= python3
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
# The real AWS CLI and the local S3-compatible server (moto) the sync tests and bench run: awscli
# pins botocore, so they get their own virtualenv.
S3_VENV  ?= .venv-s3
S3_STAMP := $(S3_VENV)/.requirements-installed
# The virtualenvs are independent of each other: a fresh machine builds them side by side.
MAKEFLAGS += --jobs=4
STACK  ?= dev
STACKS := dev staging prod

.PHONY: render render-all test bench snapshots clean

$(STAMP): requirements.txt
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --disable-pip-version-check -r requirements.txt
	touch $(STAMP)

$(SCAN_STAMP): requirements-scan.txt
	$(PYTHON) -m venv $(SCAN_VENV)
	$(SCAN_VENV)/bin/pip install --quiet --disable-pip-version-check -r requirements-scan.txt
	touch $(SCAN_STAMP)

$(S3_STAMP): requirements-s3.txt
	$(PYTHON) -m venv $(S3_VENV)
	$(S3_VENV)/bin/pip install --quiet --disable-pip-version-check -r requirements-s3.txt
	touch $(S3_STAMP)

$(ENGINES_STAMP): requirements-engines.txt $(STAMP)
	rm -rf $(ENGINES_DIR)
	@grep -v '^#' requirements-engines.txt | grep . | while read -r pin; do \
		echo "$(ENGINES_DIR)/$$pin"; \
		$(BIN)/pip install --quiet --disable-pip-version-check --no-deps --target "$(ENGINES_DIR)/$$pin" "$$pin" || exit 1; \
	done
	touch $(ENGINES_STAMP)

## render: the stack STACK (default dev) under Pulumi's mock runtime into build/$(STACK)/
render: $(STAMP)
	$(BIN)/python -m render --stack $(STACK)

## render-all: every committed stack
render-all: $(STAMP)
	@for s in $(STACKS); do $(BIN)/python -m render --stack $$s || exit $$?; done

## test: lint, then unit, policy, schema, scan, fuzz and bad-config tests
test: $(STAMP) $(SCAN_STAMP) $(ENGINES_STAMP) $(S3_STAMP)
	$(BIN)/ruff check .
	CHECKOV=$(abspath $(SCAN_VENV))/bin/checkov ENGINE_PACKAGES=$(abspath $(ENGINES_DIR)) S3_VENV=$(abspath $(S3_VENV)) $(BIN)/python -m pytest

## snapshots: refresh tests/snapshots/<stack>.plan.md after a reviewed plan change
snapshots: $(STAMP)
	@for s in $(STACKS); do $(BIN)/python -m render --stack $$s --out build/$$s >/dev/null && cp build/$$s/plan.md tests/snapshots/$$s.plan.md; done

## bench: render timings against the bare mock runtime
bench: $(STAMP) $(S3_STAMP)
	S3_VENV=$(abspath $(S3_VENV)) $(BIN)/python tools/bench.py

clean:
	rm -rf build .pytest_cache
