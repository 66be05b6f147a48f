"""A Live session's audio, reflected to its sidebands as Live does: the caller's as
`session.input_audio.append` (before any mute) and the agent's as
`session.output_audio.delta` with its place on the timeline, both mono PCM16 at 24 kHz,
in pieces of about 100 ms. Made while a sideband watches; an AudioTap (session/taps.py)."""

from __future__ import annotations

import base64
from collections.abc import Callable

import numpy as np

from app.audio.resample import Resampler
from app.events.channel import Event
from app.vocab.pcm import INBOUND_RATE

RATE = 24_000
PIECE_BYTES = INBOUND_RATE // 10 * 2  # 100 ms of the caller's 16 kHz audio


class Reflection:
    def __init__(self, send: Callable[[Event], None], now_ms: Callable[[], int]) -> None:
        """`send`: an event to the sidebands; `now_ms`: where the session's timeline is."""
        self._send = send
        self._now_ms = now_ms
        self._heard = bytearray()
        self._caller = Resampler(RATE)
        self._agent: dict[int, Resampler] = {}
        self._played_to = 0  # where the agent's last reflected piece ends (ms)

    def heard(self, pcm16k: bytes) -> None:
        self._heard += pcm16k
        if len(self._heard) < PIECE_BYTES:
            return
        samples = np.frombuffer(bytes(self._heard), dtype=np.int16)
        self._heard.clear()
        pcm = self._caller.pcm(samples, INBOUND_RATE)
        self._send({"type": "session.input_audio.append", "audio": _b64(pcm)})

    def played(self, pcm: bytes, rate: int) -> None:
        resampler = self._agent.setdefault(rate, Resampler(RATE))
        out = resampler.pcm(np.frombuffer(pcm, dtype=np.int16), rate)
        if not out:
            return
        # Ranges never overlap: a piece told as starting early (a track pulls a little
        # ahead) starts where the last one ended.
        at = max(self._now_ms(), self._played_to)
        end = self._played_to = at + -(-len(out) * 1000 // (2 * RATE))
        self._send({"type": "session.output_audio.delta", "delta": _b64(out), "start_ms": at,
                    "end_ms": end})  # fmt: skip

    def cut(self) -> None:
        pass  # what was reflected was what started playing


def _b64(pcm: bytes) -> str:
    return base64.b64encode(pcm).decode()
