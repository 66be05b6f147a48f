"""A recording's WAV file, written as its call goes (app/session/recording.py hands it
frames a few seconds at a time), so that no call's audio piles up in memory.

The store's one writer thread does the writing, in the order given, never the event
loop. The header's sizes are filled in when the call ends, and only then is the file
given its name: until then it is `<id>.wav.part`, which is never served. Only this user
may read it (0600)."""

from __future__ import annotations

import asyncio
import contextlib
import os
import wave
from collections.abc import Callable
from concurrent.futures import Executor, Future
from pathlib import Path
from typing import Any, BinaryIO

from app.session.recording import CHANNELS, SAMPLE_BYTES
from app.vocab.pcm import INBOUND_RATE

PART = ".part"
HEADER_BYTES = 44  # a PCM WAV's RIFF, fmt and data headers
# Frames handed to the writer and not yet on disk past which a client's append waits for
# the disk (caught_up), and past which, where nothing waited, the disk has fallen behind:
# the recording is dropped rather than held in memory.
CATCH_UP = 2 * 2**20
MAX_BEHIND = 16 * 2**20


class WavFile:
    """A FrameSink (session/recording.py)."""

    def __init__(self, path: Path, writer: Executor, room: Callable[[int], str | None]) -> None:
        """`writer`: one thread, so that the writes stay in order. `room(size)`: None if
        `size` more bytes may go to disk, else why not (recordings.max_bytes)."""
        self.path = path
        self._part = path.with_name(path.name + PART)
        self._writer = writer
        self._room = room
        self.size = 0  # bytes handed to the writer, the header's included
        self.dropped: str | None = None  # why it will not be kept, once it will not
        # The writer thread's alone (the loop only reads them):
        self._file: BinaryIO | None = None
        self._wav: wave.Wave_write | None = None
        self._on_disk = 0
        self._failed: str | None = None
        self._last: Future[Any] | None = None  # the latest write handed to the writer

    def write(self, frames: bytes) -> None:
        if self.dropped is not None:
            return
        size = len(frames) + (0 if self.size else HEADER_BYTES)
        why = self._failed or self._room(size) or self._behind()
        written = self._submit(self._write, frames) if why is None else None
        if written is not None:
            self._last = written
            self.size += size
        else:
            self.dropped = why or "the server is stopping"
            self.size = 0  # what it took on disk is given back
            self._submit(self._discard)

    async def caught_up(self) -> None:
        last = self._last
        if last is not None and self.size - self._on_disk > CATCH_UP:
            # Shielded: a caller cancelled while it waits must not cancel the write.
            with contextlib.suppress(Exception):
                await asyncio.shield(asyncio.wrap_future(last))

    async def finish(self) -> int | None:
        """Complete the file and give it its name: its size, or None where it is not
        kept (`dropped` says why)."""
        if not self.size:  # no audio at all: still a WAV, of no frames
            self.write(b"")
        # Dropped: gone from disk by the time its refusal is told.
        done = self._submit(self._complete if self.dropped is None else self._discard)
        failed = None
        if done is not None:
            try:
                failed = await asyncio.wrap_future(done)
            except asyncio.CancelledError:
                if not done.cancelled():
                    raise
                done = None  # the store closed first: the server is stopping
        if self.dropped is None and done is not None and failed is None:
            return self.size
        self.dropped = self.dropped or failed or "the server is stopping"
        self.size = 0
        return None

    def _behind(self) -> str | None:
        behind = self.size - self._on_disk
        if behind <= MAX_BEHIND:
            return None
        return f"the disk fell behind: {behind / 2**20:.1f} MiB of it were not written yet"

    def _submit(self, work: Callable[..., Any], *args: object) -> Future[Any] | None:
        try:
            return self._writer.submit(work, *args)
        except RuntimeError:  # the store was closed: the server is stopping
            return None

    # --- on the writer thread

    def _write(self, frames: bytes) -> None:
        if self._failed is not None:
            return
        try:
            if self._wav is None:
                self._wav = self._open()
            self._wav.writeframesraw(frames)
            self._on_disk += len(frames)
        except OSError as exc:
            self._failed = f"writing it failed: {exc}"
            self._discard()

    def _open(self) -> wave.Wave_write:
        # Never through a link another user left; never readable by another user.
        flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW
        self._file = os.fdopen(os.open(self._part, flags, 0o600), "wb")
        wav = wave.open(self._file, "wb")  # noqa: SIM115 (open while the call lasts)
        wav.setnchannels(CHANNELS)
        wav.setsampwidth(SAMPLE_BYTES)
        wav.setframerate(INBOUND_RATE)
        return wav

    def _complete(self) -> str | None:
        """None once the file is whole and named; else why it is not."""
        if self._failed is None:
            try:
                if self._wav is None:
                    self._wav = self._open()
                self._wav.close()  # fills in the header's sizes
                assert self._file is not None
                self._file.close()
                os.replace(self._part, self.path)
            except OSError as exc:
                self._failed = f"writing it failed: {exc}"
        if self._failed is not None:
            self._discard()
        return self._failed

    def _discard(self) -> None:
        with contextlib.suppress(Exception):
            if self._wav is not None:
                self._wav.close()
        with contextlib.suppress(OSError):
            if self._file is not None:
                self._file.close()
        self._part.unlink(missing_ok=True)
