"""Benchmarks: each prints figures and the machine they were measured on."""

from __future__ import annotations

import argparse
import os
import platform


def machine() -> str:
    """The line each benchmark prints first, so its figures say where they come from."""
    return (
        f"machine: {platform.machine()}, {os.cpu_count()} cores, python {platform.python_version()}"
    )


def quick_run(doc: str | None, quick_help: str, argv: list[str] | None = None) -> bool:
    """A bench's one flag, --quick (`quick_help` says what it leaves out), parsed, and the
    machine line printed: whether to run the quick version."""
    parser = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawTextHelpFormatter)
    parser.add_argument("--quick", action="store_true", help=quick_help)
    args = parser.parse_args(argv)
    print(machine())
    return bool(args.quick)
