#!/usr/bin/env bash
# Serves Qwen2.5-Coder-1.5B-Instruct (from its PyPI parts) with vLLM's OpenAI-compatible server
# on the CPU, in the foreground. The same script runs in the compose service, under `make vllm`
# and in the tests. Prepares the model folder first if it is not there yet (about a minute, once).
#
# Environment (all optional):
#   VLLM_VENV       the venv install.sh built            (default: .vllm next to the repo root)
#   VLLM_MODEL_DIR  where the prepared model folder is   (default: $VLLM_VENV/models/qwen2.5-coder-1.5b)
#   VLLM_HOST, VLLM_PORT                                 (default: 127.0.0.1, 8001)
#   VLLM_SERVED_NAME  the model name clients ask for     (default: Qwen2.5-Coder-1.5B-Instruct;
#                     the agent names the model it runs after it)
#   VLLM_CPU_KVCACHE_SPACE  GiB of KV cache              (default here: 1, ample for 1.5B at 2k)
#   VLLM_TOOL_PARSER  how vLLM finds tool calls in what the model writes (default: hermes, the
#                     format of Qwen2.5 and many others); empty: tools off, and vLLM then answers
#                     400 to every session that offers one
# Extra arguments go to `vllm serve` as they are.
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
venv=${VLLM_VENV:-$root/.vllm}
model=${VLLM_MODEL_DIR:-$venv/models/qwen2.5-coder-1.5b}

if [ ! -x "$venv/bin/vllm" ]; then
    echo "no vLLM in $venv: run deploy/vllm/install.sh $venv (or make vllm)" >&2
    exit 1
fi
"$venv/bin/python" "$root/deploy/vllm/prepare_model.py" "$model"

# Without these, vLLM refuses any request offering tools ("auto" tool choice requires ...), and
# the agent offers the session's tools on every turn.
tools=()
parser=${VLLM_TOOL_PARSER-hermes}
if [ -n "$parser" ]; then tools=(--enable-auto-tool-choice --tool-call-parser "$parser"); fi

# vLLM runs bf16 on the CPU unless told otherwise, and a CPU without bf16 instructions
# (AVX2 only, as many small VMs) emulates it: 0.5 tokens/s on a 2 vCPU AMD EPYC, against ~7
# in float32. An explicit --dtype among the extra arguments comes after, and wins.
dtype=()
if [ -r /proc/cpuinfo ] && ! grep -qwE 'avx512_bf16|amx_bf16' /proc/cpuinfo; then
    dtype=(--dtype float32)
fi

# vLLM traces the model with torch.compile before it serves; on the CPU that took ~50 s of an
# ~90 s start and made no token sooner (0.5B: 9.9-11.5 tokens/s compiled, 12.3 eager).
eager=(--enforce-eager)

export VLLM_CPU_KVCACHE_SPACE=${VLLM_CPU_KVCACHE_SPACE:-1}
export HF_HUB_OFFLINE=1 VLLM_NO_USAGE_STATS=1 PYTHONUNBUFFERED=1
exec "$venv/bin/vllm" serve "$model" \
    --host "${VLLM_HOST:-127.0.0.1}" --port "${VLLM_PORT:-8001}" \
    --served-model-name "${VLLM_SERVED_NAME:-Qwen2.5-Coder-1.5B-Instruct}" \
    --max-model-len 2048 \
    --enable-log-requests \
    "${tools[@]}" \
    "${dtype[@]}" \
    "${eager[@]}" \
    "$@"
