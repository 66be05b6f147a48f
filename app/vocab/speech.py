"""What speech becomes and comes from: transcripts (with a score per word, when asked
for), synthesized speech, and the turn model's question."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

import numpy as np


@dataclass(frozen=True, slots=True)
class WordScore:
    word: str
    logprob: float


@dataclass(frozen=True, slots=True)
class Transcript:
    text: str
    words: tuple[WordScore, ...] | None = None  # with logprobs asked for: how sure, per word


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
