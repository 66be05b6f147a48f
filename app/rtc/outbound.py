"""The agent's voice on a WebRTC peer: aiortc's outbound audio track, its frames pulled
from a paced playout (audio/playout.py), as av frames or, with Opus, packets we encode
ourselves (with DTX)."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable
from fractions import Fraction

import av
from aiortc.mediastreams import MediaStreamError, MediaStreamTrack

from app.audio.playout import DEFAULT_MAX_BUFFER_S, PacedPlayout
from app.rtc.opus import OPUS_RATE, OpusPacketizer

# While the agent is silent, send one Opus packet this often instead of every
# 20 ms, as Opus DTX does; receivers fill the gap with comfort noise.
DTX_INTERVAL_S = 0.4


class PacedAudioTrack(MediaStreamTrack):
    """Mono s16 at `rate` in 20 ms frames; silence when nothing is queued. Written to as
    an AudioOut: what it says of the audio is its playout's."""

    kind = "audio"

    def __init__(
        self,
        rate: int = 48_000,
        *,
        owner: str = "",
        max_buffer_s: float = DEFAULT_MAX_BUFFER_S,
    ) -> None:
        super().__init__()
        self.playout = PacedPlayout(rate, owner=owner, max_buffer_s=max_buffer_s)
        self.rate = rate
        self.frame_samples = self.playout.frame_samples
        self._time_base = Fraction(1, rate)
        self._opus: OpusPacketizer | None = None
        self._dtx = False

    def send_opus_packets(self, *, dtx: bool = True) -> None:
        """Encode here rather than in aiortc; only when Opus was negotiated."""
        if self.rate != OPUS_RATE:
            raise ValueError(
                f"Opus packets need a {OPUS_RATE} Hz track, this one is {self.rate} Hz"
            )
        self._opus = OpusPacketizer(self.frame_samples)
        self._dtx = dtx

    # --- the AudioOut a session writes to

    @property
    def queued_samples(self) -> int:
        return self.playout.queued_samples

    @property
    def played_samples(self) -> int:
        return self.playout.played_samples

    @property
    def playing(self) -> bool:
        return self.playout.playing

    async def write(
        self, pcm: bytes, on_start: Callable[[], None] | None = None, *, session_id: str = ""
    ) -> int:
        return await self.playout.write(pcm, on_start, session_id=session_id)

    def pause(self) -> bool:
        return self.playout.pause()

    def resume(self) -> None:
        self.playout.resume()

    def clear(self) -> int:
        return self.playout.clear()

    async def wait_drained(self) -> None:
        await self.playout.wait_drained()

    def output_level_db(self) -> float:
        return self.playout.output_level_db()

    # --- what aiortc pulls

    async def recv(self) -> av.AudioFrame | av.Packet:
        playout = self.playout
        if self.readyState != "live":
            raise MediaStreamError
        if self._dtx and self._opus is not None and self._opus.settled and playout.idle:
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(DTX_INTERVAL_S):
                    await playout.queued.wait()
            if self.readyState != "live":
                raise MediaStreamError
            playout.clock.skip_idle()
        pcm, pts = await playout.next_frame()
        if self._opus is not None:
            return self._opus.packet(pcm, pts)
        return self._frame(pcm or bytes(playout.frame_bytes), pts)

    def _frame(self, pcm: bytes, pts: int) -> av.AudioFrame:
        frame = av.AudioFrame(format="s16", layout="mono", samples=self.frame_samples)
        frame.planes[0].update(pcm)
        frame.pts = pts
        frame.sample_rate = self.rate
        frame.time_base = self._time_base
        return frame

    def stop(self) -> None:
        super().stop()
        self.playout.stop()
