"""Command line: every setting is a flag, `--<section>-<field>`, plus a few short aliases.

pydantic-settings' own CLI source parses the flags (`--pool.max-sessions` is its
spelling); the shortcuts below add ours, so both work.
"""

from __future__ import annotations

import argparse
import difflib
import textwrap
from collections.abc import Sequence
from typing import Any, NoReturn

from pydantic import BaseModel
from pydantic_settings import CliSettingsSource

from app.config import Settings

# The contract in DESIGN.md: `python -m app --host ... --port ... --max-sessions ...`.
ALIASES: dict[str, str] = {
    "server.host": "host",
    "server.port": "port",
    "pool.max_sessions": "max-sessions",
    "server.log_level": "log-level",
}


def _fields(model: type[BaseModel], prefix: str = "") -> list[tuple[str, Any]]:
    out: list[tuple[str, Any]] = []
    for name, field in model.model_fields.items():
        annotation = field.annotation
        if isinstance(annotation, type) and issubclass(annotation, BaseModel):
            out.extend(_fields(annotation, f"{prefix}{name}."))
        else:
            out.append((f"{prefix}{name}", field))
    return out


def flag(path: str) -> str:
    """`pool.max_sessions` -> `--pool-max-sessions`."""
    return "--" + path.replace(".", "-").replace("_", "-")


def _shortcuts() -> dict[str, list[str]]:
    """Extra names per flag, keyed by the CLI source's own (kebab-case, dotted) name."""
    shortcuts: dict[str, list[str]] = {}
    for path, _ in _fields(Settings):
        names = [flag(path)[2:]] if "." in path else []
        if path in ALIASES:
            names.append(ALIASES[path])
        if names:
            shortcuts[path.replace("_", "-")] = names
    return shortcuts


def known_flags() -> list[str]:
    """Every flag in our spelling, and the short aliases."""
    return [flag(path) for path, _ in _fields(Settings)] + [f"--{a}" for a in ALIASES.values()]


class FlagParser(argparse.ArgumentParser):
    """argparse, with a usage line that fits on a screen and, for a flag it does not know,
    the nearest ones it does."""

    def error(self, message: str) -> NoReturn:
        unknown = [
            word.split("=", 1)[0]
            for word in message.partition("unrecognized arguments:")[2].split()
            if word.startswith("--")
        ]
        for word in unknown:
            # pydantic-settings' dotted spelling is as good as ours for the match.
            near = difflib.get_close_matches(word.replace(".", "-"), known_flags(), 2, 0.8)
            if near:
                message += f"\n  {word}: did you mean {' or '.join(near)}?"
        super().error(message)


USAGE = "voice-agent [--<section>-<field> VALUE ...]   (--help: every flag, by section)"
DESCRIPTION = "\n\n".join(
    textwrap.fill(paragraph, 79, break_on_hyphens=False)
    for paragraph in (
        "The voice agent server. Every setting is a flag, --<section>-<field> (or "
        "--<section>.<field>), an environment variable VOICE_<SECTION>__<FIELD>, or a line in "
        ".env; flags win over the environment, which wins over .env. docs/reference/settings.md "
        "has them all.",
        "Often used: --host, --port, --max-sessions; --llm-base-url URL (vLLM or "
        "any OpenAI-compatible server), --llm-embedded NAME (the bundled LLM), --stt-language "
        "auto (callers in any language), --agent echo (no models: plays you back).",
    )
)


def settings_from_args(argv: Sequence[str] | None = None) -> Settings:
    """Defaults < .env < environment < flags; pydantic validates the strings.

    `argv` None reads sys.argv. A malformed command line exits with status 2, as
    argparse does; a bad value raises ValidationError.
    """
    parser = FlagParser(
        prog="voice-agent",
        usage=USAGE,
        description=DESCRIPTION,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    source: CliSettingsSource[Settings] = CliSettingsSource(
        Settings,
        cli_parse_args=True if argv is None else list(argv),
        cli_kebab_case=True,
        cli_avoid_json=True,
        cli_shortcuts=_shortcuts(),
        root_parser=parser,
        parse_args_method=argparse.ArgumentParser.parse_args,
    )
    return Settings(_cli_settings_source=source)


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
