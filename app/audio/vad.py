"""Turn detection on 16 kHz mono s16 PCM, over a voice detector (Silero, from
app/engines/silero_vad.py, or webrtcvad, here).

Pure and synchronous: feed it bytes, get turn events back. One detector per session.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass

import webrtcvad

from app.audio.level import SILENT_DB, pcm_db
from app.config import VadSettings
from app.vocab.speech import VoiceDetector

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


class WebrtcVoice:
    """webrtcvad: light and in-process, but noise at 0-5 dB SNR fools it (vad.detector)."""

    def __init__(self, aggressiveness: int) -> None:
        self._aggressiveness = aggressiveness
        self._vad = webrtcvad.Vad(aggressiveness)

    def is_speech(self, frame: bytes) -> bool:
        return self._vad.is_speech(frame, SAMPLE_RATE)

    def hangover_frames(self, frame_ms: int) -> int:
        return MIN_HANGOVER_FRAMES[self._aggressiveness][frame_ms]

    def reset(self) -> None:
        self._vad = webrtcvad.Vad(self._aggressiveness)  # no reset of its own


class Foreground:
    """Is a voiced frame the caller's, or a room of other talkers behind them? Babble is
    speech to any voice detector; what sets the caller apart is being nearer the
    microphone, louder. Within an utterance, voiced frames more than `background_db`
    below its loudest (smoothed) count as silence, so a turn ends when the caller stops
    even while others talk on.

    A room 10 dB under the caller peaks within 8 dB of the caller's loudest, above that
    line, so a second one is drawn where the room is known: an utterance whose loudest
    rose RISE_DB above its opening OPENING_MS began on the room (babble starts a turn
    before the caller does), and after that only speech ABOVE_ROOM_DB over the opening's
    loudest is the caller's. It never asks more of the caller than NEAREST_DB under
    their loudest, so a caller who began softly and speaks on a little quieter still
    counts (bench/noise.py: with babble 10 dB under ten questions, every turn ended
    with the caller; on the same questions begun 8-12 dB softer, or going on 6 dB
    quieter, none ended early). A turn that pauses before its rise began on the caller
    (PAUSE_MS below)."""

    SMOOTHING = 0.3  # a click or a plosive barely moves the loudest
    OPENING_MS = 300
    RISE_DB = 6.0
    ABOVE_ROOM_DB = 4.0
    NEAREST_DB = 4.0
    # A quiet pause: a room of talkers does not fall silent, so an utterance that goes
    # PAUSE_MS unvoiced and QUIET_DB under its opening before its rise did not begin on
    # one. Taken for the room, a caller's soft "Um," set the line 4 dB under their
    # loudest, and their question was cut in two there (Piper's voice: "How many players
    # does a soccer?" + "have on the field."). Where the voice detector only flickers
    # in a noise the turn began on, the sound stays near the opening: no pause.
    PAUSE_MS = 100
    QUIET_DB = 10.0

    def __init__(self, background_db: float, frame_ms: int = 20) -> None:
        self._background_db = background_db
        self._opening_frames = self.OPENING_MS // frame_ms
        self._pause_frames = max(1, self.PAUSE_MS // frame_ms)
        self.reset()

    def reset(self) -> None:
        self._smoothed: float | None = None
        self._loudest = self._opening = SILENT_DB
        self._voiced_frames = self._unvoiced_run = 0
        self._paused = False

    def voiced(self, frame: bytes, voiced: bool) -> bool:
        if not self._background_db:
            return voiced
        if not voiced:
            # Only until the pause or the room is known: each settles it for the turn.
            if not self._paused and not self._began_on_room:
                quiet = pcm_db(frame) < self._opening - self.QUIET_DB
                self._unvoiced_run = self._unvoiced_run + 1 if quiet else 0
                self._paused = self._unvoiced_run >= self._pause_frames
            return False
        self._unvoiced_run = 0
        db = pcm_db(frame)
        smoothed = db if self._smoothed is None else self._smoothed
        self._smoothed = smoothed + self.SMOOTHING * (db - smoothed)
        self._loudest = max(self._loudest, self._smoothed)
        self._voiced_frames += 1
        if self._voiced_frames <= self._opening_frames:
            self._opening = max(self._opening, self._smoothed)
        return db >= self._threshold()

    @property
    def _began_on_room(self) -> bool:
        """The caller's voice rose over the talkers this utterance began on."""
        return (
            not self._paused
            and self._voiced_frames > self._opening_frames
            and self._loudest >= self._opening + self.RISE_DB
        )

    def _threshold(self) -> float:
        line = self._loudest - self._background_db
        if self._began_on_room:
            above_room = min(self._opening + self.ABOVE_ROOM_DB, self._loudest - self.NEAREST_DB)
            line = max(line, above_room)
        return line


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
    `voice` says which frames are speech (None: webrtcvad at vad.aggressiveness).
    """

    def __init__(
        self,
        settings: VadSettings,
        *,
        voice: VoiceDetector | None = None,
        pause_ms: int | None = None,
        recheck_ms: int = 0,
    ) -> None:
        self._voice = voice or WebrtcVoice(settings.aggressiveness)
        self._foreground = Foreground(settings.background_db, settings.frame_ms)
        self._frame_ms = settings.frame_ms
        self._frame_bytes = SAMPLE_RATE * settings.frame_ms // 1000 * BYTES_PER_SAMPLE
        self._start_frames = settings.start_ms // settings.frame_ms
        self._hangover = self._voice.hangover_frames(settings.frame_ms)
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
        self._pending_judged = b""
        self._frames_seen = 0
        self._voiced_run = 0
        self._silence_run = self._raw_run = 0
        self._gated_run = False
        self._utterance: list[bytes] | None = None
        self._start_ms = 0
        self._last_voiced_ms = 0  # where the current utterance's last voiced frame ended

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
    def spoken_ms(self) -> int:
        """How long the user has spoken in the current utterance: from its start to its
        last voiced frame, the pauses between words in it (0 outside one). Silero hears
        those pauses as silence, webrtcvad mostly bridges them; either way "wait, stop"
        has been spoken as long as it took to say."""
        return self._last_voiced_ms - self._start_ms if self._utterance is not None else 0

    @property
    def speech_ms(self) -> int:
        """How long the current utterance has gone on, from its first voiced frame (0
        outside one)."""
        return self.position_ms - self._start_ms if self._utterance is not None else 0

    @property
    def quiet_ms(self) -> int:
        """How long the utterance has been quiet since its speech stopped (the voice
        detector's hangover counted in); 0 while speech goes on, or outside an utterance."""
        return self._silence_ms() if self._utterance is not None else 0

    def so_far(self) -> bytes:
        """The utterance until now, trailing silence cut to the tail kept (b"" outside one)."""
        return self._trimmed()[0] if self._utterance is not None else b""

    def force_end(self) -> UtteranceEnded | None:
        """End the current utterance now (the client committed it); None outside one."""
        if self._utterance is None:
            return None
        return self._end(forced=True)

    def reset(self) -> None:
        self._voice.reset()
        self._ring.clear()
        self._pending = self._pending_judged = b""
        self._voiced_run = self._silence_run = self._raw_run = 0
        self._utterance = None
        self._paused = False

    def push(self, pcm: bytes, judged: bytes | None = None) -> list[TurnEvent]:
        """`judged`: `pcm` as the voice detector should hear it (noise suppressed), the
        same length; the utterances keep `pcm`."""
        data = self._pending + pcm
        heard = data if judged is None else self._pending_judged + judged
        usable = len(data) - len(data) % self._frame_bytes
        self._pending = data[usable:]
        self._pending_judged = heard[usable:]
        events: list[TurnEvent] = []
        for offset in range(0, usable, self._frame_bytes):
            end = offset + self._frame_bytes
            event = self._frame(data[offset:end], heard[offset:end])
            if event is not None:
                events.append(event)
        return events

    def _frame(self, frame: bytes, judged: bytes) -> TurnEvent | None:
        self._frames_seen += 1
        voiced = self._voice.is_speech(judged)
        if self._utterance is None:
            self._ring.append(frame)
            self._voiced_run = self._voiced_run + 1 if voiced else 0
            if self._voiced_run < self._start_frames:
                return None
            self._utterance = list(self._ring)
            self._ring.clear()
            self._foreground.reset()
            self._silence_run = self._raw_run = 0
            self._last_voiced_ms = self.position_ms
            self._start_ms = self.position_ms - self._start_frames * self._frame_ms
            return UtteranceStarted(audio_start_ms=self._start_ms)

        self._utterance.append(frame)
        heard_speech = voiced
        voiced = self._foreground.voiced(judged, voiced)
        if voiced:
            self._raw_run = 0
        else:
            if not self._raw_run:
                # Speech the foreground gate set aside: the voice detector is not late
                # here, so its hangover is not added to this silence; its first frames
                # are the hangover instead.
                self._gated_run = heard_speech
            self._raw_run += 1
        hangover = self._hangover if self._gated_run else 0
        self._silence_run = max(0, self._raw_run - hangover)
        if voiced:
            self._last_voiced_ms = self.position_ms
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
        self._voiced_run = self._silence_run = self._raw_run = 0
        return UtteranceEnded(
            audio=audio,
            audio_start_ms=self._start_ms,
            audio_end_ms=end_ms,
            forced=forced,
            silence_ms=silence_ms,
        )
