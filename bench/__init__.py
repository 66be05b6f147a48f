"""Benchmarks: each prints figures and the machine they were measured on."""

from __future__ import annotations

import os
import platform


def machine() -> str:
    """The line each benchmark prints first, so its figures say where they come from."""
    return (
        f"machine: {platform.machine()}, {os.cpu_count()} cores, python {platform.python_version()}"
    )
