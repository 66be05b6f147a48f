"""When the user's speech during a reply should interrupt it (barge-in)."""

from __future__ import annotations

from app.audio.level import SILENT_DB, pcm_db
from app.audio.vad import BYTES_PER_SAMPLE, SAMPLE_RATE, TurnDetector
from app.config import VadSettings

BYTES_PER_MS = SAMPLE_RATE * BYTES_PER_SAMPLE // 1000


class BargeIn:
    """Fed after the turn detector on every inbound chunk; says when to interrupt.

    Plain mode: the user has spoken `interrupt_min_speech_ms` in the current
    utterance. With `echo_guard`, only speech at least `echo_margin_db`
    relative to the agent's own output level counts, so a client without echo
    cancellation does not interrupt the agent with its own voice; an utterance
    that started while the agent spoke and never passed is `echo_only`. A word's
    end is quieter than its middle: once a run of speech has passed the guard for
    RUN_PASSED_MS, the rest of that run counts too (measured in bench/echo.py:
    "Wait," over the reply's first seconds passed for 200 ms and fell under the line
    for its last 80, 40 ms short of the window, so the reply stopped only at "stop",
    620 ms in). An echo's loudest syllable may pass for a frame or two; not for that.
    """

    RUN_PASSED_MS = 60

    def __init__(self, settings: VadSettings) -> None:
        self._min_ms = max(settings.interrupt_min_speech_ms, settings.start_ms)
        self._guard = settings.echo_guard
        self._margin_db = settings.echo_margin_db
        self._counted_ms = 0
        self._spoken_ms = 0
        self._run_passed_ms = 0  # how long the run of speech going on passed the guard
        self._began_over_agent = False
        self.confirmed = False  # this utterance is the user, not noise or echo

    def update(self, pcm: bytes, detector: TurnDetector, agent_db: float | None) -> bool:
        """`agent_db`: the level of what the agent sent lately, None if it was silent.

        Returns True when the user has spoken long enough to interrupt.
        """
        if not detector.speaking:
            self._counted_ms = self._spoken_ms = 0
            self._run_passed_ms = 0
            self._began_over_agent = self.confirmed = False
            return False
        new_spoken_ms = detector.spoken_ms - self._spoken_ms
        if self._spoken_ms == 0:
            self._began_over_agent = agent_db is not None
        self._spoken_ms = detector.spoken_ms
        if new_spoken_ms <= 0:
            self._run_passed_ms = 0  # a pause: the next run is weighed afresh
        elif self._counts(pcm, agent_db):
            self._counted_ms += new_spoken_ms
            self._run_passed_ms += len(pcm) // BYTES_PER_MS  # heard passing, not the jump
        elif self._run_passed_ms >= self.RUN_PASSED_MS:
            self._counted_ms += new_spoken_ms
        if self._counted_ms >= self._min_ms:
            self.confirmed = True
        return self.confirmed

    def _counts(self, pcm: bytes, agent_db: float | None) -> bool:
        """New speech in `pcm` is the user's, not the agent's echo."""
        if not self._guard or agent_db is None or agent_db <= SILENT_DB:
            return True
        return pcm_db(pcm) >= agent_db + self._margin_db

    @property
    def echo_only(self) -> bool:
        """The utterance so far began over the agent's voice and never passed the guard."""
        return self._guard and self._began_over_agent and not self.confirmed
