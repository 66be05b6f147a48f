"""What this CPU is and which of its instructions the engines' kernels can use, as Linux
tells it (/proc/cpuinfo): llama.cpp's AMX repacking and Kokoro's rewritten graph depend
on them, and every benchmark names them."""

from __future__ import annotations

from pathlib import Path


def cpu_info(path: str = "/proc/cpuinfo") -> tuple[str, frozenset[str]]:
    """The first processor's model name and flags; ("", no flags) where it cannot be read."""
    try:
        first = Path(path).read_text().split("\n\n", 1)[0]
    except OSError:
        return "", frozenset()
    fields = {key.strip(): value.strip() for key, _, value in
              (line.partition(":") for line in first.splitlines())}  # fmt: skip
    return " ".join(fields.get("model name", "").split()), frozenset(
        fields.get("flags", "").split()
    )


def has_int8_dot_products() -> bool:
    """VNNI or AMX: u8 x s8 products added into 32 bits, not in pairs into 16 as AVX2 does."""
    return bool({"avx512_vnni", "avx_vnni", "amx_int8"} & cpu_info()[1])
