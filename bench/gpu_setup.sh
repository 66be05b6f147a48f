#!/usr/bin/env bash
# Readies `python -m bench.gpu` on a machine with an NVIDIA GPU; run once, from anywhere:
#   bench/gpu_setup.sh [models-folder]        (default: models/, where bench.gpu looks)
# 1. .venv as `make setup` makes it (the first time it compiles llama-cpp-python);
# 2. onnxruntime-gpu for CUDA 12 in place of the CPU onnxruntime, with cuBLAS 12 and cuDNN 9
#    from PyPI: CTranslate2 4.x loads cuBLAS 12, and onnxruntime-gpu 1.27 and later are built
#    for CUDA 13. bench.gpu points the server at these libraries (LD_LIBRARY_PATH);
# 3. the models: faster-whisper large-v3-turbo (CTranslate2 float16) and upstream Kokoro v1.0.
# This is the only step that downloads; the benchmark and the agent never do. Re-running it is
# safe (after `make setup` reinstalls the CPU onnxruntime, it must be re-run).
set -euo pipefail
cd "$(dirname "$0")/.."
models=${1:-models}
python=.venv/bin/python
kokoro=https://github.com/thewh1teagle/kokoro-onnx/releases/download/model-files-v1.0

command -v espeak-ng >/dev/null || { echo "the callers speak with espeak-ng: apt-get install espeak-ng" >&2; exit 1; }
make setup
# Both names install the same `onnxruntime` package: remove either before installing one.
"$python" -m pip uninstall --yes --quiet onnxruntime onnxruntime-gpu
"$python" -m pip install --progress-bar off \
    "onnxruntime-gpu[cuda,cudnn]==1.26.*" "nvidia-cublas-cu12==12.*" "nvidia-cudnn-cu12==9.*"

mkdir -p "$models"
"$python" -c 'import sys; from faster_whisper import download_model; download_model("large-v3-turbo", output_dir=sys.argv[1])' \
    "$models/faster-whisper-large-v3-turbo"
for file in kokoro-v1.0.onnx voices-v1.0.bin; do
    [ -s "$models/$file" ] || { curl -fL --retry 3 -o "$models/$file.part" "$kokoro/$file" && mv "$models/$file.part" "$models/$file"; }
done
echo "ready: $python -m bench.gpu$([ "$models" = models ] || echo " --models $models")"
