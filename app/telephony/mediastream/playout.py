"""Reply audio over a media stream, where the carrier's marks say what the caller heard.

After each piece of audio we send a mark named by the stream position at its end. The
carrier plays its buffer and echoes each mark once the audio before it has played, so the
last echoed mark is what the caller heard: barge-in truncates history there, not at a guess.
After a `clear`, the carrier echoes the marks it dropped too; those did not play and are
ignored. Pacing and backpressure are SocketPlayout's clock, which also stands in for marks
that never come back (a client that does not echo them).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable

from app.audio.pushed_playout import SocketPlayout

MARK_GRACE_S = 2.0  # how long past the clock's end to wait for the last mark


class MarkedPlayout:
    def __init__(
        self,
        owner: str,
        rate: int,
        push_audio: Callable[[bytes], Awaitable[None]],
        push_mark: Callable[[str], Awaitable[None]],
        *,
        now: Callable[[], float] = time.monotonic,
    ) -> None:
        """`push_audio` sends s16 PCM at `rate`; `push_mark` a mark with that name."""
        self.rate = rate
        self._push_audio = push_audio
        self._push_mark = push_mark
        self._clock = SocketPlayout(owner, rate, self._push, now=now)
        self._heard = 0  # stream position of the last mark echoed for audio that played
        self._cleared_upto = 0  # marks at or before this position were dropped, not played
        self._caught_up = asyncio.Event()

    async def _push(self, pcm: bytes) -> None:
        await self._push_audio(pcm)
        position = self._clock.queued_samples + len(pcm) // 2
        self._caught_up.clear()
        await self._push_mark(str(position))

    @property
    def clock(self) -> SocketPlayout:
        """The clock of what the carrier plays, and when."""
        return self._clock

    def mark_echoed(self, name: str) -> bool:
        """The carrier reached mark `name`; False for a name that is not one of ours."""
        try:
            position = int(name)
        except ValueError:
            return False
        if position > self._cleared_upto:
            self._heard = max(self._heard, position)
        if self._heard >= self._clock.queued_samples or position >= self._clock.queued_samples:
            self._caught_up.set()
        return True

    @property
    def played_samples(self) -> int:
        """Heard, or cleared: AudioOut counts dropped samples as gone out."""
        return max(self._heard, self._cleared_upto)

    @property
    def playing(self) -> bool:
        return self.played_samples < self._clock.queued_samples

    def output_level_db(self) -> float:
        return self._clock.output_level_db()

    async def write(
        self, pcm: bytes, on_start: Callable[[], None] | None = None, *, session_id: str = ""
    ) -> int:
        return await self._clock.write(pcm, on_start, session_id=session_id)

    def pause(self) -> bool:
        """Media streams can only clear the carrier's buffer, not hold it."""
        return False

    def resume(self) -> None: ...

    def clear(self) -> int:
        """What the carrier still holds is dropped (the dialect sends `clear`); only what
        its marks said was played counts as heard."""
        self._clock.clear()
        dropped = self._clock.queued_samples - self.played_samples
        self._cleared_upto = self._clock.queued_samples
        self._caught_up.set()
        return dropped

    async def wait_drained(self) -> None:
        await self._clock.wait_drained()
        if self.playing:
            try:
                async with asyncio.timeout(MARK_GRACE_S):
                    await self._caught_up.wait()
            except TimeoutError:
                pass
