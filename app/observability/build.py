"""What this server is: its package version, for /metrics and traces."""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version


def package_version() -> str:
    try:
        return version("voice-agent")
    except PackageNotFoundError:
        return "unknown"
