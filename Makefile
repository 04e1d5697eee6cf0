# Both entry points bootstrap .venv from the pinned requirements.txt on first use.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.requirements-installed
STACK  ?= dev
STACKS := dev staging prod

.PHONY: render render-all test bench clean

$(STAMP): requirements.txt
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --disable-pip-version-check -r requirements.txt
	touch $(STAMP)

## render: the stack STACK (default dev) under Pulumi's mock runtime into build/$(STACK)/
render: $(STAMP)
	$(BIN)/python -m render --stack $(STACK)

## render-all: every committed stack
render-all: $(STAMP)
	@for s in $(STACKS); do $(BIN)/python -m render --stack $$s || exit $$?; done

## test: lint, then unit, policy, schema and bad-config tests
test: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/python -m pytest

## bench: render timings against the bare mock runtime
bench: $(STAMP)
	$(BIN)/python tools/bench.py

clean:
	rm -rf build .pytest_cache
