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


def env_example() -> str:
    """The text of .env.example: every key, its description and its default."""
    lines = [
        "# Every setting, with its default. Copy to .env and edit; real environment",
        "# variables win over .env, and command-line flags win over both.",
        "# Keys are VOICE_<SECTION>__<FIELD>; flags are --<section>-<field>.",
        "# Regenerate with: python -m app.cli > .env.example",
    ]
    section = None
    for path, field in _fields(Settings):
        parts = path.split(".")
        current = parts[0] if len(parts) > 1 else "general"
        if current != section:
            section = current
            lines += ["", f"# --- {current} ---"]
        default = field.get_default(call_default_factory=True)
        value = ",".join(default) if isinstance(default, list) else str(default)
        if field.description:
            lines.append(f"# {field.description}")
        quoted = f'"{value}"' if " " in value else value
        lines.append(f"VOICE_{'__'.join(part.upper() for part in parts)}={quoted}")
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    import sys

    sys.stdout.write(env_example())
