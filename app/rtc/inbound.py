"""Read the peer's microphone track into 16 kHz mono PCM."""

from __future__ import annotations

import time
from collections.abc import Callable

from aiortc.mediastreams import MediaStreamError, MediaStreamTrack
from av import AudioFrame

from app.audio.resample import Resampler
from app.vocab.pcm import INBOUND_RATE


class InboundAudio:
    """Pulls frames from an aiortc track, resamples once per session, hands PCM on.

    Processing is inline and cheap (resample + VAD are microseconds per frame), so
    nothing queues here; aiortc's receiver passes each packet on as it comes
    (rtc/patches.py).
    """

    def __init__(self, track: MediaStreamTrack, on_pcm: Callable[[bytes], None]) -> None:
        self._track = track
        self._on_pcm = on_pcm
        self._resampler = Resampler(INBOUND_RATE)
        self.last_frame_at: float | None = None

    async def run(self) -> None:
        """Until the track ends."""
        while True:
            try:
                frame = await self._track.recv()
            except MediaStreamError:
                return
            if not isinstance(frame, AudioFrame):
                continue
            self.last_frame_at = time.monotonic()
            self._on_pcm(self._resampler.frame(frame))
