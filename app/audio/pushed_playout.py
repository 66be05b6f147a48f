"""Reply audio pushed to a client in pieces (over a WebSocket, a media stream), with a
playout clock.

The client plays what it receives; the server cannot see its playout, so it
assumes real time from the first piece (as OpenAI does; Realtime clients
correct history with conversation.item.truncate). That clock gives barge-in
a heard position, keeps the reply at most MAX_AHEAD_S ahead of playout
(backpressure on TTS, like the WebRTC track), and says when a reply has
finished playing. How a piece is worded on the wire is the dialect's `push`.
"""

from __future__ import annotations

import asyncio
import time
from collections import deque
from collections.abc import Awaitable, Callable

from app.audio.echo import EchoReference
from app.audio.level import SILENT_DB, pcm_db
from app.audio.playout import LEVEL_WINDOW_S
from app.errors import CrossedSessions

PIECE_S = 0.1
MAX_AHEAD_S = 8.0
LEVEL_PIECES = int(MAX_AHEAD_S / PIECE_S) + 8  # every piece that may still be ahead


class SocketPlayout:
    def __init__(
        self,
        owner: str,
        rate: int,
        push: Callable[[bytes], Awaitable[None]],
        *,
        ahead_s: float = MAX_AHEAD_S,
        now: Callable[[], float] = time.monotonic,
    ) -> None:
        """`push` sends one piece of s16 mono PCM at `rate`, waiting for room if it must.
        `ahead_s`: how far ahead of playout the client may be sent audio (at most
        MAX_AHEAD_S); what it holds plays on after an interruption unless it is told."""
        self.owner = owner
        self._ahead_s = min(ahead_s, MAX_AHEAD_S)
        self.rate = rate
        self._push = push
        self._now = now
        self._piece_bytes = int(rate * PIECE_S) * 2
        self.queued_samples = 0
        self._play_end = 0.0  # when the last sample sent will have played
        # (when a piece starts playing, when it ends, its level): for the echo guard.
        self._levels: deque[tuple[float, float, float]] = deque(maxlen=LEVEL_PIECES)
        # What the client will play, on this clock, for cancelling its echo (on when set).
        self.reference: EchoReference | None = None

    @property
    def played_samples(self) -> int:
        ahead_s = max(0.0, self._play_end - self._now())
        return max(0, self.queued_samples - int(ahead_s * self.rate))

    @property
    def playing(self) -> bool:
        return self._now() < self._play_end

    async def write(
        self, pcm: bytes, on_start: Callable[[], None] | None = None, *, session_id: str = ""
    ) -> int:
        if session_id != self.owner:
            raise CrossedSessions(f"audio of {session_id!r} sent to the socket of {self.owner!r}")
        await self._until_room()
        start = self.queued_samples
        if on_start is not None:
            on_start()
        for offset in range(0, len(pcm), self._piece_bytes):
            if offset:
                await self._until_room()
            piece = pcm[offset : offset + self._piece_bytes]
            await self._push(piece)
            samples = len(piece) // 2
            starts = max(self._now(), self._play_end)
            self._play_end = starts + samples / self.rate
            self._levels.append((starts, self._play_end, pcm_db(piece)))
            if self.reference is not None:
                self.reference.played(piece, starts)
            self.queued_samples += samples
        return start

    async def _until_room(self) -> None:
        # Waiting on a clock, not an event: the deadline is a time, and it can move.
        while (ahead := self._play_end - self._now()) > self._ahead_s:  # noqa: ASYNC110
            await asyncio.sleep(ahead - self._ahead_s)

    def output_level_db(self) -> float:
        """Loudest piece playing in the last half second by the clock, in dBFS: how loud
        the agent's voice may be coming back as echo (SILENT_DB for none)."""
        now = self._now()
        since = now - LEVEL_WINDOW_S
        return max(
            (db for starts, ends, db in self._levels if starts <= now and ends >= since),
            default=SILENT_DB,
        )

    def pause(self) -> bool:
        """What was sent plays on the client's side: only the client could pause it."""
        return False

    def resume(self) -> None: ...

    def clear(self) -> int:
        """What was sent cannot be unsent: the client stops its own playback on
        speech_started; here the clock stops, so nothing more counts as heard."""
        dropped = self.queued_samples - self.played_samples
        self._play_end = self._now()
        self._levels.clear()
        if self.reference is not None:
            self.reference.forget_after(self._play_end)
        return dropped

    async def wait_drained(self) -> None:
        while (left := self._play_end - self._now()) > 0:  # noqa: ASYNC110
            await asyncio.sleep(left)
