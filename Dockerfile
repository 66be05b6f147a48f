# Production image: engines from mounted model files, LLM from vLLM. No embedded models.
FROM python:3.11-slim
WORKDIR /srv
COPY pyproject.toml README.md ./
COPY app ./app
COPY static ./static
RUN pip install --no-cache-dir . \
 # GPU engines: onnxruntime with CUDA for Kokoro, cuBLAS/cuDNN for CTranslate2 (Whisper).
 && pip uninstall -y onnxruntime \
 && pip install --no-cache-dir onnxruntime-gpu nvidia-cublas-cu12 "nvidia-cudnn-cu12==9.*"
ENV LD_LIBRARY_PATH=/usr/local/lib/python3.11/site-packages/nvidia/cublas/lib:/usr/local/lib/python3.11/site-packages/nvidia/cudnn/lib
EXPOSE 8000
CMD ["python", "-m", "app", "--host", "0.0.0.0", "--port", "8000"]
