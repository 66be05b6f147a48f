"""Who has the floor: the user's turns, as the session's options say they end.

Turns end after a silence (server_vad, with a reply begun speculatively in it) or,
with semantic_vad, as soon as the turn model hears a finished turn (with the
eagerness's silence as a ceiling). The
user speaking over a reply long enough interrupts it (barge-in). Reports what
happens through the callbacks it is given; pure bookkeeping besides the turn
model's questions, which run off the loop.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass

from app.audio.level import SILENT_DB
from app.audio.vad import (
    TurnDetector,
    UtteranceEnded,
    UtterancePaused,
    UtteranceResumed,
    UtteranceStarted,
)
from app.config import Settings, VadSettings
from app.session.listening.bargein import BargeIn
from app.session.listening.semantic import TurnJudge
from app.session.options import SessionOptions
from app.vocab.speech import TurnModel, VoiceModel

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class TurnCallbacks:
    started: Callable[[UtteranceStarted], None]
    paused: Callable[[bytes], None]  # the utterance so far: a reply may start on it
    resumed: Callable[[], None]
    ended: Callable[[UtteranceEnded], None]
    # The user talked over the agent long enough; how long they had spoken, in ms.
    interrupted: Callable[[int], None]
    # The user has been quiet QUIET_MS within an utterance: a moment to judge it early.
    quiet: Callable[[], None] = lambda: None


# Long enough to be past webrtcvad's hangover and a breath, short enough to judge a
# backchannel while the listener waits; a turn still needs the full silence window.
QUIET_MS = 160


class TurnTaking:
    def __init__(
        self,
        session_id: str,
        settings: Settings,
        callbacks: TurnCallbacks,
        turn_model: TurnModel | None,
        voice_model: VoiceModel | None = None,
        *,
        output_level: Callable[[], float] | None,
    ) -> None:
        """`voice_model`: Silero, for vad.detector silero (None: webrtcvad)."""
        self._session_id = session_id
        self._settings = settings
        self._on = callbacks
        self._turn_model = turn_model
        self._voice_model = voice_model
        self._output_level = output_level
        self._vad = settings.vad
        self._detector = self._new_detector(settings.vad)
        self._barge_in = BargeIn(settings.vad)
        self._judge: TurnJudge | None = None
        self._speculate = True
        self._quiet_told = False  # quiet() was called for this silence
        # A start not yet told: speech that began over the agent's voice is announced
        # only once the echo guard has heard enough of the user in it, so clients that
        # stop playback on speech_started are not stopped by the agent's own echo.
        self._unannounced: UtteranceStarted | None = None

    @property
    def position_ms(self) -> int:
        return self._detector.position_ms

    @property
    def speaking(self) -> bool:
        return self._detector.speaking

    @property
    def voiced(self) -> bool:
        """Inside an utterance, and the user's voice heard at its last frame."""
        return self._detector.speaking and self._detector.quiet_ms == 0

    @property
    def spoken_ms(self) -> int:
        """How long the user has spoken in the utterance so far (0 outside one)."""
        return self._detector.spoken_ms

    def so_far(self) -> bytes:
        """The utterance until now (b"" outside one)."""
        return self._detector.so_far()

    @property
    def echo_only(self) -> bool:
        """The utterance began over the agent's voice and never passed the echo guard;
        its start was never told."""
        return self._barge_in.echo_only

    def configure(self, options: SessionOptions) -> None:
        """Start over with these options' turn detection."""
        vad = options.vad or self._settings.vad
        self._vad = vad
        self._barge_in = BargeIn(vad)
        self.reset()
        if options.semantic and self._turn_model is not None:
            turn = self._settings.turn
            self._detector = self._new_detector(
                vad, pause_ms=turn.first_check_ms, recheck_ms=turn.recheck_ms
            )
            self._judge = self._judge or TurnJudge(
                self._session_id,
                self._turn_model,
                threshold=turn.threshold,
                on_finished=self._finished,
            )
            # The model's "finished" ends the turn, and the reply starts there; a reply
            # begun blindly at every pause is thrown away at each one it calls unfinished.
            self._speculate = False
        else:
            self._detector = self._new_detector(vad)
            self._judge = None
            self._speculate = True  # the detector pauses only when speculation is on

    def _new_detector(
        self, vad: VadSettings, *, pause_ms: int | None = None, recheck_ms: int = 0
    ) -> TurnDetector:
        """With a fresh voice detector: its state is this stream's alone."""
        voice = None
        if vad.detector == "silero" and self._voice_model is not None:
            voice = self._voice_model.detector()
        return TurnDetector(vad, voice=voice, pause_ms=pause_ms, recheck_ms=recheck_ms)

    def push(self, pcm16k: bytes, judged: bytes | None = None, *, interruptible: bool) -> None:
        """The user's audio; `judged`: the same with noise suppressed, for deciding what is
        speech; `interruptible`: a reply is playing that speech may cut."""
        for event in self._detector.push(pcm16k, judged):
            if isinstance(event, UtteranceStarted):
                self._unannounced = event  # told once the echo guard has weighed it
            elif isinstance(event, UtterancePaused):
                if self._speculate:
                    self._on.paused(event.audio)
                if self._judge is not None:
                    self._judge.paused(event.audio)
            elif isinstance(event, UtteranceResumed):
                if self._judge is not None:
                    self._judge.resumed()
                self._on.resumed()
            elif isinstance(event, UtteranceEnded):
                self._ended(event)
        quiet_ms = self._detector.quiet_ms
        if quiet_ms >= QUIET_MS and not self._quiet_told:
            self._quiet_told = True
            self._on.quiet()
        elif quiet_ms == 0:
            self._quiet_told = False
        barged_in = self._barge_in_heard(pcm16k)
        if self._unannounced is not None and not self._barge_in.echo_only:
            started, self._unannounced = self._unannounced, None
            self._on.started(started)
        if barged_in and interruptible and self._vad.interrupt_response:
            self._on.interrupted(self._detector.speech_ms)

    def end_now(self) -> bool:
        """End the user's turn now (a commit, or the turn model); False outside one."""
        ended = self._detector.force_end()
        if ended is None:
            return False
        self._ended(ended)
        return True

    def _finished(self) -> None:
        """The turn model heard a finished turn: end it now, not after the silence."""
        if self.end_now():
            log.debug("turn ended by the turn model", extra={"session_id": self._session_id})

    def reset(self) -> None:
        """Forget the utterance in progress."""
        self._detector.reset()
        self._unannounced = None
        if self._judge is not None:
            self._judge.resumed()

    async def close(self) -> None:
        if self._judge is not None:
            await self._judge.close()

    def _ended(self, event: UtteranceEnded) -> None:
        self._unannounced = None
        if self._judge is not None:
            self._judge.resumed()
        self._on.ended(event)

    def _barge_in_heard(self, pcm16k: bytes) -> bool:
        # By level, not by whether a reply is queued: echo lags the audio sent. Only
        # the echo guard weighs it, so the per-frame path skips it otherwise.
        level = SILENT_DB
        if self._vad.echo_guard and self._output_level is not None:
            level = self._output_level()
        agent_db = level if level > SILENT_DB else None
        return self._barge_in.update(pcm16k, self._detector, agent_db)
