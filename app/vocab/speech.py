"""What speech becomes and comes from: transcripts (with a score per word, when asked
for), synthesized speech, the turn model's question, and the voice detector's."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, Protocol

import numpy as np

# A brief transcription, sooner and less surely heard than a turn's: whether an utterance
# is a backchannel ("mm-hm"), or the words of one still going on.
BriefLook = Literal["backchannel", "words"]


@dataclass(frozen=True, slots=True)
class WordScore:
    word: str
    logprob: float


@dataclass(frozen=True, slots=True)
class Transcript:
    text: str
    words: tuple[WordScore, ...] | None = None  # with logprobs asked for: how sure, per word
    language: str = ""  # what was heard (a Whisper code); empty: not known


@dataclass(frozen=True, slots=True)
class Speech:
    samples: np.ndarray  # mono float32, -1..1
    rate: int

    @property
    def duration_s(self) -> float:
        return len(self.samples) / self.rate


class TurnModel(Protocol):
    async def complete(self, pcm16k: bytes) -> float:
        """The probability that the utterance (16 kHz mono s16) is a finished turn."""
        ...

    def close(self) -> None: ...


class VoiceDetector(Protocol):
    """Is this frame speech? Stateful: one per audio stream (a call's turn detector)."""

    def is_speech(self, frame: bytes) -> bool:
        """One frame of 16 kHz mono s16 (10, 20 or 30 ms), in stream order."""
        ...

    def hangover_frames(self, frame_ms: int) -> int:
        """How many frames of that length into a silence its first "unvoiced" comes
        (rather too few than too many): the turn detector counts them into the silence."""
        ...

    def reset(self) -> None:
        """Start over, as on a new stream."""
        ...


class VoiceModel(Protocol):
    """A voice activity model loaded once per process; each stream gets its own detector."""

    name: str

    def detector(self) -> VoiceDetector: ...
