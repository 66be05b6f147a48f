"""Per-turn stage stamps, sent with `response.done` and logged."""

from __future__ import annotations

import time

# Stage order: each is measured from the end of the user's speech where that is known
# (a spoken turn), else from the turn's end (a reply the client asked for). `turn_end` is
# when the turn was taken as over: the silence after the speech, and for speech over a
# reply the time to judge it a turn.
STAGES = (
    "turn_end",
    "stt_done",
    "llm_first_token",
    "first_clause",
    "tts_first_audio",
    "first_frame_sent",
)


class TurnTimings:
    """Stamps for one reply. A speculative reply starts before the turn has
    ended; `end_of_turn()` then fixes the turn's end, and stages already reached by
    then count from the end of the speech all the same."""

    def __init__(self, *, ended: bool = True) -> None:
        self.created = time.perf_counter()  # the reply's work began (in a pause, if speculative)
        self.vad_end: float | None = self.created if ended else None
        self.speech_end: float | None = None  # the user's last sound, where a turn had one
        self._marks: dict[str, float] = {}

    def end_of_turn(self) -> None:
        self.vad_end = time.perf_counter()

    def spoke_until(self, at: float) -> None:
        """The user stopped speaking at `at` (on time.perf_counter's clock)."""
        self.speech_end = at

    @property
    def silence_ms(self) -> int | None:
        """The user's silence before the turn was taken as over (None: not a spoken turn)."""
        if self.speech_end is None or self.vad_end is None:
            return None
        return round((self.vad_end - self.speech_end) * 1000)

    def mark(self, stage: str) -> None:
        """Record the first time a stage is reached; later calls are ignored."""
        self._marks.setdefault(stage, time.perf_counter())

    def voice_to_voice_ms(self) -> float | None:
        """From the end of the user's speech to the reply's first frame sent: the
        server's part of voice to voice (None where either end is unknown)."""
        if self.speech_end is None:
            return None
        return self.as_ms().get("first_frame_sent")

    def as_ms(self) -> dict[str, float]:
        """Milliseconds from the end of the user's speech (else the turn's end) to each
        stage reached, in stage order."""
        marks = dict(self._marks)
        if self.vad_end is not None and self.speech_end is not None:
            marks["turn_end"] = self.vad_end
        origin = self.speech_end or self.vad_end or time.perf_counter()
        return {
            stage: round(max(0.0, marks[stage] - origin) * 1000, 1)
            for stage in STAGES
            if stage in marks
        }

    def stamps(self) -> dict[str, float]:
        """Wall-clock moments (Unix seconds) of the turn and the stages reached, for
        traces: `speech_end` (where the turn was spoken), `created` (the reply's work
        began), `turn_end`, each stage, and `now`."""
        now = time.perf_counter()
        to_wall = time.time() - now
        moments = {"created": self.created, **self._marks, "now": now}
        if self.vad_end is not None:
            moments["turn_end"] = self.vad_end
        if self.speech_end is not None:
            moments["speech_end"] = self.speech_end
        return {name: at + to_wall for name, at in moments.items()}
