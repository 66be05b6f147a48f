"""The caller's audio on its way in: the agent's echo cancelled where the server plays
the reply, and noise suppressed for the turn detector's ears only.

Whisper hears the echo-cancelled audio without suppression: measured on pink, brown and
babble noise, it transcribes the raw audio better than any suppressor's output. The turn
detector judges the suppressed audio, where noise looks less like speech.

A part that cannot load or fails is logged once and left out: the call goes on without
it, as it would with the part turned off.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

import numpy as np

from app.audio.echo import FRAME, RATE, EchoCanceller, EchoReference
from app.audio.level import SILENT_DB
from app.config.audio import NoiseReduction

log = logging.getLogger(__name__)

# WebRTC NS's levels (0-3: 6, 12, 18, 21 dB of suppression).
SUPPRESSION_LEVELS = {"near_field": 1, "far_field": 2}
FRAME_BYTES = FRAME * 2
_unavailable: set[str] = set()  # parts that failed to load, said once per process


class FrontEnd:
    def __init__(
        self, session_id: str, reference: EchoReference | None = None, *, cancel_echo: bool
    ) -> None:
        """`reference`: what the server plays to this caller (None: the client plays it,
        and no echo can be cancelled here)."""
        self._session_id = session_id
        self._canceller: EchoCanceller | None = None
        if cancel_echo and reference is not None:
            self._canceller = self._load("echo cancellation", lambda: self._cancel(reference))
        self._suppressor: Any = None
        self._noise_reduction: NoiseReduction = "off"
        self._pending = b""

    @property
    def cancelling(self) -> bool:
        return self._canceller is not None and not self._canceller.failed

    def output_level(self, level: Callable[[], float]) -> Callable[[], float]:
        """How loud the agent's voice is coming back, for the echo guard: `level` (what
        went out) until the canceller has converged on an echo it heard; after that the
        echo is cancelled, and the guard, which would also hold back a caller quieter
        than the agent, rests."""

        def coming_back() -> float:
            canceller = self._canceller
            return SILENT_DB if canceller is not None and canceller.converged else level()

        return coming_back

    @property
    def suppressing(self) -> bool:
        return self._suppressor is not None

    def suppress(self, noise_reduction: NoiseReduction) -> None:
        """Suppress noise from now on, for the turn detector's ears ("off": not)."""
        if noise_reduction != self._noise_reduction:
            self._noise_reduction = noise_reduction
            level = SUPPRESSION_LEVELS.get(noise_reduction)
            self._suppressor = None
            if level is not None:
                self._suppressor = self._load("noise suppression", lambda: _suppressor(level))

    def process(self, pcm16k: bytes) -> tuple[bytes, bytes]:
        """(what Whisper hears, what the turn detector judges), in whole 10 ms frames;
        the rest of `pcm16k` waits for the next call."""
        if self._canceller is None and self._suppressor is None:
            return pcm16k, pcm16k
        data = self._pending + pcm16k
        usable = len(data) - len(data) % FRAME_BYTES
        self._pending = data[usable:]
        heard = judged = data[:usable]
        if self._canceller is not None:
            heard, judged = self._canceller.process(heard)
        if self._suppressor is not None and judged:
            judged = self._suppress(judged)
        return heard, judged

    def _suppress(self, pcm: bytes) -> bytes:
        samples = np.frombuffer(pcm, dtype=np.int16)
        try:
            out = [
                self._suppressor.process(samples[i : i + FRAME])
                for i in range(0, len(samples), FRAME)
            ]
        except Exception:
            log.exception(
                "noise suppression failed; this call goes on without it",
                extra={"session_id": self._session_id},
            )
            self._suppressor = None
            return pcm
        return np.concatenate(out).astype(np.int16).tobytes()

    def _cancel(self, reference: EchoReference) -> EchoCanceller:
        return EchoCanceller(reference, session_id=self._session_id)

    def _load(self, part: str, make: Any) -> Any:
        if part in _unavailable:
            return None
        try:
            return make()
        except Exception as exc:
            _unavailable.add(part)
            log.warning("%s is unavailable, calls go on without it: %s", part, exc)
            return None


def _suppressor(level: int) -> Any:
    from pywebrtc_audio import NoiseSuppressor

    return NoiseSuppressor(sample_rate=RATE, level=level)
