"""Reply audio over a WebSocket: response.output_audio.delta events, and a playout clock.

The client plays what it receives; the server cannot see its playout, so it
assumes real time from the first delta (as OpenAI does; clients correct
history with conversation.item.truncate). That clock gives barge-in a heard
position, keeps the reply at most MAX_AHEAD_S ahead of playout (backpressure on
TTS, like the WebRTC track), and says when a reply has finished playing.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable

from app import events
from app.audio.level import SILENT_DB
from app.errors import CrossedSessions

RATE = 24_000
CHUNK_SAMPLES = RATE // 10  # 100 ms a delta
MAX_AHEAD_S = 8.0


class WebSocketAudio:
    rate = RATE

    def __init__(
        self,
        owner: str,
        send_audio: Callable[[events.Event], Awaitable[None]],
        *,
        now: Callable[[], float] = time.monotonic,
    ) -> None:
        self.owner = owner
        self._send_audio = send_audio
        self._now = now
        self._ids = ("", "")
        self.queued_samples = 0
        self._play_end = 0.0  # when the last sample sent will have played

    def begin(self, response_id: str, item_id: str) -> None:
        self._ids = (response_id, item_id)

    @property
    def played_samples(self) -> int:
        ahead_s = max(0.0, self._play_end - self._now())
        return max(0, self.queued_samples - int(ahead_s * RATE))

    @property
    def playing(self) -> bool:
        return self._now() < self._play_end

    async def write(
        self, pcm: bytes, on_start: Callable[[], None] | None = None, *, session_id: str = ""
    ) -> int:
        if session_id != self.owner:
            raise CrossedSessions(f"audio of {session_id!r} sent to the socket of {self.owner!r}")
        # Waiting on a clock, not an event: the deadline is a time, and it can move.
        while (ahead := self._play_end - self._now()) > MAX_AHEAD_S:  # noqa: ASYNC110
            await asyncio.sleep(ahead - MAX_AHEAD_S)
        start = self.queued_samples
        if on_start is not None:
            on_start()
        for offset in range(0, len(pcm), CHUNK_SAMPLES * 2):
            chunk = pcm[offset : offset + CHUNK_SAMPLES * 2]
            await self._send_audio(events.audio_delta(*self._ids, chunk))
            samples = len(chunk) // 2
            self._play_end = max(self._now(), self._play_end) + samples / RATE
            self.queued_samples += samples
        return start

    def clear(self) -> int:
        """What was sent cannot be unsent: the client stops its own playback on
        speech_started; here the clock stops, so nothing more counts as heard."""
        dropped = self.queued_samples - self.played_samples
        self._play_end = self._now()
        return dropped

    async def wait_drained(self) -> None:
        while (left := self._play_end - self._now()) > 0:  # noqa: ASYNC110
            await asyncio.sleep(left)

    def output_level_db(self) -> float:
        return SILENT_DB  # no echo path: the client's playback never reaches this input
