"""How long each later piece of a reply may be, so that it is ready before the audio
ahead of it has played.

The LLM writes a piece's words and TTS synthesizes them, taking turns at the CPU,
while the pieces before it play. A limit set as a multiple of the piece before
forgot two things, and left holes of 0.4-0.7 s on two cores: a reply's first piece
is decoded twice (app/engines/kokoro_stream.py), so little of its audio is left
once it is made; and a number the LLM writes in digits is said in many more
characters than it takes to write ("127,000"). So the limit is the audio still
ahead when a piece is made, over what a character said costs to write and to
synthesize, measured on every session's pieces (they share the engines, so load
shows in it).
"""

from __future__ import annotations

from app.agent.chunker import CHARS_PER_WORD, LOOKAHEAD_WORDS

# Of the audio ahead, the part the next piece may take to make: the rest is margin for
# a piece that costs more than the average.
PACE_HEADROOM = 0.8
# The weight of one new measurement: a piece made while other sessions held the
# engines moves the pace, but does not swing it.
SMOOTHING = 0.2


class Rate:
    """Seconds per unit of work, smoothed over what was measured last."""

    def __init__(self) -> None:
        self._seconds = 0.0
        self._units = 0.0

    def add(self, seconds: float, units: float) -> None:
        if units <= 0:
            return
        if not self._units:
            self._seconds, self._units = seconds, units
            return
        self._seconds += SMOOTHING * (seconds - self._seconds)
        self._units += SMOOTHING * (units - self._units)

    @property
    def per_unit(self) -> float | None:
        return self._seconds / self._units if self._units else None


class Pace:
    """How fast the LLM writes and TTS says a character, over every session."""

    def __init__(self) -> None:
        self.writing = Rate()  # the LLM, per character written, once a reply has begun
        self.saying = Rate()  # TTS, per character said, for a reply's later pieces

    def limit_chars(self, ahead_s: float) -> float | None:
        """How many characters the next piece may say to be ready within the `ahead_s`
        seconds of audio still to play; None until both rates are known."""
        writing, saying = self.writing.per_unit, self.saying.per_unit
        if writing is None or saying is None:
            return None
        # The chunker reads a few words past a piece's limit before it cuts there.
        budget_s = PACE_HEADROOM * ahead_s - writing * LOOKAHEAD_WORDS * CHARS_PER_WORD
        return max(0.0, budget_s) / max(writing + saying, 1e-6)

    def late(self, chars: int, ahead_s: float) -> bool:
        """Whether a piece of `chars` characters, made at the pace pieces are being
        made, would leave a hole after the `ahead_s` seconds still to play."""
        saying = self.saying.per_unit
        return saying is not None and saying * chars > ahead_s


class Playout:
    """When a reply's audio so far will have played: each part plays after the one
    before, or as soon as it is made if that one has played already (a hole)."""

    def __init__(self) -> None:
        self._end: float | None = None

    def add(self, duration_s: float, now: float) -> None:
        self._end = max(self._end if self._end is not None else now, now) + duration_s

    def ahead(self, now: float) -> float:
        return 0.0 if self._end is None else max(0.0, self._end - now)
