"""Benchmarks: each prints figures and the machine they were measured on."""

from __future__ import annotations

import argparse
import os
import platform

from app.engines.cpu import cpu_info


def machine() -> str:
    """The line each benchmark prints first, so its figures say where they come from: the
    CPU, and the int8 units onnxruntime's kernels use (Kokoro's speed depends on them)."""
    return (
        f"machine: {platform.machine()}, {os.cpu_count()} cores ({cpu()}), "
        f"python {platform.python_version()}"
    )


def cpu() -> str:
    """The CPU's model name and its int8 matrix features (Linux)."""
    name, flags = cpu_info()
    features = (("amx_int8", "AMX"), ("avx512_vnni", "AVX-512 VNNI"), ("avx_vnni", "AVX-VNNI"),
                ("avx2", "AVX2"))  # fmt: skip
    units = [label for flag, label in features if flag in flags]
    return ", ".join([name or platform.processor() or "unknown CPU", *units[:2]])


def quick_run(doc: str | None, quick_help: str, argv: list[str] | None = None) -> bool:
    """A bench's one flag, --quick (`quick_help` says what it leaves out), parsed, and the
    machine line printed: whether to run the quick version."""
    parser = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawTextHelpFormatter)
    parser.add_argument("--quick", action="store_true", help=quick_help)
    args = parser.parse_args(argv)
    print(machine())
    return bool(args.quick)
