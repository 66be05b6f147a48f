"""A call's recording: the caller (left) as heard, the agent (right) as played, on one
timeline at 16 kHz, the caller's audio being its clock. Made only for a session that
asked for one, and bounded by its length.

Written out as the call goes: what lies before the caller's clock is settled (the agent's
audio is only ever placed at or after it), so it goes to the sink as stereo frames a few
seconds at a time; only what is not settled yet, the agent's audio ahead of the caller,
waits in memory."""

from __future__ import annotations

from typing import Protocol

import numpy as np

from app.audio.resample import Resampler
from app.vocab.pcm import BYTES_PER_S, INBOUND_RATE

SAMPLE_BYTES = 2
CHANNELS = 2
# How much of each side waits before it is written: a few writes a second per call at
# most, even when a client sends its audio far faster than it is spoken.
FLUSH_BYTES = 2 * BYTES_PER_S


class FrameSink(Protocol):
    def write(self, frames: bytes) -> None:
        """Stereo s16 frames at 16 kHz, in order; must not block (it runs on the loop)."""
        ...

    async def caught_up(self) -> None:
        """Returns once little of what was written waits to be stored."""
        ...


class Recording:
    """An AudioTap (session/taps.py)."""

    def __init__(self, max_s: float, sink: FrameSink) -> None:
        self._max_bytes = int(max_s * INBOUND_RATE) * SAMPLE_BYTES
        self._sink = sink
        self._written = 0  # bytes of each side already given to the sink
        # Each side from `_written` on: the caller's up to its clock, the agent's as far
        # as it was placed.
        self._caller = bytearray()
        self._agent = bytearray()
        self._resamplers: dict[int, Resampler] = {}
        self._finished = False

    def heard(self, pcm16k: bytes) -> None:
        room = self._max_bytes - self._written - len(self._caller)
        if room > 0 and not self._finished:
            self._caller += pcm16k[:room]
            if len(self._caller) >= FLUSH_BYTES:
                self._flush(len(self._caller))

    def played(self, pcm: bytes, rate: int) -> None:
        """Agent audio that starts playing now: placed where the caller's audio is."""
        resampler = self._resamplers.setdefault(rate, Resampler(INBOUND_RATE))
        pcm16k = resampler.pcm(np.frombuffer(pcm, dtype=np.int16), rate)
        at = max(len(self._caller), len(self._agent))
        room = self._max_bytes - self._written - at
        if room <= 0 or self._finished:
            return
        self._agent += bytes(at - len(self._agent))
        self._agent += pcm16k[:room]

    async def caught_up(self) -> None:
        """Returns once the sink has stored nearly all it was given: a client sending audio
        faster than it is spoken waits here, between the steps of its append, rather than
        the recording piling up in memory (or being dropped for it)."""
        await self._sink.caught_up()

    def cut(self) -> None:
        """What was queued and not played (an interruption) was not heard."""
        del self._agent[len(self._caller) :]

    def finish(self) -> None:
        """The call ended: the rest to the sink, as long as the longer side."""
        if not self._finished:
            self._flush(max(len(self._caller), len(self._agent)))
            self._finished = True

    def _flush(self, size: int) -> None:
        """The first `size` bytes of each side (silence where one has none) as frames."""
        frames = np.zeros((size // SAMPLE_BYTES, CHANNELS), dtype=np.int16)
        caller = np.frombuffer(self._caller[:size], dtype=np.int16)
        agent = np.frombuffer(self._agent[:size], dtype=np.int16)
        frames[: len(caller), 0] = caller
        frames[: len(agent), 1] = agent
        del self._caller[:size], self._agent[:size]
        self._written += size
        if len(frames):
            self._sink.write(frames.tobytes())
