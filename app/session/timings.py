"""Per-turn stage stamps, sent with `response.done` and logged."""

from __future__ import annotations

import time

# Stage order: each is measured from the end of the user's speech (VAD end).
STAGES = ("stt_done", "llm_first_token", "first_clause", "tts_first_audio", "first_frame_sent")


class TurnTimings:
    def __init__(self, vad_end: float | None = None) -> None:
        self.vad_end = time.perf_counter() if vad_end is None else vad_end
        self._marks: dict[str, float] = {}

    def mark(self, stage: str) -> None:
        """Record the first time a stage is reached; later calls are ignored."""
        self._marks.setdefault(stage, time.perf_counter())

    def has(self, stage: str) -> bool:
        return stage in self._marks

    def as_ms(self) -> dict[str, float]:
        """Milliseconds from VAD end to each stage reached, in stage order."""
        return {
            stage: round((self._marks[stage] - self.vad_end) * 1000, 1)
            for stage in STAGES
            if stage in self._marks
        }
