"""Recordings of ended calls, kept as WAV files for the retention the operator set
(recordings.retention_s) and deleted when it runs out; none are kept when it is 0.

Each is deleted on time by a timer of its own. A restart cannot serve what an earlier
process kept, so what is left in the folder is deleted at start and at shutdown."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import tempfile
from pathlib import Path

from app.config import RecordingSettings

log = logging.getLogger(__name__)

SUFFIX = ".wav"


class RecordingStore:
    def __init__(self, settings: RecordingSettings) -> None:
        self.retention_s = settings.retention_s
        self.max_s = settings.max_s
        self._dir = Path(settings.dir or Path(tempfile.gettempdir()) / "voice-agent-recordings")
        self._kept: dict[str, Path] = {}
        self._timers: dict[str, asyncio.TimerHandle] = {}
        if self.on:
            self._dir.mkdir(parents=True, exist_ok=True)
            self._clear_folder()

    @property
    def on(self) -> bool:
        return self.retention_s > 0

    async def keep(self, session_id: str, wav: bytes) -> None:
        if not self.on:
            return
        path = self._dir / f"{session_id}{SUFFIX}"
        await asyncio.to_thread(path.write_bytes, wav)
        self._kept[session_id] = path
        loop = asyncio.get_running_loop()
        self._timers[session_id] = loop.call_later(self.retention_s, self._forget, session_id)
        log.info("recording kept for %g s (%d bytes)", self.retention_s, len(wav),
                 extra={"session_id": session_id})  # fmt: skip

    def find(self, session_id: str) -> Path | None:
        return self._kept.get(session_id)

    def _forget(self, session_id: str) -> None:
        self._timers.pop(session_id, None)
        path = self._kept.pop(session_id, None)
        if path is not None:
            path.unlink(missing_ok=True)

    def close(self) -> None:
        for timer in self._timers.values():
            timer.cancel()
        for session_id in list(self._kept):
            self._forget(session_id)
        if self.on:
            self._clear_folder()

    def _clear_folder(self) -> None:
        for path in self._dir.glob(f"*{SUFFIX}"):
            with contextlib.suppress(OSError):
                path.unlink()
