"""Recordings of ended calls, kept as WAV files for the retention the operator set
(recordings.retention_s) and deleted when it runs out; none are kept when it is 0.

Each is written to disk as its call goes (wav_file.py), in a folder only this user may
enter (0700), and named when the call ends. Each is deleted on time by a timer of its
own, and together, with those being written, they never take more than
recordings.max_bytes: a call that would pass it is not recorded, and its download says
why. A server stopped on purpose deletes them all; after a crash, the next start keeps
serving those still within their retention (a file's age is its modification time) and
deletes the rest, and what was being written."""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import re
import stat
import tempfile
import time
import weakref
from collections import OrderedDict
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from app.calls.wav_file import PART, WavFile
from app.config import RecordingSettings
from app.ids import shown
from app.session.recording import Recording

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
        self._kept_bytes = 0
        # Those being written (weakly: a call that failed before it ended drops its own).
        self._writing: weakref.WeakValueDictionary[str, WavFile] = weakref.WeakValueDictionary()
        self._timers: dict[str, asyncio.TimerHandle] = {}
        self._refused: OrderedDict[str, str] = OrderedDict()
        self._adopted: dict[str, float] = {}  # a crashed process's: id -> when it goes
        # One thread writes every recording: in order, and off the event loop.
        self._writer = ThreadPoolExecutor(max_workers=1, thread_name_prefix="recordings")
        if self.on:
            _own_folder(self._dir)
            self._adopt_folder()

    @property
    def on(self) -> bool:
        return self.retention_s > 0

    @property
    def held_bytes(self) -> int:
        """What the recordings kept and those being written take on disk."""
        return self._kept_bytes + sum(wav.size for wav in self._writing.values())

    def open(self, session_id: str) -> Recording:
        """A recording of this call from now on, written to disk as it goes."""
        if not SAFE_ID.match(session_id):
            raise ValueError(f"not a session id to name a file with: {shown(session_id)}")
        path = self._dir / f"{session_id}{SUFFIX}"
        wav = self._writing[session_id] = WavFile(path, self._writer, self._room_for)
        return Recording(self.max_s, wav)

    async def keep(self, session_id: str, recording: Recording) -> None:
        """The call ended: its recording is completed and kept for the retention."""
        recording.finish()
        wav = self._writing.get(session_id)
        if wav is None:
            return
        size = await wav.finish()
        self._writing.pop(session_id, None)
        if size is None:
            why = wav.dropped or "it was not written"
            log.warning("recording not kept: %s", why, extra={"session_id": session_id})
            self._refused[session_id] = why
            while len(self._refused) > MAX_REFUSED:
                self._refused.popitem(last=False)
            return
        self._hold(session_id, wav.path, size, self.retention_s)
        log.info("recording kept for %g s (%d bytes)", self.retention_s, size,
                 extra={"session_id": session_id})  # fmt: skip

    def _room_for(self, size: int) -> str | None:
        held = self.held_bytes
        if held + size <= self.max_bytes:
            return None
        return (f"the recordings kept and being written hold {held / 2**20:.1f} MiB, and "
                f"{size / 2**20:.1f} MiB more of this one would pass recordings.max_bytes "
                f"({self.max_bytes / 2**20:.1f} MiB)")  # fmt: skip

    def find(self, session_id: str) -> Path | None:
        kept = self._kept.get(session_id)
        return kept[0] if kept is not None else None

    def refusal(self, session_id: str) -> str | None:
        """Why a session's recording was not kept, if it was not (no room, or the disk
        failed it)."""
        return self._refused.get(session_id)

    def _hold(self, session_id: str, path: Path, size: int, keep_s: float) -> None:
        self._kept[session_id] = (path, size)
        self._kept_bytes += size
        loop = asyncio.get_running_loop()
        self._timers[session_id] = loop.call_later(keep_s, self._forget, session_id)

    def _forget(self, session_id: str) -> None:
        self._timers.pop(session_id, None)
        kept = self._kept.pop(session_id, None)
        if kept is not None:
            self._kept_bytes -= kept[1]
            kept[0].unlink(missing_ok=True)

    def close(self) -> None:
        for timer in self._timers.values():
            timer.cancel()
        for session_id in list(self._kept):
            self._forget(session_id)
        # What calls still being written had queued is dropped: at most the write under
        # way is waited for, so that no file is made after the folder is emptied.
        self._writer.shutdown(wait=True, cancel_futures=True)
        if self.on:
            for path in [*self._dir.glob(f"*{SUFFIX}"), *self._dir.glob(f"*{SUFFIX}{PART}")]:
                with contextlib.suppress(OSError):
                    path.unlink()

    def _adopt_folder(self) -> None:
        """What an earlier process left: still within its retention, served until its
        time; past it (or not ours to serve), deleted now, as is what was being written
        (its call is gone, and its header never got its sizes)."""
        for part in self._dir.glob(f"*{SUFFIX}{PART}"):
            with contextlib.suppress(OSError):
                part.unlink()
        now = time.time()
        for path in sorted(self._dir.glob(f"*{SUFFIX}"), key=_mtime):
            with contextlib.suppress(OSError):
                info = path.stat()
                left_s = info.st_mtime + self.retention_s - now
                room = self.held_bytes + info.st_size <= self.max_bytes
                if left_s > 0 and SAFE_ID.match(path.stem) and room:
                    self._kept[path.stem] = (path, info.st_size)
                    self._kept_bytes += info.st_size
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


def _own_folder(folder: Path) -> None:
    """The folder, made if need be, for this user alone: in a shared temporary directory
    another user could have made it first, to read what is put in it."""
    folder.mkdir(mode=0o700, parents=True, exist_ok=True)
    info = folder.lstat()
    if not stat.S_ISDIR(info.st_mode) or info.st_uid != os.getuid():
        raise ValueError(
            f"recordings.dir {str(folder)!r} is not a folder of this user's (a link, or "
            "another user's): set --recordings-dir to one of its own"
        )
    if stat.S_IMODE(info.st_mode) != 0o700:
        folder.chmod(0o700)


def _mtime(path: Path) -> float:
    try:
        return path.stat().st_mtime
    except OSError:
        return 0.0
