"""Base64 audio in the formats an OpenAI client may choose for its socket: pcm16 (at
24 kHz, or 16 kHz for Live), G.711 μ-law and A-law at 8 kHz. In as the 16 kHz PCM
every transport hands the session, out from the 24 kHz PCM the session speaks."""

from __future__ import annotations

import base64
import binascii
from collections.abc import Iterator
from typing import Literal

import numpy as np

from app.audio import g711
from app.audio.resample import Resampler
from app.vocab.pcm import BYTES_PER_S, INBOUND_RATE

FormatName = Literal["audio/pcm", "audio/pcmu", "audio/pcma"]
LAWS: dict[str, g711.Law] = {"audio/pcmu": "ulaw", "audio/pcma": "alaw"}
SPOKEN_RATE = 24_000  # what the session's reply audio is, and pcm16's usual rate
STEP_BYTES = BYTES_PER_S  # an append reaches the turn detector a second at a time


class BadAudio(ValueError):
    """Audio a client sent that cannot be taken; nothing of it was."""


class AudioIn:
    """A client's appends in one format, to 16 kHz PCM; one per stream (stateful)."""

    def __init__(self, name: FormatName = "audio/pcm", rate: int = SPOKEN_RATE) -> None:
        self.name = name
        self._law = LAWS.get(name)
        self.rate = g711.RATE if self._law is not None else rate
        self._bytes_per_s = self.rate * (1 if self._law is not None else 2)
        self._resampler = Resampler(INBOUND_RATE)

    def seconds(self, audio: str) -> float:
        """How long an append's base64 audio is, sized from its text before decoding it
        (base64 is 4 characters for 3 bytes)."""
        return len(audio) * 3 / 4 / self._bytes_per_s

    def pcm16k(self, audio: str) -> bytes:
        return self._resampler.pcm(np.frombuffer(self.raw(audio), dtype=np.int16), self.rate)

    def append(self, audio: str, max_s: float) -> Iterator[bytes]:
        """An append's audio as 16 kHz PCM, a second at a time (a minute of it is a few
        thousand VAD frames, which in one go would hold up every other call); at most
        `max_s` of it, all refused (BadAudio) or none, sized before it is decoded."""
        seconds = self.seconds(audio)
        if seconds > max_s + 0.1:
            raise BadAudio(
                f"an append of {seconds:.1f} s of audio; at most {max_s:g} s in one "
                "(limits.append_audio_s): send it in smaller appends"
            )
        pcm = self.pcm16k(audio)
        for offset in range(0, len(pcm), STEP_BYTES):
            yield pcm[offset : offset + STEP_BYTES]

    def raw(self, audio: str) -> bytes:
        """An append's audio as s16 PCM at its own rate (BadAudio if it is not audio)."""
        try:
            data = base64.b64decode(audio, validate=True)
        except (binascii.Error, ValueError) as exc:
            raise BadAudio(f"audio is not valid base64: {exc}") from exc
        if self._law is not None:
            return g711.decode(data, self._law)
        if len(data) % 2:
            raise BadAudio("audio has an odd number of bytes: expected pcm16 (2 bytes a sample)")
        return data


class AudioOut:
    """The session's 24 kHz PCM, in a client's output format; one per stream (stateful)."""

    def __init__(self, name: FormatName = "audio/pcm", rate: int = SPOKEN_RATE) -> None:
        self.name = name
        self._law = LAWS.get(name)
        self.rate = g711.RATE if self._law is not None else rate
        self._resampler = Resampler(self.rate) if self.rate != SPOKEN_RATE else None

    def encode(self, pcm24k: bytes) -> bytes:
        if self._resampler is not None:
            samples = np.frombuffer(pcm24k, dtype=np.int16)
            pcm24k = self._resampler.pcm(samples, SPOKEN_RATE)
        return g711.encode(pcm24k, self._law) if self._law is not None else pcm24k
