# make run  - set up .venv and serve the agent on the embedded models at http://127.0.0.1:8000
# make test - set up .venv (and the Debian packages the tests drive) and run lint + the whole suite

PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
# llama-cpp-python has no wheel on PyPI: it compiles (~9 min on 2 cores, once; pip caches the wheel).
export CMAKE_ARGS ?= -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_TOOLS=OFF
DEBIAN_PACKAGES := chromium espeak-ng sox

.PHONY: run test setup system-deps lint unit bench clean

run: setup
	$(BIN)/python -m app --host 127.0.0.1 --port 8000

# The official @openai/agents-realtime for the browser tests, from the npm registry.
AGENTS_SDK := tests/e2e/agents_sdk
AGENTS_BUNDLE := test-output/agents-sdk/agents.js

test: system-deps setup lint $(AGENTS_BUNDLE)
	$(BIN)/python -m pytest

setup: $(STAMP)

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip wheel
	$(BIN)/python -m pip install --progress-bar off -e '.[embedded,dev]'
	touch $@

$(AGENTS_BUNDLE): $(AGENTS_SDK)/package.json $(AGENTS_SDK)/entry.js
	cd $(AGENTS_SDK) && npm install --no-audit --no-fund --loglevel=error
	$(AGENTS_SDK)/node_modules/.bin/esbuild $(AGENTS_SDK)/entry.js --bundle --format=iife \
		--platform=browser --log-level=warning --outfile=$@

# Chromium drives the page tests, espeak-ng and sox make the speech the tests say.
system-deps:
	@missing=""; for p in $(DEBIAN_PACKAGES); do dpkg -s $$p >/dev/null 2>&1 || missing="$$missing $$p"; done; \
	if [ -n "$$missing" ]; then \
		echo "installing Debian packages:$$missing"; \
		if [ "$$(id -u)" -ne 0 ]; then echo "need root (or sudo) for apt-get install$$missing" >&2; exit 1; fi; \
		apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends $$missing; \
	fi

lint: setup
	$(BIN)/ruff check app clients tests bench
	$(BIN)/ruff format --check app clients tests bench
	$(BIN)/mypy app clients

unit: setup
	$(BIN)/python -m pytest -m "not e2e"

bench: setup
	$(BIN)/python -m bench.latency --sessions 1

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache
