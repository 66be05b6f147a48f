"""Command line: every setting is a flag, `--<section>-<field>`, plus a few short aliases."""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from typing import Any

from pydantic import BaseModel

from app.config import Settings

# The contract in DESIGN.md: `python -m app --host ... --port ... --max-sessions ...`.
ALIASES: dict[str, tuple[str, ...]] = {
    "server.host": ("--host",),
    "server.port": ("--port",),
    "pool.max_sessions": ("--max-sessions",),
    "server.log_level": ("--log-level",),
}


def _flag(path: str) -> str:
    return "--" + path.replace(".", "-").replace("_", "-")


def _fields(model: type[BaseModel], prefix: str = "") -> list[tuple[str, Any]]:
    out: list[tuple[str, Any]] = []
    for name, field in model.model_fields.items():
        annotation = field.annotation
        if isinstance(annotation, type) and issubclass(annotation, BaseModel):
            out.extend(_fields(annotation, f"{prefix}{name}."))
        else:
            out.append((f"{prefix}{name}", field))
    return out


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="voice-agent",
        description="WebRTC voice agent server. Flags override VOICE_* environment and .env.",
        argument_default=argparse.SUPPRESS,
    )
    for path, field in _fields(Settings):
        flags = [*ALIASES.get(path, ()), _flag(path)]
        default = field.get_default(call_default_factory=True)
        help_text = f"{field.description or ''} (default: {default!r})".strip()
        parser.add_argument(*flags, dest=path, metavar=path.split(".")[-1].upper(), help=help_text)
    return parser


def settings_from_args(argv: Sequence[str] | None = None) -> Settings:
    """Environment and .env first, then flags on top; pydantic validates the strings."""
    namespace = vars(build_parser().parse_args(argv))
    overrides: dict[str, Any] = {}
    for path, value in namespace.items():
        node = overrides
        *sections, leaf = path.split(".")
        for section in sections:
            node = node.setdefault(section, {})
        node[leaf] = value
    return Settings(**overrides)
