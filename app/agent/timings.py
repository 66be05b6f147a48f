"""Per-turn stage stamps, sent with `response.done` and logged."""

from __future__ import annotations

import time

# Stage order: each is measured from the end of the user's speech (VAD end).
STAGES = ("stt_done", "llm_first_token", "first_clause", "tts_first_audio", "first_frame_sent")


class TurnTimings:
    """Stamps for one reply. A speculative reply starts before the turn has
    ended; `end_of_turn()` then fixes the origin, and stages already reached
    by that moment count as 0 ms."""

    def __init__(self, *, ended: bool = True) -> None:
        self.created = time.perf_counter()  # the reply's work began (in a pause, if speculative)
        self.vad_end: float | None = self.created if ended else None
        self._marks: dict[str, float] = {}
        # The user's silence before the turn was judged over, where a turn ended by it.
        self.silence_ms: int | None = None

    def end_of_turn(self) -> None:
        self.vad_end = time.perf_counter()

    def mark(self, stage: str) -> None:
        """Record the first time a stage is reached; later calls are ignored."""
        self._marks.setdefault(stage, time.perf_counter())

    def voice_to_voice_ms(self) -> float | None:
        """From the end of the user's speech to the reply's first frame sent: the
        server's part of voice to voice (None where either end is unknown)."""
        sent = self.as_ms().get("first_frame_sent")
        if self.silence_ms is None or sent is None:
            return None
        return self.silence_ms + sent

    def as_ms(self) -> dict[str, float]:
        """Milliseconds from VAD end to each stage reached, in stage order."""
        origin = self.vad_end if self.vad_end is not None else time.perf_counter()
        return {
            stage: round(max(0.0, self._marks[stage] - origin) * 1000, 1)
            for stage in STAGES
            if stage in self._marks
        }

    def stamps(self) -> dict[str, float]:
        """Wall-clock moments (Unix seconds) of the turn and the stages reached, for
        traces: `speech_end` (where a silence ended the turn), `created` (the reply's
        work began), `turn_end`, each stage, and `now`."""
        now = time.perf_counter()
        to_wall = time.time() - now
        moments = {"created": self.created, **self._marks, "now": now}
        if self.vad_end is not None:
            moments["turn_end"] = self.vad_end
            if self.silence_ms is not None:
                moments["speech_end"] = self.vad_end - self.silence_ms / 1000
        return {name: at + to_wall for name, at in moments.items()}
