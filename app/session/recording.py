"""A call's recording: the caller (left) as heard, the agent (right) as played, on one
timeline at 16 kHz, the caller's audio being its clock. Kept in memory while the call
lasts, bounded by its length; made only for a session that asked for one."""

from __future__ import annotations

import io
import wave

import numpy as np

from app.audio.resample import Resampler
from app.vocab.pcm import INBOUND_RATE

SAMPLE_BYTES = 2


class Recording:
    """An AudioTap (session/taps.py)."""

    def __init__(self, max_s: float) -> None:
        self._max_bytes = int(max_s * INBOUND_RATE) * SAMPLE_BYTES
        self._caller = bytearray()
        self._agent = bytearray()
        self._resamplers: dict[int, Resampler] = {}

    @property
    def seconds(self) -> float:
        return len(self._caller) / SAMPLE_BYTES / INBOUND_RATE

    def heard(self, pcm16k: bytes) -> None:
        room = self._max_bytes - len(self._caller)
        if room > 0:
            self._caller += pcm16k[:room]

    def played(self, pcm: bytes, rate: int) -> None:
        """Agent audio that starts playing now: placed where the caller's audio is."""
        resampler = self._resamplers.setdefault(rate, Resampler(INBOUND_RATE))
        pcm16k = resampler.pcm(np.frombuffer(pcm, dtype=np.int16), rate)
        at = max(len(self._caller), len(self._agent))
        room = self._max_bytes - at
        if room <= 0:
            return
        self._agent += bytes(at - len(self._agent))
        self._agent += pcm16k[:room]

    def cut(self) -> None:
        """What was queued and not played (an interruption) was not heard."""
        del self._agent[len(self._caller) :]

    def wav(self) -> bytes:
        """Both sides as a stereo WAV, as long as the longer."""
        frames = max(len(self._caller), len(self._agent)) // SAMPLE_BYTES
        stereo = np.zeros((frames, 2), dtype=np.int16)
        caller = np.frombuffer(bytes(self._caller), dtype=np.int16)
        agent = np.frombuffer(bytes(self._agent), dtype=np.int16)
        stereo[: len(caller), 0] = caller
        stereo[: len(agent), 1] = agent
        out = io.BytesIO()
        with wave.open(out, "wb") as wav:
            wav.setnchannels(2)
            wav.setsampwidth(SAMPLE_BYTES)
            wav.setframerate(INBOUND_RATE)
            wav.writeframes(stereo.tobytes())
        return out.getvalue()
