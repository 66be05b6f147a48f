"""Where a session's replies are heard: the paced WebRTC track, or a socket's playout clock."""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol


class AudioOut(Protocol):
    rate: int

    @property
    def played_samples(self) -> int:
        """Samples written so far that have gone out (or were cleared)."""
        ...

    @property
    def playing(self) -> bool:
        """Written audio has not all gone out yet."""
        ...

    async def write(
        self, pcm: bytes, on_start: Callable[[], None] | None = None, *, session_id: str = ""
    ) -> int:
        """Queue s16 mono PCM at `rate` for the session `session_id` (checked against
        the owner) and return its position in the stream; `on_start` runs as its first
        sample goes out. Raises EndOfStream once the peer is gone."""
        ...

    def pause(self) -> bool:
        """Hold what has not gone out, sending silence meanwhile; False where the
        transport cannot (what was sent plays on the client's side)."""
        ...

    def resume(self) -> None:
        """Go on from where pause() held it."""
        ...

    def clear(self) -> int:
        """Drop what has not gone out (ending a pause); return how many samples that was."""
        ...

    async def wait_drained(self) -> None: ...
