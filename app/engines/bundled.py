"""Model files that ship inside the pipecat-ai wheel (Smart Turn, Silero VAD), so they
work offline. Found through the installed distribution: importing pipecat would run its
code, and none of it is used here."""

from __future__ import annotations

from app.errors import EngineError

DISTRIBUTION = "pipecat-ai"


def pipecat_file(path: str, what: str, setting: str) -> str:
    """Where `path` (inside the wheel) is installed; EngineError, naming `what` and the
    `setting` that would point elsewhere, when the wheel is not."""
    from importlib import metadata

    try:
        return str(metadata.distribution(DISTRIBUTION).locate_file(path))
    except metadata.PackageNotFoundError as exc:
        raise EngineError(
            f"{setting} is empty and the bundled {what} ({DISTRIBUTION}) is not installed"
        ) from exc
