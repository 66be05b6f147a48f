"""Recordings of ended calls, kept as WAV files for the retention the operator set
(recordings.retention_s) and deleted when it runs out; none are kept when it is 0.

Each is deleted on time by a timer of its own, and together they never hold more than
recordings.max_bytes: a call that would pass it is not recorded, and its download says
why. A server stopped on purpose deletes them all; after a crash, the next start keeps
serving those still within their retention (a file's age is its modification time) and
deletes the rest."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import re
import tempfile
import time
from collections import OrderedDict
from pathlib import Path

from app.config import RecordingSettings

log = logging.getLogger(__name__)

SUFFIX = ".wav"
# What a session id may look like in a file name: nothing that leaves the folder.
SAFE_ID = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
MAX_REFUSED = 256  # sessions whose recording was not kept, remembered to say why


class RecordingStore:
    def __init__(self, settings: RecordingSettings) -> None:
        self.retention_s = settings.retention_s
        self.max_s = settings.max_s
        self.max_bytes = settings.max_bytes
        self._dir = Path(settings.dir or Path(tempfile.gettempdir()) / "voice-agent-recordings")
        self._kept: dict[str, tuple[Path, int]] = {}
        self._timers: dict[str, asyncio.TimerHandle] = {}
        self._refused: OrderedDict[str, str] = OrderedDict()
        self._adopted: dict[str, float] = {}  # a crashed process's: id -> when it goes
        if self.on:
            self._dir.mkdir(parents=True, exist_ok=True)
            self._adopt_folder()

    @property
    def on(self) -> bool:
        return self.retention_s > 0

    @property
    def held_bytes(self) -> int:
        return sum(size for _, size in self._kept.values())

    async def keep(self, session_id: str, wav: bytes) -> None:
        if not self.on:
            return
        if not SAFE_ID.match(session_id):
            raise ValueError(f"not a session id to name a file with: {session_id[:80]!r}")
        held = self.held_bytes
        if held + len(wav) > self.max_bytes:
            why = (f"the recordings kept hold {held / 2**20:.1f} MiB and this one's "
                   f"{len(wav) / 2**20:.1f} MiB would pass recordings.max_bytes "
                   f"({self.max_bytes / 2**20:.1f} MiB)")  # fmt: skip
            log.warning("recording not kept: %s", why, extra={"session_id": session_id})
            self._refused[session_id] = why
            while len(self._refused) > MAX_REFUSED:
                self._refused.popitem(last=False)
            return
        path = self._dir / f"{session_id}{SUFFIX}"
        await asyncio.to_thread(path.write_bytes, wav)
        self._hold(session_id, path, len(wav), self.retention_s)
        log.info("recording kept for %g s (%d bytes)", self.retention_s, len(wav),
                 extra={"session_id": session_id})  # fmt: skip

    def find(self, session_id: str) -> Path | None:
        kept = self._kept.get(session_id)
        return kept[0] if kept is not None else None

    def refusal(self, session_id: str) -> str | None:
        """Why a session's recording was not kept, if it was refused for room."""
        return self._refused.get(session_id)

    def _hold(self, session_id: str, path: Path, size: int, keep_s: float) -> None:
        self._kept[session_id] = (path, size)
        loop = asyncio.get_running_loop()
        self._timers[session_id] = loop.call_later(keep_s, self._forget, session_id)

    def _forget(self, session_id: str) -> None:
        self._timers.pop(session_id, None)
        kept = self._kept.pop(session_id, None)
        if kept is not None:
            kept[0].unlink(missing_ok=True)

    def close(self) -> None:
        for timer in self._timers.values():
            timer.cancel()
        for session_id in list(self._kept):
            self._forget(session_id)
        if self.on:
            for path in self._dir.glob(f"*{SUFFIX}"):
                with contextlib.suppress(OSError):
                    path.unlink()

    def _adopt_folder(self) -> None:
        """What an earlier process left: still within its retention, served until its
        time; past it (or not ours to serve), deleted now."""
        now = time.time()
        for path in sorted(self._dir.glob(f"*{SUFFIX}"), key=_mtime):
            with contextlib.suppress(OSError):
                stat = path.stat()
                left_s = stat.st_mtime + self.retention_s - now
                room = self.held_bytes + stat.st_size <= self.max_bytes
                if left_s > 0 and SAFE_ID.match(path.stem) and room:
                    self._kept[path.stem] = (path, stat.st_size)
                    self._adopted[path.stem] = now + left_s
                else:
                    path.unlink()
        if self._adopted:
            log.info("%d recordings from before the restart are kept for what is left of "
                     "their retention", len(self._adopted))  # fmt: skip

    def start(self) -> None:
        """On the running loop: the timers of what was adopted at start."""
        loop = asyncio.get_running_loop()
        now = time.time()
        for session_id, deadline in self._adopted.items():
            self._timers[session_id] = loop.call_later(
                max(deadline - now, 0), self._forget, session_id
            )
        self._adopted.clear()


def _mtime(path: Path) -> float:
    try:
        return path.stat().st_mtime
    except OSError:
        return 0.0
