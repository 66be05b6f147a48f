"""bench.listen lays pieces on the timeline they would play on; its gap figure must be
the silence a listener hears, or its verdict on a chunking choice means nothing."""

from __future__ import annotations

import asyncio
from typing import Any

import numpy as np

from app.engines.tts import KOKORO_RATE
from app.vocab.speech import Speech
from bench.listen import pieces_of, play_out


class SlowTTS:
    """Each piece takes `seconds_to_make` to synthesize and lasts 0.1 s per word."""

    voices = ["any"]

    def __init__(self, seconds_to_make: list[float]) -> None:
        self._seconds = list(seconds_to_make)

    def close(self) -> None:
        pass

    async def synthesize(self, text: str, **_: Any) -> Speech:
        await asyncio.sleep(self._seconds.pop(0))
        samples = np.full(int(0.1 * KOKORO_RATE) * len(text.split()), 0.5, dtype=np.float32)
        return Speech(samples, KOKORO_RATE)


async def test_a_piece_not_ready_when_the_one_before_ends_leaves_a_gap() -> None:
    # 2 words (0.2 s of audio) ready at 0.05 s; the next needs 0.5 s more: ready at
    # 0.55 s, when playout reached 0.25 s, so the listener hears 0.3 s of nothing.
    timeline, first_ms, gap_ms = await play_out(SlowTTS([0.05, 0.5]), ["one two", "three"])
    assert first_ms >= 50 and gap_ms >= 300  # more on a busy machine, never less
    silent = np.flatnonzero(timeline == 0)
    assert abs(len(silent) - gap_ms / 1000 * KOKORO_RATE) <= 2, "the gap is in the WAV"
    assert len(timeline) - len(silent) == int(0.1 * KOKORO_RATE) * 3


async def test_a_piece_ready_in_time_plays_right_after() -> None:
    # 2 s of audio buys the next piece 2 s: far more than its 10 ms, however busy.
    words = " ".join(["word"] * 20)
    timeline, _, gap_ms = await play_out(SlowTTS([0.01, 0.01]), [words, "five"])
    assert gap_ms == 0 and not np.any(timeline == 0)


def test_pieces_are_cut_as_the_server_cuts_a_streamed_reply() -> None:
    text = "The capital of France is Paris, a city known for its art and food."
    assert pieces_of(text, 4) == [
        "The capital of France is Paris,",
        "a city known for its art and food.",
    ]
    assert " ".join(pieces_of(text, 2)) == text
