"""Turn detection on 16 kHz mono s16 PCM with webrtcvad.

Pure and synchronous: feed it bytes, get turn events back. One detector per session.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass

import webrtcvad

from app.config import VadSettings

SAMPLE_RATE = 16_000
BYTES_PER_SAMPLE = 2
# Trailing silence kept on an utterance: enough for Whisper to hear the last word fade.
TAIL_KEEP_MS = 200
# webrtcvad goes on calling frames speech for a while after speech stops (its
# hangover: kOverHangMax1* in WebRTC's vad_core.c), at least this many frames by
# aggressiveness and frame length. Its first unvoiced frame is always that far
# into the silence, so silence is counted from there: a 500 ms window is 500 ms
# of silence, not 500 ms after the hangover (measured on espeak speech: 100-125 ms).
MIN_HANGOVER_FRAMES = {
    0: {10: 8, 20: 4, 30: 3},
    1: {10: 8, 20: 4, 30: 3},
    2: {10: 6, 20: 3, 30: 2},
    3: {10: 6, 20: 3, 30: 2},
}


@dataclass(frozen=True, slots=True)
class UtteranceStarted:
    audio_start_ms: int


@dataclass(frozen=True, slots=True)
class UtteranceEnded:
    audio: bytes  # 16 kHz mono s16, prefix padding included
    audio_start_ms: int
    audio_end_ms: int
    forced: bool = False  # cut at max_utterance_s rather than by silence
    silence_ms: int = 0  # unvoiced audio after the speech when the turn was ended


@dataclass(frozen=True, slots=True)
class UtterancePaused:
    """Silence has lasted the detector's pause point (or another recheck): the turn
    may be ending.

    Work on the reply can start now; it is kept only if UtteranceEnded follows
    (UtteranceResumed means the user went on talking).
    """

    audio: bytes
    audio_start_ms: int
    audio_end_ms: int


@dataclass(frozen=True, slots=True)
class UtteranceResumed:
    pass


TurnEvent = UtteranceStarted | UtterancePaused | UtteranceResumed | UtteranceEnded


class TurnDetector:
    """Speech starts after `start_ms` voiced, ends after `silence_ms` of silence.

    UtterancePaused comes after `pause_ms` of silence (by default vad.speculative_ms,
    if below the silence window), then again every `recheck_ms` (0: once) while
    the silence goes on: the moments to prepare a reply or to ask a turn model.
    """

    def __init__(
        self, settings: VadSettings, *, pause_ms: int | None = None, recheck_ms: int = 0
    ) -> None:
        self._vad = webrtcvad.Vad(settings.aggressiveness)
        self._frame_ms = settings.frame_ms
        self._frame_bytes = SAMPLE_RATE * settings.frame_ms // 1000 * BYTES_PER_SAMPLE
        self._start_frames = settings.start_ms // settings.frame_ms
        self._hangover = MIN_HANGOVER_FRAMES[settings.aggressiveness][settings.frame_ms]
        self._silence_frames = self._unvoiced_frames(settings.silence_ms)
        self._tail_frames = min(self._silence_frames, self._unvoiced_frames(TAIL_KEEP_MS))
        self._max_frames = int(settings.max_utterance_s * 1000) // settings.frame_ms
        if pause_ms is None:
            speculate = 0 < settings.speculative_ms < settings.silence_ms
            pause_ms = settings.speculative_ms if speculate else 0
        self._pause_frames = self._unvoiced_frames(pause_ms) if pause_ms else 0
        self._recheck_frames = recheck_ms // settings.frame_ms
        self._paused = False
        prefix_frames = settings.prefix_padding_ms // settings.frame_ms
        # Holds the prefix padding plus the voiced run that may become a start.
        self._ring: deque[bytes] = deque(maxlen=prefix_frames + self._start_frames)
        self._pending = b""
        self._frames_seen = 0
        self._voiced_run = 0
        self._silence_run = 0
        self._utterance: list[bytes] | None = None
        self._start_ms = 0
        self._voiced_frames = 0  # in the current utterance, its start run included

    def _unvoiced_frames(self, silence_ms: int) -> int:
        """Unvoiced frames that make `silence_ms` of silence, the hangover before them
        counted in."""
        return max(1, silence_ms // self._frame_ms - self._hangover)

    @property
    def position_ms(self) -> int:
        """Audio consumed so far, in stream milliseconds."""
        return self._frames_seen * self._frame_ms

    @property
    def speaking(self) -> bool:
        """Inside an utterance: between UtteranceStarted and UtteranceEnded."""
        return self._utterance is not None

    @property
    def voiced_ms(self) -> int:
        """Voiced audio in the current utterance so far (0 outside one)."""
        return self._voiced_frames * self._frame_ms if self._utterance is not None else 0

    @property
    def speech_ms(self) -> int:
        """How long the current utterance has gone on, from its first voiced frame (0
        outside one)."""
        return self.position_ms - self._start_ms if self._utterance is not None else 0

    def force_end(self) -> UtteranceEnded | None:
        """End the current utterance now (the client committed it); None outside one."""
        if self._utterance is None:
            return None
        return self._end(forced=True)

    def reset(self) -> None:
        self._ring.clear()
        self._pending = b""
        self._voiced_run = self._silence_run = 0
        self._utterance = None
        self._paused = False

    def push(self, pcm: bytes) -> list[TurnEvent]:
        data = self._pending + pcm
        usable = len(data) - len(data) % self._frame_bytes
        self._pending = data[usable:]
        events: list[TurnEvent] = []
        for offset in range(0, usable, self._frame_bytes):
            event = self._frame(data[offset : offset + self._frame_bytes])
            if event is not None:
                events.append(event)
        return events

    def _frame(self, frame: bytes) -> TurnEvent | None:
        self._frames_seen += 1
        voiced = self._vad.is_speech(frame, SAMPLE_RATE)
        if self._utterance is None:
            self._ring.append(frame)
            self._voiced_run = self._voiced_run + 1 if voiced else 0
            if self._voiced_run < self._start_frames:
                return None
            self._utterance = list(self._ring)
            self._ring.clear()
            self._silence_run = 0
            self._voiced_frames = self._voiced_run
            self._start_ms = self.position_ms - self._start_frames * self._frame_ms
            return UtteranceStarted(audio_start_ms=self._start_ms)

        self._utterance.append(frame)
        self._silence_run = 0 if voiced else self._silence_run + 1
        self._voiced_frames += voiced
        if self._silence_run >= self._silence_frames:
            return self._end(forced=False)
        if len(self._utterance) >= self._max_frames:
            return self._end(forced=True)
        if voiced and self._paused:
            self._paused = False
            return UtteranceResumed()
        if self._pause_frames and self._pausing():
            self._paused = True
            audio, end_ms = self._trimmed()
            return UtterancePaused(audio=audio, audio_start_ms=self._start_ms, audio_end_ms=end_ms)
        return None

    def _pausing(self) -> bool:
        beyond = self._silence_run - self._pause_frames
        if beyond == 0:
            return True
        return beyond > 0 and self._recheck_frames > 0 and beyond % self._recheck_frames == 0

    def _trimmed(self) -> tuple[bytes, int]:
        """The utterance so far, trailing silence cut to the tail we keep, and its end."""
        assert self._utterance is not None
        frames = self._utterance
        trailing = self._silence_run
        if trailing > self._tail_frames:
            frames = frames[: len(frames) - (trailing - self._tail_frames)]
        return b"".join(frames), self.position_ms - self._silence_ms()

    def _silence_ms(self) -> int:
        """The silence since the speech stopped: the unvoiced run and the hangover."""
        return (self._silence_run + self._hangover) * self._frame_ms if self._silence_run else 0

    def _end(self, *, forced: bool) -> UtteranceEnded:
        audio, end_ms = self._trimmed()
        silence_ms = self._silence_ms()
        self._utterance = None
        self._paused = False
        self._voiced_run = self._silence_run = 0
        return UtteranceEnded(
            audio=audio,
            audio_start_ms=self._start_ms,
            audio_end_ms=end_ms,
            forced=forced,
            silence_ms=silence_ms,
        )
