"""The agent's voice on a steady clock, whatever carries it: PCM queued by a reply, taken
out 20 ms at a time when each frame is due, with clear(), pause(), marks that fire as
their audio goes out, and the level of what went out lately (the echo guard's).

The WebRTC track (rtc/outbound.py) and SIP's RTP sender (telephony/sip/rtp.py) both pull
their frames from one of these: the pacing is the same, only the wire differs.
"""

from __future__ import annotations

import asyncio
import time
from collections import deque
from collections.abc import Callable

from app.audio.echo import EchoReference
from app.audio.level import SILENT_DB, pcm_db
from app.errors import CrossedSessions, EndOfStream

FRAME_MS = 20
# Queued reply audio beyond which write() waits: enough to synthesize the next
# sentence while this one plays, small enough that clear() drops little work.
DEFAULT_MAX_BUFFER_S = 8.0
# How far back output_level_db() looks: the agent's voice reaches a microphone
# without echo cancellation a few hundred ms after it is sent.
LEVEL_WINDOW_S = 0.5


class PacingClock:
    """pts and sleep for fixed-size frames, anchored to the first frame.

    Deadlines are t0 + pts/rate, so rounding never accumulates into drift. If the
    loop stalls past `max_lag_s`, the anchor moves instead of bursting frames to
    catch up, which the far end would hear as a glitch anyway.
    """

    def __init__(
        self,
        rate: int,
        frame_samples: int,
        *,
        max_lag_s: float = 0.1,
        now: Callable[[], float] = time.monotonic,
    ) -> None:
        self.rate = rate
        self.frame_samples = frame_samples
        self._max_lag_s = max_lag_s
        self._now = now
        self._t0: float | None = None
        self.pts = 0

    def next(self) -> tuple[int, float]:
        """Return (pts, seconds to sleep before sending) for the next frame."""
        now = self._now()
        if self._t0 is None:
            self._t0 = now
            return 0, 0.0
        self.pts += self.frame_samples
        delay = self._t0 + self.pts / self.rate - now
        if delay < -self._max_lag_s:
            self._t0 = now - self.pts / self.rate
            delay = 0.0
        return self.pts, max(0.0, delay)

    def time_of(self, pts: int) -> float:
        """When the frame at `pts` is due, on the monotonic clock."""
        return (self._t0 if self._t0 is not None else self._now()) + pts / self.rate

    def skip_idle(self) -> None:
        """Jump over the slots that passed while nothing was sent (DTX)."""
        if self._t0 is None:
            return
        elapsed = int((self._now() - self._t0) * self.rate) // self.frame_samples
        self.pts = max(self.pts, (elapsed - 1) * self.frame_samples)


class PacedPlayout:
    """Mono s16 at `rate`, out in 20 ms frames; silence when nothing is queued. An
    AudioOut (session/speaking/audio_out.py) on the writing side."""

    def __init__(
        self, rate: int, *, owner: str = "", max_buffer_s: float = DEFAULT_MAX_BUFFER_S
    ) -> None:
        self.owner = owner  # the session whose voice this is; writes must carry its id
        self.rate = rate
        self.frame_samples = rate * FRAME_MS // 1000
        self.frame_bytes = self.frame_samples * 2
        self.clock = PacingClock(rate, self.frame_samples)
        self._max_bytes = int(max_buffer_s * rate) * 2
        self._buffer = bytearray()
        # (sample offset in the queued stream, callback) fired when that sample goes out.
        self._marks: deque[tuple[int, Callable[[], None]]] = deque()
        self.queued_samples = 0  # every sample ever written
        self.played_samples = 0  # every written sample sent (or cleared)
        # (time sent, RMS) of recent voiced frames, for telling the agent's echo from the user.
        self._levels: deque[tuple[float, float]] = deque(maxlen=int(LEVEL_WINDOW_S * 50))
        self._space = asyncio.Event()
        self._space.set()
        self._drained = asyncio.Event()
        self._drained.set()
        self.queued = asyncio.Event()  # set while reply audio waits to be sent
        self._paused = False  # send silence, keep the queue where it is
        self.live = True
        # What went out, on the pacing clock, for cancelling its echo (on when set).
        self.reference: EchoReference | None = None

    async def write(
        self, pcm: bytes, on_start: Callable[[], None] | None = None, *, session_id: str = ""
    ) -> int:
        """Queue s16 mono PCM at `rate`; `on_start` runs when its first sample is sent.

        Returns the position of its first sample in the stream of everything
        written, the unit of `played_samples`.

        `session_id` must be this playout's owner: audio is tagged with the session
        that made it and checked here, where it would reach a peer.

        Waits while more than max_buffer_s is queued (backpressure on TTS), so the
        buffer holds at most max_buffer_s plus one write. Raises EndOfStream once
        the playout has stopped.
        """
        if session_id != self.owner:
            raise CrossedSessions(f"audio of {session_id!r} sent to the voice of {self.owner!r}")
        while self.live and len(self._buffer) >= self._max_bytes:
            self._space.clear()
            await self._space.wait()
        if not self.live:
            raise EndOfStream("the outbound audio has stopped")
        start = self.queued_samples
        if on_start is not None:
            self._marks.append((start, on_start))
        self._buffer += pcm
        self.queued_samples += len(pcm) // 2
        if pcm:
            self._drained.clear()
            self.queued.set()
        return start

    def pause(self) -> bool:
        """Hold what is queued and send silence until resume() or clear()."""
        self._paused = True
        return True

    def resume(self) -> None:
        self._paused = False

    def clear(self) -> int:
        """Drop everything queued (and end a pause); return how many samples were dropped."""
        self._paused = False
        dropped = len(self._buffer) // 2
        self._buffer.clear()
        self._marks.clear()
        self.played_samples = self.queued_samples
        self._space.set()
        self._drained.set()
        self.queued.clear()
        return dropped

    async def wait_drained(self) -> None:
        await self._drained.wait()

    @property
    def playing(self) -> bool:
        """Written audio is still waiting to be sent."""
        return not self._drained.is_set()

    @property
    def paused(self) -> bool:
        """Held by pause(): silence goes out whatever is queued."""
        return self._paused

    @property
    def idle(self) -> bool:
        """Nothing queued to send."""
        return not self._buffer

    def output_level_db(self) -> float:
        """Loudest frame sent in the last half second, in dBFS (SILENT_DB for none)."""
        since = time.monotonic() - LEVEL_WINDOW_S
        return max((db for at, db in self._levels if at >= since), default=SILENT_DB)

    async def next_frame(self) -> tuple[bytes | None, int]:
        """(PCM or None for silence, pts) of the next frame, once it is due."""
        pts, delay = self.clock.next()
        if delay:
            await asyncio.sleep(delay)
        if self._paused:
            return None, pts
        chunk = bytes(self._buffer[: self.frame_bytes])
        del self._buffer[: len(chunk)]
        sent = len(chunk) // 2
        self._fire_marks(self.played_samples + sent)
        self.played_samples += sent
        if len(self._buffer) < self._max_bytes:
            self._space.set()
        if sent and not self._buffer:
            self._drained.set()
            self.queued.clear()
        pcm = chunk.ljust(self.frame_bytes, b"\0") if sent else None
        if pcm is not None:
            self._levels.append((time.monotonic(), pcm_db(pcm)))
            if self.reference is not None:
                self.reference.played(pcm, self.clock.time_of(pts))
        return pcm, pts

    async def next_pcm(self) -> bytes:
        """The next 20 ms as s16 PCM, silence included, when it is due."""
        pcm, _ = await self.next_frame()
        return pcm or bytes(self.frame_bytes)

    def _fire_marks(self, up_to: int) -> None:
        while self._marks and self._marks[0][0] < up_to:
            self._marks.popleft()[1]()

    def stop(self) -> None:
        self.live = False
        # Unblock writers waiting for space; they see the voice has stopped.
        self._space.set()
        self._drained.set()
        self.queued.set()
